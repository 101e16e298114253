//! Integration tests of `tensor_alloc::tensor`: typed access and its errors, shared-buffer rules,
//! sub-buffers keeping roots alive, external/arena views, allocator bookkeeping (every byte comes
//! back), and `.npy` I/O including the shared reference files.
#![cfg(not(loom))]

use std::path::{Path, PathBuf};
use tensor_alloc::alloc::{
    AlignedCpuAllocator, AllocatorRef, BfcAllocator, BfcOptions, PoolAllocator, PoolOptions,
    SharedAllocator, SystemAllocator, TensorAllocator, TrackingAllocator,
};
use tensor_alloc::tensor::{
    allocator_ref, bf16, f16, DType, Quantization, Shape, Tensor, TensorBuffer, TensorError,
    DEFAULT_ALIGNMENT,
};

fn cpu() -> AllocatorRef {
    allocator_ref(AlignedCpuAllocator::new())
}

fn tracking() -> (
    std::sync::Arc<TrackingAllocator<AlignedCpuAllocator>>,
    AllocatorRef,
) {
    let t = std::sync::Arc::new(TrackingAllocator::new(AlignedCpuAllocator::new()));
    let r: AllocatorRef = t.clone();
    (t, r)
}

#[test]
fn typed_access_round_trip_and_dtype_mismatch() {
    let t = Tensor::from_vec([2, 3], vec![1i16, -2, 3, -4, 5, -6]).unwrap();
    assert_eq!(t.dtype(), DType::I16);
    assert_eq!(t.byte_size(), 12);
    assert_eq!(t.as_slice::<i16>().unwrap(), &[1, -2, 3, -4, 5, -6]);
    let e = t.as_slice::<f32>().unwrap_err();
    assert!(
        matches!(
            e,
            TensorError::DTypeMismatch {
                tensor: DType::I16,
                requested: DType::F32
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("int16") && e.to_string().contains("float32"));
    let e = Tensor::from_vec([2, 2], vec![1u8, 2, 3]).unwrap_err();
    assert!(
        matches!(
            e,
            TensorError::SizeMismatch {
                expected: 4,
                actual: 3,
                ..
            }
        ),
        "{e}"
    );
    // Half-precision storage types.
    let h = Tensor::from_vec([2], vec![f16::from_f32(1.5), f16::from_f32(-2.0)]).unwrap();
    assert_eq!(h.dtype(), DType::F16);
    assert_eq!(h.as_slice::<f16>().unwrap()[0].to_f32(), 1.5);
    let b = Tensor::from_vec([1], vec![bf16::from_f32(3.0)]).unwrap();
    assert_eq!(b.as_slice::<bf16>().unwrap()[0].to_f32(), 3.0);
    assert!(b.as_slice::<f16>().is_err());
}

#[test]
fn zeros_and_scalars() {
    let t = Tensor::zeros(DType::F64, [3, 0, 2]).unwrap();
    assert_eq!(t.num_elements(), 0);
    assert_eq!(t.as_slice::<f64>().unwrap(), &[] as &[f64]);
    let s = Tensor::new(DType::I32, Shape::scalar()).unwrap();
    assert_eq!(s.as_slice::<i32>().unwrap(), &[0]);
    assert!(matches!(s.slice(0, 0), Err(TensorError::ScalarSlice)));
    let z = Tensor::zeros(DType::F32, [4, 4]).unwrap();
    assert!(z.as_slice::<f32>().unwrap().iter().all(|&v| v == 0.0));
    assert_eq!(z.buffer().as_ptr() as usize % DEFAULT_ALIGNMENT, 0);
}

#[test]
fn overflowing_shapes_are_errors_not_wraps() {
    let e = Tensor::new(DType::F32, [usize::MAX / 2, 3]).unwrap_err();
    assert!(matches!(e, TensorError::ShapeOverflow { .. }), "{e}");
    // The element count fits but the byte size does not.
    let e = Tensor::new(DType::I64, [usize::MAX / 4]).unwrap_err();
    assert!(
        matches!(
            e,
            TensorError::ShapeOverflow {
                what: "byte size",
                dtype: Some(DType::I64),
                ..
            }
        ),
        "{e}"
    );
    let e = Tensor::new(DType::U8, [1usize; 9]).unwrap_err();
    assert!(matches!(e, TensorError::TooManyDims { .. }), "{e}");
}

#[test]
fn huge_but_valid_request_is_an_allocation_error() {
    // 2^60 bytes passes shape checks but no allocator can serve it: a value, not an abort.
    let e = Tensor::new_in(&cpu(), DType::U8, [1usize << 60]).unwrap_err();
    assert!(matches!(e, TensorError::Alloc(_)), "{e}");
    assert!(e.to_string().contains("1152921504606846976"), "{e}");
}

#[test]
fn bool_is_validated_never_transmuted() {
    let a = cpu();
    let e = Tensor::from_bytes_in(&a, DType::Bool, [3], &[0, 1, 2]).unwrap_err();
    assert!(
        matches!(e, TensorError::InvalidBool { index: 2, value: 2 }),
        "{e}"
    );
    let mut t = Tensor::from_bytes_in(&a, DType::Bool, [3], &[0, 1, 1]).unwrap();
    assert_eq!(t.as_slice::<bool>().unwrap(), &[false, true, true]);
    t.as_mut_slice::<bool>().unwrap()[0] = true;
    t.as_mut_bytes().unwrap()[1] = 7;
    let e = t.as_slice::<bool>().unwrap_err();
    assert!(
        matches!(e, TensorError::InvalidBool { index: 1, value: 7 }),
        "{e}"
    );
    assert!(t.as_mut_slice::<bool>().is_err());
    // A bool tensor built over arbitrary bytes is refused at construction.
    let buf = TensorBuffer::copy_from_slice_in(&a, &[1, 0, 255], 1).unwrap();
    assert!(matches!(
        Tensor::from_buffer(DType::Bool, [3], buf),
        Err(TensorError::InvalidBool {
            index: 2,
            value: 255
        })
    ));
}

#[test]
fn shared_buffers_refuse_mutation_until_unique_or_copied() {
    let mut t = Tensor::from_vec([4], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    assert!(t.is_unique());
    let view = t.reshape([2, 2]).unwrap();
    assert!(view.shares_buffer_with(&t));
    assert!(!t.is_unique());
    let e = t.as_mut_slice::<f32>().unwrap_err();
    assert!(matches!(e, TensorError::SharedBuffer { refs: 2 }), "{e}");
    // Explicit copy-on-write.
    assert!(t.make_unique().unwrap());
    assert!(!view.shares_buffer_with(&t));
    t.as_mut_slice::<f32>().unwrap()[0] = 100.0;
    assert_eq!(view.as_slice::<f32>().unwrap()[0], 1.0);
    assert!(!t.make_unique().unwrap(), "already unique: no copy");
    // Dropping the other holder restores uniqueness without a copy (buffer forwarding).
    let mut v2 = view;
    assert!(v2.is_unique());
    v2.as_mut_slice::<f32>().unwrap()[3] = -1.0;
    assert_eq!(v2.as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0, -1.0]);
    let e = t.reshape([3]).unwrap_err();
    assert!(
        matches!(
            e,
            TensorError::SizeMismatch {
                expected: 3,
                actual: 4,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn buffer_forwarding_reuses_unique_buffers_only() {
    let (tr, a) = tracking();
    let input = Tensor::from_slice_in(&a, [2, 4], &[1.0f32; 8]).unwrap();
    let addr = input.buffer().as_ptr();
    // Unique, same byte size: forwarded as int32 [8] without allocating.
    let (mut out, forwarded) = Tensor::forward_or_new_in(input, &a, DType::I32, [8]).unwrap();
    assert!(forwarded);
    assert_eq!(out.buffer().as_ptr(), addr);
    assert_eq!(tr.stats().num_allocs, 1);
    out.as_mut_slice::<i32>().unwrap().fill(5);
    // Shared: not forwarded, a new buffer is allocated.
    let keep = out.clone();
    let (out2, forwarded) = Tensor::forward_or_new_in(out, &a, DType::I32, [8]).unwrap();
    assert!(!forwarded);
    assert!(!out2.shares_buffer_with(&keep));
    assert_eq!(tr.stats().num_allocs, 2);
    // Wrong size: not forwarded.
    let back = keep
        .try_forward(DType::I32, Shape::new(&[4]).unwrap())
        .unwrap_err();
    // Into bool: invalid bytes are cleared, so typed access works.
    let b = back
        .try_forward(DType::Bool, Shape::new(&[32]).unwrap())
        .unwrap();
    assert_eq!(b.as_slice::<bool>().unwrap(), &[false; 32]);
    drop((b, out2));
    assert_eq!(tr.live_count(), 0);
}

#[test]
fn slices_are_sub_buffers_that_keep_the_root_alive() {
    let (tr, a) = tracking();
    let data: Vec<i32> = (0..24).collect();
    let t = Tensor::from_slice_in(&a, [4, 3, 2], &data).unwrap();
    let s = t.slice(1, 3).unwrap();
    assert_eq!(s.dims(), &[2, 3, 2]);
    assert_eq!(s.as_slice::<i32>().unwrap(), &data[6..18]);
    assert_eq!(s.buffer().offset(), 24);
    assert_eq!(s.buffer().root_len(), 96);
    assert!(s.shares_buffer_with(&t));
    let empty = t.slice(4, 4).unwrap();
    assert_eq!(empty.num_elements(), 0);
    for (a, b) in [(3, 2), (0, 5), (5, 5)] {
        let e = t.slice(a, b).unwrap_err();
        assert!(matches!(e, TensorError::SliceOutOfRange { .. }), "{e}");
    }
    drop(t);
    drop(empty);
    assert_eq!(
        tr.live_count(),
        1,
        "the slice keeps the root allocation alive"
    );
    let inner = s.slice(1, 2).unwrap();
    drop(s);
    assert_eq!(inner.as_slice::<i32>().unwrap(), &data[12..18]);
    assert_eq!(inner.buffer().offset(), 48, "views flatten onto the root");
    drop(inner);
    assert_eq!(tr.live_count(), 0);
    assert_eq!(tr.stats().bytes_in_use, 0);
}

#[test]
fn slicing_a_tensor_with_a_zero_inner_dimension_gives_empty_rows() {
    let (_tr, a) = tracking();
    let t = Tensor::new_in(&a, DType::F32, [4, 0, 3]).unwrap();
    assert_eq!(t.num_elements(), 0);
    let s = t.slice(1, 3).unwrap();
    assert_eq!(s.dims(), &[2, 0, 3]);
    assert_eq!(s.num_elements(), 0);
    assert_eq!(s.buffer().len(), 0);
    assert!(matches!(
        t.slice(2, 5),
        Err(TensorError::SliceOutOfRange { .. })
    ));
}

#[test]
fn out_of_range_and_misaligned_views_are_errors() {
    let a = cpu();
    let b = TensorBuffer::zeroed_in(&a, 64, 64).unwrap();
    for (off, len) in [(0, 65), (60, 5), (65, 0), (usize::MAX, 2), (1, usize::MAX)] {
        let e = b.sub_buffer(off, len).unwrap_err();
        assert!(
            matches!(e, TensorError::OutOfRange { buffer_len: 64, .. }),
            "{off},{len}: {e}"
        );
    }
    assert_eq!(b.sub_buffer(64, 0).unwrap().len(), 0);
    let sub = b.sub_buffer(2, 16).unwrap();
    let e = sub.sub_buffer(10, 7).unwrap_err();
    assert!(
        matches!(
            e,
            TensorError::OutOfRange {
                offset: 10,
                len: 7,
                buffer_len: 16
            }
        ),
        "{e}"
    );
    // An f32 tensor over a view at byte offset 2 is misaligned for f32.
    let t = Tensor::from_buffer(DType::F32, [4], sub).unwrap();
    let e = t.as_slice::<f32>().unwrap_err();
    assert!(
        matches!(
            e,
            TensorError::Misaligned {
                offset: 2,
                align: 4,
                ..
            }
        ),
        "{e}"
    );
    // Raw bytes are always accessible.
    assert_eq!(t.as_bytes().len(), 16);
    // A buffer too small for the shape.
    let small = b.sub_buffer(0, 7).unwrap();
    assert!(matches!(
        Tensor::from_buffer(DType::I64, [1], small),
        Err(TensorError::SizeMismatch {
            expected: 8,
            actual: 7,
            ..
        })
    ));
    assert!(matches!(
        TensorBuffer::zeroed_in(&a, 8, 3),
        Err(TensorError::BadAlignment { align: 3 })
    ));
    assert!(matches!(
        TensorBuffer::zeroed_in(&a, isize::MAX as usize, 64),
        Err(TensorError::TooLarge { align: 64, .. })
    ));
}

#[test]
fn tracking_allocator_reports_live_tensors_with_their_size() {
    let (tr, a) = tracking();
    let t1 = Tensor::new_in(&a, DType::F32, [10, 10]).unwrap();
    let t2 = Tensor::new_in(&a, DType::I8, [3, 7]).unwrap();
    let live = tr.live_allocations();
    assert_eq!(live.len(), 2);
    let mut sizes: Vec<usize> = live.iter().map(|l| l.requested).collect();
    sizes.sort();
    assert_eq!(sizes, vec![21, 400]);
    assert!(live.iter().all(|l| l.align == DEFAULT_ALIGNMENT));
    assert_eq!(
        a.requested_size(t1.buffer().root_ptr()),
        Some(t1.byte_size())
    );
    assert!(a.allocation_id(t2.buffer().root_ptr()).is_some());
    let report = tr.leak_report();
    assert!(
        report.contains("2 live allocation(s), 421 bytes requested"),
        "{report}"
    );
    assert_eq!(t1.allocator().map(|x| x.name()), Some("tracking(cpu)"));
    let c = t1.clone();
    drop(t1);
    assert_eq!(tr.live_count(), 2, "a clone keeps the buffer");
    drop((c, t2));
    assert_eq!(tr.live_count(), 0);
}

/// Builds, views, clones and drops tensors on `a`, then checks that every byte came back.
/// Generic over [`AllocatorRef`] so every allocator kind (pool, BFC, ...) can be added in one line.
fn every_byte_comes_back(a: AllocatorRef) {
    let before = a.stats();
    {
        let mut keep = vec![];
        let sized: Vec<DType> = DType::ALL
            .into_iter()
            .filter(|d| d.size().is_some())
            .collect();
        for (i, &dtype) in sized.iter().enumerate() {
            let t = Tensor::new_in(&a, dtype, [i + 1, 5, 3]).unwrap();
            let s = t.slice(0, 1).unwrap();
            let r = s.reshape([15]).unwrap();
            keep.push(r);
            if i % 2 == 0 {
                keep.push(t.clone());
            }
        }
        let v: Vec<u16> = (0..1000).collect();
        let big = Tensor::from_slice_in(&a, [10, 100], &v).unwrap();
        let copy = big.copy_in(&a).unwrap();
        assert_eq!(copy.as_slice::<u16>().unwrap(), &v[..]);
        let mid = a.stats();
        assert_eq!(
            mid.num_allocs - before.num_allocs,
            sized.len() as u64 + 2,
            "{}: one allocation per tensor, none per view",
            a.name()
        );
        assert!(mid.bytes_in_use > before.bytes_in_use);
        drop(keep);
    }
    let after = a.stats();
    assert_eq!(
        after.bytes_in_use,
        before.bytes_in_use,
        "{}: bytes not returned",
        a.name()
    );
    assert_eq!(
        after.num_allocs - before.num_allocs,
        after.num_frees - before.num_frees,
        "{}: every allocation freed exactly once",
        a.name()
    );
}

#[test]
fn each_allocator_kind_backs_tensors_and_gets_every_byte_back() {
    every_byte_comes_back(cpu());
    // The glibc baseline keeps no statistics; count it through the tracking wrapper.
    every_byte_comes_back(allocator_ref(TrackingAllocator::new(SystemAllocator)));
    let (tr, a) = tracking();
    every_byte_comes_back(a.clone());
    assert_eq!(tr.live_count(), 0);
    every_byte_comes_back(allocator_ref(SharedAllocator::new(cpu())));
    every_byte_comes_back(allocator_ref(BfcAllocator::new(BfcOptions::default())));
    every_byte_comes_back(allocator_ref(PoolAllocator::new(PoolOptions::default())));
    // Tracking over the caching allocators: the live report empties as well.
    let bfc = std::sync::Arc::new(TrackingAllocator::new(BfcAllocator::new(
        BfcOptions::default(),
    )));
    every_byte_comes_back(bfc.clone());
    assert_eq!(bfc.live_count(), 0);
    let pool = std::sync::Arc::new(TrackingAllocator::new(PoolAllocator::new(
        PoolOptions::default(),
    )));
    every_byte_comes_back(pool.clone());
    assert_eq!(pool.live_count(), 0);
}

#[test]
fn external_memory_and_arena_style_independent_views() {
    use std::sync::atomic::{AtomicBool, Ordering};
    /// The external owner: keeps the storage alive and records when it is dropped.
    struct Owner {
        _storage: Vec<u64>,
        released: std::sync::Arc<AtomicBool>,
    }
    impl Drop for Owner {
        fn drop(&mut self) {
            self.released.store(true, Ordering::SeqCst);
        }
    }
    let mut storage = vec![7u64; 8];
    let ptr = std::ptr::NonNull::new(storage.as_mut_ptr().cast::<u8>()).unwrap();
    let released = std::sync::Arc::new(AtomicBool::new(false));
    let owner = Owner {
        _storage: storage,
        released: released.clone(),
    };
    // SAFETY: the Vec's heap storage does not move when the Vec moves into `owner`, which
    // the buffer keeps alive; it is only accessed through this buffer.
    let ext = unsafe { TensorBuffer::from_external(ptr, 64, owner) };
    assert!(ext.allocator().is_none());
    let t = Tensor::from_buffer(DType::U64, [8], ext.clone()).unwrap();
    assert_eq!(t.as_slice::<u64>().unwrap(), &[7; 8]);
    drop(ext);
    assert!(!released.load(Ordering::SeqCst));
    drop(t);
    assert!(
        released.load(Ordering::SeqCst),
        "owner dropped with the last view"
    );

    // Arena style: one arena buffer from a tracking allocator, two disjoint tensor views that are
    // each writable on their own, keeping the arena alive.
    let (tr, a) = tracking();
    let arena = TensorBuffer::zeroed_in(&a, 256, 64).unwrap();
    // SAFETY: the two views are disjoint and the arena handle itself is not used to write.
    let (v1, v2) = unsafe {
        (
            arena.independent_view(0, 64).unwrap(),
            arena.independent_view(64, 128).unwrap(),
        )
    };
    // SAFETY: the range is out of bounds, so no view is created (the call must fail).
    assert!(unsafe { arena.independent_view(200, 57) }.is_err());
    let mut t1 = Tensor::from_buffer(DType::F32, [16], v1).unwrap();
    let mut t2 = Tensor::from_buffer(DType::I32, [32], v2).unwrap();
    t1.as_mut_slice::<f32>().unwrap().fill(1.0);
    t2.as_mut_slice::<i32>().unwrap().fill(-1);
    assert_eq!(&arena.as_bytes()[0..4], &1.0f32.to_ne_bytes());
    assert_eq!(&arena.as_bytes()[64..68], &(-1i32).to_ne_bytes());
    assert_eq!(&arena.as_bytes()[192..], &[0u8; 64][..]);
    drop(arena);
    assert_eq!(tr.live_count(), 1, "views keep the arena allocation alive");
    drop(t1);
    assert_eq!(tr.live_count(), 1);
    drop(t2);
    assert_eq!(tr.live_count(), 0);
}

#[test]
fn quantization_travels_with_the_tensor() {
    let t = Tensor::new(DType::I8, [3, 2]).unwrap();
    let pc = Quantization::per_channel(vec![0.5, 0.25, 0.125], vec![1, 2, 3], 0).unwrap();
    let e = t
        .clone()
        .with_quantization(Quantization::per_channel(vec![1.0, 1.0], vec![0, 0], 0).unwrap())
        .unwrap_err();
    assert!(matches!(e, TensorError::Quantization { .. }), "{e}");
    let t = t.with_quantization(pc).unwrap();
    let s = t.slice(1, 3).unwrap();
    let q = s.quantization().unwrap();
    assert_eq!(q.scales(), &[0.25, 0.125]);
    assert_eq!(q.zero_points(), &[2, 3]);
    // A reshape that no longer fits the per-channel dimension drops the parameters.
    assert!(t.reshape([6]).unwrap().quantization().is_none());
    let pt = Tensor::new(DType::U8, [2])
        .unwrap()
        .with_quantization(Quantization::per_tensor(0.1, 128).unwrap())
        .unwrap();
    assert!(pt.reshape([1, 2]).unwrap().quantization().is_some());
}

#[test]
fn clones_dropped_on_many_threads_free_exactly_once() {
    let (tr, a) = tracking();
    for round in 0..50 {
        let t = Tensor::from_slice_in(&a, [64], &[round as u32; 64]).unwrap();
        let handles: Vec<_> = (0..3)
            .map(|k| {
                let c = if k == 0 {
                    t.clone()
                } else {
                    t.slice(k, 64).unwrap()
                };
                std::thread::spawn(move || {
                    let v = c.as_slice::<u32>().unwrap();
                    assert!(v.iter().all(|&x| x == round as u32));
                    let extra = c.clone();
                    drop(c);
                    extra.num_elements()
                })
            })
            .collect();
        drop(t);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(tr.live_count(), 0);
    }
    let s = tr.stats();
    assert_eq!((s.num_allocs, s.num_frees, s.bytes_in_use), (50, 50, 0));
}

// ---------------------------------------------------------------------------------------------
// .npy

#[test]
fn npy_round_trip_every_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let a = cpu();
    for dtype in DType::ALL.into_iter().filter(|d| d.has_element()) {
        let shape = [2usize, 3, 4];
        let n = 24;
        // Deterministic, dtype-valid bytes.
        let bytes: Vec<u8> = (0..n * dtype.size().unwrap())
            .map(|i| {
                if dtype == DType::Bool {
                    (i % 3 == 0) as u8
                } else {
                    (i * 37 % 251) as u8
                }
            })
            .collect();
        let t = Tensor::from_bytes_in(&a, dtype, shape, &bytes).unwrap();
        let path = dir.path().join(format!("{dtype}.npy"));
        t.write_npy(&path).unwrap();
        let back = Tensor::read_npy_in(&a, &path).unwrap();
        assert_eq!(back.dtype(), dtype);
        assert_eq!(back.dims(), &shape);
        assert_eq!(back.as_bytes(), t.as_bytes(), "{dtype}");
        // Through a reader/writer pair as well.
        let mut mem = vec![];
        t.write_npy_to(&mut mem).unwrap();
        let back2 = Tensor::read_npy_from_in(&a, &mem[..]).unwrap();
        assert_eq!(back2.as_bytes(), t.as_bytes(), "{dtype}");
    }
    // Scalars and empty tensors.
    for t in [
        Tensor::from_vec(Shape::scalar(), vec![42.5f64]).unwrap(),
        Tensor::zeros(DType::I32, [0, 3]).unwrap(),
    ] {
        let mut mem = vec![];
        t.write_npy_to(&mut mem).unwrap();
        let back = Tensor::read_npy_from_in(&a, &mem[..]).unwrap();
        assert_eq!(back.dims(), t.dims());
        assert_eq!(back.as_bytes(), t.as_bytes());
    }
}

fn npy_bytes(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut dict = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    );
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((dict.len() as u16).to_le_bytes());
    out.extend(dict.as_bytes());
    out.extend(data);
    out
}

#[test]
fn npy_reads_big_endian_and_rejects_bad_files() {
    let a = cpu();
    let be = npy_bytes(">i4", false, "(2,)", &[0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe]);
    let t = Tensor::read_npy_from_in(&a, &be[..]).unwrap();
    assert_eq!(t.as_slice::<i32>().unwrap(), &[0x0102, -2]);

    let truncated = npy_bytes("<f4", false, "(4,)", &[0; 10]);
    let e = Tensor::read_npy_from_in(&a, &truncated[..]).unwrap_err();
    assert!(e.to_string().contains("after 10 of 16 bytes"), "{e}");
    // The same through a file: the length check happens before allocation.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("truncated.npy");
    std::fs::write(&p, &truncated).unwrap();
    let e = Tensor::read_npy_in(&a, &p).unwrap_err();
    assert!(e.to_string().contains("only 10 bytes follow"), "{e}");
    // A reader whose header promises ~2^40 bytes is refused without allocating them.
    let huge = npy_bytes("<f4", false, "(274877906944,)", &[0; 8]);
    let (tr, ta) = tracking();
    let e = Tensor::read_npy_from_in(&ta, &huge[..]).unwrap_err();
    assert!(
        e.to_string().contains("after 8 of 1099511627776 bytes"),
        "{e}"
    );
    assert_eq!(tr.stats().num_allocs, 0);

    let fortran = npy_bytes("<f4", true, "(2, 2)", &[0; 16]);
    let e = Tensor::read_npy_from_in(&a, &fortran[..]).unwrap_err();
    assert!(e.to_string().contains("fortran_order"), "{e}");

    let complex = npy_bytes("<c8", false, "(1,)", &[0; 8]);
    let e = Tensor::read_npy_from_in(&a, &complex[..]).unwrap_err();
    assert!(e.to_string().contains("<c8"), "{e}");

    let bad_bool = npy_bytes("|b1", false, "(2,)", &[1, 9]);
    assert!(Tensor::read_npy_from_in(&a, &bad_bool[..]).is_err());

    assert!(Tensor::read_npy_from_in(&a, &b"not an npy file"[..]).is_err());

    // A header promising ~2^40 bytes in a tiny file is refused before any allocation.
    let p = dir.path().join("huge.npy");
    std::fs::write(&p, npy_bytes("<f4", false, "(274877906944,)", &[0; 8])).unwrap();
    let (tr, ta) = tracking();
    let e = Tensor::read_npy_in(&ta, &p).unwrap_err();
    assert!(e.to_string().contains("only 8 bytes follow"), "{e}");
    assert_eq!(tr.stats().num_allocs, 0);
    let e = Tensor::read_npy(dir.path().join("missing.npy")).unwrap_err();
    assert!(e.to_string().contains("missing.npy"), "{e}");

    // A version-2 header whose length field claims ~4 GiB (in a 12-byte file) is refused before
    // the header is read (the `.npy` library would allocate the claimed length first).
    let mut claim = b"\x93NUMPY\x02\x00".to_vec();
    claim.extend_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    let e = Tensor::read_npy_from_in(&a, &claim[..]).unwrap_err();
    assert!(
        e.to_string()
            .contains("header length field says 4294967280 bytes"),
        "{e}"
    );
    let p = dir.path().join("claim.npy");
    std::fs::write(&p, &claim).unwrap();
    let e = Tensor::read_npy_in(&a, &p).unwrap_err();
    assert!(e.to_string().contains("expected at most 12"), "{e}");
    assert!(e.to_string().contains("claim.npy"), "{e}");
}

fn reference_dir() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/reference");
    p.is_dir().then_some(p)
}

/// Loads every `input_K.npy` / `output_K.npy` (and `alt/*.npy`) under `../shared/reference`, checks
/// the tensor against the file's own header and data bytes, and writes it back byte-identically.
#[test]
fn loads_shared_reference_npy_files() {
    let Some(root) = reference_dir() else {
        eprintln!("skipping: ../shared not found");
        return;
    };
    let (tr, a) = tracking();
    let mut files = vec![];
    for model in std::fs::read_dir(&root).unwrap().flatten() {
        if !model.path().is_dir() {
            continue;
        }
        for sub in [model.path(), model.path().join("alt")] {
            let Ok(rd) = std::fs::read_dir(&sub) else {
                continue;
            };
            for f in rd.flatten() {
                let name = f.file_name().to_string_lossy().to_string();
                if name.ends_with(".npy") && (name.contains("input_") || name.contains("output_")) {
                    files.push(f.path());
                }
            }
        }
    }
    files.sort();
    assert!(!files.is_empty(), "no reference .npy files under {root:?}");
    let mut dtypes = std::collections::BTreeSet::new();
    for path in &files {
        let raw = std::fs::read(path).unwrap();
        let t = Tensor::read_npy_in(&a, path).unwrap_or_else(|e| panic!("{e}"));
        dtypes.insert(t.dtype().name());
        // The data section is the file's tail; on little-endian hosts it equals the tensor bytes.
        if cfg!(target_endian = "little") {
            assert_eq!(&raw[raw.len() - t.byte_size()..], t.as_bytes(), "{path:?}");
        }
        // The header's shape text matches the tensor's dims.
        let header = String::from_utf8_lossy(&raw[..raw.len() - t.byte_size()]).to_string();
        let dims: Vec<String> = t.dims().iter().map(|d| d.to_string()).collect();
        assert!(
            header.contains(&format!("({}", dims.join(", "))),
            "{path:?}: {header}"
        );
        let mut out = vec![];
        t.write_npy_to(&mut out).unwrap();
        let again = Tensor::read_npy_from_in(&a, &out[..]).unwrap();
        assert_eq!(again.as_bytes(), t.as_bytes());
        assert_eq!(again.dims(), t.dims());
    }
    // inputs.json records the dtype and shape of each input file.
    for model in std::fs::read_dir(&root).unwrap().flatten() {
        let meta = model.path().join("inputs.json");
        let Ok(text) = std::fs::read_to_string(&meta) else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for entry in v.as_array().into_iter().flatten() {
            let file = model.path().join(entry["file"].as_str().unwrap());
            let t = Tensor::read_npy(&file).unwrap();
            assert_eq!(Some(t.dtype().name()), entry["dtype"].as_str(), "{file:?}");
            let shape: Vec<usize> = entry["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as usize)
                .collect();
            assert_eq!(t.dims(), &shape[..], "{file:?}");
        }
    }
    assert_eq!(tr.live_count(), 0);
    eprintln!(
        "loaded {} reference .npy files, dtypes {:?}",
        files.len(),
        dtypes
    );
}
