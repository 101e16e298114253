//! The no-argument demonstration: a few seconds, no files.

use crate::bench;
use tensor_alloc::alloc::{AlignedCpuAllocator, Layout, TensorAllocator, TrackingAllocator};
use tensor_alloc::workload::{self, Workload, WorkloadConfig};

pub fn run() -> Result<(), String> {
    println!("tensor-alloc demo — allocators for tensors (run `tensor-alloc --help` for every command)\n");

    // 1. A tracking allocator over the aligned CPU allocator: ids, sizes, a leak report.
    let tracking = TrackingAllocator::new(AlignedCpuAllocator::new());
    let shapes: [(&str, usize, usize); 3] = [
        ("conv1/output [1,112,112,32] f32", 112 * 112 * 32 * 4, 64),
        ("dense/weights [1024,1000] f32", 1024 * 1000 * 4, 4096),
        ("logits [1,1000] f32", 1000 * 4, 64),
    ];
    let mut blocks = vec![];
    println!("1. three tensor buffers through {}:", tracking.name());
    for (what, size, align) in shapes {
        let l = Layout::from_size_align(size, align).map_err(|e| e.to_string())?;
        let p = tracking.try_allocate(l).map_err(|e| e.to_string())?;
        let ptr = p.cast::<u8>();
        println!(
            "   {what:<34} id {} requested {:>8} B, {}-byte aligned: {}",
            tracking.allocation_id(ptr).unwrap_or(0),
            tracking.requested_size(ptr).unwrap_or(0),
            align,
            (ptr.as_ptr() as usize).is_multiple_of(align)
        );
        blocks.push((ptr, l));
    }
    let (ptr, l) = blocks.remove(0);
    // SAFETY: allocated above from `tracking` with `l`, freed once.
    unsafe { allocator_api2::alloc::Allocator::deallocate(&tracking, ptr, l) };
    let s = tracking.stats();
    println!(
        "   after freeing the first: {} B in use, peak {} B, {} allocs / {} frees",
        s.bytes_in_use, s.peak_bytes_in_use, s.num_allocs, s.num_frees
    );
    println!("   live-allocation report:");
    for line in tracking.leak_report().lines() {
        println!("     {line}");
    }
    for (ptr, l) in blocks {
        // SAFETY: allocated above from `tracking` with `l`, freed once.
        unsafe { allocator_api2::alloc::Allocator::deallocate(&tracking, ptr, l) };
    }

    // 2. A quick replay of a 60-op inference step through each allocator.
    println!("\n2. one 60-op inference step replayed (median of 5 rounds of 20 steps):");
    let cfg = WorkloadConfig {
        seed: 42,
        rounds: 5,
        scale: 1.0,
    };
    let mut base = f64::NAN;
    for (name, _) in bench::KNOWN {
        let a = bench::allocator_by_name(name)?;
        let r = workload::run(&*a, Workload::Step, &cfg).map_err(|e| e.to_string())?;
        if *name == "system" {
            base = r.median_ns_per_op;
        }
        println!(
            "   {:<10} {:>9.2} µs/step  ({:.2}x system)",
            name,
            r.median_ns_per_op / 1e3,
            r.median_ns_per_op / base
        );
    }
    crate::demo_bfc::section()?;
    crate::demo_registry::section()?;
    crate::demo_planner::section()?;
    println!("\nHow big must the tensor arena be? A model built with the crate's .tflite writer:");
    crate::demo_model::section()?;
    println!("\nRunning a model: a small int8 classifier built in code, in a fixed arena:");
    if let Err(e) = crate::demo_interpreter::section() {
        return Err(format!("interpreter demo: {e}"));
    }
    println!("\nMore: `tensor-alloc bench --allocators system,cpu,tracking,pool,bfc`, `tensor-alloc plan MODEL.tflite`, `tensor-alloc run MODEL.tflite`, `tensor-alloc --help`");
    Ok(())
}
