//! `tensor-alloc inspect MODEL.tflite`: what a `.tflite` file contains — operators (with
//! counts), tensors, inputs/outputs, quantization, signatures, metadata, unknown and custom ops,
//! and the memory facts of subgraph 0 (planned tensors, lower bound, persistent bytes).

use std::path::{Path, PathBuf};

pub use tensor_alloc::model::summary::printable;
use tensor_alloc::model::summary::{ModelSummary, QuantSummary, SubgraphSummary, TensorSummary};

/// Arguments of `inspect`.
#[derive(clap::Args)]
pub struct InspectArgs {
    /// The .tflite file.
    pub model: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// List every tensor of every subgraph (default: subgraph 0 only).
    #[arg(long)]
    pub all_subgraphs: bool,
}

#[derive(serde::Serialize)]
struct Report<'a> {
    file: String,
    #[serde(flatten)]
    summary: &'a ModelSummary,
}

/// Runs `inspect`.
pub fn run(args: &InspectArgs) -> Result<(), String> {
    let model = crate::load_model(&args.model)?;
    let summary = ModelSummary::new(&model, args.all_subgraphs).map_err(|e| e.to_string())?;
    if args.json {
        let report = Report {
            file: args.model.display().to_string(),
            summary: &summary,
        };
        // Through a `Value`, so the keys come out in the same (sorted) order as before.
        let value = serde_json::to_value(&report).map_err(|e| e.to_string())?;
        println!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
    } else {
        print_text(&args.model, &summary);
    }
    Ok(())
}

/// The text form of `summary` of the file at `path`.
fn print_text(path: &Path, summary: &ModelSummary) {
    print_header(path, summary);
    for sg in &summary.subgraphs {
        print_subgraph(sg);
    }
    print_footer(path, summary);
}

fn print_header(path: &Path, s: &ModelSummary) {
    println!(
        "{}: {} bytes, TFLite schema v{}",
        path.display(),
        s.file_bytes,
        s.schema_version
    );
    if let Some(d) = &s.description {
        println!("description: {}", printable(d));
    }
    println!(
        "{} subgraph(s), {} operator code(s), {} buffer(s)",
        s.subgraph_count,
        s.operator_codes.len(),
        s.buffer_count
    );
    if !s.unknown_builtin_ops.is_empty() {
        println!(
            "UNKNOWN builtin operators (kept, not understood): {}",
            printable(&s.unknown_builtin_ops.join(", "))
        );
    }
    if !s.custom_ops.is_empty() {
        println!(
            "custom operators (need a registered kernel): {}",
            printable(&s.custom_ops.join(", "))
        );
    }
}

fn quant_text(t: &TensorSummary) -> String {
    t.quantization
        .as_ref()
        .map(QuantSummary::text)
        .unwrap_or_default()
}

fn print_subgraph(sg: &SubgraphSummary) {
    println!(
        "\nsubgraph {} {:?}: {} operators, {} tensors",
        sg.index,
        sg.name.as_deref().unwrap_or(""),
        sg.operators.len(),
        sg.tensors.len()
    );
    println!("  operators (count):");
    for (name, n) in &sg.op_counts {
        println!("    {name:<34} {n:>5}");
    }
    let io = |label: &str, list: &[i32]| {
        for &i in list {
            if let Some(t) = usize::try_from(i).ok().and_then(|i| sg.tensors.get(i)) {
                println!(
                    "  {label} #{i:<4} {:<40} {:<8} {:?}{} {}",
                    printable(&t.name),
                    t.dtype,
                    t.shape,
                    t.shape_signature
                        .as_ref()
                        .filter(|s| **s != t.shape)
                        .map(|s| format!(" (signature {s:?})"))
                        .unwrap_or_default(),
                    quant_text(t)
                );
            }
        }
    };
    io("input ", &sg.inputs);
    io("output", &sg.outputs);
    println!("  tensors:");
    println!(
        "    {:>5} {:<10} {:<9} {:>10} {:<22} {:<44} quantization",
        "index", "kind", "dtype", "bytes", "shape", "name"
    );
    for t in &sg.tensors {
        let mut name = printable(&t.name).into_owned();
        if name.chars().count() > 44 {
            name = name.chars().take(41).collect::<String>() + "...";
        }
        println!(
            "    {:>5} {:<10} {:<9} {:>10} {:<22} {:<44} {}{}",
            t.index,
            t.kind.name(),
            t.dtype,
            t.bytes.map(|b| b.to_string()).unwrap_or_else(|| "?".into()),
            format!("{:?}", t.shape),
            name,
            quant_text(t),
            if t.sparse { " [sparse]" } else { "" }
        );
    }
}

fn print_footer(path: &Path, s: &ModelSummary) {
    for sig in &s.signatures {
        let names = |l: &[(String, u32)]| {
            l.iter()
                .map(|(name, index)| format!("{}=#{index}", printable(name)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "\nsignature {:?} (subgraph {}): inputs [{}] outputs [{}]",
            sig.key,
            sig.subgraph_index,
            names(&sig.inputs),
            names(&sig.outputs)
        );
    }
    for m in &s.metadata {
        println!("metadata {:?}: {} bytes", m.name, m.bytes);
    }
    if let Some(e) = &s.offline_plan_error {
        println!("offline memory plan: invalid, ignored: {e}");
    }
    if let (Some(planned), Some(entries)) = (s.offline_planned_tensors, s.offline_plan_entries) {
        println!("offline memory plan: {planned} of {entries} tensors at fixed offsets");
    }
    if let Some(m) = &s.memory {
        println!(
            "\nmemory (subgraph 0): {} planned tensors, lower bound {} B (naive {} B), persistent {} B ({} variables / prepare-time constants), {} unused",
            m.planned_tensors,
            m.lower_bound_bytes,
            m.naive_bytes,
            m.persistent_bytes,
            m.persistent_tensors,
            m.unused_tensors.len()
        );
        println!(
            "  run `tensor-alloc plan {}` for arena sizes",
            path.display()
        );
    }
}
