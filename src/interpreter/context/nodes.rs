//! The node table an interpreter keeps after build: per node one 16-byte [`NodeRuntime`] and,
//! in shared pools, what varies in length (input and output lists, scratch addresses, state
//! records) and what many nodes share (op-data types, kernel registrations).
//!
//! Input and output lists are stored as TFLite stores them (a `TfLiteIntArray`, and the
//! model's flatbuffer): a count followed by the tensor indices. A node's lists, its state
//! records, its scratch count and (only when it has some) its variable-input mask follow each
//! other in one `i32` pool, `[n_in, in…, n_out, out…, 2 n_states, (offset, bytes)…, n_scratch,
//! (mask lo, mask hi)]`, so a node is one offset into it. Everything except the scratch addresses is
//! offsets and indices, independent of where the table lives.

use super::{RecordTable, MAX_SCRATCH};
use crate::interpreter::carve::{Place, Table};
use crate::interpreter::error::InterpreterError;
use crate::interpreter::kernel::Registration;
use crate::model::BuiltinOp;
use core::any::TypeId;
use rust_alloc::borrow::Cow;
use rust_alloc::{format, string::ToString, vec::Vec};

/// A node at invoke: where its op data, scratch and pool entry (tensor lists, state records,
/// scratch count, variable mask) are, which kernel runs it, and its flags. 16 bytes; the
/// variable-length parts live in the shared pools of [`NodeTables`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeRuntime {
    /// Offset of the op data's persistent record ([`NO_OP_DATA`]: none).
    op_data: u32,
    /// Start of the node's entry in [`NodeTables::io`].
    io: u32,
    /// Start of the node's scratch buffers in [`NodeTables::scratch`].
    scratch: u32,
    /// Its kernel in [`NodeTables::kernels`].
    kernel: u16,
    /// The op data's type in [`NodeTables::op_types`].
    op_type: u8,
    /// [`ALIASED`], [`PREPARE_TIME`], [`VARIABLES`].
    flags: u8,
}

/// Output 0 shares input 0's memory (a reshape or unary element-wise op in place).
const ALIASED: u8 = 1;
/// Every input is constant: the node ran once at build and invoke skips it.
const PREPARE_TIME: u8 = 2;
/// Some input is variable state: the pool entry ends with the variable mask.
const VARIABLES: u8 = 4;

impl NodeRuntime {
    /// Whether the node ran once at build and invoke skips it.
    pub(crate) fn prepare_time(&self) -> bool {
        self.flags & PREPARE_TIME != 0
    }
}

/// What the views of a node's tensors depend on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeFlags {
    /// Bit `k`: input `k` is variable state (written through `InvokeContext::variable`).
    pub variable_inputs: u64,
    /// Output 0 shares input 0's memory.
    pub aliased: bool,
}

/// [`NodeRuntime::op_data`] of a node without op data.
const NO_OP_DATA: u32 = u32::MAX;

/// A distinct kernel of the table: what invoke calls, the registration's name and the op it
/// runs (the registration's other fields matter only while building). `Copy`, so that the
/// table can live in the caller's buffer: the kernel is its [`Kernel::constant`] when it has
/// one, else one strong count of its `Arc`, taken by [`NodeTables::push`] and given back when
/// the [`NodeTables`] drops. The name is kept as its first byte and length (a `&'static str`
/// is 16 bytes), the length's top bit marking a constant kernel.
///
/// [`Kernel::constant`]: crate::interpreter::Kernel::constant
#[derive(Clone, Copy)]
pub(crate) struct KernelEntry {
    kernel: KernelPtr,
    /// The registration name's start.
    name_start: StaticBytes,
    /// The name's length, with [`CONSTANT`] set when `kernel` is a constant (no count held).
    name_len: u32,
    pub builtin: BuiltinOp,
}

/// [`KernelEntry::name_len`]'s bit marking a constant kernel.
const CONSTANT: u32 = 1 << 31;

