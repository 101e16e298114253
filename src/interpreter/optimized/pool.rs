//! Float MAX_POOL_2D and AVERAGE_POOL_2D over whole channel vectors: NHWC keeps a pixel's
//! channels adjacent, so each output pixel folds its clipped window tap by tap into its own
//! output row of channels (one vector operation per 8 channels and tap) instead of walking the
//! window once per channel as the reference loop does.
//!
//! **Same bits as the reference.** Every output value sees the same operations in the same
//! order as [`crate::interpreter::reference::max_pool`] and
//! [`crate::interpreter::reference::pooling`]: a maximum starting at `f32::MIN` that takes a
//! value when it is greater (so NaN never wins, as there), or a sum starting at `0.0` over the
//! window row by row, divided by the count of taps inside the input; then the clamp. Only the
//! loop nest differs, so the results are equal bit for bit on every path.
//!
//! One body serves both paths: [`Isa::avx2`] compiles it again with AVX2 enabled (wider
//! vectors), the scalar path is the baseline target's code.

use super::Isa;
use crate::interpreter::reference::pooling::{window, PoolGeometry};


/// Whether every window of `g` covers at least one input element (an average over an empty
/// window is undefined; the kernel reports it as an error before running).
pub fn windows_cover_input(g: &PoolGeometry) -> bool {
    let rows = (0..g.out_h).all(|o| {
        let (a, b) = window(o, g.stride_h, g.pad_h, g.filter_h, g.in_h);
        b > a
    });
    let cols = (0..g.out_w).all(|o| {
        let (a, b) = window(o, g.stride_w, g.pad_w, g.filter_w, g.in_w);
        b > a
    });
    g.batches == 0 || g.channels == 0 || (rows && cols)
}

/// What a pooling folds over its window.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fold {
    Max,
    Average,
}

/// Output rows `row0..` (row `b * out_h + oy`; as many whole rows of `out_w · channels` values
/// as `output` holds) of float max pooling with clamp: the reference's values bit for bit, and
/// each value is computed alone, so splitting the rows among threads changes nothing.
///
/// # Panics
/// When `input` is shorter than `g` says or the rows run past the output.
pub fn max_pool_f32_rows(
    isa: Isa,
    g: &PoolGeometry,
    input: &[f32],
    act_min: f32,
    act_max: f32,
    row0: usize,
    output: &mut [f32],
) {
    run(isa, Fold::Max, g, input, act_min, act_max, row0, output);
}

/// Output rows `row0..` of float average pooling with clamp, as [`max_pool_f32_rows`]. A
/// window that covers no input element gives NaN; check [`windows_cover_input`] first.
///
/// # Panics
/// As [`max_pool_f32_rows`].
pub fn average_pool_f32_rows(
    isa: Isa,
    g: &PoolGeometry,
    input: &[f32],
    act_min: f32,
    act_max: f32,
    row0: usize,
    output: &mut [f32],
) {
    run(isa, Fold::Average, g, input, act_min, act_max, row0, output);
}

/// Checks that `input` holds `g`'s input and `output_len` values are whole output rows from
/// row `row0` of `g`'s output, for a kernel writing those rows.
///
/// # Panics
/// When they are not (a caller's bug: the kernels slice both from `g`'s shapes).
pub(super) fn assert_rows_fit(
    op: &str,
    g: &PoolGeometry,
    input_len: usize,
    row0: usize,
    output_len: usize,
) {
    let row_len = g.out_w * g.channels;
    let rows = output_len.checked_div(row_len).unwrap_or(0);
    assert!(
        input_len >= g.batches * g.in_h * g.in_w * g.channels
            && rows * row_len == output_len
            && row0 + rows <= g.batches * g.out_h,
        "{op}: slices shorter than {g:?} (rows {row0}+{rows})"
    );
}

