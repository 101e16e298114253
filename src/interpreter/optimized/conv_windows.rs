//! The windows of a float convolution's output pixels ([`super::conv`]): gathered into im2col
//! rows, or multiplied where the input keeps them one filter row at a time, and the matrix
//! products over them ([`super::gemm`]).

use super::gemm::{gemm_packed, gemm_packed_steps, Epilogue, Isa};
use super::matrix::Strided;
use crate::interpreter::reference::conv::ConvGeometry;

/// Fewest values of one filter row's window (`filter_w · in_c`) worth multiplying where the
/// input keeps them: each filter row is then a separate pass over the output tile, whose
/// partial sums go through `C`, which costs more than the gather below this.
const MIN_WINDOW_RUN: usize = 32;

/// Whether [`super::conv::conv_f32`] multiplies the windows that lie inside the image where the input keeps
/// them ([`windowed_rows`]) rather than gathering every window (im2col): each filter row's
/// taps must be adjacent in memory (`dilation_w == 1`, ungrouped) and long enough
/// ([`MIN_WINDOW_RUN`]).
pub(super) fn multiplies_windows_in_place(g: &ConvGeometry) -> bool {
    g.dilation_w == 1 && g.filter_depth == g.in_c && g.filter_w * g.in_c >= MIN_WINDOW_RUN
}

/// Output pixels `p0..p0 + rows` of one image (row-major) times the `nj` packed columns
/// `panel`, into `c` at row stride `ldc`, without copying the windows that lie inside the
/// image: for a run of such pixels in one output row, filter row `fy`'s window is
/// `filter_w · in_c` adjacent input values and the next pixel's starts `stride_w · in_c`
/// further, so each filter row is a strided `A` over depth steps `fy · run..(fy + 1) · run`
/// ([`gemm_packed_steps`]; the indirect convolution's row pointers, computed rather than
/// stored). Pixels whose window crosses the border are gathered (im2col) into `cols` (room
/// for `cap ≥ 1` rows of depth `k`, at most `cap` pixels at a time) and multiplied as in the
/// im2col path. Which way a pixel goes depends on the pixel alone, so the result does not
/// depend on how rows are split; `rows` may span many output rows whatever `cap` is (the
/// runs in place are then whole output rows, not pieces of an im2col block).
#[allow(clippy::too_many_arguments)]
pub(super) fn windowed_rows(
    isa: Isa,
    g: &ConvGeometry,
    image: &[f32],
    p0: usize,
    rows: usize,
    nj: usize,
    k: usize,
    panel: &[f32],
    ep: &Epilogue<'_>,
    c: &mut [f32],
    ldc: usize,
    cols: &mut [f32],
    cap: usize,
) {
    let run = g.filter_w * g.in_c;
    let end = p0 + rows;
    let inside_x = |x: usize| {
        let w = g.col_window(x);
        w.f0 == 0 && w.f1 == g.filter_w
    };
    let mut p = p0;
    while p < end {
        let (oy, ox) = (p / g.out_w, p % g.out_w);
        let row_start = oy * g.out_w;
        let row_end = end.min(row_start + g.out_w);
        let wy = g.row_window(oy);
        let inside_y = wy.f0 == 0 && wy.f1 == g.filter_h;
        let here = inside_y && inside_x(ox);
        let mut q = p + 1;
        while q < row_end && (inside_y && inside_x(q - row_start)) == here {
            q += 1;
        }
        let len = q - p;
        let out = &mut c[(p - p0) * ldc..];
        if inside_y && !here {
            // A border run of a row whose other pixels are multiplied in place: gathered
            // below with the same columns of the chunk's other rows.
        } else if here {
            let x0 = g.col_window(ox).at(0);
            for fy in 0..g.filter_h {
                let a = Strided {
                    data: &image[(wy.at(fy) * g.in_w + x0) * g.in_c..],
                    rs: g.stride_w * g.in_c,
                    cs: 1,
                };
                let steps = fy * run..(fy + 1) * run;
                gemm_packed_steps(isa, len, nj, k, steps, a, panel, ep, out, ldc);
            }
        } else {
            for at in (0..len).step_by(cap) {
                let (piece, out) = (cap.min(len - at), &mut out[at * ldc..]);
                gathered_rows(isa, g, image, 0, p + at, piece, nj, k, panel, ep, out, ldc, cols);
            }
        }
        p = q;
    }
    border_columns(isa, g, image, p0, rows, nj, k, panel, ep, c, ldc, cols, cap);
}

