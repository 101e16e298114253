//! Which instruction set the optimized kernels use: one detection of the CPU (once, cached), one
//! override (`TENSOR_ALLOC_ISA`, or [`InterpreterBuilder::isa`]), and the gate every SIMD
//! dispatch of [`super`] goes through ([`Isa::avx2`]).
//!
//! The paths are ordered: `scalar < avx2 < avx512 < avx512vnni`. A request is capped by what
//! the CPU has ([`Isa::supported`]), so asking for a path the CPU lacks runs the best one it
//! has, never an illegal instruction. Every kernel has a plain-Rust body and most an AVX2+FMA
//! one; some also have AVX-512 or AVX-512 VNNI bodies (the table in `docs/isa.md`), and the
//! others run their AVX2 body on those paths. The AVX-512 intrinsics need Rust 1.89 (the
//! crate's `rust-version`).
//!
//! [`InterpreterBuilder::isa`]: crate::interpreter::InterpreterBuilder::isa

use rust_alloc::{string::String, string::ToString};
use core::sync::atomic::{AtomicU8, Ordering};

/// The environment variable that forces a path.
pub const ISA_ENV: &str = "TENSOR_ALLOC_ISA";

/// The code path of an optimized kernel, from the least to the most capable. [`Isa::detect`]
/// gives the best one the running CPU supports; the interpreter runs the one its builder
/// selected ([`IsaSelection`]); the `*_with` functions take one explicitly so tests and benches
/// exercise each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Plain Rust loops shaped for the compiler's auto-vectorizer (any target, always there).
    Scalar,
    /// x86-64 AVX2 with FMA (Haswell, Zen and later).
    Avx2,
    /// x86-64 AVX-512 F, BW, DQ and VL (Skylake-SP, Zen 4 and later) besides AVX2 and FMA.
    Avx512,
    /// AVX-512 with VNNI (`vpdpbusd`; Cascade Lake, Ice Lake, Zen 4 and later).
    Avx512Vnni,
}

/// Every path, from the least to the most capable.
const ALL: [Isa; 4] = [Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Vnni];

/// The cached detection: 0 = not yet detected, else `1 + index in ALL`.
static DETECTED: AtomicU8 = AtomicU8::new(0);

impl Isa {
    /// Every path, from the least to the most capable.
    pub const ALL: [Isa; 4] = ALL;

