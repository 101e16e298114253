//! Graph IR of a TFLite model, the `.tflite` reader and writer ([`tflite`]), and tensor lifetimes
//! for the memory planner ([`lifetimes`]).
//!
//! A [`Model`] owns the file bytes (shared, [`ModelBytes`]) and describes constant tensor data as
//! byte ranges into them, so loading a model copies no weights. Loading a file allocates
//! fallibly: out of memory is [`ModelError::OutOfMemory`], never an abort. Every index in the IR (buffer,
//! opcode, tensor, subgraph) was bounds-checked by the reader, so the accessors here cannot go
//! out of range on a loaded model.

pub mod builder;
pub mod bytes;
pub mod error;
pub mod lifetimes;
pub mod ops;
pub mod options;
pub mod summary;
pub mod tflite;

use core::ops::Range;
use rust_alloc::{borrow::Cow, boxed::Box, string::String, string::ToString, vec::Vec};

pub use crate::tensor::{DType, Quantization};
pub use builder::ModelBuilder;
pub use bytes::{ModelBytes, MODEL_BYTES_ALIGNMENT};
pub use error::ModelError;
pub use lifetimes::{
    LifetimeOptions, Lifetimes, PersistentKind, PersistentTensor, PlannedTensor, TensorRole,
};
pub use ops::BuiltinOp;
pub use options::{Activation, BuiltinOptions, Padding};

/// `QuantizationParameters.min` / `max`: the float range the converter calibrated a tensor to
/// (one pair per tensor or per channel). No kernel reads it; it is kept so that writing a model
/// back loses nothing.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct CalibrationRange {
    /// `min`.
    pub min: Vec<f32>,
    /// `max`.
    pub max: Vec<f32>,
}

/// `SparseIndexVector` union of the schema: the integer width a sparse index array is stored in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SparseIndexVector {
    /// `Int32Vector`.
    Int32(Vec<i32>),
    /// `Uint16Vector`.
    Uint16(Vec<u16>),
    /// `Uint8Vector`.
    Uint8(Vec<u8>),
}

impl SparseIndexVector {
    /// Number of entries.
    pub fn len(&self) -> usize {
        match self {
            SparseIndexVector::Int32(v) => v.len(),
            SparseIndexVector::Uint16(v) => v.len(),
            SparseIndexVector::Uint8(v) => v.len(),
        }
    }
    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Entry `i` widened to `i64`, `None` out of range.
    pub fn get(&self, i: usize) -> Option<i64> {
        match self {
            SparseIndexVector::Int32(v) => v.get(i).map(|&x| i64::from(x)),
            SparseIndexVector::Uint16(v) => v.get(i).map(|&x| i64::from(x)),
            SparseIndexVector::Uint8(v) => v.get(i).map(|&x| i64::from(x)),
        }
    }
}

/// `DimensionMetadata` of the schema: how one level of the traversal order is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DimensionMetadata {
    /// `format`: 0 = `DENSE`, 1 = `SPARSE_CSR` (other values kept as read).
    pub format: i8,
    /// `dense_size` (dense levels).
    pub dense_size: i32,
    /// `array_segments` (CSR levels).
    pub array_segments: Option<SparseIndexVector>,
    /// `array_indices` (CSR levels).
    pub array_indices: Option<SparseIndexVector>,
}

/// `SparsityParameters` of the schema (TACO-style sparse storage of a constant tensor).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Sparsity {
    /// `traversal_order`: the original dimensions, then the block dimensions, in storage order.
    pub traversal_order: Vec<i32>,
    /// `block_map`: for each block dimension, the original dimension it blocks.
    pub block_map: Vec<i32>,
    /// `dim_metadata`: one entry per level of `traversal_order`.
    pub dim_metadata: Vec<DimensionMetadata>,
}

