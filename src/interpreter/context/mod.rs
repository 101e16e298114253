//! The per-phase contexts a kernel works through ([`InitContext`], [`PrepareContext`],
//! [`InvokeContext`]) and the handles it keeps between phases ([`PersistentArray`],
//! [`StateArray`], [`ScratchId`]).
//!
//! Memory a kernel asks for:
//! - **op data** ([`PrepareContext::set_op_data`]): one `Copy` value per node, kept in the
//!   arena's tail and read back at invoke with its type checked;
//! - **persistent arrays** ([`PrepareContext::persistent_array`]): e.g. per-channel multipliers,
//!   in the tail for the interpreter's life, read-only at invoke;
//! - **state** ([`PrepareContext::persistent_state`]): tail memory invoke may write (a running
//!   estimate), zeroed by `reset_variables`;
//! - **scratch** ([`PrepareContext::request_scratch`]): bytes that exist only while the node
//!   runs, planned into the arena's head beside the tensors (their lifetime is the one node);
//! - **temp** ([`PrepareContext::temp`]): bytes for the duration of this node's prepare only.
//!
//! During build, persistent memory is staged and copied into the arena's tail once the arena
//! exists; handles stay valid across that move because they name a record, not an address.

use super::error::KernelError;
use super::graph::{NodeInfo, TensorEntry, TensorKind};
use crate::arena::Category;
use crate::kernel_bail;
use crate::model::{BuiltinOp, BuiltinOptions, Quantization, Sparsity};
use crate::tensor::{DType, Element};
use core::any::TypeId;
use core::marker::PhantomData;
use rust_alloc::vec::Vec;

mod invoke;
mod nodes;
mod slots;
mod staging;

pub use invoke::InvokeContext;
pub(crate) use invoke::{check_node_views, Program};
pub(crate) use nodes::{NodeEntry, NodeRef, NodeTables};
pub(crate) use slots::{RecordTable, Slot, SlotTable};
pub(crate) use staging::{
    NodeMemory, OpDataRef, Persistent, Resource, ScratchRequest, Staging, StagingRegion,
};

/// Most outputs a node may have.
pub const MAX_OUTPUTS: usize = 32;
/// Most inputs a node may have.
pub const MAX_INPUTS: usize = 64;
/// Most scratch buffers a node may request.
pub const MAX_SCRATCH: usize = 32;

/// Alignment of every persistent record and scratch buffer.
pub const RECORD_ALIGNMENT: usize = 16;

/// Element types a kernel may keep in persistent arrays and scratch: every bit pattern is a
/// valid value (all numeric [`Element`]s; not `bool`).
pub trait Scalar: Element {}
impl Scalar for f32 {}
impl Scalar for f64 {}
impl Scalar for i8 {}
impl Scalar for u8 {}
impl Scalar for i16 {}
impl Scalar for u16 {}
impl Scalar for i32 {}
impl Scalar for u32 {}
impl Scalar for i64 {}
impl Scalar for u64 {}
impl Scalar for half::f16 {}
impl Scalar for half::bf16 {}

/// `len` as the length of a persistent or state array, an error beyond `u32::MAX` values.
fn array_len(len: usize) -> Result<u32, KernelError> {
    u32::try_from(len).map_err(|_| {
        KernelError::new(format!(
            "persistent array of {len} values exceeds the {} values an array may hold",
            u32::MAX
        ))
    })
}

/// Whether a tensor of dtype `d` can be viewed as `T` (a bool tensor as `u8` too).
fn dtype_matches<T: Element>(d: DType) -> bool {
    T::DTYPE == d || (d == DType::Bool && T::DTYPE == DType::U8)
}

/// A persistent array of `len` values of `T` in the arena's tail.
#[derive(Debug)]
pub struct PersistentArray<T> {
    record: u32,
    /// Number of values (u32 keeps op data that holds arrays small).
    len: u32,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for PersistentArray<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for PersistentArray<T> {}

impl<T> PersistentArray<T> {
    /// Number of values.
    pub fn len(&self) -> usize {
        self.len as usize
    }
    /// Whether the array is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Kernel state of `len` values of `T` in the arena's tail that invoke may write (e.g. a noise
/// estimate refined frame after frame), zeroed at build and by
/// [`reset_variables`](super::Interpreter::reset_variables). Only the node that allocated it can
/// reach it.
#[derive(Debug)]
pub struct StateArray<T> {
    record: u32,
    /// Number of values (see [`PersistentArray`]).
    len: u32,
    _t: PhantomData<fn() -> T>,
}

impl StateArray<u8> {
    /// The same bytes as values of `T` (the whole values that fit).
    pub fn of<T: Scalar>(self) -> StateArray<T> {
        StateArray {
            record: self.record,
            len: self.len / core::mem::size_of::<T>() as u32,
            _t: PhantomData,
        }
    }
}

impl<T> Clone for StateArray<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for StateArray<T> {}

/// Most state arrays a node may allocate.
pub const MAX_STATES: usize = 64;

/// A scratch buffer requested by a node's prepare (index into that node's requests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScratchId(pub(crate) u32);

/// A tensor as prepare sees it.
#[derive(Clone, Copy, Debug)]
pub struct TensorInfo<'a> {
    /// Tensor index in the subgraph.
    pub index: usize,
    /// Name.
    pub name: &'a str,
    /// Element type.
    pub dtype: DType,
    /// Dimensions.
    pub dims: &'a [usize],
    /// Quantization parameters, when the model gives them.
    pub quantization: Option<&'a Quantization>,
    /// Whether the tensor holds constant data (weights, or computed once at prepare).
    pub is_constant: bool,
    /// Whether it is variable state (kept across invokes).
    pub is_variable: bool,
    /// Sparse storage parameters of a constant stored sparse (its data holds the stored
    /// values only; see DENSIFY).
    pub sparsity: Option<&'a Sparsity>,
    data: Option<&'a [u8]>,
}

impl<'a> TensorInfo<'a> {
    /// Number of elements.
    pub fn num_elements(&self) -> usize {
        self.dims.iter().product()
    }

