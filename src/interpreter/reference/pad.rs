//! PAD / PADV2 arithmetic (TFLite's `reference_ops::Pad`): the input placed inside an output
//! filled with one constant, any rank up to [`MAX_DIMS`].

/// Most dimensions PAD handles.
pub const MAX_DIMS: usize = 6;

/// Input shape and the padding before each dimension (the output shape is input + before +
/// after), left-extended to [`MAX_DIMS`] with size-1, unpadded dimensions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PadPlan {
    /// Input dimensions.
    pub in_dims: [usize; MAX_DIMS],
    /// Output dimensions.
    pub out_dims: [usize; MAX_DIMS],
    /// Padding before, per dimension.
    pub before: [usize; MAX_DIMS],
}

impl PadPlan {
    /// A plan from the input shape and `(before, after)` per dimension; `None` for a rank above
    /// [`MAX_DIMS`] or a size that overflows.
    pub fn new(in_dims: &[usize], paddings: &[(usize, usize)]) -> Option<PadPlan> {
        let rank = in_dims.len();
        if rank > MAX_DIMS || paddings.len() != rank {
            return None;
        }
        let lead = MAX_DIMS - rank;
        let mut p = PadPlan {
            in_dims: [1; MAX_DIMS],
            out_dims: [1; MAX_DIMS],
            before: [0; MAX_DIMS],
        };
        for d in 0..rank {
            let (b, a) = paddings[d];
            p.in_dims[lead + d] = in_dims[d];
            p.before[lead + d] = b;
            p.out_dims[lead + d] = in_dims[d].checked_add(b)?.checked_add(a)?;
        }
        Some(p)
    }

    /// Output elements.
    pub fn output_len(&self) -> usize {
        self.out_dims.iter().product()
    }
}

/// Writes the padded input into `output` (length `plan.output_len()`).
pub fn pad<T: Copy>(plan: &PadPlan, input: &[T], value: T, output: &mut [T]) {
    if plan.in_dims.contains(&0) {
        output.fill(value);
        return;
    }
    // Rows of the last dimension: fill the whole output, then copy every input row in place.
    output.fill(value);
    let [i0, i1, i2, i3, i4, i5] = plan.in_dims;
    let [_, o1, o2, o3, o4, o5] = plan.out_dims;
    let [b0, b1, b2, b3, b4, b5] = plan.before;
    let mut src = 0;
    for a in 0..i0 {
        for b in 0..i1 {
            for c in 0..i2 {
                for d in 0..i3 {
                    for e in 0..i4 {
                        let row =
                            ((((a + b0) * o1 + b + b1) * o2 + c + b2) * o3 + d + b3) * o4 + e + b4;
                        let dst = row * o5 + b5;
                        output[dst..dst + i5].copy_from_slice(&input[src..src + i5]);
                        src += i5;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_2d_with_value() {
        let plan = PadPlan::new(&[2, 2], &[(1, 0), (0, 1)]).unwrap();
        let mut out = [0i8; 9];
        pad(&plan, &[1, 2, 3, 4], -7, &mut out);
        assert_eq!(out, [-7, -7, -7, 1, 2, -7, 3, 4, -7]);
    }

    #[test]
    fn pads_4d_image_style() {
        let plan = PadPlan::new(&[1, 1, 2, 1], &[(0, 0), (1, 1), (0, 0), (0, 1)]).unwrap();
        assert_eq!(plan.output_len(), 12);
        let mut out = [9.0f32; 12];
        pad(&plan, &[1.0, 2.0], 0.0, &mut out);
        assert_eq!(out, [0., 0., 0., 0., 1., 0., 2., 0., 0., 0., 0., 0.]);
    }
}
