//! The per-phase contexts a kernel works through ([`InitContext`], [`PrepareContext`],
//! [`InvokeContext`]) and the handles it keeps between phases ([`PersistentArray`],
//! [`ScratchId`]).
//!
//! Memory a kernel asks for:
//! - **op data** ([`PrepareContext::set_op_data`]): one `Copy` value per node, kept in the
//!   arena's tail and read back at invoke with its type checked;
//! - **persistent arrays** ([`PrepareContext::persistent_array`]): e.g. per-channel multipliers,
//!   in the tail for the interpreter's life;
//! - **scratch** ([`PrepareContext::request_scratch`]): bytes that exist only while the node
//!   runs, planned into the arena's head beside the tensors (their lifetime is the one node);
//! - **temp** ([`PrepareContext::temp`]): bytes for the duration of this node's prepare only.
//!
//! During build, persistent memory is staged and copied into the arena's tail once the arena
//! exists; handles stay valid across that move because they name a record, not an address.

use super::error::KernelError;
use super::graph::{NodeInfo, TensorEntry, TensorKind};
use crate::arena::Category;
use crate::model::{BuiltinOp, BuiltinOptions, Quantization};
use crate::tensor::{DType, Element};
use std::any::TypeId;
use std::cell::Cell;
use std::marker::PhantomData;

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

/// Whether a tensor of dtype `d` can be viewed as `T` (a bool tensor as `u8` too).
fn dtype_matches<T: Element>(d: DType) -> bool {
    T::DTYPE == d || (d == DType::Bool && T::DTYPE == DType::U8)
}

/// A persistent array of `len` values of `T` in the arena's tail.
#[derive(Debug)]
pub struct PersistentArray<T> {
    record: u32,
    len: usize,
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
        self.len
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
    len: usize,
    _t: PhantomData<fn() -> T>,
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

/// One persistent record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    /// Byte offset in the staging buffer.
    pub offset: usize,
    /// Bytes.
    pub size: usize,
    /// Recording category.
    pub category: Category,
}

/// Persistent memory while building: staged on the heap, copied to the arena tail afterwards.
#[derive(Default)]
pub(crate) struct Persistent {
    /// 16-byte aligned staging bytes (`u128` words).
    staging: Vec<u128>,
    /// Bytes used in `staging`.
    used: usize,
    /// Records in allocation order.
    pub records: Vec<Record>,
}

impl Persistent {
    /// A new zeroed record of `size` bytes.
    pub fn allocate(&mut self, size: usize, category: Category) -> Result<u32, KernelError> {
        let offset = self.used;
        let rounded = size
            .checked_next_multiple_of(RECORD_ALIGNMENT)
            .and_then(|r| offset.checked_add(r))
            .ok_or_else(|| {
                KernelError::new(format!("persistent request of {size} bytes overflows"))
            })?;
        let words = rounded / RECORD_ALIGNMENT;
        if words > self.staging.len() {
            let extra = words - self.staging.len();
            self.staging.try_reserve(extra).map_err(|_| {
                KernelError::new(format!("out of memory staging {size} persistent bytes"))
            })?;
            self.staging.resize(words, 0);
        }
        self.used = rounded;
        let index = u32::try_from(self.records.len())
            .map_err(|_| KernelError::new("more than 2^32 persistent records"))?;
        self.records.push(Record {
            offset,
            size,
            category,
        });
        Ok(index)
    }

    /// Total tail bytes the records take in an arena aligned to [`RECORD_ALIGNMENT`].
    pub fn tail_bytes(&self) -> usize {
        self.used
    }

    /// The staged bytes of a record.
    pub fn bytes(&self, record: u32) -> &[u8] {
        let r = self.records[record as usize];
        // SAFETY: the record lies inside `used <= staging.len() * 16` initialised bytes (the
        // staging words are zero-initialised), and `&self` keeps them borrowed immutably.
        unsafe {
            std::slice::from_raw_parts((self.staging.as_ptr() as *const u8).add(r.offset), r.size)
        }
    }

    /// The staged bytes of a record, mutable.
    pub fn bytes_mut(&mut self, record: u32) -> &mut [u8] {
        let r = self.records[record as usize];
        // SAFETY: as in `bytes`, and `&mut self` makes the borrow exclusive.
        unsafe {
            std::slice::from_raw_parts_mut(
                (self.staging.as_mut_ptr() as *mut u8).add(r.offset),
                r.size,
            )
        }
    }

