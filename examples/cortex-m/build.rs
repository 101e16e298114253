//! Embeds the three models, their reference inputs and TFLM's outputs from `../shared` (next to
//! the repository): model bytes as they are (at a 64-byte boundary, read in place), the `.npy` files' raw data without their headers,
//! and TFLM's arena (head + tail) from the reference JSON. Fails the build, naming the path, when
//! `../shared` is absent.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const MODELS: [&str; 3] = [
    "hello_world_int8",
    "micro_speech_quantized",
    "person_detect",
];

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let shared = manifest.join("../../../shared");
    if !shared.is_dir() {
        panic!(
            "{} is absent: the firmware embeds the models and reference data from there",
            shared.display()
        );
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let mut cases = String::from(
        "/// The embedded models with their references.\npub static CASES: &[Case] = &[\n",
    );
    for name in MODELS {
        let model = shared.join(format!("models/tflm/{name}.tflite"));
        let reference = shared.join(format!("reference/{name}"));
        let input = npy_data(&reference.join("input_0.npy"));
        let expected = npy_data(&reference.join("alt/tflm.output_0.npy"));
        let json = read(&shared.join(format!("reference/{name}.json")));
        let json = String::from_utf8(json).expect("reference JSON is UTF-8");
        let (head, tail) = tflm_arena(&json)
            .unwrap_or_else(|| panic!("no runtimes.tflm arena head/tail in {name}.json"));
        std::fs::write(out.join(format!("{name}.input")), input).unwrap();
        std::fs::write(out.join(format!("{name}.expected")), expected).unwrap();
        println!("cargo:rerun-if-changed={}", model.display());
        writeln!(
            cases,
            "    Case {{ name: {name:?}, model: aligned_bytes!({model:?}), \
             input: include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{name}.input\")), \
             expected: include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{name}.expected\")), \
             tflm_head: {head}, tflm_tail: {tail} }},",
            model = model.display().to_string(),
        )
        .unwrap();
    }
    cases.push_str("];\n");
    std::fs::write(out.join("cases.rs"), cases).unwrap();
    // memory.x next to the linker script of cortex-m-rt.
    std::fs::copy(manifest.join("memory.x"), out.join("memory.x")).unwrap();
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=memory.x");
    println!("cargo:rerun-if-changed=build.rs");
}

fn read(path: &Path) -> Vec<u8> {
    println!("cargo:rerun-if-changed={}", path.display());
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The data of a `.npy` file (format 1.x, 2.x or 3.x): the bytes after the header.
fn npy_data(path: &Path) -> Vec<u8> {
    let bytes = read(path);
    assert!(
        bytes.starts_with(b"\x93NUMPY"),
        "{}: not a .npy file",
        path.display()
    );
    let (len_bytes, start) = if bytes[6] == 1 { (2, 10) } else { (4, 12) };
    let mut header_len = 0usize;
    for (i, b) in bytes[8..8 + len_bytes].iter().enumerate() {
        header_len |= (*b as usize) << (8 * i);
    }
    let header = String::from_utf8_lossy(&bytes[start..start + header_len]);
    assert!(
        header.contains("'|i1'") || header.contains("'|u1'"),
        "{}: the firmware compares 8-bit tensors, header {header}",
        path.display()
    );
    assert!(
        header.contains("'fortran_order': False"),
        "{}: Fortran order",
        path.display()
    );
    bytes[start + header_len..].to_vec()
}

/// `runtimes.tflm.arena.arena_head_bytes` and `arena_tail_bytes` of a reference JSON.
fn tflm_arena(json: &str) -> Option<(usize, usize)> {
    let tflm = json.find("\"kind\": \"tflm\"")?;
    let number = |key: &str| -> Option<usize> {
        let at = tflm + json[tflm..].find(key)? + key.len();
        let rest = json[at..].trim_start_matches([':', ' ']);
        let end = rest.find(|c: char| !c.is_ascii_digit())?;
        rest[..end].parse().ok()
    };
    Some((
        number("\"arena_head_bytes\"")?,
        number("\"arena_tail_bytes\"")?,
    ))
}
