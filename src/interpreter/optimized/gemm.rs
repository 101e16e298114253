//! f32 matrix product `C = clamp(A · Bᵀ + bias)` for convolutions, fully connected layers and
//! batch matmuls: `A` is `m × k` with any row and column strides, `B` is `n × k` (or `k × n`),
//! packed into column panels ([`super::pack`]) in caller-provided memory (per call, or once at
//! prepare for constant weights), `C` is `m × n` row-major with a row stride.
//!
//! **Why a hand-written kernel and not the `gemm` crate.** Measured on the products of
//! MobileNet's pointwise convolutions, a first-layer im2col and a transformer projection (one
//! core, best of 50; `BENCHMARKS.md`), `gemm` 0.18 (used by candle) and this kernel run at the
//! same speed, 110 to 115 GFLOP/s on the large shapes. But `gemm` allocates its packing buffers
//! on the heap on one or two of every call (counted with a counting global allocator), and its
//! API takes no caller memory for them, while the interpreter's invoke performs no heap
//! allocation. This kernel packs into memory the caller plans (the arena's scratch or tail),
//! which also lets a constant filter be packed once at prepare instead of at every call, and
//! adds no dependency.
//!
//! **Kernel.** GotoBLAS-style blocking without packing `A` (its rows are read in place, which
//! lets a pointwise convolution use the input tensor directly): `k` in blocks of [`KC`], `n` in
//! blocks whose packed panels stay in L2, and per block a register tile of [`MR`] rows × [`NR`]
//! columns (12 AVX2 accumulators, one broadcast of `A` and two loads of `B` per step). The tile
//! runs with AVX2+FMA on the [`Isa`] path the caller passes when the CPU has them (the crate's
//! one cached detection, [`Isa::avx2`]) and as plain Rust otherwise; both sum `k` in the same order, so results do not depend on the ISA
//! apart from FMA's single rounding. On an `avx512` path ([`Isa::avx512`]) the tiles are
//! [`super::gemm_avx512`]'s: [`MR512`] rows × two panels over the same packed layout, in the
//! same summation order (the AVX2 tile's bits).
//!
//! Every entry point checks the slice lengths against the shapes before any unchecked access,
//! and panics (a broken caller invariant) rather than read or write out of bounds.

#[cfg(target_arch = "x86_64")]
use super::gemm_avx512::{SlabFill, MR512, SLAB};
use super::matrix::{Strided, Weight};
use super::out_rows::SharedRows;
use super::pack::{group_cols, group_scratch_len, pack_b_with, packed_b_len, NR};
pub use super::Isa;

/// Rows of the register tile.
pub const MR: usize = 6;
/// Depth of one block of `k`: a depth of 320 (MobileNet's last pointwise layers) runs as one
/// block instead of 256 + 64 (each further block reloads and re-stores the tile's `C`); the
/// AVX-512 pair of panels is then 40 KiB per block, read from L2 when it and the `A` rows
/// exceed L1.
pub const KC: usize = 320;
/// Rows of the AVX-512 tiles that fill their panels as they run ([`Fill`]): 12 accumulators
/// and a 16-register transposed slab fit the 32 registers.
#[cfg(target_arch = "x86_64")]
const FILL_ROWS: usize = 12;
/// Least depth at which a product fills its panels as it runs ([`Fill`]): the overlap needs
/// slabs to come (with one or two, the multiply-adds wait for the whole transpose: measured
/// slower on mobilenet_v3's depth-16 to depth-40 pointwise layers).
#[cfg(target_arch = "x86_64")]
const FILL_LEAST_DEPTH: usize = 4 * SLAB;
// A filling tile's depth block holds whole slabs.
#[cfg(target_arch = "x86_64")]
const _: () = assert!(KC.is_multiple_of(SLAB));
/// Bytes of packed `B` panels one `n` block keeps in L2.
const L2_PANEL_BYTES: usize = 256 * 1024;

/// What to do with each output: add `bias[j]` (when given), then clamp to `[min, max]`.
#[derive(Clone, Copy, Debug)]
pub struct Epilogue<'a> {
    /// One value per column, or none.
    pub bias: Option<&'a [f32]>,
    /// Lower clamp.
    pub min: f32,
    /// Upper clamp.
    pub max: f32,
}

