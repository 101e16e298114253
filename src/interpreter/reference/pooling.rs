//! AVERAGE_POOL_2D arithmetic (TFLite's `reference_ops::AveragePool` for float and
//! `reference_integer_ops::AveragePool` for int8 / int16): the mean of the window's elements
//! inside the input (padding is not counted), NHWC.

/// Shapes and window of a 2-D pooling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolGeometry {
    /// Batches.
    pub batches: usize,
    /// Input height.
    pub in_h: usize,
    /// Input width.
    pub in_w: usize,
    /// Channels (input and output).
    pub channels: usize,
    /// Output height.
    pub out_h: usize,
    /// Output width.
    pub out_w: usize,
    /// Window height.
    pub filter_h: usize,
    /// Window width.
    pub filter_w: usize,
    /// Vertical stride.
    pub stride_h: usize,
    /// Horizontal stride.
    pub stride_w: usize,
    /// Padding above.
    pub pad_h: usize,
    /// Padding left.
    pub pad_w: usize,
}

/// The clipped window `[start, end)` of one axis for output position `out`.
#[inline(always)]
pub(crate) fn window(out: usize, stride: usize, pad: usize, filter: usize, size: usize) -> (usize, usize) {
    let origin = (out * stride) as isize - pad as isize;
    let start = origin.max(0) as usize;
    let end = (origin + filter as isize).clamp(0, size as isize) as usize;
    (start, end.max(start))
}

#[inline(always)]
fn pool_loop<T: Copy, A: Copy>(
    g: &PoolGeometry,
    input: &[T],
    output: &mut [T],
    zero: A,
    add: impl Fn(A, T) -> A,
    finish: impl Fn(A, usize) -> T,
) -> bool {
    let mut o = 0;
    for b in 0..g.batches {
        for oy in 0..g.out_h {
            let (y0, y1) = window(oy, g.stride_h, g.pad_h, g.filter_h, g.in_h);
            for ox in 0..g.out_w {
                let (x0, x1) = window(ox, g.stride_w, g.pad_w, g.filter_w, g.in_w);
                let count = (y1 - y0) * (x1 - x0);
                if count == 0 {
                    return false;
                }
                for c in 0..g.channels {
                    let mut acc = zero;
                    for y in y0..y1 {
                        for x in x0..x1 {
                            acc = add(acc, input[((b * g.in_h + y) * g.in_w + x) * g.channels + c]);
                        }
                    }
                    output[o] = finish(acc, count);
                    o += 1;
                }
            }
        }
    }
    true
}

/// Float average pooling with clamp; `false` when a window covers no input element.
pub fn average_pool_f32(
    g: &PoolGeometry,
    input: &[f32],
    act_min: f32,
    act_max: f32,
    output: &mut [f32],
) -> bool {
    pool_loop(
        g,
        input,
        output,
        0.0f32,
        |a, v| a + v,
        |a, n| (a / n as f32).max(act_min).min(act_max),
    )
}

/// Integer average: 32-bit sum, divided by the count rounding half away from zero, clamped.
fn integer_average(acc: i32, count: usize, act_min: i32, act_max: i32) -> i32 {
    let n = count as i32;
    let avg = if acc > 0 {
        (acc + n / 2) / n
    } else {
        (acc - n / 2) / n
    };
    avg.clamp(act_min, act_max)
}

/// int8 average pooling; `false` when a window covers no input element.
pub fn average_pool_i8(
    g: &PoolGeometry,
    input: &[i8],
    act_min: i32,
    act_max: i32,
    output: &mut [i8],
) -> bool {
    pool_loop(
        g,
        input,
        output,
        0i32,
        |a, v| a.wrapping_add(i32::from(v)),
        |a, n| integer_average(a, n, act_min, act_max) as i8,
    )
}

/// int16 average pooling; `false` when a window covers no input element.
pub fn average_pool_i16(
    g: &PoolGeometry,
    input: &[i16],
    act_min: i32,
    act_max: i32,
    output: &mut [i16],
) -> bool {
    pool_loop(
        g,
        input,
        output,
        0i32,
        |a, v| a.wrapping_add(i32::from(v)),
        |a, n| integer_average(a, n, act_min, act_max) as i16,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(pad: usize) -> PoolGeometry {
        PoolGeometry {
            batches: 1,
            in_h: 2,
            in_w: 2,
            channels: 1,
            out_h: 2,
            out_w: 2,
            filter_h: 2,
            filter_w: 2,
            stride_h: 1,
            stride_w: 1,
            pad_h: pad,
            pad_w: pad,
        }
    }

    #[test]
    fn padding_is_not_counted() {
        // SAME 2x2 on 2x2: total padding 1, pad 0 before; last windows clipped.
        let mut out = [0i8; 4];
        assert!(average_pool_i8(&g(0), &[1, 2, 3, 6], -128, 127, &mut out));
        // (12/4 = 3), (8/2 = 4), (9/2 = 4.5 -> 5), 6
        assert_eq!(out, [3, 4, 5, 6]);
        let mut out = [0i8; 4];
        assert!(average_pool_i8(
            &g(0),
            &[-1, -2, -3, -6],
            -128,
            127,
            &mut out
        ));
        assert_eq!(out, [-3, -4, -5, -6]);
        let mut f = [0.0f32; 4];
        assert!(average_pool_f32(
            &g(0),
            &[1.0, 2.0, 3.0, 6.0],
            0.0,
            4.0,
            &mut f
        ));
        assert_eq!(f, [3.0, 4.0, 4.0, 4.0]);
    }

    #[test]
    fn empty_window_is_reported() {
        let mut geo = g(0);
        geo.pad_h = 5;
        let mut out = [0i16; 4];
        assert!(!average_pool_i16(
            &geo,
            &[1, 2, 3, 4],
            -32768,
            32767,
            &mut out
        ));
    }
}
