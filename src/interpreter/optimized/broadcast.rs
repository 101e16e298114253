//! Broadcast element-wise binary ops (ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, SQUARED_DIFFERENCE)
//! at vector speed: the same per-element arithmetic as the reference kernels, over the rows of
//! the broadcast.
//!
//! The broadcast is walked row by row ([`for_each_row`]): the innermost output dimension is one
//! row, and each input is then either a run of values (its innermost stride is 1: a per-channel
//! `[C]` or `[1, 1, 1, C]` operand against a `[N, H, W, C]` one gives runs of `C` for both) or
//! one value repeated (stride 0: a per-pixel `[N, H, W, 1]` operand). Each row is one tight loop
//! without index arithmetic. A short row repeated under a contiguous operand (a per-channel
//! scale of 16 channels) is tiled into a block of whole rows first, so one call covers many rows.
//!
//! - **float32**: the reference's per-element closures compiled again with AVX2 enabled (eight
//!   lanes) and with AVX-512F enabled (sixteen lanes, the tail masked). The row closures are
//!   `#[inline(always)]`: a closure does not inherit its caller's target features, so one left
//!   out of line runs SSE2's four lanes whatever the path. No FMA is involved, so the bits are
//!   the reference's.
//! - **int8 ADD and SUB**: the 32-lane shares of
//!   [`add_quantized`](super::add_quantized::add_int8_row) on each row (a repeated value is
//!   splatted into a small block first).
//! - **int8 MUL**: the products of the offset inputs in 32-bit lanes, then the vector output
//!   stage of the convolutions (`MultiplyByQuantizedMultiplier`). AVX-512: a whole row 64
//!   values per step, the stage set up once per row in its small-sums form (a repeated value
//!   held in a register); AVX2: 8 lanes, the stage set up once per block; the scalar path and
//!   the last values through [`requantize_row`].
//!
//! A single value broadcast over a contiguous input (a scalar scale) is one row of the whole
//! output (`one_value`), not one row per innermost dimension.
//! - **int8 SQUARED_DIFFERENCE**: both inputs rescaled, squared and rescaled again with the
//!   rounding high multiply in lanes ([`x86::mbqm`]).
//! - **int8 MAXIMUM and MINIMUM**: the comparisons, vectorized by the compiler.
//!
//! Integer results are the reference's bit for bit on every path; int8 DIV (a per-element
//! fixed-point reciprocal) keeps the reference loop.

use super::add_quantized::add_int8_row;
use super::requant_i8::{requantize_row, Requant};
use super::Isa;
use crate::interpreter::reference::add::{add_quantized_value, clamp_f32, AddQuantParams};
use crate::interpreter::reference::broadcast::{BroadcastShapes, MAX_BROADCAST_DIMS};
use crate::interpreter::reference::quant::ProductQuantParams;
use crate::interpreter::reference::squared_difference::{
    squared_difference_i8_one, SquaredDifferenceParams,
};

/// One input of a row: a run of values (one per output element of the row), or one value
/// repeated.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a, T> {
    /// As many values as the row.
    Run(&'a [T]),
    /// One value for the whole row.
    Splat(T),
}

/// Calls `row(out_row, x, y)` for each innermost row of the broadcast of `a` and `b` onto
/// `out` (one call for inputs of one shape). `a`, `b` and `out` hold the element counts
/// `shapes` was built for (checked by the kernels at invoke).
#[inline(always)]
pub fn for_each_row<T: Copy>(
    shapes: &BroadcastShapes,
    a: &[T],
    b: &[T],
    out: &mut [T],
    mut row: impl FnMut(&mut [T], Operand<'_, T>, Operand<'_, T>),
) {
    let n = out.len();
    if !shapes.requires_broadcast {
        row(out, Operand::Run(&a[..n]), Operand::Run(&b[..n]));
        return;
    }
    const LAST: usize = MAX_BROADCAST_DIMS - 1;
    let e = &shapes.extents;
    let (s1, s2) = (&shapes.strides1, &shapes.strides2);
    let inner = e[LAST];
    if inner == 0 {
        return;
    }
    #[inline(always)]
    fn operand<T: Copy>(v: &[T], at: usize, stride: usize, inner: usize) -> Operand<'_, T> {
        if stride == 0 {
            Operand::Splat(v[at])
        } else {
            Operand::Run(&v[at..at + inner])
        }
    }
    match one_value(shapes) {
        Some(1) => return row(out, Operand::Splat(a[0]), Operand::Run(&b[..n])),
        Some(_) => return row(out, Operand::Run(&a[..n]), Operand::Splat(b[0])),
        None => {}
    }
    if let Some(side) = repeated_row(shapes) {
        return tiled_rows(side, inner, a, b, out, row);
    }
    let mut idx = [0usize; LAST];
    for o in out.chunks_exact_mut(inner) {
        let (mut ao, mut bo) = (0, 0);
        for i in 0..LAST {
            ao += idx[i] * s1[i];
            bo += idx[i] * s2[i];
        }
        row(
            o,
            operand(a, ao, s1[LAST], inner),
            operand(b, bo, s2[LAST], inner),
        );
        for i in (0..LAST).rev() {
            idx[i] += 1;
            if idx[i] < e[i] {
                break;
            }
            idx[i] = 0;
        }
    }
}

