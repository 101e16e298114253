//! The arena tail while the build stages it (phases 3 and 5 of
//! [`stage_with`](super::stage::stage_with)): persistent records for op data, variables,
//! prepare-time results and aligned copies of misaligned constants.

use super::stage::VariableInit;
use crate::arena::Category;
use crate::interpreter::context::{Persistent, StagingRegion};
use crate::interpreter::error::InterpreterError;
use crate::interpreter::graph::{TensorEntry, TensorKind};
use crate::interpreter::subgraphs::Layout;
use crate::model::Model;
use rust_alloc::{format, string::ToString, vec::Vec};

/// The record of each tail tensor: `(tensor, record)` sorted by tensor, only for the tensors
/// that have one (a model's few variables, prepare-time results and copied constants), so that
/// the build holds no per-tensor table for them.
#[derive(Default)]
pub(crate) struct TensorRecords(Vec<(u32, u32)>);

impl TensorRecords {
    /// Tensor `t`'s record, if it has one.
    pub(crate) fn get(&self, t: usize) -> Option<u32> {
        let t = u32::try_from(t).ok()?;
        self.0
            .binary_search_by_key(&t, |&(u, _)| u)
            .ok()
            .map(|i| self.0[i].1)
    }

    /// Gives tensor `t` record `record` (replacing any it had).
    fn set(&mut self, t: usize, record: u32) -> Result<(), InterpreterError> {
        let tensor = u32::try_from(t).map_err(|_| {
            InterpreterError::Memory(format!("tensor {t} beyond the 32-bit tail table"))
        })?;
        match self.0.binary_search_by_key(&tensor, |&(u, _)| u) {
            Ok(i) => self.0[i].1 = record,
            Err(i) => {
                self.0.try_reserve(1).map_err(|_| {
                    InterpreterError::Memory("out of memory for the tail table".into())
                })?;
                self.0.insert(i, (tensor, record));
            }
        }
        Ok(())
    }
}

/// The arena tail while it is staged: persistent records (op data, tensor copies) and which
/// record holds each tail tensor.
pub(super) struct Tail {
    pub(super) persistent: Persistent,
    /// The tail tensors' records (variables, prepare-time results, aligned copies of
    /// misaligned constants).
    pub(super) tensor_record: TensorRecords,
    /// Initial contents of variables that are not all zero bytes.
    pub(super) variable_init: Vec<(u32, VariableInit)>,
}

impl Tail {
    /// An empty tail whose records are staged in `region` while they fit
    /// ([`Persistent::in_region`]).
    pub(super) fn new(region: Option<StagingRegion>) -> Self {
        Tail {
            persistent: Persistent::in_region(region),
            tensor_record: TensorRecords::default(),
            variable_init: Vec::new(),
        }
    }

    /// Phase 3: marks variables that have initial data as variables (not constants) and gives
    /// constants whose file data is misaligned for their element type an aligned tail copy
    /// (prepare-time nodes read them). Variables get their records only after prepare has
    /// validated their shapes ([`Tail::stage_variables`]), so a model that lies about a
    /// variable's size fails in its kernel's prepare instead of staging that many bytes first.
    pub(super) fn stage_misaligned_constants(
        &mut self,
        model: &Model,
        layout: &Layout,
        tensors: &mut [TensorEntry],
    ) -> Result<(), InterpreterError> {
        for (t, e) in tensors.iter_mut().enumerate() {
            if is_variable(model, layout, t, e) && layout.tensor_data(model, t).is_some() {
                e.kind = TensorKind::Variable;
            }
            let misaligned = e.kind == TensorKind::Constant
                && !is_variable(model, layout, t, e)
                && layout.tensor_data(model, t).is_some_and(|d| {
                    e.dtype
                        .alignment()
                        .is_some_and(|a| !(d.as_ptr() as usize).is_multiple_of(a))
                });
            if misaligned {
                let record = self.copy_tensor((t, e), (model, layout))?;
                self.tensor_record.set(t, record)?;
            }
        }
        Ok(())
    }

    /// Phase 5a: every variable's record, with its initial value (the model's data, else zero;
    /// int8 at its zero point).
    pub(super) fn stage_variables(
        &mut self,
        model: &Model,
        layout: &Layout,
        tensors: &[TensorEntry],
    ) -> Result<(), InterpreterError> {
        for (t, e) in tensors.iter().enumerate() {
            if is_variable(model, layout, t, e) {
                let record = self.copy_tensor((t, e), (model, layout))?;
                self.tensor_record.set(t, record)?;
            }
        }
        Ok(())
    }