/// A tensor as a subgraph declares it (the schema's `Tensor` table): type, shape, where its
/// constant data is. Tensors that hold data are [`crate::tensor::Tensor`].
#[derive(Clone, Debug, PartialEq)]
pub struct TensorDef {
    /// `name` (empty when absent): borrowed in place when the model's bytes live for the whole
    /// program ([`ModelBytes::from_static`]), else owned.
    pub name: Cow<'static, str>,
    /// `type`.
    pub dtype: DType,
    /// `shape` (static shape; `-1` only appears in `shape_signature`).
    pub shape: Cow<'static, [i32]>,
    /// `shape_signature` with `-1` for dynamic dimensions, when present.
    pub shape_signature: Option<Vec<i32>>,
    /// `buffer`: index into [`Model::buffers`]; 0 is the empty sentinel.
    pub buffer: u32,
    /// The affine parameters of `quantization` (`scale`, `zero_point`, `quantized_dimension`),
    /// when it has scales.
    pub quantization: Option<Quantization>,
    /// `quantization.min` / `max`, when present (boxed: most tensors have none, and the table
    /// of every tensor would otherwise carry its size).
    pub calibration: Option<Box<CalibrationRange>>,
    /// Whether `quantization.details` (a custom quantization) is present; its content is not
    /// decoded.
    pub custom_quantization: bool,
    /// `is_variable`: state kept across invocations (LSTM/SVDF state).
    pub is_variable: bool,
    /// Whether `sparsity` parameters are present (the tensor is stored sparse and must be
    /// densified, e.g. by a DENSIFY op).
    pub is_sparse: bool,
    /// The `sparsity` parameters, when present (as read; validated by their consumer; boxed
    /// like `calibration`).
    pub sparsity: Option<Box<Sparsity>>,
    /// `has_rank`.
    pub has_rank: bool,
}

impl TensorDef {
    /// Number of elements of the static `shape`; `None` on overflow or a negative dimension
    /// (`-1` belongs in `shape_signature`; in `shape` it is not a size).
    pub fn num_elements(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |acc, &d| {
            let d = usize::try_from(d).ok()?;
            acc.checked_mul(d)
        })
    }

    /// Bytes of the dense tensor (`prod(shape) * sizeof(dtype)`, int4 packed two per byte is NOT
    /// assumed: one byte per element), `None` for types without a fixed size, on overflow or on
    /// a negative dimension. [`Tensor::static_byte_size`] tells these apart.
    pub fn byte_size(&self) -> Option<usize> {
        self.num_elements()?.checked_mul(self.dtype.size()?)
    }

    /// Bytes of the dense tensor: `Ok(None)` when the type has no fixed size (string,
    /// resource, variant: allocated at run time), `Err` (what is wrong) when the static
    /// `shape` has a negative dimension or its byte size overflows.
    pub fn static_byte_size(&self) -> Result<Option<usize>, String> {
        if let Some(d) = self.shape.iter().find(|&&d| d < 0) {
            return Err(format!(
                "shape {:?} has the negative dimension {d} (a dynamic dimension belongs in shape_signature; shape holds the static size)",
                self.shape
            ));
        }
        let Some(elem) = self.dtype.size() else {
            return Ok(None);
        };
        self.num_elements()
            .and_then(|n| n.checked_mul(elem))
            .map(Some)
            .ok_or_else(|| {
                format!(
                    "shape {:?} of {} overflows the byte size",
                    self.shape,
                    self.dtype.name()
                )
            })
    }
}

/// Most bytes the tensors of one model may add up to (all subgraphs, every tensor of a fixed
/// size counted once): what one allocation can hold (`isize::MAX`, the limit of Rust's
/// `Layout`). A model beyond it cannot be planned or run in this address space, and with it every
/// sum of tensor sizes in the crate (naive totals, lower bounds, persistent sections) fits a
/// `usize`.
pub const MAX_MODEL_TENSOR_BYTES: usize = isize::MAX as usize;

