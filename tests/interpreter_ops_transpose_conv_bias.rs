//! MediaPipe's `Convolution2DTransposeBias` custom op through the interpreter: SAME and VALID
//! padding, strides, several channels, compared with MediaPipe's loop (bias first, then every
//! input tap in order); malformed custom options and shapes rejected at build.

mod ops_util;

use ops_util::*;
use tensor_alloc::model::DType;

const F32: DType = DType::F32;
const NAME: &str = "Convolution2DTransposeBias";

fn options(padding: i32, stride_w: i32, stride_h: i32) -> Vec<u8> {
    [padding, stride_w, stride_h]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

/// MediaPipe's reference loop, independent of the crate's.
#[allow(clippy::too_many_arguments)]
fn oracle(
    input: &[f32],
    [b, ih, iw, ic]: [usize; 4],
    filter: &[f32],
    [oc, fh, fw]: [usize; 3],
    bias: &[f32],
    [oh, ow]: [usize; 2],
    [sh, sw]: [usize; 2],
    [ph, pw]: [i64; 2],
) -> Vec<f32> {
    let mut out = vec![0.0f32; b * oh * ow * oc];
    for n in 0..b {
        for p in 0..oh * ow {
            for c in 0..oc {
                out[(n * oh * ow + p) * oc + c] = bias[c];
            }
        }
        for y in 0..ih {
            for x in 0..iw {
                for i in 0..ic {
                    for fy in 0..fh {
                        for fx in 0..fw {
                            for c in 0..oc {
                                let oy = (y * sh + fy) as i64 - ph;
                                let ox = (x * sw + fx) as i64 - pw;
                                if oy < 0 || ox < 0 || oy >= oh as i64 || ox >= ow as i64 {
                                    continue;
                                }
                                let o = ((n * oh + oy as usize) * ow + ox as usize) * oc + c;
                                out[o] += input[((n * ih + y) * iw + x) * ic + i]
                                    * filter[((c * fh + fy) * fw + fx) * ic + i];
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 250.0 - 2.0)
        .collect()
}

#[test]
fn matches_mediapipe_for_same_and_valid_padding() {
    // (padding, stride, input [b, h, w, c], filter [oc, fh, fw]).
    for (padding, [sh, sw], [b, ih, iw, ic], [oc, fh, fw]) in [
        (1, [2, 2], [1, 3, 4, 2], [3, 3, 3]),
        (2, [1, 2], [2, 2, 3, 1], [2, 2, 3]),
        (1, [3, 1], [1, 2, 2, 3], [1, 4, 2]),
    ] {
        let pad = |size: usize, f: usize, s: usize| {
            if padding == 1 {
                (f - 1).saturating_sub((size - 1) % s)
            } else {
                0
            }
        };
        let (tph, tpw) = (pad(ih, fh, sh), pad(iw, fw, sw));
        let (oh, ow) = (sh * (ih - 1) + fh - tph, sw * (iw - 1) + fw - tpw);
        let filter = values(oc * fh * fw * ic, 7);
        let bias = values(oc, 3);
        let dims = |v: &[usize]| v.iter().map(|&d| d as i32).collect::<Vec<_>>();
        let m = one_custom(
            NAME,
            &options(padding, sw as i32, sh as i32),
            &[
                t(F32, &dims(&[b, ih, iw, ic])),
                c_f32(&dims(&[oc, fh, fw, ic]), &filter),
                c_f32(&[oc as i32], &bias),
            ],
            &[t(F32, &dims(&[b, oh, ow, oc]))],
        );
        let input = values(b * ih * iw * ic, 11);
        let out = &run::<f32>(&m, &[tensor(&[b, ih, iw, ic], input.clone())])[0];
        let want = oracle(
            &input,
            [b, ih, iw, ic],
            &filter,
            [oc, fh, fw],
            &bias,
            [oh, ow],
            [sh, sw],
            [(tph / 2) as i64, (tpw / 2) as i64],
        );
        assert_eq!(out, &want, "padding {padding} stride {sh}x{sw}");
    }
}

#[test]
fn malformed_nodes_are_errors() {
    let node = |opts: &[u8], bias_len: i32, out: &[i32]| {
        one_custom(
            NAME,
            opts,
            &[
                t(F32, &[1, 2, 2, 1]),
                c_f32(&[2, 2, 2, 1], &[1.0; 8]),
                c_f32(&[bias_len], &vec![0.0; bias_len as usize]),
            ],
            &[t(F32, out)],
        )
    };
    // Valid: stride 2, VALID -> 4x4.
    let ok = node(&options(2, 2, 2), 2, &[1, 4, 4, 2]);
    assert_eq!(
        run::<f32>(&ok, &[tensor(&[1, 2, 2, 1], vec![1.0f32; 4])])[0].len(),
        32
    );
    expect_error(
        &node(&options(2, 2, 2)[..8], 2, &[1, 4, 4, 2]),
        &[NAME, "12"],
    );
    expect_error(
        &node(&options(2, 0, 2), 2, &[1, 4, 4, 2]),
        &[NAME, "stride_width is 0"],
    );
    expect_error(
        &node(&options(7, 2, 2), 2, &[1, 4, 4, 2]),
        &[NAME, "padding 7"],
    );
    expect_error(
        &node(&options(2, 2, 2), 2, &[1, 3, 4, 2]),
        &[NAME, "out0", "height"],
    );
    expect_error(
        &node(&options(2, 2, 2), 3, &[1, 4, 4, 2]),
        &[NAME, "in2", "3 values"],
    );
}
