//! The planners on seeded random layered DAGs with skip connections (sizes 1 KiB–1 MiB, see
//! `planner::random_layered_dag`): `best` ÷ lower bound must average ≤ 1.002 with a 90th
//! percentile ≤ 1.01, and never exceed TFLM or TFLite. 40 graphs of 20–80 layers (≈ 120
//! buffers) by default; `TENSOR_ALLOC_STRESS=1` runs 400 of them plus 40 graphs of 420 layers
//! (≈ 1,000 buffers). Run with `--nocapture` for the statistics.

use tensor_alloc::planner::{random_layered_dag, BestPlanner, Planner, TfLitePlanner, TflmPlanner};

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let p90 = v[((v.len() as f64 * 0.9).ceil() as usize).min(v.len()) - 1];
    (mean, p90, v[v.len() - 1])
}

#[test]
fn best_is_near_the_lower_bound_on_random_dags() {
    let stress = std::env::var_os("TENSOR_ALLOC_STRESS").is_some();
    run(if stress { 400 } else { 40 }, |seed| {
        20 + (seed as usize * 7) % 60
    });
    if stress {
        run(40, |_| 420);
    }
}

fn run(count: usize, layers_of: impl Fn(u64) -> usize) {
    let (mut best, mut tflm, mut tflite, mut tflite64) = (vec![], vec![], vec![], vec![]);
    let mut optimal = 0;
    let mut sizes = 0;
    for seed in 0..count as u64 {
        let layers = layers_of(seed);
        let bufs = random_layered_dag(seed, layers);
        sizes += bufs.len();
        let b = BestPlanner::default().plan(&bufs).unwrap();
        b.validate(&bufs).unwrap();
        let m = TflmPlanner.plan(&bufs).unwrap();
        let l = TfLitePlanner::with_tensor_alignment(1).plan(&bufs).unwrap();
        let l64 = TfLitePlanner::new().plan(&bufs).unwrap();
        assert!(
            b.arena_size <= m.arena_size,
            "seed {seed}: best {} > tflm {}",
            b.arena_size,
            m.arena_size
        );
        assert!(
            b.arena_size <= l.arena_size,
            "seed {seed}: best {} > tflite {}",
            b.arena_size,
            l.arena_size
        );
        optimal += usize::from(b.is_optimal());
        best.push(b.ratio());
        tflm.push(m.ratio());
        tflite.push(l.ratio());
        tflite64.push(l64.ratio());
    }
    let (bm, bp, bx) = stats(best);
    let (mm, mp, mx) = stats(tflm);
    let (lm, lp, lx) = stats(tflite);
    let (l6m, l6p, l6x) = stats(tflite64);
    eprintln!(
        "{count} random DAGs, {:.0} buffers on average; ratio to the lower bound:",
        sizes as f64 / count as f64
    );
    eprintln!("  best      mean {bm:.5}  p90 {bp:.5}  max {bx:.5}  (optimal in {optimal}/{count})");
    eprintln!("  tflm      mean {mm:.5}  p90 {mp:.5}  max {mx:.5}");
    eprintln!("  tflite    mean {lm:.5}  p90 {lp:.5}  max {lx:.5}");
    eprintln!("  tflite@64 mean {l6m:.5}  p90 {l6p:.5}  max {l6x:.5}");
    assert!(bm <= 1.002, "mean best/lower bound {bm} > 1.002");
    assert!(bp <= 1.01, "p90 best/lower bound {bp} > 1.01");
}