/// A kernel as `Arc::into_raw` gives it (one strong count owned by the [`NodeTables`]), or a
/// `'static` constant kernel.
#[derive(Clone, Copy)]
struct KernelPtr(*const dyn crate::interpreter::Kernel);

// SAFETY: it points to a `Kernel`, which is `Send + Sync`; the strong count it stands for (if
// not a constant) is released only by `NodeTables::drop`.
unsafe impl Send for KernelPtr {}
// SAFETY: as for `Send`.
unsafe impl Sync for KernelPtr {}

/// The start of a `&'static str` (with that string's provenance).
#[derive(Clone, Copy)]
struct StaticBytes(*const u8);

// SAFETY: it points into a static string, which is immutable and lives for the program.
unsafe impl Send for StaticBytes {}
// SAFETY: as for `Send`.
unsafe impl Sync for StaticBytes {}

const _: () = assert!(core::mem::size_of::<KernelEntry>() <= 32);

impl KernelEntry {
    /// The entry of `kernel` registered as `name` running `builtin`: its constant when it has
    /// one, else holding one strong count of `kernel` that the caller must release
    /// ([`release`](Self::release)) exactly once (`None`: a name of 2 GiB or more, nothing
    /// taken).
    fn new(
        kernel: &crate::interpreter::KernelRef,
        name: &'static str,
        builtin: BuiltinOp,
    ) -> Option<Self> {
        use crate::interpreter::KernelRef;
        let name_len = u32::try_from(name.len()).ok().filter(|&n| n < CONSTANT)?;
        let (kernel, name_len) = match kernel {
            KernelRef::Constant(constant) => (KernelPtr(*constant), name_len | CONSTANT),
            KernelRef::Shared(shared) => match shared.constant() {
                Some(constant) => (KernelPtr(constant), name_len | CONSTANT),
                None => (
                    KernelPtr(rust_alloc::sync::Arc::into_raw(shared.clone())),
                    name_len,
                ),
            },
        };
        Some(KernelEntry {
            kernel,
            name_start: StaticBytes(name.as_ptr()),
            name_len,
            builtin,
        })
    }

    /// The kernel invoke calls.
    #[inline]
    pub(crate) fn kernel(&self) -> &dyn crate::interpreter::Kernel {
        // SAFETY: `kernel` is a `'static` constant, or came from `Arc::into_raw` (`new`) and
        // its strong count is held until the table that holds this entry drops
        // (`NodeTables::drop`), which outlives every `&self` borrowed from it: the kernel is
        // alive and shared (never written).
        unsafe { &*self.kernel.0 }
    }

    /// Gives back the strong count `new` took (none for a constant).
    ///
    /// # Safety
    /// Once per entry made by `new` (copies included), after its last use.
    unsafe fn release(self) {
        if self.name_len & CONSTANT != 0 {
            return;
        }
        // SAFETY: not a constant, so `kernel` is from `Arc::into_raw` in `new` and its count
        // is still held (the caller's contract: released once, not used again).
        drop(unsafe { rust_alloc::sync::Arc::from_raw(self.kernel.0) });
    }

    /// The registration's name.
    pub(crate) fn name(&self) -> &'static str {
        // SAFETY: `name_start` and `name_len` without its `CONSTANT` bit are the start and
        // length of a `&'static str` (`new`), or length 0; a static string is live, immutable and valid UTF-8.
        unsafe {
            core::str::from_utf8_unchecked(core::slice::from_raw_parts(
                self.name_start.0,
                (self.name_len & !CONSTANT) as usize,
            ))
        }
    }

    /// Display name of the op: the builtin's (`CONV_2D`), else `CUSTOM(<registration name>)`
    /// (the custom op's name for the crate's kernels; a caller's registration under another
    /// name shows that name).
    pub(crate) fn op_name(&self) -> Cow<'static, str> {
        match self.builtin.name() {
            Some(name) if self.builtin != BuiltinOp::CUSTOM => Cow::Borrowed(name),
            _ if self.builtin == BuiltinOp::CUSTOM => {
                Cow::Owned(format!("CUSTOM({})", self.name()))
            }
            _ => Cow::Owned(self.builtin.to_string()),
        }
    }
}

