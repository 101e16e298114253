//! `tensor-alloc run MODEL.tflite`: build the interpreter, feed inputs, invoke, write outputs,
//! and report memory, latency, heap allocations during invoke and (with `--profile`) per-op
//! time.

use clap::Args;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tensor_alloc::alloc::registry;
use tensor_alloc::interpreter::{Interpreter, InterpreterBuilder, InterpreterError, KernelSet};
use tensor_alloc::model::Model;
use tensor_alloc::tensor::{DType, Tensor};
use tensor_alloc::test_support::Rng;
use tensor_alloc::GlobalAllocator;

/// Arguments of `tensor-alloc run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The model.
    #[arg(value_name = "MODEL.tflite")]
    pub model: PathBuf,
    /// Input `.npy` files in graph-input order (default: a seeded deterministic input).
    #[arg(long = "input", value_name = "FILE.npy")]
    pub inputs: Vec<PathBuf>,
    /// Write `output_K.npy` files here.
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Number of timed invokes.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub repeat: u32,
    /// Run in a caller-provided arena of exactly this many bytes (TFLM style).
    #[arg(long, value_name = "N")]
    pub arena_bytes: Option<usize>,
    /// Build the fastest interpreter whose arena (head + tail) fits in N bytes: kernels keep
    /// packed copies of their constant weights while they fit (default: no copies; with
    /// `--arena-bytes` the buffer is the budget). Fails with the exact minimum when even the
    /// smallest variants do not fit.
    #[arg(long, value_name = "N")]
    pub arena_budget: Option<usize>,
    /// Allocate the arena from this registry allocator (`cpu`, `bfc`, `pool`, `tracking(bfc)`...).
    #[arg(long, value_name = "NAME", conflicts_with = "arena_bytes")]
    pub allocator: Option<String>,
    /// Per-op time table (median over the repeats).
    #[arg(long)]
    pub profile: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Split the model across these devices (`cpu,npu`, `cpu,cpu-reference`; see `partition`).
    #[arg(long, value_name = "LIST", conflicts_with_all = ["arena_bytes", "arena_budget", "allocator", "profile"])]
    pub devices: Option<String>,
    /// Kernel set: `optimized` (default) or `reference` (the bit-exact oracle). With `--devices`,
    /// pick the set per device instead (`cpu` / `cpu-reference`).
    #[arg(long, default_value = "optimized", value_parser = parse_kernel_set, conflicts_with = "devices")]
    pub kernels: KernelSet,
    /// Kernel threads (the invoking thread plus N - 1 workers created at build; LiteRT's
    /// `num_threads`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256), conflicts_with = "devices")]
    pub threads: u32,
    /// Partitioning policy with `--devices`: `min-copy` or `tengine`.
    #[arg(long, default_value = "min-copy", requires = "devices")]
    pub policy: String,
}

fn parse_kernel_set(s: &str) -> Result<KernelSet, String> {
    KernelSet::from_name(s)
        .ok_or_else(|| format!("unknown kernel set `{s}`; expected `optimized` or `reference`"))
}

/// `builder` with `--arena-budget`, if given.
fn with_budget<'m, 'a>(
    builder: InterpreterBuilder<'m, 'a>,
    budget: Option<usize>,
) -> InterpreterBuilder<'m, 'a> {
    match budget {
        Some(n) => builder.arena_budget(n),
        None => builder,
    }
}

/// Most bytes `--arena-bytes` may ask for.
const MAX_ARENA: usize = 1 << 40;

