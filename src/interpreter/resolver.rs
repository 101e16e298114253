//! The op resolver: which kernel runs a builtin op (by code and version) or a custom op (by
//! name). Users add or override kernels before building an interpreter.

use super::kernel::Registration;
use crate::model::BuiltinOp;
use std::collections::HashMap;

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

    /// Every builtin kernel the crate ships, plus the Signal library custom ops and MediaPipe's
    /// `Convolution2DTransposeBias`.
    pub fn with_builtins() -> Self {
        let mut r = Self::new();
        super::kernels::register_builtins(&mut r);
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