    /// Phase 5b: prepare-time results move into the tail; a prepare-time constant that no node
    /// produced is an error.
    pub(super) fn keep_results(
        &mut self,
        tensors: &[TensorEntry],
        computed: Vec<Option<Vec<u128>>>,
        (model, layout): (&Model, &Layout),
    ) -> Result<(), InterpreterError> {
        for (t, w) in computed.into_iter().enumerate() {
            let Some(w) = w else { continue };
            let record = self
                .persistent
                .allocate(tensors[t].bytes, Category::TensorData)
                .map_err(|k| InterpreterError::Memory(k.0))?;
            // SAFETY: `w` holds at least `bytes` initialised bytes.
            let src =
                unsafe { core::slice::from_raw_parts(w.as_ptr() as *const u8, tensors[t].bytes) };
            self.persistent.bytes_mut(record).copy_from_slice(src);
            self.tensor_record.set(t, record)?;
        }
        for (t, e) in tensors.iter().enumerate() {
            if e.kind == TensorKind::PrepareTimeConstant && self.tensor_record.get(t).is_none() {
                return Err(InterpreterError::Tensor {
                    index: t,
                    name: layout.tensor(model, t).name.to_string(),
                    message: "computable at prepare time but no node produced it".into(),
                });
            }
        }
        Ok(())
    }

    /// Copies tensor `t` (a misaligned constant or a variable) into a new tail record: the
    /// model's data, else zero bytes (an int8 variable: its zero point, as TFLM). Records a
    /// variable's initial value in `variable_init` when it is not all zero bytes.
    fn copy_tensor(
        &mut self,
        (t, e): (usize, &TensorEntry),
        (model, layout): (&Model, &Layout),
    ) -> Result<u32, InterpreterError> {
        let (data, model_bytes) = (layout.tensor_data(model, t), &model.bytes[..]);
        let index = u32::try_from(t).map_err(|_| InterpreterError::Tensor {
            index: t,
            name: layout.tensor(model, t).name.to_string(),
            message: "tensor index beyond the interpreter's 32-bit tables".into(),
        })?;
        let record = self
            .persistent
            .allocate(e.bytes, Category::TensorData)
            .map_err(|k| InterpreterError::Memory(k.0))?;
        if let Some(d) = data {
            let dst = self.persistent.bytes_mut(record);
            if d.len() != dst.len() {
                return Err(InterpreterError::Tensor {
                    index: t,
                    name: layout.tensor(model, t).name.to_string(),
                    message: format!("data has {} bytes, expected {}", d.len(), dst.len()),
                });
            }
            dst.copy_from_slice(d);
            if e.kind == TensorKind::Variable {
                // The data is a range of the model's bytes; the interpreter keeps those.
                let at = (d.as_ptr() as usize).wrapping_sub(model_bytes.as_ptr() as usize);
                let range = u32::try_from(at)
                    .ok()
                    .zip(u32::try_from(d.len()).ok())
                    .filter(|_| {
                        at.checked_add(d.len())
                            .is_some_and(|end| end <= model_bytes.len())
                    });
                let Some((at, len)) = range else {
                    return Err(InterpreterError::Tensor {
                        index: t,
                        name: layout.tensor(model, t).name.to_string(),
                        message: "initial value lies outside the model's first 4 GiB of bytes"
                            .into(),
                    });
                };
                self.variable_init
                    .push((index, VariableInit::Data { at, len }));
            }
        } else if e.kind == TensorKind::Variable && e.dtype == crate::tensor::DType::I8 {
            // TFLM (`MicroInterpreterGraph::ResetTensorData`) fills an int8 variable with its
            // zero point (a real 0), not with zero bytes; the reference outputs depend on it.
            let zp = layout
                .tensor(model, t)
                .quantization
                .as_ref()
                .map(|q| q.zero_points()[0])
                .unwrap_or(0);
            if zp != 0 {
                let dst = self.persistent.bytes_mut(record);
                dst.fill(zp as i8 as u8);
                self.variable_init
                    .push((index, VariableInit::Fill(zp as i8 as u8)));
            }
        }
        Ok(record)
    }
}

/// Whether tensor `t` is state kept across invokes: planned as a variable, or a constant the
/// model marks variable (a variable with initial data).
fn is_variable(model: &Model, layout: &Layout, t: usize, e: &TensorEntry) -> bool {
    e.kind == TensorKind::Variable
        || (e.kind == TensorKind::Constant && layout.tensor(model, t).is_variable)
}

#[cfg(test)]
mod tests {
    use super::TensorRecords;
    use rust_alloc::vec::Vec;

    /// Records set in any order read back by tensor; a tensor without one reads `None`; setting
    /// again replaces.
    #[test]
    fn tensor_records_read_back_in_any_order() {
        let mut r = TensorRecords::default();
        for (t, rec) in [(7, 70), (2, 20), (9, 90), (0, 0), (5, 50)] {
            r.set(t, rec).unwrap();
        }
        r.set(2, 21).unwrap();
        let got: Vec<Option<u32>> = (0..11).map(|t| r.get(t)).collect();
        assert_eq!(
            got,
            [
                Some(0),
                None,
                Some(21),
                None,
                None,
                Some(50),
                None,
                Some(70),
                None,
                Some(90),
                None
            ]
        );
        assert_eq!(r.get(usize::MAX), None);
    }
}