/// Every node's [`NodeRuntime`] with the pools they index: tensor lists, scratch addresses,
/// state records, op-data types and the distinct kernels (one per distinct registration and
/// op, shared by all nodes of that op), with their full registrations until
/// [`drop_registrations`](Self::drop_registrations). Invariant: every runtime's ranges and
/// indices lie inside the pools, every list in `io` is a count followed by that many entries,
/// and `registrations` is empty or parallel to `kernels`.
#[derive(Default)]
pub(crate) struct NodeTables<'a> {
    runtimes: Table<'a, NodeRuntime>,
    io: Table<'a, i32>,
    /// Scratch buffers as (offset from `scratch_base`, bytes).
    scratch: Table<'a, (u32, u32)>,
    scratch_base: usize,
    /// Op-data types, each as its `TypeId::of` (8 bytes; a `TypeId` is 16).
    op_types: Table<'a, fn() -> TypeId>,
    /// Each entry holds one strong count of its kernel, released on drop.
    kernels: Table<'a, KernelEntry>,
    registrations: Vec<Registration>,
}

impl Drop for NodeTables<'_> {
    fn drop(&mut self) {
        for &k in self.kernels.iter() {
            // SAFETY: every entry was made by `KernelEntry::new` in `push` and is in this
            // table once (carving moves the table, the heap copy is freed without releasing);
            // the table is dropping, so this is each entry's last use.
            unsafe { k.release() };
        }
    }
}

/// What a node is when it runs: its index and its tensor lists (global tensor indices, `-1` =
/// omitted), from the node table at invoke or from the build's node list at prepare time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeRef<'a> {
    pub index: usize,
    pub inputs: &'a [i32],
    pub outputs: &'a [i32],
}

/// A node's resolved runtime: what an `InvokeContext` and the view check read.
#[derive(Clone, Copy)]
pub(crate) struct NodeView<'a> {
    pub rt: NodeFlags,
    pub node: NodeRef<'a>,
    pub op_data: Option<(*const u8, TypeId)>,
    pub scratch: ScratchList<'a>,
    pub states: &'a [i32],
    pub kernel: &'a KernelEntry,
}

/// A node's scratch buffers: (offset, bytes) pairs from one base address.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScratchList<'a> {
    base: usize,
    list: &'a [(u32, u32)],
}

impl ScratchList<'_> {
    /// Scratch buffer `k`'s address and bytes, `None` out of range.
    #[inline]
    pub(crate) fn get(&self, k: usize) -> Option<(*mut u8, usize)> {
        self.list
            .get(k)
            .map(|&(o, n)| ((self.base as *mut u8).wrapping_add(o as usize), n as usize))
    }

    /// Every scratch buffer's address and bytes.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (*mut u8, usize)> + '_ {
        (0..self.list.len()).filter_map(|k| self.get(k))
    }
}

/// What [`NodeTables::push`] records of a node besides its registration.
pub(crate) struct NodeEntry<'e> {
    pub builtin: BuiltinOp,
    pub inputs: &'e [i32],
    pub outputs: &'e [i32],
    /// The op data's record offset and type (`TypeId::of::<T>`).
    pub op_data: Option<(u32, fn() -> TypeId)>,
    pub scratch: &'e [(*mut u8, usize)],
    /// State records: (offset, bytes).
    pub states: &'e [(u32, u32)],
    pub variable_inputs: u64,
    pub aliased: bool,
    pub prepare_time: bool,
}

fn too_many() -> InterpreterError {
    InterpreterError::Memory("too many nodes, tensors or records for the node tables".into())
}

