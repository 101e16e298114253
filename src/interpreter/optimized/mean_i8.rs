//! Quantized (int8, int16) MEAN over one contiguous block of reduced axes
//! ([`blocks`]: global average pooling over height and width, a mean over the last axis)
//! without the reference's per-element index walk: the 32-bit sums row by row, vectorized by
//! the compiler (each body compiled plain and with AVX2), then the reference's rescaling
//! ([`mean_of_sums`]). Wrapping 32-bit addition is associative and commutative, so the sums —
//! and the outputs — are the reference's bit for bit in any order. Other layouts run the
//! reference.

use super::mean::blocks;
use super::Isa;
use crate::interpreter::reference::mean::{
    mean_of_sums, mean_quantized as reference, rescale_sums, ReducePlan,
};
use crate::interpreter::threads::{run_chunks, DisjointMut, TaskRunner};
use crate::interpreter::reference::quant::QuantizedMultiplier;
use crate::interpreter::reference::quantize::QuantInt;

/// The reference's `mean_quantized` on path `isa`: `temp` holds `plan.num_outputs` sums.
#[allow(clippy::too_many_arguments)]
pub fn mean_quantized<T: QuantInt>(
    isa: Isa,
    plan: &ReducePlan,
    input: &[T],
    input_zero_point: i32,
    output_zero_point: i32,
    m: QuantizedMultiplier,
    temp: &mut [i32],
    output: &mut [T],
) {
    let fallback = |temp: &mut [i32], output: &mut [T]| {
        reference(
            plan,
            input,
            input_zero_point,
            output_zero_point,
            m,
            temp,
            output,
        )
    };
    let Some((outer, count, inner)) = blocks(plan) else {
        return fallback(temp, output);
    };
    let n_in = outer.checked_mul(count).and_then(|n| n.checked_mul(inner));
    let n_out = outer.checked_mul(inner);
    let (Some(n_in), Some(n_out)) = (n_in, n_out) else {
        return fallback(temp, output);
    };
    if n_out == 0 || count == 0 || input.len() < n_in || temp.len() < n_out || output.len() < n_out
    {
        return fallback(temp, output);
    }
    let (input, sums) = (&input[..n_in], &mut temp[..n_out]);
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2.
        unsafe { sums_avx2(count, inner, input, sums) };
        return mean_of_sums(plan, input_zero_point, output_zero_point, m, temp, output);
    }
    let _ = isa;
    block_sums(count, inner, input, sums);
    mean_of_sums(plan, input_zero_point, output_zero_point, m, temp, output)
}

/// Input elements per kernel-thread task of [`mean_quantized_split`] at least (~1 µs of sums).
const SPLIT_INPUTS: usize = 16 * 1024;

/// [`mean_quantized`] split into tasks run through `run` on `threads` threads, for one
/// contiguous block of reduced axes ([`blocks`]) of at least [`SPLIT_INPUTS`] inputs a task:
/// by whole outer blocks when there are as many as tasks, else (one outer block: global
/// average pooling) by ranges of the kept inner values (columns), a multiple of 64 each. Each
/// task sums and rescales its own outputs; the bits of one call (each output is its own
/// wrapping sum, rescaled alone). Other plans run [`mean_quantized`] on this thread.
#[allow(clippy::too_many_arguments)]
pub fn mean_quantized_split<T: QuantInt + Send + Sync>(
    isa: Isa,
    plan: &ReducePlan,
    input: &[T],
    input_zero_point: i32,
    output_zero_point: i32,
    m: QuantizedMultiplier,
    temp: &mut [i32],
    output: &mut [T],
    threads: usize,
    run: &mut TaskRunner<'_>,
) {
    let whole = |temp: &mut [i32], output: &mut [T]| {
        mean_quantized(isa, plan, input, input_zero_point, output_zero_point, m, temp, output)
    };
    let Some((outer, count, inner)) = blocks(plan) else {
        return whole(temp, output);
    };
    let sizes = outer
        .checked_mul(count)
        .and_then(|n| n.checked_mul(inner))
        .zip(outer.checked_mul(inner));
    let Some((n_in, n_out)) = sizes else {
        return whole(temp, output);
    };
    let tasks = (n_in / SPLIT_INPUTS).clamp(1, threads.max(1));
    if tasks == 1
        || n_out == 0
        || input.len() < n_in
        || temp.len() < n_out
        || output.len() < n_out
        || (outer < tasks && outer != 1)
    {
        return whole(temp, output);
    }
    let (input, output) = (&input[..n_in], &mut output[..n_out]);
    let sums = DisjointMut::new(&mut temp[..n_out]);
    let (izp, ozp, total) = (input_zero_point, output_zero_point, plan.count);
    if outer >= tasks {
        // Whole outer blocks per task: contiguous inputs, sums and outputs.
        let per = outer.div_ceil(tasks);
        run_chunks(run, output, per * inner, &|k, out| {
            let at = k * per * inner;
            // SAFETY: task `k` runs once per round and alone takes the sums of its outputs
            // `at..at + out.len()` (disjoint from every other task's).
            let s = unsafe { sums.part(at, out.len()) };
            let x = &input[k * per * count * inner..][..out.len() * count];
            block_sums_on(isa, count, inner, x, s);
            rescale_sums(total, izp, ozp, m, s, out);
        });
    } else {
        // One outer block: columns `j0..` of every reduced row per task.
        let cols = inner.div_ceil(tasks).next_multiple_of(64);
        run_chunks(run, output, cols, &|k, out| {
            let j0 = k * cols;
            // SAFETY: task `k` runs once per round and alone takes the sums of its columns
            // `j0..j0 + out.len()` (disjoint from every other task's).
            let s = unsafe { sums.part(j0, out.len()) };
            column_sums_on(isa, inner, j0, input, s);
            rescale_sums(total, izp, ozp, m, s, out);
        });
    }
}

