//! `tensor-alloc plan`: run every planner on a record set and print sizes, ratios and times.

use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use tensor_alloc::planner::exact::{self, Decision, SearchBudget};
use tensor_alloc::planner::{
    plan_all_with_best, records_from_csv, records_from_json, BestPlanner, BufferRequirement,
    PlanReport,
};

/// Arguments of `tensor-alloc plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// A .tflite model to plan (instead of --records): its tensors' lifetimes, in-place aliases
    /// and persistent section.
    #[arg(value_name = "MODEL.tflite", conflicts_with = "records")]
    pub model: Option<PathBuf>,
    /// Options that apply when planning a model.
    #[command(flatten)]
    pub model_flags: crate::plan_model::ModelPlanFlags,
    /// A record set: {"buffers":[{"size":N,"first":A,"last":B}, ...]} with optional "alignment",
    /// "offline_offset", "alias_of" and "name" per buffer; or MiniMalloc's CSV (a header
    /// `id,lower,upper,size`, upper exclusive), recognised by its first character not being `{`.
    #[arg(long, value_name = "FILE.json|FILE.csv")]
    pub records: Option<PathBuf>,
    /// Answer "do the buffers fit in N bytes?": yes (with the plan), no (proven) or unknown
    /// (the search budget ran out). Only with --records.
    #[arg(long, value_name = "N")]
    pub capacity: Option<usize>,
    /// Let best's exact search (or the --capacity question) run up to S seconds instead of its
    /// default node budget (then results may depend on the machine's speed).
    #[arg(long, value_name = "S")]
    pub time_limit: Option<f64>,
    /// Print JSON ({"lower_bound_bytes":..,"planners":{"linear":{"arena_bytes":..,"millis":..,"offsets":[..]},..}}).
    #[arg(long)]
    pub json: bool,
    /// Write the best plan as an SVG picture to this file.
    #[arg(long, value_name = "OUT.svg")]
    pub svg: Option<PathBuf>,
    /// Override every buffer's alignment (a power of two).
    #[arg(long, value_name = "N")]
    pub alignment: Option<usize>,
}

/// Largest `--records` file read (about 2.5 million buffers of JSON).
const MAX_RECORDS_FILE_BYTES: u64 = 256 << 20;

/// Loads the buffers named by the arguments.
fn load(args: &PlanArgs) -> Result<Vec<BufferRequirement>, String> {
    let Some(path) = &args.records else {
        return Err("plan: give a model (tensor-alloc plan MODEL.tflite) or a record set with --records FILE.json".to_string());
    };
    let bytes =
        tensor_alloc::fileio::read_regular_file(path, MAX_RECORDS_FILE_BYTES, "records file")
            .map_err(|e| format!("cannot read records file {}: {e}", path.display()))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| format!("records file {} is not UTF-8: {e}", path.display()))?;
    let parsed = if text.trim_start().starts_with('{') {
        records_from_json(&text)
    } else {
        records_from_csv(&text)
    };
    parsed.map_err(|e| format!("{}: {e}", path.display()))
}

/// The exact-search budget the arguments ask for.
fn budget(args: &PlanArgs) -> Result<SearchBudget, String> {
    match args.time_limit {
        None => Ok(SearchBudget::work(BestPlanner::DEFAULT_EXACT_WORK)),
        Some(s) if s.is_finite() && s > 0.0 && s <= 1e9 => {
            Ok(SearchBudget::work(u64::MAX).with_time_limit(Duration::from_secs_f64(s)))
        }
        Some(s) => Err(format!(
            "--time-limit {s} is not a number of seconds; expected a value above 0 and at most 1e9"
        )),
    }
}

