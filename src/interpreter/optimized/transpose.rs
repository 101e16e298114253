//! TRANSPOSE without an index computation per element. The plan is first coalesced
//! ([`coalesce`]: size-1 dimensions dropped, neighbours merged where the input is contiguous
//! across them), which leaves one of three shapes:
//! - the innermost output dimension has input stride 1: each output row is a contiguous run of
//!   the input, copied with `copy_from_slice` (e.g. `[b, s, h, d] → [b, h, s, d]`);
//! - the second innermost has input stride 1: each pair of inner dimensions is a 2-D transpose,
//!   done in 8 × 8 tiles so reads and writes stay within a few cache lines (for 4-byte elements
//!   on the AVX2 path and above, a tile is eight loads, an in-register transpose and eight stores);
//!   with two to four output columns (NCHW → NHWC of a few channels), whole planes are
//!   interleaved instead of tiled;
//! - otherwise the reference loop.
//!
//! Elements are only moved, so the output equals the reference's bit for bit on every path.

use super::Isa;
use crate::interpreter::reference::transpose::{transpose as reference, TransposePlan, MAX_DIMS};

/// `plan` with size-1 dimensions dropped and adjacent output dimensions merged where the outer
/// one's input stride is the inner one's stride times its size; left-extended with size-1
/// dimensions again. The same permutation of the same elements.
pub fn coalesce(plan: &TransposePlan) -> TransposePlan {
    let mut dims = [1usize; MAX_DIMS];
    let mut strides = [0usize; MAX_DIMS];
    let mut len = 0;
    for (&d, &s) in plan.out_dims.iter().zip(&plan.in_strides) {
        if d == 1 {
            continue;
        }
        if len > 0 && strides[len - 1] == s * d {
            dims[len - 1] *= d;
            strides[len - 1] = s;
        } else {
            dims[len] = d;
            strides[len] = s;
            len += 1;
        }
    }
    let mut out = TransposePlan {
        out_dims: [1; MAX_DIMS],
        in_strides: [0; MAX_DIMS],
    };
    out.out_dims[MAX_DIMS - len..].copy_from_slice(&dims[..len]);
    out.in_strides[MAX_DIMS - len..].copy_from_slice(&strides[..len]);
    out
}

/// Writes the transposed input into `output`, as [`reference`] does, for a plan from
/// [`coalesce`] (any plan gives the right result; a coalesced one takes the fast shapes).
pub fn transpose<T: Copy>(isa: Isa, plan: &TransposePlan, input: &[T], output: &mut [T]) {
    let [d0, d1, d2, d3, d4, d5] = plan.out_dims;
    let [s0, s1, s2, s3, s4, s5] = plan.in_strides;
    let total: usize = plan.out_dims.iter().product();
    let extent = plan
        .out_dims
        .iter()
        .zip(&plan.in_strides)
        .map(|(&d, &s)| (d - 1) * s)
        .sum::<usize>()
        + 1;
    let fast = total > 0 && output.len() >= total && input.len() >= extent;
    if !fast || (s5 != 1 && s4 != 1) {
        reference(plan, input, output);
        return;
    }
    let block = d4 * d5;
    let mut o = 0;
    for a in 0..d0 {
        for b in 0..d1 {
            for c in 0..d2 {
                for d in 0..d3 {
                    let base = a * s0 + b * s1 + c * s2 + d * s3;
                    let out = &mut output[o..o + block];
                    if s5 == 1 {
                        for (e, row) in out.chunks_exact_mut(d5).enumerate() {
                            let start = base + e * s4;
                            row.copy_from_slice(&input[start..start + d5]);
                        }
                    } else {
                        transpose_2d(isa, d4, d5, s5, &input[base..], out);
                    }
                    o += block;
                }
            }
        }
    }
}

/// The outermost dimension of a plan from [`coalesce`] with more than one index, as
/// `(axis, size)` (`(MAX_DIMS − 1, 1)` for a single element): the dimension a task split cuts
/// into bands ([`transpose_band`]).
pub fn outer_axis(plan: &TransposePlan) -> (usize, usize) {
    let axis = plan
        .out_dims
        .iter()
        .position(|&d| d > 1)
        .unwrap_or(MAX_DIMS - 1);
    (axis, plan.out_dims[axis])
}

