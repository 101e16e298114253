//! Criterion benches of the foundation: the aligned CPU allocator vs glibc (`System`), and the
//! tracking wrapper's overhead over the allocator it wraps (target ≤ 5 % on small objects).
//!
//! `cargo bench --bench alloc`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::ptr::NonNull;
use tensor_alloc::alloc::{
    AlignedCpuAllocator, Allocator, Layout, SystemAllocator, TrackingAllocator,
};
use tensor_alloc::test_support::Rng;
use tensor_alloc::workload::StepSchedule;

/// 10,000 live 8–512 B objects; each iteration replaces 64 of them (64 alloc + 64 free).
fn small_churn<A: Allocator>(c: &mut Criterion, group: &str, name: &str, a: &A) {
    let mut rng = Rng::new(1);
    let mut live: Vec<(NonNull<u8>, Layout)> = (0..10_000)
        .map(|_| {
            let l = Layout::from_size_align(rng.range(8, 512) as usize, 8).unwrap();
            (a.allocate(l).unwrap().cast(), l)
        })
        .collect();
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(64));
    g.bench_function(BenchmarkId::from_parameter(name), |b| {
        b.iter(|| {
            for _ in 0..64 {
                let i = rng.below(live.len() as u64) as usize;
                let l = Layout::from_size_align(rng.range(8, 512) as usize, 8).unwrap();
                let p: NonNull<u8> = a.allocate(l).unwrap().cast();
                // SAFETY: p is a live block of l.size() ≥ 8 bytes.
                unsafe { p.as_ptr().write_volatile(1) };
                let (old, ol) = std::mem::replace(&mut live[i], (p, l));
                // SAFETY: `old` came from `a` with `ol` and is freed once.
                unsafe { a.deallocate(old, ol) };
            }
        })
    });
    g.finish();
    for (p, l) in live {
        // SAFETY: every live block came from `a` with its layout.
        unsafe { a.deallocate(p, l) };
    }
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

fn benches(c: &mut Criterion) {
    small_churn(c, "small_objects", "system", &SystemAllocator);
    small_churn(c, "small_objects", "cpu", &AlignedCpuAllocator::new());
    small_churn(
        c,
        "small_objects",
        "tracking(cpu)",
        &TrackingAllocator::new(AlignedCpuAllocator::new()),
    );
    small_churn(
        c,
        "small_objects",
        "tracking(system)",
        &TrackingAllocator::new(SystemAllocator),
    );
    step(c, "system", &SystemAllocator);
    step(c, "cpu", &AlignedCpuAllocator::new());
    // The tracking overhead on tensor-sized blocks (1 KiB–4 MiB), where it is a few percent.
    step(
        c,
        "tracking(cpu)",
        &TrackingAllocator::new(AlignedCpuAllocator::new()),
    );
}

criterion_group! {
    name = alloc_benches;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = benches
}
criterion_main!(alloc_benches);
