//! Arithmetic of LiteRT's optimized kernels where it is not the reference arithmetic (plain
//! slice math, no interpreter types, like [`super::reference`]). Kept only where LiteRT's
//! built-in kernels compute differently from its reference kernels, so the crate can reproduce
//! either bit for bit.

pub mod softmax;