fn seeded_input(dtype: DType, dims: &[usize], seed: u64) -> Result<Tensor, String> {
    let mut rng = Rng::new(seed);
    let mut t = Tensor::zeros(dtype, dims).map_err(|e| e.to_string())?;
    let n = t.num_elements();
    let bytes = t.as_mut_bytes().map_err(|e| e.to_string())?;
    for i in 0..n {
        let r = rng.next_u64();
        let unit = (r >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
        match dtype {
            DType::F32 => {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&((unit * 2.0 - 1.0) as f32).to_le_bytes())
            }
            DType::I8 | DType::U8 => bytes[i] = r as u8,
            DType::I16 => bytes[i * 2..i * 2 + 2]
                .copy_from_slice(&((rng.range(0, 512) as i64 - 256) as i16).to_le_bytes()),
            DType::Bool => bytes[i] = (r & 1) as u8,
            _ => {
                let size = dtype.size();
                let v = (r % 8).to_le_bytes();
                bytes[i * size..i * size + size.min(8)].copy_from_slice(&v[..size.min(8)]);
            }
        }
    }
    Ok(t)
}

fn describe(t: &Tensor) -> String {
    let n = t.num_elements().min(8);
    let vals: Vec<String> = match t.dtype() {
        DType::F32 => t
            .as_slice::<f32>()
            .map(|s| s[..n].iter().map(|v| format!("{v:.6}")).collect()),
        DType::I8 => t
            .as_slice::<i8>()
            .map(|s| s[..n].iter().map(|v| v.to_string()).collect()),
        DType::U8 => t
            .as_slice::<u8>()
            .map(|s| s[..n].iter().map(|v| v.to_string()).collect()),
        DType::I16 => t
            .as_slice::<i16>()
            .map(|s| s[..n].iter().map(|v| v.to_string()).collect()),
        DType::I32 => t
            .as_slice::<i32>()
            .map(|s| s[..n].iter().map(|v| v.to_string()).collect()),
        _ => Ok(vec!["…".into()]),
    }
    .unwrap_or_default();
    let more = if t.num_elements() > n { ", …" } else { "" };
    format!("[{}{more}]", vals.join(", "))
}

pub(crate) fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

pub(crate) fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Runs the command.
/// The inputs: `.npy` files in graph-input order, else a seeded input of each input's dtype and
/// shape (`desc(k)`).
pub(crate) fn read_inputs(
    files: &[PathBuf],
    n_in: usize,
    desc: impl Fn(usize) -> Result<(DType, Vec<usize>), String>,
) -> Result<Vec<Tensor>, String> {
    if !files.is_empty() && files.len() != n_in {
        return Err(format!(
            "the model has {n_in} input(s), {} --input file(s) given",
            files.len()
        ));
    }
    (0..n_in)
        .map(|k| match files.get(k) {
            Some(p) => Tensor::read_npy(p).map_err(|e| format!("{}: {e}", p.display())),
            None => {
                let (dtype, dims) = desc(k)?;
                seeded_input(dtype, &dims, k as u64)
            }
        })
        .collect()
}

/// Writes `output_K.npy` into `dir` (when given); returns each file's path.
pub(crate) fn write_outputs(
    dir: Option<&std::path::Path>,
    outputs: &[Tensor],
) -> Result<Vec<Option<String>>, String> {
    let mut files = vec![None; outputs.len()];
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for (k, t) in outputs.iter().enumerate() {
            let p = dir.join(format!("output_{k}.npy"));
            t.write_npy(&p)
                .map_err(|e| format!("{}: {e}", p.display()))?;
            files[k] = Some(p.display().to_string());
        }
    }
    Ok(files)
}

/// The `outputs` entries of the JSON report.
pub(crate) fn outputs_json(
    outputs: &[Tensor],
    files: &[Option<String>],
    name: impl Fn(usize) -> Option<String>,
) -> Vec<serde_json::Value> {
    outputs
        .iter()
        .enumerate()
        .map(|(k, t)| {
            serde_json::json!({
                "name": name(k),
                "dtype": t.dtype().name(),
                "shape": t.dims(),
                "file": files[k],
            })
        })
        .collect()
}

