//! What the broadcasting binary kernels (ADD, MUL, DIV, MAXIMUM, MINIMUM) share in prepare:
//! node arity, dtype agreement, the broadcast of the input shapes against the output shape, the
//! fused activation, and the quantized activation range (TFLM's `kernel_util` role).

use crate::interpreter::optimized::broadcast::{repeated_row_part, row_under_rows};
use crate::interpreter::reference::broadcast::{BroadcastShapes, MAX_BROADCAST_DIMS};
use crate::interpreter::reference::quant::{
    activation_range_f32, activation_range_quantized, quantize_multiplier, FusedActivation,
    ProductQuantParams,
};
use crate::interpreter::{InvokeContext, KernelError, PrepareContext, TensorInfo};
use crate::kernel_ensure;
use crate::model::{Activation, BuiltinOptions};
use crate::tensor::{DType, Element};

/// The two inputs and the output of a binary node, checked to share `dtype` (when given) and
/// to broadcast onto the output's shape.
pub struct BinaryNode<'a> {
    /// Input 1.
    pub input1: TensorInfo<'a>,
    /// Input 2.
    pub input2: TensorInfo<'a>,
    /// Output.
    pub output: TensorInfo<'a>,
    /// How the inputs map onto the output.
    pub shapes: BroadcastShapes,
}

/// Checks a binary node: 2 inputs, 1 output, equal dtypes, broadcast-compatible shapes whose
/// broadcast is the output shape.
pub fn prepare_binary<'a>(ctx: &PrepareContext<'a>) -> Result<BinaryNode<'a>, KernelError> {
    ctx.expect_io(2, 1)?;
    let input1 = ctx.input(0)?;
    let input2 = ctx.input(1)?;
    let output = ctx.output(0)?;
    kernel_ensure!(
        input1.dtype == input2.dtype && input1.dtype == output.dtype,
        "inputs `{}` ({}) and `{}` ({}) and output `{}` ({}) must have one dtype",
        input1.name,
        input1.dtype,
        input2.name,
        input2.dtype,
        output.name,
        output.dtype
    );
    let shapes = broadcast_shapes(&input1, &input2, &output)?;
    Ok(BinaryNode {
        input1,
        input2,
        output,
        shapes,
    })
}

/// How inputs `a` and `b` broadcast onto `out`: an error when their shapes are not
/// broadcast-compatible or their broadcast is not `out`'s shape.
pub fn broadcast_shapes(
    a: &TensorInfo<'_>,
    b: &TensorInfo<'_>,
    out: &TensorInfo<'_>,
) -> Result<BroadcastShapes, KernelError> {
    let shapes = BroadcastShapes::new(a.dims, b.dims).map_err(|e| {
        KernelError::new(format!(
            "inputs `{}` {:?} and `{}` {:?}: {e}",
            a.name, a.dims, b.name, b.dims
        ))
    })?;
    let rank = a.dims.len().max(b.dims.len());
    kernel_ensure!(
        StoredShapes::fits(&shapes),
        "inputs `{}` {:?} and `{}` {:?}: extents beyond 32 bits",
        a.name,
        a.dims,
        b.name,
        b.dims
    );
    kernel_ensure!(
        out.dims == shapes.output_dims(rank),
        "output `{}` has shape {:?}, the broadcast of {:?} and {:?} is {:?}",
        out.name,
        out.dims,
        a.dims,
        b.dims,
        shapes.output_dims(rank)
    );
    Ok(shapes)
}

/// The fused activations elementwise kernels support (NONE, RELU, RELU_N1_TO_1, RELU6).
pub fn fused_activation(a: Activation) -> Result<FusedActivation, KernelError> {
    Ok(match a {
        Activation::None => FusedActivation::None,
        Activation::Relu => FusedActivation::Relu,
        Activation::ReluN1To1 => FusedActivation::ReluN1To1,
        Activation::Relu6 => FusedActivation::Relu6,
        other => {
            return Err(KernelError::new(format!(
                "fused activation {other:?} is not supported (NONE, RELU, RELU_N1_TO_1, RELU6)"
            )))
        }
    })
}

/// The fused activation of a binary node: from its options when `own` recognizes them as the
/// op's table, none when the node has no options; another table is an error naming `want`.
pub fn node_activation(
    ctx: &PrepareContext<'_>,
    own: fn(&BuiltinOptions) -> bool,
    want: &str,
) -> Result<FusedActivation, KernelError> {
    match ctx.options() {
        BuiltinOptions::None => Ok(FusedActivation::None),
        o if own(o) => fused_activation(o.activation().unwrap_or(Activation::None)),
        other => Err(KernelError::new(format!(
            "expected {want}, found {other:?}"
        ))),
    }
}