/// The position of the first element of `pool` equal by `eq`, else of `make()` pushed.
fn intern<T>(pool: &mut Vec<T>, eq: impl Fn(&T) -> bool, make: impl FnOnce() -> T) -> usize {
    match pool.iter().position(eq) {
        Some(p) => p,
        None => {
            pool.push(make());
            pool.len() - 1
        }
    }
}

impl<'a> NodeTables<'a> {
    /// An empty table whose nodes' scratch buffers lie at or after `base`, within 4 GiB.
    pub(crate) fn with_scratch_base(base: *mut u8) -> Self {
        let mut t = Self::default();
        t.scratch_base = base as usize;
        t
    }

    /// Appends the next node: its kernel (shared with earlier nodes of the same registration
    /// and op), tensor lists, op data record and type, scratch buffers and state records.
    pub(crate) fn push(
        &mut self,
        registration: &Registration,
        e: NodeEntry<'_>,
    ) -> Result<(), InterpreterError> {
        let (Some(runtimes), Some(io), Some(scratch), Some(op_types), Some(kernels)) = (
            self.runtimes.vec_mut(),
            self.io.vec_mut(),
            self.scratch.vec_mut(),
            self.op_types.vec_mut(),
            self.kernels.vec_mut(),
        ) else {
            return Err(InterpreterError::Memory(
                "a node was added after the node table was carved".into(),
            ));
        };
        let found = kernels.iter().zip(&self.registrations).position(|(k, r)| {
            r.name == registration.name
                && r.kernel.same(&registration.kernel)
                && r.inplace == registration.inplace
                && r.sparse_inputs == registration.sparse_inputs
                && r.f16_inputs == registration.f16_inputs
                && k.builtin == e.builtin
        });
        let kernel = match found {
            Some(k) => k,
            None if self.registrations.len() == kernels.len() => {
                let entry = KernelEntry::new(&registration.kernel, registration.name, e.builtin)
                    .ok_or_else(too_many)?;
                kernels.push(entry);
                self.registrations.push(registration.clone());
                kernels.len() - 1
            }
            None => {
                return Err(InterpreterError::Memory(
                    "a node was added after the node table dropped its registrations".into(),
                ))
            }
        };
        let (op_data, op_type) = match e.op_data {
            Some((record, of)) => {
                let id = of();
                (record, intern(op_types, |t| t() == id, || of))
            }
            None => (NO_OP_DATA, 0),
        };
        if e.scratch.len() > MAX_SCRATCH {
            return Err(too_many());
        }
        let flag = |on: bool, f: u8| if on { f } else { 0 };
        let rt = NodeRuntime {
            op_data,
            io: u32::try_from(io.len()).map_err(|_| too_many())?,
            scratch: u32::try_from(scratch.len()).map_err(|_| too_many())?,
            kernel: u16::try_from(kernel).map_err(|_| too_many())?,
            op_type: u8::try_from(op_type).map_err(|_| too_many())?,
            flags: flag(e.aliased, ALIASED)
                | flag(e.prepare_time, PREPARE_TIME)
                | flag(e.variable_inputs != 0, VARIABLES),
        };
        let count = |n: usize| i32::try_from(n).map_err(|_| too_many());
        for list in [e.inputs, e.outputs] {
            io.push(count(list.len())?);
            io.extend_from_slice(list);
        }
        // (offset, bytes) pairs, bit-cast.
        io.push(count(2 * e.states.len())?);
        for &(at, bytes) in e.states {
            io.push(at as i32);
            io.push(bytes as i32);
        }
        io.push(count(e.scratch.len())?);
        if e.variable_inputs != 0 {
            // The mask's two halves, bit-cast.
            io.push(e.variable_inputs as u32 as i32);
            io.push((e.variable_inputs >> 32) as u32 as i32);
        }
        for &(ptr, bytes) in e.scratch {
            let offset = (ptr as usize)
                .checked_sub(self.scratch_base)
                .and_then(|o| u32::try_from(o).ok());
            match (offset, u32::try_from(bytes)) {
                (Some(o), Ok(n)) => scratch.push((o, n)),
                _ => {
                    return Err(InterpreterError::Memory(format!(
                        "scratch buffer of {bytes} bytes at {ptr:p} lies outside 4 GiB of the \
                         scratch base {:#x}",
                        self.scratch_base
                    )))
                }
            }
        }
        runtimes.push(rt);
        Ok(())
    }

