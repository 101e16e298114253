//! Checks the reader and the lifetime table against the reference facts of every shared model
//! (`../shared/reference/<model>.json`, produced with LiteRT and TFLM). Skips with a notice when
//! `../shared` is absent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tensor_alloc::model::{LifetimeOptions, Lifetimes, Model, PersistentKind};

fn shared() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if p.join("reference").is_dir() && p.join("models/tflm").is_dir() {
        Some(p)
    } else {
        eprintln!("skipping: ../shared not found");
        None
    }
}

fn references(shared: &Path) -> Vec<(String, Value, Model)> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(shared.join("reference"))
        .expect("reference dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        let json: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        let model_path = shared.join("models/tflm").join(format!("{name}.tflite"));
        let model = Model::load(&model_path).unwrap_or_else(|e| panic!("{name}: {e}"));
        out.push((name, json, model));
    }
    assert!(
        out.len() >= 19,
        "expected the 19 shared models, found {}",
        out.len()
    );
    out
}

#[test]
fn structure_matches_reference() {
    let Some(shared) = shared() else { return };
    for (name, json, model) in references(&shared) {
        let s = &json["structure"];
        assert_eq!(
            model.subgraphs.len() as u64,
            s["subgraph_count"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            u64::from(model.version),
            s["schema_version"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            model.description.as_deref(),
            s["description"].as_str(),
            "{name}"
        );
        let sg = &model.subgraphs[0];
        assert_eq!(
            sg.operators.len() as u64,
            s["operator_count_subgraph0"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            sg.tensors.len() as u64,
            s["tensor_count_subgraph0"].as_u64().unwrap(),
            "{name}"
        );
        let consts = (0..sg.tensors.len())
            .filter(|&t| model.is_constant(0, t))
            .count();
        assert_eq!(
            consts as u64,
            s["constant_tensor_count_subgraph0"].as_u64().unwrap(),
            "{name}"
        );
        // Operator sequence by name (custom ops by their custom code).
        let seq: Vec<String> = sg
            .operators
            .iter()
            .map(|op| {
                let c = model.opcode(op).unwrap();
                match &c.custom_code {
                    Some(cc) if c.builtin.0 == 32 => cc.clone(),
                    _ => c.builtin.to_string(),
                }
            })
            .collect();
        let ref_seq: Vec<String> = s["op_sequence_subgraph0"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(seq, ref_seq, "{name}: op sequence");
        // Operator codes: builtin code and version.
        let codes = s["operator_codes"].as_array().unwrap();
        assert_eq!(codes.len(), model.operator_codes.len(), "{name}");
        for (c, r) in model.operator_codes.iter().zip(codes) {
            assert_eq!(
                i64::from(c.builtin.0),
                r["builtin_code"].as_i64().unwrap(),
                "{name}"
            );
            assert_eq!(
                i64::from(c.version),
                r["version"].as_i64().unwrap(),
                "{name}"
            );
        }
        let ins: Vec<u64> = sg.input_tensors().map(|t| t as u64).collect();
        let outs: Vec<u64> = sg.output_tensors().map(|t| t as u64).collect();
        let rins: Vec<u64> = s["subgraphs"][0]["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        let routs: Vec<u64> = s["subgraphs"][0]["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(ins, rins, "{name}: inputs");
        assert_eq!(outs, routs, "{name}: outputs");
        // Input/output details: dtype, shape, signature, quantization.
        for io in s["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .chain(s["outputs"].as_array().unwrap())
        {
            let t = &sg.tensors[io["index"].as_u64().unwrap() as usize];
            assert_eq!(t.name, io["name"].as_str().unwrap(), "{name}");
            assert_eq!(t.dtype.name(), io["dtype"].as_str().unwrap(), "{name}");
            let shape: Vec<i64> = io["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect();
            assert_eq!(
                t.shape.iter().map(|&d| i64::from(d)).collect::<Vec<_>>(),
                shape,
                "{name}"
            );
            if let Some(q) = io.get("quantization").filter(|q| !q.is_null()) {
                let tq = t.quantization.as_ref().expect("quantized tensor");
                let scales: Vec<f64> = q["scale"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap())
                    .collect();
                assert_eq!(tq.channels(), scales.len(), "{name}");
                for (a, b) in tq.scales().iter().zip(&scales) {
                    assert!(
                        (f64::from(*a) - b).abs() <= b.abs() * 1e-6,
                        "{name}: scale {a} vs {b}"
                    );
                }
                let zps: Vec<i64> = q["zero_point"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_i64().unwrap())
                    .collect();
                assert_eq!(tq.zero_points(), zps, "{name}");
                assert_eq!(
                    tq.quantized_dimension() as i64,
                    q["quantized_dimension"].as_i64().unwrap(),
                    "{name}"
                );
            }
        }
        // Signatures.
        let sigs = s["signature_defs"].as_array().unwrap();
        assert_eq!(sigs.len(), model.signatures.len(), "{name}");
        for (sig, r) in model.signatures.iter().zip(sigs) {
            assert_eq!(sig.key, r["key"].as_str().unwrap(), "{name}");
            assert_eq!(
                u64::from(sig.subgraph_index),
                r["subgraph_index"].as_u64().unwrap(),
                "{name}"
            );
            let rin = r["inputs"].as_object().unwrap();
            assert_eq!(sig.inputs.len(), rin.len(), "{name}");
            for st in &sig.inputs {
                assert_eq!(
                    rin[&st.name].as_u64().unwrap(),
                    u64::from(st.tensor_index),
                    "{name}"
                );
            }
            let rout = r["outputs"].as_object().unwrap();
            for st in &sig.outputs {
                assert_eq!(
                    rout[&st.name].as_u64().unwrap(),
                    u64::from(st.tensor_index),
                    "{name}"
                );
            }
        }
        let sparse = sg.tensors.iter().filter(|t| t.is_sparse).count();
        assert_eq!(
            sparse as u64,
            s["sparse_tensors"].as_u64().unwrap(),
            "{name}"
        );
    }
}

#[test]
fn lifetimes_match_reference() {
    let Some(shared) = shared() else { return };
    for (name, json, model) in references(&shared) {
        let m = &json["memory"];
        let lt = Lifetimes::compute(&model, &LifetimeOptions::default()).unwrap();
        assert_eq!(lt.num_ops as u64, m["num_ops"].as_u64().unwrap(), "{name}");
        // Reference planned tensors: everything except variables and unused ones.
        let mut expected = BTreeMap::new();
        for t in m["tensors"].as_array().unwrap() {
            let role = t["role"].as_str().unwrap();
            if role == "variable" || role == "unused" || role == "prepare_time_constant" {
                continue;
            }
            expected.insert(
                t["index"].as_u64().unwrap() as usize,
                (
                    t["bytes"].as_u64().unwrap() as usize,
                    t["first"].as_u64().unwrap() as usize,
                    t["last"].as_u64().unwrap() as usize,
                ),
            );
        }
        let ours: BTreeMap<usize, (usize, usize, usize)> = lt
            .planned
            .iter()
            .map(|p| (p.tensor, (p.bytes, p.first, p.last)))
            .collect();
        assert_eq!(
            ours, expected,
            "{name}: lifetime table (index -> bytes, first, last)"
        );
        assert_eq!(
            lt.num_planned() as u64,
            m["num_planned_tensors"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            lt.lower_bound(1) as u64,
            m["lower_bound_excl_prepare_time_constants_bytes"]
                .as_u64()
                .unwrap(),
            "{name}: lower bound"
        );
        assert_eq!(
            lt.lower_bound(16) as u64,
            m["lower_bound_align16_bytes"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            lt.lower_bound(64) as u64,
            m["lower_bound_align64_bytes"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            lt.naive_bytes() as u64,
            m["naive_excl_prepare_time_constants_bytes"]
                .as_u64()
                .unwrap(),
            "{name}"
        );
        let vars: Vec<_> = lt
            .persistent
            .iter()
            .filter(|p| p.kind == PersistentKind::Variable)
            .collect();
        assert_eq!(
            vars.len() as u64,
            m["variable_tensors"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            vars.iter().map(|v| v.bytes).sum::<usize>() as u64,
            m["variable_bytes"].as_u64().unwrap(),
            "{name}"
        );
        let ptc = lt
            .persistent
            .iter()
            .filter(|p| p.kind == PersistentKind::PrepareTimeConstant)
            .count();
        assert_eq!(
            ptc as u64,
            m["predicted_prepare_time_constants"].as_u64().unwrap(),
            "{name}"
        );
        let unused: Vec<u64> = m["unused_nonconst_tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(
            lt.unused.iter().map(|&u| u as u64).collect::<Vec<_>>(),
            unused,
            "{name}: unused"
        );
        assert!(lt.unsized_tensors.is_empty(), "{name}");
    }
}

#[test]
fn inplace_never_raises_the_bound() {
    let Some(shared) = shared() else { return };
    for (name, _json, model) in references(&shared) {
        let plain = Lifetimes::compute(&model, &LifetimeOptions::default()).unwrap();
        let inplace = Lifetimes::compute(
            &model,
            &LifetimeOptions {
                inplace: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(
            inplace.lower_bound_with_aliases(1) <= plain.lower_bound(1),
            "{name}"
        );
        for p in &inplace.planned {
            if let Some(r) = p.alias_of {
                let root = &inplace.planned[r];
                assert!(root.alias_of.is_none(), "{name}: alias of an alias");
                assert!(root.bytes >= p.bytes, "{name}");
            }
        }
        eprintln!(
            "{name}: lower bound {} -> {} with {} in-place aliases",
            plain.lower_bound(1),
            inplace.lower_bound_with_aliases(1),
            inplace
                .planned
                .iter()
                .filter(|p| p.alias_of.is_some())
                .count()
        );
    }
}

#[test]
fn builtin_options_match_their_operators() {
    use tensor_alloc::model::{BuiltinOp as Op, BuiltinOptions as O};
    let Some(shared) = shared() else { return };
    let mut checked = std::collections::BTreeMap::<String, usize>::new();
    for (name, _json, model) in references(&shared) {
        for (k, op) in model.subgraphs[0].operators.iter().enumerate() {
            let code = model.builtin_of(op).unwrap();
            let o = &op.builtin_options;
            let ok = match code {
                Op::CONV_2D => matches!(o, O::Conv2D { .. }),
                Op::DEPTHWISE_CONV_2D => matches!(o, O::DepthwiseConv2D { .. }),
                Op::FULLY_CONNECTED => matches!(o, O::FullyConnected { .. }),
                Op::SOFTMAX => matches!(o, O::Softmax { beta } if *beta > 0.0),
                Op::ADD => matches!(o, O::Add { .. }),
                Op::SUB => matches!(o, O::Sub { .. }),
                Op::MUL => matches!(o, O::Mul { .. }),
                Op::DIV => matches!(o, O::Div { .. }),
                Op::CAST => matches!(o, O::Cast { .. } | O::None),
                Op::MAXIMUM | Op::MINIMUM => matches!(o, O::Other { type_id: 39 } | O::None),
                Op::TRANSPOSE => matches!(o, O::Other { type_id: 26 } | O::None),
                Op::RESHAPE => matches!(o, O::Reshape { .. } | O::None),
                Op::AVERAGE_POOL_2D | Op::MAX_POOL_2D => {
                    matches!(o, O::Pool2D { filter_w, filter_h, stride_w, .. } if *filter_w > 0 && *filter_h > 0 && *stride_w > 0)
                }
                Op::SVDF => matches!(o, O::Svdf { rank, .. } if *rank > 0),
                Op::UNIDIRECTIONAL_SEQUENCE_LSTM => {
                    matches!(o, O::UnidirectionalSequenceLstm { .. })
                }
                Op::CONCATENATION => matches!(o, O::Concatenation { .. }),
                Op::MEAN | Op::SUM => matches!(o, O::Reducer { .. }),
                Op::STRIDED_SLICE => matches!(o, O::StridedSlice { .. }),
                Op::QUANTIZE => matches!(o, O::Other { type_id: 89 } | O::None),
                Op::DEQUANTIZE => matches!(o, O::Other { type_id: 38 } | O::None),
                Op::PAD => matches!(o, O::Other { type_id: 22 } | O::None),
                Op::CUSTOM => matches!(o, O::None),
                _ => true,
            };
            assert!(ok, "{name}: operator {k} {code} has options {o:?}");
            *checked.entry(code.to_string()).or_default() += 1;
        }
    }
    eprintln!("options checked per op: {checked:?}");
    assert!(checked.contains_key("CONV_2D") && checked.contains_key("SVDF"));
}
