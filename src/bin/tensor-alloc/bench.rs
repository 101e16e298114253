//! `tensor-alloc bench`: replays tensor-like workloads through chosen allocators.

use clap::Args;
use std::fmt::Write as _;
use std::sync::Arc;
use tensor_alloc::alloc::registry::{self, RegistryError};
use tensor_alloc::alloc::{
    env, AlignedCpuAllocator, AllocatorRef, BfcAllocator, PoolAllocator, SystemAllocator,
    TrackingAllocator,
};
use tensor_alloc::workload::{self, Workload, WorkloadConfig, WorkloadResult};

/// Arguments of `tensor-alloc bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Comma-separated allocators to compare (the system allocator is always measured as the
    /// baseline, and a bump allocator as the floor on the workloads it can serve: `step`,
    /// `same-size`, `same-size-16`). Without it, the registry picks the allocator (priorities and `TENSOR_ALLOC_*`
    /// variables) and the choice is printed.
    #[arg(long, value_delimiter = ',')]
    pub allocators: Option<Vec<String>>,
    /// Workload to replay (`all` runs every workload).
    #[arg(long, default_value = "all")]
    pub workload: WorkloadArg,
    /// Timed rounds per workload (the median is reported).
    #[arg(long, default_value_t = 7)]
    pub rounds: usize,
    /// Work per round relative to the default.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Seed of the workloads.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Compare the modes of the `#[global_allocator]` (`system`, `hybrid`): each workload runs
    /// through the process's global allocator in a child process per mode
    /// (`TENSOR_ALLOC_GLOBAL=<mode>`), reported against the first mode. Ignores --allocators.
    #[arg(long, value_delimiter = ',')]
    pub global_modes: Option<Vec<String>>,
    /// Internal: the child process of --global-modes (one workload on the global allocator,
    /// JSON report).
    #[arg(long, hide = true)]
    pub global_child: bool,
}

/// A workload name or `all`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum WorkloadArg {
    /// Every workload.
    All,
    /// 60-op inference step.
    Step,
    /// 256 KiB–64 MiB churn.
    Large,
    /// 8–512 B churn.
    Small,
    /// 1 MiB alloc/free, one and 16 at a time.
    SameSize,
}

/// The allocator names `bench` knows, with what each is.
pub const KNOWN: &[(&str, &str)] = &[
    (
        "system",
        "glibc malloc through std::alloc::System (baseline)",
    ),
    ("cpu", "AlignedCpuAllocator (posix_memalign, exact stats)"),
    (
        "tracking",
        "TrackingAllocator wrapping the CPU allocator (TrackingAllocator::over_cpu: one set of statistics)",
    ),
    (
        "bfc",
        "BfcAllocator (best-fit with coalescing over mmap regions, TF defaults)",
    ),
    (
        "pool",
        "PoolAllocator (cache of freed buffers by exact size, LRU eviction, auto-resize)",
    ),
];

/// Builds a fresh allocator by name: `system` and `tracking` (over the CPU allocator) directly,
/// every other name (`cpu`, `bfc`, `pool`, `tracking(<name>)`, user factories) through the
/// process-wide registry, configured by the `TENSOR_ALLOC_*` environment.
pub fn allocator_by_name(name: &str) -> Result<AllocatorRef, String> {
    match name {
        "system" => return Ok(Arc::new(SystemAllocator)),
        "tracking" => {
            let env = env::process_env().map_err(|e| e.to_string())?;
            return Ok(Arc::new(TrackingAllocator::over_cpu(env.cpu_options())));
        }
        _ => {}
    }
    let env = env::process_env().map_err(|e| e.to_string())?;
    registry::global().create(name, env).map_err(|e| match e {
        RegistryError::Unknown { suggestion, .. } => {
            let mut names: Vec<String> = KNOWN.iter().map(|k| k.0.to_string()).collect();
            for f in registry::global().factories() {
                if !names.contains(&f.name) {
                    names.push(f.name);
                }
            }
            names.push("tracking(<name>)".into());
            format!(
                "unknown allocator '{name}' in --allocators{}; expected one of: {}",
                suggestion
                    .map(|s| format!(" (did you mean '{s}'?)"))
                    .unwrap_or_default(),
                names.join(", ")
            )
        }
        other => other.to_string(),
    })
}

