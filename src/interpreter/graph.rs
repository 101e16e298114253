//! The executable graph built from a `model::Subgraph`: one [`TensorEntry`] per tensor (the one
//! place model tensor types become `tensor::DType`) and one [`NodeInfo`] per operator.

use super::error::InterpreterError;
use crate::model::{BuiltinOp, Model, Quantization, Sparsity};
use crate::tensor::DType;
use rust_alloc::borrow::Cow;
use rust_alloc::{boxed::Box, format, string::String, vec::Vec};

/// How a tensor is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorKind {
    /// Data in the model file.
    Constant,
    /// Computed once at build from constants (kept in the arena tail).
    PrepareTimeConstant,
    /// State kept across invokes (arena tail).
    Variable,
    /// Planned into the arena head (inputs, outputs, intermediates).
    Planned,
    /// Not used by any operator and not a graph input or output.
    Unused,
}

/// A tensor of the executable graph.
#[derive(Clone, Debug)]
pub struct TensorEntry {
    /// Name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Dimensions (static shape).
    pub dims: Box<[usize]>,
    /// Bytes (`prod(dims) * dtype size`).
    pub bytes: usize,
    /// Quantization parameters.
    pub quantization: Option<Box<Quantization>>,
    /// Storage kind.
    pub kind: TensorKind,
    /// Sparse storage of a constant (its `bytes` are then the stored values, not the dense
    /// size); only kernels registered to read it sparse (`Registration::sparse_inputs`) may.
    pub sparsity: Option<Box<Sparsity>>,
}

impl TensorEntry {
    /// `tensor {t}` and the name when it is kept (after build only graph inputs and outputs
    /// keep theirs), for error messages.
    pub(crate) fn label(&self, t: usize) -> String {
        if self.name.is_empty() {
            format!("tensor {t}")
        } else {
            format!("tensor {t} `{}`", self.name)
        }
    }
}

/// An operator of the executable graph.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    /// Index in the subgraph.
    pub index: usize,
    /// Builtin op (CUSTOM for custom ops).
    pub builtin: BuiltinOp,
    /// Display name (`CONV_2D`, `CUSTOM(name)`): the builtin's static name, built only for
    /// custom and unknown ops.
    pub op_name: Cow<'static, str>,
    /// Custom op name.
    pub custom: Option<String>,
    /// Op version.
    pub version: i32,
    /// Input tensor indices (`-1` = omitted).
    pub inputs: Box<[i32]>,
    /// Output tensor indices.
    pub outputs: Box<[i32]>,
    /// Whether every input is constant: the node runs once at build.
    pub prepare_time: bool,
}

