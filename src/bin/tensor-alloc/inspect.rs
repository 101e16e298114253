//! `tensor-alloc inspect MODEL.tflite`: what a `.tflite` file contains — operators (with
//! counts), tensors, inputs/outputs, quantization, signatures, metadata, unknown and custom ops,
//! and the memory facts of subgraph 0 (planned tensors, lower bound, persistent bytes).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::json;
use tensor_alloc::model::{
    BuiltinOp, LifetimeOptions, Lifetimes, Model, Quantization, Subgraph, Tensor,
};

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

fn quant_text(q: &Option<Quantization>) -> String {
    match q {
        None => String::new(),
        Some(q) if q.scale.is_empty() => String::new(),
        Some(q) if q.is_per_channel() => format!(
            "per-channel x{} on dim {} (scale {:.3e}..{:.3e})",
            q.scale.len(),
            q.quantized_dimension,
            q.scale.iter().cloned().fold(f32::INFINITY, f32::min),
            q.scale.iter().cloned().fold(f32::NEG_INFINITY, f32::max)
        ),
        Some(q) => format!(
            "scale {:.6e} zp {}",
            q.scale[0],
            q.zero_point.first().copied().unwrap_or(0)
        ),
    }
}

fn quant_json(q: &Option<Quantization>) -> serde_json::Value {
    match q {
        None => serde_json::Value::Null,
        Some(q) => json!({
            "scale": q.scale,
            "zero_point": q.zero_point,
            "quantized_dimension": q.quantized_dimension,
            "per_channel": q.is_per_channel(),
        }),
    }
}

fn kind(model: &Model, si: usize, ti: usize, t: &Tensor) -> &'static str {
    if model.is_constant(si, ti) {
        "const"
    } else if t.is_variable {
        "variable"
    } else {
        "activation"
    }
}

/// `s` with control characters (escape sequences, carriage returns, NUL, ...) written as
/// `\u{..}` escapes, so names from a model file cannot drive the terminal.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

fn op_counts(model: &Model, sg: &Subgraph) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for op in &sg.operators {
        let name = model
            .opcode(op)
            .map(|c| printable(&c.display_name()).into_owned())
            .unwrap_or_else(|| "INVALID_OPCODE".into());
        *counts.entry(name).or_insert(0) += 1;
    }
    counts
}

