//! Fuzz target for the `.tflite` reader: any input must load or fail with an error, and a
//! loaded model must survive lifetime analysis and a write/read round trip.
//!
//! Run with `cargo fuzz run tflite_reader` from the repository root (seed the corpus with
//! `../shared/models/tflm/*.tflite`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensor_alloc::model::{LifetimeOptions, Lifetimes, Model};

fuzz_target!(|data: &[u8]| {
    if let Ok(model) = Model::from_bytes(data.to_vec()) {
        let _ = Lifetimes::compute(&model, &LifetimeOptions::default());
        let _ = Lifetimes::compute(&model, &LifetimeOptions { inplace: true, ..Default::default() });
        let _ = model.offline_plan();
        if let Ok(bytes) = model.to_bytes() {
            let again = Model::from_bytes(bytes.clone()).expect("a written model reads back");
            // Compared as bytes (write -> read -> write is idempotent): NaN option values make
            // structural equality unusable here.
            assert!(again.to_bytes().expect("rewrite") == bytes, "writer is not idempotent");
        }
    }
});
