//! Building an interpreter: init → prepare → memory planning, all before the first invoke.
//!
//! [`InterpreterBuilder::build`] is the only way to get an [`Interpreter`], so an interpreter
//! that can `invoke()` exists only after planning succeeded (typestate by construction).

use super::allocation::{ArenaSource, ALIGNMENT};
use super::context::{Precompute, StagingRegion};
use super::error::InterpreterError;
use super::kernel::KernelSet;
use super::optimized::{Isa, IsaSelection};
use super::resolver::{OpResolver, Resolver};
use super::Interpreter;
use crate::alloc::AllocatorRef;
use crate::model::Model;
use rust_alloc::sync::Arc;

mod budget;
mod evaluate;
mod layer_norm_fusion;
mod pad_fusion;
mod place;
mod resize;
mod shapes;
mod softmax_fusion;
mod stage;
mod swish_fusion;
mod tail;
mod tensor_list;

pub use budget::BudgetStep;

/// Whether a graph input of subgraph 0 has a dynamic dimension (`-1` in its
/// `shape_signature`): only then can [`Interpreter::resize_input`] change a shape, so only then
/// does the interpreter keep the model's tables.
pub(crate) fn resizable(model: &Model) -> bool {
    model.subgraphs.first().is_some_and(|sg| {
        sg.input_tensors().any(|t| {
            sg.tensors
                .get(t)
                .and_then(|t| t.shape_signature.as_ref())
                .is_some_and(|s| s.contains(&-1))
        })
    })
}

pub(crate) use place::{buffer_bytes, finish, table_bytes, Rebuild};
pub(crate) use resize::resized_model;
pub(crate) use stage::{
    default_isa, lowered_model, stage, stage_in, stage_opts, stage_with, Purpose, Staged,
    VariableInit,
};
pub(crate) use tail::TensorRecords;

/// Builds an [`Interpreter`] for subgraph 0 of a model, with the kernels of a resolver `R`
/// ([`OpResolver`] unless given another [`Resolver`] with
/// [`with_resolver`](Self::with_resolver), e.g. an
/// [`ArrayOpResolver`](super::ArrayOpResolver)).
pub struct InterpreterBuilder<'m, 'a, R = OpResolver> {
    model: &'m Model,
    /// The caller's shared handle on `model`, when given ([`shared`](Self::shared)).
    shared: Option<Arc<Model>>,
    resolver: R,
    arena: ArenaSource<'a>,
    threads: usize,
    copies: Precompute,
    budget: Option<usize>,
    isa: Option<Isa>,
    /// Keep no model tables for `resize_input` ([`fixed_shapes`](Self::fixed_shapes)).
    fixed_shapes: bool,
}

impl<'m> InterpreterBuilder<'m, 'static> {
    /// A builder with the crate's builtin kernels (the default [`KernelSet`], optimized) and the
    /// registry's CPU allocator.
    pub fn new(model: &'m Model) -> Self {
        Self::with_resolver(model, OpResolver::with_builtins())
    }

    /// [`new`](Self::new) for a model behind an `Arc`: an interpreter that keeps the model's
    /// tables for [`Interpreter::resize_input`] (a graph input with a dynamic dimension) shares
    /// this `Arc` instead of copying them.
    pub fn shared(model: &'m Arc<Model>) -> Self {
        let mut b = Self::new(model);
        b.shared = Some(model.clone());
        b
    }
}

impl<'m, R: Resolver> InterpreterBuilder<'m, 'static, R> {
    /// A builder with the kernels of `resolver` only (TFLM's `MicroMutableOpResolver`): a
    /// program that never calls [`new`](Self::new) or [`OpResolver::with_builtins`] links only
    /// the kernels it registers, which is what keeps a firmware's code small. The interpreter
    /// refers to each kernel it runs by its [`Kernel::constant`](super::Kernel::constant) or
    /// else one count of its `Arc`, and borrows neither `model` nor `resolver`: both may be
    /// dropped once it is built. Any [`Resolver`]: an [`ArrayOpResolver`](super::ArrayOpResolver)
    /// of the crate's kernels puts nothing on the heap.
    pub fn with_resolver(model: &'m Model, resolver: R) -> Self {
        InterpreterBuilder {
            model,
            shared: None,
            resolver,
            arena: ArenaSource::Default,
            threads: 1,
            copies: Precompute::None,
            budget: None,
            isa: None,
            fixed_shapes: false,
        }
    }
}

