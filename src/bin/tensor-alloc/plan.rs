//! `tensor-alloc plan`: run every planner on a record set and print sizes, ratios and times.

use clap::Args;
use std::path::PathBuf;
use tensor_alloc::planner::{plan_all, records_from_json, BufferRequirement, PlanReport};

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
    /// "offline_offset", "alias_of" and "name" per buffer.
    #[arg(long, value_name = "FILE.json")]
    pub records: Option<PathBuf>,
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
    records_from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
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
    let report = plan_all(buffers).map_err(|e| e.to_string())?;
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
    report(&mut buffers, args).map(|_| ())
}
