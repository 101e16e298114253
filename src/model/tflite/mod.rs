//! The `.tflite` reader and writer.
//!
//! Reading is two passes: [`flatbuffers`] verification of the whole file (every offset, vtable,
//! vector length, string, with limits on depth, table count and apparent size), then decoding into
//! the IR with every index (opcode, tensor, buffer, subgraph) bounds-checked. Nothing is
//! allocated with a size taken from an unverified field: every vector length was checked against
//! the file size by the verifier first. Every allocation of the reader is fallible (reserved with
//! `try_reserve_exact` before it is filled): out of memory is [`ModelError::OutOfMemory`], never
//! an abort (`tests/model_load_oom.rs` fails each allocation of a load in turn).

mod dtype;
#[cfg(feature = "std")]
mod file;
mod options;
mod schema;
mod table;
mod writer;

use core::ops::Range;
use rust_alloc::{borrow::Cow, boxed::Box, string::String, string::ToString, vec::Vec};

use flatbuffers::Vector;

use super::options::BuiltinOptions;
use super::{
    Buffer, BuiltinOp, CalibrationRange, DimensionMetadata, Metadata, Model, ModelBytes,
    ModelError, Operator, OperatorCode, Quantization, SignatureDef, SignatureTensor,
    SparseIndexVector, Sparsity, Subgraph, TensorDef,
};
use schema::{
    buffer, metadata, model, opcode, operator, quant, signature, subgraph, tensor, tensor_map,
};
use table::T;

pub use dtype::{dtype_from_schema, dtype_to_schema};
#[cfg(all(feature = "std", unix))]
pub use file::load_mapped;
#[cfg(feature = "std")]
pub use file::{load, load_with_limit};
pub use writer::write_model;

/// The file identifier of TFLite flatbuffers (bytes 4..8).
pub const FILE_IDENTIFIER: &[u8; 4] = b"TFL3";

/// Largest `.tflite` file [`load`] reads: a flatbuffer cannot exceed 2 GiB (its offsets are
/// 32-bit signed). Models with external buffers beyond that: [`load_with_limit`].
pub const MAX_MODEL_FILE_BYTES: u64 = 1 << 31;

/// Verifies and decodes a TFLite model held in `bytes`. The returned model keeps `bytes` and
/// refers to constant data by range.
pub fn read_model(bytes: ModelBytes) -> Result<Model, ModelError> {
    if bytes.len() < 8 {
        return Err(ModelError::NotTflite(format!(
            "{} bytes, a TFLite flatbuffer has at least 8 (root offset and file identifier)",
            bytes.len()
        )));
    }
    if &bytes[4..8] != FILE_IDENTIFIER {
        return Err(ModelError::NotTflite(format!(
            "file identifier {:?}, expected \"TFL3\"",
            String::from_utf8_lossy(&bytes[4..8])
        )));
    }
    let root = schema::verified_root(&bytes).map_err(|e| ModelError::Corrupt(describe(&e)))?;
    let decoded = Decoder {
        file: &bytes,
        in_place: bytes.as_static(),
        copied: core::cell::Cell::new(0),
    }
    .model(root)?;
    Ok(Model { bytes, ..decoded })
}

/// One-line description of a verifier error: what is wrong and where, as a field path from the
/// root (`Model.subgraphs[0].SubGraph.tensors[3].Tensor.name`).
fn describe(e: &flatbuffers::InvalidFlatbuffer) -> String {
    let text = e.to_string();
    let mut lines = text.lines();
    let what = lines
        .next()
        .unwrap_or("invalid flatbuffer")
        .trim()
        .to_string();
    // The trace lists the innermost element first.
    let mut path: Vec<String> = Vec::new();
    for line in lines {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("while verifying table field `") {
            if let Some(name) = rest.split('`').next() {
                path.push(format!(".{name}"));
            }
        } else if let Some(rest) = line.strip_prefix("while verifying vector element ") {
            if let Some(i) = rest.split_whitespace().next() {
                path.push(format!("[{i}]"));
            }
        } else if let Some(rest) = line.strip_prefix("while verifying union variant `") {
            if let Some(name) = rest.split('`').next() {
                path.push(format!("<{name}>"));
            }
        }
    }
    if path.is_empty() {
        what
    } else {
        path.reverse();
        let p: String = path.concat();
        format!("{what} (in {})", p.trim_start_matches('.'))
    }
}