    /// The value `TENSOR_ALLOC_ISA` takes for this path.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Avx512Vnni => "avx512vnni",
        }
    }

    /// The path named `s` (one of [`Isa::name`]'s values, any case, surrounding blanks
    /// ignored).
    pub fn parse(s: &str) -> Result<Isa, IsaError> {
        let t = s.trim();
        ALL.into_iter()
            .find(|i| i.name().eq_ignore_ascii_case(t))
            .ok_or_else(|| IsaError {
                value: s.to_string(),
            })
    }

    /// The best path this CPU supports. Detected once (CPUID through std's
    /// `is_x86_feature_detected!`) and cached: one relaxed load afterwards. No allocation, so
    /// it may run anywhere, the global allocator included.
    #[inline]
    pub fn detect() -> Isa {
        match DETECTED.load(Ordering::Relaxed) {
            0 => {
                let isa = Self::probe();
                DETECTED.store(isa as u8 + 1, Ordering::Relaxed);
                isa
            }
            v => ALL[(v - 1) as usize],
        }
    }

    /// Asks the CPU (uncached). Without `std` there is no OS-aware feature detection (AVX
    /// state must also be enabled by the OS), so the scalar path runs.
    fn probe() -> Isa {
        #[cfg(all(target_arch = "x86_64", feature = "std"))]
        {
            use std::arch::is_x86_feature_detected as has;
            if !(has!("avx2") && has!("fma")) {
                return Isa::Scalar;
            }
            if !(has!("avx512f") && has!("avx512bw") && has!("avx512dq") && has!("avx512vl")) {
                return Isa::Avx2;
            }
            if !has!("avx512vnni") {
                return Isa::Avx512;
            }
            Isa::Avx512Vnni
        }
        #[cfg(not(all(target_arch = "x86_64", feature = "std")))]
        Isa::Scalar
    }

    /// `self` if this CPU can run it, else the best path it can (so a caller may ask for any
    /// path anywhere without risking an illegal instruction).
    #[inline]
    pub fn supported(self) -> Isa {
        self.min(Isa::detect())
    }

    /// Every path this CPU can run, from `scalar` up (for tests and benches).
    pub fn available() -> &'static [Isa] {
        &ALL[..=Isa::detect() as usize]
    }

    /// Whether a kernel on this path runs its AVX2+FMA body: the path is `avx2` or above
    /// **and** the CPU has AVX2 and FMA (checked against the cached detection). Every call of
    /// a `#[target_feature(enable = "avx2")]` or `"avx2,fma"` function in the crate is behind
    /// this test.
    #[inline]
    pub fn avx2(self) -> bool {
        self.supported() >= Isa::Avx2
    }

    /// Whether a kernel on this path runs its AVX-512 body: the path is `avx512` or above and
    /// the CPU has AVX-512 F, BW, DQ and VL (and AVX2+FMA). Every call of a
    /// `#[target_feature(enable = "avx512f,...")]` function in the crate is behind this test.
    #[inline]
    pub fn avx512(self) -> bool {
        self.supported() >= Isa::Avx512
    }

    /// Whether a kernel on this path runs its AVX-512 VNNI body (`vpdpbusd`): the path is
    /// `avx512vnni` and the CPU has it, besides everything [`Isa::avx512`] needs.
    #[inline]
    pub fn avx512vnni(self) -> bool {
        self.supported() >= Isa::Avx512Vnni
    }

    /// The `TENSOR_ALLOC_ISA` setting: `Ok(None)` when unset, the path it names, or an error
    /// naming the variable, its value and the accepted values (an empty value is an error, as
    /// for every `TENSOR_ALLOC_*` variable). Read once and cached
    /// (the process's environment is not re-read).
    #[cfg(feature = "std")]
    pub fn from_env() -> Result<Option<Isa>, IsaError> {
        use std::sync::OnceLock;
        static ENV: OnceLock<Result<Option<Isa>, IsaError>> = OnceLock::new();
        ENV.get_or_init(|| match std::env::var(ISA_ENV) {
            Ok(v) => Isa::parse(&v).map(Some),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(v)) => Err(IsaError {
                value: v.to_string_lossy().into_owned(),
            }),
        })
        .clone()
    }

    /// Without `std` there is no environment: never set.
    #[cfg(not(feature = "std"))]
    pub fn from_env() -> Result<Option<Isa>, IsaError> {
        Ok(None)
    }

    /// The path of the optimized functions called without one (the ones without `_with`):
    /// `TENSOR_ALLOC_ISA` capped by the CPU, else the best the CPU has. A bad value falls back
    /// to the best path here; the interpreter builder and the CLI report it as an error.
    #[inline]
    pub fn configured() -> Isa {
        static CONFIGURED: AtomicU8 = AtomicU8::new(0);
        match CONFIGURED.load(Ordering::Relaxed) {
            0 => {
                let isa = IsaSelection::resolve(None).map_or(Isa::detect(), |s| s.isa);
                CONFIGURED.store(isa as u8 + 1, Ordering::Relaxed);
                isa
            }
            v => ALL[(v - 1) as usize],
        }
    }
}

