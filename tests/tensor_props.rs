//! Property tests for shape math and views: element counts, strides and byte sizes agree with
//! exact (u128) arithmetic, overflow is reported exactly when it happens, and a view never reaches
//! outside its root.
//!
//! Case count: proptest's default (256 per property); set `PROPTEST_CASES` to run more.
#![cfg(not(loom))]

use proptest::prelude::*;
use tensor_alloc::alloc::{AlignedCpuAllocator, AllocatorRef};
use tensor_alloc::tensor::{allocator_ref, DType, Shape, Tensor, TensorBuffer, MAX_DIMS};

fn cpu() -> AllocatorRef {
    allocator_ref(AlignedCpuAllocator::new())
}

/// A dtype with a fixed element size (the ones a dense tensor can have).
fn dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(
        DType::ALL
            .into_iter()
            .filter(|d| d.size().is_some())
            .collect::<Vec<_>>(),
    )
}

/// Bytes of one element of a dtype drawn by [`dtype`].
fn size(d: DType) -> u128 {
    d.size().unwrap() as u128
}

proptest! {
    #[test]
    fn shape_math_matches_exact_arithmetic(dims in prop::collection::vec(0usize..40, 0..=MAX_DIMS), d in dtype()) {
        let s = Shape::new(&dims).unwrap();
        let exact: u128 = dims.iter().map(|&x| x as u128).product();
        prop_assert_eq!(s.num_elements() as u128, exact);
        prop_assert_eq!(s.byte_size(d).unwrap() as u128, exact * size(d));
        let strides = s.strides();
        prop_assert_eq!(strides.len(), dims.len());
        for i in 0..dims.len() {
            let expect: u128 = dims[i + 1..].iter().map(|&x| x.max(1) as u128).product();
            prop_assert_eq!(strides[i] as u128, expect);
        }
        // offset_of enumerates every element exactly once, in row-major order.
        if exact > 0 && exact <= 4096 {
            let mut idx = vec![0usize; dims.len()];
            for linear in 0..exact as usize {
                prop_assert_eq!(s.offset_of(&idx), Some(linear));
                for k in (0..dims.len()).rev() {
                    idx[k] += 1;
                    if idx[k] < dims[k] { break; }
                    idx[k] = 0;
                }
            }
        }
    }

    #[test]
    fn overflow_is_an_error_exactly_when_it_happens(
        dims in prop::collection::vec(prop_oneof![0usize..4, 1usize..=usize::MAX, Just(usize::MAX)], 0..=MAX_DIMS),
        d in dtype(),
    ) {
        // Every partial product of max(dim, 1) must fit in usize (strides), and the element
        // count times the element size must fit in isize::MAX bytes.
        let mut acc: Option<u128> = Some(1);
        for &x in &dims {
            acc = acc.and_then(|a| a.checked_mul(x.max(1) as u128)).filter(|&a| a <= usize::MAX as u128);
        }
        match Shape::new(&dims) {
            Ok(s) => {
                prop_assert!(acc.is_some());
                let exact: u128 = dims.iter().map(|&x| x as u128).product();
                let bytes = exact * size(d);
                match s.byte_size(d) {
                    Ok(b) => prop_assert_eq!(b as u128, bytes),
                    Err(_) => prop_assert!(bytes > isize::MAX as u128),
                }
            }
            Err(_) => prop_assert!(acc.is_none()),
        }
    }

    #[test]
    fn views_never_reach_outside_their_root(
        root_len in 0usize..512,
        ops in prop::collection::vec((0usize..600, 0usize..600), 1..6),
    ) {
        let a = cpu();
        let bytes: Vec<u8> = (0..root_len).map(|i| (i * 7 + 3) as u8).collect();
        let root = TensorBuffer::copy_from_slice_in(&a, &bytes, 64).unwrap();
        let mut view = root.clone();
        for (off, len) in ops {
            match view.sub_buffer(off, len) {
                Ok(v) => {
                    prop_assert!(off + len <= view.len());
                    prop_assert!(v.offset() + v.len() <= v.root_len());
                    prop_assert_eq!(v.root_len(), root_len);
                    prop_assert!(v.same_root(&root));
                    prop_assert_eq!(v.as_bytes(), &bytes[v.offset()..v.offset() + v.len()]);
                    view = v;
                }
                Err(_) => prop_assert!(off.checked_add(len).is_none_or(|e| e > view.len())),
            }
        }
    }

    #[test]
    fn tensor_slices_stay_inside_and_match_rows(
        dims in prop::collection::vec(1usize..6, 1..=4),
        start in 0usize..8,
        end in 0usize..8,
        d in dtype(),
    ) {
        let a = cpu();
        let shape = Shape::new(&dims).unwrap();
        let n = shape.byte_size(d).unwrap();
        let raw: Vec<u8> = (0..n).map(|i| if d == DType::Bool { (i % 2) as u8 } else { (i * 31) as u8 }).collect();
        let t = Tensor::from_bytes_in(&a, d, shape, &raw).unwrap();
        match t.slice(start, end) {
            Ok(s) => {
                prop_assert!(start <= end && end <= dims[0]);
                let row = n / dims[0];
                let b = s.buffer();
                prop_assert!(b.offset() + b.len() <= b.root_len());
                prop_assert_eq!(b.len(), (end - start) * row);
                prop_assert_eq!(s.as_bytes(), &raw[start * row..end * row]);
                prop_assert_eq!(s.dims()[0], end - start);
                prop_assert_eq!(&s.dims()[1..], &dims[1..]);
                // Reshape of a slice keeps the same bytes.
                let flat = s.reshape([s.num_elements()]).unwrap();
                prop_assert_eq!(flat.as_bytes(), s.as_bytes());
            }
            Err(_) => prop_assert!(start > end || end > dims[0]),
        }
    }
}
