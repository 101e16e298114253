//! Randomised stress test of the BFC allocator: two threads mix alloc / free / grow / shrink of
//! 1 B..64 MiB with random power-of-two alignments, write a per-block byte pattern into every block
//! and check it before the block is freed or resized (overlapping blocks would corrupt each other's
//! pattern), and run the invariant checker after every step. At the end every region must be one
//! free chunk and `bytes_in_use == 0`.
//!
//! Default: 1,500 steps per thread (a few seconds in debug). `TENSOR_ALLOC_STRESS=1` runs
//! 1,000,000 steps per thread (use `--release`); any other number N > 1 runs N steps per thread.
#![cfg(not(loom))]

use allocator_api2::alloc::{Allocator, Layout};
use std::ptr::NonNull;
use std::sync::Arc;
use tensor_alloc::alloc::{BfcAllocator, BfcGrowth, BfcOptions, TensorAllocator};
use tensor_alloc::test_support::Rng;

const MIB: usize = 1 << 20;

fn steps() -> usize {
    match std::env::var("TENSOR_ALLOC_STRESS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        Some(1) => 1_000_000,
        Some(n) if n > 1 => n,
        _ => 1_500,
    }
}

struct Block {
    ptr: NonNull<u8>,
    layout: Layout,
    pat: u8,
}

const PIECE: usize = 4096;

fn fill(p: NonNull<u8>, from: usize, to: usize, pat: u8) {
    // SAFETY: callers pass a live block of at least `to` bytes.
    unsafe { std::ptr::write_bytes(p.as_ptr().add(from), pat, to - from) };
}

fn check(b: &Block, len: usize, what: &str) {
    let want = [b.pat; PIECE];
    let mut off = 0;
    while off < len {
        let n = PIECE.min(len - off);
        // SAFETY: the block is live for `len` bytes.
        let got = unsafe { std::slice::from_raw_parts(b.ptr.as_ptr().add(off), n) };
        assert!(
            got == &want[..n],
            "{what}: pattern {:#x} of a {}-byte block damaged near offset {off}",
            b.pat,
            b.layout.size()
        );
        off += n;
    }
}

fn random_layout(rng: &mut Rng) -> Layout {
    let size = rng.log_range(1, 64 * MIB as u64) as usize;
    let align = if rng.chance(0.05) {
        1usize << rng.range(13, 16)
    } else {
        1usize << rng.below(13)
    };
    Layout::from_size_align(size, align).unwrap()
}

fn worker(a: Arc<BfcAllocator>, seed: u64, steps: usize) -> (usize, usize) {
    let mut rng = Rng::new(seed);
    let mut live: Vec<Block> = vec![];
    let mut ooms = 0;
    let mut ops = 0;
    let mut next_pat = (seed as u8) | 1;
    for _ in 0..steps {
        ops += 1;
        let r = rng.below(10);
        if live.is_empty() || (r < 4 && live.len() < 8) {
            let layout = random_layout(&mut rng);
            match a.allocate(layout) {
                Ok(p) => {
                    let ptr = p.cast::<u8>();
                    assert_eq!(ptr.as_ptr() as usize % layout.align(), 0);
                    next_pat = next_pat.wrapping_add(2);
                    fill(ptr, 0, layout.size(), next_pat);
                    live.push(Block {
                        ptr,
                        layout,
                        pat: next_pat,
                    });
                }
                Err(_) => ooms += 1,
            }
        } else if r < 8 {
            let i = rng.below(live.len() as u64) as usize;
            let b = live.swap_remove(i);
            check(&b, b.layout.size(), "before free");
            // SAFETY: allocated from `a` with `b.layout`, freed once.
            unsafe { a.deallocate(b.ptr, b.layout) };
        } else {
            let i = rng.below(live.len() as u64) as usize;
            let b = &mut live[i];
            check(b, b.layout.size(), "before resize");
            let new_size = if rng.chance(0.5) {
                (b.layout.size() * 2).clamp(1, 64 * MIB)
            } else {
                (b.layout.size() / 3).max(1)
            };
            let nl = Layout::from_size_align(new_size, b.layout.align()).unwrap();
            // SAFETY: `b` is live with `b.layout`; grow/shrink get a size on the right side.
            let r = unsafe {
                if new_size >= b.layout.size() {
                    a.grow(b.ptr, b.layout, nl)
                } else {
                    a.shrink(b.ptr, b.layout, nl)
                }
            };
            match r {
                Ok(p) => {
                    let kept = b.layout.size().min(new_size);
                    b.ptr = p.cast();
                    b.layout = nl;
                    check(b, kept, "after resize");
                    fill(b.ptr, kept, new_size, b.pat);
                }
                Err(_) => ooms += 1, // the old block stays valid
            }
        }
        if let Err(e) = a.check_invariants() {
            panic!("invariant broken after op {ops}: {e}");
        }
    }
    for b in live {
        check(&b, b.layout.size(), "final free");
        // SAFETY: allocated from `a` with `b.layout`, freed once.
        unsafe { a.deallocate(b.ptr, b.layout) };
    }
    (ops, ooms)
}

fn run(opts: BfcOptions, seed: u64) {
    let a = Arc::new(BfcAllocator::new(opts));
    let n = steps();
    let hs: Vec<_> = (0..2)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || worker(a, seed * 31 + t, n))
        })
        .collect();
    let mut ooms = 0;
    for h in hs {
        ooms += h.join().expect("worker panicked").1;
    }
    a.check_invariants().unwrap();
    let s = a.stats();
    assert_eq!(s.bytes_in_use, 0);
    assert_eq!(s.num_allocs, s.num_frees);
    let d = a.memory_dump();
    for r in &d.regions {
        assert_eq!(
            r.chunks.len(),
            1,
            "region at {:#x} did not coalesce",
            r.base
        );
        assert!(!r.chunks[0].in_use);
    }
    eprintln!(
        "{} steps × 2 threads: {} allocs, {} OOMs (limit {:?}), {} regions, peak reserved {} MiB",
        n,
        s.num_allocs,
        ooms,
        s.bytes_limit,
        d.regions.len(),
        s.peak_bytes_reserved >> 20
    );
    assert!(s.peak_bytes_reserved <= s.bytes_limit.unwrap_or(u64::MAX));
    let trimmed = a.trim();
    assert_eq!(trimmed as u64, s.bytes_reserved);
    assert_eq!(a.stats().num_regions, Some(0));
}

#[test]
fn two_threads_doubling_growth_with_limit() {
    run(
        BfcOptions {
            memory_limit: Some(384 * MIB as u64),
            ..BfcOptions::default()
        },
        1,
    );
}

#[test]
fn two_threads_exact_growth_with_limit() {
    run(
        BfcOptions {
            memory_limit: Some(384 * MIB as u64),
            growth: BfcGrowth::Exact,
            ..BfcOptions::default()
        },
        2,
    );
}