    /// Dimension `i`, or an error naming the tensor when the rank is smaller.
    pub fn dim(&self, i: usize) -> Result<usize, KernelError> {
        self.dims.get(i).copied().ok_or_else(|| {
            KernelError::new(format!(
                "tensor `{}` has rank {}, dimension {i} was expected",
                self.name,
                self.dims.len()
            ))
        })
    }

    /// Fails unless the dtype is `want`.
    pub fn expect_dtype(&self, want: DType) -> Result<(), KernelError> {
        if self.dtype != want {
            return Err(KernelError::new(format!(
                "tensor `{}` has dtype {}, expected {want}",
                self.name, self.dtype
            )));
        }
        Ok(())
    }

    /// Fails unless the dims are `want`.
    pub fn expect_dims(&self, want: &[usize]) -> Result<(), KernelError> {
        if self.dims != want {
            return Err(KernelError::new(format!(
                "tensor `{}` has shape {:?}, expected {want:?}",
                self.name, self.dims
            )));
        }
        Ok(())
    }

    /// Per-tensor scale and zero point; an error when absent or per-channel.
    pub fn per_tensor_quant(&self) -> Result<(f32, i32), KernelError> {
        let q = self.quantization.ok_or_else(|| {
            KernelError::new(format!(
                "tensor `{}` has no quantization parameters",
                self.name
            ))
        })?;
        let [scale] = *q.scales() else {
            return Err(KernelError::new(format!(
                "tensor `{}` has {} scales, expected one (per-tensor)",
                self.name,
                q.channels()
            )));
        };
        let zp = q.zero_points()[0];
        let zp = i32::try_from(zp).map_err(|_| {
            KernelError::new(format!(
                "tensor `{}` zero point {zp} out of range",
                self.name
            ))
        })?;
        if !(scale.is_finite() && scale > 0.0) {
            return Err(KernelError::new(format!(
                "tensor `{}` scale {scale}, expected a finite positive number",
                self.name
            )));
        }
        Ok((scale, zp))
    }

    /// Constant data viewed as `T` (`None` for a non-constant tensor).
    pub fn data<T: Element>(&self) -> Result<Option<&'a [T]>, KernelError> {
        let Some(bytes) = self.data else {
            return Ok(None);
        };
        if !dtype_matches::<T>(self.dtype) {
            return Err(KernelError::new(format!(
                "tensor `{}` has dtype {}, read as {}",
                self.name,
                self.dtype,
                T::DTYPE
            )));
        }
        Ok(Some(view::<T>(bytes, self.name)?))
    }

    /// Constant data as `T`, an error when the tensor is not constant.
    pub fn const_data<T: Element>(&self) -> Result<&'a [T], KernelError> {
        self.data::<T>()?.ok_or_else(|| {
            KernelError::new(format!(
                "tensor `{}` must be constant for this op",
                self.name
            ))
        })
    }
}

fn view<'a, T: Element>(bytes: &'a [u8], name: &str) -> Result<&'a [T], KernelError> {
    let size = core::mem::size_of::<T>();
    if !bytes.len().is_multiple_of(size)
        || !(bytes.as_ptr() as usize).is_multiple_of(core::mem::align_of::<T>())
    {
        return Err(KernelError::new(format!(
            "tensor `{name}` data ({} bytes) is not a whole, aligned array of {}",
            bytes.len(),
            T::DTYPE
        )));
    }
    // SAFETY: aligned, in bounds, a whole number of `T`; the graph validated bool data to be
    // 0 or 1 (and `T` is a numeric type otherwise, valid for any bits).
    Ok(unsafe { core::slice::from_raw_parts(bytes.as_ptr() as *const T, bytes.len() / size) })
}

