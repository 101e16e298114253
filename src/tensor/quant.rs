//! Affine quantization parameters kept beside a tensor's dtype (TFLite's `QuantizationParameters`).

use super::{Shape, TensorError};
#[cfg(not(feature = "std"))]
use crate::math::Float;
use rust_alloc::borrow::Cow;
use rust_alloc::{string::String, vec::Vec};

/// Affine quantization: `real = scale * (q - zero_point)`, either one `(scale, zero_point)` for the
/// whole tensor or one per slice along `quantized_dimension` (per-channel, as TFLite uses for
/// convolution weights).
///
/// The parameters are owned, or borrowed for the whole program ([`from_static`](Self::from_static):
/// the reader of a model held in `&'static` bytes reads them in place, so a model in flash keeps
/// no copy of its per-channel scales on the heap); a clone of borrowed parameters allocates
/// nothing.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Quantization {
    scales: Cow<'static, [f32]>,
    zero_points: Cow<'static, [i64]>,
    quantized_dimension: usize,
}

fn bad(reason: String) -> TensorError {
    TensorError::Quantization { reason }
}

/// The invariant of [`Quantization`]: at least one scale, every scale finite and ≥ 0, as many
/// zero points as scales.
fn check(scales: &[f32], zero_points: &[i64]) -> Result<(), TensorError> {
    if scales.is_empty() {
        return Err(bad("at least one scale is required, got none".into()));
    }
    if let Some((i, s)) = scales
        .iter()
        .enumerate()
        .find(|(_, s)| !s.is_finite() || **s < 0.0)
    {
        return Err(bad(format!(
            "scale[{i}] = {s}; scales must be finite and ≥ 0"
        )));
    }
    if zero_points.len() != scales.len() {
        return Err(bad(format!(
            "{} scales but {} zero points; the counts must match",
            scales.len(),
            zero_points.len()
        )));
    }
    Ok(())
}

impl Quantization {
    /// One scale and zero point for the whole tensor. The scale must be finite and ≥ 0.
    pub fn per_tensor(scale: f32, zero_point: i64) -> Result<Self, TensorError> {
        Self::per_channel(vec![scale], vec![zero_point], 0)
    }

    /// One scale and zero point per slice along `quantized_dimension`.
    ///
    /// `scales` must be non-empty, finite and ≥ 0; `zero_points` must have the same length (TFLite
    /// requires this) — a single zero point is broadcast for convenience.
    pub fn per_channel(
        scales: Vec<f32>,
        mut zero_points: Vec<i64>,
        quantized_dimension: usize,
    ) -> Result<Self, TensorError> {
        // Broadcast one zero point (index 0 exists: the length is 1).
        if zero_points.len() == 1 && scales.len() > 1 {
            zero_points = vec![zero_points[0]; scales.len()];
        }
        check(&scales, &zero_points)?;
        Ok(Self {
            scales: Cow::Owned(scales),
            zero_points: Cow::Owned(zero_points),
            quantized_dimension,
        })
    }

    /// Parameters borrowed for the whole program (e.g. read in place from a model in flash):
    /// nothing is copied. The checks are [`per_channel`](Self::per_channel)'s, except that the
    /// zero points must be exactly one per scale (a broadcast would need a copy).
    pub fn from_static(
        scales: &'static [f32],
        zero_points: &'static [i64],
        quantized_dimension: usize,
    ) -> Result<Self, TensorError> {
        check(scales, zero_points)?;
        Ok(Self {
            scales: Cow::Borrowed(scales),
            zero_points: Cow::Borrowed(zero_points),
            quantized_dimension,
        })
    }

    /// The scales (one for per-tensor).
    pub fn scales(&self) -> &[f32] {
        &self.scales
    }

    /// The zero points (same length as [`scales`](Self::scales)).
    pub fn zero_points(&self) -> &[i64] {
        &self.zero_points
    }

    /// The dimension the per-channel parameters run along (0 for per-tensor).
    pub fn quantized_dimension(&self) -> usize {
        self.quantized_dimension
    }

    /// Heap bytes the parameters hold (their vectors' capacity; 0 when borrowed), for memory
    /// reports.
    pub fn heap_bytes(&self) -> usize {
        let scales = match &self.scales {
            Cow::Owned(v) => v.capacity() * core::mem::size_of::<f32>(),
            Cow::Borrowed(_) => 0,
        };
        let zero_points = match &self.zero_points {
            Cow::Owned(v) => v.capacity() * core::mem::size_of::<i64>(),
            Cow::Borrowed(_) => 0,
        };
        scales + zero_points
    }

    /// Whether there is more than one `(scale, zero_point)` pair.
    pub fn is_per_channel(&self) -> bool {
        self.scales.len() > 1
    }

    /// Number of channels (1 for per-tensor).
    pub fn channels(&self) -> usize {
        self.scales.len()
    }

    /// `(scale, zero_point)` of channel `c` (per-tensor parameters answer for every channel).
    pub fn params(&self, c: usize) -> Option<(f32, i64)> {
        if self.is_per_channel() {
            Some((*self.scales.get(c)?, *self.zero_points.get(c)?))
        } else {
            // Constructors guarantee at least one scale and as many zero points.
            Some((self.scales[0], self.zero_points[0]))
        }
    }

