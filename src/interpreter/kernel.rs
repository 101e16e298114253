//! The kernel API: one trait per operator implementation and the registration that tells the
//! interpreter how to use it.
//!
//! A kernel sees its node only through a phase's context, so a call in the wrong phase does not
//! compile:
//!
//! | phase | context | may |
//! |---|---|---|
//! | init | [`InitContext`] | read options, allocate persistent memory, set op data |
//! | prepare | [`PrepareContext`] | also read tensor shapes, dtypes, quantization and constant data, request scratch, use temp memory |
//! | invoke | [`InvokeContext`] | read inputs, write outputs, variables and scratch; read op data and persistent memory |
//!
//! Prepare validates everything invoke relies on (shapes, dtypes, quantization, options): a model
//! that lies must fail at build time with a message, never make invoke read or write out of
//! bounds. Invoke performs no heap allocation on its success path.

use super::context::{InitContext, InvokeContext, PrepareContext};
use super::error::KernelError;
use rust_alloc::sync::Arc;

/// An operator implementation. Stateless: everything a node needs lives in its op data and
/// persistent memory (in the arena), so one kernel object serves every node of its op.
pub trait Kernel: Send + Sync {
    /// Init phase: parse options, allocate what does not depend on tensors.
    fn init(&self, _ctx: &mut InitContext<'_>) -> Result<(), KernelError> {
        Ok(())
    }
    /// Prepare phase: validate the node, compute the op data, request scratch.
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError>;
    /// Invoke phase: compute.
    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError>;
    /// This kernel as a constant, for a kernel type that holds nothing but its configuration
    /// (its kernel set, flags): a `'static` value that behaves exactly as `self`. The
    /// interpreter's node table then refers to the constant instead of holding a count of the
    /// registration's `Arc`, so that none of the kernel stays on the heap once the resolver is
    /// dropped (TFLM's registrations are constants too). `None` (the default): the table holds
    /// a count.
    fn constant(&self) -> Option<&'static dyn Kernel> {
        None
    }
}

/// The element of `constants` equal to `kernel`, as a [`Kernel::constant`]: for a kernel type
/// whose value is one of a few configurations.
pub(crate) fn constant_among<K: Kernel + PartialEq + 'static>(
    constants: &'static [K],
    kernel: &K,
) -> Option<&'static dyn Kernel> {
    constants
        .iter()
        .find(|&k| k == kernel)
        .map(|k| k as &dyn Kernel)
}

/// Whether a node's output may share memory with one of its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum InPlace {
    /// Output and inputs never share memory.
    #[default]
    Never,
    /// Output 0 may be placed on input 0 when input 0 dies at this node (RESHAPE, SQUEEZE,
    /// EXPAND_DIMS). The kernel then moves the bytes with
    /// [`InvokeContext::copy_input_to_output`], which is a no-op when they share memory.
    ReshapeOutput0,
    /// A unary element-wise op: output 0 may be placed on input 0 when input 0 has the same
    /// dtype and byte size, dies at this node and is an intermediate (not a graph input,
    /// output, variable or constant). The kernel takes both through
    /// [`InvokeContext::unary_io`], which hands out the output alone when they share memory;
    /// its math must then compute each element from the same element only (read before
    /// write), as [`crate::interpreter::reference::in_place::map_in_place`] guarantees.
    /// Binary ops are not declared: with broadcasting, an output element depends on other
    /// elements' positions of the inputs.
    UnaryElementwise,
}

impl InPlace {
    /// Whether output 0 may share input 0's memory.
    pub fn shares_input0(self) -> bool {
        self != InPlace::Never
    }
}

/// Which arithmetic the builtin kernels of a resolver run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum KernelSet {
    /// Plain slice arithmetic of [`super::reference`]: portable, the bit-exact oracle.
    Reference,
    /// The reference kernels, with the ops that have one running their faster variant of
    /// [`super::optimized`] (SIMD chosen at run time, with a portable fallback).
    #[default]
    Optimized,
}

impl KernelSet {
    /// Both sets, reference first.
    pub const ALL: [KernelSet; 2] = [KernelSet::Reference, KernelSet::Optimized];

    /// `reference` or `optimized`.
    pub fn name(self) -> &'static str {
        match self {
            KernelSet::Reference => "reference",
            KernelSet::Optimized => "optimized",
        }
    }

    /// The set called `name` (`reference`, `optimized`).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl core::fmt::Display for KernelSet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a [`Registration`] holds its kernel: the kernel's `'static` constant
