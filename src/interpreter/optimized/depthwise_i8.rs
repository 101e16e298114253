//! Optimized int8 DEPTHWISE_CONV_2D: the inputs and result of
//! [`reference::depthwise_conv::depthwise_conv_i8`](crate::interpreter::reference::depthwise_conv::depthwise_conv_i8),
//! bit-exact.
//!
//! Pixel-major: each output pixel keeps one `i32` accumulator per output channel (on the stack)
//! and adds every tap of its clipped window as one contiguous run over all channels (input
//! pixel and filter tap are both channel-contiguous), so the input is read once per tap
//! instead of once per channel tile. `w * (x + input_offset)` is exact in 16 bits
//! (`|w| ≤ 128`, `|x + offset| ≤ 255`), which lets the vectorizer use 16-bit multiplies; the
//! AVX2 path is the same loop compiled with AVX2 enabled. Requantization is the reference's.
//!
//! Layers with more than [`MAX_CHANNELS`] output channels run the reference loop.

use super::requant_i8::{requantize_row, Requant};
use super::Isa;
use crate::interpreter::reference::conv::{ConvGeometry, ConvQuant};
use crate::interpreter::reference::depthwise_conv as reference;

/// Output channels the on-stack accumulators hold (16 KiB).
pub const MAX_CHANNELS: usize = 4096;

/// int8 per-channel depthwise convolution on the best path for this CPU.
pub fn depthwise_conv_i8(
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    output: &mut [i8],
) {
    depthwise_conv_i8_with(Isa::detect(), g, input, filter, bias, q, output);
}

/// [`depthwise_conv_i8`] on path `isa` (falling back to [`Isa::Portable`] where the CPU lacks
/// it).
pub fn depthwise_conv_i8_with(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    output: &mut [i8],
) {
    if g.out_c > MAX_CHANNELS || g.out_c != g.in_c * g.depth_multiplier.max(1) {
        reference::depthwise_conv_i8(g, input, filter, bias, q, output);
        return;
    }
    match isa.supported() {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            // SAFETY: `supported()` returned Avx2 only because the CPU has AVX2.
            unsafe { depthwise_avx2(g, input, filter, bias, q, output) }
        }
        _ => depthwise_body(Isa::Portable, g, input, filter, bias, q, output),
    }
}

/// [`depthwise_body`] compiled with AVX2.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn depthwise_avx2(
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    output: &mut [i8],
) {
    depthwise_body(Isa::Avx2, g, input, filter, bias, q, output);
}

#[inline(always)]
fn depthwise_body(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    output: &mut [i8],
) {
    let mut acc = [0i32; MAX_CHANNELS];
    let (in_c, out_c) = (g.in_c, g.out_c);
    let acc = &mut acc[..out_c];
    let dm = g.depth_multiplier.max(1);
    // The kernels validate int8 zero points, so the offset fits in 16 bits.
    let offset = q.input_offset as i16;
    let rq = Requant {
        bias,
        multipliers: q.multipliers,
        shifts: q.shifts,
        output_offset: q.output_offset,
        act_min: q.act_min,
        act_max: q.act_max,
    };
    let mut o = 0;
    for b in 0..g.batches {
        for out_y in 0..g.out_h {
            let wy = g.row_window(out_y);
            for out_x in 0..g.out_w {
                let wx = g.col_window(out_x);
                acc.fill(0);
                for fy in wy.f0..wy.f1 {
                    let row = (b * g.in_h + wy.at(fy)) * g.in_w;
                    for fx in wx.f0..wx.f1 {
                        let x = &input[(row + wx.at(fx)) * in_c..][..in_c];
                        let w = &filter[(fy * g.filter_w + fx) * out_c..][..out_c];
                        if dm == 1 {
                            for ((a, &w), &x) in acc.iter_mut().zip(w).zip(x) {
                                let p = i16::from(w).wrapping_mul(i16::from(x) + offset);
                                *a = a.wrapping_add(i32::from(p));
                            }
                        } else {
                            let runs = acc.chunks_exact_mut(dm).zip(w.chunks_exact(dm));
                            for ((a, w), &x) in runs.zip(x) {
                                let x = i16::from(x) + offset;
                                for (a, &w) in a.iter_mut().zip(w) {
                                    *a = a.wrapping_add(i32::from(i16::from(w).wrapping_mul(x)));
                                }
                            }
                        }
                    }
                }
                requantize_row(isa, &rq, 0, acc, &mut output[o..o + out_c]);
                o += out_c;
            }
        }
    }
}
