//! Two tensors on two different allocators, and both allocators' statistics.
//!
//! Run: `cargo run --example per_tensor_allocators`
//!
//! The weights live on a BFC allocator (best-fit with coalescing over `mmap` regions); the
//! activations live on a tracking allocator over the aligned CPU allocator, whose live-allocation
//! report shows each tensor with its size. A slice of the activations keeps
//! its root allocation alive after the tensor itself is dropped.

use std::sync::Arc;
use tensor_alloc::alloc::{
    AlignedCpuAllocator, AllocatorRef, BfcAllocator, BfcOptions, TensorAllocator, TrackingAllocator,
};
use tensor_alloc::tensor::{DType, Quantization, Tensor, TensorError};

fn print_stats(label: &str, a: &dyn TensorAllocator) {
    let s = a.stats();
    println!(
        "{label:<10} {:<14} allocs {:>2}  frees {:>2}  in use {:>7} B  peak {:>7} B  reserved {:>8} B",
        a.name(),
        s.num_allocs,
        s.num_frees,
        s.bytes_in_use,
        s.peak_bytes_in_use,
        s.bytes_reserved
    );
}

fn main() -> Result<(), TensorError> {
    let bfc: AllocatorRef = Arc::new(BfcAllocator::new(BfcOptions::default()));
    let tracking = Arc::new(TrackingAllocator::new(AlignedCpuAllocator::new()));
    let tracking_ref: AllocatorRef = tracking.clone();

    // Per-channel quantized int8 weights on the BFC allocator.
    let weights: Vec<i8> = (0..8 * 3 * 3 * 16).map(|i| (i % 255 - 127) as i8).collect();
    let weights = Tensor::from_slice_in(&bfc, [8, 3, 3, 16], &weights)?.with_quantization(
        Quantization::per_channel((1..=8).map(|c| 0.01 * c as f32).collect(), vec![0], 0)?,
    )?;

    // float32 activations on the tracking allocator.
    let mut activations = Tensor::new_in(&tracking_ref, DType::F32, [4, 56, 56, 8])?;
    for (i, v) in activations.as_mut_slice::<f32>()?.iter_mut().enumerate() {
        *v = (i % 97) as f32 * 0.5;
    }

    println!(
        "weights:     {} {} on {} ({} bytes)",
        weights.dtype(),
        weights.shape(),
        weights.allocator().map(|a| a.name()).unwrap_or("?"),
        weights.byte_size()
    );
    println!(
        "activations: {} {} on {} ({} bytes)",
        activations.dtype(),
        activations.shape(),
        activations.allocator().map(|a| a.name()).unwrap_or("?"),
        activations.byte_size()
    );
    print_stats("both live", &*bfc);
    print_stats("both live", &*tracking);
    print!("{}", tracking.leak_report());

    let first_image = activations.slice(0, 1)?;
    drop(activations);
    println!(
        "after dropping the activations, their slice {} keeps the root alive:",
        first_image.shape()
    );
    print!("{}", tracking.leak_report());

    drop(first_image);
    drop(weights);
    print_stats("all freed", &*bfc);
    print_stats("all freed", &*tracking);
    Ok(())
}
