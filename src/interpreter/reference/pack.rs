//! PACK data movement (`reference_ops::Pack`): `n` inputs of one shape stacked along a new
//! axis; viewed as `[outer, n, inner]` with each input `[outer, inner]`.

/// Copies input `k` (`outer * inner` elements) into its slot of the packed `output`.
pub fn pack_one<T: Copy>(
    input: &[T],
    k: usize,
    n: usize,
    outer: usize,
    inner: usize,
    output: &mut [T],
) {
    for i in 0..outer {
        let dst = (i * n + k) * inner;
        output[dst..dst + inner].copy_from_slice(&input[i * inner..(i + 1) * inner]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_on_axis_one() {
        // two [2, 1] inputs on axis 1 -> [2, 2, 1].
        let mut out = [0; 4];
        pack_one(&[1, 2], 0, 2, 2, 1, &mut out);
        pack_one(&[3, 4], 1, 2, 2, 1, &mut out);
        assert_eq!(out, [1, 3, 2, 4]);
    }
}