/// Runs `inspect`.
pub fn run(args: &InspectArgs) -> Result<(), String> {
    let model = Model::load(&args.model).map_err(|e| e.to_string())?;
    let file_bytes = model.bytes.len();
    let unknown: Vec<String> = model
        .operator_codes
        .iter()
        .filter(|c| !c.builtin.is_known())
        .map(|c| c.display_name())
        .collect();
    let custom: Vec<String> = model
        .operator_codes
        .iter()
        .filter(|c| c.builtin == BuiltinOp::CUSTOM)
        .map(|c| c.custom_code.clone().unwrap_or_default())
        .collect();
    // A malformed offline plan is reported, not fatal: the rest of the model is still shown.
    let (offline, offline_error) = match model.offline_plan() {
        Ok(o) => (o, None),
        Err(e) => (None, Some(e.to_string())),
    };
    let memory = if model.subgraphs.is_empty() {
        None
    } else {
        let opts = LifetimeOptions {
            ignore_offline_plan: offline_error.is_some(),
            ..Default::default()
        };
        Some(Lifetimes::compute(&model, &opts).map_err(|e| e.to_string())?)
    };
    let subgraphs: Vec<usize> = if args.all_subgraphs {
        (0..model.subgraphs.len()).collect()
    } else {
        (0..model.subgraphs.len().min(1)).collect()
    };

    if args.json {
        let sgs: Vec<_> = subgraphs
            .iter()
            .map(|&si| {
                let sg = &model.subgraphs[si];
                let tensors: Vec<_> = sg
                    .tensors
                    .iter()
                    .enumerate()
                    .map(|(ti, t)| {
                        json!({
                            "index": ti, "name": t.name, "dtype": t.dtype.name(), "shape": t.shape,
                            "shape_signature": t.shape_signature, "bytes": t.byte_size(),
                            "kind": kind(&model, si, ti, t), "sparse": t.is_sparse,
                            "quantization": quant_json(&t.quantization),
                        })
                    })
                    .collect();
                let ops: Vec<_> = sg
                    .operators
                    .iter()
                    .map(|op| {
                        json!({
                            "op": model.opcode(op).map(|c| c.display_name()),
                            "inputs": op.inputs, "outputs": op.outputs,
                            "options": format!("{:?}", op.builtin_options),
                        })
                    })
                    .collect();
                json!({
                    "index": si, "name": sg.name, "inputs": sg.inputs, "outputs": sg.outputs,
                    "op_counts": op_counts(&model, sg), "operators": ops, "tensors": tensors,
                })
            })
            .collect();
        let out = json!({
            "file": args.model.display().to_string(),
            "file_bytes": file_bytes,
            "schema_version": model.version,
            "description": model.description,
            "subgraph_count": model.subgraphs.len(),
            "operator_codes": model.operator_codes.iter().map(|c| json!({
                "name": c.display_name(), "builtin_code": c.builtin.0, "version": c.version})).collect::<Vec<_>>(),
            "unknown_builtin_ops": unknown,
            "custom_ops": custom,
            "subgraphs": sgs,
            "signatures": model.signatures.iter().map(|s| json!({
                "key": s.key, "subgraph_index": s.subgraph_index,
                "inputs": s.inputs.iter().map(|t| (t.name.clone(), t.tensor_index)).collect::<BTreeMap<_, _>>(),
                "outputs": s.outputs.iter().map(|t| (t.name.clone(), t.tensor_index)).collect::<BTreeMap<_, _>>(),
            })).collect::<Vec<_>>(),
            "metadata": model.metadata.iter().map(|m| json!({
                "name": m.name, "bytes": model.buffer_data(m.buffer as usize).len()})).collect::<Vec<_>>(),
            "offline_planned_tensors": offline.as_ref().map(|o| o.iter().filter(|x| x.is_some()).count()),
            "offline_plan_error": offline_error,
            "memory": memory.as_ref().map(|lt| json!({
                "planned_tensors": lt.num_planned(),
                "lower_bound_bytes": lt.lower_bound(1),
                "naive_bytes": lt.naive_bytes(),
                "persistent_bytes": lt.persistent_bytes(),
                "unused_tensors": lt.unused,
            })),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
        );
        return Ok(());
    }

    println!(
        "{}: {} bytes, TFLite schema v{}",
        args.model.display(),
        file_bytes,
        model.version
    );
    if let Some(d) = &model.description {
        println!("description: {}", printable(d));
    }
    println!(
        "{} subgraph(s), {} operator code(s), {} buffer(s)",
        model.subgraphs.len(),
        model.operator_codes.len(),
        model.buffers.len()
    );
    if !unknown.is_empty() {
        println!(
            "UNKNOWN builtin operators (kept, not understood): {}",
            printable(&unknown.join(", "))
        );
    }
    if !custom.is_empty() {
        println!(
            "custom operators (need a registered kernel): {}",
            printable(&custom.join(", "))
        );
    }
    for &si in &subgraphs {
        let sg = &model.subgraphs[si];
        println!(
            "\nsubgraph {si} {:?}: {} operators, {} tensors",
            sg.name.as_deref().unwrap_or(""),
            sg.operators.len(),
            sg.tensors.len()
        );
        println!("  operators (count):");
        for (name, n) in op_counts(&model, sg) {
            println!("    {name:<34} {n:>5}");
        }
        let io = |label: &str, list: &[i32]| {
            for &i in list {
                if let Some(t) = usize::try_from(i).ok().and_then(|i| sg.tensors.get(i)) {
                    println!(
                        "  {label} #{i:<4} {:<40} {:<8} {:?}{} {}",
                        printable(&t.name),
                        t.dtype.name(),
                        t.shape,
                        t.shape_signature
                            .as_ref()
                            .filter(|s| **s != t.shape)
                            .map(|s| format!(" (signature {s:?})"))
                            .unwrap_or_default(),
                        quant_text(&t.quantization)
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
        for (ti, t) in sg.tensors.iter().enumerate() {
            let mut name = printable(&t.name).into_owned();
            if name.chars().count() > 44 {
                name = name.chars().take(41).collect::<String>() + "...";
            }
            println!(
                "    {ti:>5} {:<10} {:<9} {:>10} {:<22} {:<44} {}{}",
                kind(&model, si, ti, t),
                t.dtype.name(),
                t.byte_size()
                    .map(|b| b.to_string())
                    .unwrap_or_else(|| "?".into()),
                format!("{:?}", t.shape),
                name,
                quant_text(&t.quantization),
                if t.is_sparse { " [sparse]" } else { "" }
            );
        }
    }
    for s in &model.signatures {
        let names = |l: &[tensor_alloc::model::SignatureTensor]| {
            l.iter()
                .map(|t| format!("{}=#{}", printable(&t.name), t.tensor_index))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "\nsignature {:?} (subgraph {}): inputs [{}] outputs [{}]",
            s.key,
            s.subgraph_index,
            names(&s.inputs),
            names(&s.outputs)
        );
    }
    for m in &model.metadata {
        println!(
            "metadata {:?}: {} bytes",
            m.name,
            model.buffer_data(m.buffer as usize).len()
        );
    }
    if let Some(e) = &offline_error {
        println!("offline memory plan: invalid, ignored: {e}");
    }
    if let Some(o) = &offline {
        println!(
            "offline memory plan: {} of {} tensors at fixed offsets",
            o.iter().filter(|x| x.is_some()).count(),
            o.len()
        );
    }
    if let Some(lt) = &memory {
        println!(
            "\nmemory (subgraph 0): {} planned tensors, lower bound {} B (naive {} B), persistent {} B ({} variables / prepare-time constants), {} unused",
            lt.num_planned(),
            lt.lower_bound(1),
            lt.naive_bytes(),
            lt.persistent_bytes(),
            lt.persistent.len(),
            lt.unused.len()
        );
        println!(
            "  run `tensor-alloc plan {}` for arena sizes",
            args.model.display()
        );
    }
    Ok(())
}