impl Epilogue<'_> {
    /// No bias, no clamp.
    pub const NONE: Epilogue<'static> = Epilogue {
        bias: None,
        min: f32::NEG_INFINITY,
        max: f32::INFINITY,
    };
}

/// `C = clamp(A · Bᵀ + bias)` for `A` `m × k`, packed `B` ([`pack_b`](super::pack::pack_b) of `n × k`), `C` `m × n`
/// at row stride `ldc`.
#[allow(clippy::too_many_arguments)]
pub fn gemm_packed(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: Strided<'_>,
    packed_b: &[f32],
    ep: &Epilogue<'_>,
    c: &mut [f32],
    ldc: usize,
) {
    gemm_packed_steps(isa, m, n, k, 0..k, a, packed_b, ep, c, ldc);
}

/// The depth steps `steps` of [`gemm_packed`]: `A` holds only those columns (its column 0 is
/// step `steps.start`), `B` is packed over the whole depth `k`. The first range (starting at
/// 0) writes `C`, later ones add to it, and the range ending at `k` applies the epilogue, so
/// consecutive ranges covering `0..k` compute `C`; each output is then summed in the order a
/// single call over `0..k` with [`KC`]-blocks split at the ranges' ends would use. This lets
/// a convolution multiply each filter row's window where the input keeps it (no im2col copy).
#[allow(clippy::too_many_arguments)]
pub fn gemm_packed_steps(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    steps: core::ops::Range<usize>,
    a: Strided<'_>,
    packed_b: &[f32],
    ep: &Epilogue<'_>,
    c: &mut [f32],
    ldc: usize,
) {
    let panels = Panels::Packed(packed_b);
    let c = SharedRows::new(c, ldc);
    // SAFETY: `c` comes from the `&mut` this call holds.
    unsafe { gemm_packed_prefetch(isa, m, n, k, steps, a, panels, ep, c, ldc, Prefetch::NONE) };
}

/// The packed panels of `B` a product reads.
enum Panels<'a> {
    /// Packed before the product ([`packed_b_len`] values).
    Packed(&'a [f32]),
    /// Written during the product (AVX-512 only): the first row of tiles transposes the
    /// [`Fill`]'s slabs from `B` into `panels`, the caller packed the rest.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Filled(&'a mut [f32], Fill),
}

/// The packed panels as the tiles address them: `len` values from `at`, writable when the
/// product fills them ([`Panels::Filled`], whose `&mut` the pointer comes from).
#[derive(Clone, Copy)]
struct PanelsAt {
    at: *mut f32,
    len: usize,
}

/// Where the tiles of a product that packs `B` as it runs ([`Panels::Filled`]) read `B`: the
/// tiles of rows `0..` transpose whole [`SLAB`]-step slabs of the whole panels just before
/// they multiply them, so the transposes overlap the multiply-adds instead of preceding them;
/// the later rows' tiles read the panels so written.
#[derive(Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct Fill {
    /// `B` row 0, step 0: row `j` at `rows + j * rs` elements, float32 or (when `f16`)
    /// float16, `k` steps each.
    rows: *const u8,
    rs: usize,
    f16: bool,
    /// Panels whose [`NR`] rows all exist in `B`: these are filled over the whole depth (a
    /// multiple of [`SLAB`]); the caller packed the panel after them, if any.
    whole_panels: usize,
}

/// Memory a product brings toward the cache while it runs (the next weights a caller will
/// pack): `lines` 64-byte lines from `start`, spread over the AVX-512 tiles' depth steps. It
/// changes no value; `start` need not be dereferenceable (a prefetch never faults).
#[derive(Clone, Copy)]
pub(super) struct Prefetch {
    pub(super) start: *const u8,
    pub(super) lines: usize,
}

impl Prefetch {
    const NONE: Prefetch = Prefetch {
        start: core::ptr::null(),
        lines: 0,
    };

    /// The lines holding `data`.
    fn of<T>(data: &[T]) -> Prefetch {
        Prefetch {
            start: data.as_ptr() as *const u8,
            lines: core::mem::size_of_val(data).div_ceil(64),
        }
    }
}

