//! `tensor-alloc bench --global-modes system,hybrid`: the workloads through the process's
//! `#[global_allocator]` ([`tensor_alloc::GlobalAllocator`]) in each of its modes. The mode is
//! read once per process, so every (mode, workload) pair runs in a child process of this binary
//! started with `TENSOR_ALLOC_GLOBAL=<mode>` (and a fresh peak resident size); the parent
//! collects their JSON and prints one table, each mode against the first.

use crate::bench::BenchArgs;
use std::fmt::Write as _;
use std::ptr::NonNull;
use tensor_alloc::alloc::{AllocError, Allocator, AllocatorStats, Layout, TensorAllocator};
use tensor_alloc::global::GlobalStats;
use tensor_alloc::workload::{self, Workload, WorkloadConfig, WorkloadResult};
use tensor_alloc::GlobalAllocator;

/// The process's global allocator as an `Allocator` (every call goes through
/// `#[global_allocator]`), with its statistics.
struct ProcessHeap;

// SAFETY: forwards to the global allocator, which upholds the contract for non-zero sizes;
// zero-sized requests get a dangling, aligned pointer and are never passed on.
unsafe impl Allocator for ProcessHeap {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            let p = NonNull::new(std::ptr::without_provenance_mut::<u8>(layout.align()))
                .ok_or(AllocError)?;
            return Ok(NonNull::slice_from_raw_parts(p, 0));
        }
        // SAFETY: non-zero size.
        let p = unsafe { std::alloc::alloc(layout) };
        NonNull::new(p)
            .map(|p| NonNull::slice_from_raw_parts(p, layout.size()))
            .ok_or(AllocError)
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() != 0 {
            // SAFETY: `ptr` came from `allocate` with `layout` (caller's contract).
            unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) }
        }
    }
}

impl TensorAllocator for ProcessHeap {
    fn name(&self) -> &str {
        "global"
    }
    fn stats(&self) -> AllocatorStats {
        let s = tensor_alloc::global::GlobalAllocator.stats();
        AllocatorStats {
            num_allocs: s.counts.allocs,
            num_frees: s.counts.deallocs,
            bytes_in_use: s.bytes_in_use,
            peak_bytes_in_use: s.peak_bytes_in_use,
            bytes_limit: s.limit,
            bytes_reserved: s.large_heap.reserved_bytes,
            ..AllocatorStats::default()
        }
    }
    fn reset_peak_stats(&self) {}
}

/// What a child prints: its mode's results and the allocator's statistics after the run.
#[derive(serde::Serialize)]
struct ChildReport {
    result: WorkloadResult,
    stats: GlobalStats,
}

/// The child side (`--global-child`): runs the one workload on the global allocator and prints
/// a [`ChildReport`] as JSON.
pub fn run_child(w: Workload, cfg: &WorkloadConfig) -> Result<(), String> {
    let result = workload::run(&ProcessHeap, w, cfg).map_err(|e| e.to_string())?;
    let report = ChildReport {
        result,
        stats: GlobalAllocator.stats(),
    };
    println!(
        "{}",
        serde_json::to_string(&report).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// One measured (mode, workload) pair, parsed from a child's JSON.
#[derive(serde::Serialize)]
struct ModeRow {
    workload: &'static str,
    mode: String,
    unit: String,
    median_ns_per_op: f64,
    ratio_to_first: f64,
    peak_live_bytes: u64,
    peak_rss_growth_bytes: Option<u64>,
    page_faults_per_op: Option<f64>,
    warmup_ns_per_op: Option<f64>,
    warmup_ratio_to_first: Option<f64>,
    moved_bytes: u64,
    released_bytes: u64,
}

/// The `--workload` value that makes a child run `w` (`same-size` runs both same-size workloads).
fn cli_name(w: Workload) -> &'static str {
    match w {
        Workload::SameSize16 => "same-size",
        other => other.name(),
    }
}

/// Runs the workloads of `--workload <name>` in a child in `mode`: one report per workload.
fn child(mode: &str, name: &str, args: &BenchArgs) -> Result<Vec<serde_json::Value>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let out = std::process::Command::new(exe)
        .args([
            "bench",
            "--global-child",
            "--workload",
            name,
            "--rounds",
            &args.rounds.to_string(),
            "--scale",
            &args.scale.to_string(),
            "--seed",
            &args.seed.to_string(),
        ])
        .env(tensor_alloc::alloc::env::GLOBAL, mode)
        .output()
        .map_err(|e| format!("cannot start the {mode}-mode child: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "workload '{name}' in global mode '{mode}' failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            serde_json::from_str(l)
                .map_err(|e| format!("the {mode}-mode child printed a bad report ({e}): {l}"))
        })
        .collect()
}

