//! The `tensor-alloc` command-line tool: a thin layer over the library.

mod allocators;
mod bench;
mod demo;
mod demo_bfc;
mod demo_registry;

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
}

fn main() -> ExitCode {
    init_tracing();
    let cli = Cli::parse();
    let result = match cli.command {
        None | Some(Command::Demo) => demo::run(),
        Some(Command::Bench(args)) => bench::run(&args),
        Some(Command::Allocators(args)) => allocators::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_env("TENSOR_ALLOC_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