/// An allocator under measurement. The built-ins are held by their concrete types, so the
/// workload calls them the way Rust code using them directly does (static dispatch, as in the
/// criterion benches); anything else the registry makes goes through `Arc<dyn TensorAllocator>`.
enum Measured {
    System(SystemAllocator),
    Cpu(AlignedCpuAllocator),
    Tracking(TrackingAllocator<AlignedCpuAllocator>),
    Bfc(BfcAllocator),
    Pool(PoolAllocator),
    Dyn(AllocatorRef),
}

impl Measured {
    /// A fresh allocator by name, configured like the registry's factory of that name.
    fn new(name: &str) -> Result<Self, String> {
        let env = env::process_env().map_err(|e| e.to_string())?;
        Ok(match name {
            "system" => Self::System(SystemAllocator),
            "cpu" => Self::Cpu(AlignedCpuAllocator::with_options(env.cpu_options())),
            "tracking" => Self::Tracking(TrackingAllocator::over_cpu(env.cpu_options())),
            "bfc" => {
                Self::Bfc(BfcAllocator::try_new(env.bfc_options()).map_err(|e| e.to_string())?)
            }
            "pool" => Self::Pool(PoolAllocator::new(env.pool_options())),
            other => Self::Dyn(allocator_by_name(other)?),
        })
    }

    fn run(&self, w: Workload, cfg: &WorkloadConfig) -> Result<WorkloadResult, String> {
        fn go<A: tensor_alloc::alloc::TensorAllocator + ?Sized>(
            a: &A,
            w: Workload,
            cfg: &WorkloadConfig,
        ) -> Result<WorkloadResult, String> {
            workload::run(a, w, cfg).map_err(|e| e.to_string())
        }
        match self {
            Self::System(a) => go(a, w, cfg),
            Self::Cpu(a) => go(a, w, cfg),
            Self::Tracking(a) => go(a, w, cfg),
            Self::Bfc(a) => go(a, w, cfg),
            Self::Pool(a) => go(a, w, cfg),
            Self::Dyn(a) => go(&**a, w, cfg),
        }
    }
}

#[derive(serde::Serialize)]
struct Row {
    allocator: String,
    #[serde(flatten)]
    result: WorkloadResult,
    ratio_to_system: f64,
    /// Time per op against the bump allocator's (the floor) in the same run, on the workloads it
    /// serves.
    ratio_to_bump: Option<f64>,
    /// The warm-up's time per op against the system heap's (workloads with a timed-like warm-up).
    warmup_ratio_to_system: Option<f64>,
}

/// The floor row's name (see [`workload::BumpAllocator`]).
const BUMP: &str = "bump";

pub fn run(args: &BenchArgs) -> Result<(), String> {
    WorkloadConfig {
        seed: args.seed,
        rounds: args.rounds,
        scale: args.scale,
    }
    .validate()?;
    let workloads: Vec<Workload> = match args.workload {
        WorkloadArg::All => Workload::ALL.to_vec(),
        WorkloadArg::Step => vec![Workload::Step],
        WorkloadArg::Large => vec![Workload::Large],
        WorkloadArg::Small => vec![Workload::Small],
        WorkloadArg::SameSize => vec![Workload::SameSize, Workload::SameSize16],
    };
    let cfg = WorkloadConfig {
        seed: args.seed,
        rounds: args.rounds,
        scale: args.scale,
    };
    if args.global_child {
        for &w in &workloads {
            crate::bench_global::run_child(w, &cfg)?;
        }
        return Ok(());
    }
    if let Some(modes) = &args.global_modes {
        return crate::bench_global::run(args, modes, &workloads);
    }
    let mut names: Vec<String> = vec!["system".into()];
    let requested: Vec<String> = match &args.allocators {
        Some(list) => list.clone(),
        None => {
            let sel = registry::process_selection().map_err(|e| e.to_string())?;
            let line = format!("registry selected {sel}");
            if args.json {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
            vec![sel.allocator_name()]
        }
    };
    names.push(BUMP.into());
    for n in &requested {
        let n = n.trim();
        if n.is_empty() {
            continue;
        }
        if n != BUMP {
            allocator_by_name(n)?; // validate before running anything
        }
        if !names.iter().any(|m| m == n) {
            names.push(n.to_string());
        }
    }
    let mut rows = vec![];
    for &w in &workloads {
        let mut baseline = f64::NAN;
        let mut floor = None;
        let mut warmup_baseline = None;
        let first = rows.len();
        for name in &names {
            let failed = |e: &dyn std::fmt::Display| {
                format!("workload '{}' on allocator '{name}' failed: {e}", w.name())
            };
            let r = if name == BUMP {
                match workload::run_bump(w, &cfg) {
                    None => continue,
                    Some(r) => r.map_err(|e| failed(&e))?,
                }
            } else {
                // A fresh allocator per workload, so caches and peak memory do not carry over.
                let a = Measured::new(name)?;
                let r = a.run(w, &cfg).map_err(|e| failed(&e))?;
                drop(a);
                r
            };
            if name == "system" {
                baseline = r.median_ns_per_op;
                warmup_baseline = r.warmup_ns_per_op;
            }
            if name == BUMP {
                floor = Some(r.median_ns_per_op);
            }
            rows.push(Row {
                allocator: name.clone(),
                ratio_to_system: r.median_ns_per_op / baseline,
                ratio_to_bump: None,
                warmup_ratio_to_system: r.warmup_ns_per_op.zip(warmup_baseline).map(|(w, b)| w / b),
                result: r,
            });
        }
        for row in &mut rows[first..] {
            row.ratio_to_bump = floor.map(|f| row.result.median_ns_per_op / f);
        }
    }
    if args.json {
        let s = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?;
        println!("{s}");
    } else {
        print!("{}", table(&rows, &cfg));
    }
    Ok(())
}

pub(crate) fn human(bytes: u64) -> String {
    const U: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i < 3 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", U[i])
}

/// The warm-up column: its time per op and its ratio to the first row's, or `-` for a
/// workload without a churning warm-up.
pub(crate) fn warmup_cell(ns: Option<f64>, ratio: Option<f64>, unit: &str) -> String {
    match (ns, ratio) {
        (Some(ns), Some(r)) => format!("{} {r:.2}x", per_op(ns, unit)),
        (Some(ns), None) => per_op(ns, unit),
        _ => "-".into(),
    }
}

/// A per-op time with a readable unit (`3.10 ms/op`).
pub(crate) fn per_op(ns: f64, unit: &str) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms/{unit}", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs/{unit}", ns / 1e3)
    } else {
        format!("{ns:.1} ns/{unit}")
    }
}