/// Refuses tensors whose byte sizes cannot fit the address space, alone or summed over the
/// model ([`MAX_MODEL_TENSOR_BYTES`]); names the first tensor that does not fit and its byte
/// count. Tensors with a negative dimension or no fixed element size are left to their
/// consumers (they are not sized here).
pub(crate) fn check_tensor_sizes(subgraphs: &[Subgraph]) -> Result<(), ModelError> {
    const MAX: u128 = MAX_MODEL_TENSOR_BYTES as u128;
    let mut total: u128 = 0;
    for (si, sg) in subgraphs.iter().enumerate() {
        for (ti, t) in sg.tensors.iter().enumerate() {
            if t.shape.iter().any(|&d| d < 0) {
                continue;
            }
            let Some(elem) = t.dtype.size() else {
                continue;
            };
            // `{:?}` escapes control characters, so a name cannot drive a terminal.
            let location = || format!("subgraphs[{si}].tensors[{ti}] ({:?})", t.name);
            let bytes = t
                .shape
                .iter()
                .try_fold(elem as u128, |acc, &d| acc.checked_mul(d as u128));
            let bytes = match bytes {
                Some(b) if b <= MAX => b,
                Some(b) => {
                    return Err(ModelError::invalid(
                        location(),
                        format!(
                            "shape {:?} of {} is {b} bytes, more than the {MAX} bytes one allocation can hold in this address space",
                            t.shape,
                            t.dtype.name()
                        ),
                    ))
                }
                None => {
                    return Err(ModelError::invalid(
                        location(),
                        format!(
                            "shape {:?} of {} is more than 2^128 bytes, more than the {MAX} bytes one allocation can hold in this address space",
                            t.shape,
                            t.dtype.name()
                        ),
                    ))
                }
            };
            total += bytes;
            if total > MAX {
                return Err(ModelError::invalid(
                    location(),
                    format!(
                        "its {bytes} bytes (shape {:?} of {}) bring the model's tensors to {total} bytes, more than the {MAX} bytes this address space can hold",
                        t.shape,
                        t.dtype.name()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A raw data buffer of the model: constant tensor data or metadata.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Buffer {
    /// Byte range of the data inside [`Model::bytes`]; `None` when the buffer is empty.
    pub data: Option<Range<usize>>,
    /// Whether the data is stored outside the flatbuffer (`offset`/`size` fields, models over
    /// 2 GiB) rather than in the `data` vector.
    pub external: bool,
}

/// An operator code of the model (`OperatorCode`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorCode {
    /// The effective builtin code: the larger of `deprecated_builtin_code` and `builtin_code`
    /// (the schema's rule for files written before and after the code space grew past 127).
    pub builtin: BuiltinOp,
    /// `deprecated_builtin_code` as stored.
    pub deprecated_builtin_code: i8,
    /// `custom_code` for CUSTOM operators.
    pub custom_code: Option<String>,
    /// `version` (default 1).
    pub version: i32,
}

impl OperatorCode {
    /// A builtin operator code.
    pub fn builtin(op: BuiltinOp, version: i32) -> Self {
        OperatorCode {
            builtin: op,
            deprecated_builtin_code: i8::try_from(op.0)
                .unwrap_or(BuiltinOp::PLACEHOLDER_FOR_GREATER_OP_CODES.0 as i8),
            custom_code: None,
            version,
        }
    }

    /// A custom operator code.
    pub fn custom(name: &str, version: i32) -> Self {
        OperatorCode {
            builtin: BuiltinOp::CUSTOM,
            deprecated_builtin_code: BuiltinOp::CUSTOM.0 as i8,
            custom_code: Some(name.to_string()),
            version,
        }
    }

    /// Display name: the builtin name, `CUSTOM(name)` for custom ops, or `UNKNOWN_BUILTIN_n`.
    pub fn display_name(&self) -> String {
        match (&self.custom_code, self.builtin) {
            (Some(c), BuiltinOp::CUSTOM) => format!("CUSTOM({c})"),
            (_, op) => op.to_string(),
        }
    }
}

/// An operator (node) of a subgraph.
#[derive(Clone, Debug, PartialEq)]
pub struct Operator {
    /// `opcode_index` into [`Model::operator_codes`].
    pub opcode_index: u32,
    /// `inputs`: tensor indices, `-1` for an omitted optional input.
    pub inputs: Vec<i32>,
    /// `outputs`: tensor indices (`-1` tolerated and ignored).
    pub outputs: Vec<i32>,
    /// `intermediates`: tensors internal to the op (often only carrying quantization params).
    pub intermediates: Vec<i32>,
    /// Decoded `builtin_options`.
    pub builtin_options: BuiltinOptions,
    /// `custom_options` bytes (or the large custom options stored outside the flatbuffer).
    pub custom_options: Vec<u8>,
    /// `mutating_variable_inputs`.
    pub mutating_variable_inputs: Vec<bool>,
}

impl Operator {
    /// Input tensor indices, skipping omitted (`-1`) ones.
    pub fn input_tensors(&self) -> impl Iterator<Item = usize> + '_ {
        self.inputs.iter().filter_map(|&i| usize::try_from(i).ok())
    }
    /// Output tensor indices, skipping `-1`.
    pub fn output_tensors(&self) -> impl Iterator<Item = usize> + '_ {
        self.outputs.iter().filter_map(|&i| usize::try_from(i).ok())
    }
}

/// A subgraph: tensors, operators in execution order, inputs and outputs.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Subgraph {
    /// `name`, when present.
    pub name: Option<String>,
    /// `tensors`.
    pub tensors: Vec<TensorDef>,
    /// `inputs` (tensor indices).
    pub inputs: Vec<i32>,
    /// `outputs` (tensor indices).
    pub outputs: Vec<i32>,
    /// `operators` in execution order.
    pub operators: Vec<Operator>,
}

impl Subgraph {
    /// Graph input tensor indices (skipping `-1`).
    pub fn input_tensors(&self) -> impl Iterator<Item = usize> + '_ {
        self.inputs.iter().filter_map(|&i| usize::try_from(i).ok())
    }
    /// Graph output tensor indices (skipping `-1`).
    pub fn output_tensors(&self) -> impl Iterator<Item = usize> + '_ {
        self.outputs.iter().filter_map(|&i| usize::try_from(i).ok())
    }
}

/// A named metadata entry (`Metadata`): a name and the buffer holding its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metadata {
    /// `name`.
    pub name: String,
    /// `buffer` index into [`Model::buffers`].
    pub buffer: u32,
}