/// [`gemm_packed_steps`] prefetching `pf` along the way (on the AVX-512 path).
///
/// # Safety
/// `c` may be written for its `len` values, and nothing else reads or writes the values the
/// product writes (`m` rows of `n` values, `ldc` apart) during the call.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut, unused_variables))]
unsafe fn gemm_packed_prefetch(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    steps: core::ops::Range<usize>,
    a: Strided<'_>,
    packed_b: Panels<'_>,
    ep: &Epilogue<'_>,
    c: SharedRows<'_, f32>,
    ldc: usize,
    mut pf: Prefetch,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        steps.start <= steps.end && steps.end <= k,
        "gemm: steps {steps:?} outside depth {k}"
    );
    let width = steps.end - steps.start;
    assert!(
        a.covers(m, width),
        "gemm: A view too short for {m} x {width}"
    );
    // The panels' start (writable when filled: the pointer comes from the `&mut`), length
    // and fill.
    let (panels_at, panels_len, fill) = match packed_b {
        Panels::Packed(p) => (p.as_ptr() as *mut f32, p.len(), None),
        Panels::Filled(p, f) => (p.as_mut_ptr(), p.len(), Some(f)),
    };
    assert!(panels_len >= packed_b_len(n, k), "gemm: packed B too short");
    #[cfg(target_arch = "x86_64")]
    if let Some(f) = &fill {
        assert!(
            isa.avx512() && f.whole_panels <= n / NR && k.is_multiple_of(SLAB) && steps == (0..k),
            "gemm: panels filled off the AVX-512 path or past B"
        );
    }
    let panels_b = PanelsAt {
        at: panels_at,
        len: panels_len,
    };
    assert!(
        ldc >= n && c.len() >= (m - 1) * ldc + n,
        "gemm: C too short"
    );
    if let Some(b) = ep.bias {
        assert!(b.len() >= n, "gemm: bias has {} of {n} values", b.len());
    }
    if k == 0 {
        for i in 0..m {
            for j in 0..n {
                let v = ep.bias.map_or(0.0, |b| b[j]);
                // SAFETY: `i * ldc + j < (m - 1) * ldc + n <= c.len` (asserted above); the
                // caller lets the product write there.
                unsafe { c.as_ptr().add(i * ldc + j).write(v.max(ep.min).min(ep.max)) };
            }
        }
        return;
    }
    let panels = n.div_ceil(NR);
    let kc_max = KC.min(k);
    let panels_per_block = (L2_PANEL_BYTES / (kc_max * NR * 4)).max(1);
    #[cfg(target_arch = "x86_64")]
    let pf_per_tile = {
        // Tiles the AVX-512 path runs (about: pairs of panels per block counted whole).
        let tiles = m.div_ceil(MR512) * panels.div_ceil(2) * (steps.end - steps.start).div_ceil(KC);
        pf.lines.div_ceil(tiles.max(1))
    };
    let mut k0 = steps.start;
    while k0 < steps.end {
        let kc = KC.min(steps.end - k0);
        let mut q0 = 0;
        while q0 < panels {
            let q1 = panels.min(q0 + panels_per_block);
            #[cfg(target_arch = "x86_64")]
            if isa.avx512() {
                // SAFETY: `avx512()` checked the cached detection; the operands are the ones
                // checked above (see `avx512_block`).
                unsafe {
                    avx512_block(
                        m,
                        n,
                        k,
                        k0,
                        kc,
                        q0..q1,
                        steps.start,
                        a,
                        (panels_b, fill.as_ref()),
                        ep,
                        c,
                        ldc,
                        (&mut pf, pf_per_tile),
                    )
                };
                q0 = q1;
                continue;
            }
            let mut i0 = 0;
            while i0 < m {
                let rows = MR.min(m - i0);
                for q in q0..q1 {
                    let at = At {
                        k,
                        k0,
                        kc,
                        step0: steps.start,
                        i0,
                        q,
                        ldc,
                    };
                    let tile = Tile::new(&at, a, panels_b, ep, c, NR.min(n - q * NR));
                    // SAFETY: the tile reads `rows` rows of A at strides `a_rs`/`a_cs` for `kc`
                    // steps (inside A: rows < m - i0 + 1, steps < steps.end - k0 + 1), `kc * NR` packed
                    // values (inside the panel), `cols` bias values, and reads/writes `rows`
                    // rows of `cols` values of C at stride `ldc` (inside C by the asserts).
                    unsafe { run_tile(isa, rows, &tile) };
                }
                i0 += rows;
            }
            q0 = q1;
        }
        k0 += kc;
    }
}

