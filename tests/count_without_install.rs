//! Without `#[global_allocator]`, `count_allocations` refuses instead of reporting zero.

#[test]
fn count_allocations_refuses_when_not_installed() {
    let r = tensor_alloc::global::count_allocations(|| vec![1u8; 10]);
    let e = r.expect_err("GlobalAllocator is not installed in this binary");
    assert!(e.to_string().contains("#[global_allocator]"));
    assert!(!tensor_alloc::GlobalAllocator::is_installed());
}