    /// Pointer to a record's staged bytes (valid until the next `allocate`).
    pub fn ptr(&mut self, record: u32) -> *mut u8 {
        let r = self.records[record as usize];
        // SAFETY: the offset lies inside the staging allocation (see `bytes`).
        unsafe { (self.staging.as_mut_ptr() as *mut u8).add(r.offset) }
    }
}

/// What a node's op data is: its record and type.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpDataRef {
    pub record: u32,
    pub type_id: TypeId,
}

/// What init and prepare produce for one node.
#[derive(Default)]
pub(crate) struct NodeMemory {
    pub op_data: Option<OpDataRef>,
    /// Scratch requests (bytes), in request order.
    pub scratch: Vec<usize>,
    /// Records of the node's state arrays.
    pub states: Vec<u32>,
}

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
        let q = self
            .quantization
            .filter(|q| !q.scale.is_empty())
            .ok_or_else(|| {
                KernelError::new(format!(
                    "tensor `{}` has no quantization parameters",
                    self.name
                ))
            })?;
        if q.scale.len() != 1 {
            return Err(KernelError::new(format!(
                "tensor `{}` has {} scales, expected one (per-tensor)",
                self.name,
                q.scale.len()
            )));
        }
        let zp = q.zero_point.first().copied().unwrap_or(0);
        let zp = i32::try_from(zp).map_err(|_| {
            KernelError::new(format!(
                "tensor `{}` zero point {zp} out of range",
                self.name
            ))
        })?;
        let scale = q.scale[0];
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
    let size = std::mem::size_of::<T>();
    if bytes.len() % size != 0 || bytes.as_ptr() as usize % std::mem::align_of::<T>() != 0 {
        return Err(KernelError::new(format!(
            "tensor `{name}` data ({} bytes) is not a whole, aligned array of {}",
            bytes.len(),
            T::DTYPE
        )));
    }
    // SAFETY: aligned, in bounds, a whole number of `T`; the graph validated bool data to be
    // 0 or 1 (and `T` is a numeric type otherwise, valid for any bits).
    Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const T, bytes.len() / size) })
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
        if std::mem::align_of::<T>() > RECORD_ALIGNMENT {
            return Err(KernelError::new(format!(
                "op data alignment {} exceeds {RECORD_ALIGNMENT}",
                std::mem::align_of::<T>()
            )));
        }
        let record = self
            .persistent
            .allocate(std::mem::size_of::<T>(), Category::OpData)?;
        let ptr = self.persistent.ptr(record) as *mut T;
        // SAFETY: the record is `size_of::<T>()` bytes at a 16-byte aligned offset of the
        // 16-byte aligned staging buffer, and align_of::<T>() <= 16.
        unsafe { ptr.write(value) };
        self.memory.op_data = Some(OpDataRef {
            record,
            type_id: TypeId::of::<T>(),
        });
        Ok(())
    }

    fn persistent_array<T: Scalar>(
        &mut self,
        values: &[T],
    ) -> Result<PersistentArray<T>, KernelError> {
        let bytes = std::mem::size_of_val(values);
        let record = self.persistent.allocate(bytes, Category::OpData)?;
        let dst = self.persistent.bytes_mut(record);
        // SAFETY: `dst` is exactly `bytes` long and `values` is a plain-data slice of that size.
        let src = unsafe { std::slice::from_raw_parts(values.as_ptr() as *const u8, bytes) };
        dst.copy_from_slice(src);
        Ok(PersistentArray {
            record,
            len: values.len(),
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
    /// Constant bytes per tensor (model data, or staged prepare-time results).
    pub(crate) constant: &'a dyn Fn(usize) -> Option<&'a [u8]>,
    pub(crate) temp: &'a mut Vec<u128>,
    pub(crate) temp_peak: &'a mut usize,
}

impl<'a> PrepareContext<'a> {
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
        TensorInfo {
            index: t,
            name: &e.name,
            dtype: e.dtype,
            dims: &e.dims,
            quantization: e.quantization.as_ref(),
            is_constant: matches!(
                e.kind,
                TensorKind::Constant | TensorKind::PrepareTimeConstant
            ),
            is_variable: e.kind == TensorKind::Variable,
            data: (self.constant)(t),
        }
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

    /// `len` zeroed values of kernel state that invoke may read and write (see [`StateArray`]).
    pub fn persistent_state<T: Scalar>(
        &mut self,
        len: usize,
    ) -> Result<StateArray<T>, KernelError> {
        if self.state.memory.states.len() >= MAX_STATES {
            return Err(KernelError::new(format!(
                "more than {MAX_STATES} state arrays"
            )));
        }
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| KernelError::new(format!("state of {len} values overflows")))?;
        let record = self.state.persistent.allocate(bytes, Category::OpData)?;
        self.state
            .memory
            .states
            .try_reserve(1)
            .map_err(|_| KernelError::new("out of memory"))?;
        self.state.memory.states.push(record);
        Ok(StateArray {
            record,
            len,
            _t: PhantomData,
        })
    }

    /// Requests `bytes` of scratch for invoke (16-byte aligned), planned into the arena head.
    pub fn request_scratch(&mut self, bytes: usize) -> Result<ScratchId, KernelError> {
        let n = self.state.memory.scratch.len();
        if n >= MAX_SCRATCH {
            return Err(KernelError::new(format!(
                "more than {MAX_SCRATCH} scratch buffers"
            )));
        }
        let id = n as u32;
        self.state
            .memory
            .scratch
            .try_reserve(1)
            .map_err(|_| KernelError::new("out of memory"))?;
        self.state.memory.scratch.push(bytes);
        Ok(ScratchId(id))
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
        Ok(unsafe { std::slice::from_raw_parts_mut(self.temp.as_mut_ptr() as *mut u8, bytes) })
    }
}

/// One tensor at invoke: where its bytes are.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    pub ptr: *mut u8,
    pub bytes: usize,
    pub dtype: DType,
}