/// `C = clamp(A · Bᵀ + bias)` with `B` (`n × k`: element `(j, p)` at `b.data[j * b.rs + p *
/// b.cs]`) read where it is and packed [`group_cols`] columns at a time into `scratch`
/// ([`group_scratch_len`] elements at least): the same products, in the same order, as
/// [`gemm_packed`] on the whole packed `B`, so the bits are equal.
#[allow(clippy::too_many_arguments)]
pub fn gemm_grouped<T: Weight>(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: Strided<'_>,
    b: Strided<'_, T>,
    ep: &Epilogue<'_>,
    c: &mut [f32],
    ldc: usize,
    scratch: &mut [f32],
) {
    let c = SharedRows::new(c, ldc);
    // SAFETY: `c` comes from the `&mut` this call holds.
    unsafe { gemm_grouped_into(isa, m, n, k, a, b, ep, c, ldc, scratch) }
}

/// [`gemm_grouped`] writing through [`SharedRows`]: one of several tasks that each write their own
/// columns of one output.
///
/// # Safety
/// As [`gemm_packed_prefetch`]: `c` may be written for its `len` values, and nothing else
/// touches the `m` rows of `n` values (`ldc` apart) the product writes during the call.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_grouped_into<T: Weight>(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: Strided<'_>,
    b: Strided<'_, T>,
    ep: &Epilogue<'_>,
    c: SharedRows<'_, f32>,
    ldc: usize,
    scratch: &mut [f32],
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        b.covers(n, k),
        "gemm_grouped: B view too short for {n} x {k}"
    );
    let group = group_cols(n, k, false);
    assert!(
        scratch.len() >= group_scratch_len(n, k, false),
        "gemm_grouped: scratch too short"
    );
    let mut j0 = 0;
    while j0 < n {
        let cols = group.min(n - j0);
        let bj = Strided {
            data: &b.data[j0 * b.rs..],
            rs: b.rs,
            cs: b.cs,
        };
        let panels = pack_group(isa, cols, k, bj, scratch);
        let epj = Epilogue {
            bias: ep.bias.map(|x| &x[j0..]),
            min: ep.min,
            max: ep.max,
        };
        // The next group's rows of `B` come toward the cache while this group's products
        // run, so its packing reads them from there rather than from memory.
        let next = (j0 + cols).min(n);
        let next_rows = group.min(n - next);
        let pf = if next_rows == 0 || k == 0 {
            Prefetch::NONE
        } else {
            let first = next * b.rs;
            let last = (next + next_rows - 1) * b.rs + (k - 1) * b.cs;
            Prefetch::of(&b.data[first..=last])
        };
        let cj = c.offset(j0);
        // SAFETY: columns `j0..j0 + cols` of the rows the caller lets this product write.
        unsafe { gemm_packed_prefetch(isa, m, cols, k, 0..k, a, panels, &epj, cj, ldc, pf) };
        j0 += cols;
    }
}

/// Packs the `n × k` `B` of a [`gemm_grouped`] group into `scratch`, or only what the
/// product's first row of tiles will not fill when it can fill ([`fill_for`]). Either way the
/// panels end up holding [`pack_b`](super::pack::pack_b)'s values.
fn pack_group<'s, T: Weight>(
    isa: Isa,
    n: usize,
    k: usize,
    b: Strided<'_, T>,
    scratch: &'s mut [f32],
) -> Panels<'s> {
    #[cfg(target_arch = "x86_64")]
    if let Some(fill) = fill_for(isa, n, k, b, scratch) {
        return Panels::Filled(&mut scratch[..packed_b_len(n, k)], fill);
    }
    pack_b_with(isa, n, k, b, scratch);
    Panels::Packed(scratch)
}

