//! The int8 products' AVX-512 VNNI body (and every other path) against the reference at the
//! extremes of its arithmetic.

use super::conv_i8::{conv_i8_rows_in_place_with, panel_scratch_len};
use super::tests::{bias, Quant};
use super::Isa;
use crate::interpreter::reference::conv::testutil::Rng;
use crate::interpreter::reference::conv::{conv_i8, ConvGeometry};

/// An int8 value at an end of the range (-128, -127, 127) three times in four, else any.
fn extreme(r: &mut Rng) -> i8 {
    match r.pick(0, 4) {
        0 => -128,
        1 => -127,
        2 => 127,
        _ => r.range(-128, 127) as i8,
    }
}

/// The extremes of the VNNI product's arithmetic (`x ^ 0x80` activations, the
/// `(input_offset - 128) * sum(w)` start of every accumulator, the zero point at padded taps):
/// inputs and filters at -128/-127/127, input zero points -128 and 127, depths that are not a
/// multiple of 4, channel counts that are not a multiple of 16, pixel counts that are not a
/// multiple of the 8-row tile, padding, one scale and a scale per channel; every path,
/// the filter read in place.
#[test]
fn conv_in_place_extremes_match_reference() {
    let mut r = Rng::new(4099);
    for case in 0..48 {
        let (f, c) = [(1, 5), (3, 3), (1, 17), (3, 6), (1, 64), (2, 7)][case % 6];
        let hw = 2 + case % 5;
        // 16 and 32: rows adjacent in the output leave as one 64-byte store.
        let oc = [1, 9, 15, 16, 17, 32, 33, 40][case / 6 % 8];
        let pad = usize::from(f == 3);
        let g = ConvGeometry {
            batches: 1 + case % 2,
            in_h: hw,
            in_w: hw + 1,
            in_c: c,
            out_h: hw + 2 * pad + 1 - f,
            out_w: hw + 2 * pad + 2 - f,
            out_c: oc,
            filter_h: f,
            filter_w: f,
            filter_depth: c,
            stride_h: 1,
            stride_w: 1,
            dilation_h: 1,
            dilation_w: 1,
            pad_h: pad,
            pad_w: pad,
            depth_multiplier: 1,
        };
        let filter: Vec<i8> = (0..oc * f * f * c).map(|_| extreme(&mut r)).collect();
        let input: Vec<i8> = (0..g.input_len()).map(|_| extreme(&mut r)).collect();
        let mut qq = Quant::random(&mut r, oc);
        // -zero_point at both ends of int8.
        qq.input_offset = if case % 2 == 0 { 128 } else { -127 };
        if case % 3 == 0 {
            // One scale for all channels (the reference convolution takes one per channel).
            qq.mults = vec![qq.mults[0]; oc];
            qq.shifts = vec![qq.shifts[0]; oc];
        }
        let q = qq.conv();
        let b = bias(&mut r, oc);
        let mut want = vec![0i8; g.output_len()];
        conv_i8(&g, &input, &filter, b.as_deref(), &q, &mut want);
        let mut scratch = vec![0x55i8; panel_scratch_len(Isa::configured(), &g)];
        for &isa in Isa::available() {
            let mut got = vec![0i8; g.output_len()];
            conv_i8_rows_in_place_with(
                isa,
                &g,
                &input,
                &filter,
                &mut scratch,
                b.as_deref(),
                &q,
                0,
                &mut got,
            );
            assert_eq!(got, want, "{isa:?} {g:?} offset {}", q.input_offset);
        }
    }
}

/// The VNNI body's im2col runs (`conv_i8_vnni::im2col`: each window row one masked run of
/// `filter_w * in_c` bytes): strides, padding on every side (rows and columns of the window
/// outside the input read as the zero point), vertical dilation, runs of 1 to 64 bytes and
/// just past 64 (two steps), horizontal dilation (the generic gather), depths that are not
/// a multiple of 4, input zero points at both ends, two batches and bands of pixels that start
/// mid-row; every path, the filter read in place.
#[test]
fn conv_window_runs_match_reference() {
    let shapes = [(3, 3, 3), (3, 3, 1), (2, 5, 4), (1, 3, 21), (3, 2, 32), (3, 3, 22), (5, 1, 7)];
    window_runs_match_reference(7877, &shapes);
}

/// As [`conv_window_runs_match_reference`] with runs of several 64-byte steps, their ends
/// and the window's clipped columns anywhere in a step: 3 × 3 over 64 channels (runs of 192
/// bytes, the longest the runs take), 1 × 7 over 19 (133), 7 × 1 over 70, 1 × 3 over 43
/// (129), 3 × 3 over 45 (135: a depth that is not a multiple of 4), 2 × 2 over 33; and
/// 3 × 3 over 80 (240 bytes: the generic gather).
#[test]
fn conv_long_window_runs_match_reference() {
    let shapes = [(3, 3, 80), (1, 7, 19), (7, 1, 70), (1, 3, 43), (3, 3, 45), (2, 2, 33), (3, 3, 64)];
    window_runs_match_reference(9931, &shapes);
}