/// The pixels of [`windowed_rows`]' chunk `p0..p0 + rows` on border columns (windows clipped
/// across) of rows whose windows are whole down: gathered column by column, one matrix product
/// over up to `cap` of the chunk's rows at output stride `out_w · ldc` instead of one per pixel (a product of
/// one row is a chain of dependent multiply-adds as long as the depth). Each pixel's products
/// are the gathered path's, so the values do not depend on the grouping.
#[allow(clippy::too_many_arguments)]
fn border_columns(
    isa: Isa,
    g: &ConvGeometry,
    image: &[f32],
    p0: usize,
    rows: usize,
    nj: usize,
    k: usize,
    panel: &[f32],
    ep: &Epilogue<'_>,
    c: &mut [f32],
    ldc: usize,
    cols: &mut [f32],
    cap: usize,
) {
    let end = p0 + rows;
    let (first_y, last_y) = (p0 / g.out_w, (end - 1) / g.out_w);
    let inside_y = |oy: usize| {
        let w = g.row_window(oy);
        w.f0 == 0 && w.f1 == g.filter_h
    };
    for ox in 0..g.out_w {
        let w = g.col_window(ox);
        if w.f0 == 0 && w.f1 == g.filter_w {
            continue;
        }
        // Rows of the chunk holding pixel (oy, ox) with whole vertical windows: an interval
        // (the rows inside are one, the chunk's ends cut at most its first and last row).
        let in_chunk = |oy: usize| (p0..end).contains(&(oy * g.out_w + ox)) && inside_y(oy);
        let Some(lo) = (first_y..=last_y).find(|&oy| in_chunk(oy)) else {
            continue;
        };
        let hi = (lo..=last_y).take_while(|&oy| in_chunk(oy)).last().unwrap_or(lo);
        let mut y = lo;
        while y <= hi {
            let m = cap.min(hi + 1 - y);
            for (i, row) in cols[..m * k].chunks_exact_mut(k).enumerate() {
                im2col(g, image, 0, (y + i) * g.out_w + ox, 1, row);
            }
            let a = Strided {
                data: &cols[..m * k],
                rs: k,
                cs: 1,
            };
            let out = &mut c[(y * g.out_w + ox - p0) * ldc..];
            gemm_packed(isa, m, nj, k, a, panel, ep, out, g.out_w * ldc);
            y += m;
        }
    }
}

/// Output pixels `p0..p0 + rows` of one image times the `nj` packed columns `panel`, into `c`
/// at row stride `ldc`, through their windows over input channels `c0..c0 + filter_depth`
/// gathered (im2col) into `cols` (room for `rows` rows of depth `k`).
#[allow(clippy::too_many_arguments)]
pub(super) fn gathered_rows(
    isa: Isa,
    g: &ConvGeometry,
    image: &[f32],
    c0: usize,
    p0: usize,
    rows: usize,
    nj: usize,
    k: usize,
    panel: &[f32],
    ep: &Epilogue<'_>,
    c: &mut [f32],
    ldc: usize,
    cols: &mut [f32],
) {
    let block = &mut cols[..rows * k];
    im2col(g, image, c0, p0, rows, block);
    let a = Strided {
        data: block,
        rs: k,
        cs: 1,
    };
    gemm_packed(isa, rows, nj, k, a, panel, ep, c, ldc);
}