/// What init and prepare share: the node and the persistent staging.
pub(crate) struct BuildState<'a> {
    pub node: &'a NodeInfo,
    pub options: &'a BuiltinOptions,
    pub custom_options: &'a [u8],
    pub persistent: &'a mut Persistent,
    pub memory: &'a mut NodeMemory,
}

impl BuildState<'_> {
    fn set_op_data<T: Copy + Send + Sync + 'static>(
        &mut self,
        value: T,
    ) -> Result<(), KernelError> {
        if core::mem::align_of::<T>() > RECORD_ALIGNMENT {
            return Err(KernelError::new(format!(
                "op data alignment {} exceeds {RECORD_ALIGNMENT}",
                core::mem::align_of::<T>()
            )));
        }
        let record = self
            .persistent
            .allocate(core::mem::size_of::<T>(), Category::OpData)?;
        let ptr = self.persistent.ptr(record) as *mut T;
        // SAFETY: the record's staged block is `size_of::<T>()` bytes (rounded up to 16) at a
        // 16-byte aligned address, and align_of::<T>() <= 16.
        unsafe { ptr.write(value) };
        self.memory.op_data = Some(OpDataRef {
            record,
            type_of: TypeId::of::<T>,
        });
        Ok(())
    }

    /// Two persistent arrays of `len` values each, `value(i) = (a[i], b[i])`, written straight
    /// into their staged records (allocated `a` then `b`: the records two
    /// [`persistent_array`](Self::persistent_array) calls make), with no copy of the values
    /// held beside them and each pair computed once.
    fn persistent_arrays_from_fn<A: Scalar, B: Scalar>(
        &mut self,
        len: usize,
        mut value: impl FnMut(usize) -> Result<(A, B), KernelError>,
    ) -> Result<(PersistentArray<A>, PersistentArray<B>), KernelError> {
        let bytes = |size: usize| {
            len.checked_mul(size)
                .ok_or_else(|| KernelError::new(format!("array of {len} values overflows")))
        };
        let (bytes_a, bytes_b) = (
            bytes(core::mem::size_of::<A>())?,
            bytes(core::mem::size_of::<B>())?,
        );
        let a = PersistentArray {
            record: self.persistent.allocate(bytes_a, Category::OpData)?,
            len: array_len(len)?,
            _t: PhantomData,
        };
        let b = PersistentArray {
            record: self.persistent.allocate(bytes_b, Category::OpData)?,
            len: a.len,
            _t: PhantomData,
        };
        debug_assert_eq!(self.persistent.bytes_mut(a.record).len(), bytes_a);
        debug_assert_eq!(self.persistent.bytes_mut(b.record).len(), bytes_b);
        let dst_a = self.persistent.ptr(a.record) as *mut A;
        let dst_b = self.persistent.ptr(b.record) as *mut B;
        for i in 0..len {
            let (va, vb) = value(i)?;
            // SAFETY: each record's staged bytes are exactly `len` values long (`allocate`
            // sized them) at a `RECORD_ALIGNMENT` (16) boundary, at least the alignment of a
            // `Scalar`; the two records do not overlap, never move while `self.persistent`
            // lives, and no reference to them exists meanwhile; `i < len`; the values are
            // plain data, so writing over the zeroed bytes drops nothing.
            unsafe {
                dst_a.add(i).write(va);
                dst_b.add(i).write(vb);
            }
        }
        Ok((a, b))
    }

    fn persistent_array<T: Scalar>(
        &mut self,
        values: &[T],
    ) -> Result<PersistentArray<T>, KernelError> {
        let bytes = core::mem::size_of_val(values);
        let record = self.persistent.allocate(bytes, Category::OpData)?;
        let dst = self.persistent.bytes_mut(record);
        // SAFETY: `dst` is exactly `bytes` long and `values` is a plain-data slice of that size.
        let src = unsafe { core::slice::from_raw_parts(values.as_ptr() as *const u8, bytes) };
        dst.copy_from_slice(src);
        Ok(PersistentArray {
            record,
            len: array_len(values.len())?,
            _t: PhantomData,
        })
    }
}

/// Init: options and persistent memory only.
pub struct InitContext<'a> {
    pub(crate) state: BuildState<'a>,
}

impl InitContext<'_> {
    /// Node index.
    pub fn node_index(&self) -> usize {
        self.state.node.index
    }
    /// The builtin op (CUSTOM for custom ops).
    pub fn op(&self) -> BuiltinOp {
        self.state.node.builtin
    }
    /// The decoded builtin options.
    pub fn options(&self) -> &BuiltinOptions {
        self.state.options
    }
    /// The custom options bytes.
    pub fn custom_options(&self) -> &[u8] {
        self.state.custom_options
    }
    /// Stores the node's op data (replacing earlier op data).
    pub fn set_op_data<T: Copy + Send + Sync + 'static>(
        &mut self,
        value: T,
    ) -> Result<(), KernelError> {
        self.state.set_op_data(value)
    }
    /// A persistent copy of `values`.
    pub fn persistent_array<T: Scalar>(
        &mut self,
        values: &[T],
    ) -> Result<PersistentArray<T>, KernelError> {
        self.state.persistent_array(values)
    }
}

