//! The indirect VNNI bodies (`conv_grouped`, `transpose_conv_i8`) against the reference, bit
//! for bit, on every path this CPU can run: grouped convolutions whose groups are a multiple of
//! 4 channels deep (the body's condition) with groups narrower than, equal to, wider than and
//! straddling a 16-channel panel, and transpose convolutions over strides, filter sizes,
//! padding, odd output sizes and input depths in and out of the body's condition; extreme
//! zero points, fused ranges, with and without bias, split into bands as the kernel threads
//! split them.

use super::conv_i8::{conv_i8_rows_in_place_with, panel_scratch_len};
use super::tests::{bias, Quant};
use super::transpose_conv_i8::transpose_conv_i8_rows_with;
use super::Isa;
use crate::interpreter::reference::conv::testutil::{random_window, Rng};
use crate::interpreter::reference::conv::{conv_i8, ConvGeometry};
use crate::interpreter::reference::transpose_conv::{
    transpose_conv_i8_rows, TransposeConvGeometry, TransposeConvQuant,
};

fn check_grouped(r: &mut Rng, g: &ConvGeometry) {
    let filter = r.i8s(g.out_c * g.filter_h * g.filter_w * g.filter_depth);
    let input = r.i8s(g.input_len());
    let qq = Quant::random(r, g.out_c);
    let q = qq.conv();
    let b = bias(r, g.out_c);
    let mut want = vec![0i8; g.output_len()];
    conv_i8(g, &input, &filter, b.as_deref(), &q, &mut want);
    for &isa in Isa::available() {
        let band = r.pick(1, 40);
        let mut got = vec![0i8; g.output_len()];
        let mut scratch = vec![0x55i8; panel_scratch_len(Isa::configured(), g)];
        for (t, part) in got.chunks_mut(band * g.out_c).enumerate() {
            conv_i8_rows_in_place_with(
                isa,
                g,
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

/// Grouped convolutions with `filter_depth` a multiple of 4: 2..=12 groups of 1..=40 output
/// channels (panels holding parts of several groups, groups over several panels), padding,
/// strides and dilations of [`random_window`].
#[test]
fn grouped_quads_match_reference() {
    let mut r = Rng::new(0x28_6701);
    for i in 0..400 {
        let mut g = random_window(&mut r);
        let groups = r.pick(2, 12);
        g.filter_depth = 4 * r.pick(1, 6);
        g.in_c = groups * g.filter_depth;
        g.out_c = groups * [1, 3, 5, 6, 8, 11, 16, 17, 24, 40][i % 10];
        g.depth_multiplier = 1;
        check_grouped(&mut r, &g);
    }
    // The RegNet block's layers: 3x3 stride 2 with 4 groups of 8, 3x3 with 8 groups of 4 in
    // and 6 out, 1x1 with 2 groups of 24.
    for (in_hw, out_hw, in_c, fd, out_c, f, s) in [
        (12, 6, 32, 8, 32, 3, 2),
        (6, 6, 32, 4, 48, 3, 1),
        (6, 6, 48, 24, 32, 1, 1),
    ] {
        let g = ConvGeometry {
            batches: 1,
            in_h: in_hw,
            in_w: in_hw,
            in_c,
            out_h: out_hw,
            out_w: out_hw,
            out_c,
            filter_h: f,
            filter_w: f,
            filter_depth: fd,
            stride_h: s,
            stride_w: s,
            dilation_h: 1,
            dilation_w: 1,
            pad_h: usize::from(f == 3 && s == 1),
            pad_w: usize::from(f == 3 && s == 1),
            depth_multiplier: 1,
        };
        check_grouped(&mut r, &g);
    }
}

fn check_transpose(r: &mut Rng, g: &TransposeConvGeometry) {
    let input = r.i8s(g.batches * g.in_h * g.in_w * g.in_c);
    let filter = r.i8s(g.out_c * g.filter_h * g.filter_w * g.in_c);
    let qq = Quant::random(r, g.out_c);
    let b = bias(r, g.out_c).unwrap_or_default();
    let q = TransposeConvQuant {
        input_offset: qq.input_offset,
        output_offset: qq.output_offset,
        multipliers: &qq.mults,
        shifts: &qq.shifts,
        act_min: qq.act.0,
        act_max: qq.act.1,
    };
    let rows = g.batches * g.out_h;
    let row_len = g.out_w * g.out_c;
    let mut want = vec![0i8; rows * row_len];
    transpose_conv_i8_rows(g, &q, &input, &filter, &b, 0, &mut want);
    for &isa in Isa::available() {
        let band = r.pick(1, 6);
        let mut got = vec![0x11i8; rows * row_len];
        for (t, part) in got.chunks_mut(band * row_len).enumerate() {
            transpose_conv_i8_rows_with(isa, g, &q, &input, &filter, &b, t * band, part);
        }
        assert_eq!(got, want, "{isa:?} {g:?} offset {} bands of {band}", q.input_offset);
    }
}

/// Transpose convolutions: strides 1..=3, filters 1..=5 (taps per phase from none to all),
/// padding, output sizes that are not `stride * input`, input depths a multiple of 4 (the VNNI
/// body) and not (the reference loop), 1..=40 output channels.
#[test]
fn transpose_conv_i8_matches_reference() {
    let mut r = Rng::new(0x28_7c0);
    for i in 0..300 {
        let (stride_h, stride_w) = (r.pick(1, 3), r.pick(1, 3));
        let (in_h, in_w) = (r.pick(1, 6), r.pick(1, 6));
        let g = TransposeConvGeometry {
            batches: r.pick(1, 2),
            in_h,
            in_w,
            in_c: if i % 5 == 4 { r.pick(1, 9) } else { 4 * r.pick(1, 5) },
            out_h: in_h * stride_h + r.pick(0, 2),
            out_w: in_w * stride_w + r.pick(0, 2),
            out_c: [1, 2, 7, 8, 16, 17, 33, 40][i % 8],
            filter_h: r.pick(1, 5),
            filter_w: r.pick(1, 5),
            stride_h,
            stride_w,
            pad_h: r.pick(0, 2),
            pad_w: r.pick(0, 2),
        };
        check_transpose(&mut r, &g);
    }
    // The U-Net decoder's layer: 8x8x16 to 16x16x8, 3x3 stride 2, SAME.
    let g = TransposeConvGeometry {
        batches: 1,
        in_h: 8,
        in_w: 8,
        in_c: 16,
        out_h: 16,
        out_w: 16,
        out_c: 8,
        filter_h: 3,
        filter_w: 3,
        stride_h: 2,
        stride_w: 2,
        pad_h: 0,
        pad_w: 0,
    };
    for pad in [0, 1] {
        check_transpose(&mut r, &TransposeConvGeometry { pad_h: pad, pad_w: pad, ..g });
    }
}
