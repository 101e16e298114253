//! DEPTH_TO_SPACE and SPACE_TO_DEPTH data movement (`reference_ops::DepthToSpace`,
//! `SpaceToDepth`, NHWC, DCR order). One mapping serves both: pixel `(b, y, x)` of the
//! spatially large tensor `[batches, h, w, c]` holds the `c` channels that the small tensor
//! `[batches, h / s, w / s, c * s * s]` keeps at pixel `(b, y / s, x / s)` from channel
//! `((y % s) * s + x % s) * c`.

/// Calls `f(large, small, len)` with the offsets of every run of `len` values that the two
/// layouts share, for the large tensor `[batches, h, w, c]` and block size `block` (`h` and `w`
/// multiples of it): the `block` adjacent pixels of a large row that come from one small pixel
/// keep their `block · c` channels adjacent in both layouts, so each run is that long.
/// Only the large tensor's rows `rows` (row `b · h + y`) are visited, large offsets still
/// counted from the tensor's start.
#[inline(always)]
fn for_each_run(
    [_, h, w, c]: [usize; 4],
    block: usize,
    rows: core::ops::Range<usize>,
    mut f: impl FnMut(usize, usize, usize),
) {
    let (small_h, small_w, small_c) = (h / block, w / block, c * block * block);
    let len = block * c;
    let mut large = rows.start * w * c;
    for row in rows {
        let (b, y) = (row / h, row % h);
        for xs in 0..small_w {
            let small =
                ((b * small_h + y / block) * small_w + xs) * small_c + (y % block) * block * c;
            f(large, small, len);
            large += len;
        }
    }
}

/// Moves `input` of shape `[batches, in_h, in_w, in_c]` into `output` of shape
/// `[batches, in_h * block, in_w * block, in_c / (block * block)]`.
pub fn depth_to_space<T: Copy>(input: &[T], in_dims: [usize; 4], block: usize, output: &mut [T]) {
    let [batches, in_h, in_w, in_c] = in_dims;
    let c = in_c / (block * block);
    let large = [batches, in_h * block, in_w * block, c];
    for_each_run(large, block, 0..batches * in_h * block, |o, i, len| {
        output[o..o + len].copy_from_slice(&input[i..i + len])
    });
}

/// [`depth_to_space`]'s output rows from `row0` on (row `b · in_h · block + y`), as many as
/// `part` holds (whole rows of `in_w · block · in_c / block²` values): the same bytes as the
/// whole call puts there, so rows can be split among threads.
pub fn depth_to_space_rows<T: Copy>(
    input: &[T],
    in_dims: [usize; 4],
    block: usize,
    row0: usize,
    part: &mut [T],
) {
    let [batches, in_h, in_w, in_c] = in_dims;
    let c = in_c / (block * block);
    let row_len = in_w * block * c;
    if row_len == 0 {
        return;
    }
    let large = [batches, in_h * block, in_w * block, c];
    let base = row0 * row_len;
    for_each_run(large, block, row0..row0 + part.len() / row_len, |o, i, len| {
        part[o - base..o - base + len].copy_from_slice(&input[i..i + len])
    });
}

/// Moves `input` of shape `[batches, in_h, in_w, in_c]` (`in_h`, `in_w` multiples of `block`)
/// into `output` of shape `[batches, in_h / block, in_w / block, in_c * block * block]`.
pub fn space_to_depth<T: Copy>(input: &[T], in_dims: [usize; 4], block: usize, output: &mut [T]) {
    for_each_run(in_dims, block, 0..in_dims[0] * in_dims[1], |i, o, len| {
        output[o..o + len].copy_from_slice(&input[i..i + len])
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_two() {
        // 1x1x1x4 -> 1x2x2x1.
        let mut out = [0; 4];
        depth_to_space(&[1, 2, 3, 4], [1, 1, 1, 4], 2, &mut out);
        assert_eq!(out, [1, 2, 3, 4]);
        // 1x1x2x4 -> 1x2x4x1: rows interleave the two input pixels.
        let mut out = [0; 8];
        depth_to_space(&[1, 2, 3, 4, 5, 6, 7, 8], [1, 1, 2, 4], 2, &mut out);
        assert_eq!(out, [1, 2, 5, 6, 3, 4, 7, 8]);
    }

    #[test]
    fn space_to_depth_inverts_depth_to_space() {
        let input: Vec<i32> = (0..2 * 4 * 6 * 3).collect();
        let mut packed = vec![0; input.len()];
        space_to_depth(&input, [2, 4, 6, 3], 2, &mut packed);
        // Pixel (0, 0, 1) of the packed tensor starts with input pixel (0, 0, 2).
        assert_eq!(&packed[12..15], &[6, 7, 8]);
        let mut back = vec![0; input.len()];
        depth_to_space(&packed, [2, 2, 3, 12], 2, &mut back);
        assert_eq!(back, input);
    }

    #[test]
    fn rows_in_bands_give_the_whole_output() {
        // [2, 3, 2, 18] with block 3: 18 large rows of 6 pixels × 2 channels.
        let input: Vec<i32> = (0..2 * 3 * 2 * 18).collect();
        let mut whole = vec![0; input.len()];
        depth_to_space(&input, [2, 3, 2, 18], 3, &mut whole);
        for band in [1, 4, 7, 18] {
            let mut split = vec![-1; input.len()];
            for (t, part) in split.chunks_mut(band * 12).enumerate() {
                depth_to_space_rows(&input, [2, 3, 2, 18], 3, t * band, part);
            }
            assert_eq!(split, whole, "bands of {band} rows");
        }
    }
}