struct Decoder<'f> {
    file: &'f [u8],
    /// The same bytes when they live for the whole program (a model in flash): vectors of
    /// scalars are then borrowed in place rather than copied ([`Decoder::in_place`]).
    in_place: Option<&'static [u8]>,
    /// Bytes of out-of-flatbuffer data copied so far (large custom options). In a valid file
    /// each operator's range is its own, so the total never exceeds the file size; a corrupt
    /// file whose operators all name the same large range is refused instead of copying it once
    /// per operator.
    copied: core::cell::Cell<usize>,
}

/// Out of memory while reading `what`: an allocation of `bytes` failed.
pub(super) fn oom(what: &'static str, bytes: usize) -> ModelError {
    ModelError::OutOfMemory { what, bytes }
}

/// An empty vector with room for `n` elements, reserved fallibly (`what` names it in the error).
fn try_vec<X>(n: usize, what: &'static str) -> Result<Vec<X>, ModelError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| oom(what, n.saturating_mul(core::mem::size_of::<X>())))?;
    Ok(v)
}

/// `x` in a box allocated fallibly.
fn try_box<X>(x: X, what: &'static str) -> Result<Box<X>, ModelError> {
    let layout = core::alloc::Layout::new::<X>();
    if layout.size() == 0 {
        return Ok(Box::new(x)); // allocates nothing
    }
    // SAFETY: `layout` has a non-zero size, as `alloc` requires.
    let ptr = unsafe { rust_alloc::alloc::alloc(layout) } as *mut X;
    if ptr.is_null() {
        return Err(oom(what, layout.size()));
    }
    // SAFETY: `ptr` is a fresh allocation of `X`'s layout from the global allocator, so it is
    // valid for a write of `X` and `Box::from_raw` may own it (it frees with that layout).
    unsafe {
        ptr.write(x);
        Ok(Box::from_raw(ptr))
    }
}

/// Collects an iterator of known length into a vector reserved fallibly: the one allocation is
/// the reservation (an exact-size iterator never makes `extend` grow it).
pub(crate) fn try_collect<X>(
    items: impl ExactSizeIterator<Item = X>,
    what: &'static str,
) -> Result<Vec<X>, ModelError> {
    let mut v = try_vec(items.len(), what)?;
    v.extend(items);
    Ok(v)
}

/// A copy of `s` in a string reserved fallibly.
fn try_string(s: &str, what: &'static str) -> Result<String, ModelError> {
    let mut out = String::new();
    out.try_reserve_exact(s.len())
        .map_err(|_| oom(what, s.len()))?;
    out.push_str(s);
    Ok(out)
}

/// [`try_string`] of an optional string.
fn try_opt_string(s: Option<&str>, what: &'static str) -> Result<Option<String>, ModelError> {
    s.map(|s| try_string(s, what)).transpose()
}

/// Collects a vector of scalars (length already verified against the file size; empty when
/// absent), fallibly.
fn collect<'a, X: flatbuffers::Follow<'a> + 'a>(
    v: Option<Vector<'a, X>>,
    what: &'static str,
) -> Result<Vec<X::Inner>, ModelError> {
    v.map_or(Ok(Vec::new()), |v| try_collect(v.iter(), what))
}

/// Scalars every bit pattern of which is a value, so that little-endian bytes of the file can be
/// read as a slice of them in place.
///
/// # Safety
/// Every bit pattern of `size_of::<Self>()` bytes is a valid `Self` (no padding, no niche).
unsafe trait Plain: Copy {}
// SAFETY: plain integers and floats: every bit pattern is a value.
unsafe impl Plain for f32 {}
// SAFETY: as above.
unsafe impl Plain for i64 {}
// SAFETY: as above.
unsafe impl Plain for i32 {}

/// `Ok` when `index` is in `0..len` (or `-1` where optional), else an error naming the location.
pub(crate) fn check_index(
    location: impl FnOnce() -> String,
    index: i64,
    len: usize,
    what: &'static str,
    allow_optional: bool,
) -> Result<(), ModelError> {
    if (allow_optional && index == -1) || (index >= 0 && (index as u64) < len as u64) {
        Ok(())
    } else {
        Err(ModelError::IndexOutOfRange {
            location: location(),
            index,
            len,
            what,
        })
    }
}

