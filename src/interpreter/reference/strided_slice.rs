//! STRIDED_SLICE arithmetic (TFLite's `strided_slice.cc` index processing and
//! `reference_ops::StridedSlice`): ellipsis and new-axis masks expand the index spec to an
//! effective input shape; begin/end masks, negative indices and strides, shrink-axis and
//! `offset` (end relative to begin) then give, per axis, a start, a step and a count.

use rust_alloc::{string::String, string::ToString};

/// Most effective dimensions (input dimensions plus new axes) handled.
pub const MAX_DIMS: usize = 6;

/// The slice's options and index vectors (all of the same length).
#[derive(Clone, Copy, Debug)]
pub struct SliceSpec<'a> {
    /// Begin indices.
    pub begin: &'a [i32],
    /// End indices.
    pub end: &'a [i32],
    /// Strides.
    pub strides: &'a [i32],
    /// Bit `i`: ignore `begin[i]` (start from the first element in the stride's direction).
    pub begin_mask: i32,
    /// Bit `i`: ignore `end[i]`.
    pub end_mask: i32,
    /// Bit `i`: index `i` is an ellipsis (covers every dimension the spec does not name).
    pub ellipsis_mask: i32,
    /// Bit `i`: index `i` inserts a dimension of size 1.
    pub new_axis_mask: i32,
    /// Bit `i`: index `i` takes one element and removes the dimension.
    pub shrink_axis_mask: i32,
    /// `end` is relative to `begin`.
    pub offset: bool,
}

impl<'a> SliceSpec<'a> {
    /// The spec of a STRIDED_SLICE with `options` (`StridedSliceOptions`; absent options are
    /// all masks clear) over index vectors `begin`, `end` and `strides`; `None` for options of
    /// another op.
    pub fn from_options(
        options: &crate::model::BuiltinOptions,
        begin: &'a [i32],
        end: &'a [i32],
        strides: &'a [i32],
    ) -> Option<SliceSpec<'a>> {
        use crate::model::BuiltinOptions;
        let spec = SliceSpec::new(begin, end, strides);
        match *options {
            BuiltinOptions::StridedSlice {
                begin_mask,
                end_mask,
                ellipsis_mask,
                new_axis_mask,
                shrink_axis_mask,
                offset,
            } => Some(SliceSpec {
                begin_mask,
                end_mask,
                ellipsis_mask,
                new_axis_mask,
                shrink_axis_mask,
                offset,
                ..spec
            }),
            BuiltinOptions::None => Some(spec),
            _ => None,
        }
    }
}

/// Per effective axis: first input index, step, element count and input stride; plus the
/// output shape. Left-extended to [`MAX_DIMS`] with one-element axes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlicePlan {
    /// First input index per axis.
    pub starts: [i64; MAX_DIMS],
    /// Step per axis.
    pub steps: [i64; MAX_DIMS],
    /// Elements taken per axis.
    pub counts: [usize; MAX_DIMS],
    /// Input stride per axis (0 for an inserted axis).
    pub in_strides: [i64; MAX_DIMS],
    /// Output shape (shrunk axes removed, new axes kept).
    pub out_dims: [usize; MAX_DIMS],
    /// Output rank.
    pub out_rank: usize,
}

impl SlicePlan {
    /// Output shape.
    pub fn out_shape(&self) -> &[usize] {
        &self.out_dims[..self.out_rank]
    }
    /// Output elements.
    pub fn output_len(&self) -> usize {
        self.counts.iter().product()
    }
}

fn bit(mask: i32, i: usize) -> bool {
    i < 32 && mask & (1 << i) != 0
}