/// The band of [`transpose`]'s output that starts at index `first` of the outer dimension
/// `axis` ([`outer_axis`]) and fills `part` (whole indices of that dimension): a band of the
/// outermost dimension is itself a transpose, of fewer indices, from the input shifted by
/// `first` times that dimension's stride. Bands written separately equal the whole call.
pub fn transpose_band<T: Copy>(
    isa: Isa,
    plan: &TransposePlan,
    axis: usize,
    first: usize,
    input: &[T],
    part: &mut [T],
) {
    let inner: usize = plan.out_dims[axis + 1..].iter().product();
    let mut band = *plan;
    band.out_dims[axis] = part.len() / inner.max(1);
    let start = (first * plan.in_strides[axis]).min(input.len());
    transpose(isa, &band, &input[start..], part);
}

/// Tile side of [`transpose_2d`].
const TILE: usize = 8;

/// `out[e · cols + f] = input[e + f · stride]` for `e < rows`, `f < cols`, in tiles.
/// `input` holds at least `(rows − 1) + (cols − 1) · stride + 1` elements.
fn transpose_2d<T: Copy>(
    isa: Isa,
    rows: usize,
    cols: usize,
    stride: usize,
    input: &[T],
    out: &mut [T],
) {
    // A few output columns (e.g. NCHW → NHWC of a 3-channel image): interleave whole planes.
    match cols {
        2 => return interleave::<T, 2>(rows, stride, input, out),
        3 => {
            // Whole groups of 16 pixels through byte shuffles, the rest below.
            #[cfg(target_arch = "x86_64")]
            let done = x86::interleave3_bytes(isa, rows, stride, input, out);
            #[cfg(not(target_arch = "x86_64"))]
            let done = 0;
            let rest = &mut out[done * 3..];
            return interleave::<T, 3>(rows - done, stride, &input[done..], rest);
        }
        4 => return interleave::<T, 4>(rows, stride, input, out),
        _ => {}
    }
    for e0 in (0..rows).step_by(TILE) {
        for f0 in (0..cols).step_by(TILE) {
            let (er, fr) = ((rows - e0).min(TILE), (cols - f0).min(TILE));
            #[cfg(target_arch = "x86_64")]
            if er == TILE && fr == TILE && x86::tile_f32(isa, e0, f0, cols, stride, input, out) {
                continue;
            }
            for e in e0..e0 + er {
                let row = &mut out[e * cols + f0..][..fr];
                for (k, o) in row.iter_mut().enumerate() {
                    *o = input[e + (f0 + k) * stride];
                }
            }
        }
    }
    let _ = isa;
}