/// Prepare: the node's tensors, op data, persistent memory, scratch requests and temp memory.
pub struct PrepareContext<'a> {
    pub(crate) state: BuildState<'a>,
    pub(crate) tensors: &'a [TensorEntry],
    /// The pool of the tensors' dimensions ([`TensorEntry::dims`]).
    pub(crate) shapes: &'a [usize],
    /// The model and where its tensors sit in `tensors` (quantization is read from the model).
    pub(crate) model: (
        &'a crate::model::Model,
        &'a crate::interpreter::subgraphs::Layout,
    ),
    /// The included subgraphs (control-flow kernels check the subgraphs they call).
    pub(crate) subgraphs: &'a [crate::interpreter::subgraphs::SubgraphInfo],
    /// Constant bytes per tensor (model data, or staged prepare-time results).
    pub(crate) constant: &'a dyn Fn(usize) -> Option<&'a [u8]>,
    pub(crate) temp: &'a mut Vec<u128>,
    pub(crate) temp_peak: &'a mut usize,
    /// Kernel threads invoke runs with (1 without a thread pool).
    pub(crate) threads: usize,
    /// The kernel path invoke runs on ([`InvokeContext::isa`]).
    pub(crate) isa: crate::interpreter::optimized::Isa,
    /// Which precomputed constants this build grants, and how many bytes it granted so far.
    pub(crate) copies: &'a mut CopyAllowance,
    /// The prepare-time constants (sorted) whose only reader is one input of one node and
    /// that no graph outputs: that reader may rewrite them
    /// ([`PrepareContext::repack_computed_input`]).
    pub(crate) repackable: &'a [usize],
    /// Tensors this prepare rewrote, with their new 16-byte words; the build puts them in
    /// place of the computed values once prepare returns.
    pub(crate) repacked: &'a mut Vec<(usize, Vec<u128>)>,
}

/// Which values computed at prepare from the model's constants kernels may keep in the arena's
/// tail: packed copies of weights, lookup tables, folded biases (a trade of memory for speed:
/// see [`PrepareContext::precomputed`]). The default keeps none: kernels read constants where
/// the model keeps them and compute the rest at invoke, and the arena stays at or below TFLM's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precompute {
    /// None (the default): kernels read the model's weights in place, packing a few panels at
    /// a time into scratch at invoke, and compute tables and folded terms as they go.
    #[default]
    None,
    /// Every kernel that can precompute something keeps it.
    All,
    /// Kernels in node order keep what they precompute while it totals at most this many
    /// bytes (each record rounded up to the tail's 16 bytes).
    UpTo(usize),
    /// As [`None`](Precompute::None), and no kernel takes extra scratch for speed either (a
    /// sparse filter's band copies): the smallest arena the kernels run in, which
    /// [`arena_budget`](super::InterpreterBuilder::arena_budget) falls back to and names as
    /// the minimum.
    Smallest,
}

/// The running state of a [`Precompute`] policy while a model is staged.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CopyAllowance {
    pub policy: Precompute,
    /// Bytes granted so far.
    pub granted: usize,
}

impl CopyAllowance {
    pub fn new(policy: Precompute) -> Self {
        CopyAllowance { policy, granted: 0 }
    }

    /// Grants `bytes` (rounded to a tail record) if the policy allows them.
    fn grant(&mut self, bytes: usize) -> bool {
        let Some(rounded) = bytes.checked_next_multiple_of(RECORD_ALIGNMENT) else {
            return false;
        };
        let ok = match self.policy {
            Precompute::None | Precompute::Smallest => false,
            Precompute::All => true,
            Precompute::UpTo(limit) => self
                .granted
                .checked_add(rounded)
                .is_some_and(|total| total <= limit),
        };
        if ok {
            self.granted = self.granted.saturating_add(rounded);
        }
        ok
    }
}

impl<'a> PrepareContext<'a> {
    /// Kernel threads invoke will run this node with ([`InvokeContext::threads`] is this or 1):
    /// a kernel that gives each thread its own scratch requests that many copies.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Whether the build wants the smallest arena ([`Precompute::Smallest`]): a kernel then
    /// takes no scratch beyond what its leanest body needs.
    pub fn smallest_arena(&self) -> bool {
        self.copies.policy == Precompute::Smallest
    }

    /// The kernel path invoke will run this node on ([`InvokeContext::isa`] is this): a kernel
    /// whose precomputed layout depends on the path (packed weights) chooses it here.
    pub fn isa(&self) -> crate::interpreter::optimized::Isa {
        self.isa
    }

