//! [`ModelBuilder`]: builds a single-subgraph [`Model`] in memory (for tests, demos and for
//! writing small models with [`Model::to_bytes`]).

use super::options::BuiltinOptions;
use super::{
    Buffer, BuiltinOp, DType, Metadata, Model, ModelError, Operator, OperatorCode, Quantization,
    SignatureDef, SignatureTensor, Subgraph, TensorDef,
};
use rust_alloc::{string::String, string::ToString, vec::Vec};

/// Builds a model with one subgraph. Tensor and operator indices are returned by the `add_*`
/// methods; constant data is collected in one blob that becomes [`Model::bytes`].
#[derive(Debug)]
pub struct ModelBuilder {
    data: Vec<u8>,
    buffers: Vec<Buffer>,
    codes: Vec<OperatorCode>,
    subgraph: Subgraph,
    metadata: Vec<Metadata>,
    signatures: Vec<SignatureDef>,
    description: Option<String>,
}

impl ModelBuilder {
    /// A builder for a model whose subgraph is called `name`.
    pub fn new(name: &str) -> Self {
        ModelBuilder {
            data: Vec::new(),
            buffers: vec![Buffer::default()],
            codes: Vec::new(),
            subgraph: Subgraph {
                name: Some(name.to_string()),
                ..Subgraph::default()
            },
            metadata: Vec::new(),
            signatures: Vec::new(),
            description: None,
        }
    }

    /// Sets the model description.
    pub fn description(&mut self, text: &str) -> &mut Self {
        self.description = Some(text.to_string());
        self
    }

    fn push_buffer(&mut self, bytes: &[u8]) -> u32 {
        // Keep constant data 16-byte aligned inside the blob, as the schema asks of files.
        let start = self.data.len().next_multiple_of(16);
        self.data.resize(start, 0);
        self.data.extend_from_slice(bytes);
        self.buffers.push(Buffer {
            data: (!bytes.is_empty()).then_some(start..start + bytes.len()),
            external: false,
        });
        (self.buffers.len() - 1) as u32
    }

    /// Adds an activation (non-constant) tensor; returns its index.
    pub fn add_tensor(&mut self, name: &str, dtype: DType, shape: &[i32]) -> i32 {
        self.subgraph.tensors.push(TensorDef {
            name: name.to_string().into(),
            dtype,
            shape: shape.to_vec().into(),
            shape_signature: None,
            buffer: 0,
            quantization: None,
            calibration: None,
            custom_quantization: false,
            is_variable: false,
            is_sparse: false,
            sparsity: None,
            has_rank: true,
        });
        (self.subgraph.tensors.len() - 1) as i32
    }

    /// Adds a constant tensor holding `data` (little-endian element bytes); returns its index.
    pub fn add_constant(&mut self, name: &str, dtype: DType, shape: &[i32], data: &[u8]) -> i32 {
        let t = self.add_tensor(name, dtype, shape);
        let b = self.push_buffer(data);
        self.subgraph.tensors[t as usize].buffer = b;
        t
    }

    /// Adds a variable (state) tensor; returns its index.
    pub fn add_variable(&mut self, name: &str, dtype: DType, shape: &[i32]) -> i32 {
        let t = self.add_tensor(name, dtype, shape);
        self.subgraph.tensors[t as usize].is_variable = true;
        t
    }

