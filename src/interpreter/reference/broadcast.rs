//! Elementwise broadcasting of binary ops as TFLite does it (`NdArrayDesc`,
//! `NdArrayDescsForElementwiseBroadcast`, `BroadcastBinaryOpSimple`): both shapes are extended
//! on the left to [`MAX_BROADCAST_DIMS`] dimensions, a dimension of extent 1 is repeated (stride
//! 0) against the other input's extent, and the output walks every index in row-major order.

/// Most dimensions a broadcast binary op supports (TFLite's 6-D slow path).
pub const MAX_BROADCAST_DIMS: usize = 6;

/// How two input shapes map onto their broadcast output, precomputed at prepare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BroadcastShapes {
    /// Output extents, left-padded with 1s.
    pub extents: [usize; MAX_BROADCAST_DIMS],
    /// Element strides of input 1 (0 on broadcast dimensions).
    pub strides1: [usize; MAX_BROADCAST_DIMS],
    /// Element strides of input 2 (0 on broadcast dimensions).
    pub strides2: [usize; MAX_BROADCAST_DIMS],
    /// Whether the inputs need broadcasting (their extended shapes differ).
    pub requires_broadcast: bool,
}

/// Why two shapes cannot be broadcast together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BroadcastError {
    /// A shape has more than [`MAX_BROADCAST_DIMS`] dimensions.
    TooManyDims(usize),
    /// Dimension `axis` (counted from the left of the extended shape) has extents that are
    /// neither equal nor 1.
    Incompatible {
        /// Axis in the extended shape.
        axis: usize,
        /// Extent in input 1.
        a: usize,
        /// Extent in input 2.
        b: usize,
    },
}

impl core::fmt::Display for BroadcastError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BroadcastError::TooManyDims(n) => write!(
                f,
                "rank {n} exceeds the {MAX_BROADCAST_DIMS} dimensions broadcasting supports"
            ),
            BroadcastError::Incompatible { axis, a, b } => write!(
                f,
                "extents {a} and {b} of (extended) axis {axis} cannot be broadcast"
            ),
        }
    }
}

fn extend(dims: &[usize]) -> [usize; MAX_BROADCAST_DIMS] {
    let mut out = [1; MAX_BROADCAST_DIMS];
    out[MAX_BROADCAST_DIMS - dims.len()..].copy_from_slice(dims);
    out
}

fn strides(ext: &[usize; MAX_BROADCAST_DIMS]) -> [usize; MAX_BROADCAST_DIMS] {
    let mut s = [0; MAX_BROADCAST_DIMS];
    let mut stride = 1usize;
    for i in (0..MAX_BROADCAST_DIMS).rev() {
        s[i] = stride;
        stride = stride.saturating_mul(ext[i]);
    }
    s
}

impl BroadcastShapes {
    /// The broadcast of shapes `a` and `b`.
    pub fn new(a: &[usize], b: &[usize]) -> Result<Self, BroadcastError> {
        for d in [a, b] {
            if d.len() > MAX_BROADCAST_DIMS {
                return Err(BroadcastError::TooManyDims(d.len()));
            }
        }
        let (ea, eb) = (extend(a), extend(b));
        let (mut s1, mut s2) = (strides(&ea), strides(&eb));
        let mut extents = [1; MAX_BROADCAST_DIMS];
        for i in 0..MAX_BROADCAST_DIMS {
            extents[i] = if ea[i] == eb[i] {
                ea[i]
            } else if ea[i] == 1 {
                s1[i] = 0;
                eb[i]
            } else if eb[i] == 1 {
                s2[i] = 0;
                ea[i]
            } else {
                return Err(BroadcastError::Incompatible {
                    axis: i,
                    a: ea[i],
                    b: eb[i],
                });
            };
        }
        Ok(BroadcastShapes {
            extents,
            strides1: s1,
            strides2: s2,
            requires_broadcast: ea != eb,
        })
    }

    /// Number of output elements.
    pub fn output_len(&self) -> usize {
        self.extents.iter().product()
    }

    /// The output shape at rank `rank` (the larger input rank): the last `rank` extents.
    pub fn output_dims(&self, rank: usize) -> &[usize] {
        &self.extents[MAX_BROADCAST_DIMS - rank.min(MAX_BROADCAST_DIMS)..]
    }
}