/// Elements of the row tile of [`tiled_rows`].
const ROW_TILE: usize = 256;

/// The shapes of `rows` consecutive output rows of a [`row_under_rows`] broadcast whose input
/// `side` is the repeated row of `inner` elements (the other input's matching rows are
/// contiguous): what one kernel thread's part of the output is.
pub fn repeated_row_part(side: u8, rows: usize, inner: usize) -> BroadcastShapes {
    const LAST: usize = MAX_BROADCAST_DIMS - 1;
    let mut extents = [1; MAX_BROADCAST_DIMS];
    (extents[LAST - 1], extents[LAST]) = (rows, inner);
    let (mut full, mut single) = ([0; MAX_BROADCAST_DIMS], [0; MAX_BROADCAST_DIMS]);
    (full[LAST - 1], full[LAST], single[LAST]) = (inner, 1, 1);
    let (strides1, strides2) = if side == 2 { (full, single) } else { (single, full) };
    BroadcastShapes {
        extents,
        strides1,
        strides2,
        requires_broadcast: true,
    }
}

/// Which input (1 or 2) is one row repeated under every row of the other, when the other is
/// contiguous (a `[C]` or `[1, 1, 1, C]` operand against `[N, H, W, C]`: the squeeze-and-excite
/// scale of a MobileNetV3) and a row is short enough to tile.
#[inline(always)]
pub fn repeated_row(shapes: &BroadcastShapes) -> Option<u8> {
    if shapes.extents[MAX_BROADCAST_DIMS - 1] > ROW_TILE / 2 {
        return None;
    }
    row_under_rows(shapes)
}

/// Whether an input of strides `s` walks its elements in order over extents `e` (its values
/// are one contiguous run of the output's order).
#[inline(always)]
fn contiguous(e: &[usize; MAX_BROADCAST_DIMS], s: &[usize; MAX_BROADCAST_DIMS]) -> bool {
    let mut want = 1;
    (0..MAX_BROADCAST_DIMS).rev().all(|i| {
        let ok = e[i] == 1 || s[i] == want;
        want *= e[i];
        ok
    })
}

/// Which input (1 or 2) is a single value broadcast over the other, when the other is
/// contiguous (a scalar scale or offset: the output is one row of the other's values).
#[inline(always)]
fn one_value(shapes: &BroadcastShapes) -> Option<u8> {
    let e = &shapes.extents;
    narrow_over_contiguous(shapes, |s| (0..MAX_BROADCAST_DIMS).all(|i| s[i] == 0 || e[i] == 1))
}

/// Which input (1 or 2) has strides `narrow` accepts while the other input is contiguous.
#[inline(always)]
fn narrow_over_contiguous(
    shapes: &BroadcastShapes,
    narrow: impl Fn(&[usize; MAX_BROADCAST_DIMS]) -> bool,
) -> Option<u8> {
    let e = &shapes.extents;
    let (s1, s2) = (&shapes.strides1, &shapes.strides2);
    if contiguous(e, s1) && narrow(s2) {
        Some(2)
    } else if contiguous(e, s2) && narrow(s1) {
        Some(1)
    } else {
        None
    }
}

/// Which input (1 or 2) is one row repeated under every row of the other, when the other is
/// contiguous, whatever the row's length: consecutive output rows are then again such a
/// broadcast ([`repeated_row_part`]), so the output splits into bands of rows.
#[inline(always)]
pub fn row_under_rows(shapes: &BroadcastShapes) -> Option<u8> {
    const LAST: usize = MAX_BROADCAST_DIMS - 1;
    let e = &shapes.extents;
    narrow_over_contiguous(shapes, |s| {
        s[LAST] == 1 && (0..LAST).all(|i| s[i] == 0 || e[i] == 1)
    })
}

/// [`for_each_row`] where input `side` is one row repeated ([`repeated_row`]): that row is
/// tiled into a stack block of whole rows and each call covers as many rows as the block holds,
/// instead of one call per (short) row. `row` computes each element from its two operands
/// alone, so the values are those of the row-by-row walk.
#[inline(always)]
fn tiled_rows<T: Copy>(
    side: u8,
    inner: usize,
    a: &[T],
    b: &[T],
    out: &mut [T],
    mut row: impl FnMut(&mut [T], Operand<'_, T>, Operand<'_, T>),
) {
    let (full, single) = if side == 2 { (a, b) } else { (b, a) };
    let single = &single[..inner];
    let rows = ROW_TILE / inner;
    let mut tile = [single[0]; ROW_TILE];
    for chunk in tile[..rows * inner].chunks_exact_mut(inner) {
        chunk.copy_from_slice(single);
    }
    let n = out.len();
    for (k, o) in out.chunks_mut(rows * inner).enumerate() {
        let at = k * rows * inner;
        let (f, t) = (Operand::Run(&full[at..at + o.len()]), Operand::Run(&tile[..o.len()]));
        if side == 2 {
            row(o, f, t);
        } else {
            row(o, t, f);
        }
    }
    debug_assert_eq!(n % inner, 0);
}

