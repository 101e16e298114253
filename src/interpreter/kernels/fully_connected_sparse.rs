//! FULLY_CONNECTED whose weights are a constant stored sparse (LiteRT's sparse FULLY_CONNECTED
//! path): float32, and int8 with symmetric weights, over compressed rows of 1xK blocks
//! ([`crate::interpreter::reference::fully_connected_sparse`]).
//!
//! [`with_sparse_weights`] wraps the dense FULLY_CONNECTED registration: a node whose weights
//! carry sparsity parameters runs here, every other node runs the dense kernel untouched. The
//! weights are read in their stored form at every invoke, never densified: LiteRT computes
//! the 1x4 / 1x16 block formats directly too, and the arena keeps no dense copy (for the
//! `pruned_cnn_sparse` model's 256x128 layer that is 128 KiB of persistent memory saved, and
//! the work scales with the stored blocks). Prepare validates the sparsity parameters against
//! the weights' shape and stored values ([`plan_sparse_fc`]), so corrupt metadata is a build
//! error and invoke cannot index out of bounds.

use rust_alloc::sync::Arc;
use rust_alloc::vec::Vec;

use super::fully_connected::{fc_node, FcNode, FULLY_CONNECTED};
use super::quant_params::{filter_scales, float_range, quantized_range};
use crate::interpreter::optimized::fully_connected_sparse::sparse_fully_connected_f32 as optimized_f32;
use crate::interpreter::reference::fully_connected::FcQuant;
use crate::interpreter::reference::fully_connected_sparse::{
    plan_sparse_fc, sparse_fully_connected_f32, sparse_fully_connected_i8, with_block_csr,
};
use crate::interpreter::reference::quant::quantize_multiplier;
use crate::interpreter::{
    InitContext, InvokeContext, Kernel, KernelError, KernelRef, KernelSet, PersistentArray,
    PrepareContext, Registration,
};
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

#[derive(Clone, Copy, Debug)]
enum Math {
    F32 {
        act_min: f32,
        act_max: f32,
    },
    I8 {
        input_offset: i32,
        output_offset: i32,
        act_min: i32,
        act_max: i32,
        multipliers: PersistentArray<i32>,
        shifts: PersistentArray<i8>,
    },
}

#[derive(Clone, Copy, Debug)]
struct SparseFcData {
    batches: usize,
    depth: usize,
    units: usize,
    block: usize,
    has_bias: bool,
    math: Math,
}

/// FULLY_CONNECTED that runs sparse weights itself (float32 with kernel set `set`'s
/// arithmetic: the reference's, or [`crate::interpreter::optimized::fully_connected_sparse`]'s
/// reordered sums) and hands dense ones to `dense`.
pub struct SparseAwareFullyConnected {
    dense: DenseKernel,
    set: KernelSet,
}

/// The dense kernel a [`SparseAwareFullyConnected`] hands dense weights to: its
/// [`Kernel::constant`] when it has one (then the wrapper may be a constant too).
enum DenseKernel {
    Constant(&'static dyn Kernel),
    Shared(Arc<dyn Kernel>),
}

impl DenseKernel {
    #[inline]
    fn kernel(&self) -> &dyn Kernel {
        match self {
            DenseKernel::Constant(k) => *k,
            DenseKernel::Shared(k) => &**k,
        }
    }
}

/// The wrappers of the crate's dense FULLY_CONNECTED constants with their own kernel set (what
/// [`register_fully_connected`] builds), for [`Kernel::constant`].
static SPARSE_AWARE_FULLY_CONNECTED: [SparseAwareFullyConnected; 2] = [
    SparseAwareFullyConnected {
        dense: DenseKernel::Constant(&FULLY_CONNECTED[0]),
        set: KernelSet::Reference,
    },
    SparseAwareFullyConnected {
        dense: DenseKernel::Constant(&FULLY_CONNECTED[1]),
        set: KernelSet::Optimized,
    },
];

impl SparseAwareFullyConnected {
    /// Sparse weights here, dense weights through `dense`.
    pub fn new(dense: impl Into<KernelRef>, set: KernelSet) -> Self {
        let dense = match dense.into() {
            KernelRef::Constant(k) => DenseKernel::Constant(k),
            KernelRef::Shared(k) => match k.constant() {
                Some(k) => DenseKernel::Constant(k),
                None => DenseKernel::Shared(k),
            },
        };
        SparseAwareFullyConnected { dense, set }
    }
}

impl Kernel for SparseAwareFullyConnected {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        let DenseKernel::Constant(dense) = self.dense else {
            return None;
        };
        SPARSE_AWARE_FULLY_CONNECTED
            .iter()
            .find(|w| {
                w.set == self.set
                    && matches!(w.dense, DenseKernel::Constant(d) if core::ptr::addr_eq(d, dense))
            })
            .map(|w| w as &dyn Kernel)
    }

