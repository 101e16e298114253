//! Tests of the real FFT: factorisation, float and fixed-point (int16, int32) transforms
//! against a direct DFT, KissFFT twiddle rounding, options and errors.

use super::*;

fn dft(x: &[f64]) -> Vec<(f64, f64)> {
    let n = x.len();
    (0..=n / 2)
        .map(|k| {
            let mut re = 0.0;
            let mut im = 0.0;
            for (j, &v) in x.iter().enumerate() {
                let ph = -2.0 * core::f64::consts::PI * (k * j) as f64 / n as f64;
                re += v * ph.cos();
                im += v * ph.sin();
            }
            (re, im)
        })
        .collect()
}

fn signal(n: usize, seed: u64) -> Vec<i16> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) as i32 % 20000) as i16
        })
        .collect()
}

#[test]
fn factorization_matches_kf_factor() {
    let f = |n| KissPlan::new(n).unwrap().factors().collect::<Vec<_>>();
    assert_eq!(f(256), vec![(4, 64), (4, 16), (4, 4), (4, 1)]);
    assert_eq!(f(128), vec![(4, 32), (4, 8), (4, 2), (2, 1)]);
    assert_eq!(f(240), vec![(4, 60), (4, 15), (3, 5), (5, 1)]);
    assert_eq!(f(7), vec![(7, 1)]);
    assert_eq!(f(1), vec![(1, 1)]);
    assert_eq!(f(2 * 49), vec![(2, 49), (7, 7), (7, 1)]);
    assert_eq!(KissPlan::new(14).unwrap().max_generic_radix, 7);
}

#[test]
fn float_rfft_matches_dft() {
    for n in [2usize, 4, 8, 12, 16, 30, 40, 64, 98, 160, 512] {
        let x: Vec<f32> = signal(n, n as u64)
            .iter()
            .map(|&v| f32::from(v) / 1000.0)
            .collect();
        let mut fft = Rfft::<f32>::new(n).unwrap();
        let mut out = vec![0f32; n + 2];
        fft.apply(&x, n, &mut out).unwrap();
        let want = dft(&x.iter().map(|&v| f64::from(v)).collect::<Vec<_>>());
        for (k, &(re, im)) in want.iter().enumerate() {
            let tol = 1e-4 * n as f64 * 20.0;
            assert!((f64::from(out[2 * k]) - re).abs() < tol, "n={n} k={k} re");
            assert!(
                (f64::from(out[2 * k + 1]) - im).abs() < tol,
                "n={n} k={k} im"
            );
        }
    }
}

#[test]
fn int16_rfft_is_the_scaled_dft() {
    // Fixed point: each stage divides by its radix and the split by 2, so the output is
    // DFT / fft_length, within a few LSB of rounding per stage.
    for n in [8usize, 16, 64, 96, 120, 256, 512] {
        let x = signal(n, 7 + n as u64);
        let mut fft = Rfft::<i16>::new(n).unwrap();
        let mut out = vec![0i16; n + 2];
        fft.apply(&x, n, &mut out).unwrap();
        let want = dft(&x.iter().map(|&v| f64::from(v)).collect::<Vec<_>>());
        let stages = fft.plan().sub.factors().count() as f64 + 1.0;
        for (k, &(re, im)) in want.iter().enumerate() {
            let tol = 1.0 + 1.5 * stages;
            let (gr, gi) = (f64::from(out[2 * k]), f64::from(out[2 * k + 1]));
            assert!(
                (gr - re / n as f64).abs() <= tol,
                "n={n} k={k}: {gr} vs {}",
                re / n as f64
            );
            assert!(
                (gi - im / n as f64).abs() <= tol,
                "n={n} k={k}: {gi} vs {}",
                im / n as f64
            );
        }
        // DC and Nyquist bins are real.
        assert_eq!(out[1], 0);
        assert_eq!(out[n + 1], 0);
    }
}

