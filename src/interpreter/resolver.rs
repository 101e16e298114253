//! The op resolver: which kernel runs a builtin op (by code and version) or a custom op (by
//! name). Users add or override kernels before building an interpreter.
//!
//! The crate ships two kernel sets ([`KernelSet`]): the portable reference kernels, the
//! bit-exact oracle, and the optimized kernels (the default), which run the same validation and
//! differ only in the arithmetic of the ops that have a faster variant. Integer results are
//! bit-exact between the sets; float results agree within rounding (a different summation
//! order), which the conformance tests bound.

use super::kernel::Registration;
use crate::model::BuiltinOp;
use std::collections::HashMap;

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

impl std::fmt::Display for KernelSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Maps builtin ops and custom op names to kernel registrations.
///
/// A builtin registration covers a range of versions (`1..=max_version`); a model asking for a
/// newer version than registered is reported as not registered, as TFLite does.
#[derive(Clone, Debug, Default)]
pub struct OpResolver {
    builtins: HashMap<i32, (i32, i32, Registration)>,
    customs: HashMap<String, Registration>,
}

impl OpResolver {
    /// An empty resolver.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every builtin kernel the crate ships in the default set ([`KernelSet::Optimized`]), plus
    /// the Signal library custom ops and MediaPipe's `Convolution2DTransposeBias`.
    pub fn with_builtins() -> Self {
        Self::with_kernel_set(KernelSet::default())
    }

    /// [`Self::with_builtins`] with the reference kernels: the bit-exact oracle.
    pub fn reference() -> Self {
        Self::with_kernel_set(KernelSet::Reference)
    }

    /// [`Self::with_builtins`] with the optimized kernels (the default).
    pub fn optimized() -> Self {
        Self::with_kernel_set(KernelSet::Optimized)
    }

    /// Every builtin kernel of `set`, plus the custom ops of [`Self::with_builtins`].
    pub fn with_kernel_set(set: KernelSet) -> Self {
        let mut r = Self::new();
        super::kernels::register_builtins(&mut r, set);
        super::signal::register_all(&mut r);
        r
    }

    /// Registers (or replaces) the kernel of builtin `op` for versions `min..=max`.
    pub fn register_builtin_versions(
        &mut self,
        op: BuiltinOp,
        min: i32,
        max: i32,
        reg: Registration,
    ) {
        self.builtins.insert(op.0, (min, max, reg));
    }

    /// Registers (or replaces) the kernel of builtin `op` for every version.
    pub fn register_builtin(&mut self, op: BuiltinOp, reg: Registration) {
        self.register_builtin_versions(op, 1, i32::MAX, reg);
    }

    /// Registers (or replaces) the kernel of custom op `name`.
    pub fn register_custom(&mut self, name: &str, reg: Registration) {
        self.customs.insert(name.to_string(), reg);
    }

    /// The registration for an operator, `None` when the resolver lacks it.
    pub fn find(&self, op: BuiltinOp, custom: Option<&str>, version: i32) -> Option<&Registration> {
        if op == BuiltinOp::CUSTOM {
            return custom.and_then(|c| self.customs.get(c));
        }
        self.builtins
            .get(&op.0)
            .filter(|(min, max, _)| (*min..=*max).contains(&version))
            .map(|(_, _, r)| r)
    }

    /// A resolver with only `ops` of this one (same kernels, same version ranges); ops this
    /// resolver lacks are left out.
    pub fn subset(&self, ops: &[BuiltinOp]) -> OpResolver {
        OpResolver {
            builtins: self
                .builtins
                .iter()
                .filter(|(code, _)| ops.iter().any(|o| o.0 == **code))
                .map(|(code, v)| (*code, v.clone()))
                .collect(),
            customs: HashMap::new(),
        }
    }

    /// Registered builtin ops, sorted by code.
    pub fn builtin_ops(&self) -> Vec<BuiltinOp> {
        let mut v: Vec<BuiltinOp> = self.builtins.keys().map(|&c| BuiltinOp(c)).collect();
        v.sort_by_key(|o| o.0);
        v
    }

    /// Registered custom op names, sorted.
    pub fn custom_ops(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.customs.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }
}
