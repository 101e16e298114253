//! Reader and planning speed on the shared models (skipped when `../shared` is absent):
//! verify + decode, lifetimes, and the full `plan_model` (every planner).

use criterion::{criterion_group, criterion_main, Criterion};
use std::path::Path;
use std::sync::Arc;
use tensor_alloc::interpreter::{plan_model, ModelPlanOptions};
use tensor_alloc::model::{LifetimeOptions, Lifetimes, Model};

fn bench(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models/tflm");
    if !dir.is_dir() {
        eprintln!("skipping: ../shared not found");
        return;
    }
    for name in [
        "mobilenet_v2_quantized_1x3x224x224",
        "person_detect",
        "keyword_scrambled",
    ] {
        let Ok(bytes) = std::fs::read(dir.join(format!("{name}.tflite"))) else {
            continue;
        };
        let bytes: Arc<[u8]> = bytes.into();
        c.bench_function(&format!("read_model/{name}"), |b| {
            b.iter(|| Model::from_bytes(bytes.clone()).expect("shared model loads"))
        });
        let model = Model::from_bytes(bytes.clone()).expect("shared model loads");
        c.bench_function(&format!("lifetimes/{name}"), |b| {
            b.iter(|| {
                Lifetimes::compute(
                    &model,
                    &LifetimeOptions {
                        inplace: true,
                        ..Default::default()
                    },
                )
            })
        });
        c.bench_function(&format!("plan_model/{name}"), |b| {
            b.iter(|| plan_model(&model, &ModelPlanOptions::default()).expect("plans"))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