/// On the AVX-512 path, for float32 or float16 `B` with contiguous depth of whole 16-step
/// slabs (at least [`FILL_LEAST_DEPTH`]): packs into `scratch` a last panel of fewer than
/// [`NR`] rows, if any, and returns the [`Fill`] of the whole panels. `None` (nothing written)
/// otherwise.
#[cfg(target_arch = "x86_64")]
fn fill_for<T: Weight>(
    isa: Isa,
    n: usize,
    k: usize,
    b: Strided<'_, T>,
    scratch: &mut [f32],
) -> Option<Fill> {
    if !(isa.avx512() && b.cs == 1 && k.is_multiple_of(SLAB) && k >= FILL_LEAST_DEPTH && n >= NR) {
        return None;
    }
    let (rows, f16) = match (T::as_f32(b.data), T::as_f16(b.data)) {
        (Some(w), _) => (w.as_ptr() as *const u8, false),
        (None, Some(w)) => (w.as_ptr() as *const u8, true),
        _ => return None,
    };
    let whole_panels = n / NR;
    if whole_panels * NR < n {
        let j0 = whole_panels * NR;
        let last = Strided {
            data: &b.data[j0 * b.rs..],
            ..b
        };
        let panel = &mut scratch[whole_panels * k * NR..packed_b_len(n, k)];
        pack_b_with(isa, n - j0, k, last, panel);
    }
    Some(Fill {
        rows,
        rs: b.rs,
        f16,
        whole_panels,
    })
}

/// `C = clamp(A · Bᵀ + bias)` with `B` stored `n × k` row-major and not packed: one dot product
/// per output, for few rows of `A` (a fully connected layer on one input), where packing `B`
/// would cost as much as the product.
#[allow(clippy::too_many_arguments)]
pub fn gemm_dot<T: Weight>(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[T],
    ep: &Epilogue<'_>,
    c: &mut [f32],
    ldc: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert_dot_operands("gemm_dot", m, n, k, a, b, ep, c.len(), ldc);
    // A short depth: eight outputs per vector, the same bits (`gemm_dot_short`).
    if let Some(b32) = T::as_f32(b) {
        if super::gemm_dot_short::gemm_dot_short(isa, m, n, k, a, b32, ep, c, ldc) {
            return;
        }
    }
    // Weight row outermost: each is read from memory once, the few rows of `A` stay in L1.
    for j in 0..n {
        let w = &b[j * k..(j + 1) * k];
        for i in 0..m {
            let row = &a[i * k..(i + 1) * k];
            let total = T::dot(isa, row, w);
            let v = total + ep.bias.map_or(0.0, |b| b[j]);
            c[i * ldc + j] = v.max(ep.min).min(ep.max);
        }
    }
}

/// Panics unless `a` holds `m × k` values, `b` `n × k`, the `c_len` values of `C` `m` rows of
/// stride `ldc >= n` and the bias `n` (`m, n > 0`): what `C = A · Bᵀ` on unpacked rows reads
/// and writes (a caller's bug: the kernels size them). `what` names the product in the message.
#[allow(clippy::too_many_arguments)]
pub(super) fn assert_dot_operands<T>(
    what: &str,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[T],
    ep: &Epilogue<'_>,
    c_len: usize,
    ldc: usize,
) {
    assert!(
        a.len() >= m * k && b.len() >= n * k,
        "{what}: A or B too short"
    );
    assert!(
        ldc >= n && c_len >= (m - 1) * ldc + n,
        "{what}: C too short"
    );
    if let Some(bias) = ep.bias {
        assert!(bias.len() >= n, "{what}: bias too short");
    }
}

