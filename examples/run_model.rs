//! Load a `.tflite` model, run it TFLM style in a fixed arena the caller owns, and print the
//! outputs and the memory report.
//!
//! ```sh
//! cargo run --release --example run_model -- ../shared/models/tflm/person_detect.tflite \
//!     ../shared/reference/person_detect/input_0.npy
//! ```
//! Without an input file every input is zero.

use tensor_alloc::interpreter::{Interpreter, InterpreterBuilder, OpResolver};
use tensor_alloc::model::Model;
use tensor_alloc::tensor::Tensor;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .unwrap_or_else(|| "../shared/models/tflm/person_detect.tflite".to_string());
    let input = args.next();
    let model = Model::load(&path)?;

    // 1. How big must the arena be? Ask, then hand over exactly that many bytes (16-aligned:
    //    u128 words), as a TFLM user would hand over a static `tensor_arena[]`.
    let needs = Interpreter::arena_needs(&model, &OpResolver::with_builtins())?;
    println!(
        "{path}: arena of {} bytes (head {} incl. {} scratch, tail {})",
        needs.total_bytes, needs.head_bytes, needs.scratch_bytes, needs.tail_bytes
    );
    let mut words = vec![0u128; needs.total_bytes.div_ceil(16)];
    // SAFETY: plain memory of the u128 words, viewed as bytes for as long as `words` lives.
    let arena: &mut [u8] =
        unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, needs.total_bytes) };
    let mut interp = InterpreterBuilder::new(&model)
        .arena_buffer(arena)
        .build()?;

    // 2. Inputs: from a .npy file (input 0), zeros otherwise.
    for k in 0..interp.num_inputs() {
        match (&input, k) {
            (Some(p), 0) => interp.set_input(0, &Tensor::read_npy(p)?)?,
            _ => interp.input_bytes_mut(k)?.fill(0),
        }
    }

    // 3. Invoke and print.
    interp.invoke()?;
    for k in 0..interp.num_outputs() {
        let out = interp.output_tensor(k)?;
        let d = interp.output_desc(k)?;
        println!(
            "output {k} `{}`: {} {:?} = {:?}",
            d.name,
            out.dtype(),
            out.dims(),
            &out.as_bytes()[..out.as_bytes().len().min(16)]
        );
    }
    print!("{}", interp.memory_report());
    Ok(())
}
