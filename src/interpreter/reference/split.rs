//! SPLIT, SPLIT_V and UNPACK data movement (TFLite's `reference_ops::Split` and `Unpack`): the
//! input seen as `[outer, axis_len, inner]`, each output a contiguous range of the middle axis.

/// Copies, from each of the `outer` blocks of `axis_len * inner` input elements, the
/// `len * inner` elements starting at `start * inner` into consecutive places of `output`.
pub fn copy_axis_range<T: Copy>(
    input: &[T],
    [outer, axis_len, inner]: [usize; 3],
    start: usize,
    len: usize,
    output: &mut [T],
) {
    let run = len * inner;
    if run == 0 {
        return;
    }
    for (o, out) in output.chunks_exact_mut(run).take(outer).enumerate() {
        let from = (o * axis_len + start) * inner;
        out.copy_from_slice(&input[from..from + run]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn middle_axis_ranges() {
        // [2, 3, 2] split along axis 1 into lengths 1 and 2.
        let input: Vec<i32> = (0..12).collect();
        let mut a = [0; 4];
        let mut b = [0; 8];
        copy_axis_range(&input, [2, 3, 2], 0, 1, &mut a);
        copy_axis_range(&input, [2, 3, 2], 1, 2, &mut b);
        assert_eq!(a, [0, 1, 6, 7]);
        assert_eq!(b, [2, 3, 4, 5, 8, 9, 10, 11]);
    }
}