    fn init(&self, ctx: &mut InitContext<'_>) -> Result<(), KernelError> {
        self.dense.kernel().init(ctx)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        if ctx.num_inputs() >= 2 && ctx.input(1)?.sparsity.is_some() {
            prepare_sparse(ctx)
        } else {
            self.dense.kernel().prepare(ctx)
        }
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        match ctx.input_sparsity(1)? {
            Some(sp) => invoke_sparse(ctx, sp, self.set),
            None => self.dense.kernel().invoke(ctx),
        }
    }
}

fn prepare_sparse(ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
    let FcNode {
        act,
        input,
        weights,
        output,
        bias,
        units,
        depth,
        batches,
    } = fc_node(ctx, " with sparse weights")?;
    let Some(sp) = weights.sparsity else {
        kernel_bail!("weights `{}` are not stored sparse", weights.name);
    };
    kernel_ensure!(
        weights.is_constant,
        "sparse weights `{}` must be a constant",
        weights.name
    );
    let (stored, bias_dtype) = match (input.dtype, weights.dtype) {
        (DType::F32, DType::F32) => (weights.const_data::<f32>()?.len(), DType::F32),
        (DType::I8, DType::I8) => (weights.const_data::<i8>()?.len(), DType::I32),
        (i, w) => kernel_bail!(
            "input {i} with sparse weights {w} (`{}`) is not supported (float32/float32, \
             int8/int8)",
            weights.name
        ),
    };
    let plan = plan_sparse_fc(units, depth, sp, stored)
        .map_err(|e| KernelError::new(format!("sparse weights `{}`: {e}", weights.name)))?;
    if let Some(b) = bias {
        b.expect_dtype(bias_dtype)?;
        kernel_ensure!(
            b.num_elements() == units,
            "bias `{}` has {} elements, expected {units}",
            b.name,
            b.num_elements()
        );
    }
    let math = if input.dtype == DType::F32 {
        let (act_min, act_max) = float_range(act);
        Math::F32 { act_min, act_max }
    } else {
        let (input_scale, input_zp) = input.per_tensor_quant()?;
        let (output_scale, output_zp) = output.per_tensor_quant()?;
        kernel_ensure!(
            (-128..=127).contains(&input_zp),
            "input `{}` zero point {input_zp} is outside the int8 range",
            input.name
        );
        let scales = filter_scales(&weights, 0, units)?;
        // Sparse int8 weights must be symmetric, as in LiteRT: a stored block and a missing
        // one then agree that quantized 0 is real 0.
        if let Some(q) = weights.quantization {
            if let Some(z) = q.zero_points().iter().find(|&&z| z != 0) {
                kernel_bail!(
                    "sparse int8 weights `{}` have zero point {z}; only symmetric (0) weights \
                     are supported",
                    weights.name
                );
            }
        }
        let mut mult = Vec::with_capacity(scales.len());
        let mut shift = Vec::with_capacity(scales.len());
        for &s in scales {
            // As the dense kernel: per tensor the scales multiply in float first
            // (`GetQuantizedConvolutionMultipler`), per channel in double.
            let real = if scales.len() == 1 {
                f64::from(input_scale * s) / f64::from(output_scale)
            } else {
                f64::from(input_scale) * f64::from(s) / f64::from(output_scale)
            };
            let m = quantize_multiplier(real);
            mult.push(m.multiplier);
            shift.push(m.shift_i8());
        }
        let (act_min, act_max) = quantized_range(act, &output)?;
        Math::I8 {
            input_offset: -input_zp,
            output_offset: output_zp,
            act_min,
            act_max,
            multipliers: ctx.persistent_array(&mult)?,
            shifts: ctx.persistent_array(&shift)?,
        }
    };
    ctx.set_op_data(SparseFcData {
        batches,
        depth,
        units,
        block: plan.block,
        has_bias: bias.is_some(),
        math,
    })
}

