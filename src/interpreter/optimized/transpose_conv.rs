//! Float TRANSPOSE_CONV whose taps do not overlap (stride equal to the filter size, no padding,
//! output exactly `stride ×` the input: the 2×2 stride-2 up-sampling of U-Nets and decoders) as
//! matrix products: each output pixel receives exactly one tap `(fy, fx)`, so output row
//! `iy · s + fy` at columns `ix · s + fx` is `input row iy · W(fy, fx)ᵀ` — a GEMM with `m =
//! in_w`, `k = in_c`, `n = out_c` whose `C` rows are `s · out_c` apart. `W(fy, fx)` is read in
//! place (the filter is `[out_c, fh, fw, in_c]`: each output channel's `in_c` values are
//! contiguous) and packed a few panels at a time on the stack, so the arena does not grow.
//! Other geometries run the reference loop ([`covers`]).

use super::gemm::{gemm_packed, Epilogue, Isa};
use super::matrix::Strided;
use super::pack::NR;
use super::pack::{pack_b, packed_b_len};
use crate::interpreter::reference::transpose_conv::{
    transpose_conv_f32_rows as reference_rows, TransposeConvGeometry,
};

/// Floats of packed filter panels one call keeps on its stack (16 KiB).
const STACK_PANEL_FLOATS: usize = 4096;

/// Whether [`transpose_conv_f32_rows`] runs `g` as matrix products (else the reference loop):
/// non-overlapping taps, no padding, an output exactly `stride ×` the input, and a depth
/// whose one panel fits the stack buffer.
pub fn covers(g: &TransposeConvGeometry) -> bool {
    g.stride_h == g.filter_h
        && g.stride_w == g.filter_w
        && g.filter_h > 0
        && g.filter_w > 0
        && g.pad_h == 0
        && g.pad_w == 0
        && g.out_h == g.in_h * g.stride_h
        && g.out_w == g.in_w * g.stride_w
        && g.in_c > 0
        && g.in_c * NR <= STACK_PANEL_FLOATS
}