/// The inputs notice and one line per output of the text report.
pub(crate) fn print_outputs(
    seeded: bool,
    outputs: &[Tensor],
    files: &[Option<String>],
    name: impl Fn(usize) -> Option<String>,
) {
    if seeded {
        println!("inputs: seeded deterministic values (seed = input index; give --input FILE.npy for real data)");
    }
    for (k, t) in outputs.iter().enumerate() {
        let name = name(k)
            .map(|n| crate::inspect::printable(&n).into_owned())
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
}

/// `runs` timed invokes of `state` (inputs restored before each, outside the timing): each time
/// and the heap allocations the whole process made during them.
pub(crate) fn timed_invokes<S>(
    state: &mut S,
    runs: usize,
    set_inputs: impl Fn(&mut S) -> Result<(), String>,
    mut invoke: impl FnMut(&mut S) -> Result<(), String>,
) -> Result<(Vec<Duration>, u64), String> {
    let mut times = Vec::with_capacity(runs);
    let mut allocations = 0u64;
    for _ in 0..runs {
        set_inputs(state)?;
        let before = GlobalAllocator::process_counts();
        let start = Instant::now();
        invoke(state)?;
        let t = start.elapsed();
        let after = GlobalAllocator::process_counts();
        allocations += after.total_allocations() - before.total_allocations();
        times.push(t);
    }
    Ok((times, allocations))
}

pub fn run(args: &RunArgs) -> Result<(), String> {
    if let Some(devices) = &args.devices {
        return crate::partition::run_split(args, devices);
    }
    let model = Model::load(&args.model).map_err(|e| format!("{}: {e}", args.model.display()))?;
    let mut buffer: Vec<u128>;
    let mut interp = match (&args.arena_bytes, &args.allocator) {
        (Some(n), _) => {
            if *n > MAX_ARENA {
                return Err(format!("--arena-bytes {n}: at most {MAX_ARENA} bytes"));
            }
            buffer = Vec::new();
            buffer
                .try_reserve_exact(n.div_ceil(16))
                .map_err(|_| format!("--arena-bytes {n}: cannot allocate the buffer"))?;
            buffer.resize(n.div_ceil(16), 0);
            // SAFETY: the u128 words are plain memory; the byte view covers exactly the first
            // `n` bytes of them and borrows `buffer` for the interpreter's life.
            let bytes =
                unsafe { std::slice::from_raw_parts_mut(buffer.as_mut_ptr() as *mut u8, *n) };
            with_budget(
                InterpreterBuilder::new(&model)
                    .kernel_set(args.kernels)
                    .threads(args.threads as usize),
                args.arena_budget,
            )
            .arena_buffer(bytes)
            .build()
        }
        (None, Some(name)) => {
            let env =
                tensor_alloc::alloc::EnvConfig::from_process_env().map_err(|e| e.to_string())?;
            let a = registry::global()
                .create(name, &env)
                .map_err(|e| format!("--allocator {name}: {e}"))?;
            with_budget(
                InterpreterBuilder::new(&model)
                    .kernel_set(args.kernels)
                    .threads(args.threads as usize),
                args.arena_budget,
            )
            .arena_allocator(a)
            .build()
        }
        (None, None) => with_budget(
            InterpreterBuilder::new(&model)
                .kernel_set(args.kernels)
                .threads(args.threads as usize),
            args.arena_budget,
        )
        .build(),
    }
    .map_err(|e: InterpreterError| format!("{}: {e}", args.model.display()))?;

    // Inputs.
    let n_in = interp.num_inputs();
    let inputs = read_inputs(&args.inputs, n_in, |k| {
        let d = interp.input_desc(k).map_err(|e| e.to_string())?;
        Ok((d.dtype, d.dims.to_vec()))
    })?;
    // An input file whose shape differs from the model's (another batch) resizes that input;
    // resizing plans the interpreter again, so inputs are set only after every resize.
    for (k, t) in inputs.iter().enumerate() {
        let current = interp.input_desc(k).map_err(|e| e.to_string())?.dims;
        if t.shape().dims() != current {
            interp
                .resize_input(k, t.shape().dims())
                .map_err(|e| format!("{}: resizing input {k}: {e}", args.inputs[k].display()))?;
        }
    }
    let set_inputs = |interp: &mut Interpreter<'_>| -> Result<(), String> {
        for (k, t) in inputs.iter().enumerate() {
            interp.set_input(k, t).map_err(|e| e.to_string())?;
        }
        Ok(())
    };

    // First invoke: the outputs reported and written.
    set_inputs(&mut interp)?;
    interp.invoke().map_err(|e| e.to_string())?;
    let outputs: Vec<Tensor> = (0..interp.num_outputs())
        .map(|k| interp.output_tensor(k).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let files = write_outputs(args.output_dir.as_deref(), &outputs)?;

    // Timed invokes (inputs restored before each, outside the timing).
    let runs = args.repeat as usize;
    let (mut times, allocations) = timed_invokes(&mut interp, runs, set_inputs, |i| {
        i.invoke().map_err(|e| e.to_string())
    })?;
    let min = times.iter().copied().min().unwrap_or_default();
    let med = median(&mut times);

    // Per-op profile.
    let nodes = interp.num_nodes();
    let mut op_times: Vec<Vec<Duration>> = Vec::new();
    if args.profile || args.json {
        op_times = vec![Vec::with_capacity(runs); nodes];
        let mut one = vec![Duration::ZERO; nodes];
        for _ in 0..runs {
            set_inputs(&mut interp)?;
            one.fill(Duration::ZERO);
            interp
                .invoke_profiled(&mut one)
                .map_err(|e| e.to_string())?;
            for (i, t) in one.iter().enumerate() {
                op_times[i].push(*t);
            }
        }
    }
    let op_medians: Vec<Duration> = op_times.iter_mut().map(|v| median(v)).collect();

    let m = interp.memory().clone();
    if args.json {
        let outs = outputs_json(&outputs, &files, |k| {
            interp.output_desc(k).ok().map(|d| d.name.to_string())
        });
        let ops: Vec<_> = (0..nodes)
            .map(|i| {
                serde_json::json!({
                    "index": i,
                    "op": interp.node_op(i),
                    "median_us": us(op_medians[i]),
                    "prepare_time": interp.node_is_prepare_time(i),
                })
            })
            .collect();
        let v = serde_json::json!({
            "model": args.model.display().to_string(),
            "kernels": args.kernels.name(),
            "threads": args.threads,
            "inputs": if args.inputs.is_empty() { "seeded" } else { "files" },
            "outputs": outs,
            "arena": {
                "total_bytes": m.total_bytes,
                "head_bytes": m.head_bytes,
                "tail_bytes": m.tail_bytes,
                "scratch_bytes": m.scratch_bytes,
                "persistent_bytes": m.persistent_bytes,
                "op_data_bytes": m.op_data_bytes,
                "packed_weights_bytes": m.packed_weights_bytes,
                "heap_bytes": m.heap_bytes,
            },
            "latency": {"median_us": us(med), "min_us": us(min), "runs": runs},
            "invoke_heap_allocations": allocations,
            "ops": ops,
        });
        println!("{v}");
        return Ok(());
    }

    println!("model: {}", args.model.display());
    println!("kernels: {}, threads: {}", args.kernels, args.threads);
    print_outputs(args.inputs.is_empty(), &outputs, &files, |k| {
        interp.output_desc(k).ok().map(|d| d.name.to_string())
    });
    print!("{}", interp.memory_report());
    println!(
        "latency over {runs} invoke(s): median {:.1} µs, min {:.1} µs",
        us(med),
        us(min)
    );
    println!("heap allocations during the timed invokes (whole process): {allocations}");
    if args.profile {
        println!(
            "{:>5}  {:<28} {:>12} {:>7}",
            "node", "op", "median µs", "share"
        );
        let total: f64 = op_medians.iter().map(|d| us(*d)).sum::<f64>().max(1e-9);
        for (i, d) in op_medians.iter().enumerate() {
            let op = interp.node_op(i).unwrap_or("?");
            let note = if interp.node_is_prepare_time(i) {
                "  (ran at prepare)"
            } else {
                ""
            };
            println!(
                "{i:>5}  {op:<28} {:>12.1} {:>6.1}%{note}",
                us(*d),
                100.0 * us(*d) / total
            );
        }
    }
    Ok(())
}