impl core::fmt::Display for Isa {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for Isa {
    type Err = IsaError;
    fn from_str(s: &str) -> Result<Isa, IsaError> {
        Isa::parse(s)
    }
}

/// A value that names no path (of `TENSOR_ALLOC_ISA`, or of a `--isa` option).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("TENSOR_ALLOC_ISA={value:?} is not a kernel path; expected one of scalar, avx2, avx512, avx512vnni")]
pub struct IsaError {
    /// The value given.
    pub value: String,
}

/// Who asked for a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IsaSource {
    /// Nobody: the best the CPU has.
    Detected,
    /// `TENSOR_ALLOC_ISA`.
    Env,
    /// The program ([`InterpreterBuilder::isa`](crate::interpreter::InterpreterBuilder::isa)).
    Api,
}

/// The path an interpreter runs, and how it was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IsaSelection {
    /// The path kernels run (the request capped by the CPU).
    pub isa: Isa,
    /// What was asked for, if anything.
    pub requested: Option<Isa>,
    /// Who asked.
    pub source: IsaSource,
    /// The best path of this CPU.
    pub detected: Isa,
}

impl IsaSelection {
    /// The path for a request: `explicit` when given (the program wins over the environment),
    /// else `TENSOR_ALLOC_ISA`, else the best the CPU has; capped by the CPU. Fails only on a
    /// bad `TENSOR_ALLOC_ISA` value when `explicit` is `None`.
    pub fn resolve(explicit: Option<Isa>) -> Result<IsaSelection, IsaError> {
        let (requested, source) = match explicit {
            Some(i) => (Some(i), IsaSource::Api),
            None => match Isa::from_env()? {
                Some(i) => (Some(i), IsaSource::Env),
                None => (None, IsaSource::Detected),
            },
        };
        let detected = Isa::detect();
        Ok(IsaSelection {
            isa: requested.map_or(detected, Isa::supported),
            requested,
            source,
            detected,
        })
    }

    /// Whether the request asked for more than the CPU has (and runs [`isa`](Self::isa)).
    pub fn capped(&self) -> bool {
        self.requested.is_some_and(|r| r != self.isa)
    }
}

impl core::fmt::Display for IsaSelection {
    /// `avx2`, `scalar (TENSOR_ALLOC_ISA)`, or `avx2 (TENSOR_ALLOC_ISA asked for avx512; this
    /// CPU's best is avx2)`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.isa)?;
        let who = match self.source {
            IsaSource::Detected => return Ok(()),
            IsaSource::Env => ISA_ENV,
            IsaSource::Api => "the program",
        };
        match self.requested {
            Some(r) if r != self.isa => write!(
                f,
                " ({who} asked for {r}; this CPU's best is {})",
                self.detected
            ),
            _ => write!(f, " ({who})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_bad_values_name_the_variable() {
        for i in Isa::ALL {
            assert_eq!(Isa::parse(i.name()), Ok(i));
            assert_eq!(i.name().to_uppercase().parse::<Isa>(), Ok(i));
        }
        assert!(Isa::parse("").is_err() && Isa::parse(" ").is_err());
        let e = Isa::parse("avx3").unwrap_err().to_string();
        assert_eq!(
            e,
            "TENSOR_ALLOC_ISA=\"avx3\" is not a kernel path; expected one of scalar, avx2, \
             avx512, avx512vnni"
        );
        assert!(!e.contains('\n'));
    }

    #[test]
    fn requests_are_capped_by_the_cpu() {
        let best = Isa::detect();
        assert_eq!(Isa::detect(), Isa::probe(), "cached detection");
        assert_eq!(*Isa::available().last().unwrap(), best);
        assert_eq!(Isa::available()[0], Isa::Scalar);
        for i in Isa::ALL {
            let s = IsaSelection::resolve(Some(i)).unwrap();
            assert_eq!(s.isa, i.min(best));
            assert_eq!(s.capped(), i > best);
            assert_eq!(s.source, IsaSource::Api);
            assert_eq!(i.avx2(), i >= Isa::Avx2 && best >= Isa::Avx2);
            if s.capped() {
                assert!(s.to_string().contains("this CPU's best is"), "{s}");
            }
        }
        assert!(!Isa::Scalar.avx2());
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            best >= Isa::Avx2,
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
        );
    }
}
