//! TFLite's window geometry (`kernels/padding.h`): the output size of a convolution or pooling
//! window for SAME / VALID padding, and the padding before the first window.

/// Padding scheme of a windowed op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PaddingKind {
    /// Output size `ceil(in / stride)`, input padded evenly (extra on the far side).
    Same,
    /// Output size `ceil((in - effective_filter + 1) / stride)`, no padding.
    Valid,
}

/// One spatial axis of a window: output size, padding before the first window, and the odd
/// extra padding after the last (`offset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisGeometry {
    /// Output size.
    pub out: usize,
    /// Padding before the first element.
    pub pad: usize,
    /// 1 when the total padding is odd (the extra element goes after the last).
    pub offset: usize,
}

/// TFLite's `ComputeOutSize` + `ComputePaddingWithOffset` for one axis; `None` when the
/// arguments are invalid (zero filter, stride or dilation, or a negative output size).
pub fn axis_geometry(
    padding: PaddingKind,
    in_size: usize,
    filter: usize,
    stride: usize,
    dilation: usize,
) -> Option<AxisGeometry> {
    if filter == 0 || stride == 0 || dilation == 0 {
        return None;
    }
    let (in_size, filter, stride, dilation) = (
        i64::try_from(in_size).ok()?,
        i64::try_from(filter).ok()?,
        i64::try_from(stride).ok()?,
        i64::try_from(dilation).ok()?,
    );
    let effective = (filter - 1).checked_mul(dilation)?.checked_add(1)?;
    let out = match padding {
        PaddingKind::Same => (in_size + stride - 1) / stride,
        PaddingKind::Valid => (in_size + stride - effective) / stride,
    };
    if out < 0 {
        return None;
    }
    let total = ((out - 1) * stride + effective - in_size).max(0);
    Some(AxisGeometry {
        out: usize::try_from(out).ok()?,
        pad: usize::try_from(total / 2).ok()?,
        offset: usize::try_from(total % 2).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_and_valid_match_tflite() {
        // 224 / stride 2, 3x3 SAME: out 112, total padding 1 -> pad 0, offset 1.
        assert_eq!(
            axis_geometry(PaddingKind::Same, 224, 3, 2, 1),
            Some(AxisGeometry {
                out: 112,
                pad: 0,
                offset: 1
            })
        );
        // stride 1 SAME 3x3: pad 1 each side.
        assert_eq!(
            axis_geometry(PaddingKind::Same, 7, 3, 1, 1),
            Some(AxisGeometry {
                out: 7,
                pad: 1,
                offset: 0
            })
        );
        // VALID with dilation 2: effective filter 5.
        assert_eq!(
            axis_geometry(PaddingKind::Valid, 10, 3, 1, 2),
            Some(AxisGeometry {
                out: 6,
                pad: 0,
                offset: 0
            })
        );
        // VALID larger than the input: no output.
        assert_eq!(
            axis_geometry(PaddingKind::Valid, 2, 5, 1, 1).map(|g| g.out),
            None
        );
        assert_eq!(axis_geometry(PaddingKind::Same, 5, 0, 1, 1), None);
    }
}