/// `--capacity N`: decides whether the buffers fit and prints the answer (and the plan).
fn answer_capacity(
    buffers: &[BufferRequirement],
    capacity: usize,
    args: &PlanArgs,
) -> Result<(), String> {
    let start = std::time::Instant::now();
    let decision = exact::decide(buffers, capacity, budget(args)?).map_err(|e| e.to_string())?;
    let millis = start.elapsed().as_secs_f64() * 1e3;
    let (answer, plan) = match &decision {
        Decision::Fits(plan) => ("yes", Some(plan)),
        Decision::DoesNotFit => ("no", None),
        Decision::Unknown(_) => ("unknown", None),
    };
    if args.json {
        let mut v = serde_json::json!({
            "capacity_bytes": capacity,
            "fits": answer,
            "millis": millis,
        });
        if let Some(plan) = plan {
            v["arena_bytes"] = plan.arena_size.into();
            v["offsets"] = serde_json::json!(plan.offsets);
        }
        if let Decision::Unknown(why) = &decision {
            v["reason"] = why.to_string().into();
        }
        println!("{v}");
    } else {
        match &decision {
            Decision::Fits(plan) => {
                println!(
                    "fits in {capacity} bytes: yes (arena {} bytes, {millis:.1} ms)",
                    plan.arena_size
                );
                println!("{:>8} {:>14}", "buffer", "offset");
                for (i, o) in plan.offsets.iter().enumerate() {
                    println!("{i:>8} {o:>14}");
                }
            }
            Decision::DoesNotFit => {
                println!("fits in {capacity} bytes: no (proven, {millis:.1} ms)")
            }
            Decision::Unknown(why) => {
                println!("fits in {capacity} bytes: unknown ({why}, {millis:.1} ms)")
            }
        }
    }
    if let (Some(path), Some(plan)) = (&args.svg, plan) {
        std::fs::write(path, plan.to_svg(buffers))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Plans `buffers` with every planner, prints the table or JSON and writes the SVG; shared by
/// every input kind (record sets now, models later).
pub fn report(buffers: &mut [BufferRequirement], args: &PlanArgs) -> Result<PlanReport, String> {
    if let Some(a) = args.alignment {
        if !a.is_power_of_two() {
            return Err(format!("--alignment {a} is not a power of two"));
        }
        for b in buffers.iter_mut() {
            b.alignment = a;
        }
    }
    let best = BestPlanner::default().with_exact_budget(budget(args)?);
    let report = plan_all_with_best(buffers, best).map_err(|e| e.to_string())?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_table());
    }
    if let Some(path) = &args.svg {
        let best = report.chosen_plan().ok_or("no plan in the report")?;
        let svg = best.to_svg(buffers);
        tensor_alloc::fileio::write_file_atomic(path, |f| {
            std::io::Write::write_all(f, svg.as_bytes())
        })
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        if !args.json {
            println!("wrote {}", path.display());
        }
    }
    Ok(report)
}

/// Runs the subcommand.
pub fn run(args: &PlanArgs) -> Result<(), String> {
    if let Some(model) = &args.model {
        if args.capacity.is_some() || args.time_limit.is_some() {
            return Err("--capacity and --time-limit apply to --records, not to a model".into());
        }
        let alignment = args
            .alignment
            .unwrap_or(crate::plan_model::DEFAULT_MODEL_ALIGNMENT);
        return crate::plan_model::run(
            model,
            &args.model_flags,
            alignment,
            args.json,
            args.svg.as_ref(),
        );
    }
    let given = args.model_flags.given();
    if !given.is_empty() {
        return Err(format!(
            "{} appl{} to a model (tensor-alloc plan MODEL.tflite), not to --records",
            given.join(", "),
            if given.len() == 1 { "ies" } else { "y" }
        ));
    }
    let mut buffers = load(args)?;
    if let Some(capacity) = args.capacity {
        if let Some(a) = args.alignment {
            if !a.is_power_of_two() {
                return Err(format!("--alignment {a} is not a power of two"));
            }
            for b in buffers.iter_mut() {
                b.alignment = a;
            }
        }
        return answer_capacity(&buffers, capacity, args);
    }
    report(&mut buffers, args).map(|_| ())
}
