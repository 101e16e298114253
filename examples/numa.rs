//! The machine's NUMA topology, and a buffer bound to each node: allocated from that node's
//! sub-allocator (`mmap` + `mbind`), touched, and checked with the kernel (`get_mempolicy`,
//! `move_pages`).
//!
//! Run: `cargo run --example numa`
//! Watch the system calls: `strace -f -e trace=mbind,get_mempolicy,move_pages cargo run --example numa`
//!
//! Where the sandbox refuses memory policies the buffers are plain `mmap` and the placement
//! checks say so instead of failing.

use tensor_alloc::alloc::numa::{self, format_list, TopologySource};
use tensor_alloc::alloc::{registry, Layout, NumaSubAllocator, SubAllocator, Topology};

const BUFFER: usize = 16 << 20;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let topology = Topology::system();
    match topology.source() {
        TopologySource::Sysfs(root) => println!("topology from {}", root.display()),
        other => println!("topology: {other:?}"),
    }
    for n in topology.nodes() {
        println!(
            "  node {}: cpus {:<12} memory {:>6} MiB",
            n.id,
            if n.cpus.is_empty() {
                "-".to_string()
            } else {
                format_list(&n.cpus)
            },
            n.mem_total_bytes >> 20
        );
    }
    println!("this thread runs on node {}", numa::current_node()?);

    for n in topology.nodes() {
        let sub = NumaSubAllocator::new(n.id)?;
        let (p, len) = sub.alloc(4096, BUFFER)?;
        // SAFETY: the region is live for `len` bytes; it is touched only after `alloc` bound it.
        unsafe { p.as_ptr().write_bytes(0xa5, len) };
        let report = match (
            numa::node_of(p.as_ptr()),
            numa::nodes_of_pages(p.as_ptr(), len),
        ) {
            (Ok(first), Ok(pages)) => {
                let on_node = pages.iter().filter(|&&x| x == Some(n.id)).count();
                let policy = numa::policy_of(p.as_ptr())?;
                format!(
                    "first page on node {first}; {on_node}/{} pages on node {}; policy {} {}",
                    pages.len(),
                    n.id,
                    policy.mode_name(),
                    format_list(&policy.nodes)
                )
            }
            (Err(e), _) | (_, Err(e)) => format!("placement unknown: {e}"),
        };
        println!(
            "buffer for node {} at {p:p} ({} MiB): {report}",
            n.id,
            len >> 20
        );
        // SAFETY: the region came from `sub.alloc` with this size and is freed once.
        unsafe { sub.free(p, len) };
    }
    match numa::binding_status() {
        Some(true) => println!("mbind: working"),
        Some(false) => println!("mbind: refused by the kernel or sandbox; buffers were plain mmap"),
        None => println!("mbind: not tried"),
    }

    // The process's CPU allocator for node 0: per-node (bound) under TENSOR_ALLOC_NUMA=0 or on a
    // multi-node machine, the shared one otherwise.
    let node0 = registry::cpu_allocator(Some(0))?;
    let layout = Layout::from_size_align(1 << 20, 4096)?;
    let p = node0.allocate(layout)?.cast::<u8>();
    // SAFETY: `p` is a live block of `layout.size()` bytes, freed once with `layout`.
    unsafe { p.as_ptr().write_bytes(1, layout.size()) };
    let placed = numa::node_of(p.as_ptr()).map_or_else(|e| e.to_string(), |n| format!("node {n}"));
    // SAFETY: as above.
    unsafe { node0.deallocate(p, layout) };
    let plan = registry::global().numa_plan();
    println!(
        "registry: cpu_allocator(Some(0)) = '{}', its 1 MiB buffer on {placed}; plan {plan:?}",
        node0.name()
    );
    Ok(())
}
