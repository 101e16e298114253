//! The executable graph built from the model's subgraphs (see `subgraphs`): one [`TensorEntry`] per tensor (the one
//! place model tensor types become `tensor::DType`) and one [`NodeInfo`] per operator.
//!
//! [`TensorEntry`] is the build's table (names, shapes, kinds: what prepare reads besides the
//! quantization, which it reads from the parsed model by tensor index).
//! What invoke needs of a tensor besides its slot (address, bytes, dtype) is its shape, its
//! kind and, for a constant stored sparse, its sparsity: [`TensorTable`] keeps only that, 8
//! bytes per tensor plus one shared pool of dimensions in which equal shapes are stored once;
//! names and quantization stay only for the tensors it is asked to keep (graph inputs and
//! outputs, which users read), the names read in place from the model's bytes where the
//! flatbuffer stores them. [`NodeInfo`] is the build's node list; after build the node table
//! of `context` replaces it.

use super::carve::{Place, Table};
use super::error::InterpreterError;
use super::subgraphs::Layout;
use crate::model::{BuiltinOp, Model, Sparsity, TensorDef};
use crate::tensor::DType;
use crate::tensor::QuantizationRef;
use rust_alloc::borrow::Cow;
use rust_alloc::{boxed::Box, format, string::String, string::ToString, vec::Vec};

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
    /// Element type (the name and quantization are read from the model:
    /// [`Layout::tensor`]).
    pub dtype: DType,
    /// Where its dimensions (static shape) sit in the staging's shape pool (see [`build`]).
    pub dims: DimsAt,
    /// Bytes (`prod(dims) * dtype size`).
    pub bytes: usize,
    /// Storage kind.
    pub kind: TensorKind,
    /// Sparse storage of a constant (its `bytes` are then the stored values, not the dense
    /// size); only kernels registered to read it sparse (`Registration::sparse_inputs`) may.
    pub sparsity: Option<Box<Sparsity>>,
}

/// Where a tensor's dimensions sit in a shape pool (one `Vec<usize>` shared by all tensors of
/// a staging, equal shapes stored once; [`build`] makes it): `rank` dimensions from `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DimsAt {
    at: u32,
    rank: u32,
}

impl DimsAt {
    /// The dimensions in `pool` (the pool they were stored in; empty if it is not).
    pub fn of(self, pool: &[usize]) -> &[usize] {
        let at = self.at as usize;
        pool.get(at..at + self.rank as usize).unwrap_or(&[])
    }

    /// Number of dimensions.
    pub fn rank(self) -> usize {
        self.rank as usize
    }
}

/// Stores `dims` in `pool` (where an equal run already is, else appended; a scalar's empty
/// shape is the empty run at 0); `None` when the pool or rank outgrows `u32`.
fn pool_dims(pool: &mut Vec<usize>, dims: &[usize]) -> Option<DimsAt> {
    let rank = u32::try_from(dims.len()).ok()?;
    let found = match dims.len() {
        0 => Some(0),
        n => pool.windows(n).position(|w| w == dims),
    };
    let at = found.unwrap_or_else(|| {
        pool.extend_from_slice(dims);
        pool.len() - dims.len()
    });
    Some(DimsAt {
        at: u32::try_from(at).ok()?,
        rank,
    })
}

/// Per tensor of a [`TensorTable`]: where its dimensions sit in the pool, and its kind. 4
/// bytes: the pool (equal shapes stored once) holds at most 65,535 dimensions and a rank is at
/// most 255; build refuses more.
#[derive(Clone, Copy, Debug)]
struct TensorMeta {
    /// Start of the dimensions in [`TensorTable::dims`].
    dims: u16,
    /// Rank.
    rank: u8,
    kind: TensorKind,
}

const _: () = assert!(core::mem::size_of::<TensorMeta>() == 4);

/// A tensor's name and quantization, kept for the tensors users read (graph inputs and
/// outputs): where the name's bytes are (the model's bytes when it stores the name as a string,
/// as TFLM reads names, else the table's own name pool) and where its parameters are in the
/// table's scale and zero-point pools (`q_len == 0`: no quantization; a [`Quantization`] has at
/// least one scale). Plain numbers, so that it can live in the caller's buffer.
#[derive(Clone, Copy, Debug)]
struct Described {
    tensor: u32,
    name_at: u32,
    name_len: u32,
    /// The name is in the model's bytes (else in [`TensorTable::names`]).
    name_in_model: bool,
    q_at: u32,
    q_len: u32,
    q_dim: u32,
}

