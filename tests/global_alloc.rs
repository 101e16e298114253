//! `GlobalAllocator` installed as this test binary's `#[global_allocator]`.

use tensor_alloc::global::count_allocations;
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

#[test]
fn counts_exactly_what_the_closure_allocates() {
    let (v, c) = count_allocations(|| {
        let a = vec![1u8; 100];
        let b = std::hint::black_box(Box::new(5u64));
        drop(b);
        a
    })
    .expect("installed");
    assert_eq!(v.len(), 100);
    assert_eq!(c.allocs, 2);
    assert_eq!(c.deallocs, 1);
    assert_eq!(c.bytes_allocated, 108);
}

#[test]
fn counts_reallocs_and_nothing_for_pure_code() {
    let (_, c) = count_allocations(|| {
        let mut v: Vec<u32> = Vec::with_capacity(1);
        for i in 0..2 {
            v.push(std::hint::black_box(i));
        }
        v
    })
    .expect("installed");
    assert_eq!(c.allocs, 1);
    assert!(c.reallocs >= 1);

    let data = [3u64; 64];
    let (s, c) = count_allocations(|| data.iter().sum::<u64>()).expect("installed");
    assert_eq!(s, 192);
    assert_eq!(c.total_allocations(), 0);
    assert_eq!(c.deallocs, 0);
}

#[test]
fn other_threads_are_not_counted_but_process_totals_are() {
    let before = GlobalAllocator::process_counts();
    let (_, c) = count_allocations(|| {
        std::thread::scope(|s| {
            s.spawn(|| {
                let v: Vec<Vec<u8>> = (0..50).map(|_| vec![0u8; 10]).collect();
                drop(v);
            });
        });
    })
    .expect("installed");
    // Spawning a thread allocates on this thread too (thread handle), but the 51 allocations of
    // the spawned thread are not on this thread's counters.
    assert!(c.allocs < 51, "{c:?}");
    let after = GlobalAllocator::process_counts();
    assert!(after.allocs - before.allocs >= 51);
    assert!(GlobalAllocator::is_installed());
}

#[test]
fn works_in_a_fork_child() {
    // The child allocates through the global allocator and exits with a status saying whether the
    // counters moved; no lock can be held across fork because there is none.
    // SAFETY: fork in a test; the child only allocates, counts and calls _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = match count_allocations(|| vec![0u8; 4096]) {
            Ok((v, c)) => v.len() == 4096 && c.allocs == 1,
            Err(_) => false,
        };
        // SAFETY: _exit never returns and runs no destructors or atexit handlers.
        unsafe { libc::_exit(if ok { 0 } else { 3 }) };
    }
    let mut status = 0;
    // SAFETY: waiting on our own child.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid);
    assert!(libc::WIFEXITED(status));
    assert_eq!(libc::WEXITSTATUS(status), 0);
}

#[test]
fn bytes_in_use_follows_allocations() {
    let (in_use_before, _) = GlobalAllocator::bytes_in_use();
    let big = vec![0u8; 64 << 20];
    let (in_use, peak) = GlobalAllocator::bytes_in_use();
    assert!(in_use >= in_use_before + (64 << 20) - (1 << 20) || in_use >= 64 << 20);
    assert!(peak >= in_use);
    drop(big);
}
