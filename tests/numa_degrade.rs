//! The degraded path, forced on any machine: when `mbind` is refused (`EPERM`, as under Docker's
//! default seccomp profile), node-bound memory is plain `mmap`, allocation never fails for it, and
//! one `tracing` notice is logged per process. Its own test binary: the refusal is process-wide.

use std::io::Write;
use std::sync::{Arc, Mutex};
use tensor_alloc::alloc::numa;
use tensor_alloc::alloc::registry::Registry;
use tensor_alloc::alloc::{
    AllocatorError, EnvConfig, Layout, NumaPolicy, NumaSubAllocator, SubAllocator,
};

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn alloc_touch_free(sub: &dyn SubAllocator) -> Result<(), AllocatorError> {
    let (p, len) = sub.alloc(4096, 1 << 20)?;
    // SAFETY: the region is live for `len` bytes and freed once with its received size.
    unsafe {
        p.as_ptr().write_bytes(7, len);
        sub.free(p, len);
    }
    Ok(())
}

#[test]
#[cfg_attr(miri, ignore)]
fn refused_binding_degrades_to_plain_mmap_with_one_notice() {
    let log = Captured::default();
    let sink = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || sink.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        // Any other failure is the caller's problem: an error, and nothing is degraded.
        numa::simulate_binding_error(libc::EINVAL);
        let sub = NumaSubAllocator::new(0).unwrap();
        let e = alloc_touch_free(&sub).unwrap_err().to_string();
        assert!(
            e.contains("mbind(MPOL_BIND, node 0) failed") && e.contains("numa(0)"),
            "{e}"
        );
        assert_ne!(numa::binding_status(), Some(false));

        // EPERM: degrade, once for the whole process.
        numa::simulate_binding_error(libc::EPERM);
        for policy in [NumaPolicy::Bind, NumaPolicy::Preferred] {
            let sub = NumaSubAllocator::new(0).unwrap().with_policy(policy);
            for _ in 0..3 {
                alloc_touch_free(&sub).unwrap();
            }
        }
        assert_eq!(numa::binding_status(), Some(false));

        // The registry's per-node allocator keeps working on plain memory.
        let r = Registry::with_builtins();
        let env = EnvConfig::from_pairs([("TENSOR_ALLOC_NUMA", "0")]).unwrap();
        let a = r.cpu_allocator(Some(0), &env).unwrap();
        let l = Layout::from_size_align(3 << 20, 64).unwrap();
        let p = a.allocate(l).unwrap();
        // SAFETY: `p` is a live block of `l.size()` bytes from `a`, freed once with `l`.
        unsafe {
            p.cast::<u8>().as_ptr().write_bytes(1, l.size());
            a.deallocate(p.cast(), l);
        }
    });
    numa::simulate_binding_error(0);
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert_eq!(
        text.matches("mbind is not available").count(),
        1,
        "exactly one notice: {text}"
    );
    assert!(text.contains("Operation not permitted"), "{text}");
}