/// One innermost row of a broadcast: `out[j] = f(a[ao + j·sa], b[bo + j·sb])`. The innermost
/// strides are 1 or 0 (a repeated element), and each of those cases is a loop over slices
/// without index arithmetic, which the compiler vectorizes; the per-element `f` is the same,
/// so the results are too.
#[inline(always)]
fn row_binary<A: Copy, B: Copy, O>(
    out: &mut [O],
    (a, ao, sa): (&[A], usize, usize),
    (b, bo, sb): (&[B], usize, usize),
    f: &impl Fn(A, B) -> O,
) {
    let n = out.len();
    if n == 0 {
        return;
    }
    match (sa, sb) {
        (1, 1) => {
            for ((o, &x), &y) in out.iter_mut().zip(&a[ao..ao + n]).zip(&b[bo..bo + n]) {
                *o = f(x, y);
            }
        }
        (1, 0) => {
            let y = b[bo];
            for (o, &x) in out.iter_mut().zip(&a[ao..ao + n]) {
                *o = f(x, y);
            }
        }
        (0, 1) => {
            let x = a[ao];
            for (o, &y) in out.iter_mut().zip(&b[bo..bo + n]) {
                *o = f(x, y);
            }
        }
        _ => {
            for (j, o) in out.iter_mut().enumerate() {
                *o = f(a[ao + j * sa], b[bo + j * sb]);
            }
        }
    }
}

/// Applies `f` elementwise with broadcasting: `out[i] = f(a[i1], b[i2])` for every output index.
/// `a`, `b` and `out` must hold the element counts `shapes` was built for.
#[inline]
pub fn broadcast_binary<A: Copy, B: Copy, O>(
    shapes: &BroadcastShapes,
    a: &[A],
    b: &[B],
    out: &mut [O],
    f: impl Fn(A, B) -> O,
) {
    if !shapes.requires_broadcast {
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = f(x, y);
        }
        return;
    }
    let e = &shapes.extents;
    let (s1, s2) = (&shapes.strides1, &shapes.strides2);
    let mut o = 0usize;
    for i0 in 0..e[0] {
        let (a0, b0) = (i0 * s1[0], i0 * s2[0]);
        for i1 in 0..e[1] {
            let (a1, b1) = (a0 + i1 * s1[1], b0 + i1 * s2[1]);
            for i2 in 0..e[2] {
                let (a2, b2) = (a1 + i2 * s1[2], b1 + i2 * s2[2]);
                for i3 in 0..e[3] {
                    let (a3, b3) = (a2 + i3 * s1[3], b2 + i3 * s2[3]);
                    for i4 in 0..e[4] {
                        let (a4, b4) = (a3 + i4 * s1[4], b3 + i4 * s2[4]);
                        let row = &mut out[o..o + e[5]];
                        row_binary(row, (a, a4, s1[5]), (b, b4, s2[5]), &f);
                        o += e[5];
                    }
                }
            }
        }
    }
}

