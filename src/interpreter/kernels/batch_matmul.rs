//! BATCH_MATMUL: float32 and int8 (LiteRT's `batch_matmul.cc`), `adj_x` / `adj_y` from the
//! options, ranks 2 to 5 with broadcasting of the batch dimensions. The optimized set multiplies
//! float32 through [`crate::interpreter::optimized::batch_matmul`], packing the right-hand
//! matrix into scratch; int8 (per-tensor scales, one multiplier `s_lhs * s_rhs / s_out`, no
//! fused activation) runs the reference loop in the reference set and
//! [`crate::interpreter::optimized::batch_matmul_i8`] (bit-exact, rhs packed as int32 into a
//! 4 KiB stack buffer, so no arena scratch; larger products run the reference loop) in the
//! optimized set. A float32 lhs by an int8 rhs is the dynamic-range form
//! ([`super::hybrid`]).

use super::binary_common::quant_params;
use super::conv::request_f32_scratch;
use super::hybrid;
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::batch_matmul as fast;
use crate::interpreter::optimized::batch_matmul_i8 as fast_i8;
use crate::interpreter::reference::batch_matmul::{
    batch_matmul_f32, batch_matmul_i8, BatchMatMulGeometry, BatchMatMulQuant, MAX_BATCH_DIMS,
};
use crate::interpreter::reference::quant::quantize_multiplier;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration, ScratchId,
};
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

/// The BATCH_MATMUL kernel of one kernel set.
#[derive(PartialEq)]
pub struct BatchMatMul {
    /// Which arithmetic invoke runs.
    pub set: KernelSet,
}

/// Every [`BatchMatMul`] value, for [`Kernel::constant`].
static BATCH_MAT_MUL: [BatchMatMul; 2] = [
    BatchMatMul {
        set: KernelSet::Reference,
    },
    BatchMatMul {
        set: KernelSet::Optimized,
    },
];

/// What prepare computes.
#[derive(Clone, Copy, Debug)]
struct BatchMatMulData {
    geometry: BatchMatMulGeometry,
    /// Packing buffer of the optimized set's float32 path (none: the reference loop).
    packed: Option<ScratchId>,
    /// int8 parameters (none: float32).
    quant: Option<BatchMatMulQuant>,
    /// int8 through [`fast_i8`] with its packed rhs on the stack (optimized set, small enough
    /// for [`fast_i8::STACK_LEN`]: no arena scratch).
    fast_int8: bool,
}

fn batch_dims(dims: &[usize]) -> [usize; MAX_BATCH_DIMS] {
    let mut out = [1; MAX_BATCH_DIMS];
    let b = &dims[..dims.len() - 2];
    out[MAX_BATCH_DIMS - b.len()..].copy_from_slice(b);
    out
}

