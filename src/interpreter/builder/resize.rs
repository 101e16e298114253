//! Resizing a graph input: the reshaped model that
//! [`Interpreter::resize_input`](crate::interpreter::Interpreter::resize_input) builds again.
//!
//! Only dimensions that the model marks dynamic (`-1` in `shape_signature`) change, all by one
//! factor that must divide each of them exactly; tensors with data in the model keep their
//! shapes.

use crate::interpreter::InterpreterError;
use crate::model::Model;
use rust_alloc::{string::String, vec::Vec};

/// `model` with graph input tensor `input` of shape `dims` and every other activation tensor
/// reshaped to match, for
/// [`Interpreter::resize_input`](crate::interpreter::Interpreter::resize_input).
///
/// Converters mark the dimensions that follow the batch with `-1` in `shape_signature` (the
/// file's `shape` holds them for the batch the model was saved with). A resize may change only
/// such dimensions of the input, all by one factor (`dims / shape`); every non-constant tensor
/// then has its `-1` dimensions scaled by that factor, which must divide exactly. Tensors
/// without dynamic dimensions keep their shapes; constant-op chains (SHAPE, PACK,
/// STRIDED_SLICE) are evaluated again by the rebuild and see the new shapes. Kernels then check
/// every node as at build, so a model whose dynamic dimensions are not batch-like fails with
/// the node that disagrees.
pub(crate) fn resized_model(
    model: &Model,
    input: usize,
    dims: &[usize],
) -> Result<Model, InterpreterError> {
    let sg = &model.subgraphs[0];
    let t = &sg.tensors[input];
    let usage = |message: String| InterpreterError::Usage(message);
    let current: Vec<usize> = t.shape.iter().map(|&d| d.max(0) as usize).collect();
    if dims.len() != current.len() {
        return Err(usage(format!(
            "input `{}` has rank {}, resize to {dims:?} has rank {}",
            t.name,
            current.len(),
            dims.len()
        )));
    }
    let dynamic = |sig: Option<&Vec<i32>>, d: usize| sig.is_some_and(|s| s.get(d) == Some(&-1));
    // The factor num / den, from the first changed dimension; only dynamic ones may change.
    let mut factor: Option<(usize, usize)> = None;
    for d in 0..dims.len() {
        if dims[d] == current[d] {
            continue;
        }
        if !dynamic(t.shape_signature.as_ref(), d) {
            return Err(usage(format!(
                "input `{}` dimension {d} is static (shape_signature {:?}); it stays {}, not {}",
                t.name, t.shape_signature, current[d], dims[d]
            )));
        }
        if dims[d] == 0 || current[d] == 0 {
            return Err(usage(format!(
                "input `{}` dimension {d}: resizing from or to 0 is not supported",
                t.name
            )));
        }
        factor.get_or_insert((dims[d], current[d]));
    }
    let Some((num, den)) = factor else {
        return Ok(model.clone());
    };
    for d in 0..dims.len() {
        if dynamic(t.shape_signature.as_ref(), d) && dims[d] * den != current[d] * num {
            return Err(usage(format!(
                "input `{}`: dynamic dimensions of {current:?} -> {dims:?} do not scale by one \
                 factor",
                t.name
            )));
        }
    }
    let mut out = model.clone();
    for (i, tensor) in out.subgraphs[0].tensors.iter_mut().enumerate() {
        let Some(sig) = tensor.shape_signature.clone() else {
            continue;
        };
        if model.tensor_data(0, i).is_some() {
            continue;
        }
        for (d, dim) in tensor.shape.to_mut().iter_mut().enumerate() {
            if sig.get(d) != Some(&-1) {
                continue;
            }
            let scaled = (*dim as i64) * num as i64;
            if *dim < 0 || scaled % den as i64 != 0 || scaled / den as i64 > i64::from(i32::MAX) {
                return Err(usage(format!(
                    "tensor `{}` dimension {d} ({dim}) does not scale by {num}/{den}",
                    tensor.name
                )));
            }
            *dim = (scaled / den as i64) as i32;
        }
    }
    Ok(out)
}