/// ([`Kernel::constant`]; no heap, what every kernel the crate ships is) or a shared count of a
/// caller's kernel that has none. Dereferences to the kernel.
#[derive(Clone)]
pub enum KernelRef {
    /// A `'static` kernel: nothing to count, nothing on the heap.
    Constant(&'static dyn Kernel),
    /// A kernel on the heap, shared by count.
    Shared(Arc<dyn Kernel>),
}

impl KernelRef {
    /// `kernel` as its constant when it has one (no heap), else on the heap.
    pub fn new(kernel: impl Kernel + 'static) -> Self {
        match kernel.constant() {
            Some(k) => KernelRef::Constant(k),
            None => KernelRef::Shared(Arc::new(kernel)),
        }
    }

    /// The shared kernel's `Arc`, `None` for a constant.
    pub fn shared(&self) -> Option<&Arc<dyn Kernel>> {
        match self {
            KernelRef::Constant(_) => None,
            KernelRef::Shared(k) => Some(k),
        }
    }

    /// Whether both are the same kernel object (same address and type). May answer `false`
    /// for the same constant seen through two vtables; never `true` for two objects.
    pub fn same(&self, other: &KernelRef) -> bool {
        match (self, other) {
            (KernelRef::Shared(a), KernelRef::Shared(b)) => Arc::ptr_eq(a, b),
            // The vtable is compared too: two zero-sized constants may share an address.
            #[allow(ambiguous_wide_pointer_comparisons)]
            (KernelRef::Constant(a), KernelRef::Constant(b)) => core::ptr::eq(*a, *b),
            _ => false,
        }
    }
}

impl From<Arc<dyn Kernel>> for KernelRef {
    /// The kernel's constant when it has one (the `Arc` is then dropped), else the `Arc`.
    fn from(kernel: Arc<dyn Kernel>) -> Self {
        match kernel.constant() {
            Some(k) => KernelRef::Constant(k),
            None => KernelRef::Shared(kernel),
        }
    }
}

impl From<&'static dyn Kernel> for KernelRef {
    fn from(kernel: &'static dyn Kernel) -> Self {
        KernelRef::Constant(kernel)
    }
}

impl core::ops::Deref for KernelRef {
    type Target = dyn Kernel;
    #[inline]
    fn deref(&self) -> &(dyn Kernel + 'static) {
        match self {
            KernelRef::Constant(k) => *k,
            KernelRef::Shared(k) => &**k,
        }
    }
}

/// A kernel with what the interpreter must know about it.
#[derive(Clone)]
pub struct Registration {
    /// Name for reports (`ADD`, `SignalWindow`).
    pub name: &'static str,
    /// The implementation: its constant when it has one (then the registration holds nothing
    /// on the heap), else a shared count.
    pub kernel: KernelRef,
    /// In-place ability.
    pub inplace: InPlace,
    /// Bit `k`: input `k` may be a constant stored sparse (the kernel reads its sparsity
    /// parameters). Any other input stored sparse fails the build, since its bytes are not
    /// the dense tensor.
    pub sparse_inputs: u64,
    /// Bit `k`: input `k` may be a float16 constant where the model dequantizes float16
    /// weights to float32 at build (the kernel converts as it reads; see
    /// [`with_f16_inputs`](Self::with_f16_inputs)).
    pub f16_inputs: u64,
    /// Whether the kernel reads [`PrepareContext::fused_padding`]: a PAD before input 0 may be
    /// folded into the node (see [`with_fused_padding`](Self::with_fused_padding)).
    pub fused_padding: bool,
    /// Whether a MUL by a positive scalar constant before input 0 may be folded into the
    /// node's own scale option (see [`with_fused_input_scale`](Self::with_fused_input_scale)).
    pub fused_input_scale: bool,
    /// Whether a float layer normalization written as element-wise nodes that ends in this
    /// node may run as one node (see [`with_fused_layer_norm`](Self::with_fused_layer_norm)).
    pub fused_layer_norm: bool,
    /// Whether a LOGISTIC of one of this node's inputs, read by the node alone as its other
    /// input, may be fused into it (see [`with_fused_swish`](Self::with_fused_swish)).
    pub fused_swish: bool,
}

impl Registration {
    /// A registration of `kernel` under `name`, never in place. A kernel with a
    /// [`Kernel::constant`] is held as that constant: no heap.
    pub fn new(name: &'static str, kernel: impl Kernel + 'static) -> Self {
        Self::with_kernel(name, KernelRef::new(kernel))
    }

