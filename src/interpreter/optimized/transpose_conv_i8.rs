//! Optimized int8 TRANSPOSE_CONV: the output rows of
//! [`reference::transpose_conv::transpose_conv_i8_rows`](crate::interpreter::reference::transpose_conv::transpose_conv_i8_rows),
//! bit-exact, as one convolution per output phase on the AVX-512 VNNI path.
//!
//! Output `(oy, ox)` sums input `(iy, ix)` times tap `(fy, fx)` where
//! `oy = iy * stride_h + fy - pad_h` (and the same across). For a *phase* `(oy mod stride_h,
//! ox mod stride_w)` the taps that can reach it are fixed (`(oy + pad_h - fy)` divisible by the
//! stride): the phase is an ordinary convolution of the input with those taps, whose windows
//! step by one input pixel per `stride` output pixels. Each phase runs as the indirect
//! convolution of [`conv_grouped`](super::conv_grouped) (one group): a table of input-pixel
//! pointers per output pixel and phase tap (a row of the input zero point where the tap falls
//! outside the input, which adds nothing), each phase's taps packed per call into a stack buffer
//! in the `vpdpbusd` layout, accumulators starting at `(input_offset - 128) * sum(w) + bias`
//! over the phase's taps. No scatter, no `int32` scratch, nothing in the arena.
//!
//! Other paths (and layers outside [`fits`]: input channels not a multiple of 4, more than
//! [`MAX_IN_C`], packed taps over the stack buffer) run the reference loop.

use super::Isa;
use crate::interpreter::reference::transpose_conv::{
    transpose_conv_i8_rows, TransposeConvGeometry, TransposeConvQuant,
};

/// Output channels per panel.
const LANES: usize = 16;
/// Bytes of all phases' packed taps (on the stack).
const PACK_BYTES: usize = 32 * 1024;
/// Phases (`stride_h * stride_w`) at most.
const MAX_PHASES: usize = 16;
/// Panels (output channels / 16, rounded up) at most.
const MAX_PANELS: usize = 16;
/// Input channels at most (the zero-point row lives on the stack).
const MAX_IN_C: usize = 1024;
/// Taps of one phase at most (`filter_h * filter_w` bounds them).
const MAX_TAPS: usize = 64;

/// Whether the VNNI body runs `g`.
fn fits(g: &TransposeConvGeometry) -> bool {
    let taps = g.filter_h * g.filter_w;
    let panels = g.out_c.div_ceil(LANES);
    g.in_c > 0
        && g.in_c.is_multiple_of(4)
        && g.in_c <= MAX_IN_C
        && (1..=MAX_TAPS).contains(&taps)
        && (1..=MAX_PANELS).contains(&panels)
        && g.stride_h * g.stride_w <= MAX_PHASES
        && g.stride_h > 0
        && g.stride_w > 0
        && taps * g.in_c * panels * LANES <= PACK_BYTES
}