/// Where `bytes` (a flatbuffer) stores `name` as a string: a 4-aligned little-endian length,
/// the bytes and a zero terminator. Any such occurrence holds the same bytes, so any one
/// serves. A name borrowed from `bytes` (a model read in place) is found by its address;
/// else the name's occurrences are searched for from the end (`memchr::memmem`, vectorized
/// with `std`): the converters' files (TFLM's examples, Keras exports) store the tensor names
/// after the weights, so the search reads a few KiB where a scan from the start read the whole
/// file (ResNet-50 float32: 102 MB, some 30 ms a name byte by byte).
fn find_string(bytes: &[u8], name: &str) -> Option<(u32, u32)> {
    let n = name.len();
    let len = u32::try_from(n).ok()?.to_le_bytes();
    let is_string_at = |at: usize| {
        at >= 4
            && at.is_multiple_of(4)
            && bytes.get(at - 4..at) == Some(&len[..])
            && bytes.get(at..at + n) == Some(name.as_bytes())
            && bytes.get(at + n) == Some(&0)
    };
    let found = |at: usize| Some((u32::try_from(at).ok()?, n as u32));
    let at = (name.as_ptr() as usize).wrapping_sub(bytes.as_ptr() as usize);
    if at < bytes.len() && is_string_at(at) {
        return found(at);
    }
    // Offsets from the start of `bytes`: flatbuffers align strings to 4 from there.
    let start = memchr::memmem::rfind_iter(bytes, name.as_bytes()).find(|&at| is_string_at(at))?;
    found(start)
}

/// The tensor table kept after build and read by kernels at invoke (see the module docs):
/// shapes (one pool, equal shapes shared), kinds, sparsity of sparse constants, names and
/// quantization of the kept tensors. Invariant: every [`TensorMeta`] range lies inside `dims`,
/// and every [`Name::InModel`] range inside `model`.
#[derive(Default)]
pub(crate) struct TensorTable<'a> {
    meta: Table<'a, TensorMeta>,
    dims: Table<'a, usize>,
    sparse: Box<[(u32, Sparsity)]>,
    described: Table<'a, Described>,
    /// The kept names the model's bytes do not store as strings.
    names: Table<'a, u8>,
    /// The kept quantization parameters (see [`Described`]).
    scales: Table<'a, f32>,
    zero_points: Table<'a, i64>,
    /// The model's bytes names are read from (`None`: every name is a copy).
    model: Option<crate::model::ModelBytes>,
}

