//! Tensor lifetimes of a subgraph for the static memory planner, following TFLite's ArenaPlanner
//! and TFLM's allocation info.
//!
//! Steps are operator indices `0..N` in execution order. For every non-constant tensor:
//! - graph inputs are live from step 0, graph outputs until step `N-1`;
//! - an intermediate lives from the first op that writes it to the last op that reads it
//!   (inclusive); an output nobody reads ("dead" output) lives only at the step that writes it;
//! - a tensor read but never written and not a graph input (e.g. a scratch tensor filled by a
//!   delegate op) lives from its first to its last reader;
//! - optional inputs (`-1`) are skipped and tensors no op touches (e.g. LSTM intermediates that
//!   only carry quantization parameters) are not planned;
//! - variable tensors (LSTM/SVDF state) and prepare-time constants (outputs of ops whose inputs
//!   are all constant — DEQUANTIZE of float16 weights, DENSIFY of sparse weights — and of
//!   SHAPE/RANK on static shapes) are computed once or kept forever, so they go to the
//!   persistent section (arena tail), not the per-invoke plan (head).
//!
//! Graph inputs die at their last reader, as in TFLM (and as `memory.tensors` of the reference
//! facts); TFLite's `preserve_inputs` behaviour (inputs live the whole run) is
//! [`LifetimeOptions::preserve_inputs`].
//!
//! In-place sharing ([`LifetimeOptions::inplace`]): a RESHAPE / SQUEEZE / EXPAND_DIMS output
//! aliases its input, and an element-wise op's output may be written into an input of the same
//! dtype and byte size, when that input dies at the op and is neither a graph input nor a graph
//! output (and, for offline-planned tensors, when the offline plan gave both the same offset).

use super::{BuiltinOp, Model, ModelError, Subgraph};
use rust_alloc::{borrow::Cow, vec::Vec};

/// How to derive lifetimes.
#[derive(Clone, Debug, Default)]
pub struct LifetimeOptions {
    /// Subgraph to plan (0 = main graph).
    pub subgraph: usize,
    /// Keep every planned tensor alive until the last step (TFLite's
    /// `preserve_all_tensors`, for debugging): no memory reuse.
    pub preserve_all: bool,
    /// Keep graph inputs alive for the whole run (TFLite's `preserve_inputs`).
    pub preserve_inputs: bool,
    /// Tensor indices to keep alive until the last step (pinning, e.g. to read an intermediate
    /// after `invoke`).
    pub pinned: Vec<usize>,
    /// Declare in-place aliases (see the module documentation).
    pub inplace: bool,
    /// With `inplace`: only operators `k` with `inplace_ops[k]` may alias their output (an
    /// interpreter passes the operators whose kernels run in place); `None` = every reshape-like
    /// and element-wise operator.
    pub inplace_ops: Option<Vec<bool>>,
    /// Do not read the `OfflineMemoryAllocation` metadata (no offline offsets; a malformed
    /// entry is then not an error either).
    pub ignore_offline_plan: bool,
}

/// Role of a planned tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorRole {
    /// A graph input.
    Input,
    /// A graph output.
    Output,
    /// Written by one op, read by later ones.
    Intermediate,
    /// Read but never written and not a graph input.
    OrphanRead,
}

impl TensorRole {
    /// Lower-case name (`"input"`, `"output"`, `"intermediate"`, `"orphan_read"`).
    pub fn name(self) -> &'static str {
        match self {
            TensorRole::Input => "input",
            TensorRole::Output => "output",
            TensorRole::Intermediate => "intermediate",
            TensorRole::OrphanRead => "orphan_read",
        }
    }
}

