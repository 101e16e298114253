//! `Tensor::new` takes the registry's process-wide CPU allocator, chosen by the environment.
//! (One process per configuration: the environment is read once, so this file has one test.)

use tensor_alloc::tensor::{DType, Tensor};

#[test]
fn tensor_new_uses_the_allocator_the_environment_selects() {
    // SAFETY: set before any other thread of this test binary reads the environment (one test).
    unsafe { std::env::set_var("TENSOR_ALLOC_CPU_ALLOCATOR", "bfc") };
    let t = Tensor::new(DType::F32, [4, 4]).unwrap();
    let a = t.allocator().expect("an owned buffer knows its allocator");
    assert_eq!(a.name(), "bfc");
    let again = Tensor::zeros(DType::I8, [16]).unwrap();
    let b = again.allocator().expect("owned");
    assert!(std::sync::Arc::ptr_eq(a, b), "created once");
    assert!(a.stats().bytes_in_use >= 64);
}
