//! Optimized int8 FULLY_CONNECTED: the inputs and result of
//! [`reference::fully_connected::fully_connected_i8`](crate::interpreter::reference::fully_connected::fully_connected_i8),
//! bit-exact, with the weights packed beforehand by [`pack_weights`] (the kernel packs constant
//! weights once at prepare).
//!
//! Input rows are widened to `int16` `x + input_offset` in blocks on the stack and multiplied
//! with the packed `[units, depth]` weights by `gemm_i8::gemm_requant`, which requantizes into
//! the output with the reference's `multiply_by_quantized_multiplier`. Weights with a zero
//! point (`weights_offset != 0`, which symmetric int8 models never have) and rows longer than
//! the block ([`PATCH_ELEMS`]) run the reference loop (see [`packs`]).

use super::conv_i8::{in_place_group_len, widen, PATCH_ELEMS};
use super::out_rows::OutRows;
use super::gemm_i8::{
    gemm_requant, group_channels, pack, packed_len, padded, zeroed_prefix,
    STACK_GROUP_BYTES,
};
use super::gemm_i8_dot::gemm_i8_dot;
use super::requant_i8::requantize_row;
use super::requant_i8::Requant;
use super::Isa;
use crate::interpreter::reference::fully_connected::{self as reference, FcQuant};
use core::mem::MaybeUninit;

/// Whether [`fully_connected_i8_with`] runs the packed matrix product for rows of `depth` and
/// weights offset `weights_offset` (else the reference loop, which needs no packed weights).
pub fn packs(depth: usize, weights_offset: i32) -> bool {
    weights_offset == 0 && depth > 0 && padded(depth) <= PATCH_ELEMS
}

/// Bytes of the packed `[units, depth]` weights (0 where [`packs`] is false).
pub fn packed_weights_len(depth: usize, units: usize, weights_offset: i32) -> usize {
    if packs(depth, weights_offset) {
        packed_len(units, depth)
    } else {
        0
    }
}

/// Packs the `[units, depth]` `weights` into `out` (`packed_weights_len` bytes).
///
/// # Panics
/// If `weights` or `out` is shorter than that (a caller's bug: the kernel sizes them).
pub fn pack_weights(
    depth: usize,
    units: usize,
    weights_offset: i32,
    weights: &[i8],
    out: &mut [i8],
) {
    if packs(depth, weights_offset) {
        pack(weights, units, depth, out);
    }
}

/// int8 fully connected on the best path for this CPU: `packed` is `weights` packed by
/// [`pack_weights`].
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_i8(
    batches: usize,
    depth: usize,
    units: usize,
    input: &[i8],
    weights: &[i8],
    packed: &[i8],
    bias: Option<&[i32]>,
    q: &FcQuant<'_>,
    output: &mut [i8],
) {
    fully_connected_i8_with(
        Isa::configured(),
        batches,
        depth,
        units,
        input,
        weights,
        packed,
        bias,
        q,
        output,
    );
}

/// [`fully_connected_i8`] on path `isa` (falling back to [`Isa::Scalar`] where the CPU lacks
/// it).
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_i8_with(
    isa: Isa,
    batches: usize,
    depth: usize,
    units: usize,
    input: &[i8],
    weights: &[i8],
    packed: &[i8],
    bias: Option<&[i32]>,
    q: &FcQuant<'_>,
    output: &mut [i8],
) {
    if !packs(depth, q.weights_offset) {
        reference::fully_connected_i8(batches, depth, units, input, weights, bias, q, output);
        return;
    }
    let stride = padded(depth);
    let rows_per_block = (PATCH_ELEMS / stride).min(batches.max(1));
    let mut patch = [MaybeUninit::<i16>::uninit(); PATCH_ELEMS];
    let patch = zeroed_prefix(&mut patch, rows_per_block * stride);
    // The kernel validates int8 zero points, so the offset fits in 16 bits.
    let offset = q.input_offset as i16;
    let rq = Requant {
        bias,
        multipliers: q.multipliers,
        shifts: q.shifts,
        output_offset: q.output_offset,
        act_min: q.act_min,
        act_max: q.act_max,
    };
    let mut b0 = 0;
    while b0 < batches {
        let rows = (batches - b0).min(rows_per_block);
        for r in 0..rows {
            let src = &input[(b0 + r) * depth..][..depth];
            widen(src, &mut patch[r * stride..][..depth], offset);
        }
        let out = OutRows::new(&mut output[b0 * units..(b0 + rows) * units], units);
        gemm_requant(
            isa,
            &patch[..rows * stride],
            stride,
            rows,
            depth,
            packed,
            units,
            &rq,
            out,
        );
        b0 += rows;
    }
}

