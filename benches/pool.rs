//! Criterion benches of the pool allocator against glibc (`System`) and the aligned CPU allocator:
//! the `same-size` workloads (1 MiB alloc/free, one at a time and 16 live at a time) and the
//! 60-op inference step; `pool-shared` is the pool without its thread cache (one lock per call).
//!
//! `cargo bench --bench pool`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::ptr::NonNull;
use tensor_alloc::alloc::{
    AlignedCpuAllocator, Allocator, Layout, PoolAllocator, PoolBacking, PoolOptions, SizeRounding,
    SystemAllocator,
};
use tensor_alloc::workload::StepSchedule;

const MIB: usize = 1 << 20;

fn same_size<A: Allocator>(c: &mut Criterion, name: &str, a: &A) {
    let l = Layout::from_size_align(MIB, 64).unwrap();
    let mut g = c.benchmark_group("same-size");
    g.throughput(Throughput::Elements(1));
    g.bench_function(BenchmarkId::from_parameter(name), |b| {
        b.iter(|| {
            let p: NonNull<u8> = a.allocate(l).unwrap().cast();
            // SAFETY: p is a live 1 MiB block.
            unsafe {
                p.as_ptr().write_volatile(1);
                a.deallocate(p, l);
            }
        })
    });
    g.finish();
}

fn same_size_16<A: Allocator>(c: &mut Criterion, name: &str, a: &A) {
    let l = Layout::from_size_align(MIB, 64).unwrap();
    let mut g = c.benchmark_group("same-size-16");
    g.throughput(Throughput::Elements(16));
    g.bench_function(BenchmarkId::from_parameter(name), |b| {
        b.iter(|| {
            let mut v = [NonNull::<u8>::dangling(); 16];
            for s in v.iter_mut() {
                *s = a.allocate(l).unwrap().cast();
                // SAFETY: a live 1 MiB block.
                unsafe { s.as_ptr().write_volatile(1) };
            }
            for p in v {
                // SAFETY: each block came from `a` with `l` and is freed once.
                unsafe { a.deallocate(p, l) };
            }
        })
    });
    g.finish();
}

fn step<A: Allocator>(c: &mut Criterion, name: &str, a: &A) {
    let sched = StepSchedule::new(42);
    let mut g = c.benchmark_group("step");
    g.throughput(Throughput::Elements(60));
    g.bench_function(BenchmarkId::from_parameter(name), |b| {
        b.iter(|| sched.run(a).unwrap())
    });
    g.finish();
}

fn pool(c: &mut Criterion) {
    let pool = PoolAllocator::new(PoolOptions::default());
    let pool_mmap = PoolAllocator::new(PoolOptions {
        backing: PoolBacking::Mmap,
        ..PoolOptions::default()
    });
    // TensorFlow's exact semantics: no thread cache, one lock per call.
    let pool_shared = PoolAllocator::new(PoolOptions {
        thread_cache: 0,
        ..PoolOptions::default()
    });
    let pool_pow2 = PoolAllocator::new(PoolOptions {
        rounding: SizeRounding::PowerOfTwo,
        ..PoolOptions::default()
    });
    same_size(c, "system", &SystemAllocator);
    same_size(c, "pool", &pool);
    same_size(c, "pool-shared", &pool_shared);
    same_size_16(c, "system", &SystemAllocator);
    same_size_16(c, "pool", &pool);
    same_size_16(c, "pool-shared", &pool_shared);
    step(c, "system", &SystemAllocator);
    step(c, "cpu", &AlignedCpuAllocator::new());
    step(c, "pool", &pool);
    step(c, "pool-mmap", &pool_mmap);
    step(c, "pool-pow2", &pool_pow2);
}

criterion_group!(benches, pool);
criterion_main!(benches);