/// A tensor of the per-invoke plan (the arena head).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedTensor {
    /// Tensor index in the subgraph.
    pub tensor: usize,
    /// Tensor name (the model's, borrowed or owned as [`TensorDef::name`](super::TensorDef)).
    pub name: Cow<'static, str>,
    /// Bytes (`prod(shape) * sizeof(dtype)`).
    pub bytes: usize,
    /// First step it is live.
    pub first: usize,
    /// Last step it is live (inclusive).
    pub last: usize,
    /// Role.
    pub role: TensorRole,
    /// Index (into [`Lifetimes::planned`]) of the buffer this one shares memory with
    /// (in-place), always a root (itself not aliased).
    pub alias_of: Option<usize>,
    /// Offset fixed by an offline plan (`OfflineMemoryAllocation` metadata).
    pub offline_offset: Option<usize>,
}

/// Why a tensor is persistent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PersistentKind {
    /// `is_variable` state.
    Variable,
    /// Output of an op computable at prepare time from constants.
    PrepareTimeConstant,
}

/// A tensor of the persistent section (arena tail).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PersistentTensor {
    /// Tensor index.
    #[serde(rename = "index")]
    pub tensor: usize,
    /// Tensor name (the model's, borrowed or owned as [`TensorDef::name`](super::TensorDef)).
    pub name: Cow<'static, str>,
    /// Bytes.
    pub bytes: usize,
    /// Why it is persistent.
    pub kind: PersistentKind,
}

/// Lifetimes of one subgraph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    /// Number of operators (steps).
    pub num_ops: usize,
    /// Tensors of the per-invoke plan, in tensor-index order.
    pub planned: Vec<PlannedTensor>,
    /// Persistent tensors (variables, prepare-time constants).
    pub persistent: Vec<PersistentTensor>,
    /// Non-constant tensors no op reads or writes and that are not graph inputs/outputs.
    pub unused: Vec<usize>,
    /// Non-constant tensors without a fixed size (string, resource, variant, unknown dtype);
    /// allocated dynamically at run time, not planned.
    pub unsized_tensors: Vec<usize>,
}

/// What the graph says about every tensor of one subgraph: constness, graph input/output,
/// the steps that first write, first read and last read it, and whether it is a prepare-time
/// constant.
struct TensorFacts {
    is_const: Vec<bool>,
    is_input: Vec<bool>,
    is_output: Vec<bool>,
    prepare_time_constant: Vec<bool>,
    /// Step of the first op writing the tensor (`usize::MAX`: none).
    first_write: Vec<usize>,
    /// Step of the first op reading the tensor (`usize::MAX`: none).
    first_read: Vec<usize>,
    last_read: Vec<Option<usize>>,
}

impl TensorFacts {
    fn new(model: &Model, si: usize) -> Self {
        let sg = &model.subgraphs[si];
        let n = sg.tensors.len();
        let mut f = TensorFacts {
            is_const: (0..n).map(|t| model.is_constant(si, t)).collect(),
            is_input: vec![false; n],
            is_output: vec![false; n],
            prepare_time_constant: vec![false; n],
            first_write: vec![usize::MAX; n],
            first_read: vec![usize::MAX; n],
            last_read: vec![None; n],
        };
        for t in sg.input_tensors() {
            f.is_input[t] = true;
        }
        for t in sg.output_tensors() {
            f.is_output[t] = true;
        }
        f.mark_prepare_time_constants(model, sg);
        f.record_uses(sg);
        f
    }

