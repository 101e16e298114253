//! Criterion benches: BFC (with its per-thread cache, and without it: the locked path) vs the
//! system allocator on the `step` replay (60-op inference step) and on 1 MiB same-size
//! alloc/free. `cargo bench --bench bfc`.

use allocator_api2::alloc::{Allocator, Layout};
use criterion::{criterion_group, criterion_main, Criterion};
use tensor_alloc::alloc::{BfcAllocator, BfcOptions, BfcThreadCache, SystemAllocator};
use tensor_alloc::workload::StepSchedule;

fn step(c: &mut Criterion) {
    let sched = StepSchedule::new(42);
    let mut g = c.benchmark_group("step");
    let sys = SystemAllocator;
    g.bench_function("system", |b| b.iter(|| sched.run(&sys).unwrap()));
    let bfc = BfcAllocator::new(BfcOptions::default());
    g.bench_function("bfc", |b| b.iter(|| sched.run(&bfc).unwrap()));
    let locked = BfcAllocator::new(no_thread_cache());
    g.bench_function("bfc-locked", |b| b.iter(|| sched.run(&locked).unwrap()));
    g.finish();
}

/// Default options without the per-thread cache (every operation takes the lock).
fn no_thread_cache() -> BfcOptions {
    BfcOptions {
        thread_cache: BfcThreadCache::OFF,
        ..BfcOptions::default()
    }
}

fn same_size<A: Allocator>(a: &A) {
    let l = Layout::from_size_align(1 << 20, 64).unwrap();
    let p = a.allocate(l).unwrap().cast::<u8>();
    // SAFETY: p is live for 1 MiB.
    unsafe {
        p.as_ptr().write_volatile(1);
        a.deallocate(p, l);
    }
}

fn same_size_1mib(c: &mut Criterion) {
    let mut g = c.benchmark_group("same-size-1MiB");
    let sys = SystemAllocator;
    g.bench_function("system", |b| b.iter(|| same_size(&sys)));
    let bfc = BfcAllocator::new(BfcOptions::default());
    g.bench_function("bfc", |b| b.iter(|| same_size(&bfc)));
    let locked = BfcAllocator::new(no_thread_cache());
    g.bench_function("bfc-locked", |b| b.iter(|| same_size(&locked)));
    g.finish();
}

criterion_group!(benches, step, same_size_1mib);
criterion_main!(benches);
