//! Errors of the model reader and writer.

use rust_alloc::string::String;

/// Why a model could not be read, written or analysed. Messages name the table and field (with
/// its position, e.g. `subgraphs[0].operators[3].inputs[1]`), the offending value and what was
/// expected.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The file could not be read.
    #[cfg(feature = "std")]
    #[error("cannot read model file {path}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a TFLite flatbuffer at all (too short, wrong file identifier).
    #[error("not a TFLite model: {0}")]
    NotTflite(String),
    /// The flatbuffer failed verification (truncated, out-of-bounds offsets, bad vtables,
    /// invalid UTF-8, too deep or too large).
    #[error("corrupt TFLite flatbuffer: {0}")]
    Corrupt(String),
    /// An index field points outside the vector it indexes.
    #[error("{location}: index {index} out of range, expected 0..{len} ({what})")]
    IndexOutOfRange {
        /// Table and field, e.g. `subgraphs[0].tensors[5].buffer`.
        location: String,
        /// The value found.
        index: i64,
        /// The length of the indexed vector.
        len: usize,
        /// What the index refers to (`"buffers"`, `"tensors of subgraph 0"`, ...).
        what: &'static str,
    },
    /// A field holds a value the reader cannot accept.
    #[error("{location}: {problem}")]
    Invalid {
        /// Table and field.
        location: String,
        /// What is wrong, with the value and what was expected.
        problem: String,
    },
    /// The model has no subgraph at all: nothing to inspect, plan or run.
    #[error("the model has no subgraphs")]
    NoSubgraphs,
    /// An allocation made while reading the model failed (a memory limit, or the heap is
    /// exhausted). Built without allocating, so it can be returned when nothing more can be had.
    #[error("out of memory while reading {what}: {bytes} bytes could not be allocated")]
    OutOfMemory {
        /// What was being read (`"the model file"`, `"a tensor name"`, ...).
        what: &'static str,
        /// The size of the allocation that failed.
        bytes: usize,
    },
    /// The model cannot be written (e.g. too large for a 2 GiB flatbuffer).
    #[error("cannot write model: {0}")]
    Write(String),
}

impl ModelError {
    pub(crate) fn invalid(location: impl Into<String>, problem: impl Into<String>) -> Self {
        ModelError::Invalid {
            location: location.into(),
            problem: problem.into(),
        }
    }
}
