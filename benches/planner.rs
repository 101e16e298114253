//! Planning time on random layered DAGs (`planner::random_layered_dag`) of about 1,000, 10,000 and
//! 100,000 buffers, for every planner. Targets for `best`: 10,000 buffers < 50 ms and 100,000 < 2 s.
//! Run: `cargo bench --bench planner`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::time::Duration;
use tensor_alloc::planner::{
    random_layered_dag, BestPlanner, LinearPlanner, Planner, TfLitePlanner, TflmPlanner,
};

fn planners(c: &mut Criterion) {
    let mut group = c.benchmark_group("planner");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(3));
    for layers in [420usize, 4_200, 42_000] {
        let bufs = random_layered_dag(42, layers);
        let n = bufs.len();
        let list: [(&str, Box<dyn Planner>); 4] = [
            ("linear", Box::new(LinearPlanner)),
            ("tflm", Box::new(TflmPlanner)),
            ("tflite", Box::new(TfLitePlanner::with_tensor_alignment(1))),
            ("best", Box::new(BestPlanner::default())),
        ];
        for (name, planner) in &list {
            if let Ok(plan) = planner.plan(&bufs) {
                eprintln!(
                    "{name} on {n} buffers: arena {} bytes, ratio {:.5}",
                    plan.arena_size,
                    plan.ratio()
                );
            }
            group.bench_with_input(BenchmarkId::new(*name, n), &bufs, |b, bufs| {
                b.iter(|| planner.plan(bufs).map(|p| p.arena_size))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, planners);
criterion_main!(benches);