fn invoke_sparse(
    ctx: &mut InvokeContext<'_>,
    sp: &crate::model::Sparsity,
    set: KernelSet,
) -> Result<(), KernelError> {
    let d = *ctx.op_data::<SparseFcData>()?;
    let (b, k, u) = (d.batches, d.depth, d.units);
    let done = match d.math {
        Math::F32 { act_min, act_max } => {
            let bias = ctx.input_if::<f32>(d.has_bias, 2)?;
            let (input, values) = (ctx.input::<f32>(0)?, ctx.input::<f32>(1)?);
            let output = ctx.output::<f32>(0)?;
            match set {
                KernelSet::Optimized => with_block_csr!(sp, d.block, |csr| optimized_f32(
                    b, k, u, csr, values, input, bias, act_min, act_max, output
                )),
                _ => with_block_csr!(sp, d.block, |csr| sparse_fully_connected_f32(
                    b, k, u, csr, values, input, bias, act_min, act_max, output
                )),
            }
        }
        Math::I8 {
            input_offset,
            output_offset,
            act_min,
            act_max,
            multipliers,
            shifts,
        } => {
            let q = FcQuant {
                input_offset,
                weights_offset: 0,
                output_offset,
                multipliers: ctx.persistent(multipliers)?,
                shifts: ctx.persistent(shifts)?,
                double_scales: None,
                act_min,
                act_max,
            };
            let bias = ctx.input_if::<i32>(d.has_bias, 2)?;
            let (input, values) = (ctx.input::<i8>(0)?, ctx.input::<i8>(1)?);
            let output = ctx.output::<i8>(0)?;
            with_block_csr!(sp, d.block, |csr| sparse_fully_connected_i8(
                b, k, u, csr, values, input, bias, &q, output
            ))
        }
    };
    done.ok_or_else(|| KernelError::new("sparse weights lost their compressed rows"))
}

/// The FULLY_CONNECTED kernel of kernel set `set` (TFLM's `Register_FULLY_CONNECTED()`): the
/// dense kernel, reading weights stored sparse too.
pub fn register_fully_connected(set: KernelSet) -> Registration {
    with_sparse_weights(
        super::fully_connected::register_fully_connected_dense(set),
        set,
    )
}

/// `dense` extended to sparse weights: the same name and in-place ability, input 1 (the
/// weights) may be a constant stored sparse, run with kernel set `set`'s arithmetic.
pub fn with_sparse_weights(dense: Registration, set: KernelSet) -> Registration {
    Registration::new(
        dense.name,
        SparseAwareFullyConnected::new(dense.kernel, set),
    )
    .with_inplace(dense.inplace)
    .with_f16_inputs(dense.f16_inputs)
    .with_sparse_inputs(1 << 1)
}

#[cfg(test)]
mod tests {
    use crate::interpreter::{Interpreter, InterpreterError};

    #[test]
    fn the_wrapper_is_a_constant_only_of_a_constant_dense_kernel_of_its_own_set() {
        use super::{register_fully_connected, SparseAwareFullyConnected};
        use crate::interpreter::kernels::fully_connected::FullyConnected;
        use crate::interpreter::{Kernel, KernelSet};
        use rust_alloc::sync::Arc;
        let (r, o) = (KernelSet::Reference, KernelSet::Optimized);
        let dense = |set, double_rescale| -> Arc<dyn Kernel> {
            Arc::new(FullyConnected {
                set,
                double_rescale,
            })
        };
        let a = register_fully_connected(r).kernel.constant().unwrap();
        let b = register_fully_connected(o).kernel.constant().unwrap();
        assert!(!core::ptr::addr_eq(a, b));
        let same = SparseAwareFullyConnected::new(dense(r, false), r).constant();
        assert!(core::ptr::addr_eq(same.unwrap(), a));
        // No constant wrapper: another dense kernel, another set than the dense kernel's.
        assert!(SparseAwareFullyConnected::new(dense(r, true), r)
            .constant()
            .is_none());
        assert!(SparseAwareFullyConnected::new(dense(r, false), o)
            .constant()
            .is_none());
    }
    use crate::model::{
        Activation, BuiltinOp, BuiltinOptions, DType, DimensionMetadata, Model, ModelBuilder,
        SparseIndexVector, Sparsity,
    };

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// `[3, 8]` weights in 1x4 blocks: row 0 keeps block 1, row 1 none, row 2 blocks 0 and 1.
    fn sparsity() -> Sparsity {
        let dense = |size: i32| DimensionMetadata {
            format: 0,
            dense_size: size,
            array_segments: None,
            array_indices: None,
        };
        Sparsity {
            traversal_order: vec![0, 1, 2],
            block_map: vec![1],
            dim_metadata: vec![
                dense(3),
                DimensionMetadata {
                    format: 1,
                    dense_size: 0,
                    array_segments: Some(SparseIndexVector::Uint8(vec![0, 1, 1, 3])),
                    array_indices: Some(SparseIndexVector::Uint16(vec![1, 0, 1])),
                },
                dense(4),
            ],
        }
    }

