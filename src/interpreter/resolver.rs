//! The op resolver: which kernel runs a builtin op (by code and version) or a custom op (by
//! name). Users add or override kernels before building an interpreter.
//!
//! The crate ships two kernel sets ([`KernelSet`]): the portable reference kernels, the
//! bit-exact oracle, and the optimized kernels (the default), which run the same validation and
//! differ only in the arithmetic of the ops that have a faster variant. Integer results are
//! bit-exact between the sets; float results agree within rounding (a different summation
//! order), which the conformance tests bound.

use super::kernel::{KernelSet, Registration};
use super::kernels;
use crate::model::BuiltinOp;
use hashbrown::HashMap;
use rust_alloc::{string::String, string::ToString, vec::Vec};

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
        for &(op, register) in kernels::BUILTINS {
            r.register_builtin(op, register(set));
        }
        for &(name, register) in kernels::CUSTOMS {
            r.register_custom(name, register());
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_builtins_registers_each_listed_op_once_under_its_name() {
        for set in KernelSet::ALL {
            let r = OpResolver::with_kernel_set(set);
            assert_eq!(r.builtin_ops().len(), kernels::BUILTINS.len(), "{set}");
            for &(op, _) in kernels::BUILTINS {
                let reg = r.find(op, None, 1).unwrap();
                assert_eq!(reg.name, op.to_string(), "{set}");
            }
            assert_eq!(
                r.custom_ops(),
                vec![
                    "Convolution2DTransposeBias",
                    "SignalEnergy",
                    "SignalFftAutoScale",
                    "SignalFilterBank",
                    "SignalFilterBankLog",
                    "SignalFilterBankSpectralSubtraction",
                    "SignalFilterBankSquareRoot",
                    "SignalPCAN",
                    "SignalRfft",
                    "SignalWindow",
                ]
            );
            for &(name, _) in kernels::CUSTOMS {
                assert_eq!(r.find(BuiltinOp::CUSTOM, Some(name), 1).unwrap().name, name);
            }
        }
    }

    /// The node table holds no count of a constant kernel, so an interpreter of the crate's
    /// kernels keeps nothing on the heap once the resolver is dropped.
    #[test]
    fn every_kernel_the_crate_ships_is_a_constant() {
        for set in KernelSet::ALL {
            let registrations = kernels::BUILTINS
                .iter()
                .map(|&(op, register)| (op.to_string(), register(set)))
                .chain(
                    kernels::CUSTOMS
                        .iter()
                        .map(|&(name, register)| (name.to_string(), register())),
                );
            for (name, reg) in registrations {
                let constant = reg.kernel.constant();
                assert!(constant.is_some(), "{set} {name}: no constant");
                // The same type, so the same behaviour for a kernel holding only its
                // configuration (`constant_among` compares that configuration).
                assert_eq!(
                    constant.map(core::mem::size_of_val),
                    Some(core::mem::size_of_val(&*reg.kernel)),
                    "{set} {name}"
                );
            }
        }
    }

    #[test]
    fn the_optimized_set_reads_float16_weights_of_conv_and_fully_connected() {
        let r = OpResolver::optimized();
        for op in [BuiltinOp::CONV_2D, BuiltinOp::FULLY_CONNECTED] {
            assert!(r.find(op, None, 1).unwrap().reads_f16_input(1), "{op}");
        }
        let fc = OpResolver::reference();
        let fc = fc.find(BuiltinOp::FULLY_CONNECTED, None, 1).unwrap();
        assert!(fc.reads_sparse_input(1) && !fc.reads_f16_input(1));
    }
}