#[allow(clippy::too_many_arguments)]
fn run(
    isa: Isa,
    fold: Fold,
    g: &PoolGeometry,
    input: &[f32],
    act_min: f32,
    act_max: f32,
    row0: usize,
    output: &mut [f32],
) {
    assert_rows_fit("pool_f32", g, input.len(), row0, output.len());
    // Below 16 channels a register holds less than one vector's lanes, and the AVX2 loop with
    // the channel count a constant is faster (an average pool over 4 channels: 117 against
    // 127 µs).
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() && g.channels >= 16 {
        // SAFETY: `avx512()` checked the cached detection: the CPU has AVX-512F; the slice
        // lengths were checked above against every index the loop forms.
        unsafe { x86::rows_avx512(fold, g, input, act_min, act_max, row0, output) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2. The body is safe
        // code (bounds-checked slices); only the target feature makes the call unsafe.
        unsafe { rows_avx2(fold, g, input, act_min, act_max, row0, output) };
        return;
    }
    let _ = isa;
    rows_any(fold, g, input, act_min, act_max, row0, output);
}

/// [`rows_body`] with the channel count a constant for the common small counts (the loops
/// over a pixel's channels unroll), else read from `g`.
#[inline(always)]
fn rows_any(
    fold: Fold,
    g: &PoolGeometry,
    input: &[f32],
    act_min: f32,
    act_max: f32,
    row0: usize,
    output: &mut [f32],
) {
    match g.channels {
        1 => rows_body::<1>(fold, g, input, act_min, act_max, row0, output),
        2 => rows_body::<2>(fold, g, input, act_min, act_max, row0, output),
        4 => rows_body::<4>(fold, g, input, act_min, act_max, row0, output),
        8 => rows_body::<8>(fold, g, input, act_min, act_max, row0, output),
        16 => rows_body::<16>(fold, g, input, act_min, act_max, row0, output),
        32 => rows_body::<32>(fold, g, input, act_min, act_max, row0, output),
        _ => rows_body::<0>(fold, g, input, act_min, act_max, row0, output),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn rows_avx2(
    fold: Fold,
    g: &PoolGeometry,
    input: &[f32],
    act_min: f32,
    act_max: f32,
    row0: usize,
    output: &mut [f32],
) {
    rows_any(fold, g, input, act_min, act_max, row0, output);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{window, Fold, PoolGeometry};
    use core::arch::x86_64::*;

    /// [`super::rows_body`] with each pixel's 16-channel blocks (the last masked) folded in a
    /// `zmm` register rather than in the output row: the same operations per value in the
    /// same order (`vmaxps(v, m)` is `v > m ? v : m`, and `max`/`min` against the clamps pass
    /// the clamp for NaN as `f32::max`/`f32::min` do), so the same bits.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `input` holds `batches · in_h · in_w · channels` values, `output`
    /// whole output rows `row0..` inside `batches · out_h`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn rows_avx512(
        fold: Fold,
        g: &PoolGeometry,
        input: &[f32],
        act_min: f32,
        act_max: f32,
        row0: usize,
        output: &mut [f32],
    ) {
        let c = g.channels;
        if c == 0 || g.out_w == 0 {
            return;
        }
        let (lo, hi) = (_mm512_set1_ps(act_min), _mm512_set1_ps(act_max));
        let start = _mm512_set1_ps(match fold {
            Fold::Max => f32::MIN,
            Fold::Average => 0.0,
        });
        let (inp, out) = (input.as_ptr(), output.as_mut_ptr());
        let rows = output.len() / (g.out_w * c);
        for r in 0..rows {
            let (b, oy) = ((row0 + r) / g.out_h, (row0 + r) % g.out_h);
            let (y0, y1) = window(oy, g.stride_h, g.pad_h, g.filter_h, g.in_h);
            for ox in 0..g.out_w {
                let (x0, x1) = window(ox, g.stride_w, g.pad_w, g.filter_w, g.in_w);
                let n = _mm512_set1_ps(((y1 - y0) * (x1 - x0)) as f32);
                let px = (r * g.out_w + ox) * c;
                let mut ch = 0;
                while ch < c {
                    let lanes = (u32::MAX >> (32 - (c - ch).min(16))) as __mmask16;
                    let mut acc = start;
                    for y in y0..y1 {
                        for x in x0..x1 {
                            // SAFETY: `(b, y, x)` is inside the input (clipped windows of an
                            // output row inside `batches · out_h`), the lanes channels below
                            // `c`; masked-off lanes are not read.
                            let v = unsafe {
                                let at = ((b * g.in_h + y) * g.in_w + x) * c + ch;
                                _mm512_maskz_loadu_ps(lanes, inp.add(at))
                            };
                            acc = match fold {
                                Fold::Max => _mm512_max_ps(v, acc),
                                Fold::Average => _mm512_add_ps(acc, v),
                            };
                        }
                    }
                    if fold == Fold::Average {
                        acc = _mm512_div_ps(acc, n);
                    }
                    let v = _mm512_min_ps(_mm512_max_ps(acc, lo), hi);
                    // SAFETY: pixel `ox` of output row `r` has `c` values inside `output`;
                    // only the masked lanes (channels below `c`) are written.
                    unsafe { _mm512_mask_storeu_ps(out.add(px + ch), lanes, v) };
                    ch += 16;
                }
            }
        }
    }
}

/// The loop nest: per output pixel, the output's channel row is the accumulator. `C` is
/// `g.channels` when not 0.
#[inline(always)]
fn rows_body<const C: usize>(
    fold: Fold,
    g: &PoolGeometry,
    input: &[f32],
    act_min: f32,
    act_max: f32,
    row0: usize,
    output: &mut [f32],
) {
    let c = if C == 0 { g.channels } else { C };
    if c == 0 || g.out_w == 0 {
        return;
    }
    for (r, out_row) in output.chunks_exact_mut(g.out_w * c).enumerate() {
        let (b, oy) = ((row0 + r) / g.out_h, (row0 + r) % g.out_h);
        let (y0, y1) = window(oy, g.stride_h, g.pad_h, g.filter_h, g.in_h);
        for (ox, px) in out_row.chunks_exact_mut(c).enumerate() {
            let (x0, x1) = window(ox, g.stride_w, g.pad_w, g.filter_w, g.in_w);
            match fold {
                Fold::Max => px.fill(f32::MIN),
                Fold::Average => px.fill(0.0),
            }
            for y in y0..y1 {
                let line = &input[(b * g.in_h + y) * g.in_w * c..][..g.in_w * c];
                for x in x0..x1 {
                    let src = &line[x * c..][..c];
                    match fold {
                        Fold::Max => {
                            for (m, &v) in px.iter_mut().zip(src) {
                                *m = if v > *m { v } else { *m };
                            }
                        }
                        Fold::Average => {
                            for (a, &v) in px.iter_mut().zip(src) {
                                *a += v;
                            }
                        }
                    }
                }
            }
            match fold {
                Fold::Max => {
                    for m in px.iter_mut() {
                        *m = m.max(act_min).min(act_max);
                    }
                }
                Fold::Average => {
                    let n = ((y1 - y0) * (x1 - x0)) as f32;
                    for a in px.iter_mut() {
                        *a = (*a / n).max(act_min).min(act_max);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::values;
    use crate::interpreter::reference::max_pool::max_pool_f32;
    use crate::interpreter::reference::pooling::average_pool_f32;

    #[test]
    fn equals_the_reference_bit_for_bit() {
        // Channel counts below, at and past a vector; SAME windows clipped at every border,
        // overlapping windows, VALID; bands of rows as threads split them.
        for &(c, f, s, pad, batches) in &[
            (1, 2, 2, 0, 1),
            (16, 2, 2, 0, 2),
            (13, 3, 2, 1, 1),
            (40, 3, 1, 1, 2),
            (5, 4, 3, 2, 1),
            (4, 2, 2, 0, 2),
            (33, 2, 2, 1, 1),
            (64, 3, 3, 0, 1),
        ] {
            let (in_h, in_w) = (9, 11);
            let g = PoolGeometry {
                batches,
                in_h,
                in_w,
                channels: c,
                out_h: (in_h + 2 * pad - f) / s + 1,
                out_w: (in_w + 2 * pad - f) / s + 1,
                filter_h: f,
                filter_w: f,
                stride_h: s,
                stride_w: s,
                pad_h: pad,
                pad_w: pad,
            };
            let mut input = values(batches * in_h * in_w * c, 4);
            input[3] = f32::NAN;
            let len = batches * g.out_h * g.out_w * c;
            let (mut want_max, mut want_avg) = (vec![0.0; len], vec![0.0; len]);
            max_pool_f32(&g, &input, -0.5, 0.75, &mut want_max);
            assert!(average_pool_f32(&g, &input, -0.5, 0.75, &mut want_avg));
            assert!(windows_cover_input(&g));
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for &isa in Isa::available() {
                for band in [1, 2, batches * g.out_h] {
                    let row_len = g.out_w * c;
                    let (mut max, mut avg) = (vec![f32::NAN; len], vec![f32::NAN; len]);
                    for (t, part) in max.chunks_mut(band * row_len).enumerate() {
                        max_pool_f32_rows(isa, &g, &input, -0.5, 0.75, t * band, part);
                    }
                    for (t, part) in avg.chunks_mut(band * row_len).enumerate() {
                        average_pool_f32_rows(isa, &g, &input, -0.5, 0.75, t * band, part);
                    }
                    assert_eq!(bits(&max), bits(&want_max), "max c {c} f {f} on {isa}");
                    assert_eq!(bits(&avg), bits(&want_avg), "avg c {c} f {f} on {isa}");
                }
            }
        }
    }

    #[test]
    fn empty_windows_are_found() {
        let mut g = PoolGeometry {
            batches: 1,
            in_h: 2,
            in_w: 2,
            channels: 1,
            out_h: 2,
            out_w: 2,
            filter_h: 2,
            filter_w: 2,
            stride_h: 1,
            stride_w: 1,
            pad_h: 0,
            pad_w: 0,
        };
        assert!(windows_cover_input(&g));
        g.pad_w = 5;
        assert!(!windows_cover_input(&g));
    }
}