/// A named tensor of a signature (`TensorMap`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureTensor {
    /// The alias name.
    pub name: String,
    /// Tensor index in the signature's subgraph.
    pub tensor_index: u32,
}

/// A signature (`SignatureDef`): named entry point into a subgraph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureDef {
    /// `signature_key`.
    pub key: String,
    /// `subgraph_index`.
    pub subgraph_index: u32,
    /// Named inputs.
    pub inputs: Vec<SignatureTensor>,
    /// Named outputs.
    pub outputs: Vec<SignatureTensor>,
}

/// Name of the TFLM metadata entry holding offline-planned tensor offsets.
pub const OFFLINE_MEMORY_ALLOCATION: &str = "OfflineMemoryAllocation";

/// A TFLite model: the graph IR plus the file bytes the constant data lives in.
#[derive(Clone)]
pub struct Model {
    /// The file bytes (for a [`ModelBuilder`] model: the blob holding its constant data).
    pub bytes: ModelBytes,
    /// Schema `version` (3 for current files).
    pub version: u32,
    /// `description`, when present.
    pub description: Option<String>,
    /// `operator_codes`.
    pub operator_codes: Vec<OperatorCode>,
    /// `subgraphs`; 0 is the main graph.
    pub subgraphs: Vec<Subgraph>,
    /// `buffers`; 0 is the empty sentinel.
    pub buffers: Vec<Buffer>,
    /// `metadata`.
    pub metadata: Vec<Metadata>,
    /// `signature_defs`.
    pub signatures: Vec<SignatureDef>,
}