/// One register tile's operands (raw, so the SIMD tile needs no bounds checks).
pub(super) struct Tile {
    /// Depth steps.
    pub(super) kc: usize,
    /// Row 0, step 0 of `A`; row `i`, step `p` at `a + i * a_rs + p * a_cs`.
    pub(super) a: *const f32,
    pub(super) a_rs: usize,
    pub(super) a_cs: usize,
    /// Step 0 of the packed panel (`NR` values per step).
    pub(super) b: *const f32,
    /// Values from one packed panel to the next (`k * NR`; read by the two-panel tiles).
    pub(super) b_next: usize,
    /// Row 0, column 0 of `C`; rows `ldc` apart.
    pub(super) c: *mut f32,
    pub(super) ldc: usize,
    /// Columns of `C` (and of the bias) the tile writes.
    pub(super) cols: usize,
    /// Whether the tile writes `C` (else adds to it).
    pub(super) first: bool,
    /// Whether the epilogue (bias, clamp) applies.
    pub(super) last: bool,
    pub(super) bias: Option<*const f32>,
    pub(super) min: f32,
    pub(super) max: f32,
    /// Lines to prefetch during the tile (`pf_lines` 64-byte lines from `pf`; any address).
    pub(super) pf: *const u8,
    pub(super) pf_lines: usize,
}

/// Where a tile sits in a product of depth `k`: depth steps `k0..k0 + kc` (of the steps
/// `A` holds, which start at `step0`), rows from `i0`, panel `q`, `C` rows `ldc` apart.
struct At {
    k: usize,
    k0: usize,
    kc: usize,
    step0: usize,
    i0: usize,
    q: usize,
    ldc: usize,
}

impl Tile {
    /// The tile at `at` writing `cols` columns. The pointers are formed with checked slicing
    /// or offsets (a start past a slice panics), so they point inside `A`, the packed panels,
    /// `C` and the bias; the extent the tile then reads is its caller's to check.
    fn new(
        at: &At,
        a: Strided<'_>,
        packed_b: PanelsAt,
        ep: &Epilogue<'_>,
        c: SharedRows<'_, f32>,
        cols: usize,
    ) -> Tile {
        let j0 = at.q * NR;
        let b_at = at.q * at.k * NR + at.k0 * NR;
        assert!(b_at < packed_b.len, "gemm: panel {} outside packed B", at.q);
        Tile {
            kc: at.kc,
            a: a.data[at.i0 * a.rs + (at.k0 - at.step0) * a.cs..].as_ptr(),
            a_rs: a.rs,
            a_cs: a.cs,
            b: packed_b.at.wrapping_add(b_at) as *const f32,
            b_next: at.k * NR,
            c: c.offset(at.i0 * at.ldc + j0).as_ptr(),
            ldc: at.ldc,
            cols,
            first: at.k0 == 0,
            last: at.k0 + at.kc == at.k,
            bias: ep.bias.map(|b| b[j0..].as_ptr()),
            min: ep.min,
            max: ep.max,
            pf: core::ptr::null(),
            pf_lines: 0,
        }
    }
}