/// Output elements `start..start + out.len()` of [`broadcast_binary`]: each element is the
/// same `f(a[i1], b[i2])`, so an output split into ranges (one per thread) gets the bits of one
/// call.
pub fn broadcast_binary_range<A: Copy, B: Copy, O>(
    shapes: &BroadcastShapes,
    a: &[A],
    b: &[B],
    start: usize,
    out: &mut [O],
    f: impl Fn(A, B) -> O,
) {
    if !shapes.requires_broadcast {
        let (a, b) = (&a[start..], &b[start..]);
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = f(x, y);
        }
        return;
    }
    let e = &shapes.extents;
    let (s1, s2) = (&shapes.strides1, &shapes.strides2);
    // The output index of `start`, innermost dimension last.
    let mut idx = [0usize; MAX_BROADCAST_DIMS];
    let mut rest = start;
    for i in (0..MAX_BROADCAST_DIMS).rev() {
        idx[i] = rest % e[i].max(1);
        rest /= e[i].max(1);
    }
    let last = MAX_BROADCAST_DIMS - 1;
    let mut o = 0;
    while o < out.len() {
        let (mut ao, mut bo) = (0, 0);
        for i in 0..last {
            ao += idx[i] * s1[i];
            bo += idx[i] * s2[i];
        }
        let run = (e[last] - idx[last]).min(out.len() - o);
        let (ai, bi) = (ao + idx[last] * s1[last], bo + idx[last] * s2[last]);
        row_binary(
            &mut out[o..o + run],
            (a, ai, s1[last]),
            (b, bi, s2[last]),
            &f,
        );
        o += run;
        idx[last] = 0;
        for i in (0..last).rev() {
            idx[i] += 1;
            if idx[i] < e[i] {
                break;
            }
            idx[i] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pairing of inner strides (1 or 0 on either side) and odd extents against an index
    /// computed from scratch for each output element.
    #[test]
    fn rows_match_per_element_indexing() {
        for (a_dims, b_dims) in [
            (&[3usize, 5, 7][..], &[7usize][..]),
            (&[3, 5, 1], &[5, 7]),
            (&[1, 7], &[3, 5, 7]),
            (&[2, 1, 3, 1], &[1, 4, 1, 9]),
            (&[2, 3, 1], &[2, 3, 1]),
            (&[4, 0, 3], &[3]),
            (&[5, 1], &[]),
        ] {
            let s = BroadcastShapes::new(a_dims, b_dims).unwrap();
            let a: Vec<i64> = (0..a_dims.iter().product::<usize>() as i64).collect();
            let b: Vec<i64> = (0..b_dims.iter().product::<usize>() as i64).collect();
            let mut got = vec![0i64; s.output_len()];
            broadcast_binary(&s, &a, &b, &mut got, |x, y| x * 1000 + y);
            let e = &s.extents;
            let want: Vec<i64> = (0..s.output_len())
                .map(|flat| {
                    let (mut rest, mut ia, mut ib) = (flat, 0, 0);
                    for d in (0..MAX_BROADCAST_DIMS).rev() {
                        let i = rest % e[d];
                        rest /= e[d];
                        ia += i * s.strides1[d];
                        ib += i * s.strides2[d];
                    }
                    a[ia] * 1000 + b[ib]
                })
                .collect();
            assert_eq!(got, want, "{a_dims:?} {b_dims:?}");
        }
    }

    #[test]
    fn ranges_match_the_whole() {
        for (a_dims, b_dims) in [
            (&[2usize, 3, 4][..], &[4usize][..]),
            (&[2, 1, 3], &[4, 1]),
            (&[3, 5], &[3, 5]),
            (&[1, 4, 4, 3], &[1, 1, 3]),
        ] {
            let s = BroadcastShapes::new(a_dims, b_dims).unwrap();
            let a: Vec<i32> = (0..a_dims.iter().product::<usize>() as i32).collect();
            let b: Vec<i32> = (0..b_dims.iter().product::<usize>() as i32)
                .map(|x| x * 1000)
                .collect();
            let mut whole = vec![0; s.output_len()];
            broadcast_binary(&s, &a, &b, &mut whole, |x, y| x + y);
            for chunk in [1, 2, 5, 7, s.output_len()] {
                let mut parts = vec![-1; s.output_len()];
                for (k, part) in parts.chunks_mut(chunk).enumerate() {
                    broadcast_binary_range(&s, &a, &b, k * chunk, part, |x, y| x + y);
                }
                assert_eq!(parts, whole, "{a_dims:?} {b_dims:?} chunk {chunk}");
            }
        }
    }

    #[test]
    fn broadcasts_like_numpy() {
        let s = BroadcastShapes::new(&[2, 1, 3], &[4, 1]).unwrap();
        assert!(s.requires_broadcast);
        assert_eq!(s.output_dims(3), &[2, 4, 3]);
        let a: Vec<i32> = (0..6).collect();
        let b = [100, 200, 300, 400];
        let mut out = vec![0; s.output_len()];
        broadcast_binary(&s, &a, &b, &mut out, |x, y| x + y);
        let mut want = Vec::new();
        for i in 0..2 {
            for bj in &b {
                for k in 0..3 {
                    want.push(a[i * 3 + k] + bj);
                }
            }
        }
        assert_eq!(out, want);
    }

    #[test]
    fn same_shapes_and_scalars() {
        let s = BroadcastShapes::new(&[1, 3], &[3]).unwrap();
        assert!(!s.requires_broadcast);
        let s = BroadcastShapes::new(&[2, 2], &[]).unwrap();
        assert!(s.requires_broadcast);
        let mut out = [0; 4];
        broadcast_binary(&s, &[1, 2, 3, 4], &[10], &mut out, |x, y| x * y);
        assert_eq!(out, [10, 20, 30, 40]);
    }

    #[test]
    fn rejects_bad_shapes() {
        assert!(matches!(
            BroadcastShapes::new(&[2, 3], &[4, 3]),
            Err(BroadcastError::Incompatible { .. })
        ));
        assert!(matches!(
            BroadcastShapes::new(&[1; 7], &[1]),
            Err(BroadcastError::TooManyDims(7))
        ));
    }
}
