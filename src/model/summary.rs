//! What a `.tflite` file contains, as plain serialisable data: operator codes, subgraphs with
//! their operators and tensors, signatures, metadata, the offline plan and the memory facts of
//! subgraph 0. `tensor-alloc inspect` renders a [`ModelSummary`] as text or JSON; a program can
//! use it the same way.
//!
//! Names stay as the file has them, except the keys of [`SubgraphSummary::op_counts`], which are
//! [`printable`] (they are meant for display).

use rust_alloc::borrow::Cow;
use rust_alloc::collections::BTreeMap;
use rust_alloc::{string::String, string::ToString, vec::Vec};

use serde::{Serialize, Serializer};

use super::{
    LifetimeOptions, Lifetimes, Model, ModelError, Quantization, SignatureTensor, Subgraph,
};

/// `s` with control characters (escape sequences, carriage returns, NUL, ...) written as
/// `\u{..}` escapes, so names from a model file cannot drive a terminal.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A whole model.
#[derive(Clone, Debug, Serialize)]
pub struct ModelSummary {
    /// Size of the file.
    pub file_bytes: usize,
    /// `Model.version`.
    pub schema_version: u32,
    /// `Model.description`.
    pub description: Option<String>,
    /// Number of subgraphs in the file (not only those summarised).
    pub subgraph_count: usize,
    /// Number of buffers.
    #[serde(skip)]
    pub buffer_count: usize,
    /// Every operator code.
    pub operator_codes: Vec<OperatorCodeSummary>,
    /// Names of the builtin codes this crate does not know (kept, not understood).
    pub unknown_builtin_ops: Vec<String>,
    /// `custom_code` of every custom operator code.
    pub custom_ops: Vec<String>,
    /// The summarised subgraphs (see [`ModelSummary::new`]).
    pub subgraphs: Vec<SubgraphSummary>,
    /// Signature definitions.
    pub signatures: Vec<SignatureSummary>,
    /// Metadata entries.
    pub metadata: Vec<MetadataSummary>,
    /// Tensors at fixed offsets in a valid offline memory plan.
    pub offline_planned_tensors: Option<usize>,
    /// Entries of a valid offline memory plan (one per tensor of subgraph 0).
    #[serde(skip)]
    pub offline_plan_entries: Option<usize>,
    /// Why the offline memory plan is invalid (then it is ignored, and the rest still read).
    pub offline_plan_error: Option<String>,
    /// Memory facts of subgraph 0 (absent for a model without subgraphs).
    pub memory: Option<MemoryFacts>,
}

/// One operator code.
#[derive(Clone, Debug, Serialize)]
pub struct OperatorCodeSummary {
    /// Builtin name, or the custom code of a custom operator.
    pub name: String,
    /// Raw builtin code.
    pub builtin_code: i32,
    /// Operator version.
    pub version: i32,
}

/// One subgraph.
#[derive(Clone, Debug, Serialize)]
pub struct SubgraphSummary {
    /// Subgraph index.
    pub index: usize,
    /// `SubGraph.name`.
    pub name: Option<String>,
    /// Graph inputs (tensor indices).
    pub inputs: Vec<i32>,
    /// Graph outputs (tensor indices).
    pub outputs: Vec<i32>,
    /// Operators per (printable) operator name.
    pub op_counts: BTreeMap<String, usize>,
    /// Operators in execution order.
    pub operators: Vec<OperatorSummary>,
    /// Every tensor.
    pub tensors: Vec<TensorSummary>,
}

/// One operator.
#[derive(Clone, Debug, Serialize)]
pub struct OperatorSummary {
    /// Operator name (`None` for an opcode index the model does not have).
    pub op: Option<String>,
    /// Input tensor indices (-1 = optional input absent).
    pub inputs: Vec<i32>,
    /// Output tensor indices.
    pub outputs: Vec<i32>,
    /// The decoded builtin options (`Debug` form).
    pub options: String,
}

/// What a tensor is to the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum TensorSource {
    /// Constant data in a buffer.
    #[serde(rename = "const")]
    Const,
    /// Variable state.
    #[serde(rename = "variable")]
    Variable,
    /// Computed by the graph (or fed by the caller).
    #[serde(rename = "activation")]
    Activation,
}

impl TensorSource {
    /// The name `inspect` shows.
    pub fn name(self) -> &'static str {
        match self {
            TensorSource::Const => "const",
            TensorSource::Variable => "variable",
            TensorSource::Activation => "activation",
        }
    }
}