/// One depth block (`k0..k0 + kc`) of [`gemm_packed_steps`] over every row and panels
/// `panels` with the AVX-512 tiles: [`MR512`] rows at a time, two panels per tile while two
/// remain. Each output gets the same products in the same order as from the AVX2 tile. With
/// a [`Fill`], the tiles of rows `0..` first write the whole panels' slabs of the block.
///
/// # Safety
/// The CPU has AVX-512F; the operands passed [`gemm_packed_steps`]'s checks (`A` covers `m`
/// rows of the steps, `packed_b` `packed_b_len(n, k)`, `C` `m` rows of `n` at `ldc`, the bias
/// `n` values), `k0..k0 + kc` lies inside the steps, which start at `step0`; a fill passed
/// [`gemm_packed_prefetch`]'s checks, and its `B` rows hold `k` steps.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn avx512_block(
    m: usize,
    n: usize,
    k: usize,
    k0: usize,
    kc: usize,
    panels: core::ops::Range<usize>,
    step0: usize,
    a: Strided<'_>,
    (packed_b, fill): (PanelsAt, Option<&Fill>),
    ep: &Epilogue<'_>,
    c: SharedRows<'_, f32>,
    ldc: usize,
    (pf, per_tile): (&mut Prefetch, usize),
) {
    let mut i0 = 0;
    while i0 < m {
        // A filling row of tiles holds the transposed slab beside its accumulators: at most
        // `FILL_ROWS` rows keep both in the 32 registers.
        let most = if fill.is_some() && i0 == 0 { FILL_ROWS } else { MR512 };
        // The rows left shared evenly among the fewest tiles that hold them: a short last
        // tile (49 rows as 12, 12, 12, 12, 1) runs its few accumulators at FMA latency.
        let left = m - i0;
        let rows = left.div_ceil(left.div_ceil(most));
        let mut q = panels.start;
        while q < panels.end {
            let pair = q + 1 < panels.end;
            let at = At {
                k,
                k0,
                kc,
                step0,
                i0,
                q,
                ldc,
            };
            let cols = (if pair { 2 * NR } else { NR }).min(n - q * NR);
            let mut tile = Tile::new(&at, a, packed_b, ep, c, cols);
            let lines = per_tile.min(pf.lines);
            (tile.pf, tile.pf_lines) = (pf.start, lines);
            pf.start = pf.start.wrapping_add(64 * lines);
            pf.lines -= lines;
            let slab = match fill {
                Some(f) if i0 == 0 && q < f.whole_panels => Some(SlabFill {
                    rows: f.rows.wrapping_add((q * NR * f.rs + k0) * if f.f16 { 2 } else { 4 }),
                    rs: f.rs,
                    f16: f.f16,
                    panels: (f.whole_panels - q).min(if pair { 2 } else { 1 }),
                    slabs: kc / SLAB,
                    out: tile.b as *mut f32,
                }),
                _ => None,
            };
            // SAFETY: as `run_tile` in `gemm_packed_steps` (rows below `m - i0`, steps inside
            // the block, `cols` columns below `n - j0`; the second panel, when `pair`, is
            // panel `q + 1 < panels.end <= n.div_ceil(NR)`, inside `packed_b`); the caller
            // checked AVX-512F. A slab fill writes whole panels `q..q + panels` (below
            // `whole_panels`, so their rows exist in `B`) at the block's steps `k0..k0 + kc`
            // (`kc` a multiple of `SLAB`: `k` and `KC` are; `B`'s rows hold them); `tile.b`
            // came from the filled panels' `&mut`, which nothing else reads during the
            // product.
            unsafe { super::gemm_avx512::run_tile(rows, pair, &tile, slab.as_ref()) };
            q += if pair { 2 } else { 1 };
        }
        i0 += rows;
    }
}

/// Runs a tile of `rows` (1..=MR) rows.
///
/// # Safety
/// The tile's pointers cover what [`Tile`] describes: `rows` rows of A for `kc` steps, `kc * NR`
/// packed values, `cols` bias values, `rows` rows of `cols` values of C.
unsafe fn run_tile(isa: Isa, rows: usize, t: &Tile) {
    macro_rules! go {
        ($f:ident) => {
            match rows {
                1 => $f::<1>(t),
                2 => $f::<2>(t),
                3 => $f::<3>(t),
                4 => $f::<4>(t),
                5 => $f::<5>(t),
                _ => $f::<6>(t),
            }
        };
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2 and FMA; the
        // pointers are as `run_tile` requires (its caller's contract).
        return go!(tile_avx2);
    }
    go!(tile_portable)
}

#[cfg(target_arch = "x86_64")]
unsafe fn tile_avx2<const R: usize>(t: &Tile) {
    // SAFETY: forwarded from `run_tile` (AVX2 and FMA present, pointers in bounds).
    unsafe { x86::tile::<R>(t) }
}

