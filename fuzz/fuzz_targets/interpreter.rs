//! Fuzz target for the interpreter: any input that loads as a model must build or fail with an
//! error, and a built interpreter must invoke or fail with an error — never panic, read out of
//! bounds or allocate without bound.
//!
//! Properties checked beyond "no crash":
//! - `Interpreter::arena_needs` is exact: a caller buffer of exactly `total_bytes` builds, and
//!   one byte less is refused with `ArenaTooSmall`.
//! - Two invokes on the same inputs give the same outputs (no state leaks between invokes
//!   except variables, which `reset_variables` restores). Inputs are written before each
//!   invoke: as in TFLM, an input's bytes may be reused once its last reader has run.
//!
//! Run with `cargo fuzz run interpreter fuzz/corpus/interpreter` from the repository root.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensor_alloc::interpreter::{Interpreter, InterpreterBuilder, InterpreterError, OpResolver};
use tensor_alloc::model::Model;

/// Models whose arena is larger than this are loaded and planned but not built (libFuzzer's
/// default RSS limit is 2 GiB; a mutated shape can ask for far more).
const MAX_ARENA_BYTES: usize = 64 << 20;

fuzz_target!(|data: &[u8]| {
    let Ok(model) = Model::from_bytes(data.to_vec()) else {
        return;
    };
    let resolver = OpResolver::with_builtins();
    let Ok(needs) = Interpreter::arena_needs(&model, &resolver) else {
        return;
    };
    if needs.total_bytes > MAX_ARENA_BYTES {
        return;
    }

    // Exactness of the arena size, in a caller buffer (u128 words: 16-byte aligned).
    let mut words = vec![0u128; needs.total_bytes.div_ceil(16).max(1)];
    // SAFETY: the u128 words are plain initialised memory, viewed as bytes while `words` lives.
    let arena: &mut [u8] = unsafe {
        std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, needs.total_bytes)
    };
    if needs.total_bytes > 0 {
        let short = InterpreterBuilder::new(&model)
            .resolver(OpResolver::with_builtins())
            .arena_buffer(&mut arena[..needs.total_bytes - 1])
            .build();
        match short {
            Err(InterpreterError::ArenaTooSmall { .. }) => {}
            Err(e) => panic!("one byte short of arena_needs gave another error: {e}"),
            Ok(_) => panic!("one byte short of arena_needs still built"),
        }
    }
    let mut interp = InterpreterBuilder::new(&model)
        .resolver(resolver)
        .arena_buffer(arena)
        .build()
        .expect("a buffer of exactly arena_needs().total_bytes builds");

    fill_inputs(&mut interp);
    if interp.invoke().is_err() {
        return;
    }
    let first: Vec<Vec<u8>> = (0..interp.num_outputs())
        .map(|k| interp.output_bytes(k).map(<[u8]>::to_vec).unwrap_or_default())
        .collect();
    interp.reset_variables();
    fill_inputs(&mut interp);
    interp.invoke().expect("a model that invoked once invokes again");
    for (k, want) in first.iter().enumerate() {
        let got = interp.output_bytes(k).unwrap_or_default();
        // Bit patterns, not float equality: NaN outputs must repeat too.
        assert!(got == &want[..], "output {k} changed between two invokes on the same input");
    }
});

/// Writes the same byte pattern into every input.
fn fill_inputs(interp: &mut Interpreter<'_>) {
    for k in 0..interp.num_inputs() {
        if let Ok(bytes) = interp.input_bytes_mut(k) {
            for (i, b) in bytes.iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(31).wrapping_add(7);
            }
        }
    }
}
