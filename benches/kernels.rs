//! Each float kernel family on representative shapes (MobileNet, U-Net, transformer layers),
//! reference against optimized arithmetic, in one run: `cargo bench --bench kernels`. The
//! optimized functions get their packed operands and scratch prepared outside the timing, as
//! the interpreter prepares them at build (a constant filter is packed once at prepare).
//! Results and the command are recorded in BENCHMARKS.md.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tensor_alloc::interpreter::optimized::{
    batch_matmul as fast_bmm, conv as fast_conv, depthwise_conv as fast_dw, gemm, gemm_weight_rows,
    matrix, pack, Isa,
};
use tensor_alloc::interpreter::reference::batch_matmul::{batch_matmul_f32, BatchMatMulGeometry};
use tensor_alloc::interpreter::reference::conv::{conv_f32, ConvGeometry};
use tensor_alloc::interpreter::reference::depthwise_conv::depthwise_conv_f32;
use tensor_alloc::interpreter::reference::fully_connected::fully_connected_f32;

fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(2654435761).wrapping_add(3);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// A square-image convolution geometry with SAME padding.
fn conv_geometry(
    size: usize,
    in_c: usize,
    f: usize,
    out_c: usize,
    stride: usize,
    dw: bool,
) -> ConvGeometry {
    let out = size.div_ceil(stride);
    let pad = ((out - 1) * stride + f).saturating_sub(size) / 2;
    ConvGeometry {
        batches: 1,
        in_h: size,
        in_w: size,
        in_c,
        out_h: out,
        out_w: out,
        out_c,
        filter_h: f,
        filter_w: f,
        filter_depth: if dw { 1 } else { in_c },
        stride_h: stride,
        stride_w: stride,
        dilation_h: 1,
        dilation_w: 1,
        pad_h: pad,
        pad_w: pad,
        depth_multiplier: 1,
    }
}

fn macs(g: &ConvGeometry) -> u64 {
    (g.output_len() * g.filter_h * g.filter_w * g.filter_depth) as u64
}

fn bench_conv(c: &mut Criterion) {
    let mut group = c.benchmark_group("conv2d_f32");
    for (name, g) in [
        (
            "first_3x3s2_224x3_to_32",
            conv_geometry(224, 3, 3, 32, 2, false),
        ),
        (
            "pointwise_56x24_to_144",
            conv_geometry(56, 24, 1, 144, 1, false),
        ),
        (
            "pointwise_7x320_to_1280",
            conv_geometry(7, 320, 1, 1280, 1, false),
        ),
        (
            "unet_3x3_64x32_to_32",
            conv_geometry(64, 32, 3, 32, 1, false),
        ),
    ] {
        let plan = fast_conv::ConvPlan::new(&g).unwrap();
        let input = values(g.input_len(), 1);
        let filter = values(g.out_c * plan.k, 2);
        let bias = values(g.out_c, 3);
        let mut out = vec![0.0; g.output_len()];
        let mut packed = vec![0.0; plan.packed_filter_len(&g)];
        fast_conv::pack_filter(&g, &plan, &filter, &mut packed);
        let mut cols = vec![0.0; plan.cols_len()];
        group.throughput(Throughput::Elements(macs(&g)));
        group.bench_function(BenchmarkId::new("reference", name), |b| {
            b.iter(|| conv_f32(&g, &input, &filter, Some(&bias), 0.0, 6.0, &mut out))
        });
        group.bench_function(BenchmarkId::new("optimized, packed copy", name), |b| {
            b.iter(|| {
                fast_conv::conv_f32(
                    Isa::configured(),
                    &g,
                    &plan,
                    &input,
                    fast_conv::ConvWeights::<f32>::Packed(&packed),
                    Some(&bias),
                    0.0,
                    6.0,
                    &mut out,
                    &mut cols,
                    1,
                    &mut |tasks, f| (0..tasks).for_each(f),
                )
            })
        });
        let weight_rows = gemm_weight_rows::runs(Isa::configured(), true);
        let mut panels = vec![0.0; plan.panel_scratch_len(&g, weight_rows)];
        group.bench_function(BenchmarkId::new("optimized, in place", name), |b| {
            b.iter(|| {
                fast_conv::conv_f32(
                    Isa::configured(),
                    &g,
                    &plan,
                    &input,
                    fast_conv::ConvWeights::InPlace {
                        filter: &filter,
                        scratch: &mut panels,
                    },
                    Some(&bias),
                    0.0,
                    6.0,
                    &mut out,
                    &mut cols,
                    1,
                    &mut |tasks, f| (0..tasks).for_each(f),
                )
            })
        });
    }
    group.finish();
}