impl<'a> TensorTable<'a> {
    /// The compact table of `entries` (their dimensions in `shapes`, the pool they were built
    /// with, which the table copies); tensors for which `keep(t)` holds keep their name and
    /// quantization (of `def(t)`, the model's tensor), the name read in place from `model` (the
    /// model's bytes) where it stores it.
    pub(crate) fn new<'q>(
        (entries, shapes): (&[TensorEntry], &[usize]),
        keep: impl Fn(usize) -> bool,
        def: impl Fn(usize) -> &'q TensorDef,
        model: Option<&crate::model::ModelBytes>,
    ) -> Result<Self, InterpreterError> {
        let mut meta = Vec::with_capacity(entries.len());
        let mut sparse = Vec::new();
        let mut described = Vec::new();
        let (mut names, mut scales, mut zero_points) = (Vec::new(), Vec::new(), Vec::new());
        for (t, e) in entries.iter().enumerate() {
            let name = &def(t).name;
            let too_big = || InterpreterError::Tensor {
                index: t,
                name: name.to_string(),
                message: "rank or shape table too large for the interpreter's tables".into(),
            };
            // The staging's pool already stores equal shapes once.
            let rank = u8::try_from(e.dims.rank()).map_err(|_| too_big())?;
            let start = u16::try_from(e.dims.at).map_err(|_| too_big())?;
            let tensor = u32::try_from(t).map_err(|_| too_big())?;
            meta.push(TensorMeta {
                dims: start,
                rank,
                kind: e.kind,
            });
            if let Some(s) = &e.sparsity {
                sparse.push((tensor, (**s).clone()));
            }
            if keep(t) {
                let (name_at, name_len, name_in_model) =
                    match model.and_then(|b| find_string(b, name)) {
                        Some((at, len)) => (at, len, true),
                        None => {
                            let at = u32::try_from(names.len()).map_err(|_| too_big())?;
                            names.extend_from_slice(name.as_bytes());
                            let len = u32::try_from(name.len()).map_err(|_| too_big())?;
                            (at, len, false)
                        }
                    };
                let q_at = u32::try_from(scales.len()).map_err(|_| too_big())?;
                let (q_len, q_dim) = match &def(t).quantization {
                    Some(q) => {
                        scales.extend_from_slice(q.scales());
                        zero_points.extend_from_slice(q.zero_points());
                        (
                            u32::try_from(q.scales().len()).map_err(|_| too_big())?,
                            u32::try_from(q.quantized_dimension()).map_err(|_| too_big())?,
                        )
                    }
                    None => (0, 0),
                };
                described.push(Described {
                    tensor,
                    name_at,
                    name_len,
                    name_in_model,
                    q_at,
                    q_len,
                    q_dim,
                });
            }
        }
        let mut dims = Vec::new();
        dims.try_reserve_exact(shapes.len())
            .map_err(|_| InterpreterError::Memory("out of memory for the shape table".into()))?;
        dims.extend_from_slice(shapes);
        Ok(TensorTable {
            meta: meta.into(),
            dims: dims.into(),
            sparse: sparse.into(),
            described: described.into(),
            names: names.into(),
            scales: scales.into(),
            zero_points: zero_points.into(),
            model: model.cloned(),
        })
    }

    /// Number of tensors.
    pub(crate) fn len(&self) -> usize {
        self.meta.len()
    }

    /// Moves the per-tensor records, the shape pool and the kept names and quantization to
    /// `place` (`false`: they do not fit). Sparsity stays on the heap (no caller's-buffer
    /// model has sparse constants read sparse yet).
    pub(crate) fn place(&mut self, place: &mut impl Place<'a>) -> bool {
        place.place(&mut self.meta)
            && place.place(&mut self.dims)
            && place.place(&mut self.described)
            && place.place(&mut self.names)
            && place.place(&mut self.scales)
            && place.place(&mut self.zero_points)
    }

    /// Dimensions of tensor `t`.
    pub(crate) fn dims(&self, t: usize) -> &[usize] {
        let m = self.meta[t];
        let start = m.dims as usize;
        &self.dims[start..start + m.rank as usize]
    }

    /// Storage kind of tensor `t`.
    pub(crate) fn kind(&self, t: usize) -> TensorKind {
        self.meta[t].kind
    }

    /// Sparse storage of tensor `t`, a constant stored sparse.
    pub(crate) fn sparsity(&self, t: usize) -> Option<&Sparsity> {
        let t = t as u32;
        self.sparse.iter().find(|(s, _)| *s == t).map(|(_, s)| s)
    }

    fn described(&self, t: usize) -> Option<&Described> {
        let t = t as u32;
        self.described.iter().find(|d| d.tensor == t)
    }

    /// Name of tensor `t` (empty unless it was kept).
    pub(crate) fn name(&self, t: usize) -> &str {
        let Some(d) = self.described(t) else {
            return "";
        };
        let range = d.name_at as usize..d.name_at as usize + d.name_len as usize;
        let bytes = if d.name_in_model {
            self.model.as_deref().and_then(|b| b.get(range))
        } else {
            self.names.get(range)
        };
        bytes
            .and_then(|b| core::str::from_utf8(b).ok())
            .unwrap_or("")
    }

    /// Quantization of tensor `t` (`None` unless it was kept and has some).
    pub(crate) fn quantization(&self, t: usize) -> Option<QuantizationRef<'_>> {
        let d = self.described(t).filter(|d| d.q_len > 0)?;
        let range = d.q_at as usize..d.q_at as usize + d.q_len as usize;
        Some(QuantizationRef::from_parts(
            self.scales.get(range.clone())?,
            self.zero_points.get(range)?,
            d.q_dim as usize,
        ))
    }

    /// `tensor {t}` and the name when it is kept, for error messages.
    pub(crate) fn label(&self, t: usize) -> String {
        match self.name(t) {
            "" => format!("tensor {t}"),
            name => format!("tensor {t} `{name}`"),
        }
    }

    /// Heap bytes the table holds (requested sizes) by part: the per-tensor records, the
    /// shape pool, and the kept names, quantization and sparsity.
    pub(crate) fn heap_parts(&self) -> [(&'static str, usize); 3] {
        use core::mem::size_of;
        let described = self.sparse.len() * size_of::<(u32, Sparsity)>()
            + self
                .sparse
                .iter()
                .map(|(_, s)| sparsity_heap_bytes(s))
                .sum::<usize>()
            + self.described.heap_bytes()
            + self.names.heap_bytes()
            + self.scales.heap_bytes()
            + self.zero_points.heap_bytes();
        [
            ("tensor records", self.meta.heap_bytes()),
            ("shapes", self.dims.heap_bytes()),
            ("io names, quantization, sparsity", described),
        ]
    }
}

