//! The BFC part of the no-argument demo: a short run showing stats, fragmentation and a trim.

use std::ptr::NonNull;
use tensor_alloc::alloc::{Allocator, BfcAllocator, BfcOptions, Layout, TensorAllocator};

fn mib(b: u64) -> String {
    format!("{:.2} MiB", b as f64 / (1 << 20) as f64)
}

fn line(a: &BfcAllocator, what: &str) {
    let s = a.stats();
    println!(
        "   {what:<34} in use {:>10}, reserved {:>10} in {} region(s), largest free {:>10}, fragmentation {:.2}",
        mib(s.bytes_in_use),
        mib(s.bytes_reserved),
        s.num_regions.unwrap_or(0),
        mib(s.largest_free_chunk.unwrap_or(0)),
        s.fragmentation()
    );
}

/// Prints the BFC section of the demo.
pub fn section() -> Result<(), String> {
    println!("\nBFC allocator (256 B granule, 21 bins, 2 MiB first region, doubling growth):");
    let a = BfcAllocator::new(BfcOptions::default());
    // Activations of a small CNN: alternating large and small tensors.
    let sizes: [usize; 8] = [
        802_816, 3_136, 401_408, 1_568, 1_605_632, 6_272, 200_704, 784,
    ];
    let mut live: Vec<(NonNull<u8>, Layout)> = vec![];
    for &s in &sizes {
        let l = Layout::from_size_align(s, 64).map_err(|e| e.to_string())?;
        let p = a.try_allocate(l).map_err(|e| e.to_string())?;
        live.push((p.cast(), l));
    }
    line(&a, "8 activations allocated:");
    let (p0, _) = live[0];
    println!(
        "   first tensor: requested {} B, chunk {} B, id {}",
        a.requested_size(p0).unwrap_or(0),
        a.allocated_size(p0).unwrap_or(0),
        a.allocation_id(p0).unwrap_or(0)
    );
    // Free the large ones: holes between live small tensors.
    let mut kept = vec![];
    for (i, (p, l)) in live.into_iter().enumerate() {
        if i % 2 == 0 {
            // SAFETY: allocated above from `a` with `l`, freed once.
            unsafe { a.deallocate(p, l) };
        } else {
            kept.push((p, l));
        }
    }
    line(&a, "large ones freed (holes):");
    let d = a.memory_dump();
    let busy: Vec<String> = d
        .bins
        .iter()
        .filter(|b| b.free_chunks > 0)
        .map(|b| format!("bin {} ({}×, {} B)", b.index, b.free_chunks, b.free_bytes))
        .collect();
    println!("   free bins: {}", busy.join(", "));
    for (p, l) in kept {
        // SAFETY: allocated above from `a` with `l`, freed once.
        unsafe { a.deallocate(p, l) };
    }
    line(&a, "all freed (coalesced):");
    a.check_invariants()
        .map_err(|e| format!("BFC invariant check failed: {e}"))?;
    let back = a.trim();
    line(&a, &format!("trim() returned {}:", mib(back as u64)));
    Ok(())
}