/// [`prepare_binary`], then the node's fused activation ([`node_activation`]).
pub fn prepare_binary_activation<'a>(
    ctx: &PrepareContext<'a>,
    own: fn(&BuiltinOptions) -> bool,
    want: &str,
) -> Result<(BinaryNode<'a>, FusedActivation), KernelError> {
    let node = prepare_binary(ctx)?;
    Ok((node, node_activation(ctx, own, want)?))
}

/// `CalculateActivationRange` for int32 outputs.
pub fn activation_range_i32(act: FusedActivation) -> (i32, i32) {
    match act {
        FusedActivation::None => (i32::MIN, i32::MAX),
        FusedActivation::Relu => (0, i32::MAX),
        FusedActivation::ReluN1To1 => (-1, 1),
        FusedActivation::Relu6 => (0, 6),
    }
}

/// Storage range of a quantized dtype (the activation-clamped range is
/// `quant_params::quantized_range`).
pub fn dtype_range(dtype: DType) -> Option<(i32, i32)> {
    match dtype {
        DType::I8 => Some((i8::MIN.into(), i8::MAX.into())),
        DType::U8 => Some((0, u8::MAX.into())),
        DType::I16 => Some((i16::MIN.into(), i16::MAX.into())),
        DType::I32 => Some((i32::MIN, i32::MAX)),
        _ => None,
    }
}

/// Per-tensor scale and zero point, the zero point checked to lie in the dtype's range.
pub fn quant_params(t: &TensorInfo<'_>) -> Result<(f32, i32), KernelError> {
    let (scale, zp) = t.per_tensor_quant()?;
    if let Some((lo, hi)) = dtype_range(t.dtype) {
        kernel_ensure!(
            (lo..=hi).contains(&zp),
            "tensor `{}` zero point {zp} is outside the {} range [{lo}, {hi}]",
            t.name,
            t.dtype
        );
    }
    Ok((scale, zp))
}

/// The quantized activation range of `output` (scale/zero point given) for its dtype.
pub fn output_activation_range(
    output: &TensorInfo<'_>,
    act: FusedActivation,
    scale: f32,
    zero_point: i32,
) -> Result<(i32, i32), KernelError> {
    let (qmin, qmax) = dtype_range(output.dtype).ok_or_else(|| {
        KernelError::new(format!(
            "output `{}` dtype {} is not a quantized type",
            output.name, output.dtype
        ))
    })?;
    let (lo, hi) = activation_range_quantized(act, scale, zero_point, qmin, qmax);
    kernel_ensure!(
        lo <= hi,
        "output `{}`: empty activation range [{lo}, {hi}] for {act:?}",
        output.name
    );
    Ok((lo, hi))
}

