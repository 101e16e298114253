//! The passes of several channel groups ([`groups`](super::groups)) on a zero-point-padded copy
//! of their input channels: every window lies inside the copy, so every pixel runs the inside
//! loop with fixed tap offsets and no border pixel needs its tap pointers found.
//!
//! Invariant: a layer uses the copy when its border pixels (windows that leave the input) are
//! at least an eighth of its input pixels ([`Padded::pays`]) and a pass's padded image of one
//! batch (`ph × pw` pixels of `G * LANES` bytes) fits the [`PADDED_BYTES`] (32 KiB) stack
//! buffer ([`Padded::fits`]); other passes find border pixels' tap pointers as before. The
//! padding holds the input zero point, on which a tap adds `w (zp + offset) = 0`, as the
//! reference's skipped tap.
//!
//! Trade-off: the copy costs one masked load and store per 32 channels of each input pixel the
//! pass reads, plus filling the buffer with the zero point once per layout; a border pixel
//! costs its pointers (one select per tap) and loads once per pass. On small maps (7 × 7,
//! 14 × 14, person_detect's layers) border pixels are a large share and the copy pays; on large
//! maps it would not, and their images would not fit the buffer anyway.

use super::{inside_groups, store_groups, Pass, GROUP_PAIRS};
use crate::interpreter::optimized::stage32_i8::{GroupStage, LANES};
use crate::interpreter::reference::conv::ConvGeometry;
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

/// Bytes of [`Padded`]'s buffer: a pass's padded image of four 32-channel groups up to
/// 16 × 16 pixels (mobilenet_v2's 14 × 14 maps with their border).
pub(super) const PADDED_BYTES: usize = 32 * 1024;

/// [`Padded`]'s buffer, aligned to cache lines.
#[repr(C, align(64))]
pub(super) struct PaddedBytes([i8; PADDED_BYTES]);

/// A pass's channels of one batch image copied with their padding laid out: `ph × pw` pixels
/// (the rows and columns the windows span), `pc` bytes each (the pass's `G * LANES`
/// channels), the padding the zero point. Every window then lies inside it and every pixel
/// runs the inside loop with fixed tap offsets; on small maps, where most pixels are border
/// pixels, that costs less than finding a border pixel's tap pointers once per pass (a
/// pass's copy is one load and store per 32 channels of an input pixel). The zero point is
/// filled once per layout (`pc`); a pass copies only the input rows its windows read.
pub(super) struct Padded {
    /// [`PADDED_BYTES`] bytes.
    buf: *mut i8,
    ph: usize,
    pw: usize,
    /// Bytes per pixel of the layout filled (0: none yet).
    pc: usize,
    /// The input zero point (`-offset`): a tap on it adds nothing.
    zp: i8,
}

impl Padded {
    /// Whether `g`'s passes copy their input: border pixels (those of the rows whose windows
    /// leave the input, and in the other rows those outside the inside columns `inside_cols`)
    /// are at least an eighth of the input pixels. A border pixel's pointers and loads cost
    /// about what copying a dozen input pixels does (see BENCHMARKS.md, branch dwq27s24).
    pub(super) fn pays(g: &ConvGeometry, inside_cols: (usize, usize)) -> bool {
        let rows = super::inside_range(g.out_h, g.in_h, g.filter_h, g.stride_h, g.dilation_h, g.pad_h);
        let border_rows = g.out_h - (rows.1 - rows.0);
        let border_cols = g.out_w - (inside_cols.1 - inside_cols.0);
        let border = border_rows * g.out_w + (g.out_h - border_rows) * border_cols;
        border > 0 && border * 8 >= g.in_h * g.in_w
    }

    /// The layout of `g`'s padded image in `buf`, no layout filled yet; `offset` is the input
    /// offset.
    pub(super) fn new(g: &ConvGeometry, offset: i16, buf: &mut MaybeUninit<PaddedBytes>) -> Padded {
        let (fh, fw) = (g.filter_h, g.filter_w);
        Padded {
            buf: buf.as_mut_ptr().cast(),
            ph: (g.out_h - 1) * g.stride_h + (fh - 1) * g.dilation_h + 1,
            pw: (g.out_w - 1) * g.stride_w + (fw - 1) * g.dilation_w + 1,
            pc: 0,
            zp: (-i32::from(offset)) as i8,
        }
    }

    /// Whether the layout of a pass of `G` groups fits the buffer.
    pub(super) fn fits<const G: usize>(&self) -> bool {
        self.ph * self.pw * G * LANES <= PADDED_BYTES
    }

