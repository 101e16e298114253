//! The AVX-512F body of float DEPTHWISE_CONV_2D ([`super::depthwise_conv`], depth multiplier
//! 1): up to [`PX`] adjacent output pixels of a row accumulate together, 16 channels per
//! `zmm` (the last block masked, so no channel runs through a scalar loop), each tap's 16
//! filter values loaded once for all the pixels.
//!
//! A group whose windows all lie inside the input row reads each tap at a fixed stride from
//! the first pixel's; a group at the image's left or right edge skips, per pixel, the taps its
//! clipped window drops (a padded model's narrow late layers — 7 × 7 images under a 5 × 5
//! filter — have no whole window at all, and run here at full width rather than one pixel at
//! a time).
//!
//! **Same bits as the AVX2 body.** Every output sums its window's taps inside the input in the
//! reference's order (filter rows, then columns) with one FMA each from zero, then adds the
//! bias and clamps, as the AVX2 loops do: the two paths give identical results (the tests
//! compare them bit for bit).

use crate::interpreter::reference::conv::{ClippedWindow, ConvGeometry};
use core::arch::x86_64::*;

/// Output pixels accumulated together (independent accumulators per 16 channels).
const PX: usize = 8;

/// Output rows `row0..row0 + rows` into `output` (which holds exactly those rows).
///
/// # Safety
/// AVX-512F is present; `input`, `filter` (and `bias`) hold at least what `g` describes,
/// `output` holds `rows` output rows and `row0 + rows <= batches * out_h`; the depth
/// multiplier is 1 (`in_c == out_c`).
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn depthwise(
    g: &ConvGeometry,
    input: &[f32],
    filter: &[f32],
    bias: Option<&[f32]>,
    act_min: f32,
    act_max: f32,
    row0: usize,
    rows: usize,
    output: &mut [f32],
) {
    let ops = Operands {
        inp: input.as_ptr(),
        flt: filter.as_ptr(),
        bias: bias.map(|b| b.as_ptr()),
        lo: _mm512_set1_ps(act_min),
        hi: _mm512_set1_ps(act_max),
    };
    let out = output.as_mut_ptr();
    let mut o = 0;
    for r in row0..row0 + rows {
        let (b, oy) = (r / g.out_h, r % g.out_h);
        let wy = g.row_window(oy);
        let mut ox = 0;
        while ox < g.out_w {
            let np = PX.min(g.out_w - ox);
            let at = Group { b, wy, ox };
            // SAFETY: pixels `ox..ox + np` of output row `r` (`np * c` values at `o`, inside
            // `output`); their clipped windows are inside the input; the caller's contract
            // covers the filter and the bias.
            unsafe {
                match np {
                    1 => group::<1>(g, &ops, &at, out.add(o)),
                    2 => group::<2>(g, &ops, &at, out.add(o)),
                    3 => group::<3>(g, &ops, &at, out.add(o)),
                    4 => group::<4>(g, &ops, &at, out.add(o)),
                    5 => group::<5>(g, &ops, &at, out.add(o)),
                    6 => group::<6>(g, &ops, &at, out.add(o)),
                    7 => group::<7>(g, &ops, &at, out.add(o)),
                    _ => group::<PX>(g, &ops, &at, out.add(o)),
                }
            }
            o += np * g.out_c;
            ox += np;
        }
    }
}

/// The layer's operands (raw: the caller checked the extents).
struct Operands {
    inp: *const f32,
    flt: *const f32,
    bias: Option<*const f32>,
    lo: __m512,
    hi: __m512,
}

/// Where a group of pixels sits: batch `b`, its output row's clipped window `wy`, first
/// output column `ox`.
struct Group {
    b: usize,
    wy: ClippedWindow,
    ox: usize,
}

/// Lanes of the 16-channel block at `ch` that hold channels below `c`.
#[inline(always)]
fn lanes(c: usize, ch: usize) -> __mmask16 {
    let n = (c - ch).min(16);
    ((1u32 << n) - 1) as __mmask16
}