fn bench_depthwise(c: &mut Criterion) {
    let mut group = c.benchmark_group("depthwise_conv2d_f32");
    for (name, g) in [
        ("3x3_112x32", conv_geometry(112, 32, 3, 32, 1, true)),
        ("3x3s2_56x144", conv_geometry(56, 144, 3, 144, 2, true)),
        ("5x5_14x576", conv_geometry(14, 576, 5, 576, 1, true)),
    ] {
        let input = values(g.input_len(), 1);
        let filter = values(g.filter_h * g.filter_w * g.out_c, 2);
        let bias = values(g.out_c, 3);
        let mut out = vec![0.0; g.output_len()];
        group.throughput(Throughput::Elements(macs(&g)));
        group.bench_function(BenchmarkId::new("reference", name), |b| {
            b.iter(|| depthwise_conv_f32(&g, &input, &filter, Some(&bias), 0.0, 6.0, &mut out))
        });
        group.bench_function(BenchmarkId::new("optimized", name), |b| {
            b.iter(|| {
                fast_dw::depthwise_conv_f32(&g, &input, &filter, Some(&bias), 0.0, 6.0, &mut out)
            })
        });
    }
    group.finish();
}

fn bench_fully_connected(c: &mut Criterion) {
    let mut group = c.benchmark_group("fully_connected_f32");
    // (rows, depth, units): a classifier on one image, a transformer's projections.
    for (name, rows, depth, units) in [
        ("classifier_1x1280_to_1000", 1, 1280, 1000),
        ("tokens_64x128_to_512", 64, 128, 512),
        ("tokens_64x512_to_128", 64, 512, 128),
    ] {
        let x = values(rows * depth, 1);
        let w = values(units * depth, 2);
        let bias = values(units, 3);
        let mut out = vec![0.0; rows * units];
        let mut packed = vec![0.0; pack::packed_b_len(units, depth)];
        let wv = matrix::Strided {
            data: &w,
            rs: depth,
            cs: 1,
        };
        pack::pack_b(units, depth, wv, &mut packed);
        let ep = gemm::Epilogue {
            bias: Some(&bias),
            min: f32::MIN,
            max: f32::MAX,
        };
        group.throughput(Throughput::Elements((rows * depth * units) as u64));
        group.bench_function(BenchmarkId::new("reference", name), |b| {
            b.iter(|| {
                fully_connected_f32(
                    rows,
                    depth,
                    units,
                    &x,
                    &w,
                    Some(&bias),
                    f32::MIN,
                    f32::MAX,
                    &mut out,
                )
            })
        });
        group.bench_function(BenchmarkId::new("optimized", name), |b| {
            b.iter(|| {
                if rows < 4 {
                    gemm::gemm_dot(
                        Isa::configured(),
                        rows,
                        units,
                        depth,
                        &x,
                        &w,
                        &ep,
                        &mut out,
                        units,
                    )
                } else {
                    let a = matrix::Strided {
                        data: &x,
                        rs: depth,
                        cs: 1,
                    };
                    gemm::gemm_packed(
                        Isa::configured(),
                        rows,
                        units,
                        depth,
                        a,
                        &packed,
                        &ep,
                        &mut out,
                        units,
                    )
                }
            })
        });
    }
    group.finish();
}

fn bench_batch_matmul(c: &mut Criterion) {
    let mut group = c.benchmark_group("batch_matmul_f32");
    // Attention of 4 heads over 64 tokens of 32: scores (q · kᵀ) and context (p · v).
    for (name, m, k, n, adj_y) in [
        ("scores_4x64x32_by_64", 64, 32, 64, true),
        ("context_4x64x64_by_32", 64, 64, 32, false),
    ] {
        let g = BatchMatMulGeometry {
            lhs_batch: [1, 1, 4],
            rhs_batch: [1, 1, 4],
            m,
            k,
            n,
            adj_x: false,
            adj_y,
        };
        let lhs = values(4 * m * k, 1);
        let rhs = values(4 * k * n, 2);
        let mut out = vec![0.0; 4 * m * n];
        let mut packed = vec![0.0; fast_bmm::packed_len(&g)];
        group.throughput(Throughput::Elements((4 * m * k * n) as u64));
        group.bench_function(BenchmarkId::new("reference", name), |b| {
            b.iter(|| batch_matmul_f32(&g, &lhs, &rhs, &mut out))
        });
        group.bench_function(BenchmarkId::new("optimized", name), |b| {
            b.iter(|| {
                fast_bmm::batch_matmul_f32(Isa::configured(), &g, &lhs, &rhs, &mut out, &mut packed)
            })
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    bench_conv,
    bench_depthwise,
    bench_fully_connected,
    bench_batch_matmul
);
criterion_main!(benches);
