use super::*;
use crate::alloc::AlignedCpuAllocator;
use crate::planner::{BestPlanner, Planner};
use crate::sync::Arc;

fn cpu() -> AllocatorRef {
    Arc::new(AlignedCpuAllocator::new())
}

#[test]
fn head_temp_tail_never_cross() {
    let mut a = Arena::new_in(cpu(), 1024, 16).unwrap();
    a.commit_head(500).unwrap();
    assert_eq!(a.head_bytes(), 512);
    let p = a.allocate_persistent(100, 16, Category::OpData).unwrap();
    assert_eq!(a.offset_of(p).unwrap() % 16, 0);
    assert!(a.tail_bytes() >= 100 && a.tail_bytes() < 116 + 16);
    let t = a.allocate_temp(200, 16).unwrap();
    assert_eq!(a.offset_of(t), Some(512));
    let free = a.free_bytes();
    let err = a.allocate_temp(free + 1, 1).unwrap_err();
    match err {
        ArenaError::OutOfSpace {
            region,
            requested,
            free: f,
            needed,
            size,
            ..
        } => {
            assert_eq!(region, Region::Temp);
            assert_eq!(requested, free + 1);
            assert_eq!(f, free);
            assert_eq!(size, 1024);
            assert_eq!(needed, 1025);
        }
        e => panic!("unexpected {e}"),
    }
    let err = a
        .allocate_persistent(free + 1, 1, Category::OpData)
        .unwrap_err();
    assert!(
        matches!(
            err,
            ArenaError::OutOfSpace {
                region: Region::Tail,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("would need"));
    // Head cannot change while temp is live, and cannot grow into the tail.
    assert!(matches!(
        a.commit_head(10),
        Err(ArenaError::TempLive { .. })
    ));
    a.reset_temp();
    assert_eq!(a.temp_bytes(), 0);
    let err = a.commit_head(1024).unwrap_err();
    assert!(
        matches!(
            err,
            ArenaError::OutOfSpace {
                region: Region::Head,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn fixed_buffer_reports_exact_need_and_recording_counts() {
    let bufs = vec![
        BufferRequirement::new(100, 0, 1).with_alignment(16),
        BufferRequirement::new(200, 1, 2).with_alignment(16),
        BufferRequirement::new(50, 2, 3).with_alignment(16),
    ];
    let plan = BestPlanner::default().plan(&bufs).unwrap();
    assert_eq!(plan.arena_size, 112 + 208);
    let mut storage = vec![0u8; 256 + 64];
    // A `Vec<u8>` is only 1-byte aligned (Miri places it anywhere): the bytes skipped to
    // reach 16-byte alignment depend on the address.
    let lost = storage.as_ptr().align_offset(16);
    let a = Arena::from_slice(&mut storage, 16)
        .unwrap()
        .with_recording();
    let size = a.size();
    let err = a.ensure_capacity(plan.arena_size, 0, 64).unwrap_err();
    assert_eq!(
        err,
        ArenaError::TooSmall {
            size,
            needed: 320 + 64,
            skipped: lost,
        }
    );
    let mut big = vec![0u8; 1024];
    let mut a = Arena::from_slice(&mut big, 16).unwrap().with_recording();
    a.commit_plan(&plan, &bufs, |_| Category::TensorData)
        .unwrap();
    let p = a.tensor_ptr(&plan, &bufs, 1).unwrap();
    // SAFETY: the pointer covers 200 bytes of the committed head.
    unsafe { core::ptr::write_bytes(p.as_ptr(), 7, 200) };
    a.allocate_persistent(24, 8, Category::TensorMetadata)
        .unwrap();
    a.allocate_persistent(40, 16, Category::OpData).unwrap();
    a.allocate_temp(64, 16).unwrap();
    a.allocate_temp(10, 16).unwrap();
    a.reset_temp();
    let rec = *a.recording().unwrap();
    assert_eq!(rec.tensor_data.requested_bytes, 350);
    assert_eq!(rec.tensor_data.used_bytes, 320);
    assert_eq!(rec.tensor_data.count, 3);
    assert_eq!(rec.tensor_metadata.requested_bytes, 24);
    assert_eq!(rec.op_data.count, 1);
    assert_eq!(rec.temp_peak_bytes, 64 + 16 - 6);
    assert_eq!(rec.temp_count, 2);
    assert!(rec.to_text().contains("tensor data"));
    assert_eq!(rec.to_json()["op_data"]["requested_bytes"], 40);
    // Committing a plan again records the plan in force, not the sum of all commits.
    a.commit_plan(&plan, &bufs, |_| Category::TensorData)
        .unwrap();
    assert_eq!(*a.recording().unwrap(), rec);
    let one = vec![BufferRequirement::new(64, 0, 0).with_alignment(16)];
    let small = BestPlanner::default().plan(&one).unwrap();
    a.commit_plan(&small, &one, |_| Category::Scratch).unwrap();
    let again = *a.recording().unwrap();
    assert_eq!(again.tensor_data, CategoryUsage::default());
    assert_eq!(
        (
            again.scratch.requested_bytes,
            again.scratch.used_bytes,
            again.scratch.count
        ),
        (64, 64, 1)
    );
    assert_eq!(again.op_data, rec.op_data, "tail categories are untouched");
}

#[test]
fn an_unaligned_user_buffer_reports_the_bytes_it_loses_to_alignment() {
    // 256 bytes, 16-aligned.
    let mut storage = [0u128; 16];
    // SAFETY: reinterpreting the u128 array as its 256 bytes (u8 has no invalid values).
    let bytes = unsafe { core::slice::from_raw_parts_mut(storage.as_mut_ptr().cast::<u8>(), 256) };
    let a = Arena::from_slice(&mut bytes[1..], 16).unwrap();
    assert_eq!(a.size(), 255 - 15);
    let e = a.ensure_capacity(240, 0, 16).unwrap_err();
    assert_eq!(
        e,
        ArenaError::TooSmall {
            size: 240,
            needed: 256,
            skipped: 15
        }
    );
    let text = e.to_string();
    assert!(
        text.contains("15 bytes at its start were skipped"),
        "{text}"
    );
    assert!(text.contains("give 271 bytes at this address"), "{text}");
}

#[test]
fn sized_for_plan_is_exact() {
    let bufs = vec![
        BufferRequirement::new(1000, 0, 0),
        BufferRequirement::new(24, 0, 1),
    ];
    let plan = BestPlanner::default().plan(&bufs).unwrap();
    let mut a = Arena::sized_for(cpu(), &plan, &bufs, 32, 48, 16).unwrap();
    assert_eq!(a.size(), 1024 + 32 + 48);
    a.allocate_persistent(48, 16, Category::OpData).unwrap();
    a.allocate_temp(32, 16).unwrap();
    assert_eq!(a.free_bytes(), 0);
    assert!(a.allocate_temp(1, 1).is_err());
    assert_eq!(a.used_bytes(), a.size());
}

#[test]
fn persistent_alignment_above_arena_alignment() {
    let mut a = Arena::new_in(cpu(), 256, 16).unwrap();
    a.commit_head(100).unwrap();
    let p = a.allocate_persistent(10, 64, Category::OpData).unwrap();
    assert_eq!(p.as_ptr() as usize % 64, 0);
    assert!(a.tail_bytes() >= 10 && a.tail_bytes() < 10 + 64);
    // Whatever is left, a request one byte larger than the free space fails without panicking.
    let free = a.free_bytes();
    assert!(a
        .allocate_persistent(free + 1, 64, Category::OpData)
        .is_err());
    assert!(a.head_bytes() + a.temp_bytes() + a.free_bytes() + a.tail_bytes() == a.size());
}

#[test]
fn sized_from_recording_fits_the_same_run_exactly() {
    let bufs = vec![
        BufferRequirement::new(300, 0, 1),
        BufferRequirement::new(200, 1, 2),
    ];
    let plan = BestPlanner::default().plan(&bufs).unwrap();
    let run = |a: &mut Arena<'_>| -> Result<(), ArenaError> {
        a.allocate_persistent(40, 16, Category::TensorMetadata)?;
        a.allocate_persistent(100, 8, Category::OpData)?;
        a.allocate_temp(64, 16)?;
        a.allocate_temp(30, 16)?;
        a.reset_temp();
        a.allocate_temp(120, 16)?;
        a.reset_temp();
        Ok(())
    };
    let mut big = Arena::new_in(cpu(), 4096, 16).unwrap().with_recording();
    big.commit_plan(&plan, &bufs, |_| Category::TensorData)
        .unwrap();
    run(&mut big).unwrap();
    let rec = *big.recording().unwrap();
    assert_eq!(rec.temp_peak_bytes, 120);
    // 40 bytes at 16 take 48; 100 bytes at 8 below them take 104.
    assert_eq!(rec.tail_used_bytes, 48 + 104);
    let mut exact = Arena::sized_from_recording(cpu(), &plan, &bufs, &rec, 16).unwrap();
    assert_eq!(exact.size(), 512 + 128 + 160);
    run(&mut exact).unwrap();
    assert_eq!(
        exact.recording().unwrap().tail_used_bytes,
        rec.tail_used_bytes
    );
    // What is left is the recorded temp peak plus the tail's rounding to 16 (160 - 152).
    assert_eq!(exact.free_bytes(), 128 + 8);
    exact.allocate_temp(128, 16).unwrap();
    let err = exact
        .allocate_persistent(9, 1, Category::OpData)
        .unwrap_err();
    assert!(
        matches!(
            err,
            ArenaError::OutOfSpace {
                region: Region::Tail,
                requested: 9,
                free: 8,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn bad_inputs_are_errors() {
    assert!(matches!(
        Arena::new_in(cpu(), 64, 3),
        Err(ArenaError::BadAlignment(3))
    ));
    let mut a = Arena::new_in(cpu(), 64, 16).unwrap();
    assert!(a.allocate_temp(1, 6).is_err());
    assert!(a
        .allocate_persistent(usize::MAX, 1, Category::Scratch)
        .is_err());
    assert!(a.allocate_temp(usize::MAX, 1).is_err());
    assert!(a.head_ptr(0, 1).is_err());
    let mut empty: [u8; 0] = [];
    let e = Arena::from_slice(&mut empty, 16).unwrap();
    assert_eq!(e.size(), 0);
}