/// The portable tile: the same summation order as the AVX2 tile.
///
/// # Safety
/// As [`run_tile`].
unsafe fn tile_portable<const R: usize>(t: &Tile) {
    let mut acc = [[0.0f32; NR]; R];
    for p in 0..t.kc {
        // SAFETY: `p < kc`, so the packed row and each A element are inside (see `run_tile`).
        let b = unsafe { &*(t.b.add(p * NR) as *const [f32; NR]) };
        for (i, row) in acc.iter_mut().enumerate() {
            // SAFETY: row `i < R` and step `p < kc` of A are inside.
            let a = unsafe { *t.a.add(i * t.a_rs + p * t.a_cs) };
            for (r, &bv) in row.iter_mut().zip(b) {
                *r += a * bv;
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        for (jj, &v) in row.iter().enumerate().take(t.cols) {
            // SAFETY: row `i < R`, column `jj < cols` of C (and of the bias) are inside.
            unsafe {
                let dst = t.c.add(i * t.ldc + jj);
                let mut v = if t.first { v } else { *dst + v };
                if t.last {
                    if let Some(b) = t.bias {
                        v += *b.add(jj);
                    }
                    v = v.max(t.min).min(t.max);
                }
                *dst = v;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Tile, NR};
    use core::arch::x86_64::*;

    /// The AVX2+FMA register tile: `R` rows × 16 columns in `2 R` accumulators.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; the tile's pointers are in bounds (see `run_tile`).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile<const R: usize>(t: &Tile) {
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        let (mut a, mut b) = (t.a, t.b);
        for _ in 0..t.kc {
            // SAFETY: `b` walks the `kc * NR` packed values, `a` the `kc` steps of each row.
            unsafe {
                let b0 = _mm256_loadu_ps(b);
                let b1 = _mm256_loadu_ps(b.add(8));
                for (i, row) in acc.iter_mut().enumerate() {
                    let ai = _mm256_broadcast_ss(&*a.add(i * t.a_rs));
                    row[0] = _mm256_fmadd_ps(ai, b0, row[0]);
                    row[1] = _mm256_fmadd_ps(ai, b1, row[1]);
                }
                a = a.add(t.a_cs);
                b = b.add(NR);
            }
        }
        let (lo, hi) = (_mm256_set1_ps(t.min), _mm256_set1_ps(t.max));
        let mut bias = [_mm256_setzero_ps(); 2];
        if let (true, Some(bp)) = (t.last, t.bias) {
            if t.cols == NR {
                // SAFETY: `cols == NR` bias values are inside.
                bias = unsafe { [_mm256_loadu_ps(bp), _mm256_loadu_ps(bp.add(8))] };
            } else {
                let mut tmp = [0.0f32; NR];
                // SAFETY: `cols` bias values are inside.
                unsafe { core::ptr::copy_nonoverlapping(bp, tmp.as_mut_ptr(), t.cols) };
                bias = [
                    _mm256_loadu_ps(tmp.as_ptr()),
                    _mm256_loadu_ps(tmp[8..].as_ptr()),
                ];
            }
        }
        for (i, row) in acc.iter().enumerate() {
            // SAFETY: row `i < R` of C has `cols` values inside; a full row is read and written
            // with vector accesses only when `cols == NR`.
            unsafe {
                let dst = t.c.add(i * t.ldc);
                let mut v = *row;
                if t.cols == NR {
                    if !t.first {
                        v[0] = _mm256_add_ps(_mm256_loadu_ps(dst), v[0]);
                        v[1] = _mm256_add_ps(_mm256_loadu_ps(dst.add(8)), v[1]);
                    }
                    if t.last {
                        for (h, b) in v.iter_mut().zip(bias) {
                            *h = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(*h, b), lo), hi);
                        }
                    }
                    _mm256_storeu_ps(dst, v[0]);
                    _mm256_storeu_ps(dst.add(8), v[1]);
                } else {
                    let mut tmp = [0.0f32; NR];
                    if !t.first {
                        core::ptr::copy_nonoverlapping(dst, tmp.as_mut_ptr(), t.cols);
                    }
                    let mut old = [
                        _mm256_loadu_ps(tmp.as_ptr()),
                        _mm256_loadu_ps(tmp[8..].as_ptr()),
                    ];
                    for h in 0..2 {
                        old[h] = _mm256_add_ps(old[h], v[h]);
                        if t.last {
                            old[h] = _mm256_min_ps(
                                _mm256_max_ps(_mm256_add_ps(old[h], bias[h]), lo),
                                hi,
                            );
                        }
                    }
                    _mm256_storeu_ps(tmp.as_mut_ptr(), old[0]);
                    _mm256_storeu_ps(tmp[8..].as_mut_ptr(), old[1]);
                    core::ptr::copy_nonoverlapping(tmp.as_ptr(), dst, t.cols);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "gemm_tests.rs"]
pub(super) mod tests;
