//! DYNAMIC_UPDATE_SLICE data movement (LiteRT's `dynamic_update_slice.cc`): the output is the
//! operand with the block of the update's shape written at the start indices, each start
//! clamped to `[0, operand_dim − update_dim]` (XLA's rule: the block always lies inside the
//! operand, whatever the indices say).

/// Most dimensions [`dynamic_update_slice`] takes (LiteRT's limit for this op is 6 too).
pub const MAX_RANK: usize = 6;

/// The shapes [`dynamic_update_slice`] works with. Invariant: the ranks are equal, at most
/// [`MAX_RANK`], and every update dimension is at most the operand's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpdateDims {
    /// Rank of both tensors.
    pub rank: usize,
    /// The operand's (and output's) dimensions; `rank..` unused.
    pub operand: [usize; MAX_RANK],
    /// The update's dimensions; `rank..` unused.
    pub update: [usize; MAX_RANK],
}

impl UpdateDims {
    /// The dimensions, or `None` when the ranks differ, exceed [`MAX_RANK`], or an update
    /// dimension exceeds the operand's.
    pub fn new(operand: &[usize], update: &[usize]) -> Option<Self> {
        if operand.len() != update.len() || operand.len() > MAX_RANK {
            return None;
        }
        if operand.iter().zip(update).any(|(o, u)| u > o) {
            return None;
        }
        let mut d = Self {
            rank: operand.len(),
            operand: [1; MAX_RANK],
            update: [1; MAX_RANK],
        };
        d.operand[..d.rank].copy_from_slice(operand);
        d.update[..d.rank].copy_from_slice(update);
        Some(d)
    }

    /// The start of the block along each axis: `start[k]` clamped to
    /// `[0, operand[k] − update[k]]` (axes past `start.len()` start at 0).
    pub fn clamped_start<I: Copy + Into<i64>>(&self, start: &[I]) -> [usize; MAX_RANK] {
        let mut out = [0usize; MAX_RANK];
        for (k, o) in out.iter_mut().enumerate().take(self.rank) {
            let room = (self.operand[k] - self.update[k]) as i64;
            let s = start.get(k).map_or(0, |&v| v.into());
            *o = s.clamp(0, room) as usize;
        }
        out
    }
}

/// Writes `update` into `output` (which holds the operand's values, or is the operand) at
/// `start` clamped as [`UpdateDims::clamped_start`] says. The update is copied in runs of its
/// innermost dimensions that are contiguous in the output.
///
/// `output` has the operand's element count and `update` the update's (the kernel checked both).
pub fn dynamic_update_slice<T: Copy, I: Copy + Into<i64>>(
    d: &UpdateDims,
    start: &[I],
    update: &[T],
    output: &mut [T],
) {
    if update.is_empty() {
        return;
    }
    let start = d.clamped_start(start);
    let rank = d.rank.max(1);
    // Strides of the output, in elements.
    let mut stride = [1usize; MAX_RANK];
    for k in (0..rank - 1).rev() {
        stride[k] = stride[k + 1] * d.operand[k + 1];
    }
    // Fold the innermost axes the update spans completely into one run (the first of them may
    // be partial): `run` elements are contiguous in both tensors.
    let mut inner = rank - 1;
    let mut run = d.update[inner];
    while inner > 0 && d.update[inner] == d.operand[inner] {
        inner -= 1;
        run *= d.update[inner];
    }
    // Walk the outer axes `0..inner` of the update (an odometer over their indices).
    let mut index = [0usize; MAX_RANK];
    for chunk in update.chunks_exact(run) {
        let at: usize = (0..rank).map(|k| (start[k] + index[k]) * stride[k]).sum();
        output[at..at + run].copy_from_slice(chunk);
        let mut k = inner;
        while k > 0 {
            k -= 1;
            index[k] += 1;
            if index[k] < d.update[k] {
                break;
            }
            index[k] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The update written element by element, as the definition reads.
    fn naive(d: &UpdateDims, start: &[i64], update: &[i32], output: &mut [i32]) {
        let s = d.clamped_start(start);
        for (e, &value) in update.iter().enumerate() {
            let (mut rem, mut at, mut stride) = (e, 0, 1);
            for k in (0..d.rank).rev() {
                let i = rem % d.update[k];
                rem /= d.update[k];
                at += (s[k] + i) * stride;
                stride *= d.operand[k];
            }
            output[at] = value;
        }
    }

    #[test]
    fn matches_the_definition_for_every_start_and_shape() {
        let shapes: &[(&[usize], &[usize])] = &[
            (&[6, 1, 8], &[1, 1, 8]),
            (&[5], &[2]),
            (&[4, 3], &[2, 2]),
            (&[3, 4, 5], &[2, 4, 5]),
            (&[3, 4, 5], &[3, 1, 2]),
            (&[2, 3, 4, 5], &[1, 2, 4, 3]),
            (&[2, 2], &[0, 2]),
            (&[], &[]),
        ];
        for &(op, up) in shapes {
            let d = UpdateDims::new(op, up).unwrap();
            let n: usize = op.iter().product();
            let m: usize = up.iter().product();
            let update: Vec<i32> = (0..m as i32).map(|v| 1000 + v).collect();
            // Starts below 0, inside, and past the room on each axis.
            for s in [-3i64, 0, 1, 2, 9] {
                let start: Vec<i64> = (0..op.len()).map(|k| s - k as i64).collect();
                let mut want: Vec<i32> = (0..n as i32).collect();
                let mut got = want.clone();
                naive(&d, &start, &update, &mut want);
                dynamic_update_slice(&d, &start, &update, &mut got);
                assert_eq!(got, want, "operand {op:?} update {up:?} start {start:?}");
            }
        }
    }

    #[test]
    fn starts_are_clamped_into_the_operand() {
        let d = UpdateDims::new(&[6, 1, 8], &[1, 1, 8]).unwrap();
        assert_eq!(d.clamped_start(&[3i32, -1, -1])[..3], [3, 0, 0]);
        assert_eq!(d.clamped_start(&[7i32, 2, 0])[..3], [5, 0, 0]);
        assert_eq!(d.clamped_start(&[i64::MIN, i64::MAX, 0])[..3], [0, 0, 0]);
    }

    #[test]
    fn refuses_shapes_that_cannot_be_updated() {
        assert!(UpdateDims::new(&[2, 3], &[3, 3]).is_none());
        assert!(UpdateDims::new(&[2, 3], &[2]).is_none());
        assert!(UpdateDims::new(&[1; 7], &[1; 7]).is_none());
    }
}