/// [`block_sums`] on path `isa`.
fn block_sums_on<T: QuantInt>(isa: Isa, count: usize, inner: usize, input: &[T], sums: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2.
        return unsafe { sums_avx2(count, inner, input, sums) };
    }
    let _ = isa;
    block_sums(count, inner, input, sums)
}

/// [`column_sums`] on path `isa`.
fn column_sums_on<T: QuantInt>(isa: Isa, inner: usize, j0: usize, input: &[T], sums: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2.
        return unsafe { column_sums_avx2(inner, j0, input, sums) };
    }
    let _ = isa;
    column_sums(inner, j0, input, sums)
}

/// [`column_sums`] compiled with AVX2.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn column_sums_avx2<T: QuantInt>(inner: usize, j0: usize, input: &[T], sums: &mut [i32]) {
    column_sums(inner, j0, input, sums)
}

/// The wrapping 32-bit sums of columns `j0..j0 + sums.len()` of the rows of `inner` values of
/// `input` (one outer block: `[count, inner]`) into `sums`.
#[inline(always)]
fn column_sums<T: QuantInt>(inner: usize, j0: usize, input: &[T], sums: &mut [i32]) {
    sums.fill(0);
    for row in input.chunks_exact(inner) {
        for (a, &x) in sums.iter_mut().zip(&row[j0..]) {
            *a = a.wrapping_add(x.to_i32());
        }
    }
}

/// [`block_sums`] compiled with AVX2.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sums_avx2<T: QuantInt>(count: usize, inner: usize, input: &[T], sums: &mut [i32]) {
    block_sums(count, inner, input, sums)
}