/// Fails if any of `inputs` carries quantization parameters (int32 arithmetic kernels).
pub fn expect_not_quantized(inputs: &[&TensorInfo<'_>]) -> Result<(), KernelError> {
    for t in inputs {
        kernel_ensure!(
            t.quantization.is_none(),
            "int32 input `{}` must not be quantized",
            t.name
        );
    }
    Ok(())
}

/// The arithmetic of a MUL or DIV node, chosen at prepare: float32 or int32 with the activation
/// clamp, or a quantized dtype with its [`ProductQuantParams`].
#[derive(Clone, Copy, Debug)]
pub enum ProductMath {
    /// float32.
    F32 {
        /// Activation clamp, low end.
        lo: f32,
        /// Activation clamp, high end.
        hi: f32,
    },
    /// int32.
    I32 {
        /// Activation clamp, low end.
        lo: i32,
        /// Activation clamp, high end.
        hi: i32,
    },
    /// int8.
    I8(ProductQuantParams),
    /// int16 (MUL only).
    I16(ProductQuantParams),
}

impl ProductMath {
    /// float32 with the clamp of activation `act`.
    pub fn f32(act: FusedActivation) -> Self {
        let (lo, hi) = activation_range_f32(act);
        ProductMath::F32 { lo, hi }
    }

    /// int32 with the clamp of activation `act`.
    pub fn i32(act: FusedActivation) -> Self {
        let (lo, hi) = activation_range_i32(act);
        ProductMath::I32 { lo, hi }
    }
}

/// The [`ProductQuantParams`] of a quantized MUL or DIV node: the inputs' zero points as
/// offsets, the output multiplier of `real(s1, s2, s_out)` (the node's scales) and the clamp of
/// `act` in output units.
pub fn product_quant_params(
    node: &BinaryNode<'_>,
    act: FusedActivation,
    real: impl FnOnce(f32, f32, f32) -> f64,
) -> Result<ProductQuantParams, KernelError> {
    let (s1, z1) = quant_params(&node.input1)?;
    let (s2, z2) = quant_params(&node.input2)?;
    let (so, zo) = quant_params(&node.output)?;
    let (activation_min, activation_max) = output_activation_range(&node.output, act, so, zo)?;
    Ok(ProductQuantParams {
        input1_offset: -z1,
        input2_offset: -z2,
        output_offset: zo,
        output_multiplier: quantize_multiplier(real(s1, s2, so)),
        activation_min,
        activation_max,
    })
}

/// A [`BroadcastShapes`] as op data keeps it: extents and strides as `u32`, half the bytes in
/// the arena's tail ([`broadcast_shapes`] refuses shapes whose values do not fit).
#[derive(Clone, Copy, Debug)]
pub struct StoredShapes {
    /// Extents, then input 1's strides, then input 2's.
    values: [u32; 3 * MAX_BROADCAST_DIMS],
    requires_broadcast: bool,
}

impl StoredShapes {
    /// Whether every extent and stride of `s` fits in 32 bits.
    pub fn fits(s: &BroadcastShapes) -> bool {
        [s.extents, s.strides1, s.strides2]
            .iter()
            .flatten()
            .all(|&v| u32::try_from(v).is_ok())
    }

    /// `s` stored (values that do not fit, which [`broadcast_shapes`] refuses, saturate).
    pub fn new(s: &BroadcastShapes) -> Self {
        let mut values = [0u32; 3 * MAX_BROADCAST_DIMS];
        for (v, &x) in values
            .iter_mut()
            .zip(s.extents.iter().chain(&s.strides1).chain(&s.strides2))
        {
            *v = u32::try_from(x).unwrap_or(u32::MAX);
        }
        StoredShapes {
            values,
            requires_broadcast: s.requires_broadcast,
        }
    }

    /// The shapes back.
    #[inline]
    pub fn get(&self) -> BroadcastShapes {
        let part = |k: usize| {
            let mut out = [0usize; MAX_BROADCAST_DIMS];
            for (o, &v) in out
                .iter_mut()
                .zip(&self.values[k * MAX_BROADCAST_DIMS..(k + 1) * MAX_BROADCAST_DIMS])
            {
                *o = v as usize;
            }
            out
        };
        BroadcastShapes {
            extents: part(0),
            strides1: part(1),
            strides2: part(2),
            requires_broadcast: self.requires_broadcast,
        }
    }
}

/// Op data of a broadcasting binary kernel: the broadcast, the input element counts prepare saw
/// and `math`, the kernel's choice of arithmetic.
#[derive(Clone, Copy, Debug)]
pub struct BinaryData<M> {
    /// How the inputs map onto the output ([`BinaryData::shapes`]).
    pub stored: StoredShapes,
    /// Elements of input 1.
    pub n1: usize,
    /// Elements of input 2.
    pub n2: usize,
    /// The arithmetic invoke runs.
    pub math: M,
}

impl<M> BinaryData<M> {
    /// The op data of `node` running `math`.
    pub fn new(node: &BinaryNode<'_>, math: M) -> Self {
        BinaryData {
            stored: StoredShapes::new(&node.shapes),
            n1: node.input1.num_elements(),
            n2: node.input2.num_elements(),
            math,
        }
    }

    /// Runs `math(shapes, input1, input2, output)` over the node's tensors at invoke as `T`.
    #[inline]
    pub fn run<T: Element>(
        &self,
        ctx: &InvokeContext<'_>,
        math: impl FnOnce(&BroadcastShapes, &[T], &[T], &mut [T]),
    ) -> Result<(), KernelError> {
        let shapes = self.shapes();
        let (a, b, o) = binary_io(ctx, &shapes, self.n1, self.n2)?;
        math(&shapes, a, b, o);
        Ok(())
    }

    /// [`run`](Self::run) split over the kernel threads: for outputs of at least
    /// [`SPLIT_ELEMENTS`] per task, when each part is again a broadcast of the same kind (inputs
    /// of one shape, or one row repeated under a contiguous operand). `math` must compute each
    /// output element from its two operands alone (the element-wise ops do), so any split gives
    /// the bits of one call.
    pub fn run_split<T: Element + Send + Sync>(
        &self,
        ctx: &mut InvokeContext<'_>,
        math: impl Fn(&BroadcastShapes, &[T], &[T], &mut [T]) + Sync,
    ) -> Result<(), KernelError> {
        self.run_split_at(ctx, SPLIT_ELEMENTS, math)
    }

    /// [`run_split`](Self::run_split) with tasks of at least `min_task` output elements (an
    /// op whose elements cost less or more than [`SPLIT_ELEMENTS`] assumes).
    pub fn run_split_at<T: Element + Send + Sync>(
        &self,
        ctx: &mut InvokeContext<'_>,
        min_task: usize,
        math: impl Fn(&BroadcastShapes, &[T], &[T], &mut [T]) + Sync,
    ) -> Result<(), KernelError> {
        let shapes = self.shapes();
        let (a, b, o) = binary_io(ctx, &shapes, self.n1, self.n2)?;
        let tasks = (o.len() / min_task.max(1)).clamp(1, ctx.threads());
        if tasks == 1 {
            math(&shapes, a, b, o);
        } else if !shapes.requires_broadcast {
            let chunk = o.len().div_ceil(tasks).next_multiple_of(64);
            ctx.for_each_chunk_mut(o, chunk, &|k, part| {
                let at = k * chunk;
                let n = part.len();
                math(&shapes, &a[at..at + n], &b[at..at + n], part);
            });
        } else if let Some(side) = row_under_rows(&shapes) {
            let inner = shapes.extents[MAX_BROADCAST_DIMS - 1];
            let rows = (o.len() / inner.max(1)).div_ceil(tasks);
            let chunk = rows * inner;
            ctx.for_each_chunk_mut(o, chunk, &|k, part| {
                let at = k * chunk;
                let n = part.len();
                let s = repeated_row_part(side, n / inner, inner);
                match side {
                    2 => math(&s, &a[at..at + n], b, part),
                    _ => math(&s, a, &b[at..at + n], part),
                }
            });
        } else {
            math(&shapes, a, b, o);
        }
        Ok(())
    }

    /// How the inputs map onto the output.
    #[inline]
    pub fn shapes(&self) -> BroadcastShapes {
        self.stored.get()
    }
}

/// Output elements per kernel-thread task of [`BinaryData::run_split`] at least: below it,
/// waking a thread costs more than it saves.
pub const SPLIT_ELEMENTS: usize = 16 * 1024;

/// [`SPLIT_ELEMENTS`] of the int8 ADD of two same-shape tensors (its AVX-512 body adds about
/// 15 elements a nanosecond, so 6 K of them take ~0.4 µs, about what a round costs): the
/// residual ADDs of MobileNetV2's 14 × 14 and 28 × 28 stages split.
pub const INT8_ADD_SPLIT_ELEMENTS: usize = 6 * 1024;

/// Inputs 0 and 1 and output 0 of a binary node at invoke.
pub type BinaryIo<'a, T> = (&'a [T], &'a [T], &'a mut [T]);

