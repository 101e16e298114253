//! What the tensor layer costs on the process heap (counted by `GlobalAllocator` installed as this
//! binary's `#[global_allocator]`): views, reshapes, slices, clones, typed access and buffer
//! forwarding allocate nothing, so an interpreter may use them while invoking; a new root buffer
//! costs exactly one small header allocation on top of its bytes from the tensor's own allocator.
#![cfg(not(loom))]

use tensor_alloc::alloc::{BfcAllocator, BfcOptions};
use tensor_alloc::global::count_allocations;
use tensor_alloc::tensor::{allocator_ref, DType, Shape, Tensor};
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

#[test]
fn views_and_typed_access_do_not_touch_the_heap() {
    let a = allocator_ref(BfcAllocator::new(BfcOptions::default()));
    let mut t = Tensor::new_in(&a, DType::F32, [8, 16]).unwrap();
    let (sum, c) = count_allocations(|| {
        let shape = Shape::new(&[16, 8]).unwrap();
        t.as_mut_slice::<f32>().unwrap().fill(2.0);
        let r = t.reshape(shape).unwrap();
        let s = r.slice(2, 6).unwrap();
        let b = s.buffer().sub_buffer(4, 8).unwrap();
        let cl = s.clone();
        let sum: f32 = cl.as_slice::<f32>().unwrap().iter().sum();
        let e = t.as_mut_slice::<f32>().is_err(); // shared: refused, and the error has no heap data
        drop((r, s, b, cl));
        assert!(e);
        sum
    })
    .unwrap();
    assert_eq!(sum, 64.0);
    assert_eq!((c.allocs, c.deallocs, c.reallocs), (0, 0, 0), "{c:?}");

    // Buffer forwarding is free as well.
    let (fwd, c) = count_allocations(|| {
        Tensor::forward_or_new_in(t, &a, DType::I32, [128])
            .unwrap()
            .1
    })
    .unwrap();
    assert!(fwd);
    assert_eq!(c.allocs, 0, "{c:?}");
}

#[test]
fn a_new_root_costs_one_header_allocation() {
    // The bytes come from the BFC allocator (its region is reserved up front); only the
    // reference-counted header comes from the global heap.
    let a = allocator_ref(BfcAllocator::new(BfcOptions::default()));
    drop(Tensor::new_in(&a, DType::U8, [1]).unwrap()); // let the BFC reserve its first region
    let (t, c) = count_allocations(|| Tensor::new_in(&a, DType::I8, [1000]).unwrap()).unwrap();
    assert_eq!(c.allocs, 1, "{c:?}");
    assert!(c.bytes_allocated < 128, "{c:?}");
    let (_, c) = count_allocations(|| drop(t)).unwrap();
    assert_eq!(c.deallocs, 1, "{c:?}");
}