/// A node at invoke: resolved scratch and op data, and which of its tensors are writable.
pub(crate) struct NodeRuntime {
    pub op_data: Option<(*const u8, TypeId)>,
    pub scratch: Vec<(*mut u8, usize)>,
    /// Bit `k`: input `k` is variable state (written through [`InvokeContext::variable`]).
    pub variable_inputs: u64,
    /// Output 0 shares input 0's memory (reshape in place).
    pub aliased: bool,
    /// Records of the node's state arrays.
    pub states: Vec<u32>,
}

/// Invoke: typed views of the node's tensors, scratch, op data and persistent arrays.
///
/// Every writable view (output, variable, scratch) can be taken once per invoke, so views
/// never alias: the build proved that a node's writable tensors and scratch are disjoint from
/// each other and from its read-only inputs, except input 0 / output 0 of a reshape in place,
/// which are only reachable together through [`copy_input_to_output`](Self::copy_input_to_output).
pub struct InvokeContext<'a> {
    pub(crate) node: &'a NodeInfo,
    pub(crate) rt: &'a NodeRuntime,
    pub(crate) slots: &'a [Slot],
    pub(crate) tensors: &'a [TensorEntry],
    pub(crate) records: &'a [(*mut u8, usize)],
    pub(crate) taken: Cell<u128>,
    pub(crate) taken_states: Cell<u64>,
}

impl<'a> InvokeContext<'a> {
    /// Node index.
    pub fn node_index(&self) -> usize {
        self.node.index
    }

    /// The op data stored by prepare.
    pub fn op_data<T: Copy + Send + Sync + 'static>(&self) -> Result<&'a T, KernelError> {
        match self.rt.op_data {
            Some((ptr, id)) if id == TypeId::of::<T>() => {
                // SAFETY: the record was written with a `T` at build (same TypeId), copied
                // byte-for-byte to a 16-byte aligned arena record that lives as long as the
                // interpreter, and nothing writes it after build.
                Ok(unsafe { &*(ptr as *const T) })
            }
            Some(_) => Err(KernelError::new("op data has another type")),
            None => Err(KernelError::new("no op data was set in prepare")),
        }
    }

