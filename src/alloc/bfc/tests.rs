use super::*;

fn l(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

#[test]
fn alloc_free_coalesces_back_to_one_chunk() {
    let a = BfcAllocator::new(BfcOptions::default());
    let p = a.allocate(l(1000, 8)).unwrap();
    let q = a.allocate(l(5000, 64)).unwrap();
    a.check_invariants().unwrap();
    assert_eq!(a.stats().bytes_in_use, 1024 + 5120);
    unsafe {
        a.deallocate(p.cast(), l(1000, 8));
        a.deallocate(q.cast(), l(5000, 64));
    }
    a.check_invariants().unwrap();
    let d = a.memory_dump();
    assert_eq!(d.regions.len(), 1);
    assert_eq!(d.regions[0].chunks.len(), 1);
    assert_eq!(a.stats().bytes_in_use, 0);
}