    /// Mutable access to a tensor added earlier (e.g. to set quantization or a shape
    /// signature); `None` for an unknown index.
    pub fn tensor_mut(&mut self, index: i32) -> Option<&mut TensorDef> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.subgraph.tensors.get_mut(i))
    }

    /// Sets per-tensor quantization (one scale and zero point); an error for an unknown tensor
    /// or a scale that is negative or not finite.
    pub fn quantize(
        &mut self,
        index: i32,
        scale: f32,
        zero_point: i64,
    ) -> Result<&mut Self, ModelError> {
        let q = Quantization::per_tensor(scale, zero_point)
            .map_err(|e| ModelError::invalid(format!("tensor {index}"), e.to_string()))?;
        self.set_quantization(index, q)
    }

    /// Sets a tensor's quantization (per-tensor or per-channel); an error for an unknown tensor.
    pub fn set_quantization(
        &mut self,
        index: i32,
        quantization: Quantization,
    ) -> Result<&mut Self, ModelError> {
        let t = self.tensor_mut(index).ok_or_else(|| {
            ModelError::invalid(
                format!("tensor {index}"),
                "no such tensor in the subgraph being built",
            )
        })?;
        t.quantization = Some(quantization);
        Ok(self)
    }

    fn opcode(&mut self, code: OperatorCode) -> u32 {
        if let Some(i) = self.codes.iter().position(|c| *c == code) {
            return i as u32;
        }
        self.codes.push(code);
        (self.codes.len() - 1) as u32
    }

    /// Adds a builtin operator (appended to the execution order); returns its index.
    pub fn add_op(
        &mut self,
        op: BuiltinOp,
        options: BuiltinOptions,
        inputs: &[i32],
        outputs: &[i32],
    ) -> usize {
        let opcode_index = self.opcode(OperatorCode::builtin(op, 1));
        self.subgraph.operators.push(Operator {
            opcode_index,
            inputs: inputs.to_vec(),
            outputs: outputs.to_vec(),
            intermediates: Vec::new(),
            builtin_options: options,
            custom_options: Vec::new(),
            mutating_variable_inputs: Vec::new(),
        });
        self.subgraph.operators.len() - 1
    }

    /// Adds a custom operator called `name` with opaque `options`; returns its index.
    pub fn add_custom_op(
        &mut self,
        name: &str,
        options: &[u8],
        inputs: &[i32],
        outputs: &[i32],
    ) -> usize {
        let opcode_index = self.opcode(OperatorCode::custom(name, 1));
        self.subgraph.operators.push(Operator {
            opcode_index,
            inputs: inputs.to_vec(),
            outputs: outputs.to_vec(),
            intermediates: Vec::new(),
            builtin_options: BuiltinOptions::None,
            custom_options: options.to_vec(),
            mutating_variable_inputs: Vec::new(),
        });
        self.subgraph.operators.len() - 1
    }

    /// Sets the graph inputs.
    pub fn inputs(&mut self, tensors: &[i32]) -> &mut Self {
        self.subgraph.inputs = tensors.to_vec();
        self
    }

    /// Sets the graph outputs.
    pub fn outputs(&mut self, tensors: &[i32]) -> &mut Self {
        self.subgraph.outputs = tensors.to_vec();
        self
    }

    /// Adds a metadata entry holding `bytes`.
    pub fn add_metadata(&mut self, name: &str, bytes: &[u8]) -> &mut Self {
        let buffer = self.push_buffer(bytes);
        self.metadata.push(Metadata {
            name: name.to_string(),
            buffer,
        });
        self
    }

    /// Embeds an offline memory plan (one entry per tensor, `None` = plan at run time) as TFLM
    /// `OfflineMemoryAllocation` metadata.
    pub fn offline_plan(&mut self, offsets: &[Option<usize>]) -> Result<&mut Self, ModelError> {
        let bytes = Model::encode_offline_plan(offsets)?;
        Ok(self.add_metadata(super::OFFLINE_MEMORY_ALLOCATION, &bytes))
    }

    /// Adds a signature over the subgraph's current inputs and outputs, named by tensor name.
    pub fn signature(&mut self, key: &str) -> &mut Self {
        let named = |list: &[i32], tensors: &[TensorDef]| {
            list.iter()
                .filter_map(|&i| {
                    let t = tensors.get(usize::try_from(i).ok()?)?;
                    Some(SignatureTensor {
                        name: t.name.to_string(),
                        tensor_index: i as u32,
                    })
                })
                .collect()
        };
        let sig = SignatureDef {
            key: key.to_string(),
            subgraph_index: 0,
            inputs: named(&self.subgraph.inputs, &self.subgraph.tensors),
            outputs: named(&self.subgraph.outputs, &self.subgraph.tensors),
        };
        self.signatures.push(sig);
        self
    }

    /// Finishes the model. Indices are not re-validated here: write it with
    /// [`Model::to_bytes`] and read it back with [`Model::from_bytes`] to have the reader check
    /// everything.
    pub fn build(self) -> Model {
        Model {
            bytes: self.data.into(),
            version: 3,
            description: self.description,
            operator_codes: self.codes,
            subgraphs: vec![self.subgraph],
            buffers: self.buffers,
            metadata: self.metadata,
            signatures: self.signatures,
        }
    }
}