impl<'f> Decoder<'f> {
    /// Position of a verified byte vector inside the file.
    fn range_of(&self, data: &[u8]) -> Range<usize> {
        let start = data.as_ptr() as usize - self.file.as_ptr() as usize;
        start..start + data.len()
    }

    /// The elements of a verified vector (`data`: its bytes inside the file) borrowed in place:
    /// `None` unless the file lives for the whole program, the target is little-endian (the
    /// format is) and the elements are aligned for `X` in memory (flatbuffers align a vector
    /// to its element size within the file; a caller's static bytes may start anywhere).
    fn in_place<X: Plain>(&self, data: &[u8]) -> Option<&'static [X]> {
        if cfg!(target_endian = "big") {
            return None;
        }
        let bytes: &'static [u8] = self.in_place?.get(self.range_of(data))?;
        // SAFETY: every bit pattern of `X` is a value (`Plain`), and on a little-endian target
        // the file's little-endian scalars are `X`s as they lie; `align_to` keeps the middle
        // part aligned for `X`.
        let (head, body, tail) = unsafe { bytes.align_to::<X>() };
        (head.is_empty() && tail.is_empty()).then_some(body)
    }

    /// A vector of scalars (empty when absent): borrowed in place where
    /// [`in_place`](Self::in_place) allows, else a copy.
    fn scalars<X>(
        &self,
        v: Option<Vector<'f, X>>,
        what: &'static str,
    ) -> Result<Cow<'static, [X]>, ModelError>
    where
        X: Plain + flatbuffers::Follow<'f, Inner = X> + 'f,
    {
        let Some(v) = v else {
            return Ok(Cow::Borrowed(&[]));
        };
        match self.in_place::<X>(v.bytes()) {
            Some(b) => Ok(Cow::Borrowed(b)),
            None => Ok(Cow::Owned(try_collect(v.iter(), what)?)),
        }
    }

    /// A tensor name (`s`: a verified string of the file): borrowed in place from a file that
    /// lives for the whole program, else a copy.
    fn name(&self, s: &'f str) -> Result<Cow<'static, str>, ModelError> {
        let borrowed = self
            .in_place
            .and_then(|file| file.get(self.range_of(s.as_bytes())))
            .and_then(|b| core::str::from_utf8(b).ok());
        match borrowed {
            Some(b) => Ok(Cow::Borrowed(b)),
            None => Ok(Cow::Owned(try_string(s, "a tensor name")?)),
        }
    }

    /// The affine parameters of a quantization table with scales, refused as LiteRT's reader
    /// refuses them: zero points missing or not one per scale, a negative dimension; and,
    /// beyond LiteRT, a scale that is negative or not finite (no kernel can use one). Borrowed
    /// in place where [`in_place`](Self::in_place) allows, copied otherwise. `location` is
    /// called only to name the table in an error.
    fn affine(
        &self,
        scales: Vector<'f, f32>,
        zero_points: Option<Vector<'f, i64>>,
        quantized_dimension: i32,
        location: impl Fn() -> String,
    ) -> Result<Quantization, ModelError> {
        let points = zero_points.map_or(0, |z| z.len());
        if points != scales.len() {
            return Err(ModelError::invalid(
                location(),
                format!(
                    "{} scales but {points} zero points; expected one zero point per scale",
                    scales.len(),
                ),
            ));
        }
        let Ok(dimension) = usize::try_from(quantized_dimension) else {
            return Err(ModelError::invalid(
                location(),
                format!("quantized_dimension {quantized_dimension}, expected >= 0"),
            ));
        };
        let borrowed = self
            .in_place::<f32>(scales.bytes())
            .zip(zero_points.and_then(|z| self.in_place::<i64>(z.bytes())));
        let q = match borrowed {
            Some((s, z)) => Quantization::from_static(s, z, dimension),
            // The lengths are equal, so no zero point is broadcast: one allocation each.
            None => Quantization::per_channel(
                try_collect(scales.iter(), "a tensor's quantization scales")?,
                collect(zero_points, "a tensor's quantization zero points")?,
                dimension,
            ),
        };
        q.map_err(|e| ModelError::invalid(location(), e.to_string()))
    }

    /// Resolves data stored outside the flatbuffer (`offset`/`size`, valid when offset > 1).
    fn external(&self, location: &str, offset: u64, size: u64) -> Result<Range<usize>, ModelError> {
        let end = offset.checked_add(size);
        match end {
            Some(end) if end <= self.file.len() as u64 => Ok(offset as usize..end as usize),
            _ => Err(ModelError::invalid(
                location,
                format!(
                    "external data offset {offset} + size {size} exceeds the file size {}",
                    self.file.len()
                ),
            )),
        }
    }

    /// The whole model: buffers first, then operator codes and subgraphs (whose indices are
    /// checked against them), then metadata and signatures.
    fn model(&self, root: T<'f>) -> Result<Model, ModelError> {
        let buffers = collect_tables(root.tables(model::BUFFERS), "the buffers", |i, b| {
            self.buffer(i, b)
        })?;
        let operator_codes = collect_tables(
            root.tables(model::OPERATOR_CODES),
            "the operator codes",
            |_, c| operator_code(c),
        )?;
        let subgraphs =
            collect_tables(root.tables(model::SUBGRAPHS), "the subgraphs", |si, sg| {
                self.subgraph(si, sg, buffers.len(), operator_codes.len())
            })?;
        if subgraphs.is_empty() {
            return Err(ModelError::NoSubgraphs);
        }
        super::check_tensor_sizes(&subgraphs)?;
        let metadata = collect_tables(
            root.tables(model::METADATA),
            "the metadata entries",
            |i, m| metadata_entry(i, m, buffers.len()),
        )?;
        let signatures = collect_tables(
            root.tables(model::SIGNATURE_DEFS),
            "the signature defs",
            |i, s| signature_def(i, s, &subgraphs),
        )?;
        Ok(Model {
            bytes: ModelBytes::default(),
            version: root.scalar::<u32>(model::VERSION, 0),
            description: try_opt_string(root.string(model::DESCRIPTION), "the model description")?,
            operator_codes,
            subgraphs,
            buffers,
            metadata,
            signatures,
        })
    }

    fn buffer(&self, i: usize, b: T<'f>) -> Result<Buffer, ModelError> {
        let offset = b.scalar::<u64>(buffer::OFFSET, 0);
        let size = b.scalar::<u64>(buffer::SIZE, 0);
        if offset > 1 {
            let r = self.external(&format!("buffers[{i}].offset/size"), offset, size)?;
            return Ok(Buffer {
                data: (!r.is_empty()).then_some(r),
                external: true,
            });
        }
        let data = b
            .vector::<u8>(buffer::DATA)
            .map(|v| v.bytes())
            .filter(|d| !d.is_empty());
        Ok(Buffer {
            data: data.map(|d| self.range_of(d)),
            external: false,
        })
    }

    fn subgraph(
        &self,
        si: usize,
        sg: T<'f>,
        nbuffers: usize,
        nopcodes: usize,
    ) -> Result<Subgraph, ModelError> {
        let tensors = collect_tables(
            sg.tables(subgraph::TENSORS),
            "the tensors of a subgraph",
            |ti, t| self.tensor(si, ti, t, nbuffers),
        )?;
        let n = tensors.len();
        let indices = |slot,
                       field: &'static str,
                       what: &'static str,
                       allow_optional: bool|
         -> Result<Vec<i32>, ModelError> {
            let v: Vec<i32> = collect(sg.vector::<i32>(slot), what)?;
            for (k, &t) in v.iter().enumerate() {
                check_index(
                    || format!("subgraphs[{si}].{field}[{k}]"),
                    i64::from(t),
                    n,
                    "tensors of the subgraph",
                    allow_optional,
                )?;
            }
            Ok(v)
        };
        let inputs = indices(
            subgraph::INPUTS,
            "inputs",
            "the inputs of a subgraph",
            false,
        )?;
        let outputs = indices(
            subgraph::OUTPUTS,
            "outputs",
            "the outputs of a subgraph",
            false,
        )?;
        let operators = collect_tables(
            sg.tables(subgraph::OPERATORS),
            "the operators of a subgraph",
            |oi, op| self.operator(si, oi, op, n, nopcodes),
        )?;
        Ok(Subgraph {
            name: try_opt_string(sg.string(subgraph::NAME), "a subgraph name")?,
            tensors,
            inputs,
            outputs,
            operators,
        })
    }

    fn tensor(
        &self,
        si: usize,
        ti: usize,
        t: T<'f>,
        nbuffers: usize,
    ) -> Result<TensorDef, ModelError> {
        let buffer = t.scalar::<u32>(tensor::BUFFER, 0);
        check_index(
            || format!("subgraphs[{si}].tensors[{ti}].buffer"),
            i64::from(buffer),
            nbuffers.max(1),
            "buffers",
            false,
        )?;
        let location = |field: &str| format!("subgraphs[{si}].tensors[{ti}].{field}");
        let (mut quantization, mut calibration, mut custom_quantization) = (None, None, false);
        if let Some(q) = t.table(tensor::QUANTIZATION) {
            let min = collect(q.vector::<f32>(quant::MIN), "a tensor's quantization min")?;
            let max = collect(q.vector::<f32>(quant::MAX), "a tensor's quantization max")?;
            if !min.is_empty() || !max.is_empty() {
                calibration = Some(try_box(
                    CalibrationRange { min, max },
                    "a tensor's quantization min and max",
                )?);
            }
            custom_quantization = q.scalar::<u8>(quant::DETAILS_TYPE, 0) != 0;
            if let Some(scales) = q.vector::<f32>(quant::SCALE).filter(|v| !v.is_empty()) {
                quantization = Some(self.affine(
                    scales,
                    q.vector::<i64>(quant::ZERO_POINT),
                    q.scalar::<i32>(quant::QUANTIZED_DIMENSION, 0),
                    || location("quantization"),
                )?);
            }
        }
        let shape = self.scalars(t.vector::<i32>(tensor::SHAPE), "a tensor shape")?;
        if let Some((k, d)) = shape.iter().enumerate().find(|(_, &d)| d < -1) {
            return Err(ModelError::invalid(
                format!("subgraphs[{si}].tensors[{ti}].shape[{k}]"),
                format!("dimension {d}, expected >= 0 (or -1 for unknown)"),
            ));
        }
        Ok(TensorDef {
            name: t
                .string(tensor::NAME)
                .map_or(Ok(Cow::Borrowed("")), |s| self.name(s))?,
            dtype: {
                let code = t.scalar::<i8>(tensor::TYPE, 0);
                dtype_from_schema(code).ok_or_else(|| {
                    ModelError::invalid(location("type"), dtype::unknown_dtype(code))
                })?
            },
            shape,
            shape_signature: t
                .vector::<i32>(tensor::SHAPE_SIGNATURE)
                .map(|v| try_collect(v.iter(), "a tensor shape signature"))
                .transpose()?,
            buffer,
            quantization,
            calibration,
            custom_quantization,
            is_variable: t.scalar::<bool>(tensor::IS_VARIABLE, false),
            is_sparse: t.has(tensor::SPARSITY),
            sparsity: t
                .table(tensor::SPARSITY)
                .map(|s| try_box(decode_sparsity(s)?, "a tensor's sparsity"))
                .transpose()?,
            has_rank: t.scalar::<bool>(tensor::HAS_RANK, false),
        })
    }

    fn operator(
        &self,
        si: usize,
        oi: usize,
        op: T<'f>,
        ntensors: usize,
        nopcodes: usize,
    ) -> Result<Operator, ModelError> {
        let loc = |field: &str| format!("subgraphs[{si}].operators[{oi}].{field}");
        let opcode_index = op.scalar::<u32>(operator::OPCODE_INDEX, 0);
        check_index(
            || loc("opcode_index"),
            i64::from(opcode_index),
            nopcodes,
            "operator_codes",
            false,
        )?;
        let indices = |slot, field: &'static str, what| -> Result<Vec<i32>, ModelError> {
            let v: Vec<i32> = collect(op.vector::<i32>(slot), what)?;
            for (k, &t) in v.iter().enumerate() {
                check_index(
                    || loc(&format!("{field}[{k}]")),
                    i64::from(t),
                    ntensors,
                    "tensors of the subgraph",
                    true,
                )?;
            }
            Ok(v)
        };
        let inputs = indices(operator::INPUTS, "inputs", "the inputs of an operator")?;
        let outputs = indices(operator::OUTPUTS, "outputs", "the outputs of an operator")?;
        let intermediates = indices(
            operator::INTERMEDIATES,
            "intermediates",
            "the intermediates of an operator",
        )?;
        let type_id = op.scalar::<u8>(operator::BUILTIN_OPTIONS_TYPE, 0);
        let builtin_options = match op.table(operator::BUILTIN_OPTIONS) {
            Some(table) if type_id != 0 => options::decode_options(type_id, table)?,
            _ => BuiltinOptions::None,
        };
        let large_offset = op.scalar::<u64>(operator::LARGE_CUSTOM_OPTIONS_OFFSET, 0);
        let custom_options = if large_offset > 1 {
            let size = op.scalar::<u64>(operator::LARGE_CUSTOM_OPTIONS_SIZE, 0);
            let location = loc("large_custom_options_offset/size");
            let r = self.external(&location, large_offset, size)?;
            let total = self.copied.get().saturating_add(r.len());
            if total > self.file.len() {
                return Err(ModelError::invalid(
                    &location,
                    format!(
                        "large custom options of the operators so far add up to {total} bytes, more \
                         than the file's {} bytes: operators share one range (corrupt file)",
                        self.file.len()
                    ),
                ));
            }
            self.copied.set(total);
            try_collect(self.file[r].iter().copied(), "an operator's custom options")?
        } else {
            let bytes = op.vector::<u8>(operator::CUSTOM_OPTIONS).map(|v| v.bytes());
            try_collect(
                bytes.unwrap_or_default().iter().copied(),
                "an operator's custom options",
            )?
        };
        Ok(Operator {
            opcode_index,
            inputs,
            outputs,
            intermediates,
            builtin_options,
            custom_options,
            mutating_variable_inputs: collect(
                op.vector::<bool>(operator::MUTATING_VARIABLE_INPUTS),
                "an operator's mutating variable inputs",
            )?,
        })
    }
}

