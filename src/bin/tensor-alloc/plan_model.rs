//! `tensor-alloc plan MODEL.tflite`: plan a real model's arena with every planner — the same
//! report as `plan --records` plus the number of planned tensors, the persistent section
//! (variables, prepare-time constants) and the total arena to allocate.

use std::path::{Path, PathBuf};

use serde::Serialize;
use tensor_alloc::interpreter::{
    plan_model, ArenaNeeds, Interpreter, KernelSet, ModelPlan, ModelPlanOptions, OpResolver,
};
use tensor_alloc::model::{LifetimeOptions, Model, PersistentKind, PersistentTensor};

/// Alignment of planned tensors when `--alignment` is not given: TFLM's 16 bytes.
pub const DEFAULT_MODEL_ALIGNMENT: usize = 16;

/// Model-specific options of `plan` (used when a model file is given).
#[derive(clap::Args, Debug, Clone)]
pub struct ModelPlanFlags {
    /// Do not let outputs share memory with dying inputs (RESHAPE aliases, element-wise ops).
    #[arg(long)]
    pub no_inplace: bool,
    /// Keep every tensor alive to the end (TFLite's preserve_all_tensors): no reuse.
    #[arg(long)]
    pub preserve_all: bool,
    /// Keep graph inputs alive for the whole run (TFLite's default) instead of until their last reader.
    #[arg(long)]
    pub preserve_inputs: bool,
    /// Keep this tensor (index) alive to the end; repeatable.
    #[arg(long = "pin", value_name = "TENSOR")]
    pub pinned: Vec<usize>,
    /// Subgraph of the model to plan (default 0).
    #[arg(long)]
    pub subgraph: Option<usize>,
    /// Ignore the model's OfflineMemoryAllocation metadata.
    #[arg(long)]
    pub ignore_offline_plan: bool,
    /// Write a copy of the model with the best plan embedded as OfflineMemoryAllocation
    /// metadata (TFLM then uses these offsets instead of planning at run time).
    #[arg(long, value_name = "OUT.tflite")]
    pub embed_offline: Option<PathBuf>,
    /// Kernel threads of the interpreter configuration the caller-buffer figure is for (as
    /// `run --threads`; default 1): kernels that give each thread its own scratch need more.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: Option<u32>,
    /// Kernel set of the interpreter configuration the caller-buffer figure is for (as
    /// `run --kernels`): `optimized` (default) or `reference`.
    #[arg(long, value_parser = crate::run::parse_kernel_set)]
    pub kernels: Option<KernelSet>,
    /// Also build and time the configurations an arena budget can choose (nothing
    /// precomputed … every packed copy and table) and print arena bytes against invoke time.
    #[arg(long)]
    pub frontier: bool,
    /// With --frontier: how many configurations to time (evenly spread; at least 2).
    #[arg(long, value_name = "N", requires = "frontier", value_parser = clap::value_parser!(u32).range(2..=64))]
    pub frontier_points: Option<u32>,
    /// With --frontier: timed invokes per configuration.
    #[arg(long, value_name = "N", requires = "frontier", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub repeat: Option<u32>,
}