impl core::fmt::Debug for Model {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Model")
            .field("bytes", &format_args!("<{} bytes>", self.bytes.len()))
            .field("version", &self.version)
            .field("description", &self.description)
            .field("operator_codes", &self.operator_codes)
            .field("subgraphs", &self.subgraphs)
            .field("buffers", &self.buffers)
            .field("metadata", &self.metadata)
            .field("signatures", &self.signatures)
            .finish()
    }
}

impl PartialEq for Model {
    /// Structural equality: every IR field, with buffers compared by their bytes (not by where
    /// they sit in the file).
    fn eq(&self, other: &Self) -> bool {
        self.version == other.version
            && self.description == other.description
            && self.operator_codes == other.operator_codes
            && self.subgraphs == other.subgraphs
            && self.metadata == other.metadata
            && self.signatures == other.signatures
            && self.buffers.len() == other.buffers.len()
            && (0..self.buffers.len()).all(|i| {
                self.buffer_data(i) == other.buffer_data(i)
                    && self.buffers[i].external == other.buffers[i].external
            })
    }
}

impl Model {
    /// Reads a `.tflite` file (verify, then decode). See [`tflite::read_model`].
    #[cfg(feature = "std")]
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Model, ModelError> {
        tflite::load(path)
    }

    /// Maps a `.tflite` file instead of reading it ([`ModelBytes::map`], as LiteRT's
    /// `FlatBufferModel::BuildFromFile`): the same checks and decoding as [`load`](Self::load),
    /// no copy of the file in memory, its pages shared with the page cache.
    ///
    /// # Safety
    /// The file is neither modified nor truncated, by any process, while the model, its bytes
    /// or anything built from them (an interpreter) live (see [`ModelBytes::map`]).
    #[cfg(all(feature = "std", unix))]
    pub unsafe fn load_mapped(path: impl AsRef<std::path::Path>) -> Result<Model, ModelError> {
        // SAFETY: the caller's promise.
        unsafe { tflite::load_mapped(path) }
    }

    /// Decodes a model from bytes (verify, then decode). See [`tflite::read_model`]. The bytes
    /// are kept as given (an `Arc<[u8]>` is shared, a `Vec<u8>` or slice becomes one).
    pub fn from_bytes(bytes: impl Into<ModelBytes>) -> Result<Model, ModelError> {
        tflite::read_model(bytes.into())
    }

    /// Serializes the model to a `.tflite` flatbuffer. See [`tflite::write_model`].
    pub fn to_bytes(&self) -> Result<Vec<u8>, ModelError> {
        tflite::write_model(self)
    }

