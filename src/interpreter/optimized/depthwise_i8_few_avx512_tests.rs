//! Tests of the few-channel AVX-512 int8 depthwise rows (`depthwise_i8_few_avx512`): every
//! path against the reference, and which layers the rows take.

use super::*;
use crate::interpreter::optimized::depthwise_i8_avx512::tests::{check, geometry};
use crate::interpreter::optimized::Isa;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Depth multiplier 1 with 1 to 16 channels (odd counts, counts that do not divide 16,
    /// one and two pixels per vector) on every path: maps from 1 × 1 up, widths that are not
    /// a multiple of a vector's pixels, strides 1 to 3 (phased pair rows), dilation, SAME
    /// and VALID padding, windows of 1 to 25 taps, odd widths (a partner weight of 0), input
    /// zero points at the ends, per-tensor and per-channel scales, whole layers and bands.
    #[test]
    fn few_channels_match_reference(
        c in 1usize..=16,
        (fh, fw) in prop_oneof![
            Just((3usize, 3usize)),
            Just((5, 5)),
            Just((1, 1)),
            Just((3, 2)),
            Just((2, 7)),
            Just((7, 1)),
        ],
        (h, w) in (1usize..12, 1usize..30),
        batches in 1usize..3,
        stride in 1usize..4,
        dilation in 1usize..3,
        same in any::<bool>(),
        zero_point in prop_oneof![Just(-128i32), Just(127), -128i32..=127],
        seed in any::<u64>(),
    ) {
        let Some(g) = geometry(batches, (h, w), c, 1, (fh, fw), stride, dilation, same) else {
            return Ok(());
        };
        check(&g, zero_point, seed)?;
    }
}

/// The layers the rows take: 1 to 16 channels at depth multiplier 1 (person_detect's 48 × 48
/// layers of 8 and 16 channels among them), not 17 channels, a multiplier of 8, or a window
/// whose pair rows do not fit the buffer.
#[test]
fn takes_few_channel_layers() {
    let m = [1 << 30];
    let s = [-3i8];
    let rq = Requant { bias: None, multipliers: &m, shifts: &s, output_offset: 0, act_min: -128, act_max: 127 };
    let g = |w: usize, c: usize, dm: usize, stride: usize| geometry(1, (48, w), c, dm, (3, 3), stride, 1, true).unwrap();
    for c in 1..=16 {
        assert!(applies(&g(48, c, 1, 1), &rq), "{c} channels");
        assert!(applies(&g(48, c, 1, 2), &rq), "{c} channels, stride 2");
    }
    assert!(!applies(&g(48, 17, 1, 1), &rq));
    assert!(!applies(&g(48, 1, 8, 1), &rq));
    assert!(!applies(&g(4000, 16, 1, 1), &rq));
    // The every-path check above runs this module's rows only where the CPU has AVX-512.
    let _ = Isa::available();
}
