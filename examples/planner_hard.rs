//! `best` on hard planning instances: planted-optimum tilings (150–500 buffers, optimum = the
//! rectangle's height), wide multi-branch network graphs, and any MiniMalloc CSV or record-set
//! JSON files given as arguments. For each: the lower bound, `best`'s arena with its default
//! budget, whether it is proven optimal, the time, and the ratio to the reference optimum (the
//! planted height; otherwise what the exact search proves with `--reference-seconds S`,
//! default 60, or "-" when it cannot close the gap).
//!
//! Run: `cargo run --release --example planner_hard [-- [--reference-seconds S] FILE...]`

use std::time::{Duration, Instant};
use tensor_alloc::planner::exact::{self, SearchBudget};
use tensor_alloc::planner::{
    planted_tiling, random_branchy_dag, records_from_csv, records_from_json, BestPlanner,
    BufferRequirement, Planner,
};

struct Instance {
    name: String,
    buffers: Vec<BufferRequirement>,
    /// Known optimum (planted).
    optimum: Option<usize>,
}

fn instances(files: &[String]) -> Result<Vec<Instance>, String> {
    let mut out = Vec::new();
    for (k, n) in [150usize, 200, 250, 300, 350, 400, 450, 500]
        .iter()
        .enumerate()
    {
        let height = 1 << 20;
        out.push(Instance {
            name: format!("tiling n={n} seed={k}"),
            buffers: planted_tiling(k as u64, *n, 1 << 20, height),
            optimum: Some(height),
        });
    }
    for seed in 0..8u64 {
        let blocks = 12 + 4 * seed as usize;
        let buffers = random_branchy_dag(seed, blocks, 10);
        out.push(Instance {
            name: format!("branchy blocks={blocks} seed={seed}"),
            buffers,
            optimum: None,
        });
    }
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{f}: {e}"))?;
        let buffers = if text.trim_start().starts_with('{') {
            records_from_json(&text)
        } else {
            records_from_csv(&text)
        }
        .map_err(|e| format!("{f}: {e}"))?;
        out.push(Instance {
            name: f.clone(),
            buffers,
            optimum: None,
        });
    }
    Ok(out)
}

fn main() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut reference_seconds = 60.0;
    if let Some(k) = args.iter().position(|a| a == "--reference-seconds") {
        reference_seconds = args
            .get(k + 1)
            .and_then(|s| s.parse::<f64>().ok())
            .ok_or("--reference-seconds needs a number")?;
        args.drain(k..k + 2);
    }
    if let Some(k) = args.iter().position(|a| a == "--dump") {
        let dir = args.get(k + 1).ok_or("--dump needs a directory")?.clone();
        for (i, inst) in instances(&[])?.iter().enumerate() {
            let rows: Vec<String> = inst
                .buffers
                .iter()
                .enumerate()
                .map(|(j, b)| format!("{j},{},{},{}", b.first_use, b.last_use + 1, b.size))
                .collect();
            let path = format!("{dir}/{i:02}.csv");
            std::fs::write(&path, format!("id,lower,upper,size\n{}\n", rows.join("\n")))
                .map_err(|e| format!("{path}: {e}"))?;
            println!("{path}: {}", inst.name);
        }
        return Ok(());
    }
    println!(
        "| instance | buffers | lower bound | best | proven | best time | reference | best ÷ reference |"
    );
    println!("|---|---:|---:|---:|---|---:|---:|---:|");
    let mut worst: f64 = 1.0;
    let (mut at_reference, mut with_reference) = (0, 0);
    for inst in instances(&args)? {
        let start = Instant::now();
        let plan = BestPlanner::default()
            .plan(&inst.buffers)
            .map_err(|e| e.to_string())?;
        let secs = start.elapsed().as_secs_f64();
        plan.validate(&inst.buffers).map_err(|e| e.to_string())?;
        let proven = plan.is_proven_optimal();
        let reference = match inst.optimum {
            Some(o) => Some(o),
            None if proven => Some(plan.arena_size),
            None => {
                let budget = SearchBudget::work(u64::MAX)
                    .with_time_limit(Duration::from_secs_f64(reference_seconds));
                let m = exact::minimise(&inst.buffers, &plan, budget).map_err(|e| e.to_string())?;
                m.proven_optimal.then_some(m.plan.arena_size)
            }
        };
        let ratio = reference.map(|r| plan.arena_size as f64 / r as f64);
        if let Some(r) = ratio {
            worst = worst.max(r);
            with_reference += 1;
            if r <= 1.0 {
                at_reference += 1;
            }
        }
        println!(
            "| {} | {} | {} | {} | {} | {:.2} s | {} | {} |",
            inst.name,
            inst.buffers.len(),
            plan.lower_bound,
            plan.arena_size,
            if proven { "yes" } else { "no" },
            secs,
            reference.map_or("-".to_string(), |r| r.to_string()),
            ratio.map_or("-".to_string(), |r| format!("{r:.4}")),
        );
    }
    println!(
        "\nat the reference optimum on {at_reference} of {with_reference} instances with one; worst ratio {worst:.4}"
    );
    Ok(())
}