#[test]
fn int16_fixed_point_properties() {
    let n = 512;
    let mut fft = Rfft::<i16>::new(n).unwrap();
    let mut out = vec![0i16; n + 2];
    // Zero in, zero out.
    fft.apply(&vec![0i16; n], n, &mut out).unwrap();
    assert!(out.iter().all(|&v| v == 0));
    // A constant: all energy in DC, which is the mean (scaled by 1/n * n).
    fft.apply(&vec![16384i16; n], n, &mut out).unwrap();
    // Each radix-4 stage scales by 8191/8192 instead of 1/4 exactly, the split by
    // 16383/16384: about 0.06% low after five stages.
    assert!((i32::from(out[0]) - 16384).abs() <= 16, "{}", out[0]);
    assert!(out[2..].iter().all(|&v| v.abs() <= 4), "leakage");
    // Full-scale input never overflows into garbage: magnitudes stay below 2^15.
    let x: Vec<i16> = (0..n)
        .map(|j| if j % 2 == 0 { 32767 } else { -32768 })
        .collect();
    fft.apply(&x, n, &mut out).unwrap();
    assert!(
        (i32::from(out[n]) - 32767).abs() <= 32,
        "nyquist {}",
        out[n]
    );
    // Shorter frames are zero-padded: a frame of 480 is the 512 transform of the padded one.
    let x = signal(480, 3);
    let mut padded = x.clone();
    padded.resize(512, 0);
    let mut a = vec![0i16; n + 2];
    fft.apply(&x, 480, &mut out).unwrap();
    fft.apply(&padded, 512, &mut a).unwrap();
    assert_eq!(out, a);
}

#[test]
fn int16_twiddles_round_like_kissfft() {
    let mut flat = vec![0i16; 16];
    fill_twiddles(8, &mut flat);
    let tw: Vec<Cpx<i16>> = (0..8).map(|k| ld(&flat, k)).collect();
    assert_eq!(tw[0], Cpx { r: 32767, i: 0 });
    assert_eq!(tw[2], Cpx { r: 0, i: -32767 });
    assert_eq!(
        tw[1],
        Cpx {
            r: 23170,
            i: -23170
        }
    ); // 32767 / sqrt 2 = 23169.77
    assert_eq!(tw[4], Cpx { r: -32767, i: 0 });
}

#[test]
fn int32_rfft_is_the_scaled_dft() {
    let n = 64;
    let x: Vec<i32> = signal(n, 11).iter().map(|&v| i32::from(v) << 16).collect();
    let mut fft = Rfft::<i32>::new(n).unwrap();
    let mut out = vec![0i32; n + 2];
    fft.apply(&x, n, &mut out).unwrap();
    let want = dft(&x.iter().map(|&v| f64::from(v)).collect::<Vec<_>>());
    for (k, &(re, _)) in want.iter().enumerate() {
        assert!(
            (f64::from(out[2 * k]) - re / n as f64).abs() < 16.0,
            "k={k}"
        );
    }
}

#[test]
fn options_and_errors() {
    let bytes = [
        84, 0, 102, 102, 116, 95, 108, 101, 110, 103, 116, 104, 0, 2, 14, 13, 2, 0, 1, 0, 2, 0, 7,
        0, 0, 2, 5, 5, 6, 37, 1,
    ];
    let o = RfftOptions::parse(&bytes).unwrap();
    assert_eq!(o.dtype, RfftType::Int16);
    assert_eq!(o.fft_length, 512);
    let mut bad = bytes;
    bad[22] = 9; // T = 9
    let e = RfftOptions::parse(&bad).unwrap_err();
    assert!(e.contains("`T`") && e.contains('9'), "{e}");
    let mut bad = bytes;
    bad[24] = 1; // fft_length = 513
    assert!(RfftOptions::parse(&bad).unwrap_err().contains("513"));
    assert!(RfftPlan::new(7).is_err());
    let mut fft = Rfft::<i16>::new(16).unwrap();
    assert!(fft.apply(&[0; 17], 17, &mut [0; 20]).is_err());
    assert!(fft.apply(&[0; 16], 16, &mut [0; 17]).is_err());
}