    const VALUES: [f32; 12] = [1., 2., 3., 4., 0.5, -1., 0., 2., 1., 1., 1., 1.];
    const DENSE: [f32; 24] = [
        0., 0., 0., 0., 1., 2., 3., 4., //
        0., 0., 0., 0., 0., 0., 0., 0., //
        0.5, -1., 0., 2., 1., 1., 1., 1.,
    ];

    /// `y = FC(x, w, bias)` (ReLU), `w` stored sparse; `consumer` = ADD feeds `w` to an ADD
    /// instead.
    fn model(sp: Sparsity, values: &[f32], consumer_add: bool) -> Model {
        let mut b = ModelBuilder::new("sparse_fc");
        let x = b.add_tensor("x", DType::F32, &[2, 8]);
        let w = b.add_constant("w", DType::F32, &[3, 8], &f32_bytes(values));
        if let Some(t) = b.tensor_mut(w) {
            t.is_sparse = true;
            t.sparsity = Some(Box::new(sp));
        }
        let bias = b.add_constant("bias", DType::F32, &[3], &f32_bytes(&[0.5, -1., 0.]));
        if consumer_add {
            let y = b.add_tensor("y", DType::F32, &[3, 8]);
            let z = b.add_tensor("z", DType::F32, &[3, 8]);
            b.add_op(
                BuiltinOp::ADD,
                BuiltinOptions::Add {
                    activation: Activation::None,
                    pot_scale_int16: true,
                },
                &[w, y],
                &[z],
            );
            b.inputs(&[y]).outputs(&[z]);
        } else {
            let y = b.add_tensor("y", DType::F32, &[2, 3]);
            b.add_op(
                BuiltinOp::FULLY_CONNECTED,
                BuiltinOptions::FullyConnected {
                    activation: Activation::Relu,
                    weights_format: 0,
                    keep_num_dims: false,
                    asymmetric_quantize_inputs: false,
                },
                &[x, w, bias],
                &[y],
            );
            b.inputs(&[x]).outputs(&[y]);
        }
        b.build()
    }

    #[test]
    fn sparse_weights_give_the_dense_product() {
        let m = model(sparsity(), &VALUES, false);
        let mut interp = Interpreter::new(&m).unwrap();
        let x: Vec<f32> = (0..16).map(|i| i as f32 * 0.25 - 1.0).collect();
        interp.input_mut::<f32>(0).unwrap().copy_from_slice(&x);
        interp.invoke().unwrap();
        let bias = [0.5f32, -1., 0.];
        let mut want = [0f32; 6];
        for b in 0..2 {
            for u in 0..3 {
                let dot: f32 = (0..8).map(|d| DENSE[u * 8 + d] * x[b * 8 + d]).sum();
                want[b * 3 + u] = (dot + bias[u]).max(0.0);
            }
        }
        assert_eq!(interp.output::<f32>(0).unwrap(), &want);
    }

    #[test]
    fn corrupt_sparsity_fails_the_build() {
        let mut sp = sparsity();
        sp.dim_metadata[1].array_indices = Some(SparseIndexVector::Uint16(vec![1, 0, 2]));
        let err = Interpreter::new(&model(sp, &VALUES, false))
            .err()
            .expect("a column block out of range must not build")
            .to_string();
        assert!(
            err.contains("sparse weights `w`") && err.contains("outside"),
            "{err}"
        );
        let err = Interpreter::new(&model(sparsity(), &VALUES[..8], false))
            .err()
            .expect("too few stored values must not build")
            .to_string();
        assert!(err.contains("stored values"), "{err}");
    }

    #[test]
    fn other_kernels_refuse_sparse_inputs() {
        match Interpreter::new(&model(sparsity(), &VALUES, true)) {
            Err(InterpreterError::Usage(msg)) => {
                assert!(
                    msg.contains("ADD") && msg.contains("stored sparse"),
                    "{msg}"
                )
            }
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("ADD must not read sparse storage"),
        }
    }
}