impl ModelPlanFlags {
    /// The model-only flags that were given (they mean nothing for a record set).
    pub fn given(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        let flags: [(&'static str, bool); 12] = [
            ("--no-inplace", self.no_inplace),
            ("--preserve-all", self.preserve_all),
            ("--preserve-inputs", self.preserve_inputs),
            ("--pin", !self.pinned.is_empty()),
            ("--subgraph", self.subgraph.is_some()),
            ("--ignore-offline-plan", self.ignore_offline_plan),
            ("--embed-offline", self.embed_offline.is_some()),
            ("--threads", self.threads.is_some()),
            ("--kernels", self.kernels.is_some()),
            ("--frontier", self.frontier),
            ("--frontier-points", self.frontier_points.is_some()),
            ("--repeat", self.repeat.is_some()),
        ];
        for (name, given) in flags {
            if given {
                v.push(name);
            }
        }
        v
    }
}

/// Plans `model_path` and prints the report (text or JSON); writes the best plan as SVG to
/// `svg` when given.
pub fn run(
    model_path: &Path,
    flags: &ModelPlanFlags,
    alignment: usize,
    json_out: bool,
    svg: Option<&PathBuf>,
) -> Result<(), String> {
    let model = crate::load_model(model_path)?;
    let opts = plan_options(flags, alignment);
    let plan = plan_model(&model, &opts).map_err(|e| e.to_string())?;
    // With in-place sharing on, also plan without it, so both figures are reported.
    let without_inplace = if opts.lifetimes.inplace {
        let mut o = opts.clone();
        o.lifetimes.inplace = false;
        Some(plan_model(&model, &o).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let arena_check = prove_arena(&plan)?;
    let subgraph = opts.lifetimes.subgraph;
    // What this crate's interpreter needs in a caller-provided buffer (head with kernel scratch,
    // tail with op data and persistent tensors) for the configuration given (kernel set and
    // threads): the number `run --arena-bytes` accepts with the same flags. It comes from the
    // staging the interpreter's build runs (init, prepare, planning), not from an estimate.
    let config = InterpreterConfig {
        kernels: flags.kernels.unwrap_or_default(),
        threads: flags.threads.unwrap_or(1),
    };
    let interpreter = match subgraph {
        0 => match Interpreter::arena_needs_threads(
            &model,
            &OpResolver::with_kernel_set(config.kernels),
            config.threads as usize,
        ) {
            Ok(n) => InterpreterNeeds::from((n, config)),
            Err(e) => InterpreterNeeds::Error {
                error: e.to_string(),
            },
        },
        _ => InterpreterNeeds::Error {
            error: "the interpreter runs subgraph 0 only".into(),
        },
    };
    if let Some(path) = svg {
        write_svg(&plan, path)?;
    }
    if let Some(out) = &flags.embed_offline {
        embed_offline(&model, &plan, subgraph, out)?;
        if !json_out {
            println!(
                "wrote {} with the best plan as OfflineMemoryAllocation metadata",
                out.display()
            );
        }
    }
    let repeat = flags.repeat.unwrap_or(crate::frontier::DEFAULT_REPEAT);
    let frontier = if flags.frontier {
        if subgraph != 0 {
            return Err("--frontier: the interpreter runs subgraph 0 only".into());
        }
        Some(crate::frontier::measure(
            &model,
            config.kernels,
            config.threads as usize,
            flags
                .frontier_points
                .map_or(crate::frontier::DEFAULT_POINTS, |n| n as usize),
            repeat,
        )?)
    } else {
        None
    };
    let mut summary = PlanSummary::new(
        model_path,
        &plan,
        &opts,
        without_inplace.as_ref(),
        arena_check,
        interpreter,
    );
    summary.frontier = frontier;
    if json_out {
        print_json(&plan, &summary)
    } else {
        print_text(&plan, &summary, svg);
        if let Some(rows) = &summary.frontier {
            crate::frontier::print(rows, config.kernels, config.threads as usize, repeat);
        }
        Ok(())
    }
}

/// The library's planning options from the command line.
fn plan_options(flags: &ModelPlanFlags, alignment: usize) -> ModelPlanOptions {
    ModelPlanOptions {
        lifetimes: LifetimeOptions {
            subgraph: flags.subgraph.unwrap_or(0),
            preserve_all: flags.preserve_all,
            preserve_inputs: flags.preserve_inputs,
            pinned: flags.pinned.clone(),
            inplace: !flags.no_inplace,
            ignore_offline_plan: flags.ignore_offline_plan,
            inplace_ops: None,
        },
        alignment,
        use_offline_plan: !flags.ignore_offline_plan,
    }
}

/// Proves the total: builds an arena of exactly that size and fills head and tail. `Ok(size)`
/// when that worked; `Err(reason)` when this machine cannot allocate that much (the figure is
/// still reported, it is arithmetic, but no number is labelled as checked). The outer error is
/// a plan that does not fit the arena it asked for.
fn prove_arena(plan: &ModelPlan) -> Result<Result<usize, String>, String> {
    let allocator: tensor_alloc::alloc::AllocatorRef =
        std::sync::Arc::new(tensor_alloc::alloc::AlignedCpuAllocator::new());
    match tensor_alloc::arena::Arena::new_in(allocator, plan.total_bytes(), plan.alignment) {
        Ok(arena) => Ok(Ok(plan
            .fill_arena(arena.with_recording())
            .map_err(|e| e.to_string())?
            .size())),
        Err(tensor_alloc::arena::ArenaError::Allocator(e)) => {
            eprintln!(
                "note: the total of {} bytes was not proven by building the arena here: {e}",
                plan.total_bytes()
            );
            Ok(Err(e.to_string()))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Writes the chosen plan as SVG.
fn write_svg(plan: &ModelPlan, path: &Path) -> Result<(), String> {
    let picture = plan
        .report
        .chosen_plan()
        .ok_or("no plan in the report")?
        .to_svg(&plan.requirements);
    tensor_alloc::fileio::write_file_atomic(path, |f| {
        std::io::Write::write_all(f, picture.as_bytes())
    })
    .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Writes a copy of the model with the best plan as `OfflineMemoryAllocation` metadata.
fn embed_offline(
    model: &Model,
    plan: &ModelPlan,
    subgraph: usize,
    out: &Path,
) -> Result<(), String> {
    if subgraph != 0 {
        return Err("--embed-offline: TFLM offline plans describe subgraph 0 only".into());
    }
    let n = model.subgraphs.first().map_or(0, |s| s.tensors.len());
    let offsets = plan.tensor_offsets("best", n).ok_or("no best plan")?;
    let embedded = model
        .with_offline_plan(&offsets)
        .map_err(|e| e.to_string())?;
    let bytes = embedded.to_bytes().map_err(|e| e.to_string())?;
    tensor_alloc::fileio::write_file_atomic(out, |f| std::io::Write::write_all(f, &bytes))
        .map_err(|e| format!("cannot write {}: {e}", out.display()))
}

/// What `plan MODEL` reports beside the planners' table: JSON adds these keys to
/// [`PlanReport::to_json`](tensor_alloc::planner::PlanReport::to_json); the text renders them.
#[derive(Serialize)]
struct PlanSummary<'a> {
    model: String,
    subgraph: usize,
    alignment: usize,
    inplace: bool,
    #[serde(skip)]
    operators: usize,
    planned_tensors: usize,
    inplace_aliases: usize,
    tensors: &'a [usize],
    persistent: PersistentSummary<'a>,
    head_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    without_inplace: Option<WithoutInplace>,
    total_arena_bytes: usize,
    /// Present (non-null) only when the arena was really built and filled.
    arena_checked_bytes: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arena_not_checked: Option<String>,
    unused_tensors: &'a [usize],
    dynamic_tensors: &'a [usize],
    offline_plan_ignored: &'a Option<String>,
    interpreter: InterpreterNeeds,
    /// `--frontier`: each configuration an arena budget can choose, timed.
    #[serde(skip_serializing_if = "Option::is_none")]
    frontier: Option<Vec<crate::frontier::FrontierRow>>,
}

/// The persistent section (arena tail) of the planned tensors.
#[derive(Serialize)]
struct PersistentSummary<'a> {
    bytes: usize,
    variable_bytes: usize,
    prepare_time_constant_bytes: usize,
    tensors: &'a [PersistentTensor],
}

/// The same model planned without in-place sharing.
#[derive(Serialize)]
struct WithoutInplace {
    lower_bound_bytes: usize,
    best_arena_bytes: usize,
    tflm_arena_bytes: Option<usize>,
    tflite_arena_bytes: Option<usize>,
}

/// The interpreter configuration a caller-buffer figure is for (`run --kernels --threads`).
#[derive(Clone, Copy)]
struct InterpreterConfig {
    kernels: KernelSet,
    threads: u32,
}

/// What the bundled interpreter needs of a caller buffer, or why it cannot run the model.
#[derive(Serialize)]
#[serde(untagged)]
enum InterpreterNeeds {
    Needs {
        caller_buffer_bytes: usize,
        head_bytes: usize,
        scratch_bytes: usize,
        tail_bytes: usize,
        /// The interpreter's tensor and node tables, after the arena in the buffer.
        tables_bytes: usize,
        /// The configuration the figures are for.
        kernels: &'static str,
        threads: u32,
    },
    Error {
        error: String,
    },
}

impl From<(ArenaNeeds, InterpreterConfig)> for InterpreterNeeds {
    fn from((n, c): (ArenaNeeds, InterpreterConfig)) -> Self {
        InterpreterNeeds::Needs {
            caller_buffer_bytes: n.total_bytes,
            head_bytes: n.head_bytes,
            scratch_bytes: n.scratch_bytes,
            tail_bytes: n.tail_bytes,
            tables_bytes: n.tables_bytes,
            kernels: c.kernels.name(),
            threads: c.threads,
        }
    }
}

impl<'a> PlanSummary<'a> {
    fn new(
        model_path: &Path,
        plan: &'a ModelPlan,
        opts: &ModelPlanOptions,
        without_inplace: Option<&ModelPlan>,
        arena_check: Result<usize, String>,
        interpreter: InterpreterNeeds,
    ) -> Self {
        let lt = &plan.lifetimes;
        let alignment = opts.alignment;
        let bytes_of = |k: PersistentKind| -> usize {
            lt.persistent
                .iter()
                .filter(|p| p.kind == k)
                .map(|p| p.bytes.div_ceil(alignment.max(1)) * alignment.max(1))
                .sum()
        };
        let (arena_checked_bytes, arena_not_checked) = match arena_check {
            Ok(size) => (Some(size), None),
            Err(reason) => (None, Some(reason)),
        };
        PlanSummary {
            model: model_path.display().to_string(),
            subgraph: opts.lifetimes.subgraph,
            alignment,
            inplace: opts.lifetimes.inplace,
            operators: lt.num_ops,
            planned_tensors: lt.num_planned(),
            inplace_aliases: lt.planned.iter().filter(|p| p.alias_of.is_some()).count(),
            tensors: &plan.tensors,
            persistent: PersistentSummary {
                bytes: plan.persistent_bytes,
                variable_bytes: bytes_of(PersistentKind::Variable),
                prepare_time_constant_bytes: bytes_of(PersistentKind::PrepareTimeConstant),
                tensors: &lt.persistent,
            },
            head_bytes: plan.head_bytes(),
            without_inplace: without_inplace.map(|w| WithoutInplace {
                lower_bound_bytes: w.report.lower_bound_bytes,
                best_arena_bytes: w.head_bytes(),
                tflm_arena_bytes: w.report.get("tflm").map(|r| r.arena_bytes),
                tflite_arena_bytes: w.report.get("tflite").map(|r| r.arena_bytes),
            }),
            total_arena_bytes: plan.total_bytes(),
            arena_checked_bytes,
            arena_not_checked,
            unused_tensors: &lt.unused,
            dynamic_tensors: &lt.unsized_tensors,
            offline_plan_ignored: &plan.offline_ignored,
            interpreter,
            frontier: None,
        }
    }
}

/// The planners' report with the summary's keys added.
fn print_json(plan: &ModelPlan, summary: &PlanSummary) -> Result<(), String> {
    let mut v = plan.report.to_json();
    let extra = serde_json::to_value(summary).map_err(|e| e.to_string())?;
    if let (Some(obj), serde_json::Value::Object(extra)) = (v.as_object_mut(), extra) {
        obj.extend(extra);
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
    );
    Ok(())
}

fn print_text(plan: &ModelPlan, s: &PlanSummary, svg: Option<&PathBuf>) {
    println!(
        "{}: subgraph {} — {} operators, {} planned tensors ({} in-place aliases), alignment {}",
        s.model, s.subgraph, s.operators, s.planned_tensors, s.inplace_aliases, s.alignment
    );
    if let Some(why) = s.offline_plan_ignored {
        println!("offline memory plan ignored: {why}");
    }
    print!("{}", plan.report.to_table());
    if let Some(w) = &s.without_inplace {
        println!(
            "without in-place sharing: lower bound {} bytes, best {} bytes (saved by sharing: {} bytes)",
            w.lower_bound_bytes,
            w.best_arena_bytes,
            w.best_arena_bytes.saturating_sub(s.head_bytes)
        );
    }
    let p = &s.persistent;
    println!(
        "persistent: {} bytes ({} B variables, {} B prepare-time constants, {} tensors)",
        p.bytes,
        p.variable_bytes,
        p.prepare_time_constant_bytes,
        p.tensors.len()
    );
    if !s.dynamic_tensors.is_empty() {
        println!(
            "dynamic (allocated at run time, not planned): tensors {:?}",
            s.dynamic_tensors
        );
    }
    let check = match (&s.arena_checked_bytes, &s.arena_not_checked) {
        (Some(size), _) => format!("checked: an arena of {size} bytes holds both"),
        (None, reason) => format!(
            "NOT checked: building the arena failed here: {}",
            reason.as_deref().unwrap_or_default()
        ),
    };
    println!(
        "tensor data only (planner figures, no kernel scratch or op data): head {} + persistent {} = {} bytes ({check})",
        s.head_bytes, p.bytes, s.total_arena_bytes,
    );
    match &s.interpreter {
        InterpreterNeeds::Needs {
            caller_buffer_bytes: total,
            head_bytes,
            scratch_bytes,
            tail_bytes,
            tables_bytes,
            kernels,
            threads,
        } => println!(
            "interpreter ({kernels} kernels, {threads} thread{}): a caller buffer needs {total} bytes = head {head_bytes} (tensors and kernel scratch, sharing space by lifetime: the scratch buffers sum to {scratch_bytes} B over the nodes, each live only while its node runs) + tail {tail_bytes} (op data, variables, prepare-time constants) + tables {tables_bytes} (the interpreter's tensor, slot and node tables, after the arena at a 16-byte boundary), at a 16-byte aligned address; `run --arena-bytes {total} --kernels {kernels} --threads {threads}` accepts exactly this (other --kernels/--threads: plan with those flags)",
            if *threads == 1 { "" } else { "s" }
        ),
        InterpreterNeeds::Error { .. } if s.subgraph != 0 => {
            println!("interpreter: runs subgraph 0 only")
        }
        InterpreterNeeds::Error { error } => println!("interpreter: cannot run this model: {error}"),
    }
    if let Some(path) = svg {
        println!("picture of the best plan: {}", path.display());
    }
}