impl Kernel for BatchMatMul {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&BATCH_MAT_MUL, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(2, 1)?;
        let (adj_x, adj_y, asymmetric) = match *ctx.options() {
            BuiltinOptions::BatchMatMul {
                adj_x,
                adj_y,
                asymmetric_quantize_inputs,
            } => (adj_x, adj_y, asymmetric_quantize_inputs),
            BuiltinOptions::None => (false, false, false),
            ref o => kernel_bail!("BATCH_MATMUL with options {o:?}"),
        };
        let lhs = ctx.input(0)?;
        let rhs = ctx.input(1)?;
        let output = ctx.output(0)?;
        let dtype = lhs.dtype;
        kernel_ensure!(
            matches!(dtype, DType::F32 | DType::I8),
            "lhs `{}` has dtype {dtype}; BATCH_MATMUL takes float32, int8, and float32 by int8 \
             (hybrid)",
            lhs.name
        );
        let is_hybrid = hybrid::is_hybrid(&lhs, &rhs);
        if !is_hybrid {
            for t in [&rhs, &output] {
                t.expect_dtype(dtype)?;
            }
        }
        let quant = if dtype == DType::I8 {
            let (sl, zl) = quant_params(&lhs)?;
            let (sr, zr) = quant_params(&rhs)?;
            let (so, zo) = quant_params(&output)?;
            // `GetQuantizedConvolutionMultipler`, as LiteRT and TFLM compute it: the two input
            // scales multiplied in float, then divided by the output scale in double.
            Some(BatchMatMulQuant {
                lhs_offset: -zl,
                rhs_offset: -zr,
                output_offset: zo,
                multiplier: quantize_multiplier(f64::from(sl * sr) / f64::from(so)),
            })
        } else {
            None
        };
        for t in [&lhs, &rhs] {
            kernel_ensure!(
                (2..=MAX_BATCH_DIMS + 2).contains(&t.dims.len()),
                "tensor `{}` has rank {}, expected 2 to 5",
                t.name,
                t.dims.len()
            );
        }
        let (lr, rr) = (lhs.dims.len(), rhs.dims.len());
        let (l0, l1) = (lhs.dims[lr - 2], lhs.dims[lr - 1]);
        let (r0, r1) = (rhs.dims[rr - 2], rhs.dims[rr - 1]);
        let (m, k) = if adj_x { (l1, l0) } else { (l0, l1) };
        let (k2, n) = if adj_y { (r1, r0) } else { (r0, r1) };
        kernel_ensure!(
            k == k2,
            "lhs `{}` {:?} (adj_x {adj_x}) and rhs `{}` {:?} (adj_y {adj_y}) disagree on the \
             reduction length",
            lhs.name,
            lhs.dims,
            rhs.name,
            rhs.dims
        );
        let (lb, rb) = (batch_dims(lhs.dims), batch_dims(rhs.dims));
        let mut want = [0usize; MAX_BATCH_DIMS + 2];
        for i in 0..MAX_BATCH_DIMS {
            kernel_ensure!(
                lb[i] == rb[i] || lb[i] == 1 || rb[i] == 1,
                "batch dimensions of {:?} and {:?} do not broadcast",
                lhs.dims,
                rhs.dims
            );
            want[i] = lb[i].max(rb[i]);
        }
        want[MAX_BATCH_DIMS] = m;
        want[MAX_BATCH_DIMS + 1] = n;
        let rank = lr.max(rr);
        output.expect_dims(&want[MAX_BATCH_DIMS + 2 - rank..])?;
        let geometry = BatchMatMulGeometry {
            lhs_batch: lb,
            rhs_batch: rb,
            m,
            k,
            n,
            adj_x,
            adj_y,
        };
        if is_hybrid {
            return hybrid::prepare_batch_matmul(ctx, self.set, &geometry, asymmetric);
        }
        let packed = match (self.set, quant) {
            (KernelSet::Optimized, None) => {
                Some(request_f32_scratch(ctx, fast::packed_len(&geometry))?)
            }
            _ => None,
        };
        let fast_int8 = self.set == KernelSet::Optimized
            && quant.is_some()
            && fast_i8::scratch_len(&geometry) <= fast_i8::STACK_LEN;
        ctx.set_op_data(BatchMatMulData {
            geometry,
            packed,
            quant,
            fast_int8,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        if let Some(h) = ctx.op_data_if::<hybrid::BatchMatMulHybrid>() {
            return hybrid::invoke_batch_matmul(ctx, h);
        }
        let d = *ctx.op_data::<BatchMatMulData>()?;
        if let Some(q) = d.quant {
            let (lhs, rhs) = (ctx.input::<i8>(0)?, ctx.input::<i8>(1)?);
            if d.fast_int8 {
                let mut scratch = [0i32; fast_i8::STACK_LEN];
                fast_i8::batch_matmul_i8(
                    ctx.isa(),
                    &d.geometry,
                    &q,
                    lhs,
                    rhs,
                    ctx.output(0)?,
                    &mut scratch,
                );
            } else {
                batch_matmul_i8(&d.geometry, &q, lhs, rhs, ctx.output(0)?);
            }
            return Ok(());
        }
        match d.packed {
            Some(id) => fast::batch_matmul_f32(
                ctx.isa(),
                &d.geometry,
                ctx.input(0)?,
                ctx.input(1)?,
                ctx.output(0)?,
                ctx.scratch(id)?,
            ),
            None => batch_matmul_f32(&d.geometry, ctx.input(0)?, ctx.input(1)?, ctx.output(0)?),
        }
        Ok(())
    }
}

/// The BATCH_MATMUL kernel of kernel set `set` (TFLM's `Register_BATCH_MATMUL()`).
pub fn register_batch_matmul(set: KernelSet) -> Registration {
    Registration::new("BATCH_MATMUL", BatchMatMul { set })
}