/// Builds the plan for an input of shape `in_dims`; an error names what is invalid.
pub fn slice_plan(in_dims: &[usize], s: &SliceSpec<'_>) -> Result<SlicePlan, String> {
    let n = s.begin.len();
    if s.end.len() != n || s.strides.len() != n {
        return Err(format!(
            "begin, end and strides have {}, {} and {} elements",
            n,
            s.end.len(),
            s.strides.len()
        ));
    }
    if n > 31 {
        return Err(format!("{n} slice indices, at most 31"));
    }
    let input_dims = in_dims.len();
    let num_add_axis = (0..n)
        .filter(|&i| !bit(s.ellipsis_mask, i) && bit(s.new_axis_mask, i))
        .count();
    let eff = input_dims + num_add_axis;
    if eff > MAX_DIMS {
        return Err(format!(
            "{eff} effective dimensions (input plus new axes), at most {MAX_DIMS}"
        ));
    }
    // Expand the ellipsis and place the new axes, as TFLite's BuildStridedSliceParams.
    let (mut ell_mask, mut new_mask) = (0u32, 0u32);
    let mut ellipsis_start = eff;
    let mut expanded = 0usize;
    let mut i = 0usize;
    while i < eff {
        if bit(s.ellipsis_mask, i) {
            ellipsis_start = i;
            let end_idx = (i + 1).max(
                (i as isize + 1 + num_add_axis as isize + input_dims as isize - n as isize)
                    .min(eff as isize)
                    .max(0) as usize,
            );
            expanded = end_idx - ellipsis_start - 1;
            while i < end_idx {
                ell_mask |= 1 << i;
                i += 1;
            }
            continue;
        }
        if i >= expanded && bit(s.new_axis_mask, i - expanded) {
            new_mask |= 1 << i;
        }
        i += 1;
    }
    let mut start_idx = [0i32; MAX_DIMS];
    let mut stop_idx = [0i32; MAX_DIMS];
    let mut stride = [1i32; MAX_DIMS];
    let mut eff_dims = [1usize; MAX_DIMS];
    let (mut bm, mut em, mut sm) = (0u32, 0u32, 0u32);
    let (mut added_ellipsis, mut added_axes) = (0usize, 0usize);
    let in_dim = |k: usize| -> Result<usize, String> {
        in_dims
            .get(k)
            .copied()
            .ok_or_else(|| "the slice spec names more dimensions than the input has".to_string())
    };
    for i in 0..eff {
        if ell_mask & (1 << i) != 0 {
            added_ellipsis = i.saturating_sub(ellipsis_start);
            bm |= 1 << i;
            em |= 1 << i;
            eff_dims[i] = in_dim(i - added_axes)?;
        } else if new_mask & (1 << i) != 0 {
            stop_idx[i] = 1;
            added_axes += 1;
        } else if i >= n + expanded {
            bm |= 1 << i;
            em |= 1 << i;
            eff_dims[i] = in_dim(i - added_axes)?;
        } else {
            let o = i - added_ellipsis;
            start_idx[i] = s.begin[o];
            stop_idx[i] = s.end[o];
            stride[i] = s.strides[o];
            if bit(s.begin_mask, o) {
                bm |= 1 << i;
            }
            if bit(s.end_mask, o) {
                em |= 1 << i;
            }
            if bit(s.shrink_axis_mask, o) {
                sm |= 1 << i;
            }
            eff_dims[i] = in_dim(i - added_axes)?;
        }
    }
    // Input strides of the effective axes (inserted axes walk nothing).
    let mut in_strides = [0i64; MAX_DIMS];
    let mut acc = 1i64;
    let mut k = eff;
    while k > 0 {
        k -= 1;
        if new_mask & (1 << k) == 0 {
            in_strides[k] = acc;
            acc = acc.saturating_mul(eff_dims[k] as i64);
        }
    }
    let lead = MAX_DIMS - eff;
    let mut plan = SlicePlan {
        counts: [1; MAX_DIMS],
        steps: [1; MAX_DIMS],
        ..Default::default()
    };
    for a in 0..eff {
        let size = i64::try_from(eff_dims[a]).map_err(|_| "dimension too large".to_string())?;
        let st = i64::from(stride[a]);
        if st == 0 {
            return Err(format!("stride of dimension {a} is 0"));
        }
        // StridedSliceStartForAxis.
        let mut start = i64::from(start_idx[a]);
        if start < 0 {
            start += size;
        }
        start = if st > 0 {
            start.clamp(0, size)
        } else {
            start.clamp(-1, size - 1)
        };
        if bm & (1 << a) != 0 {
            start = if st > 0 { 0 } else { size - 1 };
        }
        // StridedSliceEndForAxis.
        let shrink = sm & (1 << a) != 0;
        let end = if shrink {
            if start >= size {
                start
            } else {
                start + 1
            }
        } else {
            let mut end = i64::from(stop_idx[a]);
            if s.offset {
                end += start;
            }
            if end < 0 {
                end += size;
            }
            end = if st > 0 {
                end.clamp(0, size)
            } else {
                end.clamp(-1, size - 1)
            };
            if em & (1 << a) != 0 {
                end = if st > 0 { size } else { -1 };
            }
            end
        };
        let count = if st > 0 {
            if end > start {
                (end - start + st - 1) / st
            } else {
                0
            }
        } else if end < start {
            (start - end + (-st) - 1) / (-st)
        } else {
            0
        };
        let p = lead + a;
        plan.starts[p] = start;
        plan.steps[p] = st;
        plan.counts[p] = count as usize;
        plan.in_strides[p] = in_strides[a];
        if !shrink {
            plan.out_dims[plan.out_rank] = count as usize;
            plan.out_rank += 1;
        }
    }
    Ok(plan)
}

