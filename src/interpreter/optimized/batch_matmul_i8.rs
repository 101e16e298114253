//! int8 BATCH_MATMUL (per-tensor scales, no fused activation), bit-exact with
//! [`crate::interpreter::reference::batch_matmul::batch_matmul_i8`] on every path.
//!
//! Per batch index of the broadcast batch dimensions, the right-hand matrix is packed once into
//! caller memory as int32 `rhs[p][j] + rhs_offset` in `[k][n]` order (whatever `adj_y` says),
//! then every output row is one accumulator row `acc[j] = sum_p (lhs[i][p] + lhs_offset) *
//! packed[p][j]`: a broadcast multiply-add over contiguous columns, which the compiler turns into
//! 16 (AVX-512) or 8 (AVX2) lanes per instruction with no horizontal sums, then one vectorised
//! output stage per row ([`super::requant_i8::requantize_row`]). The products and sums wrap in
//! int32 exactly as the reference's do, so summation order does not matter and every output is
//! the reference's; no input range is assumed.
//!
//! Trade-off: the packed right-hand matrix costs `4·k·n` bytes of scratch (plus `4·n` for the
//! accumulator row) instead of reading rhs in place; attention shapes (`k`, `n` of tens) keep it
//! to a few KiB.

use super::requant_i8::{requantize_row, Requant};
use super::Isa;
use crate::interpreter::reference::batch_matmul::{
    BatchMatMulGeometry, BatchMatMulQuant,
};

/// Largest [`scratch_len`] the kernel takes, its buffer on the stack (4 KiB): attention
/// products of up to about 60 × 60 without any arena scratch.
pub const STACK_LEN: usize = 1024;

/// int32 elements of the scratch [`batch_matmul_i8`] needs: the packed rhs and one
/// accumulator row.
pub fn scratch_len(g: &BatchMatMulGeometry) -> usize {
    g.k * g.n + g.n
}