/// `out[j] = f(x[j], y[j])` over one row.
#[inline(always)]
fn row_map<T: Copy>(out: &mut [T], x: Operand<'_, T>, y: Operand<'_, T>, f: impl Fn(T, T) -> T) {
    match (x, y) {
        (Operand::Run(x), Operand::Run(y)) => {
            for ((o, &x), &y) in out.iter_mut().zip(x).zip(y) {
                *o = f(x, y);
            }
        }
        (Operand::Run(x), Operand::Splat(y)) => {
            for (o, &x) in out.iter_mut().zip(x) {
                *o = f(x, y);
            }
        }
        (Operand::Splat(x), Operand::Run(y)) => {
            for (o, &y) in out.iter_mut().zip(y) {
                *o = f(x, y);
            }
        }
        (Operand::Splat(x), Operand::Splat(y)) => out.fill(f(x, y)),
    }
}

/// A float32 binary op, as the reference kernels define it per element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatOp {
    /// `clamp(x + y)`.
    Add,
    /// `clamp(x - y)`.
    Sub,
    /// `clamp(x * y)`.
    Mul,
    /// `clamp(x / y)`.
    Div,
    /// `x > y ? x : y` (no clamp).
    Maximum,
    /// `x < y ? x : y` (no clamp).
    Minimum,
    /// `(x - y)²` (no clamp).
    SquaredDifference,
}

/// Float32 `op` with broadcasting and, for ADD, SUB, MUL and DIV, the clamp to `[lo, hi]`: the
/// reference's values bit for bit.
#[allow(clippy::too_many_arguments)]
pub fn binary_f32(
    isa: Isa,
    op: FloatOp,
    lo: f32,
    hi: f32,
    shapes: &BroadcastShapes,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        // SAFETY: `avx512()` checked the cached detection: this CPU has AVX-512F.
        unsafe { binary_f32_avx512(op, lo, hi, shapes, a, b, out) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2.
        unsafe { binary_f32_avx2(op, lo, hi, shapes, a, b, out) };
        return;
    }
    let _ = isa;
    binary_f32_rows(op, lo, hi, shapes, a, b, out)
}

/// [`binary_f32_rows`] compiled for AVX-512F (sixteen lanes, the tail masked).
///
/// # Safety
/// The CPU supports AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn binary_f32_avx512(
    op: FloatOp,
    lo: f32,
    hi: f32,
    shapes: &BroadcastShapes,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
) {
    binary_f32_rows(op, lo, hi, shapes, a, b, out)
}

/// [`binary_f32_rows`] compiled for AVX2.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn binary_f32_avx2(
    op: FloatOp,
    lo: f32,
    hi: f32,
    shapes: &BroadcastShapes,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
) {
    binary_f32_rows(op, lo, hi, shapes, a, b, out)
}

#[inline(always)]
fn binary_f32_rows(
    op: FloatOp,
    lo: f32,
    hi: f32,
    shapes: &BroadcastShapes,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
) {
    match op {
        FloatOp::Add => for_each_row(shapes, a, b, out, #[inline(always)] |o, x, y| {
            row_map(o, x, y, |x, y| clamp_f32(x + y, lo, hi))
        }),
        FloatOp::Sub => for_each_row(shapes, a, b, out, #[inline(always)] |o, x, y| {
            row_map(o, x, y, |x, y| clamp_f32(x - y, lo, hi))
        }),
        FloatOp::Mul => for_each_row(shapes, a, b, out, #[inline(always)] |o, x, y| {
            row_map(o, x, y, |x, y| clamp_f32(x * y, lo, hi))
        }),
        FloatOp::Div => for_each_row(shapes, a, b, out, #[inline(always)] |o, x, y| {
            row_map(o, x, y, |x, y| clamp_f32(x / y, lo, hi))
        }),
        FloatOp::Maximum => for_each_row(shapes, a, b, out, #[inline(always)] |o, x, y| {
            row_map(o, x, y, |x, y| if x > y { x } else { y })
        }),
        FloatOp::Minimum => for_each_row(shapes, a, b, out, #[inline(always)] |o, x, y| {
            row_map(o, x, y, |x, y| if x < y { x } else { y })
        }),
        FloatOp::SquaredDifference => for_each_row(shapes, a, b, out, #[inline(always)] |o, x, y| {
            row_map(o, x, y, |x, y| {
                let d = x - y;
                d * d
            })
        }),
    }
}

/// Values an int8 row is processed in at a time (the splat and product blocks on the stack).
const BLOCK: usize = 64;

