//! Demo section: the planners on a small built-in network.

use tensor_alloc::planner::{plan_all, random_layered_dag, BufferRequirement, PlanReport};

/// A 12-op network with two skip connections, an in-place op and op scratch buffers.
fn records() -> Vec<BufferRequirement> {
    let kib = 1024;
    let mut v = vec![
        BufferRequirement::new(150 * kib, 0, 1).with_name("input"),
        BufferRequirement::new(300 * kib, 0, 2).with_name("conv1"),
        BufferRequirement::new(300 * kib, 1, 5).with_name("conv2 (skip)"),
        BufferRequirement::new(75 * kib, 2, 3).with_name("pool"),
        BufferRequirement::new(150 * kib, 3, 4).with_name("conv3"),
        BufferRequirement::new(150 * kib, 4, 5).with_name("conv4"),
        BufferRequirement::new(300 * kib, 5, 7).with_name("add (skip)"),
        BufferRequirement::new(300 * kib, 6, 7).with_name("relu"),
        BufferRequirement::new(100 * kib, 7, 9).with_name("concat"),
        BufferRequirement::new(40 * kib, 8, 9).with_name("fc"),
        BufferRequirement::new(10 * kib, 9, 10).with_name("softmax"),
        BufferRequirement::new(10 * kib, 10, 11).with_name("output"),
        BufferRequirement::new(64 * kib, 1, 1).with_name("conv2 scratch"),
        BufferRequirement::new(32 * kib, 4, 4).with_name("conv4 scratch"),
    ];
    // The output is written in place over the softmax result.
    v[11].alias_of = Some(10);
    v
}

fn print_report(title: &str, bufs: &[BufferRequirement]) -> Result<PlanReport, String> {
    let report = plan_all(bufs).map_err(|e| e.to_string())?;
    println!(
        "{title}: {} buffers, lower bound {} bytes",
        bufs.len(),
        report.lower_bound_bytes
    );
    for r in &report.planners {
        println!(
            "  {:<7} arena {:>9} bytes  ({:.3} × lower bound, {:.3} ms)",
            r.name,
            r.arena_bytes,
            r.arena_bytes as f64 / report.lower_bound_bytes.max(1) as f64,
            r.millis
        );
    }
    Ok(report)
}

/// Plans the built-in records and a seeded random layered DAG (seed 5, 12 layers: one where the
/// TFLM/TFLite greedy orders fall 15 % short) with every planner, prints each arena size against
/// the lower bound, and writes the DAG's best plan as SVG to the temp dir.
pub fn section() -> Result<(), String> {
    println!("\nMemory planner: lifetimes -> offsets in one arena (linear, TFLM, TFLite and our best planner):");
    print_report(
        "a 12-op network with skips, an in-place op and scratch",
        &records(),
    )?;
    let dag = random_layered_dag(5, 12);
    let report = print_report("random layered DAG (seed 5, 12 layers)", &dag)?;
    let best = report
        .plans
        .iter()
        .find(|p| p.planner == "best")
        .ok_or("no best plan in the report")?;
    // The demo writes no files: it only says how to get the picture where the user wants it.
    println!(
        "  plan picture: {} bytes of SVG (`tensor-alloc plan --records FILE.json --svg OUT.svg` writes one)",
        best.to_svg(&dag).len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn section_runs_and_best_reaches_the_bound() {
        super::section().unwrap();
        let bufs = super::records();
        let report = tensor_alloc::planner::plan_all(&bufs).unwrap();
        assert_eq!(
            report.get("best").unwrap().arena_bytes,
            report.lower_bound_bytes
        );
    }
}