/// The parent side: every workload in every mode, one table (or JSON).
pub fn run(args: &BenchArgs, modes: &[String], workloads: &[Workload]) -> Result<(), String> {
    let modes: Vec<String> = modes
        .iter()
        .map(|m| m.trim().to_ascii_lowercase())
        .filter(|m| !m.is_empty())
        .collect();
    for m in &modes {
        if tensor_alloc::global::GlobalMode::from_name(m).is_none() {
            return Err(format!(
                "unknown global allocator mode '{m}' in --global-modes; expected a list of: system, hybrid"
            ));
        }
    }
    if modes.is_empty() {
        return Err("--global-modes needs at least one mode (system, hybrid)".into());
    }
    // Reports per (mode, workload name), one child per mode and `--workload` value.
    let mut reports: Vec<(String, serde_json::Value)> = vec![];
    let mut names: Vec<&str> = workloads.iter().map(|&w| cli_name(w)).collect();
    names.dedup();
    for name in names {
        for m in &modes {
            for v in child(m, name, args)? {
                reports.push((m.clone(), v));
            }
        }
    }
    let mut rows = vec![];
    for &w in workloads {
        let mut first = f64::NAN;
        let mut first_warmup = None;
        for m in &modes {
            let Some((_, v)) = reports
                .iter()
                .find(|(rm, v)| rm == m && v["result"]["workload"] == w.name())
            else {
                return Err(format!(
                    "the {m}-mode child reported nothing for workload '{}'",
                    w.name()
                ));
            };
            let r = &v["result"];
            let median = r["median_ns_per_op"].as_f64().unwrap_or(f64::NAN);
            let warmup = r["warmup_ns_per_op"].as_f64();
            if first.is_nan() {
                first = median;
                first_warmup = warmup;
            }
            let heap = &v["stats"]["large_heap"];
            rows.push(ModeRow {
                workload: w.name(),
                mode: m.clone(),
                unit: r["unit"].as_str().unwrap_or("op").to_string(),
                median_ns_per_op: median,
                ratio_to_first: median / first,
                peak_live_bytes: r["peak_live_bytes"].as_u64().unwrap_or(0),
                peak_rss_growth_bytes: r["peak_rss_growth_bytes"].as_u64(),
                page_faults_per_op: r["page_faults_per_op"].as_f64(),
                warmup_ns_per_op: warmup,
                warmup_ratio_to_first: warmup.zip(first_warmup).map(|(w, f)| w / f),
                moved_bytes: heap["moved_bytes"].as_u64().unwrap_or(0),
                released_bytes: heap["released_bytes"].as_u64().unwrap_or(0),
            });
        }
    }
    if args.json {
        let s = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?;
        println!("{s}");
        return Ok(());
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "tensor-alloc bench --global-modes: #[global_allocator] per mode (one child process each), median of {} timed rounds after a warm-up, seed {}, scale {}; faults/op over the timed rounds",
        args.rounds, args.seed, args.scale
    );
    let _ = writeln!(
        s,
        "{:<14} {:<8} {:>14} {:>9} {:>12} {:>12} {:>9} {:>10} {:>11} {:>11} {:>20}",
        "workload",
        "mode",
        "median",
        format!("vs {}", modes[0]),
        "peak live",
        "peak RSS+",
        "RSS/live",
        "faults/op",
        "moved",
        "released",
        "warm-up"
    );
    for r in &rows {
        let (rss, ratio) = match r.peak_rss_growth_bytes {
            Some(b) => (
                crate::bench::human(b),
                format!("{:.2}", b as f64 / r.peak_live_bytes.max(1) as f64),
            ),
            None => ("n/a".into(), "n/a".into()),
        };
        let _ = writeln!(
            s,
            "{:<14} {:<8} {:>14} {:>8.3}x {:>12} {:>12} {:>9} {:>10} {:>11} {:>11} {:>20}",
            r.workload,
            r.mode,
            crate::bench::per_op(r.median_ns_per_op, &r.unit),
            r.ratio_to_first,
            crate::bench::human(r.peak_live_bytes),
            rss,
            ratio,
            r.page_faults_per_op
                .map_or_else(|| "n/a".to_string(), |f| format!("{f:.1}")),
            crate::bench::human(r.moved_bytes),
            crate::bench::human(r.released_bytes),
            crate::bench::warmup_cell(r.warmup_ns_per_op, r.warmup_ratio_to_first, &r.unit),
        );
    }
    print!("{s}");
    Ok(())
}