/// The body of the window-run tests over filter shapes `(filter_h, filter_w, in_c)`.
fn window_runs_match_reference(seed: u64, shapes: &[(usize, usize, usize); 7]) {
    let mut r = Rng::new(seed);
    for case in 0..60 {
        let (fh, fw, c) = shapes[case % 7];
        let (stride, pad, dil_h, dil_w) = [(1, 1, 1, 1), (2, 0, 1, 1), (2, 1, 2, 1), (1, 2, 1, 2), (3, 2, 1, 1)][case / 7 % 5];
        let (in_h, in_w) = (3 + case % 4, 2 + case % 5);
        let out = |n: usize, f: usize, d: usize| (n + 2 * pad).saturating_sub((f - 1) * d + 1) / stride + 1;
        let (out_h, out_w) = (out(in_h, fh, dil_h), out(in_w, fw, dil_w));
        if in_h + 2 * pad < (fh - 1) * dil_h + 1 || in_w + 2 * pad < (fw - 1) * dil_w + 1 {
            continue;
        }
        let oc = [1, 16, 17, 40][case % 4];
        let g = ConvGeometry {
            batches: 1 + case % 2,
            in_h,
            in_w,
            in_c: c,
            out_h,
            out_w,
            out_c: oc,
            filter_h: fh,
            filter_w: fw,
            filter_depth: c,
            stride_h: stride,
            stride_w: stride,
            dilation_h: dil_h,
            dilation_w: dil_w,
            pad_h: pad,
            pad_w: pad,
            depth_multiplier: 1,
        };
        let filter = r.i8s(oc * fh * fw * c);
        let input = r.i8s(g.input_len());
        let mut qq = Quant::random(&mut r, oc);
        qq.input_offset = [128, -127, 5][case % 3];
        let q = qq.conv();
        let b = bias(&mut r, oc);
        let mut want = vec![0i8; g.output_len()];
        conv_i8(&g, &input, &filter, b.as_deref(), &q, &mut want);
        let mut scratch = vec![0x55i8; panel_scratch_len(Isa::configured(), &g)];
        let band = 1 + r.pick(0, 7);
        for &isa in Isa::available() {
            let mut got = vec![0i8; g.output_len()];
            for (t, part) in got.chunks_mut(band * oc).enumerate() {
                conv_i8_rows_in_place_with(
                    isa,
                    &g,
                    &input,
                    &filter,
                    &mut scratch,
                    b.as_deref(),
                    &q,
                    t * band,
                    part,
                );
            }
            assert_eq!(got, want, "{isa:?} {g:?} offset {} bands of {band}", q.input_offset);
        }
    }
}

/// A filter packed once at prepare ([`prepacked_filter`] / [`prepack_filter`], the VNNI
/// layout on that path, the AVX2 one elsewhere) gives the reference's bits on every path, in
/// bands of pixels as the kernel threads split them: depths not a multiple of 4, channel
/// counts not a multiple of 16 and above one prepack run of 512, padding and stride 2, one
/// scale and a scale per channel. A copy of another layout or too short is declined.
#[test]
fn conv_prepacked_matches_reference() {
    use super::conv_i8::{conv_i8_rows_prepacked_with, prepack_filter, prepacked_filter};
    let mut r = Rng::new(8191);
    for case in 0..24 {
        let (f, c) = [(1, 5), (3, 3), (1, 24), (3, 7)][case % 4];
        let oc = [9, 16, 33, 600][case / 4 % 4];
        let stride = 1 + case % 2;
        let hw = 3 + case % 4;
        let pad = usize::from(f == 3);
        let out = |n: usize| (n + 2 * pad - f) / stride + 1;
        let g = ConvGeometry {
            batches: 1 + case / 16,
            in_h: hw,
            in_w: hw + 2,
            in_c: c,
            out_h: out(hw),
            out_w: out(hw + 2),
            out_c: oc,
            filter_h: f,
            filter_w: f,
            filter_depth: c,
            stride_h: stride,
            stride_w: stride,
            dilation_h: 1,
            dilation_w: 1,
            pad_h: pad,
            pad_w: pad,
            depth_multiplier: 1,
        };
        let filter: Vec<i8> = (0..oc * f * f * c).map(|_| r.range(-128, 127) as i8).collect();
        let input: Vec<i8> = (0..g.input_len()).map(|_| r.range(-128, 127) as i8).collect();
        let mut qq = Quant::random(&mut r, oc);
        qq.input_offset = [128, -127, 3][case % 3];
        if case % 3 == 0 {
            qq.mults = vec![qq.mults[0]; oc];
            qq.shifts = vec![qq.shifts[0]; oc];
        }
        let q = qq.conv();
        let b = bias(&mut r, oc);
        let mut want = vec![0i8; g.output_len()];
        conv_i8(&g, &input, &filter, b.as_deref(), &q, &mut want);
        let pixels = g.output_len() / oc;
        for &isa in Isa::available() {
            let Some((layout, len)) = prepacked_filter(isa, &g) else {
                continue;
            };
            let mut packed = vec![0x55i8; len];
            prepack_filter(isa, layout, &g, &filter, &mut packed);
            for band in [pixels, pixels.div_ceil(2), 3] {
                let mut got = vec![0i8; g.output_len()];
                for (t, part) in got.chunks_mut(band * oc).enumerate() {
                    let ran = conv_i8_rows_prepacked_with(
                        isa, layout, &g, &input, &packed, b.as_deref(), &q, t * band, part,
                    );
                    assert!(ran, "{isa:?} {layout:?} {g:?}");
                }
                assert_eq!(got, want, "{isa:?} {layout:?} band {band} {g:?}");
            }
            let mut got = vec![0i8; g.output_len()];
            let short = &packed[..len - 1];
            assert!(!conv_i8_rows_prepacked_with(
                isa, layout, &g, &input, short, b.as_deref(), &q, 0, &mut got
            ));
        }
    }
}