/// Decodes every table of a vector-of-tables field with `f(index, table)` (empty when absent);
/// `what` names the vector in an out-of-memory error.
fn collect_tables<'f, X>(
    tables: Option<impl ExactSizeIterator<Item = T<'f>>>,
    what: &'static str,
    mut f: impl FnMut(usize, T<'f>) -> Result<X, ModelError>,
) -> Result<Vec<X>, ModelError> {
    let Some(tables) = tables else {
        return Ok(Vec::new());
    };
    let mut out = try_vec(tables.len(), what)?;
    for (i, t) in tables.enumerate() {
        out.push(f(i, t)?);
    }
    Ok(out)
}

/// An `OperatorCode` (the builtin code is the larger of the two code fields, as TFLite reads it).
fn operator_code(c: T<'_>) -> Result<OperatorCode, ModelError> {
    let deprecated = c.scalar::<i8>(opcode::DEPRECATED_BUILTIN_CODE, 0);
    let code = c.scalar::<i32>(opcode::BUILTIN_CODE, 0);
    Ok(OperatorCode {
        builtin: BuiltinOp(code.max(i32::from(deprecated))),
        deprecated_builtin_code: deprecated,
        custom_code: try_opt_string(c.string(opcode::CUSTOM_CODE), "a custom operator code")?,
        version: c.scalar::<i32>(opcode::VERSION, 1),
    })
}

