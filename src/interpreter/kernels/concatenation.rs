//! CONCATENATION: any number of inputs along any axis (negative counts from the end), float,
//! int8, int16, int32, int64, uint8 and bool. int8 inputs whose scale or zero point differ from
//! the output's are requantized as TFLite's `ConcatenationWithScaling` does (TFLM itself refuses
//! them); equal ones are copied.

use super::binary_common::SPLIT_ELEMENTS;
use super::movement_common::with_movable_type;
use crate::interpreter::reference::concatenation::{copy_slab, requantize_slab_i8, Requant};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PersistentArray, PrepareContext, Registration,
};
use crate::kernel_ensure;
use crate::model::{Activation, BuiltinOptions};
use crate::tensor::DType;
use rust_alloc::vec::Vec;

#[derive(Clone, Copy, Debug)]
struct ConcatData {
    dtype: DType,
    inputs: usize,
    outer: usize,
    /// Elements of each input per outer index.
    slabs: PersistentArray<u64>,
    /// int8 requantization per input: scale, bias (scale 0 and bias NaN = copy).
    requant: Option<(PersistentArray<f32>, PersistentArray<f32>)>,
    output_zero_point: i32,
}

/// The CONCATENATION kernel.
pub struct Concatenation;

/// Most inputs a concatenation split over the kernel threads gathers (their slices are held
/// on the stack); more run on the calling thread.
const MAX_SPLIT_INPUTS: usize = 8;

