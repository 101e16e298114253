//! `GlobalAllocator` (hybrid mode) from many threads: blocks of both heaps allocated on one
//! thread and freed on another, and thread-local destructors that allocate and free while their
//! thread shuts down.

use std::cell::RefCell;
use std::sync::mpsc;
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

/// Both tests compare process-wide statistics before and after their work: they take turns, so
/// neither sees the other's blocks come and go.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn size_for(i: usize) -> usize {
    if i.is_multiple_of(3) {
        (256 << 10) + (i % 11) * 70_000
    } else {
        8 + (i * 37) % 500
    }
}

#[test]
fn threads_allocate_and_free_each_others_blocks() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let before = GLOBAL.stats();
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    let producers: Vec<_> = (0..4)
        .map(|t| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut mine = vec![];
                for i in 0..400 {
                    let n = size_for(i + t);
                    let v = vec![(i % 251) as u8; n];
                    if i % 2 == 0 {
                        tx.send(v).unwrap();
                    } else {
                        mine.push(v);
                    }
                    if mine.len() > 8 {
                        let old = mine.remove(0);
                        assert!(old.iter().all(|&b| b == old[0]));
                    }
                }
            })
        })
        .collect();
    drop(tx);
    let consumer = std::thread::spawn(move || {
        let mut n = 0;
        for v in rx {
            assert!(
                v.iter().all(|&b| b == v[0]),
                "block corrupted across threads"
            );
            n += 1;
        }
        n
    });
    for p in producers {
        p.join().unwrap();
    }
    assert_eq!(consumer.join().unwrap(), 800);
    let after = GLOBAL.stats();
    assert_eq!(
        after.large_heap.allocs - before.large_heap.allocs,
        after.large_heap.frees - before.large_heap.frees,
        "{after:?}"
    );
}

struct Dropper(Vec<u8>);

impl Drop for Dropper {
    fn drop(&mut self) {
        // Runs during thread teardown: allocate and free through both heaps.
        let big = vec![3u8; 1 << 20];
        let small = Box::new([1u8; 32]);
        assert_eq!(big[12345] + small[5], 4);
        assert!(self.0.iter().all(|&b| b == 9));
    }
}

thread_local! {
    static HOLD: RefCell<Option<Dropper>> = const { RefCell::new(None) };
}

#[test]
fn thread_local_destructors_allocate_and_free() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let before = GLOBAL.stats();
    let threads: Vec<_> = (0..8)
        .map(|i| {
            std::thread::spawn(move || {
                HOLD.with(|h| *h.borrow_mut() = Some(Dropper(vec![9u8; (300 << 10) * (i + 1)])));
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let after = GLOBAL.stats();
    assert!(after.large_heap.allocs >= before.large_heap.allocs + 16);
}
