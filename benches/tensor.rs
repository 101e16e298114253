//! Cost of the tensor layer on top of an allocator: creating/dropping tensors on different
//! allocators, cloning a buffer handle (one atomic increment + decrement), and making views.
//!
//! Run: `cargo bench --bench tensor`

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::sync::Arc;
use tensor_alloc::alloc::{
    AlignedCpuAllocator, AllocatorRef, BfcAllocator, BfcOptions, PoolAllocator, PoolOptions,
    SystemAllocator, TrackingAllocator,
};
use tensor_alloc::tensor::{DType, Tensor};

fn allocators() -> Vec<(&'static str, AllocatorRef)> {
    vec![
        ("system", Arc::new(SystemAllocator)),
        ("cpu", Arc::new(AlignedCpuAllocator::new())),
        ("bfc", Arc::new(BfcAllocator::new(BfcOptions::default()))),
        ("pool", Arc::new(PoolAllocator::new(PoolOptions::default()))),
        (
            "tracking",
            Arc::new(TrackingAllocator::new(AlignedCpuAllocator::new())),
        ),
    ]
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("tensor_new_drop_f32_1x1024");
    for (name, a) in allocators() {
        g.bench_function(name, |b| {
            b.iter(|| black_box(Tensor::new_in(&a, DType::F32, [1, 1024]).unwrap()))
        });
    }
    g.finish();

    let t = Tensor::new(DType::F32, [64, 1024]).unwrap();
    c.bench_function("tensor_clone_drop", |b| b.iter(|| black_box(t.clone())));
    c.bench_function("tensor_slice_row", |b| {
        b.iter(|| black_box(t.slice(black_box(17), black_box(18)).unwrap()))
    });
    c.bench_function("tensor_reshape", |b| {
        b.iter(|| black_box(t.reshape([1024, 64]).unwrap()))
    });
    c.bench_function("tensor_as_slice_f32", |b| {
        b.iter(|| black_box(t.as_slice::<f32>().unwrap().len()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