    /// Frees the full registrations (after the last `push`, when nothing will rebuild the
    /// interpreter from this table).
    pub(crate) fn drop_registrations(&mut self) {
        self.registrations = Vec::new();
    }

    /// Node `i`'s full registration, `None` after
    /// [`drop_registrations`](Self::drop_registrations).
    pub(crate) fn registration(&self, i: usize) -> Option<&Registration> {
        self.registrations
            .get(self.runtimes.get(i)?.kernel as usize)
    }

    /// Number of nodes.
    pub(crate) fn len(&self) -> usize {
        self.runtimes.len()
    }

    /// Node `i`'s runtime record, `None` out of range.
    pub(crate) fn runtime(&self, i: usize) -> Option<&NodeRuntime> {
        self.runtimes.get(i)
    }

    /// Node `i`'s kernel and op name (`i` in range).
    pub(crate) fn kernel(&self, i: usize) -> &KernelEntry {
        &self.kernels[self.runtimes[i].kernel as usize]
    }

    /// The list at `at` in the io pool and the position after it.
    #[inline]
    fn list(&self, at: usize) -> (&[i32], usize) {
        let n = self.io[at] as usize;
        (&self.io[at + 1..at + 1 + n], at + 1 + n)
    }

    /// Node `i`'s runtime resolved against `records` (the persistent records' addresses).
    #[inline]
    pub(crate) fn view<'s>(&'s self, i: usize, records: &RecordTable) -> NodeView<'s> {
        let rt = &self.runtimes[i];
        let s = rt.scratch as usize;
        let (inputs, next) = self.list(rt.io as usize);
        let (outputs, next) = self.list(next);
        let (states, next) = self.list(next);
        let n_scratch = self.io[next] as usize;
        let variable_inputs = if rt.flags & VARIABLES != 0 {
            (self.io[next + 1] as u32 as u64) | ((self.io[next + 2] as u32 as u64) << 32)
        } else {
            0
        };
        NodeView {
            rt: NodeFlags {
                variable_inputs,
                aliased: rt.flags & ALIASED != 0,
            },
            node: NodeRef {
                index: i,
                inputs,
                outputs,
            },
            op_data: (rt.op_data != NO_OP_DATA)
                .then(|| records.get(rt.op_data, 0))
                .flatten()
                .map(|p| (p as *const u8, (self.op_types[rt.op_type as usize])())),
            scratch: ScratchList {
                base: self.scratch_base,
                list: &self.scratch[s..s + n_scratch],
            },
            states,
            kernel: &self.kernels[rt.kernel as usize],
        }
    }

    /// Every node's state records as (offset, bytes) (each once: a record belongs to one
    /// node).
    pub(crate) fn states(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.runtimes.iter().flat_map(|rt| {
            let (_, next) = self.list(rt.io as usize);
            let (_, next) = self.list(next);
            self.list(next)
                .0
                .chunks_exact(2)
                .map(|p| (p[0] as u32, p[1] as u32))
        })
    }

    /// Frees the unused capacity of the pools (after the last `push`).
    pub(crate) fn shrink_to_fit(&mut self) {
        if let Some(v) = self.runtimes.vec_mut() {
            v.shrink_to_fit();
        }
        if let Some(v) = self.io.vec_mut() {
            v.shrink_to_fit();
        }
        if let Some(v) = self.scratch.vec_mut() {
            v.shrink_to_fit();
        }
        if let Some(v) = self.op_types.vec_mut() {
            v.shrink_to_fit();
        }
        if let Some(v) = self.kernels.vec_mut() {
            v.shrink_to_fit();
        }
        self.registrations.shrink_to_fit();
    }

    /// Moves the records and pools (not the registrations) to `place` (`false`: they do not
    /// fit; the tables moved so far stay there).
    pub(crate) fn place(&mut self, place: &mut impl Place<'a>) -> bool {
        place.place(&mut self.runtimes)
            && place.place(&mut self.io)
            && place.place(&mut self.scratch)
            && place.place(&mut self.op_types)
            && place.place(&mut self.kernels)
    }

    /// Heap bytes of the tables (capacities) by part.
    pub(crate) fn heap_parts(&self) -> [(&'static str, usize); 6] {
        use core::mem::size_of;
        [
            ("node records", self.runtimes.heap_bytes()),
            ("node lists", self.io.heap_bytes()),
            ("scratch", self.scratch.heap_bytes()),
            ("op-data types", self.op_types.heap_bytes()),
            ("kernels", self.kernels.heap_bytes()),
            (
                "registrations",
                self.registrations.capacity() * size_of::<Registration>(),
            ),
        ]
    }
}

