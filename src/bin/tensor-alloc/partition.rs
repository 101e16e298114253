//! `tensor-alloc partition MODEL.tflite --devices cpu,npu`: split a model across devices and
//! report the subgraphs, the copies between memory spaces and why each op went where it went.

use clap::Args;
use std::path::PathBuf;
use tensor_alloc::interpreter::device::DeviceSet;
use tensor_alloc::interpreter::partition::{policy_by_name, PartitionGraph, Policy};
use tensor_alloc::interpreter::schedule::{PartitionedInterpreter, SpaceSummary};
use tensor_alloc::model::Model;

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
    let model = Model::load(&args.model).map_err(|e| format!("{}: {e}", args.model.display()))?;
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
        std::fs::write(path, partition.to_svg(&graph, &names))
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
    use crate::run::{describe, median, seeded_input, us};
    use std::time::Instant;
    use tensor_alloc::tensor::Tensor;
    use tensor_alloc::GlobalAllocator;

    let model = Model::load(&args.model).map_err(|e| format!("{}: {e}", args.model.display()))?;
    let (set, policy) = devices_and_policy(devices, &args.policy)?;
    let mut p = PartitionedInterpreter::build(&model, &set, policy.as_ref())
        .map_err(|e| format!("{}: {e}", args.model.display()))?;
    let n_in = p.num_inputs();
    if !args.inputs.is_empty() && args.inputs.len() != n_in {
        return Err(format!(
            "the model has {n_in} input(s), {} --input file(s) given",
            args.inputs.len()
        ));
    }
    let mut inputs = Vec::with_capacity(n_in);
    for k in 0..n_in {
        let t = match args.inputs.get(k) {
            Some(path) => Tensor::read_npy(path).map_err(|e| format!("{}: {e}", path.display()))?,
            None => {
                let d = p.input_desc(k).map_err(|e| e.to_string())?;
                seeded_input(d.dtype, d.dims, k as u64)?
            }
        };
        inputs.push(t);
    }
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
    let mut files = vec![None; outputs.len()];
    if let Some(dir) = &args.output_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for (k, t) in outputs.iter().enumerate() {
            let path = dir.join(format!("output_{k}.npy"));
            t.write_npy(&path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            files[k] = Some(path.display().to_string());
        }
    }
    let runs = args.repeat as usize;
    let mut times = Vec::with_capacity(runs);
    let mut allocations = 0u64;
    for _ in 0..runs {
        set_inputs(&mut p)?;
        let before = GlobalAllocator::process_counts();
        let start = Instant::now();
        p.invoke().map_err(|e| e.to_string())?;
        let t = start.elapsed();
        allocations +=
            GlobalAllocator::process_counts().total_allocations() - before.total_allocations();
        times.push(t);
    }
    let min = times.iter().copied().min().unwrap_or_default();
    let med = median(&mut times);
    let part = p.partition();
    let spaces = p.spaces();
    if args.json {
        let outs: Vec<_> = outputs
            .iter()
            .enumerate()
            .map(|(k, t)| {
                serde_json::json!({
                    "name": p.output_desc(k).ok().map(|d| d.name.to_string()),
                    "dtype": t.dtype().name(),
                    "shape": t.dims(),
                    "file": files[k],
                })
            })
            .collect();
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
            "invoke_heap_allocations": allocations,
        });
        println!("{v}");
        return Ok(());
    }
    println!(
        "model: {}  devices: {devices}  policy: {}",
        args.model.display(),
        part.policy
    );
    for (k, t) in outputs.iter().enumerate() {
        let name = p
            .output_desc(k)
            .map(|d| crate::inspect::printable(d.name).into_owned())
            .unwrap_or_default();
        println!(
            "output {k} `{name}`: {} {:?} {}{}",
            t.dtype(),
            t.dims(),
            describe(t),
            files[k]
                .as_ref()
                .map(|f| format!(" -> {f}"))
                .unwrap_or_default()
        );
    }
    println!(
        "{} subgraph(s); {} copy step(s), {} B copied per invoke",
        part.subgraphs.len(),
        part.copies.len(),
        part.bytes_copied_per_invoke
    );
    print_spaces(spaces.iter());
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
        println!(
            "memory space {}: arena {} B{} from {} ({} subgraph(s); devices {})",
            s.space,
            s.arena_bytes,
            s.limit_bytes
                .map(|l| format!(" of {l} B"))
                .unwrap_or_default(),
            s.allocator,
            s.subgraphs,
            s.devices.join(", ")
        );
    }
}