/// `row(out, x, y)` over blocks of at most [`BLOCK`] values of one row, with a repeated value
/// splatted into a block so `row` always sees runs.
#[inline(always)]
fn blocks_i8(
    out: &mut [i8],
    x: Operand<'_, i8>,
    y: Operand<'_, i8>,
    mut row: impl FnMut(&mut [i8], &[i8], &[i8]),
) {
    let (mut sx, mut sy) = ([0i8; BLOCK], [0i8; BLOCK]);
    if let Operand::Splat(v) = x {
        sx.fill(v);
    }
    if let Operand::Splat(v) = y {
        sy.fill(v);
    }
    for (i, o) in out.chunks_mut(BLOCK).enumerate() {
        let at = i * BLOCK;
        let n = o.len();
        let xs = match x {
            Operand::Run(r) => &r[at..at + n],
            Operand::Splat(_) => &sx[..n],
        };
        let ys = match y {
            Operand::Run(r) => &r[at..at + n],
            Operand::Splat(_) => &sy[..n],
        };
        row(o, xs, ys);
    }
}

/// Int8 ADD (or SUB: input 2's multiplier negated) with broadcasting: the reference's
/// `add_quantized` bit for bit.
pub fn add_i8(
    isa: Isa,
    p: &AddQuantParams,
    shapes: &BroadcastShapes,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) {
    if !isa.avx2() {
        // The scalar path: the reference's per-element sum.
        for_each_row(shapes, a, b, out, |o, x, y| {
            row_map(o, x, y, |x, y| {
                add_quantized_value(x.into(), y.into(), p) as i8
            })
        });
        return;
    }
    for_each_row(shapes, a, b, out, |o, x, y| match (x, y) {
        (Operand::Run(x), Operand::Run(y)) => add_int8_row(isa, p, x, y, o),
        _ => blocks_i8(o, x, y, |o, x, y| add_int8_row(isa, p, x, y, o)),
    });
}

/// Int8 MUL with broadcasting: the reference's `mul_quantized` bit for bit (the products of
/// the offset inputs, then `MultiplyByQuantizedMultiplier`, output offset and clamp).
pub fn mul_i8(
    isa: Isa,
    p: &ProductQuantParams,
    shapes: &BroadcastShapes,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) {
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2.
        unsafe { mul_i8_avx2(isa, p, shapes, a, b, out) };
        return;
    }
    mul_i8_rows(isa, p, shapes, a, b, out)
}

/// [`mul_i8_rows`] compiled for AVX2 (the products in eight lanes).
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn mul_i8_avx2(
    isa: Isa,
    p: &ProductQuantParams,
    shapes: &BroadcastShapes,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) {
    mul_i8_rows(isa, p, shapes, a, b, out)
}

#[inline(always)]
fn mul_i8_rows(
    isa: Isa,
    p: &ProductQuantParams,
    shapes: &BroadcastShapes,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) {
    let (m, s) = (
        [p.output_multiplier.multiplier],
        [p.output_multiplier.shift_i8()],
    );
    let rq = Requant {
        bias: None,
        multipliers: &m,
        shifts: &s,
        output_offset: p.output_offset,
        act_min: p.activation_min,
        act_max: p.activation_max,
    };
    let (o1, o2) = (p.input1_offset, p.input2_offset);
    let mut prod = [0i32; BLOCK];
    for_each_row(shapes, a, b, out, |o, x, y| {
        #[cfg(target_arch = "x86_64")]
        if isa.avx512() {
            // SAFETY: `avx512()` checked the cached detection: this CPU has AVX-512
            // F/BW/DQ/VL; `x` and `y` are one row's operands, runs as long as `o`.
            if unsafe { x86::mul_avx512(&rq, o1, o2, x, y, o) } == o.len() {
                return;
            }
        }
        blocks_i8(o, x, y, |o, x, y| {
            let mut done = 0;
            #[cfg(target_arch = "x86_64")]
            if isa.avx2() && !isa.avx512() {
                // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2; `x`, `y`
                // and `o` have one length (blocks of one row).
                done = unsafe { x86::mul(&rq, o1, o2, x, y, o) };
            }
            let (x, y, o) = (&x[done..], &y[done..], &mut o[done..]);
            let prod = &mut prod[..o.len()];
            for ((r, &x), &y) in prod.iter_mut().zip(x).zip(y) {
                *r = o1
                    .wrapping_add(i32::from(x))
                    .wrapping_mul(o2.wrapping_add(i32::from(y)));
            }
            requantize_row(isa, &rq, 0, prod, o);
        })
    });
}

/// Int8 SQUARED_DIFFERENCE with broadcasting: the reference's `squared_difference_i8` bit for
/// bit.
pub fn squared_difference_i8(
    isa: Isa,
    p: &SquaredDifferenceParams,
    shapes: &BroadcastShapes,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) {
    for_each_row(shapes, a, b, out, |o, x, y| {
        blocks_i8(o, x, y, |o, x, y| {
            let mut done = 0;
            #[cfg(target_arch = "x86_64")]
            if isa.avx2() {
                // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2; `x`, `y`
                // and `o` have one length (blocks of one row).
                done = unsafe { x86::squared_difference(p, x, y, o) };
            }
            let _ = isa;
            for ((o, &x), &y) in o[done..].iter_mut().zip(&x[done..]).zip(&y[done..]) {
                *o = squared_difference_i8_one(p, x, y);
            }
        })
    });
}