/// The dot-product tiles on weights in place against the reference fully connected layer, on
/// every path that runs them: each tile shape (4 × 4, 2 × 8, 1 × 16 and their mixes: 1 to 9
/// rows, 49), depths around the 64-byte chunk (1, 3, 63, 64, 65, 160, 1000 — the last over
/// several row blocks), channel counts around the 16-channel run (1, 3, 4, 5, 15, 16, 17, 33),
/// values at the int8 extremes, input offsets 128 (no weight sums), -127 and random, one
/// scale or one per channel, a bias or none.
#[test]
fn dot_tiles_match_reference() {
    use super::out_rows::OutRows;
    use super::gemm_i8_dot::gemm_i8_dot;
    use super::requant_i8::Requant;
    use crate::interpreter::reference::fully_connected::{fully_connected_i8, FcQuant};
    let mut r = Rng::new(0xd07);
    let mut ran = 0;
    for case in 0..96 {
        let rows = [1, 2, 3, 4, 5, 6, 7, 9, 49][case % 9];
        let k = [1, 3, 63, 64, 65, 160, 1000][case % 7];
        let n = [1, 3, 4, 5, 15, 16, 17, 33][case % 8];
        let input: Vec<i8> = (0..rows * k).map(|_| extreme(&mut r)).collect();
        let weights: Vec<i8> = (0..n * k).map(|_| extreme(&mut r)).collect();
        let mut qq = Quant::random(&mut r, n);
        // Not `case % 3`: that would tie each row count to one offset (rows 1, 4 and 7 to 128).
        qq.input_offset = [128, -127, qq.input_offset][case / 9 % 3];
        let per_tensor = case % 4 == 0;
        let m = if per_tensor { 1 } else { n };
        let q = FcQuant {
            input_offset: qq.input_offset,
            weights_offset: 0,
            output_offset: qq.output_offset,
            multipliers: &qq.mults[..m],
            shifts: &qq.shifts[..m],
            double_scales: None,
            act_min: qq.act.0,
            act_max: qq.act.1,
        };
        let b = bias(&mut r, n);
        let mut want = vec![0i8; rows * n];
        fully_connected_i8(rows, k, n, &input, &weights, b.as_deref(), &q, &mut want);
        let rq = Requant {
            bias: b.as_deref(),
            multipliers: q.multipliers,
            shifts: q.shifts,
            output_offset: q.output_offset,
            act_min: q.act_min,
            act_max: q.act_max,
        };
        for &isa in Isa::available() {
            // A wider output row (stride) than the channels: bytes past them stay untouched.
            let stride = n + 3;
            let mut got = vec![0x55i8; rows * stride];
            let out = OutRows::new(&mut got, stride);
            if !gemm_i8_dot(isa, &input, k, rows, k, &weights, n, q.input_offset, &rq, out) {
                assert!(!isa.avx512vnni(), "VNNI refused {rows}x{k}x{n}");
                continue;
            }
            ran += 1;
            for row in 0..rows {
                let (g, w) = (&got[row * stride..][..stride], &want[row * n..][..n]);
                assert_eq!(&g[..n], w, "{isa:?} {rows}x{k}x{n} row {row}");
                assert!(g[n..].iter().all(|&v| v == 0x55), "wrote past the channels");
            }
        }
    }
    if Isa::available().iter().any(|i| i.avx512vnni()) {
        assert_eq!(ran, 96);
    }
}
