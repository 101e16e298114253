//! A bad `TENSOR_ALLOC_*` setting comes back from `Tensor::new` as an error naming the variable.

use tensor_alloc::tensor::{DType, Tensor};

#[test]
fn tensor_new_reports_a_misspelled_variable() {
    // SAFETY: set before any other thread of this test binary reads the environment (one test).
    unsafe { std::env::set_var("TENSOR_ALLOC_BFC_GROWHT", "double") };
    let e = Tensor::new(DType::F32, [2]).unwrap_err().to_string();
    assert!(
        e.contains("TENSOR_ALLOC_BFC_GROWHT") && e.contains("TENSOR_ALLOC_BFC_GROWTH"),
        "{e}"
    );
}