impl<'a> SliceSpec<'a> {
    /// A spec of `begin`, `end` and `strides` with every mask clear and `offset` false.
    pub fn new(begin: &'a [i32], end: &'a [i32], strides: &'a [i32]) -> Self {
        SliceSpec {
            begin,
            end,
            strides,
            begin_mask: 0,
            end_mask: 0,
            ellipsis_mask: 0,
            new_axis_mask: 0,
            shrink_axis_mask: 0,
            offset: false,
        }
    }
}

/// Writes the slice into `output` (length `plan.output_len()`).
pub fn strided_slice<T: Copy>(plan: &SlicePlan, input: &[T], output: &mut [T]) {
    let idx = |a: usize, k: usize| (plan.starts[a] + k as i64 * plan.steps[a]) * plan.in_strides[a];
    let [c0, c1, c2, c3, c4, c5] = plan.counts;
    let mut o = 0;
    for a in 0..c0 {
        let ia = idx(0, a);
        for b in 0..c1 {
            let ib = ia + idx(1, b);
            for c in 0..c2 {
                let ic = ib + idx(2, c);
                for d in 0..c3 {
                    let id = ic + idx(3, d);
                    for e in 0..c4 {
                        let ie = id + idx(4, e);
                        for f in 0..c5 {
                            output[o] = input[(ie + idx(5, f)) as usize];
                            o += 1;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(b: &'a [i32], e: &'a [i32], s: &'a [i32]) -> SliceSpec<'a> {
        SliceSpec::new(b, e, s)
    }

    fn run(dims: &[usize], s: &SliceSpec<'_>) -> (Vec<usize>, Vec<i32>) {
        let n: usize = dims.iter().product();
        let input: Vec<i32> = (0..n as i32).collect();
        let p = slice_plan(dims, s).unwrap();
        let mut out = vec![0; p.output_len()];
        strided_slice(&p, &input, &mut out);
        (p.out_shape().to_vec(), out)
    }

    #[test]
    fn basic_negative_stride_and_masks() {
        assert_eq!(run(&[5], &spec(&[1], &[4], &[2])), (vec![2], vec![1, 3]));
        assert_eq!(run(&[5], &spec(&[-1], &[0], &[-2])), (vec![2], vec![4, 2]));
        let mut s = spec(&[3], &[0], &[-1]);
        s.end_mask = 1;
        assert_eq!(run(&[5], &s), (vec![4], vec![3, 2, 1, 0]));
        let mut s = spec(&[1, 0], &[2, 3], &[1, 1]);
        s.shrink_axis_mask = 1;
        assert_eq!(run(&[2, 3], &s), (vec![3], vec![3, 4, 5]));
    }

    #[test]
    fn ellipsis_new_axis_and_offset() {
        // x[..., 1] on [2, 3]: ellipsis covers dim 0.
        let mut s = spec(&[0, 1], &[0, 2], &[1, 1]);
        s.ellipsis_mask = 1;
        assert_eq!(run(&[2, 3], &s), (vec![2, 1], vec![1, 4]));
        // x[tf.newaxis, 1:] on [3].
        let mut s = spec(&[0, 1], &[0, 3], &[1, 1]);
        s.new_axis_mask = 1;
        assert_eq!(run(&[3], &s), (vec![1, 2], vec![1, 2]));
        // offset: end = begin + 2.
        let mut s = spec(&[1], &[2], &[1]);
        s.offset = true;
        assert_eq!(run(&[5], &s), (vec![2], vec![1, 2]));
        assert!(slice_plan(&[5], &spec(&[0], &[1], &[0])).is_err());
    }
}
