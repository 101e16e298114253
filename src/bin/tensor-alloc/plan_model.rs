//! `tensor-alloc plan MODEL.tflite`: plan a real model's arena with every planner — the same
//! report as `plan --records` plus the number of planned tensors, the persistent section
//! (variables, prepare-time constants) and the total arena to allocate.

use std::path::{Path, PathBuf};

use serde_json::json;
use tensor_alloc::interpreter::{plan_model, Interpreter, ModelPlanOptions, OpResolver};
use tensor_alloc::model::{LifetimeOptions, Model, PersistentKind};

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
}

impl ModelPlanFlags {
    /// The model-only flags that were given (they mean nothing for a record set).
    pub fn given(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        let flags: [(&'static str, bool); 7] = [
            ("--no-inplace", self.no_inplace),
            ("--preserve-all", self.preserve_all),
            ("--preserve-inputs", self.preserve_inputs),
            ("--pin", !self.pinned.is_empty()),
            ("--subgraph", self.subgraph.is_some()),
            ("--ignore-offline-plan", self.ignore_offline_plan),
            ("--embed-offline", self.embed_offline.is_some()),
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
    let model = Model::load(model_path).map_err(|e| e.to_string())?;
    let subgraph = flags.subgraph.unwrap_or(0);
    let opts = ModelPlanOptions {
        lifetimes: LifetimeOptions {
            subgraph,
            preserve_all: flags.preserve_all,
            preserve_inputs: flags.preserve_inputs,
            pinned: flags.pinned.clone(),
            inplace: !flags.no_inplace,
            ignore_offline_plan: flags.ignore_offline_plan,
        },
        alignment,
        use_offline_plan: !flags.ignore_offline_plan,
    };
    let plan = plan_model(&model, &opts).map_err(|e| e.to_string())?;
    // With in-place sharing on, also plan without it, so both figures are reported.
    let without_inplace = if opts.lifetimes.inplace {
        let mut o = opts.clone();
        o.lifetimes.inplace = false;
        Some(plan_model(&model, &o).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let lt = &plan.lifetimes;
    // Prove the total: build an arena of exactly that size and fill head and tail. When this
    // machine cannot allocate that much, the figure is still reported (it is arithmetic), with
    // a note that it was not proven here.
    let allocator: tensor_alloc::alloc::AllocatorRef =
        std::sync::Arc::new(tensor_alloc::alloc::AlignedCpuAllocator::new());
    // `Ok(size)` when an arena of that size was built and filled here; `Err(reason)` when
    // this machine could not allocate it (then no number is labelled as checked).
    let arena_check: Result<usize, String> =
        match tensor_alloc::arena::Arena::new_in(allocator, plan.total_bytes(), plan.alignment) {
            Ok(arena) => Ok(plan
                .fill_arena(arena.with_recording())
                .map_err(|e| e.to_string())?
                .size()),
            Err(tensor_alloc::arena::ArenaError::Allocator(e)) => {
                eprintln!(
                    "note: the total of {} bytes was not proven by building the arena here: {e}",
                    plan.total_bytes()
                );
                Err(e.to_string())
            }
            Err(e) => return Err(e.to_string()),
        };
    let bytes_of = |k: PersistentKind| -> usize {
        lt.persistent
            .iter()
            .filter(|p| p.kind == k)
            .map(|p| p.bytes.div_ceil(alignment.max(1)) * alignment.max(1))
            .sum()
    };
    let variables = bytes_of(PersistentKind::Variable);
    let constants = bytes_of(PersistentKind::PrepareTimeConstant);
    let aliases = lt.planned.iter().filter(|p| p.alias_of.is_some()).count();
    // What this crate's interpreter needs in a caller-provided buffer (head with kernel scratch,
    // tail with op data and persistent tensors): the number `run --arena-bytes` accepts.
    let interpreter = (subgraph == 0).then(|| {
        Interpreter::arena_needs(&model, &OpResolver::with_builtins()).map_err(|e| e.to_string())
    });

    if let Some(path) = svg {
        let picture = plan
            .report
            .chosen_plan()
            .ok_or("no plan in the report")?
            .to_svg(&plan.requirements);
        std::fs::write(path, picture)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }

    if let Some(out) = &flags.embed_offline {
        if subgraph != 0 {
            return Err("--embed-offline: TFLM offline plans describe subgraph 0 only".into());
        }
        let n = model.subgraphs.first().map_or(0, |s| s.tensors.len());
        let offsets = plan.tensor_offsets("best", n).ok_or("no best plan")?;
        let embedded = model
            .with_offline_plan(&offsets)
            .map_err(|e| e.to_string())?;
        let bytes = embedded.to_bytes().map_err(|e| e.to_string())?;
        std::fs::write(out, bytes).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
        if !json_out {
            println!(
                "wrote {} with the best plan as OfflineMemoryAllocation metadata",
                out.display()
            );
        }
    }

    if json_out {
        let mut v = plan.report.to_json();
        if let Some(obj) = v.as_object_mut() {
            obj.insert("model".into(), json!(model_path.display().to_string()));
            obj.insert("subgraph".into(), json!(subgraph));
            obj.insert("alignment".into(), json!(alignment));
            obj.insert("inplace".into(), json!(!flags.no_inplace));
            obj.insert("planned_tensors".into(), json!(lt.num_planned()));
            obj.insert("inplace_aliases".into(), json!(aliases));
            obj.insert("tensors".into(), json!(plan.tensors));
            obj.insert(
                "persistent".into(),
                json!({
                    "bytes": plan.persistent_bytes,
                    "variable_bytes": variables,
                    "prepare_time_constant_bytes": constants,
                    "tensors": lt.persistent.iter().map(|p| json!({
                        "index": p.tensor, "name": p.name, "bytes": p.bytes,
                        "kind": match p.kind { PersistentKind::Variable => "variable", PersistentKind::PrepareTimeConstant => "prepare_time_constant" },
                    })).collect::<Vec<_>>(),
                }),
            );
            obj.insert("head_bytes".into(), json!(plan.head_bytes()));
            if let Some(w) = &without_inplace {
                obj.insert(
                    "without_inplace".into(),
                    json!({
                        "lower_bound_bytes": w.report.lower_bound_bytes,
                        "best_arena_bytes": w.head_bytes(),
                        "tflm_arena_bytes": w.report.get("tflm").map(|r| r.arena_bytes),
                        "tflite_arena_bytes": w.report.get("tflite").map(|r| r.arena_bytes),
                    }),
                );
            }
            obj.insert("total_arena_bytes".into(), json!(plan.total_bytes()));
            // `arena_checked_bytes` is present only when the arena was really built and filled.
            match &arena_check {
                Ok(size) => {
                    obj.insert("arena_checked_bytes".into(), json!(size));
                }
                Err(reason) => {
                    obj.insert("arena_checked_bytes".into(), serde_json::Value::Null);
                    obj.insert("arena_not_checked".into(), json!(reason));
                }
            }
            obj.insert("unused_tensors".into(), json!(lt.unused));
            obj.insert("dynamic_tensors".into(), json!(lt.unsized_tensors));
            obj.insert("offline_plan_ignored".into(), json!(plan.offline_ignored));
            obj.insert(
                "interpreter".into(),
                match &interpreter {
                    Some(Ok(n)) => json!({
                        "caller_buffer_bytes": n.total_bytes,
                        "head_bytes": n.head_bytes,
                        "scratch_bytes": n.scratch_bytes,
                        "tail_bytes": n.tail_bytes,
                    }),
                    Some(Err(e)) => json!({ "error": e }),
                    None => json!({ "error": "the interpreter runs subgraph 0 only" }),
                },
            );
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
        return Ok(());
    }

    println!(
        "{}: subgraph {} — {} operators, {} planned tensors ({} in-place aliases), alignment {}",
        model_path.display(),
        subgraph,
        lt.num_ops,
        lt.num_planned(),
        aliases,
        alignment
    );
    if let Some(why) = &plan.offline_ignored {
        println!("offline memory plan ignored: {why}");
    }
    print!("{}", plan.report.to_table());
    if let Some(w) = &without_inplace {
        println!(
            "without in-place sharing: lower bound {} bytes, best {} bytes (saved by sharing: {} bytes)",
            w.report.lower_bound_bytes,
            w.head_bytes(),
            w.head_bytes().saturating_sub(plan.head_bytes())
        );
    }
    println!(
        "persistent: {} bytes ({} B variables, {} B prepare-time constants, {} tensors)",
        plan.persistent_bytes,
        variables,
        constants,
        lt.persistent.len()
    );
    if !lt.unsized_tensors.is_empty() {
        println!(
            "dynamic (allocated at run time, not planned): tensors {:?}",
            lt.unsized_tensors
        );
    }
    let check = match &arena_check {
        Ok(size) => format!("checked: an arena of {size} bytes holds both"),
        Err(reason) => format!("NOT checked: building the arena failed here: {reason}"),
    };
    println!(
        "tensor data only (planner figures, no kernel scratch or op data): head {} + persistent {} = {} bytes ({check})",
        plan.head_bytes(),
        plan.persistent_bytes,
        plan.total_bytes(),
    );
    match &interpreter {
        Some(Ok(n)) => println!(
            "interpreter (builtin kernels): a caller buffer needs {} bytes = head {} (tensors + {} B kernel scratch) + tail {} (op data, variables, prepare-time constants), at a 16-byte aligned address; `run --arena-bytes {}` accepts exactly this",
            n.total_bytes, n.head_bytes, n.scratch_bytes, n.tail_bytes, n.total_bytes
        ),
        Some(Err(e)) => println!("interpreter: cannot run this model: {e}"),
        None => println!("interpreter: runs subgraph 0 only"),
    }
    if let Some(path) = svg {
        println!("picture of the best plan: {}", path.display());
    }
    Ok(())
}