/// Rows `p0..p0 + rows` (output pixels of one image, row-major) of the im2col matrix: per
/// pixel, the `filter_h · filter_w` taps of input channels `c0..c0 + filter_depth` in OHWI
/// order, zeros where a tap falls in the padding.
pub(super) fn im2col(g: &ConvGeometry, image: &[f32], c0: usize, p0: usize, rows: usize, cols: &mut [f32]) {
    // `c` values a tap copies, `stride` between pixels of the input.
    let (c, stride) = (g.filter_depth, g.in_c);
    let k = g.filter_h * g.filter_w * c;
    let (mut oy, mut ox) = (p0 / g.out_w, p0 % g.out_w);
    let mut wy = g.row_window(oy);
    for row in cols.chunks_exact_mut(k).take(rows) {
        // Taps fx0..fx1 of this column are inside; tap fx reads x0 + fx * dilation.
        let x0 = (ox * g.stride_w) as isize - g.pad_w as isize;
        let (fx0, fx1) = clip(x0, g.filter_w, g.dilation_w, g.in_w);
        for fy in 0..g.filter_h {
            let dst_row = &mut row[fy * g.filter_w * c..][..g.filter_w * c];
            if fy < wy.f0 || fy >= wy.f1 {
                dst_row.fill(0.0);
                continue;
            }
            let src_row = &image[wy.at(fy) * g.in_w * stride..][..g.in_w * stride];
            if fx0 > 0 {
                dst_row[..fx0 * c].fill(0.0);
            }
            if fx1 < g.filter_w {
                dst_row[fx1 * c..].fill(0.0);
            }
            let at = |fx: usize| (x0 + (fx * g.dilation_w) as isize) as usize;
            if g.dilation_w == 1 && c == stride && fx1 > fx0 {
                // Adjacent taps read adjacent input pixels: one run.
                let len = (fx1 - fx0) * c;
                copy(
                    &mut dst_row[fx0 * c..][..len],
                    &src_row[at(fx0) * c..][..len],
                );
            } else {
                for fx in fx0..fx1 {
                    let src = &src_row[at(fx) * stride + c0..][..c];
                    copy(&mut dst_row[fx * c..][..c], src);
                }
            }
        }
        ox += 1;
        if ox == g.out_w {
            ox = 0;
            oy += 1;
            if oy < g.out_h {
                wy = g.row_window(oy);
            }
        }
    }
}

/// Taps `f0..f1` (`f0 <= f1`) of a window starting at `origin` whose coordinate
/// `origin + f * dilation` lies in `0..size`; without a division when `dilation` is 1.
#[inline(always)]
fn clip(origin: isize, filter: usize, dilation: usize, size: usize) -> (usize, usize) {
    let d = dilation as isize;
    let end = size as isize - origin;
    let (f0, f1) = if d == 1 {
        (
            (-origin).max(0) as usize,
            end.clamp(0, filter as isize) as usize,
        )
    } else {
        let f0 = if origin >= 0 {
            0
        } else {
            ((-origin + d - 1) / d) as usize
        };
        let f1 = if end <= 0 {
            0
        } else {
            (((end + d - 1) / d) as usize).min(filter)
        };
        (f0, f1)
    };
    (f0.min(f1), f1)
}

/// `dst.copy_from_slice(src)` without a `memcpy` call for the short runs of images with few
/// channels (a first layer copies runs of 3 to 9 values, where the call costs more than the
/// copy): two fixed-size copies that overlap in the middle (a run of 9 is values 0..8 and
/// 1..9), which compile to a few vector moves; a loop would be turned back into a call.
#[inline(always)]
fn copy(dst: &mut [f32], src: &[f32]) {
    let len = dst.len();
    let src = &src[..len];
    #[inline(always)]
    fn two<const N: usize>(dst: &mut [f32], src: &[f32]) {
        let len = dst.len();
        let head: [f32; N] = src[..N].try_into().expect("N values");
        let tail: [f32; N] = src[len - N..].try_into().expect("N values");
        dst[..N].copy_from_slice(&head);
        dst[len - N..].copy_from_slice(&tail);
    }
    match len {
        0 => {}
        1 => dst[0] = src[0],
        2..=3 => {
            // Values 0, 1 and the last (1 or 2).
            let (a, b, z) = (src[0], src[1], src[len - 1]);
            dst[0] = a;
            dst[1] = b;
            dst[len - 1] = z;
        }
        4..=7 => two::<4>(dst, src),
        8..=15 => two::<8>(dst, src),
        16..=32 => two::<16>(dst, src),
        _ => dst.copy_from_slice(src),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::values;

    #[test]
    fn copy_moves_every_run_length() {
        let src = values(80, 11);
        for len in 0..=70 {
            let mut dst = vec![f32::NAN; len + 2];
            copy(&mut dst[1..=len], &src[3..]);
            assert_eq!(dst[1..=len], src[3..3 + len], "run of {len}");
            assert!(dst[0].is_nan() && dst[len + 1].is_nan(), "run of {len} wrote outside");
        }
    }
}