    /// Node index.
    pub fn node_index(&self) -> usize {
        self.state.node.index
    }
    /// The builtin op (CUSTOM for custom ops).
    pub fn op(&self) -> BuiltinOp {
        self.state.node.builtin
    }
    /// The op version.
    pub fn version(&self) -> i32 {
        self.state.node.version
    }
    /// The decoded builtin options.
    pub fn options(&self) -> &'a BuiltinOptions {
        self.state.options
    }
    /// The custom options bytes.
    pub fn custom_options(&self) -> &'a [u8] {
        self.state.custom_options
    }
    /// The padding of a PAD folded into this node, which then reads the PAD's input (only for
    /// registrations that declare [`Registration::with_fused_padding`]).
    pub fn fused_padding(&self) -> Option<crate::interpreter::FusedPadding> {
        self.state.node.fused_padding.as_deref().copied()
    }
    /// Number of inputs (omitted optional inputs included).
    pub fn num_inputs(&self) -> usize {
        self.state.node.inputs.len()
    }
    /// Number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.state.node.outputs.len()
    }

    /// Fails unless the node has `inputs` inputs and `outputs` outputs.
    pub fn expect_io(&self, inputs: usize, outputs: usize) -> Result<(), KernelError> {
        if self.num_inputs() != inputs || self.num_outputs() != outputs {
            return Err(KernelError::new(format!(
                "{} inputs and {} outputs, expected {inputs} and {outputs}",
                self.num_inputs(),
                self.num_outputs()
            )));
        }
        Ok(())
    }

    fn info(&self, t: usize) -> TensorInfo<'a> {
        let e = &self.tensors[t];
        let def = self.model.1.tensor(self.model.0, t);
        TensorInfo {
            index: t,
            name: &def.name,
            dtype: e.dtype,
            dims: e.dims.of(self.shapes),
            quantization: def.quantization.as_ref(),
            is_constant: matches!(
                e.kind,
                TensorKind::Constant | TensorKind::PrepareTimeConstant
            ),
            is_variable: e.kind == TensorKind::Variable,
            sparsity: e.sparsity.as_deref(),
            data: (self.constant)(t),
        }
    }

    /// The included subgraph that is the model's subgraph `index` (as a control-flow op's
    /// options name it): its position in the interpreter's subgraph table and its description.
    /// An error when the index is out of range or not included.
    pub(crate) fn called_subgraph(
        &self,
        index: i32,
    ) -> Result<(usize, &'a crate::interpreter::subgraphs::SubgraphInfo), KernelError> {
        let subgraphs: &'a [crate::interpreter::subgraphs::SubgraphInfo] = self.subgraphs;
        subgraphs
            .iter()
            .enumerate()
            .find(|(_, s)| i64::try_from(s.model_index).ok() == Some(i64::from(index)))
            .ok_or_else(|| {
                KernelError::new(format!(
                    "subgraph {index} is not a subgraph of this model ({} included)",
                    subgraphs.len()
                ))
            })
    }

    /// Tensor `t` (a global index: a called subgraph's input or output).
    pub(crate) fn tensor(&self, t: usize) -> Result<TensorInfo<'a>, KernelError> {
        if t >= self.tensors.len() {
            return Err(KernelError::new(format!("tensor {t} out of range")));
        }
        Ok(self.info(t))
    }

    /// Input `k`; `None` when it is an omitted optional input (`-1`).
    pub fn optional_input(&self, k: usize) -> Result<Option<TensorInfo<'a>>, KernelError> {
        match self.state.node.inputs.get(k) {
            None => Err(KernelError::new(format!(
                "input {k} requested, the node has {}",
                self.num_inputs()
            ))),
            Some(&t) if t < 0 => Ok(None),
            Some(&t) => Ok(Some(self.info(t as usize))),
        }
    }

    /// Input `k`, which must be present.
    pub fn input(&self, k: usize) -> Result<TensorInfo<'a>, KernelError> {
        self.optional_input(k)?
            .ok_or_else(|| KernelError::new(format!("input {k} is omitted but required")))
    }

    /// Output `k`.
    pub fn output(&self, k: usize) -> Result<TensorInfo<'a>, KernelError> {
        match self.state.node.outputs.get(k) {
            Some(&t) if t >= 0 => Ok(self.info(t as usize)),
            _ => Err(KernelError::new(format!(
                "output {k} requested, the node has {}",
                self.num_outputs()
            ))),
        }
    }

    /// Stores the node's op data (replacing earlier op data).
    pub fn set_op_data<T: Copy + Send + Sync + 'static>(
        &mut self,
        value: T,
    ) -> Result<(), KernelError> {
        self.state.set_op_data(value)
    }

    /// A persistent copy of `values`.
    pub fn persistent_array<T: Scalar>(
        &mut self,
        values: &[T],
    ) -> Result<PersistentArray<T>, KernelError> {
        self.state.persistent_array(values)
    }

    /// Two persistent arrays of `len` values each, `value(i) = (a[i], b[i])`, written straight
    /// into their records: the same records as [`persistent_array`](Self::persistent_array) of
    /// the `a` values then of the `b` values, with no temporary copies on the heap. An error
    /// from `value` fails the prepare.
    pub(crate) fn persistent_arrays_from_fn<A: Scalar, B: Scalar>(
        &mut self,
        len: usize,
        value: impl FnMut(usize) -> Result<(A, B), KernelError>,
    ) -> Result<(PersistentArray<A>, PersistentArray<B>), KernelError> {
        self.state.persistent_arrays_from_fn(len, value)
    }

    /// `len` zeroed values of kernel state that invoke may read and write (see [`StateArray`]).
    pub fn persistent_state<T: Scalar>(
        &mut self,
        len: usize,
    ) -> Result<StateArray<T>, KernelError> {
        let bytes = len
            .checked_mul(core::mem::size_of::<T>())
            .ok_or_else(|| KernelError::new(format!("state of {len} values overflows")))?;
        let size = u32::try_from(bytes)
            .map_err(|_| KernelError::new(format!("state of {bytes} bytes exceeds 4 GiB")))?;
        let record = self.state.persistent.allocate(bytes, Category::OpData)?;
        self.push_state(record, size, len)
    }

    /// Lists tail record `record` (`size` bytes) among this node's state arrays and returns it
    /// as `len` values of `T`.
    fn push_state<T: Scalar>(
        &mut self,
        record: u32,
        size: u32,
        len: usize,
    ) -> Result<StateArray<T>, KernelError> {
        if self.state.memory.states.len() >= MAX_STATES {
            kernel_bail!("more than {MAX_STATES} state arrays");
        }
        let states = &mut self.state.memory.states;
        *states = staging::appended(states, (record, size))
            .ok_or_else(|| KernelError::new("out of memory"))?;
        Ok(StateArray {
            record,
            len: array_len(len)?,
            _t: PhantomData,
        })
    }

    /// The id of the resource variable `(container, shared_name)` (VAR_HANDLE's prepare): the
    /// same id for every node of every subgraph that names it.
    pub fn resource_id(&mut self, container: &str, shared_name: &str) -> Result<u32, KernelError> {
        let resources = &mut self.state.persistent.resources;
        if let Some(i) = resources
            .iter()
            .position(|r| r.container == container && r.shared_name == shared_name)
        {
            return Ok(i as u32);
        }
        let id = u32::try_from(resources.len())
            .map_err(|_| KernelError::new("more than 2^32 resource variables"))?;
        resources
            .try_reserve(1)
            .map_err(|_| KernelError::new("out of memory for a resource variable"))?;
        resources.push(Resource {
            container: container.into(),
            shared_name: shared_name.into(),
            storage: None,
        });
        Ok(id)
    }

    /// The value of resource variable `id` (READ_VARIABLE's and ASSIGN_VARIABLE's prepare):
    /// `bytes` of `dtype`, allocated zeroed in the tail by the first node that asks and shared
    /// by every node that names `id`; also a state array of this node, so its invoke may read
    /// and write it. Fails when `id` names no variable or the variable was sized differently.
    pub fn resource_state(
        &mut self,
        id: u32,
        bytes: usize,
        dtype: DType,
    ) -> Result<StateArray<u8>, KernelError> {
        let size = u32::try_from(bytes)
            .map_err(|_| KernelError::new(format!("resource of {bytes} bytes exceeds 4 GiB")))?;
        let known = self.state.persistent.resources.len();
        let Some(storage) = self
            .state
            .persistent
            .resources
            .get(id as usize)
            .map(|r| r.storage)
        else {
            kernel_bail!("resource id {id} names no variable (this model has {known})");
        };
        let record = match storage {
            Some((record, have, have_dtype)) => {
                if (have, have_dtype) != (size, dtype) {
                    kernel_bail!(
                        "resource variable {id} holds {have} bytes of {have_dtype}; this node \
                         uses it as {size} bytes of {dtype}"
                    );
                }
                record
            }
            None => {
                let record = self.state.persistent.allocate(bytes, Category::OpData)?;
                self.state.persistent.resources[id as usize].storage = Some((record, size, dtype));
                record
            }
        };
        self.push_state(record, size, bytes)
    }

    /// `len` values computed from the model's constants (zeroed, then written by `fill`: a
    /// packed copy of weights, a lookup table, folded biases) in the arena's tail, recorded as
    /// [`Category::Precomputed`], when the build's [`Precompute`] grants it; `Ok(None)` when it
    /// does not (the default), and the kernel computes without them at invoke.
    pub fn precomputed<T: Scalar>(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut [T]),
    ) -> Result<Option<PersistentArray<T>>, KernelError> {
        let bytes = len
            .checked_mul(core::mem::size_of::<T>())
            .ok_or_else(|| KernelError::new(format!("packed copy of {len} values overflows")))?;
        if core::mem::align_of::<T>() > RECORD_ALIGNMENT || !self.copies.grant(bytes) {
            return Ok(None);
        }
        let record = self
            .state
            .persistent
            .allocate(bytes, Category::Precomputed)?;
        let ptr = self.state.persistent.ptr(record) as *mut T;
        // SAFETY: the record's staged block is `len * size_of::<T>()` zeroed bytes at a 16-byte
        // aligned address (align_of::<T>() <= 16 checked above), and `T: Scalar` is plain data
        // valid for all-zero bits; `&mut self` keeps the staging borrowed exclusively while
        // `fill` writes.
        let values = unsafe { core::slice::from_raw_parts_mut(ptr, len) };
        fill(values);
        Ok(Some(PersistentArray {
            record,
            len: array_len(len)?,
            _t: PhantomData,
        }))
    }

    /// Whether input `k` is a tensor [`repack_computed_input`](Self::repack_computed_input)
    /// may rewrite (computed at prepare, read by this input alone, not a graph output), so a
    /// kernel can skip choosing a layout for one it may not.
    pub fn computed_input_repackable(&self, k: usize) -> bool {
        self.repackable_input(k).is_some()
    }

    /// The tensor of input `k` when it is repackable.
    fn repackable_input(&self, k: usize) -> Option<usize> {
        let t = self
            .state
            .node
            .inputs
            .get(k)
            .and_then(|&t| usize::try_from(t).ok())?;
        self.repackable.binary_search(&t).ok().map(|_| t)
    }

    /// Rewrites input `k` in its own bytes into a layout of this kernel's choosing (a filter
    /// packed into panels): `fill(values, out)` reads the tensor's values and writes `len`
    /// values of `T`, zero beyond what it writes, which invoke then reads as input `k`.
    /// Allowed only for a tensor computed at prepare (e.g. weights a DENSIFY expanded from
    /// their sparse storage, which live in the arena's tail anyway) that this one input is
    /// the only reader of and that no graph outputs, when `len` values of `T` fit in its bytes
    /// and its dtype is `T`: the rewrite then costs no arena byte and nothing else sees the
    /// old layout. `Ok(false)` (the tensor unchanged) otherwise.
    pub fn repack_computed_input<T: Scalar>(
        &mut self,
        k: usize,
        len: usize,
        fill: impl FnOnce(&[T], &mut [T]),
    ) -> Result<bool, KernelError> {
        let Some(t) = self.repackable_input(k) else {
            return Ok(false);
        };
        if !dtype_matches::<T>(self.tensors[t].dtype) {
            return Ok(false);
        }
        let bytes = self.tensors[t].bytes;
        if len
            .checked_mul(core::mem::size_of::<T>())
            .is_none_or(|b| b > bytes)
        {
            return Ok(false);
        }
        let Some(values) = self.info(t).data::<T>()? else {
            return Ok(false);
        };
        let mut words = Vec::new();
        words
            .try_reserve_exact(bytes.div_ceil(RECORD_ALIGNMENT))
            .map_err(|_| KernelError::new(format!("out of memory repacking {bytes} bytes")))?;
        words.resize(bytes.div_ceil(RECORD_ALIGNMENT), 0u128);
        // SAFETY: `words` holds `bytes >= len * size_of::<T>()` zeroed bytes at a 16-byte
        // aligned address (align_of::<T>() <= 16 for every `Scalar`), and `T: Scalar` is plain
        // data valid for all-zero bits; the slice is dropped before `words` moves.
        let out = unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut T, len) };
        fill(values, out);
        self.repacked
            .try_reserve(1)
            .map_err(|_| KernelError::new("out of memory"))?;
        self.repacked.push((t, words));
        Ok(true)
    }

    /// Requests `bytes` of scratch for invoke (16-byte aligned), planned into the arena head.
    pub fn request_scratch(&mut self, bytes: usize) -> Result<ScratchId, KernelError> {
        self.request_scratch_up_to(bytes, bytes)
    }

    /// Requests scratch of at least `least` and at most `most` bytes (16-byte aligned): the
    /// head is planned with `least`, and the buffer then grows towards `most` into whatever of
    /// the head is free while its node runs, so it never makes the arena larger. Invoke sees
    /// the granted length ([`InvokeContext::scratch`]); a kernel asking this way must work,
    /// with the same results, on any length in `least..=most` (e.g. an im2col block of fewer
    /// rows).
    ///
    /// [`InvokeContext::scratch`]: crate::interpreter::InvokeContext::scratch
    pub fn request_scratch_up_to(
        &mut self,
        least: usize,
        most: usize,
    ) -> Result<ScratchId, KernelError> {
        let memory = &mut *self.state.memory;
        let n = memory.scratch.len();
        if n >= MAX_SCRATCH {
            return Err(KernelError::new(format!(
                "more than {MAX_SCRATCH} scratch buffers"
            )));
        }
        let request = ScratchRequest {
            bytes: least,
            most: most.max(least),
        };
        memory.scratch = staging::appended(&memory.scratch, request)
            .ok_or_else(|| KernelError::new("out of memory"))?;
        Ok(ScratchId(n as u32))
    }

    /// `bytes` of zeroed temp memory, valid until this prepare returns (at most one at a time).
    pub fn temp(&mut self, bytes: usize) -> Result<&mut [u8], KernelError> {
        let words = bytes.div_ceil(RECORD_ALIGNMENT);
        self.temp.clear();
        self.temp
            .try_reserve(words)
            .map_err(|_| KernelError::new(format!("out of memory for {bytes} temp bytes")))?;
        self.temp.resize(words, 0);
        *self.temp_peak = (*self.temp_peak).max(words * RECORD_ALIGNMENT);
        // SAFETY: `temp` holds `words * 16 >= bytes` zeroed bytes, borrowed mutably through
        // `&mut self`.
        Ok(unsafe { core::slice::from_raw_parts_mut(self.temp.as_mut_ptr() as *mut u8, bytes) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_alloc::borrow::Cow;

    /// Two arrays written value by value into their records are the records two copies of
    /// the same values make (same offsets, lengths and bytes), for records in a staging region
    /// and on the heap, for 1-, 4- and 8-byte values and lengths that do and do not fill 16
    /// bytes; an error from a value fails it.
    #[test]
    fn arrays_from_fn_are_the_arrays_of_their_values() {
        fn check<T: Scalar + core::fmt::Debug + PartialEq>(values: &[T], region: bool) {
            let mut words = [[0u128; 64]; 2];
            let mut states = words.iter_mut().map(|w| {
                let start = w.as_mut_ptr() as *mut u8;
                // SAFETY: `w` (1 KiB, 16-byte aligned) outlives the staging and is accessed
                // only through it meanwhile.
                let r = region.then(|| unsafe { StagingRegion::new(start, 1024) }.unwrap());
                Persistent::in_region(r)
            });
            let (mut a, mut b) = (states.next().unwrap(), states.next().unwrap());
            let node = NodeInfo {
                index: 0,
                subgraph: 0,
                local: 0,
                builtin: BuiltinOp::CONV_2D,
                op_name: Cow::Borrowed("CONV_2D"),
                version: 1,
                inputs: Box::new([]),
                outputs: Box::new([]),
                prepare_time: false,
                fused_padding: None,
            };
            let (mut ma, mut mb) = (NodeMemory::default(), NodeMemory::default());
            fn state<'s>(
                node: &'s NodeInfo,
                persistent: &'s mut Persistent,
                memory: &'s mut NodeMemory,
            ) -> BuildState<'s> {
                BuildState {
                    node,
                    options: &BuiltinOptions::None,
                    custom_options: &[],
                    persistent,
                    memory,
                }
            }
            // A record before, so the arrays do not start at offset 0.
            a.allocate(4, Category::OpData).unwrap();
            b.allocate(4, Category::OpData).unwrap();
            // The second array: each value's index as an i8 (wrapping), 1 byte a value.
            let second: Vec<i8> = (0..values.len()).map(|i| i as i8 ^ 0x5a).collect();
            let copied = {
                let mut s = state(&node, &mut a, &mut ma);
                (
                    s.persistent_array(values).unwrap(),
                    s.persistent_array(&second).unwrap(),
                )
            };
            let written = state(&node, &mut b, &mut mb)
                .persistent_arrays_from_fn(values.len(), |i| Ok((values[i], second[i])))
                .unwrap();
            assert_eq!(
                (copied.0.record, copied.0.len),
                (written.0.record, written.0.len)
            );
            assert_eq!(
                (copied.1.record, copied.1.len),
                (written.1.record, written.1.len)
            );
            assert_eq!(a.tail_bytes(), b.tail_bytes());
            assert_eq!(a.bytes_mut(copied.0.record), b.bytes_mut(written.0.record));
            assert_eq!(a.bytes_mut(copied.1.record), b.bytes_mut(written.1.record));
            let failed =
                state(&node, &mut b, &mut mb).persistent_arrays_from_fn(values.len(), |i| {
                    if i + 1 == values.len() {
                        Err(KernelError::new("no value"))
                    } else {
                        Ok((values[i], second[i]))
                    }
                });
            assert!(failed.is_err());
        }
        for region in [true, false] {
            check(&[-3i8, 7, 127, -128, 1], region);
            check(&[i32::MIN, -1, 0, 1 << 30, i32::MAX], region);
            check(
                &(0..37).map(|i| i * 1_000_003 - 5).collect::<Vec<i32>>(),
                region,
            );
            check(&[1.5f64, -0.25, 3e300], region);
            check(&[7u8; 16], region);
        }
    }
}