/// Int8 MAXIMUM (`max`) or MINIMUM with broadcasting (raw comparisons, as the reference).
pub fn maximum_minimum_i8(
    isa: Isa,
    max: bool,
    shapes: &BroadcastShapes,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) {
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2.
        unsafe { maximum_minimum_i8_avx2(max, shapes, a, b, out) };
        return;
    }
    let _ = isa;
    maximum_minimum_i8_rows(max, shapes, a, b, out)
}

/// [`maximum_minimum_i8_rows`] compiled for AVX2.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn maximum_minimum_i8_avx2(
    max: bool,
    shapes: &BroadcastShapes,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) {
    maximum_minimum_i8_rows(max, shapes, a, b, out)
}

#[inline(always)]
fn maximum_minimum_i8_rows(
    max: bool,
    shapes: &BroadcastShapes,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) {
    if max {
        for_each_row(shapes, a, b, out, |o, x, y| row_map(o, x, y, |x, y| x.max(y)));
    } else {
        for_each_row(shapes, a, b, out, |o, x, y| row_map(o, x, y, |x, y| x.min(y)));
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::interpreter::reference::squared_difference::{
        SquaredDifferenceParams, SQUARED_DIFFERENCE_LEFT_SHIFT,
    };
    use crate::interpreter::optimized::requant_i8::avx2::Stage8;
    use crate::interpreter::optimized::requant_i8::avx512::Stage16;
    use super::Operand;
    use crate::interpreter::optimized::requant_i8::Requant;
    use core::arch::x86_64::*;

    /// The 8-lane blocks of int8 MUL: `(o1 + x) · (o2 + y)` in 32-bit lanes (wrapping, as the
    /// reference), then the per-tensor output stage `rq` ([`Stage8`], set up once); returns
    /// how many values it wrote (a multiple of 8), the caller finishes the rest.
    ///
    /// # Safety
    /// The CPU supports AVX2; `x`, `y` and `out` have one length.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn mul(
        rq: &Requant<'_>,
        o1: i32,
        o2: i32,
        x: &[i8],
        y: &[i8],
        out: &mut [i8],
    ) -> usize {
        let n = out.len().min(x.len()).min(y.len()) / 8 * 8;
        // SAFETY: the CPU supports AVX2 (this function's contract).
        let Some(stage) = (unsafe { Stage8::new(rq, 0) }) else {
            return 0;
        };
        let (off1, off2) = (_mm256_set1_epi32(o1), _mm256_set1_epi32(o2));
        let mut i = 0;
        while i < n {
            // SAFETY: `i + 8 <= n`, inside all three slices.
            unsafe {
                let vx = _mm256_cvtepi8_epi32(_mm_loadl_epi64(x.as_ptr().add(i).cast()));
                let vy = _mm256_cvtepi8_epi32(_mm_loadl_epi64(y.as_ptr().add(i).cast()));
                let prod = _mm256_mullo_epi32(_mm256_add_epi32(vx, off1), _mm256_add_epi32(vy, off2));
                _mm_storel_epi64(out.as_mut_ptr().add(i).cast(), stage.apply(prod));
            }
            i += 8;
        }
        n
    }

    /// [`mul`] in sixty-four lanes over one row of runs or repeated values: the products in
    /// four 16-lane vectors, through the output stage's small-sums form (a product of two
    /// offset int8 values is at most 255 · 255 in magnitude), 64 bytes stored at once; a
    /// partial last block masked. Returns how many values it wrote (all, or 0 where the stage
    /// refused: the caller does them).
    ///
    /// # Safety
    /// The CPU supports AVX-512 F/BW/DQ/VL; `x` and `y` are runs as long as `out` or values.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    pub(super) unsafe fn mul_avx512(
        rq: &Requant<'_>,
        o1: i32,
        o2: i32,
        x: Operand<'_, i8>,
        y: Operand<'_, i8>,
        out: &mut [i8],
    ) -> usize {
        let len = |v: &Operand<'_, i8>| match v {
            Operand::Run(r) => r.len(),
            Operand::Splat(_) => usize::MAX,
        };
        let n = out.len().min(len(&x)).min(len(&y));
        // SAFETY: the CPU supports AVX-512 F/BW/VL; `|(o1 + x)(o2 + y)| <= 255²`, far
        // inside the small-sums range (the offsets are validated to -127..=128 / -128..=127).
        let Some(stage) = (unsafe { Stage16::bounded(rq, 0, 16, true) })
            .and_then(|s| unsafe { s.small_form() })
        else {
            return 0;
        };
        let (off1, off2) = (_mm512_set1_epi32(o1), _mm512_set1_epi32(o2));
        let mut i = 0;
        while i < n {
            let lanes = (n - i).min(64);
            let mask = crate::interpreter::optimized::low_bits(lanes);
            // SAFETY: the mask covers elements `i..i + lanes <= n` of the output and of each
            // run; masked-off bytes are neither read nor written.
            unsafe {
                macro_rules! load {
                    ($v:expr) => {
                        match $v {
                            Operand::Run(r) => _mm512_maskz_loadu_epi8(mask, r.as_ptr().add(i)),
                            Operand::Splat(c) => _mm512_set1_epi8(c),
                        }
                    };
                }
                let (vx, vy) = (load!(x), load!(y));
                // A macro, not a closure: a closure would not inherit this function's target
                // features and would stay out of line.
                macro_rules! product {
                    ($q:literal) => {{
                        let a = _mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32::<$q>(vx));
                        let b = _mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32::<$q>(vy));
                        let p = _mm512_mullo_epi32(
                            _mm512_add_epi32(a, off1),
                            _mm512_add_epi32(b, off2),
                        );
                        stage.rescale(p)
                    }};
                }
                let v = [product!(0), product!(1), product!(2), product!(3)];
                _mm512_mask_storeu_epi8(out.as_mut_ptr().add(i), mask, stage.pack4(v));
            }
            i += lanes;
        }
        n
    }

    /// `MultiplyByQuantizedMultiplierSmallerThanOneExp(x, m, -right)` of eight lanes for a
    /// multiplier `m > 0` and `right` in `0..=31`: the rounding high multiply is
    /// `⌊(x·m + 2³⁰) / 2³¹⌋` for products of either sign (never saturating, as `m` is not
    /// `i32::MIN`), from the 64-bit products of even and odd lanes; then gemmlowp's rounding
    /// right shift.
    ///
    /// # Safety
    /// The CPU supports AVX2.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn mbqm(x: __m256i, m: __m256i, right: i32) -> __m256i {
        let nudge = _mm256_set1_epi64x(1 << 30);
        let even = _mm256_add_epi64(_mm256_mul_epi32(x, m), nudge);
        let odd = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64::<32>(x), m), nudge);
        let high = _mm256_blend_epi32::<0b1010_1010>(
            _mm256_srli_epi64::<31>(even),
            _mm256_slli_epi64::<1>(odd),
        );
        let mask = _mm256_set1_epi32(((1i64 << right) - 1) as i32);
        let remainder = _mm256_and_si256(high, mask);
        let threshold = _mm256_sub_epi32(
            _mm256_srai_epi32::<1>(mask),
            _mm256_cmpgt_epi32(_mm256_setzero_si256(), high),
        );
        _mm256_sub_epi32(
            _mm256_sra_epi32(high, _mm_cvtsi32_si128(right)),
            _mm256_cmpgt_epi32(remainder, threshold),
        )
    }

    /// The 8-lane blocks of int8 SQUARED_DIFFERENCE; returns how many values it wrote (a
    /// multiple of 8), the caller finishes the rest.
    ///
    /// # Safety
    /// The CPU supports AVX2; `x`, `y` and `out` have one length.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn squared_difference(
        p: &SquaredDifferenceParams,
        x: &[i8],
        y: &[i8],
        out: &mut [i8],
    ) -> usize {
        let n = out.len().min(x.len()).min(y.len()) / 8 * 8;
        let (m1, m2, mo) = (
            p.input1_multiplier,
            p.input2_multiplier,
            p.output_multiplier,
        );
        let (c1, c2, co) = (
            _mm256_set1_epi32(m1.multiplier),
            _mm256_set1_epi32(m2.multiplier),
            _mm256_set1_epi32(mo.multiplier),
        );
        let (off1, off2, off_out) = (
            _mm256_set1_epi32(p.input1_offset),
            _mm256_set1_epi32(p.input2_offset),
            _mm256_set1_epi32(p.output_offset),
        );
        let (lo, hi) = (_mm256_set1_epi32(-128), _mm256_set1_epi32(127));
        let mut i = 0;
        while i < n {
            // SAFETY: `i + 8 <= n`, inside all three slices.
            let (vx, vy) = unsafe {
                (
                    _mm256_cvtepi8_epi32(_mm_loadl_epi64(x.as_ptr().add(i).cast())),
                    _mm256_cvtepi8_epi32(_mm_loadl_epi64(y.as_ptr().add(i).cast())),
                )
            };
            let sx = _mm256_slli_epi32::<SQUARED_DIFFERENCE_LEFT_SHIFT>(_mm256_add_epi32(vx, off1));
            let sy = _mm256_slli_epi32::<SQUARED_DIFFERENCE_LEFT_SHIFT>(_mm256_add_epi32(vy, off2));
            let d = _mm256_sub_epi32(mbqm(sx, c1, -m1.shift), mbqm(sy, c2, -m2.shift));
            let sq = _mm256_mullo_epi32(d, d);
            let r = _mm256_add_epi32(mbqm(sq, co, -mo.shift), off_out);
            let r = _mm256_min_epi32(_mm256_max_epi32(r, lo), hi);
            let r16 = _mm256_packs_epi32(r, r);
            let r8 = _mm256_packs_epi16(r16, r16);
            let v = _mm256_permutevar8x32_epi32(r8, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
            // SAFETY: `i + 8 <= n <= out.len()`.
            unsafe { _mm_storel_epi64(out.as_mut_ptr().add(i).cast(), _mm256_castsi256_si128(v)) };
            i += 8;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::add::{add_f32, add_quantized};
    use crate::interpreter::reference::div::div_f32;
    use crate::interpreter::reference::maximum_minimum::{maximum, minimum};
    use crate::interpreter::reference::mul::{mul_f32, mul_quantized};
    use crate::interpreter::reference::quant::quantize_multiplier;
    use crate::interpreter::reference::squared_difference::{
        squared_difference_f32, squared_difference_i8 as reference_sqdiff,
        squared_difference_real_multipliers,
    };
    use crate::interpreter::reference::sub::sub_f32;
    use crate::test_support::Rng;

    /// Shape pairs: per channel both ways round, `[C]` against 4-D, per pixel (`[N,H,W,1]`),
    /// a scalar, same shapes, broadcast in the middle, and odd channel counts around the
    /// 8/32-lane blocks.
    fn shape_pairs() -> Vec<(Vec<usize>, Vec<usize>)> {
        vec![
            (vec![1, 5, 6, 64], vec![1, 1, 1, 64]),
            (vec![1, 1, 1, 37], vec![2, 3, 4, 37]),
            (vec![1, 7, 3, 100], vec![100]),
            (vec![2, 4, 5, 9], vec![2, 4, 5, 1]),
            (vec![1], vec![3, 33]),
            (vec![3, 71], vec![3, 71]),
            (vec![2, 1, 5, 3], vec![2, 4, 1, 3]),
            (vec![1, 3, 3, 130], vec![1, 1, 1, 130]),
            (vec![1, 9, 9, 16], vec![16]),
            (vec![1, 1, 1, 3], vec![2, 5, 7, 3]),
        ]
    }

    /// [`shape_pairs`] and more for the float rows, whose AVX-512 body runs 16 lanes with a
    /// masked tail: a rank-0 scalar either side of outputs whose lengths are not multiples of
    /// 16 (an attention score scale), a one-element tensor of every rank up to 6, runs of 1, 15,
    /// 17 and 1023 values, a per-row `[.., 1]` splat over long rows, and 5-D and 6-D broadcasts
    /// in the middle dimensions.
    fn float_shape_pairs() -> Vec<(Vec<usize>, Vec<usize>)> {
        let mut v = shape_pairs();
        v.extend([
            (vec![1, 4, 64, 63], vec![]),
            (vec![], vec![2, 3, 17]),
            (vec![1, 1, 1, 1, 1, 1], vec![3, 5, 7]),
            (vec![1023], vec![1, 1]),
            (vec![1, 1, 1], vec![15]),
            (vec![17], vec![1]),
            (vec![1], vec![1]),
            (vec![3, 1, 2, 1, 5, 19], vec![3, 4, 2, 6, 5, 19]),
            (vec![2, 3, 1, 4, 31], vec![1, 3, 5, 4, 1]),
            (vec![2, 1, 300], vec![2, 7, 1]),
            (vec![1, 5, 1], vec![1, 5, 301]),
        ]);
        v
    }

    fn floats(r: &mut Rng, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (r.next_u64() % 4001) as f32 / 1000.0 - 2.0)
            .collect()
    }

    #[test]
    fn float_ops_match_the_reference_bit_for_bit() {
        let mut r = Rng::new(28);
        type Reference = fn(&BroadcastShapes, f32, f32, &[f32], &[f32], &mut [f32]);
        let ops: [(FloatOp, Reference); 7] = [
            (FloatOp::Add, add_f32),
            (FloatOp::Sub, sub_f32),
            (FloatOp::Mul, mul_f32),
            (FloatOp::Div, div_f32),
            (FloatOp::Maximum, |s, _, _, a, b, o| maximum(s, a, b, o)),
            (FloatOp::Minimum, |s, _, _, a, b, o| minimum(s, a, b, o)),
            (FloatOp::SquaredDifference, |s, _, _, a, b, o| {
                squared_difference_f32(s, a, b, o)
            }),
        ];
        for (da, db) in float_shape_pairs() {
            let s = BroadcastShapes::new(&da, &db).unwrap();
            let mut a = floats(&mut r, da.iter().product());
            let mut b = floats(&mut r, db.iter().product());
            // A NaN and an infinity where they do not fill the whole output.
            if a.len() > 1 {
                a[0] = f32::NAN;
            }
            if b.len() > 2 {
                let last = b.len() - 1;
                b[last] = f32::INFINITY;
            }
            for (op, reference) in ops {
                for (lo, hi) in [(f32::MIN, f32::MAX), (0.0, 6.0), (-1.0, 1.0)] {
                    let mut want = vec![0.0; s.output_len()];
                    reference(&s, lo, hi, &a, &b, &mut want);
                    for &isa in Isa::available() {
                        let mut got = vec![7.0; s.output_len()];
                        binary_f32(isa, op, lo, hi, &s, &a, &b, &mut got);
                        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&got), bits(&want), "{op:?} {isa:?} {da:?} {db:?}");
                    }
                }
            }
        }
    }

    /// Int8 ADD, SUB, MUL, SQUARED_DIFFERENCE, MAXIMUM and MINIMUM over random
    /// quantization (zero points at the ends, scales far apart, activation ranges): the
    /// reference's bits on every path.
    #[test]
    fn int8_ops_match_the_reference_bit_for_bit() {
        let mut r = Rng::new(2028);
        for trial in 0..40 {
            for (da, db) in shape_pairs() {
                let s = BroadcastShapes::new(&da, &db).unwrap();
                let a: Vec<i8> = (0..da.iter().product()).map(|_| r.next_u64() as i8).collect();
                let b: Vec<i8> = (0..db.iter().product()).map(|_| r.next_u64() as i8).collect();
                let scale = |r: &mut Rng| 10f64.powf(-((r.next_u64() % 3000) as f64) / 1000.0);
                let (s1, s2, so) = (scale(&mut r), scale(&mut r), scale(&mut r));
                let zp = |r: &mut Rng| match r.next_u64() % 4 {
                    0 => -128,
                    1 => 127,
                    _ => (r.next_u64() % 256) as i32 - 128,
                };
                let (z1, z2, zo) = (zp(&mut r), zp(&mut r), zp(&mut r));
                let (lo, hi) = if trial % 3 == 0 { (zo.max(-128), 127) } else { (-128, 127) };
                let n = s.output_len();
                // ADD and SUB, as their prepare computes the parameters.
                let twice = 2.0 * s1.max(s2);
                for sub in [false, true] {
                    let mut m2 = quantize_multiplier(s2 / twice);
                    if sub {
                        m2.multiplier = -m2.multiplier;
                    }
                    let p = AddQuantParams {
                        left_shift: 20,
                        input1_offset: -z1,
                        input2_offset: -z2,
                        output_offset: zo,
                        input1_multiplier: quantize_multiplier(s1 / twice),
                        input2_multiplier: m2,
                        output_multiplier: quantize_multiplier(
                            twice / (f64::from(1i32 << 20) * so),
                        ),
                        activation_min: lo,
                        activation_max: hi,
                    };
                    if !(-31..=0).contains(&p.output_multiplier.shift) {
                        continue;
                    }
                    let mut want = vec![0i8; n];
                    add_quantized(&s, &p, &a, &b, &mut want);
                    for &isa in Isa::available() {
                        let mut got = vec![0i8; n];
                        add_i8(isa, &p, &s, &a, &b, &mut got);
                        assert_eq!(got, want, "sub {sub} {isa:?} {da:?} {db:?} {p:?}");
                    }
                }
                // MUL.
                let p = ProductQuantParams {
                    input1_offset: -z1,
                    input2_offset: -z2,
                    output_offset: zo,
                    output_multiplier: quantize_multiplier(s1 * s2 / so),
                    activation_min: lo,
                    activation_max: hi,
                };
                let mut want = vec![0i8; n];
                mul_quantized(&s, &p, &a, &b, &mut want);
                for &isa in Isa::available() {
                    let mut got = vec![0i8; n];
                    mul_i8(isa, &p, &s, &a, &b, &mut got);
                    assert_eq!(got, want, "mul {isa:?} {da:?} {db:?} {p:?}");
                }
                // SQUARED_DIFFERENCE where its prepare accepts the scales.
                let reals = squared_difference_real_multipliers(s1 as f32, s2 as f32, so as f32);
                let [q1, q2, qo] = reals.map(quantize_multiplier);
                if reals.iter().all(|&v| v > 0.0 && v < 1.0) && [q1, q2, qo].iter().all(|m| m.shift <= 0) {
                    let p = SquaredDifferenceParams {
                        input1_offset: -z1,
                        input2_offset: -z2,
                        output_offset: zo,
                        input1_multiplier: q1,
                        input2_multiplier: q2,
                        output_multiplier: qo,
                    };
                    let mut want = vec![0i8; n];
                    reference_sqdiff(&s, &p, &a, &b, &mut want);
                    for &isa in Isa::available() {
                        let mut got = vec![0i8; n];
                        squared_difference_i8(isa, &p, &s, &a, &b, &mut got);
                        assert_eq!(got, want, "sqdiff {isa:?} {da:?} {db:?} {p:?}");
                    }
                }
                // MAXIMUM and MINIMUM.
                for max in [true, false] {
                    let mut want = vec![0i8; n];
                    if max {
                        maximum(&s, &a, &b, &mut want);
                    } else {
                        minimum(&s, &a, &b, &mut want);
                    }
                    for &isa in Isa::available() {
                        let mut got = vec![0i8; n];
                        maximum_minimum_i8(isa, max, &s, &a, &b, &mut got);
                        assert_eq!(got, want, "max {max} {isa:?} {da:?} {db:?}");
                    }
                }
            }
        }
    }
}
