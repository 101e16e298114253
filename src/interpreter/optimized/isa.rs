//! Which instruction set the optimized integer kernels use.

/// The code path of an optimized integer kernel. [`Isa::detect`] picks the best one the running
/// CPU supports; the `*_with` functions take one explicitly so tests and benches exercise each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// Plain Rust loops shaped for the compiler's auto-vectorizer (any target).
    Portable,
    /// x86-64 AVX2 (`vpmaddwd` on int16-widened operands).
    Avx2,
}

impl Isa {
    /// The best path for this CPU. The feature test is std's `is_x86_feature_detected!`, which
    /// caches the CPUID result in a static after the first call (one relaxed load afterwards).
    #[inline]
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }

    /// `self` if this CPU can run it, else [`Isa::Portable`] (so a caller may ask for
    /// [`Isa::Avx2`] anywhere without risking an illegal instruction).
    #[inline]
    pub fn supported(self) -> Isa {
        match self {
            Isa::Avx2 if Isa::detect() == Isa::Avx2 => Isa::Avx2,
            _ => Isa::Portable,
        }
    }

    /// Every path this CPU can run (for tests and benches).
    pub fn available() -> &'static [Isa] {
        if Isa::detect() == Isa::Avx2 {
            &[Isa::Portable, Isa::Avx2]
        } else {
            &[Isa::Portable]
        }
    }
}
