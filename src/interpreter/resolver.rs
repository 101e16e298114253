//! The op resolver: which kernel runs a builtin op (by code and version) or a custom op (by
//! name). Users add or override kernels before building an interpreter.
//!
//! Two resolvers implement [`Resolver`], what the build asks of one: [`OpResolver`] (maps on
//! the heap, any number of ops, every builtin kernel with [`OpResolver::with_builtins`]) and
//! [`ArrayOpResolver`] (TFLM's `MicroMutableOpResolver<N>`: at most `N` registrations in an
//! array inside it, no heap; with the crate's kernels, which are constants, nothing of it is on
//! the heap at all).
//!
//! The crate ships two kernel sets ([`KernelSet`]): the portable reference kernels, the
//! bit-exact oracle, and the optimized kernels (the default), which run the same validation and
//! differ only in the arithmetic of the ops that have a faster variant. Integer results are
//! bit-exact between the sets; float results agree within rounding (a different summation
//! order), which the conformance tests bound.

use super::error::InterpreterError;
use super::kernel::{KernelSet, Registration};
use super::kernels;
use crate::model::BuiltinOp;
use hashbrown::HashMap;
use rust_alloc::{format, string::String, string::ToString, vec::Vec};

/// What the build asks of a resolver: the kernel of an operator.
pub trait Resolver {
    /// The registration for an operator (builtin `op`, or `custom` when `op` is
    /// [`BuiltinOp::CUSTOM`], at `version`), `None` when the resolver lacks it.
    fn find(&self, op: BuiltinOp, custom: Option<&str>, version: i32) -> Option<&Registration>;
}

impl Resolver for OpResolver {
    fn find(&self, op: BuiltinOp, custom: Option<&str>, version: i32) -> Option<&Registration> {
        OpResolver::find(self, op, custom, version)
    }
}

/// One registration of an [`ArrayOpResolver`].
#[derive(Clone, Debug)]
struct ArrayEntry {
    /// The builtin op ([`BuiltinOp::CUSTOM`] for a custom op).
    op: BuiltinOp,
    /// The custom op's name (`None` for a builtin).
    custom: Option<&'static str>,
    /// Versions `min..=max` (all versions for a custom op).
    versions: (i32, i32),
    reg: Registration,
}

/// TFLM's `MicroMutableOpResolver<N>`: up to `N` registrations held in an array inside the
/// resolver (on the stack or in a `static`), found by a linear scan. It allocates nothing; the
/// crate's registrations hold their kernels as constants ([`KernelRef::Constant`]), so a
/// resolver of them has no byte on the heap. Registering an op again replaces it; a
/// registration beyond `N` fails.
///
/// [`KernelRef::Constant`]: super::KernelRef::Constant
#[derive(Clone, Debug)]
pub struct ArrayOpResolver<const N: usize> {
    entries: [Option<ArrayEntry>; N],
}

impl<const N: usize> Default for ArrayOpResolver<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> ArrayOpResolver<N> {
    /// An empty resolver with room for `N` ops.
    pub const fn new() -> Self {
        ArrayOpResolver {
            entries: [const { None }; N],
        }
    }

    /// Registered ops.
    pub fn len(&self) -> usize {
        self.entries.iter().take_while(|e| e.is_some()).count()
    }

    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.first().is_none_or(|e| e.is_none())
    }

    /// Puts `entry` in place of the entry of the same op, else in the first free slot.
    fn insert(&mut self, entry: ArrayEntry) -> Result<(), InterpreterError> {
        let slot = self.entries.iter_mut().find(|e| {
            e.as_ref()
                .is_none_or(|e| e.op == entry.op && e.custom == entry.custom)
        });
        match slot {
            Some(slot) => {
                *slot = Some(entry);
                Ok(())
            }
            None => Err(InterpreterError::Usage(format!(
                "the resolver holds {N} ops, all taken: cannot register {}",
                entry.custom.unwrap_or(entry.reg.name)
            ))),
        }
    }

    /// Registers (or replaces) the kernel of builtin `op` for versions `min..=max`; fails when
    /// all `N` slots hold other ops.
    pub fn register_builtin_versions(
        &mut self,
        op: BuiltinOp,
        min: i32,
        max: i32,
        reg: Registration,
    ) -> Result<(), InterpreterError> {
        self.insert(ArrayEntry {
            op,
            custom: None,
            versions: (min, max),
            reg,
        })
    }

    /// Registers (or replaces) the kernel of builtin `op` for every version; fails when all
    /// `N` slots hold other ops.
    pub fn register_builtin(
        &mut self,
        op: BuiltinOp,
        reg: Registration,
    ) -> Result<(), InterpreterError> {
        self.register_builtin_versions(op, 1, i32::MAX, reg)
    }

    /// Registers (or replaces) the kernel of custom op `name`; fails when all `N` slots hold
    /// other ops.
    pub fn register_custom(
        &mut self,
        name: &'static str,
        reg: Registration,
    ) -> Result<(), InterpreterError> {
        self.insert(ArrayEntry {
            op: BuiltinOp::CUSTOM,
            custom: Some(name),
            versions: (i32::MIN, i32::MAX),
            reg,
        })
    }
}