    /// Prepare-time constants: outputs of ops whose (non-optional) inputs are all constant or
    /// themselves prepare-time constants, and of SHAPE/RANK on inputs with static shapes.
    fn mark_prepare_time_constants(&mut self, model: &Model, sg: &Subgraph) {
        for op in &sg.operators {
            let builtin = model.builtin_of(op).unwrap_or(BuiltinOp::CUSTOM);
            // Control flow runs other subgraphs at invoke, and READ_VARIABLE reads a value
            // that invokes change: never evaluated at build.
            let control_flow = matches!(
                builtin,
                BuiltinOp::WHILE | BuiltinOp::IF | BuiltinOp::CALL_ONCE | BuiltinOp::READ_VARIABLE
            );
            // VAR_HANDLE has no inputs and always names the same variable: its handle is
            // known at build, so the nodes that read it size the variable at prepare.
            let var_handle = builtin == BuiltinOp::VAR_HANDLE;
            if builtin == BuiltinOp::CUSTOM
                || control_flow
                || (op.input_tensors().next().is_none() && !var_handle)
            {
                continue;
            }
            let all_const = op.input_tensors().all(|t| {
                (self.is_const[t] || self.prepare_time_constant[t]) && !sg.tensors[t].is_variable
            });
            let static_shape_op = matches!(builtin, BuiltinOp::SHAPE | BuiltinOp::RANK)
                && op.input_tensors().all(|t| {
                    let sig = sg.tensors[t].shape_signature.as_ref();
                    sig.is_none_or(|s| s.iter().all(|&d| d >= 0))
                });
            if all_const || static_shape_op {
                for t in op.output_tensors() {
                    if !self.is_const[t] && !self.is_output[t] && !sg.tensors[t].is_variable {
                        self.prepare_time_constant[t] = true;
                    }
                }
            }
        }
    }

    /// First write, first read and last read of every tensor, by op step.
    fn record_uses(&mut self, sg: &Subgraph) {
        for (k, op) in sg.operators.iter().enumerate() {
            for t in op.output_tensors() {
                self.first_write[t] = self.first_write[t].min(k);
            }
            for t in op.input_tensors() {
                self.first_read[t] = self.first_read[t].min(k);
                self.last_read[t] = Some(self.last_read[t].map_or(k, |l| l.max(k)));
            }
        }
    }

    fn written(&self, t: usize) -> bool {
        self.first_write[t] != usize::MAX
    }

    /// Read or written by an op, or a graph input or output.
    fn touched(&self, t: usize) -> bool {
        self.written(t) || self.last_read[t].is_some() || self.is_input[t] || self.is_output[t]
    }

    /// First step, role and last step of a touched tensor (`end` is the last op's step):
    /// inputs live from step 0, outputs to `end`, others from their first write (or read) to
    /// their last read.
    fn interval(&self, t: usize, end: usize) -> (usize, TensorRole, usize) {
        let output_or = |role| {
            if self.is_output[t] {
                TensorRole::Output
            } else {
                role
            }
        };
        let (first, role) = if self.is_input[t] {
            (0, TensorRole::Input)
        } else if self.written(t) {
            (self.first_write[t], output_or(TensorRole::Intermediate))
        } else if self.last_read[t].is_some() {
            (self.first_read[t], output_or(TensorRole::OrphanRead))
        } else {
            (0, TensorRole::Output)
        };
        let last = if self.is_output[t] {
            end
        } else {
            self.last_read[t].unwrap_or(first).max(first)
        };
        (first, role, last)
    }
}

/// One flag per tensor: kept alive to the end by `--pin`.
fn pinned_mask(pinned: &[usize], n: usize) -> Result<Vec<bool>, ModelError> {
    let mut mask = vec![false; n];
    for &p in pinned {
        if p >= n {
            return Err(ModelError::IndexOutOfRange {
                location: "lifetime options.pinned".into(),
                index: p as i64,
                len: n,
                what: "tensors of the subgraph",
            });
        }
        mask[p] = true;
    }
    Ok(mask)
}

