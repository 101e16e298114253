//! `tensor-alloc run MODEL.tflite`: build the interpreter, feed inputs, invoke, write outputs,
//! and report memory, latency, heap allocations during invoke and (with `--profile`) per-op
//! time.

use clap::Args;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tensor_alloc::alloc::registry;
use tensor_alloc::interpreter::{Interpreter, InterpreterBuilder, InterpreterError, KernelSet};
use tensor_alloc::interpreter::{Isa, IsaSelection, NodeProfile, RoundCounts};
use tensor_alloc::tensor::{DType, NpyFileReader, Tensor, TensorError};
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
    /// what they precompute from constants (packed weight copies, lookup tables, folded
    /// biases) while it fits (default: nothing precomputed; with
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
    /// Instruction-set path of the optimized kernels: `scalar`, `avx2`, `avx512` or
    /// `avx512vnni`, capped by what the CPU has (default: `TENSOR_ALLOC_ISA`, else the CPU's
    /// best). The path that ran is printed.
    #[arg(long, value_name = "PATH", value_parser = parse_isa, conflicts_with = "devices")]
    pub isa: Option<Isa>,
    /// Partitioning policy with `--devices`: `min-copy` or `tengine`.
    #[arg(long, default_value = "min-copy", requires = "devices")]
    pub policy: String,
}

fn parse_isa(s: &str) -> Result<Isa, String> {
    Isa::parse(s).map_err(|_| {
        format!("unknown kernel path `{s}`; expected one of scalar, avx2, avx512, avx512vnni")
    })
}

pub(crate) fn parse_kernel_set(s: &str) -> Result<KernelSet, String> {
    KernelSet::from_name(s)
        .ok_or_else(|| format!("unknown kernel set `{s}`; expected `optimized` or `reference`"))
}

/// `builder` with `--arena-budget` and `--isa`, if given.
fn with_budget<'m, 'a>(
    builder: InterpreterBuilder<'m, 'a>,
    budget: Option<usize>,
    isa: Option<Isa>,
) -> InterpreterBuilder<'m, 'a> {
    let builder = match isa {
        Some(i) => builder.isa(i),
        None => builder,
    };
    match budget {
        Some(n) => builder.arena_budget(n),
        None => builder,
    }
}

/// Most bytes `--arena-bytes` may ask for.
const MAX_ARENA: usize = 1 << 40;

