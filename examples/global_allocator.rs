//! Installs `tensor_alloc::GlobalAllocator` as the program's `#[global_allocator]`, churns some
//! large buffers (served by the large-buffer heap in the default hybrid mode), prints the
//! statistics, and counts what a scope allocates.
//!
//! ```sh
//! cargo run --release --example global_allocator
//! TENSOR_ALLOC_GLOBAL=system cargo run --release --example global_allocator
//! ```

use tensor_alloc::global::{count_allocations, report_config_errors};
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn main() {
    for e in report_config_errors() {
        eprintln!("warning: {e}");
    }
    let s = GLOBAL.stats();
    println!(
        "mode {:?}, threshold {} KiB, limit {}",
        s.mode,
        s.threshold >> 10,
        s.limit
            .map_or_else(|| "none".to_string(), |l| format!("{:.1} MiB", mib(l)))
    );

    // 200 tensor-sized buffers (1–32 MiB), at most 9 alive at a time.
    let mut live: Vec<Vec<u8>> = Vec::new();
    let t = std::time::Instant::now();
    for i in 0..200usize {
        let n = (1 + (i * 7919) % 32) << 20;
        // Filled (every page written), like a tensor being computed.
        let b = vec![1u8; n];
        live.push(std::hint::black_box(b));
        if live.len() > 8 {
            live.remove(i % 8);
        }
    }
    let elapsed = t.elapsed();
    let s = GLOBAL.stats();
    println!("churned 200 buffers of 1-32 MiB in {elapsed:.2?}");
    println!(
        "in use {:.1} MiB (peak {:.1} MiB): system heap {:.1} MiB, large heap {:.1} MiB (peak {:.1} MiB)",
        mib(s.bytes_in_use),
        mib(s.peak_bytes_in_use),
        mib(s.system.bytes_in_use),
        mib(s.large.bytes_in_use),
        mib(s.large.peak_bytes_in_use)
    );
    let h = s.large_heap;
    println!(
        "large heap: {} blocks handed out, {} regions, {:.0} MiB reserved, {:.1} MiB of resident pages moved into new blocks, {:.1} MiB released, {:.1} MiB free and resident",
        h.allocs,
        h.regions,
        mib(h.reserved_bytes),
        mib(h.moved_bytes),
        mib(h.released_bytes),
        mib(h.free_resident_bytes)
    );
    drop(live);

    match count_allocations(|| {
        // black_box: otherwise the optimizer may remove allocations nobody reads.
        let v: Vec<u32> = std::hint::black_box((0..1000).collect());
        let big = std::hint::black_box(vec![0u8; 4 << 20]);
        v.len() + big.len()
    }) {
        Ok((n, c)) => println!(
            "counting scope: {} allocations, {} frees, {} bytes (result {n})",
            c.allocs, c.deallocs, c.bytes_allocated
        ),
        Err(e) => eprintln!("{e}"),
    }
}
