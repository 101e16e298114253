//! TFLM's `OfflineMemoryAllocation` metadata: offsets planned ahead of time, stored in the model.
//!
//! Layout (little-endian 32-bit words): `[version, subgraph, n, offset_0, …, offset_{n-1}]`, where
//! `offset_i` is the byte offset of tensor `i` in the arena or `-1` to plan it at run time. TFLM
//! reads `n` from word 2 and the offsets after it; words after the offsets (some tools pad the
//! buffer) are ignored.

use super::{BufferRequirement, Plan, PlanError};
use rust_alloc::vec::Vec;

/// Name of the model metadata entry that holds the offline plan.
pub const OFFLINE_METADATA_NAME: &str = "OfflineMemoryAllocation";

/// An offline memory plan: one optional offset per tensor of a subgraph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfflinePlan {
    /// Format version word (TFLM writes 1 and does not check it).
    pub version: u32,
    /// The subgraph word (the subgraph the offsets belong to; TFLM supports one).
    pub subgraph: u32,
    /// Offset of each tensor; `None` (`-1` on disk) = planned at run time.
    pub offsets: Vec<Option<usize>>,
}

impl OfflinePlan {
    /// Parses metadata bytes. Truncated data, a count that does not fit the bytes, or an offset
    /// below -1 is an error.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, PlanError> {
        let word = |k: usize| -> Result<[u8; 4], PlanError> {
            let start = k * 4;
            bytes
                .get(start..start + 4)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| {
                    PlanError::Metadata(format!(
                        "truncated: word {k} needs bytes {start}..{} but there are {} bytes",
                        start + 4,
                        bytes.len()
                    ))
                })
        };
        let version = u32::from_le_bytes(word(0)?);
        let subgraph = u32::from_le_bytes(word(1)?);
        let n = u32::from_le_bytes(word(2)?) as usize;
        let needed = n
            .checked_add(3)
            .and_then(|w| w.checked_mul(4))
            .ok_or_else(|| PlanError::Metadata(format!("offset count {n} is too large")))?;
        if bytes.len() < needed {
            return Err(PlanError::Metadata(format!(
                "offset count {n} needs {needed} bytes but there are {}",
                bytes.len()
            )));
        }
        let mut offsets = Vec::with_capacity(n);
        for k in 0..n {
            let v = i32::from_le_bytes(word(3 + k)?);
            offsets.push(match v {
                -1 => None,
                v if v >= 0 => Some(v as usize),
                v => {
                    return Err(PlanError::Metadata(format!(
                        "tensor {k}: offset {v} is negative; expected -1 (online) or >= 0"
                    )))
                }
            });
        }
        Ok(Self {
            version,
            subgraph,
            offsets,
        })
    }

    /// Serialises to metadata bytes. An offset above `i32::MAX` is an error.
    pub fn to_bytes(&self) -> Result<Vec<u8>, PlanError> {
        let n = u32::try_from(self.offsets.len()).map_err(|_| {
            PlanError::Metadata(format!(
                "{} offsets do not fit a u32 count",
                self.offsets.len()
            ))
        })?;
        let mut out = Vec::with_capacity(12 + 4 * self.offsets.len());
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&self.subgraph.to_le_bytes());
        out.extend_from_slice(&n.to_le_bytes());
        for (k, o) in self.offsets.iter().enumerate() {
            let v: i32 = match o {
                None => -1,
                Some(o) => i32::try_from(*o).map_err(|_| {
                    PlanError::Metadata(format!(
                        "tensor {k}: offset {o} does not fit an i32 (max {})",
                        i32::MAX
                    ))
                })?,
            };
            out.extend_from_slice(&v.to_le_bytes());
        }
        Ok(out)
    }

    /// The offline plan that fixes every buffer of `plan` (version 1, subgraph 0); with
    /// `tensor_of[i]` the tensor index of buffer `i` among `tensor_count` tensors (tensors without a
    /// buffer stay online).
    pub fn from_plan(
        plan: &Plan,
        tensor_of: &[usize],
        tensor_count: usize,
    ) -> Result<Self, PlanError> {
        if tensor_of.len() != plan.offsets.len() {
            return Err(PlanError::LengthMismatch {
                offsets: plan.offsets.len(),
                buffers: tensor_of.len(),
            });
        }
        let mut offsets = vec![None; tensor_count];
        for (i, (&t, &o)) in tensor_of.iter().zip(&plan.offsets).enumerate() {
            let slot = offsets.get_mut(t).ok_or_else(|| {
                PlanError::Metadata(format!(
                    "buffer {i}: tensor index {t} is out of range (there are {tensor_count} tensors)"
                ))
            })?;
            *slot = Some(o);
        }
        Ok(Self {
            version: 1,
            subgraph: 0,
            offsets,
        })
    }

    /// Sets `offline_offset` of every buffer whose tensor (`tensor_of[i]`) has an offline offset.
    /// Errors when the lengths differ or a tensor index is out of range.
    pub fn apply(
        &self,
        buffers: &mut [BufferRequirement],
        tensor_of: &[usize],
    ) -> Result<(), PlanError> {
        if tensor_of.len() != buffers.len() {
            return Err(PlanError::LengthMismatch {
                offsets: tensor_of.len(),
                buffers: buffers.len(),
            });
        }
        for (i, (b, &t)) in buffers.iter_mut().zip(tensor_of).enumerate() {
            let o = self.offsets.get(t).ok_or_else(|| {
                PlanError::Metadata(format!(
                    "buffer {i}: tensor index {t} is out of range (the plan has {} offsets)",
                    self.offsets.len()
                ))
            })?;
            if let Some(o) = *o {
                b.offline_offset = Some(o);
            }
        }
        Ok(())
    }
}