    /// Channels `c0..` in `G` groups (lane masks `kb`, weights `w`, accumulators' start
    /// `init`, output stages `stages`) of the block's output rows (`pass.rows` whole rows from
    /// row `pass.first`, at `pass.out`), every pixel on the padded copy.
    ///
    /// # Safety
    /// As [`groups`](super::groups) (`VNNI` only where the CPU has it); [`Self::fits`] holds
    /// for `G`; `w[j][..pass.rel.len() / 2]` are written.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) unsafe fn rows<const VNNI: bool, const G: usize, const FULL: bool, S: GroupStage>(
        &mut self,
        pass: &Pass<'_>,
        c0: usize,
        init: [[__m512i; 2]; G],
        kb: &[__mmask32; G],
        w: &[[MaybeUninit<[__m512i; 2]>; GROUP_PAIRS]; G],
        stages: &[S; G],
    ) {
        let (g, input, rel, first, out, rows) = (pass.g, pass.input, pass.rel, pass.first, pass.out, pass.rows);
        let c = g.out_c;
        let taps = g.filter_h * g.filter_w;
        let row_out = g.out_w * c;
        let pc = G * LANES;
        if self.pc != pc {
            // SAFETY: `ph * pw * pc` bytes fit the buffer (the caller's `fits`).
            core::ptr::write_bytes(self.buf, self.zp as u8, self.ph * self.pw * pc);
            self.pc = pc;
        }
        // Each tap's offset from its window origin in the buffer, with the odd tap's partner
        // (the origin again).
        let mut rel_p = [0usize; 2 * GROUP_PAIRS];
        for (t, r) in rel_p.iter_mut().enumerate().take(taps) {
            let (fy, fx) = (t / g.filter_w, t % g.filter_w);
            *r = (fy * g.dilation_h * self.pw + fx * g.dilation_w) * pc;
        }
        let rel_p = &rel_p[..rel.len()];
        let mut batch = usize::MAX;
        for r in 0..rows {
            // SAFETY: row `r < rows` of the block starts inside the output (`Pass::out`).
            let out_row = out.add(r * row_out);
            let (b, out_y) = ((first + r) / g.out_h, (first + r) % g.out_h);
            if b != batch {
                // The rows of batch `b` this block's windows read, from output row `out_y`.
                let y1 = out_y + (g.out_h - out_y).min(rows - r);
                self.copy::<G>(g, input, b, (out_y, y1), c0, kb);
                batch = b;
            }
            for out_x in 0..g.out_w {
                let p = self.buf.add((out_y * g.stride_h * self.pw + out_x * g.stride_w) * pc);
                // SAFETY: the window of pixel `(out_y, out_x)` lies inside the padded image,
                // whose rows it reads were copied above (taps outside the input read the
                // zero point filled at the layout's change).
                let acc = inside_groups::<VNNI, G, FULL>(p, rel_p, init, kb, w);
                // SAFETY: channels `c0 + j * LANES..` of the block's row `r`, pixel `out_x`, are
                // this call's to write (`Pass::out`; the stores are masked to the groups' lanes).
                store_groups(stages, &acc, kb, out_row.add(out_x * c + c0));
            }
        }
    }

    /// Copies channels `c0..` (group `j`'s `kb[j]` lanes) of the input rows that the windows
    /// of output rows `y0..y1` of batch `b` read into the layout of `G * LANES` bytes per
    /// pixel.
    ///
    /// # Safety
    /// AVX-512BW; the layout is filled for `pc = G * LANES`, `ph * pw * pc <= PADDED_BYTES`;
    /// `input` holds `g`'s batches; `y0 < y1 <= g.out_h`; `c0 + j * LANES + l` is a channel
    /// for every lane `l` of `kb[j]`.
    #[inline(always)]
    unsafe fn copy<const G: usize>(
        &mut self,
        g: &ConvGeometry,
        input: &[i8],
        b: usize,
        (y0, y1): (usize, usize),
        c0: usize,
        kb: &[__mmask32; G],
    ) {
        let pc = G * LANES;
        let lo = (y0 * g.stride_h).saturating_sub(g.pad_h);
        let hi = ((y1 - 1) * g.stride_h + (g.filter_h - 1) * g.dilation_h + 1)
            .saturating_sub(g.pad_h)
            .min(g.in_h);
        let cols = self.pw.saturating_sub(g.pad_w).min(g.in_w);
        for iy in lo..hi {
            // SAFETY (of the loads and stores): input row `iy < in_h` of batch `b`, its
            // columns `ix < in_w` and channels `c0 + j * LANES..` (`kb[j]` lanes); padded row
            // `iy + pad_h < ph` and column `ix + pad_w < pw` of the buffer (`y1 <= out_h`).
            let src = input.as_ptr().add(((b * g.in_h + iy) * g.in_w) * g.in_c + c0);
            let dst = self.buf.add(((iy + g.pad_h) * self.pw + g.pad_w) * pc);
            for ix in 0..cols {
                let (s, d) = (src.add(ix * g.in_c), dst.add(ix * pc));
                for (j, &k) in kb.iter().enumerate() {
                    let v = _mm256_maskz_loadu_epi8(k, s.add(j * LANES));
                    _mm256_mask_storeu_epi8(d.add(j * LANES), k, v);
                }
            }
        }
    }
}