    /// A persistent array stored by prepare.
    pub fn persistent<T: Scalar>(&self, array: PersistentArray<T>) -> Result<&'a [T], KernelError> {
        let &(ptr, size) = self
            .records
            .get(array.record as usize)
            .ok_or_else(|| KernelError::new("persistent array of another interpreter"))?;
        if array.len.saturating_mul(std::mem::size_of::<T>()) > size {
            return Err(KernelError::new("persistent array of another interpreter"));
        }
        // SAFETY: the record holds at least `len * size_of::<T>()` initialised bytes at a 16-byte
        // aligned address for the interpreter's life, is never written after build, and `T`
        // accepts any bit pattern (`Scalar`).
        Ok(unsafe { std::slice::from_raw_parts(ptr as *const T, array.len) })
    }

    fn tensor_of(&self, list: &[i32], k: usize, what: &str) -> Result<usize, KernelError> {
        match list.get(k) {
            Some(&t) if t >= 0 => Ok(t as usize),
            Some(_) => Err(KernelError::new(format!("{what} {k} is omitted"))),
            None => Err(KernelError::new(format!(
                "{what} {k} requested, the node has {}",
                list.len()
            ))),
        }
    }

    fn typed<T: Element>(&self, t: usize) -> Result<(*mut u8, usize), KernelError> {
        let s = self.slots[t];
        if !dtype_matches::<T>(s.dtype) {
            return Err(KernelError::new(format!(
                "tensor `{}` has dtype {}, read as {}",
                self.tensors[t].name,
                s.dtype,
                T::DTYPE
            )));
        }
        if s.bytes > 0 && s.ptr as usize % std::mem::align_of::<T>() != 0 {
            return Err(KernelError::new(format!(
                "tensor `{}` is not aligned for {}",
                self.tensors[t].name,
                T::DTYPE
            )));
        }
        Ok((s.ptr, s.bytes / std::mem::size_of::<T>()))
    }

    fn take(&self, bit: usize, what: &str, k: usize) -> Result<(), KernelError> {
        let mask = 1u128.checked_shl(bit as u32).unwrap_or(0);
        if mask == 0 || self.taken.get() & mask != 0 {
            return Err(KernelError::new(format!(
                "{what} {k} was already taken in this invoke"
            )));
        }
        self.taken.set(self.taken.get() | mask);
        Ok(())
    }

    /// Dimensions of input `k`.
    pub fn input_dims(&self, k: usize) -> Result<&'a [usize], KernelError> {
        let t = self.tensor_of(&self.node.inputs, k, "input")?;
        Ok(&self.tensors[t].dims)
    }

    /// Dimensions of output `k`.
    pub fn output_dims(&self, k: usize) -> Result<&'a [usize], KernelError> {
        let t = self.tensor_of(&self.node.outputs, k, "output")?;
        Ok(&self.tensors[t].dims)
    }

    /// Whether input `k` is present (not an omitted optional input).
    pub fn has_input(&self, k: usize) -> bool {
        matches!(self.node.inputs.get(k), Some(&t) if t >= 0)
    }

    /// Read-only view of input `k`.
    pub fn input<T: Element>(&self, k: usize) -> Result<&'a [T], KernelError> {
        let t = self.tensor_of(&self.node.inputs, k, "input")?;
        if k < 64 && self.rt.variable_inputs & (1 << k) != 0 {
            return Err(KernelError::new(format!(
                "input {k} is variable state: use variable({k})"
            )));
        }
        if k == 0 && self.rt.aliased {
            return Err(KernelError::new(
                "input 0 shares memory with output 0: use copy_input_to_output",
            ));
        }
        let (ptr, len) = self.typed::<T>(t)?;
        // SAFETY: the slot covers `len` elements of initialised, aligned memory that no writable
        // view of this node overlaps (checked at build) and that lives for 'a.
        Ok(unsafe { std::slice::from_raw_parts(ptr as *const T, len) })
    }

    /// Mutable view of output `k` (once per invoke).
    pub fn output<T: Element>(&self, k: usize) -> Result<&'a mut [T], KernelError> {
        let t = self.tensor_of(&self.node.outputs, k, "output")?;
        if k >= MAX_OUTPUTS {
            return Err(KernelError::new(format!(
                "output {k}: at most {MAX_OUTPUTS} outputs"
            )));
        }
        if k == 0 && self.rt.aliased {
            return Err(KernelError::new(
                "output 0 shares memory with input 0: use copy_input_to_output",
            ));
        }
        let (ptr, len) = self.typed::<T>(t)?;
        self.take(k, "output", k)?;
        // SAFETY: outputs are disjoint from every other view of this node (checked at build),
        // taken at most once per invoke (`take`), aligned and `len` elements long.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr as *mut T, len) })
    }

    /// Mutable view of variable input `k` (state kept across invokes; once per invoke).
    pub fn variable<T: Element>(&self, k: usize) -> Result<&'a mut [T], KernelError> {
        let t = self.tensor_of(&self.node.inputs, k, "input")?;
        if k >= 64 || self.rt.variable_inputs & (1 << k) == 0 {
            return Err(KernelError::new(format!(
                "input {k} is not a variable tensor"
            )));
        }
        let (ptr, len) = self.typed::<T>(t)?;
        self.take(32 + k, "variable input", k)?;
        // SAFETY: as for outputs: disjoint, taken once, aligned, in bounds.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr as *mut T, len) })
    }

    /// Mutable view of state array `array` of this node (once per invoke).
    pub fn state<T: Scalar>(&self, array: StateArray<T>) -> Result<&'a mut [T], KernelError> {
        let pos = self
            .rt
            .states
            .iter()
            .position(|&r| r == array.record)
            .ok_or_else(|| KernelError::new("state array of another node"))?;
        let bit = 1u64 << pos;
        if self.taken_states.get() & bit != 0 {
            return Err(KernelError::new(
                "state array was already taken in this invoke",
            ));
        }
        let &(ptr, size) = self
            .records
            .get(array.record as usize)
            .ok_or_else(|| KernelError::new("state array of another interpreter"))?;
        if array.len.saturating_mul(std::mem::size_of::<T>()) > size {
            return Err(KernelError::new("state array of another interpreter"));
        }
        self.taken_states.set(self.taken_states.get() | bit);
        // SAFETY: the record belongs to this node only (checked above), is 16-byte aligned and
        // at least `len * size_of::<T>()` bytes in the arena tail, disjoint from every tensor and
        // scratch buffer; taken once per invoke; `T` accepts any bit pattern.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr as *mut T, array.len) })
    }

    /// Mutable view of scratch buffer `id` (once per invoke), `bytes / size_of::<T>()` elements.
    pub fn scratch<T: Scalar>(&self, id: ScratchId) -> Result<&'a mut [T], KernelError> {
        let &(ptr, bytes) = self
            .rt
            .scratch
            .get(id.0 as usize)
            .filter(|_| (id.0 as usize) < MAX_SCRATCH)
            .ok_or_else(|| {
                KernelError::new(format!("scratch buffer {} was not requested", id.0))
            })?;
        self.take(96 + id.0 as usize, "scratch", id.0 as usize)?;
        // SAFETY: the scratch buffer is 16-byte aligned, `bytes` long, planned disjoint from
        // every tensor live at this node, taken once, and `T` accepts any bit pattern.
        Ok(unsafe {
            std::slice::from_raw_parts_mut(ptr as *mut T, bytes / std::mem::size_of::<T>())
        })
    }

    /// Copies input `ki`'s bytes to output `ko` (a no-op when they share memory; overlapping
    /// memory is handled as `memmove`). The byte sizes must be equal.
    pub fn copy_input_to_output(&self, ki: usize, ko: usize) -> Result<(), KernelError> {
        let ti = self.tensor_of(&self.node.inputs, ki, "input")?;
        let to = self.tensor_of(&self.node.outputs, ko, "output")?;
        let (si, so) = (self.slots[ti], self.slots[to]);
        if si.bytes != so.bytes {
            return Err(KernelError::new(format!(
                "input {ki} has {} bytes, output {ko} {}",
                si.bytes, so.bytes
            )));
        }
        self.take(ko, "output", ko)?;
        if si.ptr != so.ptr && si.bytes > 0 {
            // SAFETY: both ranges are `bytes` long inside live memory of this interpreter;
            // `copy` is a memmove, correct for overlap; the output was not handed out.
            unsafe { std::ptr::copy(si.ptr as *const u8, so.ptr, si.bytes) };
        }
        Ok(())
    }
}