/// Heap bytes of `s`'s vectors (the index vectors at their element width).
fn sparsity_heap_bytes(s: &Sparsity) -> usize {
    use crate::model::SparseIndexVector as V;
    let index = |v: &Option<V>| match v {
        Some(V::Int32(v)) => v.capacity() * 4,
        Some(V::Uint16(v)) => v.capacity() * 2,
        Some(V::Uint8(v)) => v.capacity(),
        None => 0,
    };
    (s.traversal_order.capacity() + s.block_map.capacity()) * 4
        + s.dim_metadata.capacity() * core::mem::size_of::<crate::model::DimensionMetadata>()
        + s.dim_metadata
            .iter()
            .map(|d| index(&d.array_segments) + index(&d.array_indices))
            .sum::<usize>()
}

/// An operator of the executable graph.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    /// Index in the interpreter's node table (subgraph 0's nodes first, with their own
    /// indices; then the nodes of the subgraphs control flow calls, see `subgraphs`).
    pub index: usize,
    /// The model's index of the subgraph the node belongs to.
    pub subgraph: usize,
    /// Index of the node in its subgraph.
    pub local: usize,
    /// Builtin op (CUSTOM for custom ops).
    pub builtin: BuiltinOp,
    /// Display name (`CONV_2D`, `CUSTOM(name)`): the builtin's static name, built only for
    /// custom and unknown ops.
    pub op_name: Cow<'static, str>,
    /// Op version.
    pub version: i32,
    /// Input tensor indices (`-1` = omitted).
    pub inputs: Box<[i32]>,
    /// Output tensor indices.
    pub outputs: Box<[i32]>,
    /// Whether the node does not run at invoke: every input is constant (it runs once at
    /// build), or it was folded into its reader (a float16 DEQUANTIZE, a PAD).
    pub prepare_time: bool,
    /// Padding a PAD folded into this convolution adds around its input (see
    /// `builder::pad_fusion`); `None` for every other node (boxed: few nodes have one, and the
    /// table of every node would otherwise carry its size).
    pub fused_padding: Option<Box<FusedPadding>>,
}

/// Rows and columns of pad value around a convolution's input, from a PAD folded into it:
/// the window starts `top` rows and `left` columns before the input and may run `bottom` rows
/// and `right` columns past it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FusedPadding {
    /// Rows before the first.
    pub top: u32,
    /// Rows after the last.
    pub bottom: u32,
    /// Columns before the first.
    pub left: u32,
    /// Columns after the last.
    pub right: u32,
}

impl NodeInfo {
    /// `message`, prefixed with the node's subgraph and index in it when that is not subgraph 0
    /// (whose node indices are the interpreter's).
    pub(crate) fn in_subgraph(&self, message: String) -> String {
        if self.subgraph == 0 {
            message
        } else {
            format!("subgraph {} node {}: {message}", self.subgraph, self.local)
        }
    }
}

/// The tensor table and shape pool a staging builds ([`build`]).
pub(crate) type Tensors = (Vec<TensorEntry>, Vec<usize>);