/// Metadata entry `i`, its buffer index checked against `nbuffers`.
fn metadata_entry(i: usize, m: T<'_>, nbuffers: usize) -> Result<Metadata, ModelError> {
    let b = m.scalar::<u32>(metadata::BUFFER, 0);
    check_index(
        || format!("metadata[{i}].buffer"),
        i64::from(b),
        nbuffers,
        "buffers",
        false,
    )?;
    Ok(Metadata {
        name: try_string(
            m.string(metadata::NAME).unwrap_or_default(),
            "a metadata name",
        )?,
        buffer: b,
    })
}

/// Signature definition `i`, its subgraph and tensor indices checked.
fn signature_def(i: usize, s: T<'_>, subgraphs: &[Subgraph]) -> Result<SignatureDef, ModelError> {
    let sgi = s.scalar::<u32>(signature::SUBGRAPH_INDEX, 0);
    check_index(
        || format!("signature_defs[{i}].subgraph_index"),
        i64::from(sgi),
        subgraphs.len(),
        "subgraphs",
        false,
    )?;
    let ntensors = subgraphs[sgi as usize].tensors.len();
    let maps = |slot, field: &'static str, what| {
        collect_tables(s.tables(slot), what, |j, m| {
            let t = m.scalar::<u32>(tensor_map::TENSOR_INDEX, 0);
            check_index(
                || format!("signature_defs[{i}].{field}[{j}].tensor_index"),
                i64::from(t),
                ntensors,
                "tensors of the signature's subgraph",
                false,
            )?;
            Ok(SignatureTensor {
                name: try_string(
                    m.string(tensor_map::NAME).unwrap_or_default(),
                    "a signature tensor name",
                )?,
                tensor_index: t,
            })
        })
    };
    Ok(SignatureDef {
        key: try_string(
            s.string(signature::SIGNATURE_KEY).unwrap_or_default(),
            "a signature key",
        )?,
        subgraph_index: sgi,
        inputs: maps(signature::INPUTS, "inputs", "the inputs of a signature")?,
        outputs: maps(signature::OUTPUTS, "outputs", "the outputs of a signature")?,
    })
}