    /// A registration of a kernel already held as a [`KernelRef`] (a `'static` constant with
    /// `KernelRef::Constant(&K)`), never in place.
    pub const fn with_kernel(name: &'static str, kernel: KernelRef) -> Self {
        Registration {
            name,
            kernel,
            inplace: InPlace::Never,
            sparse_inputs: 0,
            f16_inputs: 0,
            fused_padding: false,
            fused_input_scale: false,
            fused_layer_norm: false,
            fused_swish: false,
        }
    }

    /// The same registration with an in-place ability.
    pub fn with_inplace(mut self, inplace: InPlace) -> Self {
        self.inplace = inplace;
        self
    }

    /// The same registration reading the inputs of bit mask `inputs` in sparse storage.
    pub fn with_sparse_inputs(mut self, inputs: u64) -> Self {
        self.sparse_inputs = inputs;
        self
    }

    /// The same registration reading the inputs of bit mask `inputs` as float16 constants in
    /// place of float32 ones: the builder then drops a build-time DEQUANTIZE of float16
    /// weights whose every reader declares this, and hands the readers the float16 constant
    /// (the model's bytes) instead of a dequantized float32 copy in the arena's tail. The
    /// kernel must accept a float16 tensor there whatever the shapes.
    pub fn with_f16_inputs(mut self, inputs: u64) -> Self {
        self.f16_inputs = inputs;
        self
    }

    /// The same registration accepting a PAD folded into it: the kernel then reads the PAD's
    /// input and takes [`PrepareContext::fused_padding`] as padding around it (its own padding
    /// option is VALID where the interpreter folds).
    pub fn with_fused_padding(mut self) -> Self {
        self.fused_padding = true;
        self
    }

    /// The same registration accepting a MUL of its input by a positive scalar constant
    /// folded into its scale option (SOFTMAX's `beta`): the builder then rewrites the option
    /// in its copy of the model and the kernel reads the MUL's input. Only for kernels whose
    /// result rounds close enough to the unfused graph's (see `builder::softmax_fusion`).
    pub fn with_fused_input_scale(mut self) -> Self {
        self.fused_input_scale = true;
        self
    }

    /// The same registration accepting to end a fused layer normalization: where its node is the
    /// final ADD of the pattern `builder::layer_norm_fusion` matches, the builder empties the
    /// pattern's other nodes, gives the node the inputs `[x, gamma, eps]` and runs it with
    /// [`register_layer_norm`](crate::interpreter::kernels::layer_norm::register_layer_norm)'s
    /// kernel instead. Only for kernel sets whose results may differ from the graph's by float
    /// rounding (the optimized set).
    pub fn with_fused_layer_norm(mut self) -> Self {
        self.fused_layer_norm = true;
        self
    }

    /// The same registration accepting a swish fused into it: where its node is the MUL of
    /// `x` by `LOGISTIC(x)` that `builder::swish_fusion` matches, the builder empties the
    /// LOGISTIC, gives the node the input `[x]` and runs it with
    /// [`register_swish`](crate::interpreter::kernels::swish::register_swish)'s kernel instead.
    /// Only for kernel sets that may run a graph other than as written (the optimized set).
    pub fn with_fused_swish(mut self) -> Self {
        self.fused_swish = true;
        self
    }

    /// Whether this kernel's nodes may run a fused swish.
    pub fn reads_fused_swish(&self) -> bool {
        self.fused_swish
    }

    /// Whether this kernel's nodes may end a fused layer normalization.
    pub fn reads_fused_layer_norm(&self) -> bool {
        self.fused_layer_norm
    }

    /// Whether a MUL by a scalar constant before input 0 may be folded into this kernel's nodes.
    pub fn reads_fused_input_scale(&self) -> bool {
        self.fused_input_scale
    }

    /// Whether a PAD before input 0 may be folded into this kernel's nodes.
    pub fn reads_fused_padding(&self) -> bool {
        self.fused_padding
    }

    /// Whether input `k` may be a float16 constant in place of a float32 one.
    pub fn reads_f16_input(&self, k: usize) -> bool {
        k < 64 && self.f16_inputs & (1 << k) != 0
    }

    /// Whether input `k` may be a constant stored sparse.
    pub fn reads_sparse_input(&self, k: usize) -> bool {
        k < 64 && self.sparse_inputs & (1 << k) != 0
    }
}

impl core::fmt::Debug for Registration {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Registration")
            .field("name", &self.name)
            .field("inplace", &self.inplace)
            .field("sparse_inputs", &self.sparse_inputs)
            .field("f16_inputs", &self.f16_inputs)
            .field("fused_padding", &self.fused_padding)
            .field("fused_input_scale", &self.fused_input_scale)
            .field("fused_layer_norm", &self.fused_layer_norm)
            .field("fused_swish", &self.fused_swish)
            .finish()
    }
}