/// Builds the tensor table of the subgraphs of `layout` (kinds from the merged lifetimes; global
/// tensor indices) with the pool of their dimensions (equal shapes stored once, see [`DimsAt`]),
/// and the node list, with node inputs and outputs as global tensor indices.
pub(crate) fn build(
    model: &Model,
    layout: &Layout,
    lifetimes: &crate::model::Lifetimes,
) -> Result<(Tensors, Vec<NodeInfo>), InterpreterError> {
    use crate::model::PersistentKind;
    let count = layout.num_tensors();
    let mut kinds = vec![TensorKind::Unused; count];
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
        let tensor = layout.tensor(model, t);
        return Err(InterpreterError::Tensor {
            index: t,
            name: tensor.name.to_string(),
            message: format!(
                "dtype {} has no fixed size; this interpreter runs only fixed-size tensors",
                tensor.dtype.name()
            ),
        });
    }
    let mut tensors = Vec::with_capacity(count);
    let mut shapes = Vec::new();
    let mut dims = Vec::new();
    for (t, kind) in kinds.iter_mut().enumerate() {
        let tensor = layout.tensor(model, t);
        let data = layout.tensor_data(model, t);
        if layout.is_constant(model, t) {
            *kind = TensorKind::Constant;
        }
        tensors.push(entry(t, tensor, kind, data, (&mut dims, &mut shapes))?);
    }
    shapes.shrink_to_fit();
    let mut nodes = Vec::with_capacity(layout.num_nodes());
    for p in 0..layout.len() {
        let si = layout.model_index[p];
        let base = layout.tensor_start[p] as i32;
        let global = |list: &[i32]| -> Box<[i32]> {
            list.iter()
                .map(|&t| if t >= 0 { t + base } else { t })
                .collect()
        };
        for (j, op) in model.subgraphs[si].operators.iter().enumerate() {
            let i = layout.node_start[p] + j;
            let code = operator_code(model, j, op)?;
            let outputs = global(&op.outputs);
            // Lifetimes marked the outputs of all-constant ops as prepare-time constants; such
            // a node runs once at build.
            let prepare_time = outputs.iter().any(|&t| t >= 0)
                && outputs
                    .iter()
                    .filter(|&&t| t >= 0)
                    .all(|&t| kinds[t as usize] == TensorKind::PrepareTimeConstant);
            nodes.push(NodeInfo {
                index: i,
                subgraph: si,
                local: j,
                builtin: code.builtin,
                op_name: match (code.builtin, code.builtin.name()) {
                    (op, Some(name)) if op != BuiltinOp::CUSTOM => Cow::Borrowed(name),
                    _ => Cow::Owned(code.display_name()),
                },
                version: code.version,
                inputs: global(&op.inputs),
                outputs,
                prepare_time,
                fused_padding: None,
            });
        }
    }
    Ok(((tensors, shapes), nodes))
}