/// Inputs 0 and 1 and output 0 of a binary node at invoke, viewed as `T` and checked against
/// the element counts prepare saw (`n1`, `n2`, and the broadcast output).
#[inline]
pub fn binary_io<'a, T: Element>(
    ctx: &InvokeContext<'a>,
    shapes: &BroadcastShapes,
    n1: usize,
    n2: usize,
) -> Result<BinaryIo<'a, T>, KernelError> {
    let a = ctx.input::<T>(0)?;
    let b = ctx.input::<T>(1)?;
    let o = ctx.output::<T>(0)?;
    check_lengths(shapes, n1, n2, a.len(), b.len(), o.len())?;
    Ok((a, b, o))
}

/// Inputs 0 and 1 (as `T`) and output 0 (as `O`) of a binary node at invoke.
pub type BinaryIoAs<'a, T, O> = (&'a [T], &'a [T], &'a mut [O]);

/// [`binary_io`] with an output of another element type (a comparison's bool output as `u8`).
#[inline]
pub fn binary_io_as<'a, T: Element, O: Element>(
    ctx: &InvokeContext<'a>,
    shapes: &BroadcastShapes,
    n1: usize,
    n2: usize,
) -> Result<BinaryIoAs<'a, T, O>, KernelError> {
    let a = ctx.input::<T>(0)?;
    let b = ctx.input::<T>(1)?;
    let o = ctx.output::<O>(0)?;
    check_lengths(shapes, n1, n2, a.len(), b.len(), o.len())?;
    Ok((a, b, o))
}

/// Fails unless the element counts a kernel was prepared for are the ones it is given.
#[inline]
pub fn check_lengths(
    shapes: &BroadcastShapes,
    n1: usize,
    n2: usize,
    a: usize,
    b: usize,
    out: usize,
) -> Result<(), KernelError> {
    if a != n1 || b != n2 || out != shapes.output_len() {
        return Err(KernelError::new(
            "tensor sizes differ from the ones prepared for",
        ));
    }
    Ok(())
}