/// Output rows `row0..` (row `b * out_h + oy`, whole rows of `out_w * out_c` values) of the
/// int8 transpose convolution on path `isa`: `bias` has `out_c` values or is empty. The same
/// bits as the reference on every path (integer sums are exact).
#[allow(clippy::too_many_arguments)]
pub fn transpose_conv_i8_rows_with(
    isa: Isa,
    g: &TransposeConvGeometry,
    q: &TransposeConvQuant<'_>,
    input: &[i8],
    filter: &[i8],
    bias: &[i32],
    row0: usize,
    output: &mut [i8],
) {
    let row_len = g.out_w * g.out_c;
    #[cfg(target_arch = "x86_64")]
    if isa.avx512vnni()
        && fits(g)
        && row_len > 0
        && output.len().is_multiple_of(row_len)
        && (row0 + output.len() / row_len) <= g.batches * g.out_h
        && input.len() >= g.batches * g.in_h * g.in_w * g.in_c
        && filter.len() >= g.out_c * g.filter_h * g.filter_w * g.in_c
        && (bias.is_empty() || bias.len() >= g.out_c)
        && q.multipliers.len() >= g.out_c
        && q.shifts.len() >= g.out_c
    {
        let rq = super::requant_i8::Requant {
            bias: None,
            multipliers: q.multipliers,
            shifts: q.shifts,
            output_offset: q.output_offset,
            act_min: q.act_min,
            act_max: q.act_max,
        };
        // SAFETY: `avx512vnni()` checked the cached detection; `g` is inside `fits` and the
        // slices hold what it needs (checked above).
        unsafe { avx512::run(g, q.input_offset, &rq, input, filter, bias, row0, output) };
        return;
    }
    let _ = (isa, fits);
    transpose_conv_i8_rows(g, q, input, filter, bias, row0, output);
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{TransposeConvGeometry, LANES, MAX_IN_C, MAX_PANELS, MAX_PHASES, MAX_TAPS};
    use super::PACK_BYTES;
    use crate::interpreter::optimized::conv_grouped::avx512::{pack_quads, store, Tile};
    use crate::interpreter::optimized::requant_i8::avx512::Stage16;
    use crate::interpreter::optimized::requant_i8::Requant;
    use core::arch::x86_64::*;
    use core::mem::MaybeUninit;

    /// Output pixels per tile.
    const TILE_ROWS: usize = 8;

    /// The taps `f` (ascending) of a phase `o` along one axis: `(o + pad - f)` divisible by
    /// `stride`.
    fn phase_taps(
        o: usize,
        pad: usize,
        stride: usize,
        filter: usize,
    ) -> impl Iterator<Item = usize> + Clone {
        (0..filter).filter(move |&f| (o + pad + stride * filter - f).is_multiple_of(stride))
    }

    /// The input index of output `o` through tap `f` (a tap of `o`'s phase), if inside `len`.
    #[inline]
    fn source(o: usize, f: usize, stride: usize, pad: usize, len: usize) -> Option<usize> {
        let t = (o + pad).checked_sub(f)?;
        (t / stride < len).then_some(t / stride)
    }

    /// # Safety
    /// The CPU supports AVX-512 F/BW/DQ/VL and VNNI; `g` is inside `fits`; the slices hold
    /// what `g` needs for output rows `row0..row0 + output.len() / (out_w * out_c)`.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn run(
        g: &TransposeConvGeometry,
        input_offset: i32,
        rq: &Requant<'_>,
        input: &[i8],
        filter: &[i8],
        bias: &[i32],
        row0: usize,
        output: &mut [i8],
    ) {
        let (ic, oc) = (g.in_c, g.out_c);
        let k = g.filter_h * g.filter_w * ic;
        let icq = ic / 4;
        let panels = oc.div_ceil(LANES);
        let phases = g.stride_h * g.stride_w;
        // Phase `ph`'s panels, one after another (`start[ph]`: its first quad), each panel its
        // taps' quads in filter order.
        let mut packed = [MaybeUninit::<__m512i>::uninit(); PACK_BYTES / 64];
        let mut inits = [MaybeUninit::<__m512i>::uninit(); MAX_PHASES * MAX_PANELS];
        let mut start = [0usize; MAX_PHASES];
        let scale = _mm512_set1_epi32(input_offset.wrapping_sub(128));
        let mut at = 0;
        for ph in 0..phases {
            let (py, px) = (ph / g.stride_w, ph % g.stride_w);
            start[ph] = at;
            for p in 0..panels {
                let c0 = p * LANES;
                let lanes = LANES.min(oc - c0);
                let mask = ((1u32 << lanes) - 1) as __mmask16;
                let mut s = _mm512_setzero_si512();
                for fy in phase_taps(py, g.pad_h, g.stride_h, g.filter_h) {
                    for fx in phase_taps(px, g.pad_w, g.stride_w, g.filter_w) {
                        let j0 = (fy * g.filter_w + fx) * icq;
                        s = pack_quads(filter, k, c0, mask, j0, &mut packed[at..at + icq], s);
                        at += icq;
                    }
                }
                let mut v = _mm512_mullo_epi32(s, scale);
                if !bias.is_empty() {
                    // SAFETY: `bias` holds `oc >= c0 + lanes` values; masked-off lanes are
                    // not read.
                    v = _mm512_add_epi32(v, _mm512_maskz_loadu_epi32(mask, bias.as_ptr().add(c0)));
                }
                inits[ph * panels + p].write(v);
            }
        }
        // SAFETY: the loops above wrote `at` quads and `phases * panels` initial
        // accumulators; `MaybeUninit<__m512i>` has `__m512i`'s layout.
        let packed: &[__m512i] = core::slice::from_raw_parts(packed.as_ptr().cast(), at);
        let inits: &[__m512i] =
            core::slice::from_raw_parts(inits.as_ptr().cast(), phases * panels);
        let mut pad = [0i8; MAX_IN_C];
        pad[..ic].fill(input_offset.wrapping_neg() as i8);
        let mut stages: [Option<Stage16>; MAX_PANELS] = [const { None }; MAX_PANELS];
        for (p, s) in stages[..panels].iter_mut().enumerate() {
            let c0 = p * LANES;
            *s = Stage16::new(rq, c0, LANES.min(oc - c0));
        }
        let row_len = g.out_w * oc;
        let mut table = [pad.as_ptr(); TILE_ROWS * MAX_TAPS];
        for (r, out_row) in output.chunks_exact_mut(row_len).enumerate() {
            let (b, oy) = ((row0 + r) / g.out_h, (row0 + r) % g.out_h);
            let py = oy % g.stride_h;
            // The input row of each of the phase's vertical taps (`None`: outside the input).
            let mut rows = [None; MAX_TAPS];
            let mut ny = 0;
            for fy in phase_taps(py, g.pad_h, g.stride_h, g.filter_h) {
                rows[ny] = source(oy, fy, g.stride_h, g.pad_h, g.in_h);
                ny += 1;
            }
            let rows = &rows[..ny];
            for px in 0..g.stride_w.min(g.out_w) {
                let ph = py * g.stride_w + px;
                // Output column `px + j * stride_w` reads input column `j + first[t]` through
                // the phase's horizontal tap `t` (`px + pad_w - fx` is a multiple of the stride).
                let mut first = [0isize; MAX_TAPS];
                let mut nx = 0;
                for fx in phase_taps(px, g.pad_w, g.stride_w, g.filter_w) {
                    // `px + pad_w` and `fx` agree modulo the stride: the quotients' difference.
                    first[nx] = ((px + g.pad_w) / g.stride_w) as isize - (fx / g.stride_w) as isize;
                    nx += 1;
                }
                let first = &first[..nx];
                let taps = ny * nx;
                // Output columns `px, px + stride_w, ..`.
                let cols = (g.out_w - px).div_ceil(g.stride_w);
                let mut x0 = 0;
                while x0 < cols {
                    let nr = (cols - x0).min(TILE_ROWS);
                    let mut t = 0;
                    for j in x0..x0 + nr {
                        for &iy in rows {
                            for &f in first {
                                let ix = j as isize + f;
                                table[t] = match iy {
                                    Some(iy) if (0..g.in_w as isize).contains(&ix) => {
                                        let at = (b * g.in_h + iy) * g.in_w + ix as usize;
                                        input[at * ic..][..ic].as_ptr()
                                    }
                                    _ => pad.as_ptr(),
                                };
                                t += 1;
                            }
                        }
                    }
                    let ox0 = px + x0 * g.stride_w;
                    let mut w0 = start[ph];
                    for (p, stage) in stages[..panels].iter().enumerate() {
                        let c0 = p * LANES;
                        let lanes = LANES.min(oc - c0);
                        let tile = Tile {
                            table: &table[..nr * taps],
                            taps,
                            fd: ic,
                            first_group: 0,
                            quads: taps * icq,
                            w: &packed[w0..w0 + taps * icq],
                            init: inits[ph * panels + p],
                        };
                        w0 += taps * icq;
                        let out = &mut out_row[ox0 * oc + c0..];
                        let stride = g.stride_w * oc;
                        macro_rules! run {
                            ($($r:literal),*) => {
                                match nr {
                                    $($r => {
                                        let acc = tile.acc::<$r>();
                                        store(&acc, stage, rq, out, stride, c0, lanes);
                                    })*
                                    _ => unreachable!("tiles have 1..=TILE_ROWS rows"),
                                }
                            };
                        }
                        run!(1, 2, 3, 4, 5, 6, 7, 8);
                    }
                    x0 += nr;
                }
            }
        }
    }
}