/// The table entry of model tensor `tensor` (global index `t`, `data` its bytes in the model),
/// its dimensions stored in `shapes` (`dims`: a reused buffer).
fn entry(
    t: usize,
    tensor: &crate::model::TensorDef,
    kind: &TensorKind,
    data: Option<&[u8]>,
    (dims, shapes): (&mut Vec<usize>, &mut Vec<usize>),
) -> Result<TensorEntry, InterpreterError> {
    let kind = *kind;
    let err = |message: String| InterpreterError::Tensor {
        index: t,
        name: tensor.name.to_string(),
        message,
    };
    let dtype = match tensor.dtype {
        d if d.has_element() => d,
        // A resource handle holds its variable's id (VAR_HANDLE writes it; READ_VARIABLE and
        // ASSIGN_VARIABLE read it), an int32 as in TFLite.
        DType::Resource => DType::I32,
        _ if kind == TensorKind::Unused => DType::U8,
        d => {
            return Err(err(format!(
                "dtype {d} is not supported by the interpreter; expected a number or bool dtype"
            )))
        }
    };
    let elem = dtype
        .size()
        .ok_or_else(|| err(format!("dtype {dtype} has no fixed element size")))?;
    dims.clear();
    for &d in tensor.shape.iter() {
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
    let sparse = tensor.sparsity.is_some() && kind == TensorKind::Constant;
    if sparse {
        // Stored sparse: the data holds the stored values only (DENSIFY checks their count).
        let have = data.map_or(0, <[u8]>::len);
        if !have.is_multiple_of(elem) {
            return Err(err(format!(
                "sparse constant data has {have} bytes, not a multiple of {elem}"
            )));
        }
        bytes = have;
    } else if kind == TensorKind::Constant {
        let have = data.map_or(0, <[u8]>::len);
        if have != bytes {
            return Err(err(format!(
                "constant data has {have} bytes, shape {:?} of {} needs {bytes}",
                tensor.shape, dtype
            )));
        }
        if dtype == DType::Bool {
            if let Some(i) = data.and_then(|d| d.iter().position(|&b| b > 1)) {
                return Err(err(format!("bool constant byte {i} is not 0 or 1")));
            }
        }
    }
    let dims = pool_dims(shapes, dims)
        .ok_or_else(|| err("shape too large for the interpreter's tables".into()))?;
    Ok(TensorEntry {
        dtype,
        dims,
        bytes,
        kind,
        sparsity: if sparse {
            tensor.sparsity.clone()
        } else {
            None
        },
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A name is found only where the bytes store it as a flatbuffer string (4-aligned length
    /// prefix, the bytes, a zero), whether it is searched for or borrowed from the bytes; decoys
    /// (unaligned, wrong length, no terminator, a longer name's prefix) are skipped.
    #[test]
    fn find_string_takes_only_a_stored_string() {
        let mut b = Vec::new();
        b.extend_from_slice(b"xx");
        b.extend_from_slice(&[5, 0, 0, 0]);
        b.extend_from_slice(b"input\0"); // length prefix at 2: unaligned
        b.resize(12, 0);
        b.extend_from_slice(&[6, 0, 0, 0]);
        b.extend_from_slice(b"input\0\0\0"); // wrong length
        b.extend_from_slice(&[5, 0, 0, 0]);
        b.extend_from_slice(b"inputs\0\0"); // a longer name
        b.extend_from_slice(&[5, 0, 0, 0]);
        b.extend_from_slice(b"input\0\0\0"); // the string, at 40
        b.extend_from_slice(&[5, 0, 0, 0]);
        b.extend_from_slice(b"input"); // a second one, unterminated at the end
        assert_eq!(find_string(&b, "input"), Some((40, 5)));
        let borrowed = core::str::from_utf8(&b[40..45]).unwrap();
        assert_eq!(find_string(&b, borrowed), Some((40, 5)));
        // Borrowed from a position that is not a string: searched for instead.
        let decoy = core::str::from_utf8(&b[6..11]).unwrap();
        assert_eq!(find_string(&b, decoy), Some((40, 5)));
        assert_eq!(find_string(&b[..40], "input"), None);
        assert_eq!(find_string(&b, "output"), None);
        assert_eq!(find_string(&[], "input"), None);
    }

    /// Every shape reads back from the pool as stored; equal shapes (and a shape that is a run
    /// of one already stored) take no new room; a scalar's empty shape takes none.
    #[test]
    fn the_shape_pool_stores_equal_shapes_once() {
        let mut pool = Vec::new();
        let shapes: [&[usize]; 7] = [
            &[1, 96, 96, 1],
            &[1, 3, 3, 8],
            &[],
            &[1, 96, 96, 1],
            &[96, 96],
            &[1, 3, 3, 8],
            &[2, 5],
        ];
        let at: Vec<DimsAt> = shapes
            .iter()
            .map(|s| pool_dims(&mut pool, s).unwrap())
            .collect();
        for (a, s) in at.iter().zip(&shapes) {
            assert_eq!(a.of(&pool), *s);
            assert_eq!(a.rank(), s.len());
        }
        assert_eq!(at[0], at[3]);
        assert_eq!(at[1], at[5]);
        assert_eq!(pool, [1, 96, 96, 1, 1, 3, 3, 8, 2, 5]);
        // A position outside the pool reads as no dimensions, not a panic.
        assert_eq!(at[6].of(&pool[..4]), &[] as &[usize]);
    }
}
