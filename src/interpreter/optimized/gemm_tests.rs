//! Tests of `gemm`: the float products against a double-precision reference on every ISA path.

use super::*;
use crate::interpreter::optimized::pack::pack_b;
use crate::interpreter::optimized::tests::values;

/// `C` of the product summed in double precision, bias added and clamped.
pub(in super::super) fn naive(
    m: usize,
    n: usize,
    k: usize,
    a: Strided<'_>,
    b: Strided<'_>,
    ep: &Epilogue<'_>,
) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0.0f64;
            for p in 0..k {
                s += f64::from(a.data[i * a.rs + p * a.cs])
                    * f64::from(b.data[j * b.rs + p * b.cs]);
            }
            let v = s as f32 + ep.bias.map_or(0.0, |b| b[j]);
            c[i * n + j] = v.max(ep.min).min(ep.max);
        }
    }
    c
}

fn close(ours: &[f32], want: &[f32], k: usize) {
    for (i, (x, y)) in ours.iter().zip(want).enumerate() {
        let tol = 1e-5 * (k as f32).max(1.0);
        assert!((x - y).abs() <= tol, "element {i}: {x} vs {y}");
    }
}

#[test]
fn packed_matches_naive_on_edge_shapes() {
    // Shapes straddle MR, NR and KC; transposed and plain layouts of both operands.
    for &(m, n, k) in &[
        (1, 1, 1),
        (5, 17, 3),
        (6, 16, 256),
        (13, 33, 257),
        (7, 40, 600),
        (2, 3, 0),
    ] {
        let av = values(m * k, 1);
        let bv = values(n * k, 2);
        let bias = values(n, 3);
        for (a_t, b_t) in [(false, false), (true, false), (false, true), (true, true)] {
            let a = if a_t {
                Strided {
                    data: &av,
                    rs: 1,
                    cs: m,
                }
            } else {
                Strided {
                    data: &av,
                    rs: k,
                    cs: 1,
                }
            };
            let b = if b_t {
                Strided {
                    data: &bv,
                    rs: 1,
                    cs: n,
                }
            } else {
                Strided {
                    data: &bv,
                    rs: k,
                    cs: 1,
                }
            };
            let ep = Epilogue {
                bias: Some(&bias),
                min: -3.0,
                max: 3.0,
            };
            let want = naive(m, n, k, a, b, &ep);
            let mut packed = vec![f32::NAN; packed_b_len(n, k)];
            pack_b(n, k, b, &mut packed);
            for &isa in Isa::available() {
                // C with a wider row stride: the gap must stay untouched.
                let ldc = n + 3;
                let mut c = vec![7.0f32; m * ldc];
                gemm_packed(isa, m, n, k, a, &packed, &ep, &mut c, ldc);
                let got: Vec<f32> = (0..m)
                    .flat_map(|i| c[i * ldc..i * ldc + n].to_vec())
                    .collect();
                close(&got, &want, k);
                for i in 0..m {
                    assert!(c[i * ldc + n..(i + 1) * ldc].iter().all(|&v| v == 7.0));
                }
                if !b_t && !a_t {
                    let mut c = vec![0.0f32; m * n];
                    gemm_dot(isa, m, n, k, &av, &bv, &ep, &mut c, n);
                    close(&c, &want, k);
                }
            }
        }
    }
}

#[test]
fn float16_weights_match_their_float32_values() {
    // Weights exactly representable in float16: packing and dot products that convert
    // them give the float32 weights' results (bit for bit when packed: the same products).
    let (m, n, k) = (7, 37, 300);
    let av = values(m * k, 8);
    let w16: Vec<half::f16> = values(n * k, 9)
        .into_iter()
        .map(half::f16::from_f32)
        .collect();
    let w32: Vec<f32> = w16.iter().map(|w| w.to_f32()).collect();
    let a = Strided {
        data: &av,
        rs: k,
        cs: 1,
    };
    let b16 = Strided {
        data: &w16[..],
        rs: k,
        cs: 1,
    };
    let b32 = Strided {
        data: &w32[..],
        rs: k,
        cs: 1,
    };
    let mut p16 = vec![0.0; packed_b_len(n, k)];
    let mut p32 = vec![0.0; packed_b_len(n, k)];
    pack_b(n, k, b16, &mut p16);
    pack_b(n, k, b32, &mut p32);
    assert_eq!(p16, p32);
    let ep = Epilogue::NONE;
    for &isa in Isa::available() {
        let mut c16 = vec![0.0; m * n];
        let mut c32 = vec![0.0; m * n];
        let mut scratch = vec![0.0; group_scratch_len(n, k, false)];
        gemm_grouped(isa, m, n, k, a, b16, &ep, &mut c16, n, &mut scratch);
        gemm_packed(isa, m, n, k, a, &p32, &ep, &mut c32, n);
        assert_eq!(c16, c32);
        gemm_dot(isa, m, n, k, &av, &w16, &ep, &mut c16, n);
        close(&c16, &c32, k);
    }
}

#[test]
fn every_tile_path_matches_naive() {
    let (m, n, k) = (9, 21, 70);
    let av = values(m * k, 4);
    let bv = values(n * k, 5);
    let a = Strided {
        data: &av,
        rs: k,
        cs: 1,
    };
    let mut packed = vec![0.0; packed_b_len(n, k)];
    pack_b(
        n,
        k,
        Strided {
            data: &bv,
            rs: k,
            cs: 1,
        },
        &mut packed,
    );
    let want = naive(
        m,
        n,
        k,
        a,
        Strided {
            data: &bv,
            rs: k,
            cs: 1,
        },
        &Epilogue::NONE,
    );
    for &isa in Isa::available() {
        let mut c = vec![0.0f32; m * n];
        for i0 in (0..m).step_by(MR) {
            let rows = MR.min(m - i0);
            for q in 0..n.div_ceil(NR) {
                let t = Tile {
                    kc: k,
                    a: av[i0 * k..].as_ptr(),
                    a_rs: k,
                    a_cs: 1,
                    b: packed[q * k * NR..].as_ptr(),
                    b_next: k * NR,
                    c: c[i0 * n + q * NR..].as_mut_ptr(),
                    ldc: n,
                    cols: NR.min(n - q * NR),
                    first: true,
                    last: true,
                    bias: None,
                    min: f32::NEG_INFINITY,
                    max: f32::INFINITY,
                    pf: core::ptr::null(),
                    pf_lines: 0,
                };
                // SAFETY: the tile covers rows i0..i0 + rows, panel q, inside every buffer.
                unsafe { run_tile(isa, rows, &t) };
            }
        }
        close(&c, &want, k);
    }
}