/// Builds the tensor table of subgraph 0 (kinds from the model's lifetimes) and the node list.
pub(crate) fn build(
    model: &Model,
    lifetimes: &crate::model::Lifetimes,
) -> Result<(Vec<TensorEntry>, Vec<NodeInfo>), InterpreterError> {
    use crate::model::PersistentKind;
    let sg = model
        .subgraphs
        .first()
        .ok_or_else(|| InterpreterError::Usage("the model has no subgraph to run".into()))?;
    let mut kinds = vec![TensorKind::Unused; sg.tensors.len()];
    for p in &lifetimes.planned {
        kinds[p.tensor] = TensorKind::Planned;
    }
    for p in &lifetimes.persistent {
        kinds[p.tensor] = match p.kind {
            PersistentKind::Variable => TensorKind::Variable,
            PersistentKind::PrepareTimeConstant => TensorKind::PrepareTimeConstant,
        };
    }
    if let Some(&t) = lifetimes.unsized_tensors.first() {
        let tensor = &sg.tensors[t];
        return Err(InterpreterError::Tensor {
            index: t,
            name: tensor.name.clone(),
            message: format!(
                "dtype {} has no fixed size; this interpreter runs only fixed-size tensors",
                tensor.dtype.name()
            ),
        });
    }
    let mut tensors = Vec::with_capacity(sg.tensors.len());
    for (t, tensor) in sg.tensors.iter().enumerate() {
        let err = |message: String| InterpreterError::Tensor {
            index: t,
            name: tensor.name.clone(),
            message,
        };
        if model.is_constant(0, t) {
            kinds[t] = TensorKind::Constant;
        }
        let dtype = match tensor.dtype {
            d if d.has_element() => d,
            _ if kinds[t] == TensorKind::Unused => DType::U8,
            d => {
                return Err(err(format!(
                    "dtype {d} is not supported by the interpreter; expected a number or bool dtype"
                )))
            }
        };
        let elem = dtype
            .size()
            .ok_or_else(|| err(format!("dtype {dtype} has no fixed element size")))?;
        let mut dims = Vec::with_capacity(tensor.shape.len());
        for &d in &tensor.shape {
            match usize::try_from(d) {
                Ok(d) => dims.push(d),
                Err(_) => {
                    return Err(err(format!(
                        "shape {:?} has a negative dimension; a static shape was expected",
                        tensor.shape
                    )))
                }
            }
        }
        let mut bytes = dims
            .iter()
            .try_fold(elem, |a, &d| a.checked_mul(d))
            .ok_or_else(|| err(format!("shape {:?} overflows the byte size", tensor.shape)))?;
        let sparse = tensor.sparsity.is_some() && kinds[t] == TensorKind::Constant;
        if sparse {
            // Stored sparse: the data holds the stored values only (DENSIFY checks their count).
            let have = model.tensor_data(0, t).map_or(0, <[u8]>::len);
            if have % elem != 0 {
                return Err(err(format!(
                    "sparse constant data has {have} bytes, not a multiple of {elem}"
                )));
            }
            bytes = have;
        } else if kinds[t] == TensorKind::Constant {
            let have = model.tensor_data(0, t).map_or(0, <[u8]>::len);
            if have != bytes {
                return Err(err(format!(
                    "constant data has {have} bytes, shape {:?} of {} needs {bytes}",
                    tensor.shape, dtype
                )));
            }
            if dtype == DType::Bool {
                if let Some(i) = model
                    .tensor_data(0, t)
                    .and_then(|d| d.iter().position(|&b| b > 1))
                {
                    return Err(err(format!("bool constant byte {i} is not 0 or 1")));
                }
            }
        }
        tensors.push(TensorEntry {
            name: tensor.name.clone(),
            dtype,
            dims: dims.into_boxed_slice(),
            bytes,
            quantization: tensor.quantization.clone().map(Box::new),
            kind: kinds[t],
            sparsity: if sparse {
                tensor.sparsity.clone().map(Box::new)
            } else {
                None
            },
        });
    }
    let mut nodes = Vec::with_capacity(sg.operators.len());
    for (i, op) in sg.operators.iter().enumerate() {
        let code = operator_code(model, i, op)?;
        // Lifetimes marked the outputs of all-constant ops as prepare-time constants; such a
        // node runs once at build.
        let prepare_time = op.output_tensors().next().is_some()
            && op
                .output_tensors()
                .all(|t| kinds[t] == TensorKind::PrepareTimeConstant);
        nodes.push(NodeInfo {
            index: i,
            builtin: code.builtin,
            op_name: match (code.builtin, code.builtin.name()) {
                (op, Some(name)) if op != BuiltinOp::CUSTOM => Cow::Borrowed(name),
                _ => Cow::Owned(code.display_name()),
            },
            custom: code.custom_code.clone(),
            version: code.version,
            inputs: op.inputs.as_slice().into(),
            outputs: op.outputs.as_slice().into(),
            prepare_time,
        });
    }
    Ok((tensors, nodes))
}

/// The operator code of node `i` (`op`), an error when its opcode index is out of range.
pub(crate) fn operator_code<'m>(
    model: &'m Model,
    i: usize,
    op: &crate::model::Operator,
) -> Result<&'m crate::model::OperatorCode, InterpreterError> {
    model.opcode(op).ok_or_else(|| {
        InterpreterError::Usage(format!(
            "node {i}: opcode index {} out of range",
            op.opcode_index
        ))
    })
}
