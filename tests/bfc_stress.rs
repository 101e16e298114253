//! Randomised stress test of the BFC allocator: two threads mix alloc / free / grow / shrink of
//! 1 B..64 MiB with random power-of-two alignments. Three checks catch a broken allocator:
//!
//! - **Overlap, exactly.** Every live block is entered in one registry of address ranges shared by
//!   both threads (entered after the allocator returns it, removed before it is given back), and a
//!   block that overlaps any registered one fails the test at once, naming both.
//! - **Contents.** Each block carries a byte pattern on its sampled bytes: the first and last
//!   4 KiB, and the first 64 bytes of every 64 KiB between (a grow or shrink that moves the block
//!   must carry them along; a copy cut short loses the old tail). They are checked before every
//!   free and around every resize. Sampling, rather than every byte, keeps the run bounded by the
//!   allocator rather than by memory bandwidth (full patterns were 80 % of the time); overlaps do
//!   not depend on it.
//! - **Invariants.** The allocator's own checker runs after each of the first [`CHECK_EVERY_STEP`]
//!   steps of a thread and after every [`CHECK_STRIDE`]th step later, and at the end every region
//!   must be one free chunk and `bytes_in_use == 0`.
//!
//! Default: 1,500 steps per thread (a few seconds). `TENSOR_ALLOC_STRESS=1` runs 1,000,000 steps
//! per thread; any other number N > 1 runs N steps per thread (CI: 500,000).
#![cfg(not(loom))]

use allocator_api2::alloc::{Allocator, Layout};
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};
use tensor_alloc::alloc::{BfcAllocator, BfcGrowth, BfcOptions, TensorAllocator};
use tensor_alloc::test_support::Rng;

const MIB: usize = 1 << 20;
/// Each thread runs the invariant checker after every one of its first this many steps.
const CHECK_EVERY_STEP: usize = 2_000;
/// ... and after every this many steps beyond them.
const CHECK_STRIDE: usize = 16;

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

/// The live blocks of both threads: start address -> (end address, size requested). Invariant:
/// an entry's range is allocated from the allocator for as long as the entry exists.
#[derive(Default)]
struct Registry(Mutex<BTreeMap<usize, (usize, usize)>>);

impl Registry {
    /// Enters a block just returned by the allocator; panics if it overlaps a live one.
    fn enter(&self, p: NonNull<u8>, len: usize, what: &str) {
        let (start, end) = (p.as_ptr() as usize, p.as_ptr() as usize + len.max(1));
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((&s, &(e, n))) = m.range(..end).next_back() {
            assert!(
                e <= start,
                "{what}: block {start:#x}..{end:#x} ({len} B) overlaps live block {s:#x}..{e:#x} ({n} B)"
            );
        }
        m.insert(start, (end, len));
    }

    /// Removes a block that is about to be freed or resized.
    fn leave(&self, p: NonNull<u8>) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        assert!(
            m.remove(&(p.as_ptr() as usize)).is_some(),
            "block not registered"
        );
    }
}

const PAGE: usize = 4096;
const LINE: usize = 64;
/// Distance between two sampled lines in the middle of a block.
const SAMPLE_EVERY: usize = 16 * PAGE;

/// The sampled byte ranges of a `len`-byte block, in order: the first and last page, and one line
/// every [`SAMPLE_EVERY`] bytes between.
fn samples(len: usize) -> impl Iterator<Item = (usize, usize)> {
    let head = (0, len.min(PAGE));
    let tail_from = len.saturating_sub(PAGE).max(head.1);
    let middle = (PAGE..tail_from)
        .step_by(PAGE)
        .map(move |o| (o, (o + LINE).min(tail_from)));
    std::iter::once(head)
        .chain(middle)
        .chain(std::iter::once((tail_from, len)))
        .filter(|(a, b)| a < b)
}

/// Writes the pattern on the sampled bytes of the first `len` bytes of a live block.
fn fill(p: NonNull<u8>, len: usize, pat: u8) {
    for (from, to) in samples(len) {
        // SAFETY: callers pass a live block of at least `len` bytes, and `to <= len`.
        unsafe { std::ptr::write_bytes(p.as_ptr().add(from), pat, to - from) };
    }
}

