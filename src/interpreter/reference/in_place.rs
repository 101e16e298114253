//! Running element-wise slice math in place: output element `i` computed from input element
//! `i` only, where input and output are the same memory.

/// Elements copied aside per step (stack memory, no heap).
pub const CHUNK: usize = 256;

/// Applies `f(input, output)` to `data` in place, `CHUNK` elements at a time: each chunk is
/// copied to a stack buffer and `f` reads it from there while writing the chunk back. `f` must
/// compute every output element from the input element at the same index only (element-wise,
/// no broadcasting, no reduction); any such slice function then gives exactly its out-of-place
/// result.
pub fn map_in_place<T: Copy + Default>(data: &mut [T], f: impl Fn(&[T], &mut [T])) {
    let mut buf = [T::default(); CHUNK];
    for chunk in data.chunks_mut(CHUNK) {
        let tmp = &mut buf[..chunk.len()];
        tmp.copy_from_slice(chunk);
        f(tmp, chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equals_the_out_of_place_result() {
        let f = |i: &[f32], o: &mut [f32]| {
            for (o, x) in o.iter_mut().zip(i) {
                *o = x * 2.0 + 1.0;
            }
        };
        for n in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17] {
            let input: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
            let mut want = vec![0f32; n];
            f(&input, &mut want);
            let mut data = input.clone();
            map_in_place(&mut data, f);
            assert_eq!(data, want, "n = {n}");
        }
    }
}
