//! Invoke time of every shared model that the interpreter runs (`../shared/models/tflm` and
//! `keras`), on the reference inputs. Compare with LiteRT in the same session through
//! `../shared/tools` (see BENCHMARKS.md); `tensor-alloc run MODEL --repeat N` gives the same figure
//! from the command line. Models that do not build are listed and skipped.

use criterion::{criterion_group, criterion_main, Criterion};
use std::path::Path;
use tensor_alloc::interpreter::InterpreterBuilder;
use tensor_alloc::model::Model;
use tensor_alloc::tensor::Tensor;

fn bench_models(c: &mut Criterion) {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if !shared.join("models").is_dir() {
        eprintln!("skipping: ../shared not found");
        return;
    }
    let filter = std::env::var("TENSOR_ALLOC_BENCH_MODELS").ok();
    for (set, refs) in [("tflm", "reference"), ("keras", "reference/keras")] {
        let mut files: Vec<_> = std::fs::read_dir(shared.join("models").join(set))
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        for f in files {
            let name = f.file_stem().unwrap().to_string_lossy().to_string();
            if filter
                .as_ref()
                .is_some_and(|m| !m.split(',').any(|x| x == name))
            {
                continue;
            }
            let Ok(model) = Model::load(&f) else { continue };
            let mut interp = match InterpreterBuilder::new(&model).build() {
                Ok(i) => i,
                Err(e) => {
                    eprintln!("{name}: not run ({e})");
                    continue;
                }
            };
            for k in 0..interp.num_inputs() {
                let p = shared.join(refs).join(&name).join(format!("input_{k}.npy"));
                match Tensor::read_npy(&p) {
                    Ok(t) if interp.set_input(k, &t).is_ok() => {}
                    _ => interp.input_bytes_mut(k).map(|b| b.fill(0)).unwrap_or(()),
                }
            }
            c.bench_function(&format!("invoke/{name}"), |b| {
                b.iter(|| interp.invoke().expect("invoke"))
            });
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench_models
}
criterion_main!(benches);