/// Checks the pattern on the bytes below `upto` of the samples of a block last filled by
/// [`fill`] with length `filled`.
fn check(b: &Block, filled: usize, upto: usize, what: &str) {
    let want = [b.pat; PAGE];
    for (from, to) in samples(filled) {
        let to = to.min(upto);
        if from >= to {
            break;
        }
        // SAFETY: the block is live for at least `upto` bytes.
        let got = unsafe { std::slice::from_raw_parts(b.ptr.as_ptr().add(from), to - from) };
        assert!(
            got == &want[..to - from],
            "{what}: pattern {:#x} of a {}-byte block damaged in bytes {from}..{to}",
            b.pat,
            b.layout.size()
        );
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

fn worker(
    a: Arc<BfcAllocator>,
    live_set: Arc<Registry>,
    seed: u64,
    steps: usize,
) -> (usize, usize) {
    let mut rng = Rng::new(seed);
    let mut live: Vec<Block> = vec![];
    let mut ooms = 0;
    let mut next_pat = (seed as u8) | 1;
    for step in 0..steps {
        let r = rng.below(10);
        if live.is_empty() || (r < 4 && live.len() < 8) {
            let layout = random_layout(&mut rng);
            match a.allocate(layout) {
                Ok(p) => {
                    let ptr = p.cast::<u8>();
                    assert_eq!(ptr.as_ptr() as usize % layout.align(), 0);
                    live_set.enter(ptr, layout.size(), "allocate");
                    next_pat = next_pat.wrapping_add(2);
                    fill(ptr, layout.size(), next_pat);
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
            check(&b, b.layout.size(), b.layout.size(), "before free");
            live_set.leave(b.ptr);
            // SAFETY: allocated from `a` with `b.layout`, freed once.
            unsafe { a.deallocate(b.ptr, b.layout) };
        } else {
            let i = rng.below(live.len() as u64) as usize;
            let b = &mut live[i];
            let old_size = b.layout.size();
            check(b, old_size, old_size, "before resize");
            let new_size = if rng.chance(0.5) {
                (old_size * 2).clamp(1, 64 * MIB)
            } else {
                (old_size / 3).max(1)
            };
            let nl = Layout::from_size_align(new_size, b.layout.align()).unwrap();
            live_set.leave(b.ptr);
            // SAFETY: `b` is live with `b.layout`; grow/shrink get a size on the right side.
            let r = unsafe {
                if new_size >= old_size {
                    a.grow(b.ptr, b.layout, nl)
                } else {
                    a.shrink(b.ptr, b.layout, nl)
                }
            };
            match r {
                Ok(p) => {
                    b.ptr = p.cast();
                    b.layout = nl;
                    live_set.enter(b.ptr, new_size, "resize");
                    check(b, old_size, old_size.min(new_size), "after resize");
                    fill(b.ptr, new_size, b.pat);
                }
                Err(_) => {
                    // The old block stays valid.
                    live_set.enter(b.ptr, old_size, "failed resize");
                    ooms += 1
                }
            }
        }
        if step < CHECK_EVERY_STEP || step % CHECK_STRIDE == 0 {
            if let Err(e) = a.check_invariants() {
                panic!("invariant broken after step {step}: {e}");
            }
        }
    }
    for b in live {
        check(&b, b.layout.size(), b.layout.size(), "final free");
        live_set.leave(b.ptr);
        // SAFETY: allocated from `a` with `b.layout`, freed once.
        unsafe { a.deallocate(b.ptr, b.layout) };
    }
    (steps, ooms)
}

fn run(opts: BfcOptions, seed: u64) {
    let a = Arc::new(BfcAllocator::new(opts));
    let n = steps();
    let live_set = Arc::new(Registry::default());
    let hs: Vec<_> = (0..2)
        .map(|t| {
            let a = a.clone();
            let live_set = live_set.clone();
            std::thread::spawn(move || worker(a, live_set, seed * 31 + t, n))
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

#[test]
#[should_panic(expected = "overlaps live block")]
fn the_registry_catches_an_overlap() {
    let live_set = Registry::default();
    let mut buf = [0u8; 64];
    let p = NonNull::new(buf.as_mut_ptr()).unwrap();
    live_set.enter(p, 64, "first");
    live_set.enter(NonNull::new(buf[63..].as_mut_ptr()).unwrap(), 1, "second");
}

#[test]
fn samples_cover_head_tail_and_lines_between() {
    for len in [0, 1, 100, PAGE, PAGE + 1, 2 * PAGE, 5 * PAGE + 17, 64 * MIB] {
        let s: Vec<_> = samples(len).collect();
        let mut last = 0;
        for &(a, b) in &s {
            assert!(last <= a && a < b && b <= len, "{len}: {s:?}");
            last = b;
        }
        if len > 0 {
            assert_eq!((s[0].0, s.last().unwrap().1), (0, len), "{len}");
            assert_eq!(s[0].1, len.min(PAGE), "{len}");
        }
        let lines_between = len.saturating_sub(SAMPLE_EVERY + PAGE) / SAMPLE_EVERY;
        assert!(s.len() >= lines_between, "{len}: {} samples", s.len());
    }
}
