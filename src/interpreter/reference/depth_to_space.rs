//! DEPTH_TO_SPACE data movement (`reference_ops::DepthToSpace`, NHWC, DCR order): output
//! `(b, y, x, c)` takes input `(b, y / s, x / s, ((y % s) * s + x % s) * out_c + c)`.

/// Moves `input` of shape `[batches, in_h, in_w, in_c]` into `output` of shape
/// `[batches, in_h * block, in_w * block, in_c / (block * block)]`.
pub fn depth_to_space<T: Copy>(input: &[T], in_dims: [usize; 4], block: usize, output: &mut [T]) {
    let [batches, in_h, in_w, in_c] = in_dims;
    let out_c = in_c / (block * block);
    let (out_h, out_w) = (in_h * block, in_w * block);
    let mut o = 0;
    for b in 0..batches {
        for y in 0..out_h {
            for x in 0..out_w {
                let base = ((b * in_h + y / block) * in_w + x / block) * in_c
                    + ((y % block) * block + x % block) * out_c;
                output[o..o + out_c].copy_from_slice(&input[base..base + out_c]);
                o += out_c;
            }
        }
    }
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
}