/// Output rows `row0..` (row `b · out_h + oy`; whole rows of `out_w · out_c` values, as many as
/// `output` holds) of the float transpose convolution, on path `isa`: the reference's values
/// up to the rounding of the products' summation (FMA on AVX2; the scalar path sums in the
/// reference's order). A row's values do not depend on the band holding it.
///
/// # Panics
/// When `output` is not whole rows inside the output or a slice is shorter than `g` says.
#[allow(clippy::too_many_arguments)]
pub fn transpose_conv_f32_rows(
    isa: Isa,
    g: &TransposeConvGeometry,
    input: &[f32],
    filter: &[f32],
    bias: &[f32],
    act_min: f32,
    act_max: f32,
    row0: usize,
    output: &mut [f32],
) {
    if !covers(g) {
        reference_rows(g, input, filter, bias, act_min, act_max, row0, output);
        return;
    }
    let (s_h, s_w) = (g.stride_h, g.stride_w);
    let (k, n) = (g.in_c, g.out_c);
    let row_len = g.out_w * n;
    if row_len == 0 || output.is_empty() {
        return;
    }
    let rows = output.len() / row_len;
    assert!(
        rows * row_len == output.len()
            && row0 + rows <= g.batches * g.out_h
            && input.len() >= g.batches * g.in_h * g.in_w * k
            && filter.len() >= n * g.filter_h * g.filter_w * k
            && (bias.is_empty() || bias.len() >= n),
        "transpose_conv_f32_rows: slices shorter than {g:?} (rows {row0}+{rows})"
    );
    // Columns per packed group: as many whole panels as the stack buffer holds at depth `k`.
    let group = (STACK_PANEL_FLOATS / (k * NR) * NR).min(n.div_ceil(NR) * NR);
    let mut panel = [0.0f32; STACK_PANEL_FLOATS];
    let taps_stride = g.filter_h * g.filter_w * k;
    for fy in 0..g.filter_h {
        for fx in 0..g.filter_w {
            let mut j0 = 0;
            while j0 < n {
                let nj = group.min(n - j0);
                let b = Strided {
                    data: &filter[j0 * taps_stride + (fy * g.filter_w + fx) * k..],
                    rs: taps_stride,
                    cs: 1,
                };
                let packed = &mut panel[..packed_b_len(nj, k)];
                pack_b(nj, k, b, packed);
                let ep = Epilogue {
                    bias: (!bias.is_empty()).then(|| &bias[j0..]),
                    min: act_min,
                    max: act_max,
                };
                // The band's output rows of this filter row: `oy % s_h == fy`.
                for r in 0..rows {
                    let (bt, oy) = ((row0 + r) / g.out_h, (row0 + r) % g.out_h);
                    if oy % s_h != fy {
                        continue;
                    }
                    let iy = oy / s_h;
                    let a = Strided {
                        data: &input[(bt * g.in_h + iy) * g.in_w * k..][..g.in_w * k],
                        rs: k,
                        cs: 1,
                    };
                    let c = &mut output[r * row_len + fx * n + j0..(r + 1) * row_len];
                    gemm_packed(isa, g.in_w, nj, k, a, packed, &ep, c, s_w * n);
                }
                j0 += nj;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::values;
    use crate::interpreter::reference::transpose_conv::transpose_conv_f32;

    #[test]
    fn matches_reference_on_every_path() {
        // (in_h, in_w, in_c, out_c, filter, stride, pad): covered shapes (channel tails,
        // a depth that needs several column groups, 3×3 stride 3) and uncovered ones.
        for &(in_h, in_w, in_c, out_c, f, s, pad) in &[
            (3, 5, 8, 16, 2, 2, 0),
            (4, 3, 7, 37, 2, 2, 0),
            (2, 3, 200, 70, 2, 2, 0),
            (3, 2, 5, 3, 3, 3, 0),
            (3, 4, 6, 5, 3, 2, 1),
            (2, 2, 300, 4, 2, 2, 0),
        ] {
            let out_h = (in_h - 1) * s + f - 2 * pad;
            let out_w = (in_w - 1) * s + f - 2 * pad;
            let g = TransposeConvGeometry {
                batches: 2,
                in_h,
                in_w,
                in_c,
                out_h,
                out_w,
                out_c,
                filter_h: f,
                filter_w: f,
                stride_h: s,
                stride_w: s,
                pad_h: pad,
                pad_w: pad,
            };
            let input = values(2 * in_h * in_w * in_c, 1);
            let filter = values(out_c * f * f * in_c, 2);
            let bias = values(out_c, 3);
            let len = 2 * out_h * out_w * out_c;
            for bias in [&bias[..], &[][..]] {
                let mut want = vec![0.0; len];
                transpose_conv_f32(&g, &input, &filter, bias, -1.5, 2.5, &mut want);
                for &isa in Isa::available() {
                    let mut got = vec![f32::NAN; len];
                    transpose_conv_f32_rows(isa, &g, &input, &filter, bias, -1.5, 2.5, 0, &mut got);
                    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                        assert!((a - b).abs() <= 1e-4, "{g:?} on {isa}: {i}: {a} vs {b}");
                    }
                    if isa == Isa::Scalar && in_c <= super::super::gemm::KC {
                        assert_eq!(got, want, "{g:?}: the scalar path sums as the reference");
                    }
                    // Bands of rows (as threads split the layer) give the bits of one call.
                    let row_len = out_w * out_c;
                    for band in [1, 3] {
                        let mut split = vec![f32::NAN; len];
                        for (t, part) in split.chunks_mut(band * row_len).enumerate() {
                            transpose_conv_f32_rows(
                                isa,
                                &g,
                                &input,
                                &filter,
                                bias,
                                -1.5,
                                2.5,
                                t * band,
                                part,
                            );
                        }
                        assert_eq!(split, got, "{g:?} on {isa}: bands of {band} rows");
                    }
                }
            }
        }
    }
}