const _: () = assert!(core::mem::size_of::<NodeRuntime>() == 16);

#[cfg(test)]
mod tests {
    use super::KernelEntry;
    use crate::interpreter::kernels::{conv, reshape};
    use crate::interpreter::{
        InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
    };
    use crate::model::BuiltinOp;
    use rust_alloc::sync::Arc;

    /// A kernel without a constant (the trait's default).
    struct Counted;

    impl Kernel for Counted {
        fn prepare(&self, _: &mut PrepareContext<'_>) -> Result<(), KernelError> {
            Ok(())
        }
        fn invoke(&self, _: &mut InvokeContext<'_>) -> Result<(), KernelError> {
            Ok(())
        }
    }

    #[test]
    fn constant_kernels_take_no_count_others_one_until_released() {
        let mut regs = vec![
            reshape::register_reshape(KernelSet::Reference),
            Registration::new("COUNTED", Counted),
        ];
        for set in [KernelSet::Reference, KernelSet::Optimized] {
            regs.push(conv::register_conv_2d(set));
        }
        // A caller's `Arc` of a kernel with a constant is held as the constant too.
        let arc: Arc<dyn Kernel> = Arc::new(reshape::Reshape);
        regs.push(Registration::with_kernel("RESHAPE", arc.into()));
        let count = |r: &Registration| r.kernel.shared().map_or(0, Arc::strong_count);
        for r in &regs {
            // Only the kernel without a constant is on the heap.
            assert_eq!(
                r.kernel.shared().is_some(),
                r.name == "COUNTED",
                "{}",
                r.name
            );
            let before = count(r);
            let entry = KernelEntry::new(&r.kernel, r.name, BuiltinOp::CONV_2D).unwrap();
            assert_eq!(entry.name(), r.name);
            match r.kernel.constant() {
                Some(constant) => {
                    assert_eq!(count(r), before, "{}", r.name);
                    assert!(core::ptr::addr_eq(entry.kernel(), constant), "{}", r.name);
                }
                None => {
                    assert_eq!(r.name, "COUNTED");
                    assert_eq!(count(r), before + 1);
                    assert!(core::ptr::addr_eq(entry.kernel(), &*r.kernel));
                }
            }
            // SAFETY: the entry's one release, after its last use.
            unsafe { entry.release() };
            assert_eq!(count(r), before, "{}", r.name);
        }
        // One constant per kernel set.
        let (a, b) = (regs[2].kernel.constant(), regs[3].kernel.constant());
        assert!(!core::ptr::addr_eq(a.unwrap(), b.unwrap()));
    }
}