/// One tensor.
#[derive(Clone, Debug, Serialize)]
pub struct TensorSummary {
    /// Tensor index.
    pub index: usize,
    /// Tensor name.
    pub name: String,
    /// Element type name.
    pub dtype: &'static str,
    /// Static shape.
    pub shape: Vec<i32>,
    /// Shape signature (-1 = dynamic dimension), when the file has one.
    pub shape_signature: Option<Vec<i32>>,
    /// Bytes of the tensor (`None` when the shape or type has no static size).
    pub bytes: Option<usize>,
    /// Constant, variable or activation.
    pub kind: TensorSource,
    /// Stored in a sparse format.
    pub sparse: bool,
    /// Quantization parameters.
    pub quantization: Option<QuantSummary>,
}

/// Quantization parameters of a tensor.
#[derive(Clone, Debug, Serialize)]
pub struct QuantSummary {
    /// Scales (one, or one per channel).
    pub scale: Vec<f32>,
    /// Zero points.
    pub zero_point: Vec<i64>,
    /// Dimension of the channels of a per-channel quantization.
    pub quantized_dimension: usize,
    /// More than one scale.
    pub per_channel: bool,
}

/// One signature definition.
#[derive(Clone, Debug, Serialize)]
pub struct SignatureSummary {
    /// `signature_key`.
    pub key: String,
    /// Subgraph the signature runs.
    pub subgraph_index: u32,
    /// Inputs: name and tensor index, in file order (serialised as a name -> index map).
    #[serde(serialize_with = "name_map")]
    pub inputs: Vec<(String, u32)>,
    /// Outputs, as `inputs`.
    #[serde(serialize_with = "name_map")]
    pub outputs: Vec<(String, u32)>,
}

/// One metadata entry.
#[derive(Clone, Debug, Serialize)]
pub struct MetadataSummary {
    /// Metadata name.
    pub name: String,
    /// Bytes of its buffer.
    pub bytes: usize,
}

/// Memory facts of subgraph 0 (default lifetime options).
#[derive(Clone, Debug, Serialize)]
pub struct MemoryFacts {
    /// Tensors the planner places.
    pub planned_tensors: usize,
    /// Largest sum of bytes live at one step: no plan can be smaller.
    pub lower_bound_bytes: usize,
    /// Sum of every planned tensor (no reuse).
    pub naive_bytes: usize,
    /// Variables and prepare-time constants (arena tail).
    pub persistent_bytes: usize,
    /// Number of persistent tensors.
    #[serde(skip)]
    pub persistent_tensors: usize,
    /// Tensors no operator reads or writes.
    pub unused_tensors: Vec<usize>,
}

fn name_map<S: Serializer>(list: &[(String, u32)], s: S) -> Result<S::Ok, S::Error> {
    let map: BTreeMap<&str, u32> = list.iter().map(|(n, i)| (n.as_str(), *i)).collect();
    map.serialize(s)
}

impl ModelSummary {
    /// Summarises `model`: subgraph 0, or every subgraph when `all_subgraphs`. A malformed
    /// offline plan is reported in [`offline_plan_error`](Self::offline_plan_error), not an
    /// error; lifetimes that cannot be computed are.
    pub fn new(model: &Model, all_subgraphs: bool) -> Result<ModelSummary, ModelError> {
        let (offline, offline_plan_error) = match model.offline_plan() {
            Ok(o) => (o, None),
            Err(e) => (None, Some(e.to_string())),
        };
        let shown = if all_subgraphs {
            model.subgraphs.len()
        } else {
            model.subgraphs.len().min(1)
        };
        Ok(ModelSummary {
            file_bytes: model.bytes.len(),
            schema_version: model.version,
            description: model.description.clone(),
            subgraph_count: model.subgraphs.len(),
            buffer_count: model.buffers.len(),
            operator_codes: operator_codes(model),
            unknown_builtin_ops: unknown_builtin_ops(model),
            custom_ops: custom_ops(model),
            subgraphs: (0..shown).map(|si| subgraph(model, si)).collect(),
            signatures: model.signatures.iter().map(signature).collect(),
            metadata: model
                .metadata
                .iter()
                .map(|m| MetadataSummary {
                    name: m.name.clone(),
                    bytes: model.buffer_data(m.buffer as usize).len(),
                })
                .collect(),
            offline_planned_tensors: offline
                .as_ref()
                .map(|o| o.iter().filter(|x| x.is_some()).count()),
            offline_plan_entries: offline.as_ref().map(Vec::len),
            memory: memory(model, offline_plan_error.is_some())?,
            offline_plan_error,
        })
    }
}