/// `out = requantize((lhs + lhs_offset) · (rhs + rhs_offset))` per batch index, equal to the
/// reference on path `isa`; `scratch` holds at least [`scratch_len`] elements.
pub fn batch_matmul_i8(
    isa: Isa,
    g: &BatchMatMulGeometry,
    q: &BatchMatMulQuant,
    lhs: &[i8],
    rhs: &[i8],
    out: &mut [i8],
    scratch: &mut [i32],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if isa.avx512() {
            // SAFETY: `avx512()` checked the cached detection: the CPU has AVX-512 F/BW.
            unsafe { body_avx512(isa, g, q, lhs, rhs, out, scratch) };
            return;
        }
        if isa.avx2() {
            // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2.
            unsafe { body_avx2(isa, g, q, lhs, rhs, out, scratch) };
            return;
        }
    }
    body(isa, g, q, lhs, rhs, out, scratch);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn body_avx512(
    isa: Isa,
    g: &BatchMatMulGeometry,
    q: &BatchMatMulQuant,
    lhs: &[i8],
    rhs: &[i8],
    out: &mut [i8],
    scratch: &mut [i32],
) {
    body(isa, g, q, lhs, rhs, out, scratch);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn body_avx2(
    isa: Isa,
    g: &BatchMatMulGeometry,
    q: &BatchMatMulQuant,
    lhs: &[i8],
    rhs: &[i8],
    out: &mut [i8],
    scratch: &mut [i32],
) {
    body(isa, g, q, lhs, rhs, out, scratch);
}

/// The loop every path shares, compiled once per target feature set.
#[inline(always)]
fn body(
    isa: Isa,
    g: &BatchMatMulGeometry,
    q: &BatchMatMulQuant,
    lhs: &[i8],
    rhs: &[i8],
    out: &mut [i8],
    scratch: &mut [i32],
) {
    let (m, k, n) = (g.m, g.k, g.n);
    let (packed, acc) = scratch[..k * n + n].split_at_mut(k * n);
    let rq = Requant {
        bias: None,
        multipliers: &[q.multiplier.multiplier],
        shifts: &[q.multiplier.shift_i8()],
        output_offset: q.output_offset,
        act_min: i8::MIN.into(),
        act_max: i8::MAX.into(),
    };
    // Element (i, p) of lhs within one batch is `l[i * a_rs + p * a_cs]`.
    let (a_rs, a_cs) = if g.adj_x { (1, m) } else { (k, 1) };
    let mut packed_batch = usize::MAX;
    let mut o = 0;
    for (lb_index, rb_index) in g.batches() {
                let l = &lhs[lb_index * m * k..][..m * k];
                                // A right-hand matrix shared by consecutive batches is packed once.
                if rb_index != packed_batch {
                    pack_rhs(g, q.rhs_offset, &rhs[rb_index * k * n..][..k * n], packed);
                    packed_batch = rb_index;
                }
                for i in 0..m {
                    acc.fill(0);
                    for p in 0..k {
                        let a = i32::from(l[i * a_rs + p * a_cs]).wrapping_add(q.lhs_offset);
                        let row = &packed[p * n..][..n];
                        for (s, &b) in acc.iter_mut().zip(row) {
                            *s = s.wrapping_add(a.wrapping_mul(b));
                        }
                    }
                    requantize_row(isa, &rq, 0, acc, &mut out[o..o + n]);
                    o += n;
                }
    }
}

/// `packed[p * n + j] = rhs(p, j) + rhs_offset`, rhs stored `[k, n]` or (`adj_y`) `[n, k]`.
#[inline(always)]
fn pack_rhs(g: &BatchMatMulGeometry, rhs_offset: i32, r: &[i8], packed: &mut [i32]) {
    let (k, n) = (g.k, g.n);
    if g.adj_y {
        for (j, col) in r.chunks_exact(k).enumerate() {
            for (p, &v) in col.iter().enumerate() {
                packed[p * n + j] = i32::from(v).wrapping_add(rhs_offset);
            }
        }
    } else {
        for (d, &v) in packed.iter_mut().zip(r) {
            *d = i32::from(v).wrapping_add(rhs_offset);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::batch_matmul::{batch_matmul_i8 as reference, MAX_BATCH_DIMS};
    use crate::interpreter::reference::quant::quantize_multiplier;

    fn values(len: usize, seed: usize, extremes: bool) -> Vec<i8> {
        (0..len)
            .map(|i| {
                if extremes {
                    [i8::MIN, i8::MAX, 0, -1][(i + seed) % 4]
                } else {
                    ((i * 37 + seed * 101) % 256) as u8 as i8
                }
            })
            .collect()
    }

    #[test]
    fn matches_reference_on_every_path() {
        let shapes = [
            // (lhs batch, rhs batch, m, k, n)
            ([1, 1, 2], [1, 1, 2], 16, 16, 16),
            ([1, 2, 3], [1, 1, 3], 7, 19, 18),
            ([1, 1, 1], [1, 1, 1], 1, 1, 1),
            ([2, 1, 1], [1, 1, 1], 3, 33, 17),
            ([1, 1, 1], [1, 1, 4], 5, 2, 31),
        ];
        let params = [
            // (lhs zero point, rhs zero point, output zero point, multiplier)
            (0, 0, 0, 0.01),
            (-128, 127, -128, 0.003),
            (127, -128, 127, 0.9),
            (5, -3, 10, 2.5),
            (-128, -128, 0, 1e-6),
        ];
        for (lbatch, rbatch, m, k, n) in shapes {
            let lcount: usize = lbatch.iter().product();
            let rcount: usize = rbatch.iter().product();
            let ocount = (0..MAX_BATCH_DIMS)
                .map(|i| lbatch[i].max(rbatch[i]))
                .product::<usize>();
            for (adj_x, adj_y) in [(false, false), (true, false), (false, true), (true, true)] {
                let g = BatchMatMulGeometry {
                    lhs_batch: lbatch,
                    rhs_batch: rbatch,
                    m,
                    k,
                    n,
                    adj_x,
                    adj_y,
                };
                for (pi, &(zl, zr, zo, scale)) in params.iter().enumerate() {
                    let extremes = pi % 2 == 1;
                    let lhs = values(lcount * m * k, 1 + pi, extremes);
                    let rhs = values(rcount * k * n, 2 + pi, extremes);
                    let q = BatchMatMulQuant {
                        lhs_offset: -zl,
                        rhs_offset: -zr,
                        output_offset: zo,
                        multiplier: quantize_multiplier(scale),
                    };
                    let mut want = vec![0i8; ocount * m * n];
                    reference(&g, &q, &lhs, &rhs, &mut want);
                    for &isa in Isa::available() {
                        let mut got = vec![0x55i8; want.len()];
                        let mut scratch = vec![-7i32; scratch_len(&g)];
                        batch_matmul_i8(isa, &g, &q, &lhs, &rhs, &mut got, &mut scratch);
                        assert_eq!(
                            got, want,
                            "{isa}: {g:?} zero points {zl}/{zr}/{zo} scale {scale}"
                        );
                    }
                }
            }
        }
    }
}
