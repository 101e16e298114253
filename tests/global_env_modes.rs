//! `GlobalAllocator`'s environment variables. The configuration is read once, at the first
//! allocation of the process, so each test re-runs this test binary with the variables set and
//! checks inside that child process.

use std::alloc::Layout;
use std::process::Command;
use tensor_alloc::global::GlobalMode;
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

const CHILD: &str = "TENSOR_ALLOC_TEST_GLOBAL_ENV_CHILD";

/// In the parent: runs `test` alone in a child process with `env` and asserts it passed.
/// Returns `true` in the child (where the test body must run).
fn in_child(test: &str, env: &[(&str, &str)]) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "child run of {test} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the child did not run {test}"
    );
    false
}

#[test]
fn system_mode_serves_everything_from_the_system_heap() {
    if !in_child(
        "system_mode_serves_everything_from_the_system_heap",
        &[("TENSOR_ALLOC_GLOBAL", "system")],
    ) {
        return;
    }
    assert_eq!(GlobalAllocator::mode(), GlobalMode::System);
    let v = vec![1u8; 8 << 20];
    let s = GLOBAL.stats();
    assert_eq!(s.mode, GlobalMode::System);
    assert!(s.system.bytes_in_use >= 8 << 20);
    assert_eq!((s.large.bytes_in_use, s.large_heap.allocs), (0, 0));
    drop(v);
}

#[test]
fn limit_refuses_what_would_exceed_it() {
    if !in_child(
        "limit_refuses_what_would_exceed_it",
        &[
            ("TENSOR_ALLOC_GLOBAL_LIMIT", "64MiB"),
            ("TENSOR_ALLOC_GLOBAL_THRESHOLD", "1MiB"),
        ],
    ) {
        return;
    }
    let s = GLOBAL.stats();
    assert_eq!((s.limit, s.threshold), (Some(64 << 20), 1 << 20));
    let l100 = Layout::from_size_align(100 << 20, 64).unwrap();
    // SAFETY: a non-zero layout; the result escapes (so the call cannot be elided) and is null.
    let p = std::hint::black_box(unsafe { std::alloc::alloc(l100) });
    assert!(p.is_null());
    let mut v: Vec<u8> = Vec::new();
    assert!(v.try_reserve_exact(70 << 20).is_err());
    let a = vec![1u8; 32 << 20];
    let mut b: Vec<u8> = Vec::new();
    assert!(
        b.try_reserve_exact(40 << 20).is_err(),
        "32 + 40 MiB > 64 MiB"
    );
    b.try_reserve_exact(16 << 20).unwrap();
    let s = GLOBAL.stats();
    assert!(s.refused_by_limit >= 3, "{s:?}");
    assert!(s.bytes_in_use <= 64 << 20);
    drop((a, b));
    // Freed memory counts against the limit no more.
    let c = vec![2u8; 60 << 20];
    assert_eq!(c[(60 << 20) - 1], 2);
}

#[test]
fn bad_values_fall_back_to_defaults_and_are_reported_later() {
    if !in_child(
        "bad_values_fall_back_to_defaults_and_are_reported_later",
        &[
            ("TENSOR_ALLOC_GLOBAL", "turbo"),
            ("TENSOR_ALLOC_GLOBAL_THRESHOLD", "12"),
            ("TENSOR_ALLOC_GLOBAL_LIMIT", "lots"),
            ("TENSOR_ALLOC_GLOBAL_HUGE_PAGES", "sometimes"),
        ],
    ) {
        return;
    }
    let s = GLOBAL.stats();
    assert_eq!(
        (s.mode, s.threshold, s.limit),
        (GlobalMode::Hybrid, 256 << 10, None)
    );
    let errors = tensor_alloc::global::report_config_errors();
    let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(text.len(), 4, "{text:?}");
    assert!(
        text[0].contains("TENSOR_ALLOC_GLOBAL=\"turbo\"") && text[0].contains("system | hybrid")
    );
    assert!(text[1].contains("TENSOR_ALLOC_GLOBAL_THRESHOLD=\"12\"") && text[1].contains("4096"));
    assert!(text[2].contains("TENSOR_ALLOC_GLOBAL_LIMIT=\"lots\"") && text[2].contains("no limit"));
    assert!(
        text[3].contains("TENSOR_ALLOC_GLOBAL_HUGE_PAGES=\"sometimes\"")
            && text[3].contains("on | off")
            && text[3].contains("(off)")
    );
}