impl<const N: usize> Resolver for ArrayOpResolver<N> {
    fn find(&self, op: BuiltinOp, custom: Option<&str>, version: i32) -> Option<&Registration> {
        let custom = if op == BuiltinOp::CUSTOM {
            Some(custom?)
        } else {
            None
        };
        self.entries
            .iter()
            .map_while(Option::as_ref)
            .find(|e| {
                e.op == op && e.custom == custom && (e.versions.0..=e.versions.1).contains(&version)
            })
            .map(|e| &e.reg)
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

    /// The array resolver finds what the map resolver finds, replaces a registration of the
    /// same op in place, refuses one beyond its capacity, and honours version ranges and
    /// custom names.
    #[test]
    fn array_resolver_finds_as_the_map_resolver_and_refuses_beyond_capacity() {
        use crate::interpreter::kernels::{conv, reshape, softmax};
        let set = KernelSet::Reference;
        let mut a = ArrayOpResolver::<3>::new();
        assert!(a.is_empty());
        assert!(a.find(BuiltinOp::CONV_2D, None, 1).is_none());
        a.register_builtin(BuiltinOp::CONV_2D, conv::register_conv_2d(set))
            .unwrap();
        a.register_builtin_versions(BuiltinOp::RESHAPE, 1, 2, reshape::register_reshape(set))
            .unwrap();
        // The same op again replaces it (here with a narrower range), taking no slot.
        a.register_builtin_versions(BuiltinOp::RESHAPE, 1, 1, reshape::register_reshape(set))
            .unwrap();
        assert_eq!(a.len(), 2);
        a.register_custom(
            "SignalWindow",
            crate::interpreter::signal::window::register_window(),
        )
        .unwrap();
        assert_eq!(a.len(), 3);
        let full = a.register_builtin(BuiltinOp::SOFTMAX, softmax::register_softmax(set));
        assert!(matches!(full, Err(InterpreterError::Usage(m)) if m.contains("holds 3 ops")));
        let find = |op, custom, version| a.find(op, custom, version).map(|r| r.name);
        assert_eq!(find(BuiltinOp::CONV_2D, None, 7), Some("CONV_2D"));
        assert_eq!(find(BuiltinOp::RESHAPE, None, 1), Some("RESHAPE"));
        assert_eq!(find(BuiltinOp::RESHAPE, None, 2), None);
        assert_eq!(find(BuiltinOp::SOFTMAX, None, 1), None);
        assert_eq!(
            find(BuiltinOp::CUSTOM, Some("SignalWindow"), 1),
            Some("SignalWindow")
        );
        assert_eq!(find(BuiltinOp::CUSTOM, Some("SignalRfft"), 1), None);
        assert_eq!(find(BuiltinOp::CUSTOM, None, 1), None);
        // Nothing on the heap: every registration holds its kernel's constant.
        for op in [BuiltinOp::CONV_2D, BuiltinOp::RESHAPE] {
            assert!(a.find(op, None, 1).unwrap().kernel.shared().is_none());
        }
        // The same registration as the map resolver's for every builtin.
        let map = OpResolver::with_kernel_set(set);
        for &(op, register) in kernels::BUILTINS {
            let mut one = ArrayOpResolver::<1>::new();
            one.register_builtin(op, register(set)).unwrap();
            let (x, y) = (
                one.find(op, None, 1).unwrap(),
                map.find(op, None, 1).unwrap(),
            );
            assert_eq!(x.name, y.name);
            assert!(core::ptr::addr_eq(&*x.kernel, &*y.kernel), "{op}");
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