/// A `SparseIndexVector` union value of type `ty` (`None` for an unknown or absent one).
fn decode_index_vector(ty: u8, t: Option<T<'_>>) -> Result<Option<SparseIndexVector>, ModelError> {
    use schema::sparsity as sp;
    const WHAT: &str = "a sparse index vector";
    let Some(t) = t else {
        return Ok(None);
    };
    Ok(match ty {
        sp::INT32_VECTOR => Some(SparseIndexVector::Int32(collect(
            t.vector::<i32>(sp::VALUES),
            WHAT,
        )?)),
        sp::UINT16_VECTOR => Some(SparseIndexVector::Uint16(collect(
            t.vector::<u16>(sp::VALUES),
            WHAT,
        )?)),
        sp::UINT8_VECTOR => Some(SparseIndexVector::Uint8(collect(
            t.vector::<u8>(sp::VALUES),
            WHAT,
        )?)),
        _ => None,
    })
}

/// `SparsityParameters` as read (the verifier checked every table and vector).
fn decode_sparsity(t: T<'_>) -> Result<Sparsity, ModelError> {
    use schema::sparsity as sp;
    let dim_metadata = collect_tables(
        t.tables(sp::DIM_METADATA),
        "a tensor's sparsity dimension metadata",
        |_, d| {
            Ok(DimensionMetadata {
                format: d.scalar::<i8>(sp::FORMAT, 0),
                dense_size: d.scalar::<i32>(sp::DENSE_SIZE, 0),
                array_segments: decode_index_vector(
                    d.scalar::<u8>(sp::ARRAY_SEGMENTS_TYPE, 0),
                    d.table(sp::ARRAY_SEGMENTS),
                )?,
                array_indices: decode_index_vector(
                    d.scalar::<u8>(sp::ARRAY_INDICES_TYPE, 0),
                    d.table(sp::ARRAY_INDICES),
                )?,
            })
        },
    )?;
    Ok(Sparsity {
        traversal_order: collect(
            t.vector::<i32>(sp::TRAVERSAL_ORDER),
            "a tensor's sparsity traversal order",
        )?,
        block_map: collect(
            t.vector::<i32>(sp::BLOCK_MAP),
            "a tensor's sparsity block map",
        )?,
        dim_metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::writer::test_hooks::LARGE_CUSTOM_OPTIONS;
    use super::*;
    use crate::model::builder::ModelBuilder;
    use crate::model::DType;

    #[test]
    fn a_tensor_type_the_schema_does_not_define_is_refused_by_name() {
        let mut b = ModelBuilder::new("g");
        let x = b.add_tensor("x", DType::BF16, &[4]);
        b.inputs(&[x]).outputs(&[x]);
        let bytes = write_model(&b.build()).unwrap();
        assert_eq!(
            read_model(bytes.clone().into()).unwrap().subgraphs[0].tensors[0].dtype,
            DType::BF16
        );
        // bfloat16 is the schema's 18: one of the bytes holding 18 is the tensor's type field.
        let refused = (0..bytes.len()).filter(|&i| bytes[i] == 18).any(|i| {
            let mut patched = bytes.clone();
            patched[i] = 19;
            read_model(patched.into()).is_err_and(|e| {
                let text = e.to_string();
                text.contains("subgraphs[0].tensors[0].type")
                    && text.contains("tensor type 19 is not a TFLite TensorType")
            })
        });
        assert!(
            refused,
            "no patch of the type field gave the expected error"
        );
    }

    /// A model of `ops` custom operators, each written with large custom options at
    /// `offset`/`size` (offsets point into the file itself).
    fn with_large_options(ops: usize, offset: u64, size: u64) -> Vec<u8> {
        let mut b = ModelBuilder::new("g");
        let x = b.add_tensor("x", DType::F32, &[4]);
        b.inputs(&[x]).outputs(&[x]);
        for _ in 0..ops {
            b.add_custom_op("Opaque", &[], &[x], &[x]);
        }
        let m = b.build();
        LARGE_CUSTOM_OPTIONS.set(Some((offset, size)));
        let bytes = write_model(&m);
        LARGE_CUSTOM_OPTIONS.set(None);
        bytes.unwrap()
    }

    #[test]
    fn large_custom_options_are_read_from_outside_the_flatbuffer() {
        let bytes = with_large_options(2, 8, 16);
        let m = read_model(bytes.clone().into()).unwrap();
        for op in &m.subgraphs[0].operators {
            assert_eq!(op.custom_options, bytes[8..24]);
        }
        // A range past the end of the file is an error naming the field.
        let len = bytes.len() as u64;
        let e = read_model(with_large_options(1, len - 4, 64).into()).unwrap_err();
        assert!(
            e.to_string().contains("large_custom_options_offset/size"),
            "{e}"
        );
    }

    #[test]
    fn operators_sharing_one_large_range_cannot_multiply_the_memory_read() {
        // 64 operators all naming most of the file: copying each would take 64 times the file.
        let probe = with_large_options(64, 8, 16);
        let size = probe.len() as u64 / 2;
        let bytes = with_large_options(64, 8, size);
        let e = read_model(bytes.into()).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("large custom options"), "{text}");
        assert!(text.contains("corrupt"), "{text}");
    }

    /// `bytes` copied into a block leaked for the whole program, starting `shift` bytes past a
    /// 64-byte boundary.
    fn leaked(bytes: &[u8], shift: usize) -> &'static [u8] {
        let block: &'static mut [u8] = Vec::leak(vec![0u8; bytes.len() + 64 + shift]);
        let start = block.as_ptr().align_offset(64) + shift;
        block[start..start + bytes.len()].copy_from_slice(bytes);
        &block[start..start + bytes.len()]
    }

    #[test]
    fn static_bytes_keep_quantization_in_place_and_misaligned_ones_copy_it() {
        let mut b = ModelBuilder::new("g");
        let w = b.add_tensor("w", DType::I8, &[3, 1, 1, 2]);
        let q = Quantization::per_channel(vec![0.5, 0.25, 2.0], vec![0, -1, 3], 0).unwrap();
        b.set_quantization(w, q.clone()).unwrap();
        b.inputs(&[w]).outputs(&[w]);
        let bytes = write_model(&b.build()).unwrap();
        let read = |m: &Model| m.subgraphs[0].tensors[0].quantization.clone().unwrap();
        // Aligned static bytes: the parameters are borrowed from them.
        let aligned = leaked(&bytes, 0);
        let m = read_model(ModelBytes::from_static(aligned)).unwrap();
        let (inside, qa) = (aligned.as_ptr_range(), read(&m));
        assert_eq!((qa.heap_bytes(), &qa), (0, &q));
        assert!(inside.contains(&qa.scales().as_ptr().cast()));
        assert!(inside.contains(&qa.zero_points().as_ptr().cast()));
        // Shifted by 4 bytes (the zero points are no longer 8-byte aligned) or shared bytes:
        // copies, the same values.
        let shifted = read_model(ModelBytes::from_static(leaked(&bytes, 4))).unwrap();
        let shared = read_model(bytes.clone().into()).unwrap();
        for m in [&shifted, &shared] {
            let qm = read(m);
            assert!(qm.heap_bytes() > 0);
            assert_eq!(qm, q);
        }
    }
}