/// `N` output pixels from `at.ox` (all channels) into `out` (`N * c` values).
///
/// # Safety
/// AVX-512F is present; the pixels are inside the output row, `out` holds their `N * c`
/// values, the input, filter and bias hold what `g` describes.
#[target_feature(enable = "avx512f")]
unsafe fn group<const N: usize>(g: &ConvGeometry, ops: &Operands, at: &Group, out: *mut f32) {
    let c = g.out_c;
    let fw = g.filter_w;
    let wins: [ClippedWindow; N] = core::array::from_fn(|p| g.col_window(at.ox + p));
    // Windows move monotonically with the column: when the first starts at tap 0 and the
    // last keeps every tap, every window between is whole.
    let whole = wins[0].f0 == 0 && wins[N - 1].f1 == fw && wins[N - 1].f0 == 0;
    let step = g.stride_w * c;
    let mut ch = 0;
    while ch < c {
        let m = lanes(c, ch);
        let mut acc = [_mm512_setzero_ps(); N];
        for fy in at.wy.f0..at.wy.f1 {
            let row = (at.b * g.in_h + at.wy.at(fy)) * g.in_w;
            // SAFETY (both loops): the filter row of tap (fy, fx) holds `c` values, the
            // masked lanes are channels `ch..c`; input pixel `row + wins[p].at(fx)` is inside
            // for taps `fx` in pixel `p`'s clipped window (all taps when `whole`, pixel `p`
            // then `p * stride_w` columns right of the first).
            if whole {
                let x0 = (row + wins[0].at(0)) * c + ch;
                for fx in 0..fw {
                    unsafe {
                        let w = _mm512_maskz_loadu_ps(m, ops.flt.add((fy * fw + fx) * c + ch));
                        let x = ops.inp.add(x0 + fx * g.dilation_w * c);
                        for (p, a) in acc.iter_mut().enumerate() {
                            let xv = _mm512_maskz_loadu_ps(m, x.add(p * step));
                            *a = _mm512_fmadd_ps(xv, w, *a);
                        }
                    }
                }
            } else {
                for fx in 0..fw {
                    unsafe {
                        let w = _mm512_maskz_loadu_ps(m, ops.flt.add((fy * fw + fx) * c + ch));
                        for (a, win) in acc.iter_mut().zip(&wins) {
                            if fx >= win.f0 && fx < win.f1 {
                                let x = ops.inp.add((row + win.at(fx)) * c + ch);
                                *a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x), w, *a);
                            }
                        }
                    }
                }
            }
        }
        let bv = match ops.bias {
            // SAFETY: the masked lanes are bias values `ch..c`, inside.
            Some(bp) => unsafe { _mm512_maskz_loadu_ps(m, bp.add(ch)) },
            None => _mm512_setzero_ps(),
        };
        for (p, a) in acc.iter().enumerate() {
            let v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(*a, bv), ops.lo), ops.hi);
            // SAFETY: pixel `p < N` has `c` outputs at `out + p * c`; masked lanes `ch..c`.
            unsafe { _mm512_mask_storeu_ps(out.add(p * c + ch), m, v) };
        }
        ch += 16;
    }
}

#[cfg(test)]
mod tests {
    use super::super::depthwise_conv::depthwise_conv_f32_rows;
    use super::super::tests::values;
    use super::super::Isa;
    use crate::interpreter::reference::conv::ConvGeometry;
    use crate::interpreter::reference::depthwise_conv::depthwise_conv_f32 as reference;

    /// The AVX-512 body on channel counts around the 16-lane blocks (1, 15, 16, 17, 45),
    /// widths giving every group size (1 to 8 pixels, and a tail), 3 × 3 and 5 × 5 filters
    /// wider than the image, strides, dilation and padding: the AVX2 body's bits, and the
    /// reference up to rounding; a band split gives the bits of one call.
    #[test]
    fn avx512_matches_avx2_bits_and_reference() {
        if !Isa::available().contains(&Isa::Avx512) {
            return;
        }
        let mut cases = 0;
        for &c in &[1usize, 15, 16, 17, 45] {
            for &(in_w, fk, stride, dilation, pad) in &[
                (1usize, 3usize, 1usize, 1usize, 1usize),
                (5, 3, 1, 1, 1),
                (7, 5, 1, 1, 2),
                (7, 5, 2, 1, 2),
                (11, 3, 1, 2, 2),
                (20, 3, 2, 1, 0),
                (19, 3, 1, 1, 1),
                (3, 5, 1, 1, 2),
            ] {
                let in_h = 6;
                let span = (fk - 1) * dilation + 1;
                let g = ConvGeometry {
                    batches: 2,
                    in_h,
                    in_w,
                    in_c: c,
                    out_h: (in_h + 2 * pad - span) / stride + 1,
                    out_w: (in_w + 2 * pad - span) / stride + 1,
                    out_c: c,
                    filter_h: fk,
                    filter_w: fk,
                    filter_depth: 1,
                    stride_h: stride,
                    stride_w: stride,
                    dilation_h: dilation,
                    dilation_w: dilation,
                    pad_h: pad,
                    pad_w: pad,
                    depth_multiplier: 1,
                };
                let input = values(g.input_len(), c as u32);
                let filter = values(fk * fk * c, 7);
                let bias = values(c, 9);
                for bias in [Some(&bias[..]), None] {
                    let mut want = vec![0.0; g.output_len()];
                    reference(&g, &input, &filter, bias, -1.5, 2.0, &mut want);
                    let run = |isa: Isa| {
                        let mut got = vec![f32::NAN; g.output_len()];
                        depthwise_conv_f32_rows(
                            isa, &g, &input, &filter, bias, -1.5, 2.0, 0, &mut got,
                        );
                        got
                    };
                    let (a2, a5) = (run(Isa::Avx2), run(Isa::Avx512));
                    for (i, (x, y)) in a5.iter().zip(&a2).enumerate() {
                        assert_eq!(x.to_bits(), y.to_bits(), "{g:?}: {i}: {x} vs {y}");
                    }
                    for (i, (x, y)) in a5.iter().zip(&want).enumerate() {
                        assert!((x - y).abs() <= 1e-5, "{g:?}: {i}: {x} vs {y}");
                    }
                    let row_len = g.out_w * c;
                    let mut split = vec![f32::NAN; g.output_len()];
                    for (t, part) in split.chunks_mut(3 * row_len).enumerate() {
                        depthwise_conv_f32_rows(
                            Isa::Avx512,
                            &g,
                            &input,
                            &filter,
                            bias,
                            -1.5,
                            2.0,
                            t * 3,
                            part,
                        );
                    }
                    assert_eq!(split, a5);
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 80);
    }
}
