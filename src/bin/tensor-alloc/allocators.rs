//! `tensor-alloc allocators`: the registered allocator factories, their priorities, the
//! `TENSOR_ALLOC_*` configuration in effect and the current selection.

use clap::Args;
use tensor_alloc::alloc::env::{self, KNOWN_VARIABLES};
use tensor_alloc::alloc::registry;

/// Arguments of `tensor-alloc allocators`.
#[derive(Args, Debug)]
pub struct AllocatorsArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The variables of the family that are set in the process environment (`TENSOR_ALLOC_*` and
/// the TensorFlow aliases), sorted.
fn set_variables() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, val)| {
            let k = k.to_str()?.to_string();
            let ours =
                k.starts_with(env::PREFIX) || k == env::TF_USE_BFC || k == env::TF_BFC_MEM_LIMIT_MB;
            ours.then(|| (k, val.to_string_lossy().into_owned()))
        })
        .collect();
    v.sort();
    v
}

pub fn run(args: &AllocatorsArgs) -> Result<(), String> {
    let factories = registry::global().factories();
    // A bad environment is reported as the (one-line) error of this command.
    let selection = registry::process_selection().map_err(|e| e.to_string())?;
    if args.json {
        let v = serde_json::json!({
            "factories": factories,
            "selection": selection,
            "allocator": selection.allocator_name(),
            "environment": set_variables().into_iter().collect::<std::collections::BTreeMap<_, _>>(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!("registered allocator factories (selection order: priority, then name):");
    println!(
        "  {:<10} {:>8}  {:<5} description",
        "name", "priority", "numa"
    );
    for f in &factories {
        println!(
            "  {:<10} {:>8}  {:<5} {}",
            f.name,
            f.priority,
            if f.numa { "yes" } else { "no" },
            f.description
        );
    }
    println!(
        "  {:<10} {:>8}  {:<5} wrapper: TrackingAllocator over any of them (tracking(<name>), or {}=1)",
        "tracking", "-", "-", env::TRACK
    );
    println!("\nconfiguration:");
    let set = set_variables();
    if set.is_empty() {
        println!("  no TENSOR_ALLOC_* variable set (accepted: see `tensor-alloc allocators --help` or docs/environment.md)");
    }
    for (k, v) in &set {
        println!("  {k}={v}");
    }
    if !set.is_empty() {
        println!(
            "  (known: {})",
            KNOWN_VARIABLES
                .iter()
                .map(|k| k.0)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    println!(
        "\nselected CPU allocator: {}\n  {}",
        selection.allocator_name(),
        selection
    );
    Ok(())
}