    /// `scale * (q - zero_point)` for channel `c` (`None` if `c` is out of range).
    pub fn dequantize(&self, q: i64, c: usize) -> Option<f32> {
        let (s, z) = self.params(c)?;
        Some(s * q.saturating_sub(z) as f32)
    }

    /// `round(real / scale) + zero_point` clamped to `[min, max]` (`None` if `c` is out of range or
    /// the scale is 0).
    pub fn quantize(&self, real: f32, c: usize, min: i64, max: i64) -> Option<i64> {
        let (s, z) = self.params(c)?;
        if s == 0.0 {
            return None;
        }
        // `as` saturates (NaN becomes 0); the addition saturates too, then the clamp applies.
        let q = ((real / s).round() as i64).saturating_add(z);
        Some(q.clamp(min, max))
    }

    /// Checks that per-channel parameters fit `shape`: the quantized dimension exists and has as
    /// many entries as there are scales.
    pub fn check_shape(&self, shape: &Shape) -> Result<(), TensorError> {
        if !self.is_per_channel() {
            return Ok(());
        }
        match shape.dim(self.quantized_dimension) {
            Some(d) if d == self.scales.len() => Ok(()),
            Some(d) => Err(bad(format!(
                "{} per-channel scales along dimension {} but shape {shape} has {d} entries there",
                self.scales.len(),
                self.quantized_dimension
            ))),
            None => Err(bad(format!(
                "quantized dimension {} does not exist in shape {shape} (rank {})",
                self.quantized_dimension,
                shape.rank()
            ))),
        }
    }
}

/// Borrowed affine parameters: a [`Quantization`]'s scales, zero points and quantized dimension
/// where they already are (an interpreter's graph inputs and outputs, whose parameters it keeps
/// in the caller's buffer). Invariant (as for [`Quantization`]): at least one scale, as many
/// zero points as scales, every scale finite and ≥ 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantizationRef<'a> {
    scales: &'a [f32],
    zero_points: &'a [i64],
    quantized_dimension: usize,
}

impl Quantization {
    /// The parameters, borrowed.
    pub fn borrowed(&self) -> QuantizationRef<'_> {
        QuantizationRef {
            scales: &self.scales,
            zero_points: &self.zero_points,
            quantized_dimension: self.quantized_dimension,
        }
    }
}

impl<'a> QuantizationRef<'a> {
    /// Parameters copied out of a [`Quantization`] (the caller keeps the invariant: the slices
    /// come from a valid `Quantization`).
    pub(crate) fn from_parts(
        scales: &'a [f32],
        zero_points: &'a [i64],
        quantized_dimension: usize,
    ) -> Self {
        debug_assert!(!scales.is_empty() && scales.len() == zero_points.len());
        QuantizationRef {
            scales,
            zero_points,
            quantized_dimension,
        }
    }

    /// The scales (one for per-tensor).
    pub fn scales(&self) -> &'a [f32] {
        self.scales
    }

    /// The zero points (same length as [`scales`](Self::scales)).
    pub fn zero_points(&self) -> &'a [i64] {
        self.zero_points
    }

    /// The dimension the per-channel parameters run along (0 for per-tensor).
    pub fn quantized_dimension(&self) -> usize {
        self.quantized_dimension
    }

    /// Whether there is more than one `(scale, zero_point)` pair.
    pub fn is_per_channel(&self) -> bool {
        self.scales.len() > 1
    }

    /// An owned copy (allocates its two vectors).
    pub fn to_quantization(&self) -> Quantization {
        Quantization {
            scales: Cow::Owned(self.scales.to_vec()),
            zero_points: Cow::Owned(self.zero_points.to_vec()),
            quantized_dimension: self.quantized_dimension,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_tensor_and_per_channel() {
        let q = Quantization::per_tensor(0.5, -3).unwrap();
        assert!(!q.is_per_channel());
        assert_eq!(q.dequantize(1, 7), Some(2.0));
        assert_eq!(q.quantize(2.0, 0, -128, 127), Some(1));
        assert_eq!(q.quantize(1000.0, 0, -128, 127), Some(127));
        let pc = Quantization::per_channel(vec![1.0, 2.0, 4.0], vec![0], 3).unwrap();
        assert_eq!(pc.zero_points(), &[0, 0, 0]);
        assert_eq!(pc.params(2), Some((4.0, 0)));
        assert_eq!(pc.params(3), None);
        pc.check_shape(&Shape::new(&[8, 3, 3, 3]).unwrap()).unwrap();
        let e = pc
            .check_shape(&Shape::new(&[8, 3, 3, 4]).unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("has 4 entries"), "{e}");
        assert!(pc.check_shape(&Shape::new(&[3]).unwrap()).is_err());
        let r = pc.borrowed();
        assert_eq!(
            (r.scales(), r.zero_points()),
            (pc.scales(), pc.zero_points())
        );
        assert!(r.is_per_channel() && r.quantized_dimension() == 3);
        assert_eq!(r.to_quantization(), pc);
    }

    #[test]
    fn invalid_parameters() {
        assert!(Quantization::per_tensor(f32::NAN, 0).is_err());
        assert!(Quantization::per_tensor(-1.0, 0).is_err());
        assert!(Quantization::per_channel(vec![], vec![], 0).is_err());
        let e = Quantization::per_channel(vec![1.0, 1.0], vec![0, 0, 0], 0).unwrap_err();
        assert!(e.to_string().contains("2 scales but 3 zero points"), "{e}");
    }
}