impl Kernel for Concatenation {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Concatenation)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        kernel_ensure!(
            ctx.num_inputs() >= 1 && ctx.num_outputs() == 1,
            "{} inputs and {} outputs, expected at least 1 input and 1 output",
            ctx.num_inputs(),
            ctx.num_outputs()
        );
        let BuiltinOptions::Concatenation { axis, activation } = *ctx.options() else {
            return Err(KernelError::new(
                "CONCATENATION without ConcatenationOptions",
            ));
        };
        kernel_ensure!(
            activation == Activation::None,
            "fused activation {activation:?} is not supported (NONE only, as TFLM)"
        );
        let output = ctx.output(0)?;
        let rank = output.dims.len();
        let axis_u = if axis < 0 {
            i64::from(axis) + rank as i64
        } else {
            i64::from(axis)
        };
        kernel_ensure!(
            (0..rank as i64).contains(&axis_u),
            "axis {axis} is out of range for output `{}` of rank {rank}",
            output.name
        );
        let axis_u = axis_u as usize;
        kernel_ensure!(
            !matches!(
                output.dtype,
                DType::F16 | DType::BF16 | DType::F64 | DType::U16 | DType::U32 | DType::U64
            ),
            "dtype {} is not supported",
            output.dtype
        );
        let outer: usize = output.dims[..axis_u].iter().product();
        let inner: usize = output.dims[axis_u + 1..].iter().product();
        let n = ctx.num_inputs();
        let mut slabs = Vec::with_capacity(n);
        let mut scales = Vec::new();
        let mut biases = Vec::new();
        let mut any_requant = false;
        let out_q = if output.dtype == DType::I8 {
            Some(output.per_tensor_quant()?)
        } else {
            None
        };
        let mut total = 0usize;
        for k in 0..n {
            let t = ctx.input(k)?;
            t.expect_dtype(output.dtype)?;
            kernel_ensure!(
                t.dims.len() == rank
                    && t.dims
                        .iter()
                        .zip(output.dims)
                        .enumerate()
                        .all(|(d, (a, b))| d == axis_u || a == b),
                "input `{}` has shape {:?}, incompatible with output {:?} along axis {axis_u}",
                t.name,
                t.dims,
                output.dims
            );
            total += t.dims[axis_u];
            slabs.push((t.dims[axis_u] * inner) as u64);
            if let Some((so, zo)) = out_q {
                let (si, zi) = t.per_tensor_quant()?;
                if si == so && zi == zo {
                    scales.push(0.0);
                    biases.push(f32::NAN);
                } else {
                    let r = Requant::new(si, zi, so, zo);
                    scales.push(r.scale);
                    biases.push(r.bias);
                    any_requant = true;
                }
            } else if output.dtype == DType::I16 {
                let (_, zi) = t.per_tensor_quant().unwrap_or((1.0, 0));
                kernel_ensure!(
                    zi == 0,
                    "int16 input `{}` has zero point {zi}, expected 0",
                    t.name
                );
            }
        }
        kernel_ensure!(
            total == output.dims[axis_u],
            "inputs add up to {total} along axis {axis_u}, output `{}` has {}",
            output.name,
            output.dims[axis_u]
        );
        let slabs = ctx.persistent_array(&slabs)?;
        let requant = if any_requant {
            Some((
                ctx.persistent_array(&scales)?,
                ctx.persistent_array(&biases)?,
            ))
        } else {
            None
        };
        ctx.set_op_data(ConcatData {
            dtype: output.dtype,
            inputs: n,
            outer,
            slabs,
            requant,
            output_zero_point: out_q.map_or(0, |q| q.1),
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<ConcatData>()?;
        let slabs = ctx.persistent(d.slabs)?;
        match d.dtype {
            DType::I8 if d.requant.is_some() => {
                let Some((s, b)) = d.requant else {
                    return Ok(());
                };
                let (scales, biases) = (ctx.persistent(s)?, ctx.persistent(b)?);
                let out = ctx.output::<i8>(0)?;
                let mut dst = 0;
                for outer in 0..d.outer {
                    for (k, &slab) in slabs.iter().enumerate().take(d.inputs) {
                        let slab = slab as usize;
                        let input = ctx.input::<i8>(k)?;
                        if biases[k].is_nan() {
                            copy_slab(input, outer, slab, out, dst);
                        } else {
                            let r = Requant {
                                scale: scales[k],
                                bias: biases[k],
                                output_zero_point: d.output_zero_point,
                            };
                            requantize_slab_i8(input, outer, slab, r, out, dst);
                        }
                        dst += slab;
                    }
                }
            }
            dtype => with_movable_type!(dtype, T => {
                let out = ctx.output::<T>(0)?;
                let stride: usize = slabs.iter().take(d.inputs).map(|&s| s as usize).sum();
                let tasks = (out.len() / SPLIT_ELEMENTS)
                    .clamp(1, ctx.threads())
                    .min(d.outer);
                if tasks > 1 && d.inputs <= MAX_SPLIT_INPUTS {
                    // Bands of outer indices on the kernel threads, each output row gathered
                    // from every input (a copy: any split gives the same bytes).
                    let mut inputs: [&[T]; MAX_SPLIT_INPUTS] = [&[]; MAX_SPLIT_INPUTS];
                    for (k, i) in inputs.iter_mut().enumerate().take(d.inputs) {
                        *i = ctx.input::<T>(k)?;
                    }
                    let rows = d.outer.div_ceil(tasks);
                    let slabs = &slabs[..d.inputs];
                    let out = &mut out[..d.outer * stride];
                    ctx.for_each_chunk_mut(out, rows * stride, &|t, part| {
                        for (r, row) in part.chunks_exact_mut(stride).enumerate() {
                            let mut at = 0;
                            for (input, &slab) in inputs.iter().zip(slabs) {
                                copy_slab(input, t * rows + r, slab as usize, row, at);
                                at += slab as usize;
                            }
                        }
                    });
                    return Ok(());
                }
                // Input by input (each looked up once), its slabs at the output stride.
                let mut start = 0;
                for (k, &slab) in slabs.iter().enumerate().take(d.inputs) {
                    let slab = slab as usize;
                    let input = ctx.input::<T>(k)?;
                    for outer in 0..d.outer {
                        copy_slab(input, outer, slab, out, start + outer * stride);
                    }
                    start += slab;
                }
            }),
        }
        Ok(())
    }
}

/// The CONCATENATION kernel (TFLM's `Register_CONCATENATION()`).
pub fn register_concatenation(_set: KernelSet) -> Registration {
    Registration::new("CONCATENATION", Concatenation)
}
