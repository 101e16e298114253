//! The `tensor-alloc` command-line tool: a thin layer over the library.

mod allocators;
mod bench;
mod bench_global;
mod demo;
mod demo_bfc;
mod demo_interpreter;
mod demo_model;
mod demo_planner;
mod demo_registry;
mod frontier;
mod inspect;
mod partition;
mod plan;
mod plan_model;
mod run;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "tensor-alloc",
    version,
    about = "Tensor allocators, memory planning and arenas"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Replay tensor-like workloads through chosen allocators and compare with the system allocator.
    Bench(bench::BenchArgs),
    /// List the registered allocator factories, their priorities and the current selection.
    Allocators(allocators::AllocatorsArgs),
    /// A short self-contained demonstration (the default when no command is given).
    Demo,
    /// Show what a .tflite model contains: operators, tensors, inputs/outputs, quantization.
    Inspect(inspect::InspectArgs),
    /// Plan buffer lifetimes with every planner (linear, tflm, tflite, best) and compare.
    Plan(plan::PlanArgs),
    /// Split a .tflite model across devices: subgraphs, copies between memory spaces, and why
    /// each op went where it went.
    Partition(partition::PartitionArgs),
    /// Run a .tflite model with the bundled interpreter: outputs, memory, latency, heap
    /// allocations during invoke, per-op profile.
    Run(run::RunArgs),
}

/// The CLI counts heap allocations (`run` reports those made during invoke) and, in the default
/// hybrid mode, reuses large buffers (`bench --global-modes` compares the modes).
#[global_allocator]
static GLOBAL: tensor_alloc::GlobalAllocator = tensor_alloc::GlobalAllocator::new();

fn main() -> ExitCode {
    restore_sigpipe();
    if let Err(e) = init_tracing() {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let cli = Cli::parse();
    // Every subcommand validates the whole TENSOR_ALLOC_* / TF_* environment with one rule
    // (the global allocator's variables included, with the parsers it uses): the first bad
    // variable is one error line, before any work and before any warning.
    if let Err(e) = tensor_alloc::alloc::env::process_env() {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    // The global allocator parsed the same variables at the first allocation; after the check
    // above this reports nothing, but a program that changed its environment would be told.
    tensor_alloc::global::report_config_errors();
    let result = match cli.command {
        None | Some(Command::Demo) => demo::run(),
        Some(Command::Bench(args)) => bench::run(&args),
        Some(Command::Inspect(args)) => inspect::run(&args),
        Some(Command::Plan(args)) => plan::run(&args),
        Some(Command::Allocators(args)) => allocators::run(&args),
        Some(Command::Run(args)) => run::run(&args),
        Some(Command::Partition(args)) => partition::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Loads a model for a subcommand: one line naming the file once (an I/O error names it
/// already; the others are prefixed with it).
pub(crate) fn load_model(path: &std::path::Path) -> Result<tensor_alloc::model::Model, String> {
    use tensor_alloc::model::{Model, ModelError};
    Model::load(path).map_err(|e| match e {
        ModelError::Io { .. } => e.to_string(),
        _ => format!("{}: {e}", path.display()),
    })
}

/// Rust ignores SIGPIPE, so `tensor-alloc inspect m.tflite | head` would panic in `println!` when
/// the reader goes away; restore the default action (exit quietly), as Unix filters do.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in `main`, before any other thread exists; setting the
    // disposition of SIGPIPE to SIG_DFL installs no handler code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Logging to stderr at the level of `TENSOR_ALLOC_LOG` (default `warn`); a filter that does
/// not parse is an error, not silently replaced by the default. Colour codes only when stderr
/// is a terminal.
fn init_tracing() -> Result<(), String> {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var_os(tensor_alloc::alloc::env::LOG) {
        None => EnvFilter::new("warn"),
        Some(v) => {
            let text = v.to_str().ok_or_else(|| {
                format!(
                    "environment variable {} is not valid UTF-8",
                    tensor_alloc::alloc::env::LOG
                )
            })?;
            EnvFilter::try_new(text.trim()).map_err(|e| {
                format!(
                    "invalid value {}={text:?}: expected a tracing filter such as info or tensor_alloc=debug ({e})",
                    tensor_alloc::alloc::env::LOG
                )
            })?
        }
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
    Ok(())
}