impl<'m, 'a> InterpreterBuilder<'m, 'a> {
    /// Uses `resolver` instead of the builtin kernels.
    pub fn resolver(mut self, resolver: OpResolver) -> Self {
        self.resolver = resolver;
        self
    }

    /// Uses the builtin kernels of `set` ([`OpResolver::with_kernel_set`]), replacing the
    /// resolver.
    pub fn kernel_set(self, set: KernelSet) -> Self {
        self.resolver(OpResolver::with_kernel_set(set))
    }
}

impl<'m, 'a, R: Resolver> InterpreterBuilder<'m, 'a, R> {
    /// Places the arena in a caller's buffer.
    pub fn arena_buffer<'b>(self, buffer: &'b mut [u8]) -> InterpreterBuilder<'m, 'b, R> {
        InterpreterBuilder {
            model: self.model,
            shared: self.shared,
            resolver: self.resolver,
            arena: ArenaSource::Buffer(buffer),
            threads: self.threads,
            copies: self.copies,
            budget: self.budget,
            isa: self.isa,
            fixed_shapes: self.fixed_shapes,
        }
    }

    /// Fixes every shape at build, as TFLM does: the interpreter keeps no model tables and no
    /// resolver for [`Interpreter::resize_input`], which then fails, even for a graph input
    /// with a dynamic dimension (without this, such a model is kept: a copy of its tables, or
    /// the caller's `Arc` with [`shared`](InterpreterBuilder::shared), plus the resolver
    /// restricted to its ops). What a firmware wants when it never resizes.
    ///
    /// [`Interpreter::resize_input`]: super::Interpreter::resize_input
    pub fn fixed_shapes(mut self) -> Self {
        self.fixed_shapes = true;
        self
    }

    /// Allocates the arena from `allocator`.
    pub fn arena_allocator(mut self, allocator: AllocatorRef) -> Self {
        self.arena = ArenaSource::Allocator(allocator);
        self
    }

    /// Runs kernels on `n` threads: the invoking thread and `n - 1` workers created at build
    /// (LiteRT's `num_threads`). Kernels that split their work (the optimized set's float
    /// convolutions, depthwise and fully connected layers; TRANSPOSE_CONV, PRELU, float
    /// MAX_POOL_2D) use them, with the same bits as on one thread; each extra thread adds one
    /// im2col block to the scratch ([`Interpreter::arena_needs_threads`]). Invoke still performs
    /// no heap allocation on any thread. Default 1; 0 is an error at build.
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n;
        self
    }

    /// Which precomputed constants (packed weight copies, lookup tables, folded biases) kernels
    /// may keep in the arena's tail (default [`Precompute::None`]: kernels read the model's
    /// constants in place and compute the rest at invoke). Ignored when
    /// [`arena_budget`](Self::arena_budget) is set, which chooses them itself.
    pub fn precompute(mut self, copies: Precompute) -> Self {
        self.copies = copies;
        self
    }

    /// Builds the fastest interpreter whose arena (head + tail) fits in `bytes`: kernels keep
    /// what they precompute from constants (packed weight copies, faster especially for
    /// layers with few output rows; lookup tables; folded biases) in the tail, in node order,
    /// while the arena stays within `bytes`; the rest read their weights in place and pack
    /// them panel by panel into scratch at invoke. Fails with
    /// [`InterpreterError::ArenaBudget`] naming the exact minimum when even the arena with
    /// nothing precomputed does not fit. With [`arena_buffer`](Self::arena_buffer) and no budget, the
    /// buffer's usable length is the budget.
    pub fn arena_budget(mut self, bytes: usize) -> Self {
        self.budget = Some(bytes);
        self
    }

    /// Runs the optimized kernels on path `isa` (capped by what the CPU has: asking for a path
    /// the CPU lacks runs the best one it has, and [`Interpreter::isa`] says so). Overrides
    /// `TENSOR_ALLOC_ISA`; without either the best path of the CPU runs. See `docs/isa.md`.
    ///
    /// [`Interpreter::isa`]: super::Interpreter::isa
    pub fn isa(mut self, isa: Isa) -> Self {
        self.isa = Some(isa);
        self
    }

    /// Runs init, prepare and memory planning, and starts the kernel threads.
    pub fn build(mut self) -> Result<Interpreter<'a>, InterpreterError> {
        if self.threads == 0 {
            return Err(InterpreterError::Usage(
                "threads must be at least 1 (the invoking thread), got 0".into(),
            ));
        }
        let isa = IsaSelection::resolve(self.isa).map_err(InterpreterError::Isa)?;
        if isa.capped() {
            tracing::info!(
                requested = ?isa.requested,
                running = %isa.isa,
                "kernel path capped by the CPU: {isa}"
            );
        }
        // A caller's buffer is the budget unless one is given; when even the smallest arena
        // does not fit it, `finish` reports the buffer as too small (with the bytes needed).
        let buffer_budget = match &self.arena {
            ArenaSource::Buffer(b) => {
                Some(b.len() - b.as_ptr().align_offset(ALIGNMENT).min(b.len()))
            }
            _ => None,
        };
        // A caller's buffer also stages the persistent records of the staging the interpreter
        // is built from (no heap for them; `fill_arena` moves them into the tail): one such
        // staging alive at a time, each dropped before the next starts, and the buffer
        // otherwise untouched until `finish` lays the arena over it.
        let region = match &mut self.arena {
            ArenaSource::Buffer(b) => {
                let skip = b.as_ptr().align_offset(ALIGNMENT).min(b.len());
                let usable = &mut b[skip..];
                // SAFETY: the buffer is borrowed exclusively for 'a and nothing reads or writes
                // it before `finish`; the stagings given the region follow its one-at-a-time
                // contract (see above and `stage_in_budget`), and `finish` reads the records
                // through the arena's pointer, not this one.
                unsafe { StagingRegion::new(usable.as_mut_ptr(), usable.len()) }
            }
            _ => None,
        };
        // The stagings borrow the resolver (each node's registration is the resolver's), the
        // builder's other fields stay free to move into the interpreter.
        let resolver = self.resolver;
        let resolver: &dyn Resolver = &resolver;
        let staged_default = |purpose, region| {
            stage_in(
                self.model,
                resolver,
                self.threads,
                (self.copies, isa),
                purpose,
                region,
            )
        };
        let (staged, copies) = match (self.budget, buffer_budget) {
            (Some(b), _) => {
                budget::stage_in_budget(self.model, self.threads, resolver, b, isa, region)?
            }
            (None, Some(b)) => 'staged: {
                // Everything precomputed, staged for real in the buffer: kept when the buffer
                // holds its arena and tables (so one staging, whenever the kernels precompute
                // nothing or the buffer is large enough).
                let all = stage_in(
                    self.model,
                    resolver,
                    self.threads,
                    (Precompute::All, isa),
                    Purpose::Build,
                    region,
                )?;
                if place::buffer_bytes(&all, self.model)? <= b {
                    break 'staged (all, Precompute::All);
                }
                drop(all);
                // The interpreter's tables follow the arena in the buffer: the arena's budget is
                // the bytes before them (at an `ALIGNMENT` boundary). Records chosen for it whose
                // tables would not fit leave the default.
                // (Sized by a staging that keeps no record bytes, dropped before the next: two
                // alive would double the build's heap peak.)
                let tables =
                    place::table_bytes(&staged_default(Purpose::Sizing, None)?, self.model)?;
                let arena_budget = b.saturating_sub(tables) / ALIGNMENT * ALIGNMENT;
                match budget::stage_in_budget(
                    self.model,
                    self.threads,
                    resolver,
                    arena_budget,
                    isa,
                    region,
                ) {
                    Err(InterpreterError::ArenaBudget { .. }) => {
                        (staged_default(Purpose::Build, region)?, self.copies)
                    }
                    Ok((staged, _)) if place::buffer_bytes(&staged, self.model)? > b => {
                        drop(staged);
                        (staged_default(Purpose::Build, region)?, self.copies)
                    }
                    r => r?,
                }
            }
            (None, None) => (staged_default(Purpose::Build, None)?, self.copies),
        };
        // The model's tables are kept only when `resize_input` can use them (a graph input
        // with a dynamic dimension, shapes not fixed): the caller's `Arc` when given, else a copy.
        let kept = match (!self.fixed_shapes && resizable(self.model), self.shared) {
            (false, _) => None,
            (true, Some(shared)) => Some(shared),
            (true, None) => Some(Arc::new(self.model.clone())),
        };
        let mut interp = finish(self.model, kept, staged, self.arena)?;
        if self.threads > 1 {
            let pool = super::threads::ThreadPool::new(self.threads).map_err(|e| {
                InterpreterError::Usage(format!(
                    "cannot start {} kernel threads: {e}",
                    self.threads - 1
                ))
            })?;
            interp.threads = Some(pool);
        }
        interp.copies = copies;
        Ok(interp)
    }
}