    /// Checks every index of the IR (opcode, tensor, buffer, subgraph) and every buffer range
    /// against [`Model::bytes`]. The reader guarantees this for the models it returns; call it on
    /// a model assembled or edited by hand before analysing it ([`Lifetimes::compute`] does).
    pub fn validate(&self) -> Result<(), ModelError> {
        use tflite::check_index as check;
        if self.subgraphs.is_empty() {
            return Err(ModelError::NoSubgraphs);
        }
        check_tensor_sizes(&self.subgraphs)?;
        for (i, b) in self.buffers.iter().enumerate() {
            if let Some(r) = &b.data {
                if r.start > r.end || r.end > self.bytes.len() {
                    return Err(ModelError::invalid(
                        format!("buffers[{i}]"),
                        format!(
                            "data range {}..{} outside the {} model bytes",
                            r.start,
                            r.end,
                            self.bytes.len()
                        ),
                    ));
                }
            }
        }
        let nbuf = self.buffers.len().max(1);
        for (si, sg) in self.subgraphs.iter().enumerate() {
            let n = sg.tensors.len();
            for (ti, t) in sg.tensors.iter().enumerate() {
                check(
                    || format!("subgraphs[{si}].tensors[{ti}].buffer"),
                    i64::from(t.buffer),
                    nbuf,
                    "buffers",
                    false,
                )?;
            }
            for (k, &t) in sg.inputs.iter().enumerate() {
                check(
                    || format!("subgraphs[{si}].inputs[{k}]"),
                    i64::from(t),
                    n,
                    "tensors of the subgraph",
                    false,
                )?;
            }
            for (k, &t) in sg.outputs.iter().enumerate() {
                check(
                    || format!("subgraphs[{si}].outputs[{k}]"),
                    i64::from(t),
                    n,
                    "tensors of the subgraph",
                    false,
                )?;
            }
            for (oi, op) in sg.operators.iter().enumerate() {
                check(
                    || format!("subgraphs[{si}].operators[{oi}].opcode_index"),
                    i64::from(op.opcode_index),
                    self.operator_codes.len(),
                    "operator_codes",
                    false,
                )?;
                for (field, list) in [
                    ("inputs", &op.inputs),
                    ("outputs", &op.outputs),
                    ("intermediates", &op.intermediates),
                ] {
                    for (k, &t) in list.iter().enumerate() {
                        check(
                            || format!("subgraphs[{si}].operators[{oi}].{field}[{k}]"),
                            i64::from(t),
                            n,
                            "tensors of the subgraph",
                            true,
                        )?;
                    }
                }
            }
        }
        for (i, m) in self.metadata.iter().enumerate() {
            check(
                || format!("metadata[{i}].buffer"),
                i64::from(m.buffer),
                self.buffers.len(),
                "buffers",
                false,
            )?;
        }
        for (i, s) in self.signatures.iter().enumerate() {
            check(
                || format!("signature_defs[{i}].subgraph_index"),
                i64::from(s.subgraph_index),
                self.subgraphs.len(),
                "subgraphs",
                false,
            )?;
            let n = self.subgraphs[s.subgraph_index as usize].tensors.len();
            for (field, list) in [("inputs", &s.inputs), ("outputs", &s.outputs)] {
                for (k, t) in list.iter().enumerate() {
                    check(
                        || format!("signature_defs[{i}].{field}[{k}].tensor_index"),
                        i64::from(t.tensor_index),
                        n,
                        "tensors of the signature's subgraph",
                        false,
                    )?;
                }
            }
        }
        Ok(())
    }

    /// The bytes of buffer `index` (empty for the sentinel, an empty buffer, or an index out of
    /// range).
    pub fn buffer_data(&self, index: usize) -> &[u8] {
        self.buffers
            .get(index)
            .and_then(|b| b.data.clone())
            .and_then(|r| self.bytes.get(r))
            .unwrap_or(&[])
    }

    /// The constant data of a tensor (`None` when the tensor has no data: an activation,
    /// variable or input).
    pub fn tensor_data(&self, subgraph: usize, tensor: usize) -> Option<&[u8]> {
        let t = self.subgraphs.get(subgraph)?.tensors.get(tensor)?;
        let d = self.buffer_data(t.buffer as usize);
        (!d.is_empty()).then_some(d)
    }

    /// Whether the tensor is a constant (its buffer holds data).
    pub fn is_constant(&self, subgraph: usize, tensor: usize) -> bool {
        self.tensor_data(subgraph, tensor).is_some()
    }

    /// The operator code of an operator.
    pub fn opcode(&self, op: &Operator) -> Option<&OperatorCode> {
        self.operator_codes.get(op.opcode_index as usize)
    }

    /// The builtin operator of an operator (CUSTOM for custom ops), `None` if its opcode index
    /// is out of range (cannot happen for a model produced by the reader).
    pub fn builtin_of(&self, op: &Operator) -> Option<BuiltinOp> {
        self.opcode(op).map(|c| c.builtin)
    }

    /// The bytes of the metadata entry called `name`.
    pub fn metadata_bytes(&self, name: &str) -> Option<&[u8]> {
        self.metadata
            .iter()
            .find(|m| m.name == name)
            .map(|m| self.buffer_data(m.buffer as usize))
    }

