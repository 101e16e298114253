//! int8 CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED: the reference arithmetic against the
//! optimized functions (the CPU's best path and the portable fallback) on shapes of the shared
//! int8 models (MobileNetV2's stem, pointwise and depthwise layers, micro_speech's depth
//! multiplier 8 filter, a classifier head and a batched dense layer).
//!
//! `cargo bench --bench kernels_i8`; results in BENCHMARKS.md.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use tensor_alloc::interpreter::optimized::{conv_i8, depthwise_i8, fully_connected_i8, Isa};
use tensor_alloc::interpreter::reference::conv::{ConvGeometry, ConvQuant};
use tensor_alloc::interpreter::reference::quant::quantize_multiplier;
use tensor_alloc::interpreter::reference::{depthwise_conv, fully_connected};

/// Deterministic int8 values.
fn i8s(n: usize, seed: u32) -> Vec<i8> {
    let mut s = seed.wrapping_mul(2_654_435_761).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            s as i8
        })
        .collect()
}

struct Layer {
    name: &'static str,
    g: ConvGeometry,
}

#[allow(clippy::too_many_arguments)]
fn geometry(
    hw: usize,
    in_c: usize,
    out_c: usize,
    f: (usize, usize),
    stride: usize,
    pad: (usize, usize),
    out: (usize, usize),
    dm: usize,
) -> ConvGeometry {
    ConvGeometry {
        batches: 1,
        in_h: hw,
        in_w: hw,
        in_c,
        out_h: out.0,
        out_w: out.1,
        out_c,
        filter_h: f.0,
        filter_w: f.1,
        filter_depth: if dm == 0 { in_c } else { 1 },
        stride_h: stride,
        stride_w: stride,
        dilation_h: 1,
        dilation_w: 1,
        pad_h: pad.0,
        pad_w: pad.1,
        depth_multiplier: dm.max(1),
    }
}

fn quant(n: usize) -> (Vec<i32>, Vec<i8>) {
    (0..n)
        .map(|c| {
            let m = quantize_multiplier(0.002 + c as f64 * 1e-5);
            (m.multiplier, m.shift_i8())
        })
        .unzip()
}

fn bench_conv(c: &mut Criterion) {
    let layers = [
        Layer {
            name: "stem_3x3s2_3to32_112",
            g: geometry(225, 3, 32, (3, 3), 2, (0, 0), (112, 112), 0),
        },
        Layer {
            name: "pointwise_16to96_112",
            g: geometry(112, 16, 96, (1, 1), 1, (0, 0), (112, 112), 0),
        },
        Layer {
            name: "pointwise_144to24_56",
            g: geometry(56, 144, 24, (1, 1), 1, (0, 0), (56, 56), 0),
        },
        Layer {
            name: "3x3_64to64_28_same",
            g: geometry(28, 64, 64, (3, 3), 1, (1, 1), (28, 28), 0),
        },
    ];
    let mut group = c.benchmark_group("conv_i8");
    group.sample_size(10);
    for l in &layers {
        let g = &l.g;
        let input = i8s(g.input_len(), 1);
        let filter = i8s(g.out_c * g.filter_h * g.filter_w * g.in_c, 2);
        let bias: Vec<i32> = (0..g.out_c as i32).map(|c| c * 37 - 500).collect();
        let (m, s) = quant(g.out_c);
        let q = ConvQuant {
            input_offset: 14,
            output_offset: -3,
            multipliers: &m,
            shifts: &s,
            act_min: -128,
            act_max: 127,
        };
        let mut out = vec![0i8; g.output_len()];
        // Packed once, as the kernel does at prepare.
        let mut packed = vec![0i8; conv_i8::packed_filter_len(g)];
        conv_i8::pack_filter(g, &filter, &mut packed);
        group.bench_function(BenchmarkId::new("reference", l.name), |b| {
            b.iter(|| {
                tensor_alloc::interpreter::reference::conv::conv_i8(
                    g,
                    &input,
                    &filter,
                    Some(&bias),
                    &q,
                    &mut out,
                )
            })
        });
        for &isa in Isa::available() {
            group.bench_function(BenchmarkId::new(format!("{isa:?}"), l.name), |b| {
                b.iter(|| {
                    conv_i8::conv_i8_with(
                        isa,
                        g,
                        &input,
                        &filter,
                        &packed,
                        Some(&bias),
                        &q,
                        &mut out,
                    )
                })
            });
        }
    }
    group.finish();
}