/// Fills `bytes` (native-order elements of `dtype`) with the seeded deterministic input of
/// graph input `seed`.
pub(crate) fn fill_seeded(dtype: DType, bytes: &mut [u8], seed: u64) {
    let mut rng = Rng::new(seed);
    // A tensor of a dtype without a fixed size holds no elements to fill.
    let Some(size) = dtype.size() else {
        return;
    };
    for chunk in bytes.chunks_exact_mut(size) {
        let r = rng.next_u64();
        let unit = (r >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
        match dtype {
            DType::F32 => chunk.copy_from_slice(&((unit * 2.0 - 1.0) as f32).to_le_bytes()),
            DType::I8 | DType::U8 => chunk[0] = r as u8,
            DType::I16 => {
                chunk.copy_from_slice(&((rng.range(0, 512) as i64 - 256) as i16).to_le_bytes())
            }
            DType::Bool => chunk[0] = (r & 1) as u8,
            _ => {
                let v = (r % 8).to_le_bytes();
                let n = size.min(8);
                chunk[..n].copy_from_slice(&v[..n]);
            }
        }
    }
}

fn seeded_input(dtype: DType, dims: &[usize], seed: u64) -> Result<Tensor, String> {
    let mut t = Tensor::zeros(dtype, dims).map_err(|e| e.to_string())?;
    fill_seeded(dtype, t.as_mut_bytes().map_err(|e| e.to_string())?, seed);
    Ok(t)
}

/// The error of reading `--input` file `path`: one line naming the file once.
fn npy_error(path: &std::path::Path, e: TensorError) -> String {
    match e {
        // Names the file already.
        TensorError::Npy { .. } => e.to_string(),
        other => format!("npy {}: {other}", path.display()),
    }
}

/// An `--input` file whose dtype is not the graph input's: one line naming the file.
fn dtype_mismatch(
    path: &std::path::Path,
    k: usize,
    name: &str,
    got: (DType, &[usize]),
    want: (DType, &[usize]),
) -> String {
    format!(
        "--input {}: holds {} {:?}, but input {k} `{}` of the model is {} {:?}",
        path.display(),
        got.0,
        got.1,
        crate::inspect::printable(name),
        want.0,
        want.1
    )
}

/// Peak resident memory of this process so far (`getrusage`'s `ru_maxrss`), in bytes.
pub(crate) fn process_peak_rss_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `usage` is a valid, writable `rusage`; getrusage fills it or fails.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
        if rc != 0 {
            return None;
        }
        // SAFETY: getrusage returned 0, so it initialised the struct (it was zeroed anyway).
        let usage = unsafe { usage.assume_init() };
        // Linux reports kibibytes.
        u64::try_from(usage.ru_maxrss).ok().map(|kib| kib * 1024)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
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

/// The inputs: `.npy` files in graph-input order, else a seeded input of each input's dtype and
/// shape (`desc(k)`: dtype, dims, name). A file whose dtype is not the input's is an error
/// naming the file (its shape may differ: the caller resizes).
pub(crate) fn read_inputs(
    files: &[PathBuf],
    n_in: usize,
    desc: impl Fn(usize) -> Result<(DType, Vec<usize>, String), String>,
) -> Result<Vec<Tensor>, String> {
    check_input_count(files, n_in)?;
    (0..n_in)
        .map(|k| {
            let (dtype, dims, name) = desc(k)?;
            match files.get(k) {
                Some(p) => {
                    let t = Tensor::read_npy(p).map_err(|e| npy_error(p, e))?;
                    if t.dtype() != dtype {
                        return Err(dtype_mismatch(
                            p,
                            k,
                            &name,
                            (t.dtype(), t.dims()),
                            (dtype, &dims),
                        ));
                    }
                    Ok(t)
                }
                None => seeded_input(dtype, &dims, k as u64),
            }
        })
        .collect()
}

fn check_input_count(files: &[PathBuf], n_in: usize) -> Result<(), String> {
    if !files.is_empty() && files.len() != n_in {
        return Err(format!(
            "the model has {n_in} input(s), {} --input file(s) given",
            files.len()
        ));
    }
    Ok(())
}

/// `run`'s inputs without a copy: each `--input` file's header is checked against the model
/// once (dtype; a different shape resizes the input), and before every invoke the file's data
/// is decoded straight into the interpreter's input tensor (seeded inputs are generated there
/// the same way). The process never holds a second copy of an input.
struct DirectInputs {
    files: Vec<PathBuf>,
}

impl DirectInputs {
    /// Checks the files against `interp`'s inputs and resizes inputs whose file has another
    /// shape.
    fn prepare(files: &[PathBuf], interp: &mut Interpreter<'_>) -> Result<Self, String> {
        let n_in = interp.num_inputs();
        check_input_count(files, n_in)?;
        for (k, p) in files.iter().enumerate() {
            let reader = NpyFileReader::open(p).map_err(|e| npy_error(p, e))?;
            let d = interp.input_desc(k).map_err(|e| e.to_string())?;
            if reader.dtype() != d.dtype {
                return Err(dtype_mismatch(
                    p,
                    k,
                    d.name,
                    (reader.dtype(), reader.dims()),
                    (d.dtype, d.dims),
                ));
            }
            // A file of another shape (another batch) resizes that input; resizing plans the
            // interpreter again, so inputs are written only after every resize.
            if reader.dims() != d.dims {
                let dims = reader.dims().to_vec();
                interp
                    .resize_input(k, &dims)
                    .map_err(|e| format!("--input {}: resizing input {k}: {e}", p.display()))?;
            }
        }
        Ok(Self {
            files: files.to_vec(),
        })
    }

    /// Writes every input into the interpreter.
    fn fill(&self, interp: &mut Interpreter<'_>) -> Result<(), String> {
        for k in 0..interp.num_inputs() {
            let d = interp.input_desc(k).map_err(|e| e.to_string())?;
            let (dtype, dims, name) = (d.dtype, d.dims.to_vec(), d.name.to_string());
            match self.files.get(k) {
                Some(p) => {
                    let reader = NpyFileReader::open(p).map_err(|e| npy_error(p, e))?;
                    if reader.dtype() != dtype || reader.dims() != dims {
                        // The file changed since it was checked.
                        return Err(dtype_mismatch(
                            p,
                            k,
                            &name,
                            (reader.dtype(), reader.dims()),
                            (dtype, &dims),
                        ));
                    }
                    let dst = interp.input_bytes_mut(k).map_err(|e| e.to_string())?;
                    reader.read_into(dst).map_err(|e| npy_error(p, e))?;
                }
                None => {
                    let dst = interp.input_bytes_mut(k).map_err(|e| e.to_string())?;
                    fill_seeded(dtype, dst, k as u64);
                }
            }
        }
        Ok(())
    }
}

/// Makes sure `--output-dir` is a directory (created when absent), before any work is done.
pub(crate) fn prepare_output_dir(dir: Option<&std::path::Path>) -> Result<(), String> {
    let Some(dir) = dir else { return Ok(()) };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!("--output-dir {}: not a directory", dir.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(dir)
            .map_err(|e| format!("--output-dir {}: cannot create it: {e}", dir.display())),
        Err(e) => Err(format!("--output-dir {}: {e}", dir.display())),
    }
}

/// Writes `output_K.npy` into `dir` (when given); returns each file's path. Each file is written
/// to a temporary file in `dir` and renamed into place ([`Tensor::write_npy`]): a symbolic link
/// planted at `dir/output_K.npy` is replaced, not followed.
pub(crate) fn write_outputs(
    dir: Option<&std::path::Path>,
    outputs: &[Tensor],
) -> Result<Vec<Option<String>>, String> {
    let mut files = vec![None; outputs.len()];
    if let Some(dir) = dir {
        prepare_output_dir(Some(dir))?;
        for (k, t) in outputs.iter().enumerate() {
            let p = dir.join(format!("output_{k}.npy"));
            t.write_npy(&p).map_err(|e| e.to_string())?;
            files[k] = Some(p.display().to_string());
        }
    }
    Ok(files)
}

/// Most output elements listed in `run --json` (per output; the rest are left out and the
/// output says `"truncated": true`).
pub(crate) const MAX_JSON_VALUES: usize = 4096;

/// The first `limit` elements of `t` as JSON numbers (booleans for bool; a non-finite float
/// is `null`, which JSON cannot spell otherwise), and whether elements were left out.
pub(crate) fn json_values(t: &Tensor, limit: usize) -> (Vec<serde_json::Value>, bool) {
    use serde_json::Value;
    fn take<T: tensor_alloc::tensor::Element>(
        t: &Tensor,
        limit: usize,
        f: impl Fn(T) -> Value,
    ) -> Vec<Value> {
        t.as_slice::<T>()
            .map(|s| s.iter().take(limit).map(|&v| f(v)).collect())
            .unwrap_or_default()
    }
    let float = |v: f64| serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number);
    let values = match t.dtype() {
        DType::F32 => take::<f32>(t, limit, |v| float(f64::from(v))),
        DType::F64 => take::<f64>(t, limit, float),
        DType::F16 => take::<tensor_alloc::tensor::f16>(t, limit, |v| float(v.to_f64())),
        DType::BF16 => take::<tensor_alloc::tensor::bf16>(t, limit, |v| float(v.to_f64())),
        DType::I8 => take::<i8>(t, limit, Value::from),
        DType::U8 => take::<u8>(t, limit, Value::from),
        DType::I16 => take::<i16>(t, limit, Value::from),
        DType::U16 => take::<u16>(t, limit, Value::from),
        DType::I32 => take::<i32>(t, limit, Value::from),
        DType::U32 => take::<u32>(t, limit, Value::from),
        DType::I64 => take::<i64>(t, limit, Value::from),
        DType::U64 => take::<u64>(t, limit, Value::from),
        DType::Bool => t
            .as_bytes()
            .iter()
            .take(limit)
            .map(|&b| Value::Bool(b != 0))
            .collect(),
        // The interpreter runs only dtypes with an element type; others print no values.
        DType::I4 | DType::C64 | DType::C128 | DType::String | DType::Resource | DType::Variant => {
            Vec::new()
        }
    };
    (values, t.num_elements() > limit)
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
            let (values, truncated) = json_values(t, MAX_JSON_VALUES);
            serde_json::json!({
                "name": name(k),
                "dtype": t.dtype().name(),
                "shape": t.dims(),
                "file": files[k],
                "values": values,
                "truncated": truncated,
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
    // A bad TENSOR_ALLOC_ISA is one line naming the variable, before any work.
    IsaSelection::resolve(args.isa).map_err(|e| e.to_string())?;
    prepare_output_dir(args.output_dir.as_deref())?;
    if let Some(devices) = &args.devices {
        return crate::partition::run_split(args, devices);
    }
    let model = std::sync::Arc::new(crate::load_model(&args.model)?);
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
                InterpreterBuilder::shared(&model)
                    .kernel_set(args.kernels)
                    .threads(args.threads as usize),
                args.arena_budget,
                args.isa,
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
                InterpreterBuilder::shared(&model)
                    .kernel_set(args.kernels)
                    .threads(args.threads as usize),
                args.arena_budget,
                args.isa,
            )
            .arena_allocator(a)
            .build()
        }
        (None, None) => with_budget(
            InterpreterBuilder::shared(&model)
                .kernel_set(args.kernels)
                .threads(args.threads as usize),
            args.arena_budget,
            args.isa,
        )
        .build(),
    }
    .map_err(|e: InterpreterError| format!("{}: {e}", args.model.display()))?;

    // Inputs: checked (and inputs resized) once, then decoded into the input tensors before
    // every invoke.
    let inputs = DirectInputs::prepare(&args.inputs, &mut interp)?;
    let set_inputs = |interp: &mut Interpreter<'_>| inputs.fill(interp);

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
    // Per node, the kernel-thread rounds of all profiled invokes together.
    let mut op_rounds = vec![RoundCounts::default(); nodes];
    if args.profile || args.json {
        op_times = vec![Vec::with_capacity(runs); nodes];
        let mut one = vec![NodeProfile::default(); nodes];
        for _ in 0..runs {
            set_inputs(&mut interp)?;
            one.fill(NodeProfile::default());
            interp
                .invoke_profiled(&mut one)
                .map_err(|e| e.to_string())?;
            for (i, n) in one.iter().enumerate() {
                op_times[i].push(n.time);
                op_rounds[i] += n.rounds;
            }
        }
    }
    let op_medians: Vec<Duration> = op_times.iter_mut().map(|v| median(v)).collect();
    let per_invoke = |x: u64| x as f64 / runs.max(1) as f64;

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
                    "thread_tasks": per_invoke(op_rounds[i].tasks),
                    "worker_tasks": per_invoke(op_rounds[i].by_workers),
                })
            })
            .collect();
        let v = serde_json::json!({
            "model": args.model.display().to_string(),
            "kernels": args.kernels.name(),
            "threads": args.threads,
            "isa": {
                "path": interp.isa().isa.name(),
                "requested": interp.isa().requested.map(|i| i.name()),
                "detected": interp.isa().detected.name(),
            },
            "inputs": if args.inputs.is_empty() { "seeded" } else { "files" },
            "outputs": outs,
            "arena": {
                "total_bytes": m.total_bytes,
                "head_bytes": m.head_bytes,
                "tail_bytes": m.tail_bytes,
                "scratch_bytes": m.scratch_bytes,
                "persistent_bytes": m.persistent_bytes,
                "repacked_bytes": m.repacked_bytes,
                "op_data_bytes": m.op_data_bytes,
                "precomputed_bytes": m.precomputed_bytes,
                "heap_bytes": m.heap_bytes,
                "heap_parts": interp.heap_parts_json(),
                "subgraphs": m.subgraphs,
            },
            "latency": {"median_us": us(med), "min_us": us(min), "runs": runs},
            "invoke_heap_allocations": allocations,
            "process_peak_rss_bytes": process_peak_rss_bytes(),
            "ops": ops,
        });
        println!("{v}");
        return Ok(());
    }

    println!("model: {}", args.model.display());
    println!(
        "kernels: {}, threads: {}, isa: {}",
        args.kernels,
        args.threads,
        interp.isa()
    );
    print_outputs(args.inputs.is_empty(), &outputs, &files, |k| {
        interp.output_desc(k).ok().map(|d| d.name.to_string())
    });
    print!("{}", interp.memory_report());
    if let Some(rss) = process_peak_rss_bytes() {
        println!(
            "process peak resident memory: {rss} bytes (arena {} bytes, the model file, the heap and the binary included)",
            m.total_bytes
        );
    }
    println!(
        "latency over {runs} invoke(s): median {:.1} µs, min {:.1} µs",
        us(med),
        us(min)
    );
    println!("heap allocations during the timed invokes (whole process): {allocations}");
    if args.profile {
        // With kernel threads: the tasks each node split into per invoke and the share the
        // workers ran ("-": the node ran on the invoking thread alone).
        let split = args.threads > 1;
        let columns = if split { "  tasks  workers" } else { "" };
        println!(
            "{:>5}  {:<28} {:>12} {:>7}{columns}",
            "node", "op", "median µs", "share"
        );
        let total: f64 = op_medians.iter().map(|d| us(*d)).sum::<f64>().max(1e-9);
        let mut alone = 0.0;
        for (i, d) in op_medians.iter().enumerate() {
            let op = interp.node_op(i).unwrap_or("?".into());
            let note = if interp.node_is_prepare_time(i) {
                "  (not run at invoke: constant, or folded into its reader)"
            } else {
                ""
            };
            let r = op_rounds[i];
            let tasks = if !split {
                String::new()
            } else if r.tasks == 0 {
                alone += us(*d);
                format!("{:>7} {:>8}", "-", "-")
            } else {
                format!(
                    "{:>7.1} {:>7.0}%",
                    per_invoke(r.tasks),
                    100.0 * r.by_workers as f64 / r.tasks as f64
                )
            };
            println!(
                "{i:>5}  {op:<28} {:>12.1} {:>6.1}%{tasks}{note}",
                us(*d),
                100.0 * us(*d) / total
            );
        }
        if split {
            println!(
                "not split over the threads: {:.1} µs of {:.1} µs ({:.1}%)",
                alone,
                total,
                100.0 * alone / total
            );
        }
    }
    Ok(())
}