impl Lifetimes {
    /// Derives lifetimes of `opts.subgraph` of `model` (after [`Model::validate`]): each
    /// non-constant tensor is unused, unsized (dynamic), persistent (variable or prepare-time
    /// constant) or planned from its first to its last use; then in-place aliases are declared
    /// when `opts.inplace`.
    pub fn compute(model: &Model, opts: &LifetimeOptions) -> Result<Lifetimes, ModelError> {
        // Models from the reader are valid already; hand-assembled ones are checked so that the
        // indexing below cannot go out of range.
        model.validate()?;
        let si = opts.subgraph;
        let sg = model
            .subgraphs
            .get(si)
            .ok_or_else(|| ModelError::IndexOutOfRange {
                location: "lifetime options.subgraph".into(),
                index: si as i64,
                len: model.subgraphs.len(),
                what: "subgraphs",
            })?;
        let facts = TensorFacts::new(model, si);
        let offline = if si == 0 && !opts.ignore_offline_plan {
            model.offline_plan()?
        } else {
            None
        };
        let pinned = pinned_mask(&opts.pinned, sg.tensors.len())?;
        let end = sg.operators.len().saturating_sub(1);
        let mut out = Lifetimes {
            num_ops: sg.operators.len(),
            planned: Vec::new(),
            persistent: Vec::new(),
            unused: Vec::new(),
            unsized_tensors: Vec::new(),
        };
        for (t, tensor) in sg.tensors.iter().enumerate() {
            if facts.is_const[t] {
                continue;
            }
            let size = tensor.static_byte_size().map_err(|problem| {
                ModelError::invalid(
                    format!("subgraphs[{si}].tensors[{t}] ({:?})", tensor.name),
                    problem,
                )
            })?;
            let Some(bytes) = size else {
                if facts.touched(t) || tensor.is_variable {
                    out.unsized_tensors.push(t);
                } else {
                    out.unused.push(t);
                }
                continue;
            };
            let persistent = |kind| PersistentTensor {
                tensor: t,
                name: tensor.name.clone(),
                bytes,
                kind,
            };
            if tensor.is_variable {
                out.persistent.push(persistent(PersistentKind::Variable));
            } else if facts.prepare_time_constant[t] {
                out.persistent
                    .push(persistent(PersistentKind::PrepareTimeConstant));
            } else if !facts.touched(t) {
                out.unused.push(t);
            } else {
                let (first, role, mut last) = facts.interval(t, end);
                if opts.preserve_all || pinned[t] || (opts.preserve_inputs && facts.is_input[t]) {
                    last = end;
                }
                out.planned.push(PlannedTensor {
                    tensor: t,
                    name: tensor.name.clone(),
                    bytes,
                    first,
                    last,
                    role,
                    alias_of: None,
                    offline_offset: offline.as_ref().and_then(|o| o.get(t).copied().flatten()),
                });
            }
        }
        if opts.inplace {
            out.declare_inplace(
                model,
                si,
                &facts.is_input,
                &facts.is_output,
                opts.inplace_ops.as_deref(),
            );
        }
        Ok(out)
    }

    fn declare_inplace(
        &mut self,
        model: &Model,
        si: usize,
        is_input: &[bool],
        is_output: &[bool],
        allowed: Option<&[bool]>,
    ) {
        let sg = &model.subgraphs[si];
        let mut slot = vec![None; sg.tensors.len()];
        for (i, p) in self.planned.iter().enumerate() {
            slot[p.tensor] = Some(i);
        }
        // Last step of each alias group, by root: a dying input may only be shared when its whole
        // group dies at this op (no other member still needs the memory).
        let mut group_last: Vec<usize> = self.planned.iter().map(|p| p.last).collect();
        for (k, op) in sg.operators.iter().enumerate() {
            let Some(builtin) = model.builtin_of(op) else {
                continue;
            };
            if allowed.is_some_and(|a| !a.get(k).copied().unwrap_or(false)) {
                continue;
            }
            let reshape = builtin.is_reshape_like();
            if !(reshape || builtin.is_elementwise()) || op.output_tensors().count() != 1 {
                continue;
            }
            let Some(y) = op.output_tensors().next() else {
                continue;
            };
            let Some(yi) = slot[y] else { continue };
            if self.planned[yi].first != k || self.planned[yi].alias_of.is_some() {
                continue;
            }
            let candidates: Vec<usize> = if reshape {
                op.input_tensors().take(1).collect()
            } else {
                op.input_tensors().collect()
            };
            for x in candidates {
                let Some(xi) = slot[x] else { continue };
                let xp = &self.planned[xi];
                let yp = &self.planned[yi];
                let same_type = reshape || sg.tensors[x].dtype == sg.tensors[y].dtype;
                let fits = if reshape {
                    xp.bytes >= yp.bytes
                } else {
                    xp.bytes == yp.bytes
                };
                if xi == yi
                    || xp.last != k
                    || is_input[x]
                    || is_output[x]
                    // Offline-planned tensors may only share when the plan put them together.
                    || xp.offline_offset != yp.offline_offset
                    || !same_type
                    || !fits
                {
                    continue;
                }
                let root = xp.alias_of.unwrap_or(xi);
                if group_last[root] != k {
                    continue;
                }
                if self.planned[root].bytes < self.planned[yi].bytes
                    || self.planned[root].offline_offset != self.planned[yi].offline_offset
                {
                    continue;
                }
                self.planned[yi].alias_of = Some(root);
                group_last[root] = group_last[root].max(self.planned[yi].last);
                break;
            }
        }
    }