fn operator_codes(model: &Model) -> Vec<OperatorCodeSummary> {
    model
        .operator_codes
        .iter()
        .map(|c| OperatorCodeSummary {
            name: c.display_name(),
            builtin_code: c.builtin.0,
            version: c.version,
        })
        .collect()
}

fn unknown_builtin_ops(model: &Model) -> Vec<String> {
    model
        .operator_codes
        .iter()
        .filter(|c| !c.builtin.is_known())
        .map(|c| c.display_name())
        .collect()
}

fn custom_ops(model: &Model) -> Vec<String> {
    model
        .operator_codes
        .iter()
        .filter(|c| c.builtin == super::BuiltinOp::CUSTOM)
        .map(|c| c.custom_code.clone().unwrap_or_default())
        .collect()
}

fn op_counts(model: &Model, sg: &Subgraph) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for op in &sg.operators {
        let name = model
            .opcode(op)
            .map(|c| printable(&c.display_name()).into_owned())
            .unwrap_or_else(|| "INVALID_OPCODE".into());
        *counts.entry(name).or_insert(0) += 1;
    }
    counts
}

fn subgraph(model: &Model, si: usize) -> SubgraphSummary {
    let sg = &model.subgraphs[si];
    let operators = sg
        .operators
        .iter()
        .map(|op| OperatorSummary {
            op: model.opcode(op).map(|c| c.display_name()),
            inputs: op.inputs.clone(),
            outputs: op.outputs.clone(),
            options: format!("{:?}", op.builtin_options),
        })
        .collect();
    let tensors = sg
        .tensors
        .iter()
        .enumerate()
        .map(|(ti, t)| TensorSummary {
            index: ti,
            name: t.name.to_string(),
            dtype: t.dtype.name(),
            shape: t.shape.to_vec(),
            shape_signature: t.shape_signature.clone(),
            bytes: t.byte_size(),
            kind: if model.is_constant(si, ti) {
                TensorSource::Const
            } else if t.is_variable {
                TensorSource::Variable
            } else {
                TensorSource::Activation
            },
            sparse: t.is_sparse,
            quantization: t.quantization.as_ref().map(quant),
        })
        .collect();
    SubgraphSummary {
        index: si,
        name: sg.name.clone(),
        inputs: sg.inputs.clone(),
        outputs: sg.outputs.clone(),
        op_counts: op_counts(model, sg),
        operators,
        tensors,
    }
}

fn quant(q: &Quantization) -> QuantSummary {
    QuantSummary {
        scale: q.scales().to_vec(),
        zero_point: q.zero_points().to_vec(),
        quantized_dimension: q.quantized_dimension(),
        per_channel: q.is_per_channel(),
    }
}

fn signature(s: &super::SignatureDef) -> SignatureSummary {
    let pairs = |l: &[SignatureTensor]| {
        l.iter()
            .map(|t| (t.name.clone(), t.tensor_index))
            .collect::<Vec<_>>()
    };
    SignatureSummary {
        key: s.key.clone(),
        subgraph_index: s.subgraph_index,
        inputs: pairs(&s.inputs),
        outputs: pairs(&s.outputs),
    }
}

fn memory(model: &Model, ignore_offline_plan: bool) -> Result<Option<MemoryFacts>, ModelError> {
    if model.subgraphs.is_empty() {
        return Ok(None);
    }
    let opts = LifetimeOptions {
        ignore_offline_plan,
        ..Default::default()
    };
    let lt = Lifetimes::compute(model, &opts)?;
    Ok(Some(MemoryFacts {
        planned_tensors: lt.num_planned(),
        lower_bound_bytes: lt.lower_bound(1),
        naive_bytes: lt.naive_bytes(),
        persistent_bytes: lt.persistent_bytes(),
        persistent_tensors: lt.persistent.len(),
        unused_tensors: lt.unused.clone(),
    }))
}

impl QuantSummary {
    /// One-line description: `scale S zp Z`, or the per-channel scale range; empty without
    /// scales.
    pub fn text(&self) -> String {
        if self.scale.is_empty() {
            String::new()
        } else if self.per_channel {
            format!(
                "per-channel x{} on dim {} (scale {:.3e}..{:.3e})",
                self.scale.len(),
                self.quantized_dimension,
                self.scale.iter().cloned().fold(f32::INFINITY, f32::min),
                self.scale.iter().cloned().fold(f32::NEG_INFINITY, f32::max)
            )
        } else {
            format!(
                "scale {:.6e} zp {}",
                self.scale[0],
                self.zero_point.first().copied().unwrap_or(0)
            )
        }
    }
}