    /// The offline memory plan of subgraph 0 stored as TFLM's `OfflineMemoryAllocation`
    /// metadata: one entry per tensor, `Some(offset)` for offline-planned tensors, `None` for
    /// "plan at run time" (-1). `Ok(None)` when the model has no such metadata.
    ///
    /// The format is parsed by [`crate::planner::OfflinePlan`] (words: format version, subgraph,
    /// count `n`, then `n` offsets; neither the version nor the subgraph word is checked, as in
    /// TFLM); the count must equal the number of tensors of subgraph 0, as TFLM requires.
    pub fn offline_plan(&self) -> Result<Option<Vec<Option<usize>>>, ModelError> {
        let Some(bytes) = self.metadata_bytes(OFFLINE_MEMORY_ALLOCATION) else {
            return Ok(None);
        };
        let loc = "metadata[OfflineMemoryAllocation]";
        let plan = crate::planner::OfflinePlan::from_bytes(bytes)
            .map_err(|e| ModelError::invalid(loc, e.to_string()))?;
        let tensors = self.subgraphs.first().map_or(0, |s| s.tensors.len());
        if plan.offsets.len() != tensors {
            return Err(ModelError::invalid(
                loc,
                format!(
                    "{} offsets, expected one per tensor of subgraph 0 ({tensors})",
                    plan.offsets.len()
                ),
            ));
        }
        Ok(Some(plan.offsets))
    }

    /// A copy of the model with metadata entry `name` set to `bytes` (replacing an entry of that
    /// name, or added). The data is appended to a copy of [`Model::bytes`].
    pub fn with_metadata(&self, name: &str, bytes: &[u8]) -> Model {
        let mut data = self.bytes.to_vec();
        let start = data.len().next_multiple_of(16);
        data.resize(start, 0);
        data.extend_from_slice(bytes);
        let mut m = self.clone();
        m.bytes = data.into();
        let new_buffer = Buffer {
            data: (!bytes.is_empty()).then_some(start..start + bytes.len()),
            external: false,
        };
        // Replacing an entry reuses its buffer when nothing else refers to it, so embedding
        // again does not add a buffer (and the written file does not grow) each time.
        let reusable = m
            .metadata
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.buffer)
            .filter(|&b| {
                b != 0
                    && (b as usize) < m.buffers.len()
                    && m.metadata.iter().filter(|e| e.buffer == b).count() == 1
                    && !m
                        .subgraphs
                        .iter()
                        .any(|sg| sg.tensors.iter().any(|t| t.buffer == b))
            });
        let buffer = match reusable {
            Some(b) => {
                m.buffers[b as usize] = new_buffer;
                b
            }
            None => {
                m.buffers.push(new_buffer);
                (m.buffers.len() - 1) as u32
            }
        };
        match m.metadata.iter_mut().find(|e| e.name == name) {
            Some(e) => e.buffer = buffer,
            None => m.metadata.push(Metadata {
                name: name.to_string(),
                buffer,
            }),
        }
        m
    }

    /// Encodes an offline plan in TFLM's `OfflineMemoryAllocation` metadata format (see
    /// [`Model::offline_plan`]; version 1, subgraph 0).
    pub fn encode_offline_plan(offsets: &[Option<usize>]) -> Result<Vec<u8>, ModelError> {
        crate::planner::OfflinePlan {
            version: 1,
            subgraph: 0,
            offsets: offsets.to_vec(),
        }
        .to_bytes()
        .map_err(|e| ModelError::Write(e.to_string()))
    }

    /// A copy of the model with `offsets` (one per tensor of subgraph 0) embedded as
    /// `OfflineMemoryAllocation` metadata, so TFLM (and this crate's planners) use them as fixed
    /// offsets.
    pub fn with_offline_plan(&self, offsets: &[Option<usize>]) -> Result<Model, ModelError> {
        let tensors = self.subgraphs.first().map_or(0, |s| s.tensors.len());
        if offsets.len() != tensors {
            return Err(ModelError::Write(format!(
                "offline plan has {} offsets, expected one per tensor of subgraph 0 ({tensors})",
                offsets.len()
            )));
        }
        Ok(self.with_metadata(
            OFFLINE_MEMORY_ALLOCATION,
            &Self::encode_offline_plan(offsets)?,
        ))
    }
}