    /// Number of planned tensors.
    pub fn num_planned(&self) -> usize {
        self.planned.len()
    }

    /// Sum of the planned tensors' bytes (no reuse at all).
    ///
    /// Saturates instead of wrapping; a model that passed [`Model::validate`] cannot reach it
    /// (its tensors add up to at most [`crate::model::MAX_MODEL_TENSOR_BYTES`]).
    pub fn naive_bytes(&self) -> usize {
        self.planned
            .iter()
            .fold(0usize, |acc, p| acc.saturating_add(p.bytes))
    }

    /// Bytes of the persistent section (variables and prepare-time constants), unaligned.
    pub fn persistent_bytes(&self) -> usize {
        self.persistent
            .iter()
            .fold(0usize, |acc, p| acc.saturating_add(p.bytes))
    }

    /// The most bytes live at any one step with every tensor in its own buffer, each rounded up
    /// to `alignment` (1 = exact): no planner without aliasing can use less.
    pub fn lower_bound(&self, alignment: usize) -> usize {
        let items = self
            .planned
            .iter()
            .map(|p| (p.first, p.last, saturating_round_up(p.bytes, alignment)));
        sweep_max(self.num_ops, items)
    }

    /// Lower bound with in-place aliases: each alias group (a root and the tensors sharing it)
    /// counts once, live from its earliest first to its latest last step, with its largest size.
    pub fn lower_bound_with_aliases(&self, alignment: usize) -> usize {
        let mut groups: Vec<(usize, usize, usize)> = self
            .planned
            .iter()
            .map(|p| (p.first, p.last, saturating_round_up(p.bytes, alignment)))
            .collect();
        for p in &self.planned {
            if let Some(r) = p.alias_of {
                let g = &mut groups[r];
                g.0 = g.0.min(p.first);
                g.1 = g.1.max(p.last);
                g.2 = g.2.max(saturating_round_up(p.bytes, alignment));
            }
        }
        let items = self
            .planned
            .iter()
            .zip(groups)
            .filter(|(p, _)| p.alias_of.is_none())
            .map(|(_, g)| g);
        sweep_max(self.num_ops, items)
    }
}

/// `bytes` rounded up to a multiple of `alignment`, saturating at `usize::MAX` (the planner's
/// `round_up` is the checked form).
pub(crate) fn saturating_round_up(bytes: usize, alignment: usize) -> usize {
    if alignment <= 1 {
        bytes
    } else {
        bytes.div_ceil(alignment).saturating_mul(alignment)
    }
}