fn bench_depthwise(c: &mut Criterion) {
    let layers = [
        Layer {
            name: "3x3_144_56_same",
            g: geometry(58, 144, 144, (3, 3), 1, (0, 0), (56, 56), 1),
        },
        Layer {
            name: "3x3s2_96_112",
            g: geometry(114, 96, 96, (3, 3), 2, (0, 0), (56, 56), 1),
        },
        Layer {
            name: "micro_speech_10x8s2_dm8",
            g: ConvGeometry {
                in_h: 49,
                in_w: 40,
                ..geometry(49, 1, 8, (10, 8), 2, (4, 3), (25, 20), 8)
            },
        },
    ];
    let mut group = c.benchmark_group("depthwise_i8");
    group.sample_size(10);
    for l in &layers {
        let g = &l.g;
        let input = i8s(g.input_len(), 3);
        let filter = i8s(g.out_c * g.filter_h * g.filter_w, 4);
        let bias: Vec<i32> = (0..g.out_c as i32).map(|c| c * 11 - 300).collect();
        let (m, s) = quant(g.out_c);
        let q = ConvQuant {
            input_offset: -33,
            output_offset: 5,
            multipliers: &m,
            shifts: &s,
            act_min: -128,
            act_max: 127,
        };
        let mut out = vec![0i8; g.output_len()];
        // Packed once, as the kernel does at prepare.
        let mut packed = vec![0i8; conv_i8::packed_filter_len(g)];
        conv_i8::pack_filter(g, &filter, &mut packed);
        group.bench_function(BenchmarkId::new("reference", l.name), |b| {
            b.iter(|| {
                depthwise_conv::depthwise_conv_i8(g, &input, &filter, Some(&bias), &q, &mut out)
            })
        });
        for &isa in Isa::available() {
            group.bench_function(BenchmarkId::new(format!("{isa:?}"), l.name), |b| {
                b.iter(|| {
                    depthwise_i8::depthwise_conv_i8_with(
                        isa,
                        g,
                        &input,
                        &filter,
                        Some(&bias),
                        &q,
                        &mut out,
                    )
                })
            });
        }
    }
    group.finish();
}

fn bench_fully_connected(c: &mut Criterion) {
    // (name, batches, depth, units)
    let layers = [
        ("head_1x1280to1000", 1, 1280, 1000),
        ("dense_8x256to256", 8, 256, 256),
        ("small_1x400to4", 1, 400, 4),
    ];
    let mut group = c.benchmark_group("fully_connected_i8");
    group.sample_size(20);
    for &(name, batches, depth, units) in &layers {
        let input = i8s(batches * depth, 5);
        let weights = i8s(units * depth, 6);
        let bias: Vec<i32> = (0..units as i32).map(|u| u * 7 - 900).collect();
        let (m, s) = quant(1);
        let q = fully_connected::FcQuant {
            input_offset: 128,
            weights_offset: 0,
            output_offset: -128,
            multipliers: &m,
            shifts: &s,
            double_scales: None,
            act_min: -128,
            act_max: 127,
        };
        let mut out = vec![0i8; batches * units];
        let mut packed = vec![0i8; fully_connected_i8::packed_weights_len(depth, units, 0)];
        fully_connected_i8::pack_weights(depth, units, 0, &weights, &mut packed);
        group.bench_function(BenchmarkId::new("reference", name), |b| {
            b.iter(|| {
                fully_connected::fully_connected_i8(
                    batches,
                    depth,
                    units,
                    &input,
                    &weights,
                    Some(&bias),
                    &q,
                    &mut out,
                )
            })
        });
        for &isa in Isa::available() {
            group.bench_function(BenchmarkId::new(format!("{isa:?}"), name), |b| {
                b.iter(|| {
                    fully_connected_i8::fully_connected_i8_with(
                        isa,
                        batches,
                        depth,
                        units,
                        &input,
                        &weights,
                        &packed,
                        Some(&bias),
                        &q,
                        &mut out,
                    )
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_conv, bench_depthwise, bench_fully_connected);
criterion_main!(benches);
