//! `Model::load_mapped`: a `.tflite` file mapped instead of read decodes to the same model, runs
//! to the same outputs, keeps its bytes in the mapping (never writable), and refuses the files
//! `Model::load` refuses with the same one-line errors. Uses the repository's own
//! `testdata/converter` models. Not under Miri (no `mmap`).
#![cfg(all(unix, not(miri)))]

use std::path::{Path, PathBuf};
use tensor_alloc::interpreter::InterpreterBuilder;
use tensor_alloc::model::{Model, ModelBytes};

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/converter")
        .join(name)
}

fn load_mapped(path: &Path) -> Result<Model, tensor_alloc::model::ModelError> {
    // SAFETY: the test's files (the repository's testdata and its own temporary files) are not
    // modified while the models live.
    unsafe { Model::load_mapped(path) }
}

#[test]
fn a_mapped_model_equals_the_read_one_and_runs_to_the_same_outputs() {
    for name in [
        "regnet_grouped_int8.tflite",
        "transformer_block_int8.tflite",
        "hybrid_mlp_dynamic.tflite",
    ] {
        let path = testdata(name);
        let read = Model::load(&path).unwrap();
        let mapped = load_mapped(&path).unwrap();
        assert!(
            mapped.bytes.is_mapped() && !read.bytes.is_mapped(),
            "{name}"
        );
        assert_eq!(mapped, read, "{name}");
        assert_eq!(&mapped.bytes[..], &read.bytes[..], "{name}");
        // A mapping starts at a page boundary: at least the alignment a read buffer has.
        assert_eq!(mapped.bytes.as_ptr() as usize % 4096, 0, "{name}");
        let mut bytes = mapped.bytes.clone();
        assert!(
            bytes.get_mut().is_none(),
            "{name}: mapped bytes are never writable"
        );

        let mut outputs = Vec::new();
        for model in [&read, &mapped] {
            let mut interp = InterpreterBuilder::new(model).build().unwrap();
            for i in 0..interp.num_inputs() {
                let input = interp.input_bytes_mut(i).unwrap();
                for (k, b) in input.iter_mut().enumerate() {
                    *b = (k * 7 % 13) as u8;
                }
            }
            interp.invoke().unwrap();
            let out: Vec<Vec<u8>> = (0..interp.num_outputs())
                .map(|o| interp.output_bytes(o).unwrap().to_vec())
                .collect();
            outputs.push(out);
        }
        assert_eq!(outputs[0], outputs[1], "{name}");
        // The interpreter outlives the model it was built from; the mapping lives on in the
        // bytes it shares.
        let mut interp = InterpreterBuilder::new(&mapped).build().unwrap();
        drop(mapped);
        interp.invoke().unwrap();
    }
}

#[test]
fn a_mapped_load_refuses_what_a_read_load_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short.tflite");
    std::fs::write(&short, b"TFL3").unwrap();
    let foreign = dir.path().join("foreign.tflite");
    std::fs::write(&foreign, b"\x00\x00\x00\x00PNG!and more bytes").unwrap();
    // The identifier is right, the flatbuffer behind it is not.
    let broken = dir.path().join("broken.tflite");
    std::fs::write(&broken, b"\xff\xff\xff\x7fTFL3\x00\x00\x00\x00").unwrap();
    let missing = dir.path().join("missing.tflite");
    for path in [dir.path(), &short, &foreign, &broken, &missing] {
        let read = Model::load(path).unwrap_err().to_string();
        let mapped = load_mapped(path).unwrap_err().to_string();
        assert_eq!(mapped, read, "{}", path.display());
        assert!(!mapped.contains('\n'), "{mapped}");
    }
}

#[test]
fn mapping_an_empty_length_maps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty");
    std::fs::write(&path, b"").unwrap();
    let file = std::fs::File::open(&path).unwrap();
    // SAFETY: nothing is mapped.
    let bytes = unsafe { ModelBytes::map(&file, 0) }.unwrap();
    assert!(bytes.is_empty() && !bytes.is_mapped());
}