fn table(rows: &[Row], cfg: &WorkloadConfig) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "tensor-alloc bench: median of {} timed rounds after a warm-up, seed {}, scale {}; faults/op over the timed rounds",
        cfg.rounds, cfg.seed, cfg.scale
    );
    let _ = writeln!(s, "cpu: {}", cpu_description());
    let _ = writeln!(
        s,
        "{:<14} {:<22} {:>14} {:>10} {:>8} {:>12} {:>12} {:>9} {:>10} {:>20}",
        "workload",
        "allocator",
        "median",
        "vs system",
        "vs bump",
        "peak live",
        "peak RSS+",
        "RSS/live",
        "faults/op",
        "warm-up"
    );
    for r in rows {
        let w = &r.result;
        let t = per_op(w.median_ns_per_op, w.unit);
        let (rss, ratio) = match w.peak_rss_growth_bytes {
            Some(b) => (
                human(b),
                format!("{:.2}", b as f64 / w.peak_live_bytes.max(1) as f64),
            ),
            None => ("n/a".into(), "n/a".into()),
        };
        let faults = w
            .page_faults_per_op
            .map_or_else(|| "n/a".to_string(), |f| format!("{f:.1}"));
        let _ = writeln!(
            s,
            "{:<14} {:<22} {:>14} {:>9.3}x {:>8} {:>12} {:>12} {:>9} {:>10} {:>20}",
            w.workload,
            r.allocator,
            t,
            r.ratio_to_system,
            r.ratio_to_bump
                .map_or_else(|| "-".to_string(), |x| format!("{x:.2}x")),
            human(w.peak_live_bytes),
            rss,
            ratio,
            faults,
            warmup_cell(w.warmup_ns_per_op, r.warmup_ratio_to_system, w.unit)
        );
    }
    s
}

/// The processor the numbers were taken on, from `/proc/cpuinfo`: model name, logical CPUs and
/// the vector extensions that matter to the kernels (`unknown` elsewhere).
pub(crate) fn cpu_description() -> String {
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return "unknown".into();
    };
    let field = |key: &str| {
        info.lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let model = field("model name").unwrap_or_else(|| "unknown".into());
    let cpus = info
        .lines()
        .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
        .count();
    let flags = field("flags").unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    let mut ext: Vec<&str> = ["avx2", "fma", "avx512f"]
        .into_iter()
        .filter(|f| has(f))
        .collect();
    if !has("avx512f") {
        ext.push("no avx512");
    }
    format!("{model}, {cpus} logical CPUs, {}", ext.join(" "))
}