/// The wrapping 32-bit sums of `[outer, count, inner]` `input` over its middle axis into
/// `[outer, inner]` `sums`.
#[inline(always)]
fn block_sums<T: QuantInt>(count: usize, inner: usize, input: &[T], sums: &mut [i32]) {
    if inner == 1 {
        for (s, row) in sums.iter_mut().zip(input.chunks_exact(count)) {
            *s = row.iter().fold(0i32, |a, &x| a.wrapping_add(x.to_i32()));
        }
        return;
    }
    for (acc, block) in sums
        .chunks_exact_mut(inner)
        .zip(input.chunks_exact(count * inner))
    {
        acc.fill(0);
        for row in block.chunks_exact(inner) {
            for (a, &x) in acc.iter_mut().zip(row) {
                *a = a.wrapping_add(x.to_i32());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::mean::reduce_plan;
    use crate::interpreter::reference::quant::quantize_multiplier;
    use crate::test_support::Rng;

    /// Pooling, last-axis, middle-axis, non-contiguous and empty reductions, int8 and int16,
    /// with extreme zero points, on every path: the reference's bits.
    #[test]
    fn every_path_matches_the_reference() {
        let cases: [(&[usize], &[i32]); 7] = [
            (&[1, 7, 9, 16], &[1, 2]),
            (&[2, 5, 5, 37], &[1, 2]),
            (&[3, 4, 33], &[-1]),
            (&[2, 6, 3], &[1]),
            (&[2, 3, 4, 5], &[0, 2]),
            (&[1, 1, 1, 8], &[1, 2]),
            (&[2, 0, 3], &[1]),
        ];
        let mut rng = Rng::new(17);
        for (dims, axes) in cases {
            let plan = reduce_plan(dims, axes).unwrap();
            let n: usize = dims.iter().product();
            let m = quantize_multiplier(0.7311);
            for (izp, ozp) in [(0, 0), (-128, 127), (127, -128), (5, -3)] {
                let x8: Vec<i8> = (0..n).map(|_| rng.next_u64() as i8).collect();
                let x16: Vec<i16> = (0..n).map(|_| rng.next_u64() as i16).collect();
                let outs = plan.num_outputs;
                let (mut t1, mut want8, mut want16) = (vec![0; outs], vec![0i8; outs], vec![0i16; outs]);
                reference(&plan, &x8, izp, ozp, m, &mut t1, &mut want8);
                reference(&plan, &x16, izp, ozp, m, &mut t1, &mut want16);
                for &isa in Isa::available() {
                    let (mut t2, mut got8, mut got16) = (vec![7; outs], vec![9i8; outs], vec![9i16; outs]);
                    mean_quantized(isa, &plan, &x8, izp, ozp, m, &mut t2, &mut got8);
                    mean_quantized(isa, &plan, &x16, izp, ozp, m, &mut t2, &mut got16);
                    assert_eq!(got8, want8, "{dims:?} {axes:?} {izp} {ozp} {isa:?}");
                    assert_eq!(got16, want16, "{dims:?} {axes:?} {izp} {ozp} {isa:?}");
                }
            }
        }
    }

    /// The split over tasks (whole outer blocks, or column ranges of one block: MobileNetV2's
    /// 7 × 7 × 1280 global pooling, odd channel counts, a last range shorter than 64) on every
    /// path and 2 and 3 threads, run for real and in reverse on one thread: the reference's
    /// bits, every output written.
    #[test]
    fn split_matches_the_reference() {
        use crate::interpreter::threads::ThreadPool;
        let cases: [(&[usize], &[i32]); 6] = [
            (&[1, 7, 7, 1280], &[1, 2]),
            (&[1, 13, 11, 403], &[1, 2]),
            (&[1, 9, 9, 1000], &[1, 2]),
            (&[6, 50, 170], &[1]),
            (&[5, 3, 4000], &[1]),
            (&[2, 7, 7, 600], &[1, 2]),
        ];
        let mut pools = [ThreadPool::new(2).unwrap(), ThreadPool::new(3).unwrap()];
        let mut rng = Rng::new(23);
        for (dims, axes) in cases {
            let plan = reduce_plan(dims, axes).unwrap();
            let n: usize = dims.iter().product();
            let m = quantize_multiplier(0.6127);
            let outs = plan.num_outputs;
            for (izp, ozp) in [(-128, 127), (5, -3)] {
                let x8: Vec<i8> = (0..n).map(|_| rng.next_u64() as i8).collect();
                let (mut t1, mut want) = (vec![0; outs], vec![0i8; outs]);
                reference(&plan, &x8, izp, ozp, m, &mut t1, &mut want);
                for &isa in Isa::available() {
                    for pool in pools.iter_mut() {
                        let threads = pool.threads();
                        let (mut t2, mut got) = (vec![7; outs], vec![0x55i8; outs]);
                        mean_quantized_split(
                            isa, &plan, &x8, izp, ozp, m, &mut t2, &mut got, threads,
                            &mut |tasks, f| pool.run(tasks, f),
                        );
                        assert_eq!(got, want, "{dims:?} {isa:?} {threads} threads");
                        let (mut t2, mut got) = (vec![7; outs], vec![0x55i8; outs]);
                        mean_quantized_split(
                            isa, &plan, &x8, izp, ozp, m, &mut t2, &mut got, threads,
                            &mut |tasks, f| (0..tasks).rev().for_each(f),
                        );
                        assert_eq!(got, want, "{dims:?} {isa:?} {threads} tasks in reverse");
                    }
                }
            }
        }
    }
}