/// Input bytes (rows × depth) from which fewer than [`GEMM_MIN_ROWS`] rows take the
/// dot-product tiles ([`gemm_i8_dot`]) rather than one dot product per output: below it the
/// tiles' set-up outweighs what `vpdpbusd` saves (the crossover measured on AVX-512 VNNI is
/// in BENCHMARKS.md).
const DOT_TILES_MIN_DEPTH: usize = 256;

/// Input rows from which [`fully_connected_i8_in_place_with`] packs weight groups (fewer rows
/// take one dot product per output, reading the weights in place).
pub const GEMM_MIN_ROWS: usize = 4;

/// Bytes of scratch [`fully_connected_i8_in_place_with`] needs on `isa` (0: none; also where
/// [`packs`] is false, when the reference loop runs).
pub fn in_place_scratch_len(
    isa: Isa,
    batches: usize,
    depth: usize,
    units: usize,
    weights_offset: i32,
) -> usize {
    if !packs(depth, weights_offset) || batches < GEMM_MIN_ROWS {
        return 0;
    }
    match in_place_group_len(isa, units, depth, false) {
        n if n <= STACK_GROUP_BYTES => 0,
        n => n,
    }
}

/// [`fully_connected_i8_with`] with the `[units, depth]` weights read where they are: fewer
/// than [`GEMM_MIN_ROWS`] rows take exact dot products (dot-product tiles, [`gemm_i8_dot`],
/// on the `avx512vnni` path from [`DOT_TILES_MIN_DEPTH`] input bytes; one dot product per
/// output otherwise); more pack
/// [`group_channels`] units at a time into `scratch` ([`in_place_scratch_len`] bytes) and
/// run every row on that group (on the `avx512vnni` path packed for `vpdpbusd`, see
/// `conv_i8_vnni`). The same bits as the reference.
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_i8_in_place_with(
    isa: Isa,
    batches: usize,
    depth: usize,
    units: usize,
    input: &[i8],
    weights: &[i8],
    scratch: &mut [i8],
    bias: Option<&[i32]>,
    q: &FcQuant<'_>,
    output: &mut [i8],
) {
    if !packs(depth, q.weights_offset) {
        reference::fully_connected_i8(batches, depth, units, input, weights, bias, q, output);
        return;
    }
    let stride = padded(depth);
    let offset = q.input_offset as i16;
    let rq = Requant {
        bias,
        multipliers: q.multipliers,
        shifts: q.shifts,
        output_offset: q.output_offset,
        act_min: q.act_min,
        act_max: q.act_max,
    };
    if batches < GEMM_MIN_ROWS && batches * depth >= DOT_TILES_MIN_DEPTH {
        let out = OutRows::new(&mut output[..], units);
        let (x, rows) = (input, batches);
        if gemm_i8_dot(isa, x, depth, rows, depth, weights, units, q.input_offset, &rq, out) {
            return;
        }
    }
    let mut patch = [MaybeUninit::<i16>::uninit(); PATCH_ELEMS];
    if batches < GEMM_MIN_ROWS {
        let x = zeroed_prefix(&mut patch, depth);
        const CHUNK: usize = 64;
        let mut acc = [0i32; CHUNK];
        for b in 0..batches {
            widen(&input[b * depth..][..depth], x, offset);
            let out = &mut output[b * units..][..units];
            let mut c0 = 0;
            while c0 < units {
                let nc = CHUNK.min(units - c0);
                for (j, a) in acc[..nc].iter_mut().enumerate() {
                    *a = dot(isa, x, &weights[(c0 + j) * depth..][..depth]);
                }
                requantize_row(isa, &rq, c0, &acc[..nc], &mut out[c0..c0 + nc]);
                c0 += nc;
            }
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if super::conv_i8_vnni::fully_connected_rows(
        isa, batches, depth, units, input, weights, scratch, bias, q, output,
    ) {
        return;
    }
    let rows_per_block = (PATCH_ELEMS / stride).min(batches);
    let patch = zeroed_prefix(&mut patch, rows_per_block * stride);
    let group = group_channels(units, depth, false);
    let mut stack = [0i8; STACK_GROUP_BYTES];
    let scratch = if scratch.is_empty() {
        assert!(
            packed_len(group, depth) <= STACK_GROUP_BYTES,
            "fully_connected_i8: no scratch"
        );
        &mut stack[..]
    } else {
        scratch
    };
    let mut j0 = 0;
    while j0 < units {
        let nj = group.min(units - j0);
        pack(&weights[j0 * depth..], nj, depth, scratch);
        let rqj = rq.channels_from(j0);
        let mut b0 = 0;
        while b0 < batches {
            let rows = (batches - b0).min(rows_per_block);
            for r in 0..rows {
                let src = &input[(b0 + r) * depth..][..depth];
                widen(src, &mut patch[r * stride..][..depth], offset);
            }
            let out = OutRows::new(&mut output[b0 * units + j0..(b0 + rows) * units], units);
            gemm_requant(
                isa,
                &patch[..rows * stride],
                stride,
                rows,
                depth,
                scratch,
                nj,
                &rqj,
                out,
            );
            b0 += rows;
        }
        j0 += nj;
    }
}

/// `sum(x[i] * w[i])` in wrapping `i32` (exact for int8 weights and 9-bit activations).
fn dot(isa: Isa, x: &[i16], w: &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2.
        return unsafe { avx2::dot(x, w) };
    }
    dot_portable(x, w)
}

fn dot_portable(x: &[i16], w: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let (xc, xt) = x.split_at(x.len().min(w.len()) / 16 * 16);
    let (wc, wt) = w.split_at(xc.len());
    for (a, b) in xc.chunks_exact(16).zip(wc.chunks_exact(16)) {
        for l in 0..16 {
            acc[l] = acc[l].wrapping_add(i32::from(a[l]) * i32::from(b[l]));
        }
    }
    let mut total = acc.iter().fold(0i32, |s, &v| s.wrapping_add(v));
    for (a, b) in xt.iter().zip(wt) {
        total = total.wrapping_add(i32::from(*a) * i32::from(*b));
    }
    total
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use core::arch::x86_64::*;

    /// `sum(x[i] * w[i])`, 16 at a time with `vpmaddwd` (pair sums of at most 2 * 255 * 128:
    /// exact).
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn dot(x: &[i16], w: &[i8]) -> i32 {
        let n = x.len().min(w.len());
        let mut acc = [_mm256_setzero_si256(); 2];
        let mut i = 0;
        // SAFETY: every load reads elements `i..i + 16 <= n` of both slices.
        unsafe {
            while i + 32 <= n {
                for (h, a) in acc.iter_mut().enumerate() {
                    let at = i + 16 * h;
                    let wv =
                        _mm256_cvtepi8_epi16(_mm_loadu_si128(w.as_ptr().add(at) as *const __m128i));
                    let xv = _mm256_loadu_si256(x.as_ptr().add(at) as *const __m256i);
                    *a = _mm256_add_epi32(*a, _mm256_madd_epi16(xv, wv));
                }
                i += 32;
            }
            while i + 16 <= n {
                let wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(w.as_ptr().add(i) as *const __m128i));
                let xv = _mm256_loadu_si256(x.as_ptr().add(i) as *const __m256i);
                acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(xv, wv));
                i += 16;
            }
        }
        let s = _mm256_add_epi32(acc[0], acc[1]);
        let mut lanes = [0i32; 8];
        // SAFETY: `lanes` holds 8 values.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, s) };
        let mut total = lanes.iter().fold(0i32, |t, &v| t.wrapping_add(v));
        for j in i..n {
            total = total.wrapping_add(i32::from(x[j]) * i32::from(w[j]));
        }
        total
    }
}