/// [`transpose_2d`] with `N` columns: `out[e · N + f] = plane f [e]`, plane `f` being the
/// `rows` elements at `f · stride`. Each output row is `N` loads from slices bounded once, so
/// the loop has no index checks (a tiled loop would do 8 × N scalar moves per tile instead).
fn interleave<T: Copy, const N: usize>(rows: usize, stride: usize, input: &[T], out: &mut [T]) {
    let planes: [&[T]; N] = core::array::from_fn(|f| &input[f * stride..][..rows]);
    for (e, pixel) in out[..rows * N].chunks_exact_mut(N).enumerate() {
        for (o, plane) in pixel.iter_mut().zip(&planes) {
            *o = plane[e];
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Isa, TILE};
    use core::arch::x86_64::*;
    use core::mem::{align_of, size_of};

    /// The full tile at `(e0, f0)` of [`super::transpose_2d`] through AVX2 registers, when the
    /// element is 4 bytes and the path has AVX2; `false` (nothing written) otherwise.
    #[inline(always)]
    pub(super) fn tile_f32<T: Copy>(
        isa: Isa,
        e0: usize,
        f0: usize,
        cols: usize,
        stride: usize,
        input: &[T],
        out: &mut [T],
    ) -> bool {
        if size_of::<T>() != 4 || align_of::<T>() > 4 || !isa.avx2() {
            return false;
        }
        // The tile's last input and output elements lie inside the slices.
        let last_in = e0 + TILE - 1 + (f0 + TILE - 1) * stride;
        let last_out = (e0 + TILE - 1) * cols + f0 + TILE - 1;
        if last_in >= input.len() || last_out >= out.len() {
            return false;
        }
        // SAFETY: AVX2 checked above; `T` is 4 bytes, so the casts address the same bytes,
        // and every row the tile reads (`e0..e0 + 8` at `f · stride`) or writes
        // (`f0..f0 + 8` at `e · cols`) ends at or before the checked last elements. The tile
        // only moves bits (no float arithmetic), so any 4-byte `T` round-trips.
        unsafe {
            tile8(
                input.as_ptr().cast::<f32>().add(e0 + f0 * stride),
                stride,
                out.as_mut_ptr().cast::<f32>().add(e0 * cols + f0),
                cols,
            )
        };
        true
    }

    /// Interleaves the first `rows / 16 * 16` pixels of three byte planes (`out[3e + f] =
    /// input[e + f · stride]`) with byte shuffles, when `T` is one byte and the path has AVX2;
    /// returns the pixels written (0 otherwise). `input` and `out` are as
    /// [`super::interleave`]'s for `N = 3`.
    #[inline(always)]
    pub(super) fn interleave3_bytes<T: Copy>(
        isa: Isa,
        rows: usize,
        stride: usize,
        input: &[T],
        out: &mut [T],
    ) -> usize {
        let groups = rows / 16;
        if size_of::<T>() != 1 || !isa.avx2() || groups == 0 {
            return 0;
        }
        let (planes, out) = (&input[..2 * stride + rows], &mut out[..3 * rows]);
        // SAFETY: AVX2 (which includes SSSE3) checked above; `T` is one byte; the three planes
        // (`f · stride + e` for `e < rows`) lie in `planes` and the `3 · rows` output bytes in
        // `out`, both bounded by the slicing above, and the loop reads and writes only whole
        // groups of 16 pixels below `rows`.
        unsafe { interleave3(groups, stride, planes.as_ptr().cast(), out.as_mut_ptr().cast()) };
        groups * 16
    }

    /// `groups` groups of 16 pixels: for each, 16 bytes of each plane in, 48 bytes out, each
    /// output vector the OR of three shuffles (a shuffle index with the top bit set gives 0).
    ///
    /// # Safety
    /// The CPU has AVX2; `src + f · stride + e` is readable and `dst + 3e + f` writable for
    /// `f < 3`, `e < 16 · groups`.
    #[target_feature(enable = "avx2")]
    unsafe fn interleave3(groups: usize, stride: usize, src: *const u8, dst: *mut u8) {
        // masks[k][f][j]: for output byte `16k + j` (pixel `(16k + j) / 3`, plane
        // `(16k + j) % 3`), the pixel when it comes from plane `f`, else 0x80.
        let masks: [[__m128i; 3]; 3] = core::array::from_fn(|k| {
            core::array::from_fn(|f| {
                let bytes: [u8; 16] = core::array::from_fn(|j| {
                    let g = 16 * k + j;
                    if g % 3 == f {
                        (g / 3) as u8
                    } else {
                        0x80
                    }
                });
                // SAFETY: 16 readable bytes; unaligned load.
                unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
            })
        });
        for g in 0..groups {
            let e = 16 * g;
            // SAFETY: the caller guarantees pixels `e..e + 16` of each plane and output bytes
            // `3e..3e + 48`.
            unsafe {
                let planes: [__m128i; 3] =
                    core::array::from_fn(|f| _mm_loadu_si128(src.add(f * stride + e).cast()));
                for (k, mask) in masks.iter().enumerate() {
                    let v = _mm_or_si128(
                        _mm_or_si128(
                            _mm_shuffle_epi8(planes[0], mask[0]),
                            _mm_shuffle_epi8(planes[1], mask[1]),
                        ),
                        _mm_shuffle_epi8(planes[2], mask[2]),
                    );
                    _mm_storeu_si128(dst.add(3 * e + 16 * k).cast(), v);
                }
            }
        }
    }

    /// Transposes the 8 × 8 block of rows `src + r · src_stride` into rows
    /// `dst + c · dst_stride`.
    ///
    /// # Safety
    /// The CPU has AVX2; the eight 8-element rows at `src` and at `dst` are valid.
    #[target_feature(enable = "avx2")]
    unsafe fn tile8(src: *const f32, src_stride: usize, dst: *mut f32, dst_stride: usize) {
        // SAFETY: the caller guarantees the eight source rows.
        let r: [__m256; 8] =
            core::array::from_fn(|i| unsafe { _mm256_loadu_ps(src.add(i * src_stride)) });
        let rows = super::super::pack::x86::transpose8!(r);
        for (c, v) in rows.into_iter().enumerate() {
            // SAFETY: the caller guarantees the eight destination rows.
            unsafe { _mm256_storeu_ps(dst.add(c * dst_stride), v) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every permutation of a few shapes with size-1 dimensions, odd sizes and exact tiles, for
    /// 4-byte and 1-byte elements, on every path: equal to the reference.
    #[test]
    fn every_path_matches_the_reference() {
        let shapes: [&[usize]; 8] = [
            &[1, 3, 37, 11],
            &[2, 4, 5, 2],
            &[1, 64, 4, 24],
            &[2, 9, 17],
            &[16, 24],
            &[3, 1, 5, 8, 2],
            &[1, 1, 1],
            &[2, 3, 2, 3, 2, 3],
        ];
        for dims in shapes {
            let rank = dims.len();
            let n: usize = dims.iter().product();
            let input: Vec<i32> = (0..n as i32).map(|v| v * 7 - 3).collect();
            let bytes: Vec<i8> = input.iter().map(|&v| v as i8).collect();
            let mut perm: Vec<i32> = (0..rank as i32).collect();
            // All permutations (Heap's algorithm, iterative).
            let mut c = vec![0usize; rank];
            let check = |perm: &[i32]| {
                let plan = TransposePlan::new(dims, perm).unwrap();
                let mut want = vec![0i32; n];
                reference(&plan, &input, &mut want);
                let mut want8 = vec![0i8; n];
                reference(&plan, &bytes, &mut want8);
                let fast = coalesce(&plan);
                for &isa in Isa::available() {
                    let mut got = vec![i32::MIN; n];
                    transpose(isa, &fast, &input, &mut got);
                    assert_eq!(got, want, "{dims:?} {perm:?} {isa:?}");
                    let mut got8 = vec![0i8; n];
                    transpose(isa, &fast, &bytes, &mut got8);
                    assert_eq!(got8, want8, "{dims:?} {perm:?} {isa:?} i8");
                }
            };
            check(&perm);
            let mut i = 0;
            while i < rank {
                if c[i] < i {
                    perm.swap(if i % 2 == 0 { 0 } else { c[i] }, i);
                    check(&perm);
                    c[i] += 1;
                    i = 0;
                } else {
                    c[i] = 0;
                    i += 1;
                }
            }
        }
    }

    /// Bands of the outer dimension, of every length, written separately equal the whole
    /// call (the kernel threads' split), on every path and for 1- and 4-byte elements.
    #[test]
    fn bands_equal_the_whole() {
        let cases: [(&[usize], &[i32]); 4] = [
            (&[1, 3, 37, 11], &[0, 2, 3, 1]),
            (&[2, 9, 17], &[2, 0, 1]),
            (&[40, 24], &[1, 0]),
            (&[3, 5, 8], &[0, 2, 1]),
        ];
        for (dims, perm) in cases {
            let n: usize = dims.iter().product();
            let input: Vec<i32> = (0..n as i32).map(|v| v * 5 + 1).collect();
            let bytes: Vec<i8> = input.iter().map(|&v| v as i8).collect();
            let plan = coalesce(&TransposePlan::new(dims, perm).unwrap());
            let (axis, count) = outer_axis(&plan);
            let inner = n / count;
            for &isa in Isa::available() {
                let mut want = vec![0i32; n];
                transpose(isa, &plan, &input, &mut want);
                let mut want8 = vec![0i8; n];
                transpose(isa, &plan, &bytes, &mut want8);
                for band in 1..=count {
                    let mut got = vec![i32::MIN; n];
                    for (t, part) in got.chunks_mut(band * inner).enumerate() {
                        transpose_band(isa, &plan, axis, t * band, &input, part);
                    }
                    assert_eq!(got, want, "{dims:?} {perm:?} band {band} {isa:?}");
                    let mut got8 = vec![0i8; n];
                    for (t, part) in got8.chunks_mut(band * inner).enumerate() {
                        transpose_band(isa, &plan, axis, t * band, &bytes, part);
                    }
                    assert_eq!(got8, want8, "{dims:?} {perm:?} band {band} {isa:?} i8");
                }
            }
        }
    }

    #[test]
    fn coalesces_contiguous_dimensions() {
        // [1, 64, 4, 24] with (0, 2, 3, 1): a 96 × 64 transpose.
        let plan = TransposePlan::new(&[1, 64, 4, 24], &[0, 2, 3, 1]).unwrap();
        let c = coalesce(&plan);
        assert_eq!(c.out_dims, [1, 1, 1, 1, 96, 64]);
        assert_eq!(c.in_strides, [0, 0, 0, 0, 1, 96]);
        // The identity is one run.
        let plan = TransposePlan::new(&[2, 3, 4], &[0, 1, 2]).unwrap();
        assert_eq!(coalesce(&plan).out_dims, [1, 1, 1, 1, 1, 24]);
    }
}
