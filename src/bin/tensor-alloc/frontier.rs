//! `tensor-alloc plan MODEL --frontier`: the arena-against-speed trade-off of one model.
//!
//! Every configuration an arena budget can choose ([`InterpreterBuilder::budget_steps`]: from
//! nothing precomputed to every packed copy and table kept) is built and timed in the same
//! process, round-robin (one invoke of each configuration per round, so load that comes and
//! goes touches all of them alike), on seeded inputs. A configuration is *on the frontier* when
//! no other one is both at most as large and faster.

use serde::Serialize;
use std::time::{Duration, Instant};
use tensor_alloc::interpreter::{Interpreter, InterpreterBuilder, KernelSet};
use tensor_alloc::model::Model;

/// Configurations timed when `--frontier-points` is not given.
pub const DEFAULT_POINTS: usize = 6;
/// Timed invokes per configuration when `--repeat` is not given.
pub const DEFAULT_REPEAT: u32 = 20;

/// One configuration's arena and measured speed.
#[derive(Debug, Serialize)]
pub struct FrontierRow {
    /// Arena (head + tail) bytes: the smallest `run --arena-budget` that chooses it.
    pub arena_bytes: usize,
    /// Bytes of precomputed records (packed weights, tables) in the tail.
    pub precomputed_bytes: usize,
    /// Median invoke time.
    pub median_us: f64,
    /// Fastest invoke.
    pub min_us: f64,
    /// No other configuration is at most as large and faster (by median).
    pub on_frontier: bool,
}

/// Builds and times each budget step of `model` for `kernels` on `threads` threads.
pub fn measure(
    model: &Model,
    kernels: KernelSet,
    threads: usize,
    points: usize,
    repeat: u32,
) -> Result<Vec<FrontierRow>, String> {
    let builder = || {
        InterpreterBuilder::new(model)
            .kernel_set(kernels)
            .threads(threads)
    };
    let steps = builder()
        .budget_steps(points)
        .map_err(|e| format!("frontier: {e}"))?;
    let mut interps: Vec<Interpreter<'static>> = Vec::with_capacity(steps.len());
    for s in &steps {
        let mut interp = builder()
            .precompute(s.precompute)
            .build()
            .map_err(|e| format!("frontier: building with {:?}: {e}", s.precompute))?;
        for k in 0..interp.num_inputs() {
            let dtype = interp.input_desc(k).map_err(|e| e.to_string())?.dtype;
            let bytes = interp.input_bytes_mut(k).map_err(|e| e.to_string())?;
            crate::run::fill_seeded(dtype, bytes, k as u64);
        }
        // Warm-up: first-touch page faults and caches.
        for _ in 0..2 {
            interp.invoke().map_err(|e| e.to_string())?;
        }
        interps.push(interp);
    }
    let mut times = vec![Vec::with_capacity(repeat as usize); interps.len()];
    for _ in 0..repeat.max(1) {
        for (interp, t) in interps.iter_mut().zip(&mut times) {
            let start = Instant::now();
            interp.invoke().map_err(|e| e.to_string())?;
            t.push(start.elapsed());
        }
    }
    let mut rows: Vec<FrontierRow> = steps
        .iter()
        .zip(&mut times)
        .map(|(s, t)| FrontierRow {
            arena_bytes: s.arena_bytes,
            precomputed_bytes: s.precomputed_bytes,
            median_us: crate::run::us(crate::run::median(t)),
            min_us: crate::run::us(t.iter().copied().min().unwrap_or(Duration::ZERO)),
            on_frontier: false,
        })
        .collect();
    for i in 0..rows.len() {
        let dominated = rows.iter().enumerate().any(|(j, o)| {
            j != i && o.arena_bytes <= rows[i].arena_bytes && o.median_us < rows[i].median_us
        });
        rows[i].on_frontier = !dominated;
    }
    Ok(rows)
}

/// The table `plan --frontier` prints.
pub fn print(rows: &[FrontierRow], kernels: KernelSet, threads: usize, repeat: u32) {
    println!(
        "frontier ({} kernels, {threads} thread{}, median of {repeat} invokes each, round-robin, seeded inputs; * = no smaller configuration is faster):",
        kernels.name(),
        if threads == 1 { "" } else { "s" }
    );
    println!(
        "{:>14} {:>14} {:>12} {:>12}",
        "arena bytes", "precomputed", "median µs", "min µs"
    );
    for r in rows {
        println!(
            "{:>14} {:>14} {:>12.1} {:>12.1} {}",
            r.arena_bytes,
            r.precomputed_bytes,
            r.median_us,
            r.min_us,
            if r.on_frontier { "*" } else { "" }
        );
    }
    println!(
        "(`run --arena-budget N` builds the row with the most precomputed that fits in N bytes)"
    );
}