/// Max over steps of the summed sizes of the intervals covering the step (difference array).
fn sweep_max(num_ops: usize, items: impl Iterator<Item = (usize, usize, usize)>) -> usize {
    let steps = num_ops.max(1);
    let mut delta = vec![0i128; steps + 1];
    for (first, last, bytes) in items {
        let first = first.min(steps - 1);
        let last = last.clamp(first, steps - 1);
        delta[first] += bytes as i128;
        delta[last + 1] -= bytes as i128;
    }
    let mut live = 0i128;
    let mut best = 0i128;
    for d in &delta[..steps] {
        live += d;
        best = best.max(live);
    }
    usize::try_from(best).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BuiltinOptions, DType, ModelBuilder};

    fn lt(m: &Model, opts: LifetimeOptions) -> Lifetimes {
        Lifetimes::compute(m, &opts).unwrap()
    }

    #[test]
    fn dead_outputs_orphans_and_pass_through() {
        let mut b = ModelBuilder::new("g");
        let x = b.add_tensor("x", DType::F32, &[4]);
        let dead = b.add_tensor("dead", DType::F32, &[2]);
        let y = b.add_tensor("y", DType::F32, &[4]);
        let orphan = b.add_tensor("scratch", DType::U8, &[10]);
        b.add_op(BuiltinOp::SPLIT, BuiltinOptions::None, &[x], &[y, dead]);
        let z = b.add_tensor("z", DType::F32, &[4]);
        b.add_op(BuiltinOp::ADD, BuiltinOptions::None, &[y, orphan], &[z]);
        b.inputs(&[x]).outputs(&[z, x]);
        let m = b.build();
        let l = lt(&m, LifetimeOptions::default());
        let get = |t: i32| {
            l.planned
                .iter()
                .find(|p| p.tensor == t as usize)
                .unwrap()
                .clone()
        };
        assert_eq!(
            (get(dead).first, get(dead).last),
            (0, 0),
            "dead output lives at its writer only"
        );
        assert_eq!(
            (get(orphan).first, get(orphan).last, get(orphan).role),
            (1, 1, TensorRole::OrphanRead)
        );
        assert_eq!(
            (get(x).first, get(x).last),
            (0, 1),
            "an input that is also an output lives to the end"
        );
        assert_eq!(get(z).role, TensorRole::Output);
        // Peak: step 0 has x, y, dead = 40; step 1 has x, y, scratch, z = 58.
        assert_eq!(l.lower_bound(1), 58);
        assert_eq!(l.lower_bound(16), 64);
    }

    #[test]
    fn empty_graph_and_bad_indices() {
        let mut b = ModelBuilder::new("g");
        let x = b.add_tensor("x", DType::I8, &[3]);
        b.inputs(&[x]).outputs(&[x]);
        let m = b.build();
        let l = lt(&m, LifetimeOptions::default());
        assert_eq!(l.num_ops, 0);
        assert_eq!(l.lower_bound(1), 3);

        let mut b = ModelBuilder::new("g");
        let x = b.add_tensor("x", DType::I8, &[3]);
        b.add_op(BuiltinOp::RELU, BuiltinOptions::None, &[x], &[42]);
        let err = Lifetimes::compute(&b.build(), &LifetimeOptions::default()).unwrap_err();
        assert!(err.to_string().contains("operators[0].outputs[0]"), "{err}");
        let err = Lifetimes::compute(
            &m,
            &LifetimeOptions {
                subgraph: 3,
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("subgraph"), "{err}");
        let err = Lifetimes::compute(
            &m,
            &LifetimeOptions {
                pinned: vec![9],
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("pinned"), "{err}");
    }

    #[test]
    fn overflowing_or_negative_static_shapes_are_errors() {
        // A static tensor whose byte size overflows is not "dynamic": it is an error.
        let mut b = ModelBuilder::new("g");
        let x = b.add_tensor("x", DType::F32, &[1 << 30, 1 << 30, 1 << 30]);
        let y = b.add_tensor("y", DType::F32, &[4]);
        b.add_op(BuiltinOp::RELU, BuiltinOptions::None, &[x], &[y]);
        b.inputs(&[x]).outputs(&[y]);
        let err = Lifetimes::compute(&b.build(), &LifetimeOptions::default()).unwrap_err();
        assert!(
            err.to_string().contains("tensors[0]") && err.to_string().contains("address space"),
            "{err}"
        );
        // `-1` in `shape` (not `shape_signature`) is not sized as 1.
        let mut b = ModelBuilder::new("g");
        let x = b.add_tensor("x", DType::I8, &[-1, 4]);
        let y = b.add_tensor("y", DType::I8, &[4]);
        b.add_op(BuiltinOp::RELU, BuiltinOptions::None, &[x], &[y]);
        b.inputs(&[x]).outputs(&[y]);
        let err = Lifetimes::compute(&b.build(), &LifetimeOptions::default()).unwrap_err();
        assert!(err.to_string().contains("negative dimension -1"), "{err}");
        // A type without a fixed size is still dynamic, not an error.
        let mut b = ModelBuilder::new("g");
        let x = b.add_tensor("x", DType::String, &[4]);
        let y = b.add_tensor("y", DType::I8, &[4]);
        b.add_op(BuiltinOp::RELU, BuiltinOptions::None, &[x], &[y]);
        b.inputs(&[x]).outputs(&[y]);
        let l = lt(&b.build(), LifetimeOptions::default());
        assert_eq!(l.unsized_tensors, vec![0]);
    }

    #[test]
    fn inplace_needs_a_dying_same_sized_input() {
        let mut b = ModelBuilder::new("g");
        let x = b.add_tensor("x", DType::I8, &[8]);
        let a = b.add_tensor("a", DType::I8, &[8]);
        b.add_op(BuiltinOp::RELU, BuiltinOptions::None, &[x], &[a]);
        // `a` is read again later: it does not die at the ADD, so `c` may not reuse it; `b2`
        // dies there and has the same size: it may.
        let b2 = b.add_tensor("b2", DType::I8, &[8]);
        b.add_op(BuiltinOp::TANH, BuiltinOptions::None, &[a], &[b2]);
        let c = b.add_tensor("c", DType::I8, &[8]);
        b.add_op(BuiltinOp::ADD, BuiltinOptions::None, &[a, b2], &[c]);
        let wide = b.add_tensor("wide", DType::I8, &[8]);
        b.add_op(BuiltinOp::MUL, BuiltinOptions::None, &[a, c], &[wide]);
        b.inputs(&[x]).outputs(&[wide]);
        let m = b.build();
        let l = lt(
            &m,
            LifetimeOptions {
                inplace: true,
                ..Default::default()
            },
        );
        let slot = |t: i32| {
            l.planned
                .iter()
                .position(|p| p.tensor == t as usize)
                .unwrap()
        };
        assert_eq!(
            l.planned[slot(a)].alias_of,
            None,
            "x is a graph input: never overwritten"
        );
        assert_eq!(l.planned[slot(b2)].alias_of, None, "a is still read later");
        assert_eq!(l.planned[slot(c)].alias_of, Some(slot(b2)));
        assert_eq!(
            l.planned[slot(wide)].alias_of,
            Some(slot(a)),
            "a dies at the MUL too and is the first candidate"
        );
        // Steps 2 and 3 hold three 8-byte tensors each; with {a, wide} and {b2, c} shared, two.
        assert_eq!(l.lower_bound(1), 24);
        assert_eq!(l.lower_bound_with_aliases(1), 16);
        // A wider output (int16) cannot be written into an int8 input.
        let mut m2 = m.clone();
        m2.subgraphs[0].tensors[wide as usize].dtype = DType::I16;
        let l2 = lt(
            &m2,
            LifetimeOptions {
                inplace: true,
                ..Default::default()
            },
        );
        assert_eq!(l2.planned[slot(wide)].alias_of, None);
    }
}
