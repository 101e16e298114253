//! Loom model of the shared per-thread cache mechanism (`alloc::thread_cache`): binding, the
//! epoch that makes caches hand their store back, counter deltas and the exit path.
//!
//! Under loom the allocators take their locked paths (thread-locals are not per loom thread),
//! so this model drives `ThreadCache` values owned by the model's threads directly, with an owner
//! shaped like the allocators': a lock around a shared free list and totals, an atomic epoch.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_thread_cache`
#![cfg(loom)]

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Mutex;
use loom::thread;
use std::sync::Arc;
use tensor_alloc::alloc::thread_cache::{Deltas, Owner, ThreadCache};

/// Bytes of every item.
const SIZE: u64 = 8;

#[derive(Default)]
struct Totals {
    allocs: u64,
    frees: u64,
    in_use: i64,
    peak: i64,
    /// Items not handed out and not in any thread's store.
    free_items: Vec<u32>,
    /// Items handed back because the epoch moved (or the owner asked).
    stale_items: usize,
}

struct Pool {
    epoch: AtomicU64,
    state: Mutex<Totals>,
}

impl Owner for Pool {
    type Store = Vec<u32>;
    type Report = usize;

    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    fn take_back(&self, store: &mut Vec<u32>, d: Deltas, stale: bool) -> usize {
        let mut g = self.state.lock().unwrap();
        let t = &mut *g;
        t.allocs += d.allocs;
        t.frees += d.frees;
        d.merge_level(&mut t.in_use, &mut t.peak);
        if stale {
            t.stale_items += store.len();
        }
        let n = store.len();
        t.free_items.append(store);
        n
    }
}

fn pool(items: &[u32]) -> Arc<Pool> {
    Arc::new(Pool {
        epoch: AtomicU64::new(0),
        state: Mutex::new(Totals {
            free_items: items.to_vec(),
            ..Totals::default()
        }),
    })
}

/// The allocators' allocation path: the cache if it is bound here and holds an item, else the
/// shared list under the lock (merging this thread's deltas on the way).
fn alloc(p: &Arc<Pool>, c: &mut ThreadCache<Pool>) -> u32 {
    if c.enter_bound(p) {
        if let Some(x) = c.store.pop() {
            c.deltas.alloc(SIZE);
            return x;
        }
    }
    let d = c.take_deltas(p);
    let mut g = p.state.lock().unwrap();
    let t = &mut *g;
    t.allocs += d.allocs;
    t.frees += d.frees;
    d.merge_level(&mut t.in_use, &mut t.peak);
    let x = t.free_items.pop().expect("an item is free");
    t.allocs += 1;
    t.in_use += SIZE as i64;
    t.peak = t.peak.max(t.in_use);
    x
}

/// The allocators' free path: into this thread's cache, binding it first.
fn free(p: &Arc<Pool>, c: &mut ThreadCache<Pool>, x: u32) {
    c.enter(p);
    assert!(!c.store.contains(&x), "item {x} cached twice");
    c.store.push(x);
    c.deltas.free(SIZE);
}

/// `trim()`: every cache must hand back; this thread's at once.
fn trim(p: &Arc<Pool>, c: &mut ThreadCache<Pool>) {
    p.epoch.fetch_add(1, Ordering::Release);
    if c.is_bound_to(p) {
        c.unbind(true);
    }
}

/// One thread reuses its cached item while another trims: every item ends up back exactly once,
/// the counters are exact after the exit path, and nothing is handed out twice.
#[test]
fn trim_races_with_cache_hits_and_exit() {
    loom::model(|| {
        let p = pool(&[1, 2]);
        let p2 = p.clone();
        let t = thread::spawn(move || {
            let mut c = ThreadCache::new(Vec::new());
            let x = alloc(&p2, &mut c);
            free(&p2, &mut c, x);
            let y = alloc(&p2, &mut c);
            free(&p2, &mut c, y);
            // `c` drops here: the exit path hands the item and the counters back.
        });
        let mut c = ThreadCache::new(Vec::new());
        let x = alloc(&p, &mut c);
        free(&p, &mut c, x);
        trim(&p, &mut c);
        assert!(c.store.is_empty() && c.deltas.is_empty());
        t.join().unwrap();
        drop(c);
        let t = p.state.lock().unwrap();
        let mut items = t.free_items.clone();
        items.sort_unstable();
        assert_eq!(items, [1, 2], "every item back exactly once");
        assert_eq!((t.allocs, t.frees, t.in_use), (3, 3, 0));
        assert!(
            (SIZE as i64..=2 * SIZE as i64).contains(&t.peak),
            "peak {}",
            t.peak
        );
        assert!(
            t.stale_items >= 1,
            "the trimming thread's own item went back as stale"
        );
    });
}

/// A cache that moves to another owner hands everything back to the first one, while a thread
/// of the first owner allocates from the shared list.
#[test]
fn rebinding_hands_back_to_the_previous_owner() {
    loom::model(|| {
        let a = pool(&[1, 2]);
        let b = pool(&[10]);
        let a2 = a.clone();
        let t = thread::spawn(move || {
            let mut c = ThreadCache::new(Vec::new());
            let x = alloc(&a2, &mut c);
            free(&a2, &mut c, x);
        });
        let mut c = ThreadCache::new(Vec::new());
        let x = alloc(&a, &mut c);
        free(&a, &mut c, x);
        let y = alloc(&b, &mut c);
        free(&b, &mut c, y); // binds to `b`: `x` goes back to `a`
        assert!(c.is_bound_to(&b) && !c.is_bound_to(&a));
        t.join().unwrap();
        drop(c);
        for (p, want) in [(&a, vec![1, 2]), (&b, vec![10])] {
            let t = p.state.lock().unwrap();
            let mut items = t.free_items.clone();
            items.sort_unstable();
            assert_eq!(items, want);
            assert_eq!(t.in_use, 0);
            assert_eq!(t.allocs, t.frees);
            assert_eq!(t.stale_items, 0, "no epoch moved");
        }
    });
}
