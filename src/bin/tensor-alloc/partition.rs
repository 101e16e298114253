//! `tensor-alloc partition MODEL.tflite --devices cpu,npu`: split a model across devices and
//! report the subgraphs, the copies between memory spaces and why each op went where it went.

use clap::Args;
use std::path::PathBuf;
use tensor_alloc::interpreter::device::DeviceSet;
use tensor_alloc::interpreter::partition::{policy_by_name, PartitionGraph, Policy};
use tensor_alloc::interpreter::schedule::{PartitionedInterpreter, SpaceSummary};

/// Arguments of `tensor-alloc partition`.
#[derive(Args, Debug)]
pub struct PartitionArgs {
    /// The model.
    #[arg(value_name = "MODEL.tflite")]
    pub model: PathBuf,
    /// Devices, comma-separated: `cpu`, `cpu-reference`, `npu`. The first host device is the
    /// fallback; the others are preferred in order.
    #[arg(long, default_value = "cpu,npu")]
    pub devices: String,
    /// Partitioning policy: `min-copy` or `tengine`.
    #[arg(long, default_value = "min-copy")]
    pub policy: String,
    /// Partition only: skip building the memory spaces (no memory fallback check).
    #[arg(long)]
    pub no_build: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Draw the ops coloured by device into this SVG file.
    #[arg(long, value_name = "OUT.svg")]
    pub svg: Option<PathBuf>,
}

/// The device set and policy named by `--devices` and `--policy`.
pub fn devices_and_policy(
    devices: &str,
    policy: &str,
) -> Result<(DeviceSet, Box<dyn Policy>), String> {
    let set = DeviceSet::from_names(devices).map_err(|e| format!("--devices {devices}: {e}"))?;
    let policy = policy_by_name(policy)
        .ok_or_else(|| format!("--policy {policy}: expected `min-copy` or `tengine`"))?;
    Ok((set, policy))
}

pub fn run(args: &PartitionArgs) -> Result<(), String> {
    let model = crate::load_model(&args.model)?;
    let (set, policy) = devices_and_policy(&args.devices, &args.policy)?;
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", args.model.display());
    // With the memory spaces built, the partition includes the memory fallbacks.
    let (partition, graph, spaces) = if args.no_build {
        let graph = PartitionGraph::from_model(&model, &set).map_err(|e| at(&e))?;
        let p = policy.partition(&graph, &set).map_err(|e| at(&e))?;
        (p, graph, None)
    } else {
        let b = PartitionedInterpreter::build(&model, &set, policy.as_ref()).map_err(|e| at(&e))?;
        (b.partition().clone(), b.graph().clone(), Some(b.spaces()))
    };
    if let Some(path) = &args.svg {
        let names: Vec<&str> = set.devices().iter().map(|d| d.name()).collect();
        let svg = partition.to_svg(&graph, &names);
        tensor_alloc::fileio::write_file_atomic(path, |f| {
            std::io::Write::write_all(f, svg.as_bytes())
        })
        .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if args.json {
        let mut v = partition.to_json();
        if let (Some(o), Some(spaces)) = (v.as_object_mut(), &spaces) {
            o.insert(
                "spaces".into(),
                serde_json::to_value(spaces).unwrap_or_default(),
            );
        }
        println!("{v}");
    } else {
        println!("model: {}  devices: {}", args.model.display(), args.devices);
        print!("{}", partition.to_text(&graph));
        print_spaces(spaces.iter().flatten());
    }
    Ok(())
}

/// `tensor-alloc run MODEL --devices LIST`: the `run` report for a split model, plus the
/// per-space arenas and the copies.
pub fn run_split(args: &crate::run::RunArgs, devices: &str) -> Result<(), String> {
    use crate::run::{
        median, outputs_json, print_outputs, read_inputs, timed_invokes, us, write_outputs,
    };
    use tensor_alloc::tensor::Tensor;

    // The spaces' interpreters run the environment's path (`--isa` conflicts with `--devices`).
    let isa = tensor_alloc::interpreter::IsaSelection::resolve(None).map_err(|e| e.to_string())?;
    let model = crate::load_model(&args.model)?;
    let (set, policy) = devices_and_policy(devices, &args.policy)?;
    let mut p = PartitionedInterpreter::build(&model, &set, policy.as_ref())
        .map_err(|e| format!("{}: {e}", args.model.display()))?;
    let inputs = read_inputs(&args.inputs, p.num_inputs(), |k| {
        let d = p.input_desc(k).map_err(|e| e.to_string())?;
        Ok((d.dtype, d.dims.to_vec(), d.name.to_string()))
    })?;
    let set_inputs = |p: &mut PartitionedInterpreter| -> Result<(), String> {
        for (k, t) in inputs.iter().enumerate() {
            p.set_input(k, t).map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    set_inputs(&mut p)?;
    p.invoke().map_err(|e| e.to_string())?;
    let outputs: Vec<Tensor> = (0..p.num_outputs())
        .map(|k| p.output_tensor(k).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let files = write_outputs(args.output_dir.as_deref(), &outputs)?;
    let runs = args.repeat as usize;
    let (mut times, allocations) = timed_invokes(&mut p, runs, set_inputs, |p| {
        p.invoke().map_err(|e| e.to_string())
    })?;
    let min = times.iter().copied().min().unwrap_or_default();
    let med = median(&mut times);
    let part = p.partition();
    let spaces = p.spaces();
    if args.json {
        let outs = outputs_json(&outputs, &files, |k| {
            p.output_desc(k).ok().map(|d| d.name.to_string())
        });
        let v = serde_json::json!({
            "model": args.model.display().to_string(),
            "devices": devices,
            "policy": part.policy,
            "outputs": outs,
            "subgraphs": part.subgraphs.len(),
            "copies": part.copies.len(),
            "bytes_copied_per_invoke": part.bytes_copied_per_invoke,
            "spaces": spaces,
            "latency": {"median_us": us(med), "min_us": us(min), "runs": runs},
            "isa": isa.isa.name(),
            "invoke_heap_allocations": allocations,
            "process_peak_rss_bytes": crate::run::process_peak_rss_bytes(),
        });
        println!("{v}");
        return Ok(());
    }
    println!(
        "model: {}  devices: {devices}  policy: {}  isa: {isa}",
        args.model.display(),
        part.policy
    );
    print_outputs(args.inputs.is_empty(), &outputs, &files, |k| {
        p.output_desc(k).ok().map(|d| d.name.to_string())
    });
    println!(
        "{} subgraph(s); {} copy step(s), {} B copied per invoke",
        part.subgraphs.len(),
        part.copies.len(),
        part.bytes_copied_per_invoke
    );
    print_spaces(spaces.iter());
    if let Some(rss) = crate::run::process_peak_rss_bytes() {
        println!("process peak resident memory: {rss} bytes");
    }
    println!(
        "latency over {runs} invoke(s): median {:.1} µs, min {:.1} µs",
        us(med),
        us(min)
    );
    println!("heap allocations during the timed invokes (whole process): {allocations}");
    Ok(())
}

fn print_spaces<'a>(spaces: impl Iterator<Item = &'a SpaceSummary>) {
    for s in spaces {
        let runs = if s.devices.is_empty() {
            "no subgraph: graph inputs and outputs only".to_string()
        } else {
            format!("{} subgraph(s) of {}", s.subgraphs, s.devices.join(", "))
        };
        println!(
            "memory space {}: arena {} B{} from {} ({runs})",
            s.space,
            s.arena_bytes,
            s.limit_bytes
                .map(|l| format!(" of {l} B"))
                .unwrap_or_default(),
            s.allocator,
        );
    }
}
