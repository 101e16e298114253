//! Every allocator of the family works in allocator-api2 collections and hashbrown.

use allocator_api2::boxed::Box as ABox;
use allocator_api2::vec::Vec as AVec;
use std::sync::Arc;
use tensor_alloc::alloc::{
    AlignedCpuAllocator, AllocatorRef, BfcAllocator, BfcOptions, Layout, PoolAllocator,
    PoolOptions, SharedAllocator, TensorAllocator, TrackingAllocator,
};

fn family() -> Vec<AllocatorRef> {
    vec![
        Arc::new(AlignedCpuAllocator::new()),
        Arc::new(TrackingAllocator::new(AlignedCpuAllocator::new())),
        Arc::new(BfcAllocator::new(BfcOptions::default())),
        Arc::new(PoolAllocator::new(PoolOptions::default())),
        Arc::new(TrackingAllocator::new(BfcAllocator::new(
            BfcOptions::default(),
        ))),
    ]
}

#[test]
fn vec_new_in_works_and_returns_memory() {
    for a in family() {
        {
            let mut v = AVec::new_in(SharedAllocator::new(a.clone()));
            for i in 0..100_000u32 {
                v.push(i);
            }
            assert_eq!(v.len(), 100_000);
            assert_eq!(v[99_999], 99_999);
            assert!(a.stats().bytes_in_use >= 400_000, "{}", a.name());
            v.shrink_to_fit();
            v.truncate(10);
            v.shrink_to_fit();
            assert_eq!(&v[..], &(0..10).collect::<Vec<_>>()[..]);
        }
        assert_eq!(a.stats().bytes_in_use, 0, "{} leaked", a.name());
    }
}

#[test]
fn box_new_in_works() {
    for a in family() {
        {
            let b = ABox::new_in([7u64; 512], SharedAllocator::new(a.clone()));
            assert!(b.iter().all(|&x| x == 7));
            assert_eq!(a.stats().bytes_in_use, 4096, "{}", a.name());
            let z = ABox::new_in((), SharedAllocator::new(a.clone()));
            drop(z);
        }
        assert_eq!(a.stats().bytes_in_use, 0, "{} leaked", a.name());
    }
}

#[test]
fn hashbrown_map_new_in_works() {
    for a in family() {
        {
            let mut m = hashbrown::HashMap::new_in(SharedAllocator::new(a.clone()));
            for i in 0..10_000u64 {
                m.insert(i, i * 3);
            }
            assert_eq!(m.get(&4242), Some(&12_726));
            assert!(a.stats().num_allocs > 1);
        }
        assert_eq!(a.stats().bytes_in_use, 0, "{} leaked", a.name());
    }
}

#[test]
fn borrowed_allocators_work_directly() {
    let cpu = AlignedCpuAllocator::new();
    let mut v = AVec::new_in(&cpu);
    v.extend_from_slice(&[1u8; 1000]);
    assert_eq!(cpu.stats().bytes_in_use, v.capacity() as u64);
    drop(v);
    assert_eq!(cpu.stats().bytes_in_use, 0);

    let t = TrackingAllocator::new(AlignedCpuAllocator::new());
    let b = ABox::new_in(5u32, &t);
    let ptr = std::ptr::NonNull::from(&*b).cast::<u8>();
    assert_eq!(t.requested_size(ptr), Some(4));
    assert_eq!(t.allocation_id(ptr), Some(1));
    drop(b);
    assert_eq!(t.live_count(), 0);
}

#[test]
fn zero_size_requests_follow_the_contract() {
    for a in family() {
        for align in [1usize, 8, 64, 4096] {
            let l = Layout::from_size_align(0, align).unwrap();
            let p = a.allocate(l).unwrap();
            assert_eq!(p.len(), 0, "{}", a.name());
            assert_eq!(p.cast::<u8>().as_ptr() as usize % align, 0, "{}", a.name());
            // SAFETY: `p` came from `a.allocate(l)` and is freed once.
            unsafe { a.deallocate(p.cast(), l) };
        }
        let s = a.stats();
        assert_eq!(
            (s.num_allocs, s.bytes_in_use),
            (0, 0),
            "{}: zero-size requests are not allocations",
            a.name()
        );
    }
}