/// Whether `malloc` is glibc's own, so its chunk headers can be read: not under
/// AddressSanitizer, which replaces `malloc` (the word before a block is then its redzone).
/// ASan's runtime is linked statically (`dlsym` cannot see it), so this takes `ASAN_OPTIONS`
/// being set (as the ASan CI stage does) or ASan's fixed shadow mapping at 0x7fff8000 as the
/// sign. Prints a notice when skipping.
#[cfg(target_env = "gnu")]
fn malloc_is_glibc() -> bool {
    let shadow = std::fs::read_to_string("/proc/self/maps")
        .map(|maps| maps.lines().any(|l| l.starts_with("7fff8000-")))
        .unwrap_or(false);
    let asan = shadow || std::env::var_os("ASAN_OPTIONS").is_some();
    if asan {
        eprintln!("skipped: malloc may be AddressSanitizer's, not glibc's (ASAN_OPTIONS is set or its shadow is mapped)");
    }
    !asan
}

/// Whether glibc served the live `malloc` block at `p` by `mmap` (bit 2 of the chunk's size word,
/// just before the block).
#[cfg(target_env = "gnu")]
fn glibc_mmapped(p: *const u8) -> bool {
    // SAFETY: `p` is a live block from glibc's malloc: the word before it is its chunk's size.
    unsafe { p.cast::<usize>().sub(1).read() & 2 != 0 }
}

#[cfg(target_env = "gnu")]
#[test]
fn hybrid_mode_keeps_glibc_blocks_below_the_threshold_in_its_heap() {
    if !malloc_is_glibc() {
        return;
    }
    if !in_child(
        "hybrid_mode_keeps_glibc_blocks_below_the_threshold_in_its_heap",
        &[
            ("TENSOR_ALLOC_GLOBAL", "hybrid"),
            ("TENSOR_ALLOC_GLOBAL_HUGE_PAGES", "on"),
        ],
    ) {
        return;
    }
    // 200 KiB: above glibc's default mmap threshold (128 KiB), below the hybrid one (256 KiB).
    let v = vec![1u8; 200 << 10];
    assert!(!glibc_mmapped(v.as_ptr()), "200 KiB was mmapped by glibc");
    let big = vec![1u8; 8 << 20];
    let s = GLOBAL.stats();
    assert!(s.large_heap.allocs >= 1 && s.large.bytes_in_use >= 8 << 20);
    assert!(big.iter().all(|&b| b == 1));
    drop((v, big));
}

#[cfg(target_env = "gnu")]
#[test]
fn hybrid_mode_keeps_the_users_glibc_threshold() {
    if !malloc_is_glibc() {
        return;
    }
    if !in_child(
        "hybrid_mode_keeps_the_users_glibc_threshold",
        &[
            ("TENSOR_ALLOC_GLOBAL", "hybrid"),
            ("MALLOC_MMAP_THRESHOLD_", "131072"),
        ],
    ) {
        return;
    }
    let v = vec![1u8; 200 << 10];
    assert!(
        glibc_mmapped(v.as_ptr()),
        "the user's 128 KiB mmap threshold was overridden"
    );
    drop(v);
}

#[cfg(target_env = "gnu")]
#[test]
fn hybrid_mode_leaves_glibcs_dynamic_threshold_on_for_other_callers() {
    if !malloc_is_glibc() {
        return;
    }
    if !in_child(
        "hybrid_mode_leaves_glibcs_dynamic_threshold_on_for_other_callers",
        &[("TENSOR_ALLOC_GLOBAL", "hybrid")],
    ) {
        return;
    }
    let first = vec![1u8; 64];
    assert_eq!(GLOBAL.stats().mode, GlobalMode::Hybrid);
    // C code calling malloc directly: 1 MiB is above the raised threshold (about 256 KiB), so
    // glibc maps it; freeing it raises glibc's threshold past 1 MiB (its dynamic rule, which a
    // `mallopt` would have switched off), so the next 1 MiB comes from its heap. `black_box`
    // keeps the compiler from eliding the blocks or reasoning about the header word.
    // SAFETY: glibc's malloc and free, each block written in bounds and freed once.
    unsafe {
        let p = std::hint::black_box(libc::malloc(1 << 20).cast::<u8>());
        assert!(!p.is_null());
        p.write_volatile(1);
        assert!(
            glibc_mmapped(p),
            "1 MiB was not mapped: threshold raised too far"
        );
        libc::free(p.cast());
        let q = std::hint::black_box(libc::malloc(1 << 20).cast::<u8>());
        assert!(!q.is_null());
        q.write_volatile(1);
        assert!(
            !glibc_mmapped(q),
            "glibc's dynamic mmap threshold is off: 1 MiB mapped again after a free"
        );
        libc::free(q.cast());
    }
    drop(first);
}
