//! Real NUMA binding on this machine: memory from the node-0 sub-allocator (and from the
//! registry's per-node BFC) is bound with `mbind`, touched, and every page is checked with
//! `move_pages`/`get_mempolicy`. Where the sandbox refuses the calls (`EPERM`/`ENOSYS`), each test
//! prints a notice and checks the degraded path (plain, usable memory) instead.

use std::ptr::NonNull;
use tensor_alloc::alloc::numa::{self, sys, NodeInfo, PagePolicy};
use tensor_alloc::alloc::registry::Registry;
use tensor_alloc::alloc::sub::page_size;
use tensor_alloc::alloc::{
    AllocatorError, EnvConfig, Layout, NumaError, NumaPolicy, NumaSubAllocator, SubAllocator,
    Topology,
};

/// Checks that every page of `[p, p + len)` is resident on `node` and that the range carries
/// the policy `mode` for `node`. Returns `false` (after a notice) when the kernel refuses to say.
fn placed_on(p: NonNull<u8>, len: usize, node: usize, mode: i32) -> bool {
    let nodes = match numa::nodes_of_pages(p.as_ptr(), len) {
        Ok(n) => n,
        Err(e @ NumaError::Unsupported { .. }) => {
            eprintln!("notice: cannot verify placement here ({e}); checked the degraded path");
            return false;
        }
        Err(e) => panic!("move_pages: {e}"),
    };
    assert_eq!(nodes.len(), len / page_size());
    assert!(
        nodes.iter().all(|&n| n == Some(node)),
        "pages not all on node {node}: {nodes:?}"
    );
    for offset in [0, len / 2, len - 1] {
        // SAFETY: `offset < len`: the address lies inside the region.
        let addr = unsafe { p.as_ptr().add(offset) };
        assert_eq!(numa::node_of(addr).unwrap(), node, "offset {offset}");
    }
    let bound = numa::binding_status() == Some(true);
    let policy = numa::policy_of(p.as_ptr()).unwrap();
    if bound {
        assert_eq!(
            policy,
            PagePolicy {
                mode,
                nodes: vec![node]
            }
        );
    }
    eprintln!(
        "{} pages on node {node}; policy {} {:?}",
        nodes.len(),
        policy.mode_name(),
        policy.nodes
    );
    true
}

fn touch(p: NonNull<u8>, len: usize) {
    // SAFETY: callers pass a live region of `len` bytes they own.
    unsafe { p.as_ptr().write_bytes(0x5a, len) };
}

#[test]
#[cfg_attr(miri, ignore)]
fn node_zero_memory_is_on_node_zero() {
    for policy in [NumaPolicy::Bind, NumaPolicy::Preferred] {
        let sub = NumaSubAllocator::new(0).unwrap().with_policy(policy);
        assert_eq!((sub.numa_node(), sub.name()), (Some(0), "numa(0)"));
        let (p, len) = sub.alloc(1 << 16, 4 << 20).unwrap();
        assert_eq!((p.as_ptr() as usize % (1 << 16), len), (0, 4 << 20));
        touch(p, len);
        if !placed_on(p, len, 0, policy.mode()) {
            assert_eq!(
                numa::binding_status(),
                Some(false),
                "degraded: binding refused"
            );
        }
        // SAFETY: the region came from `sub.alloc` with this size and is freed once.
        unsafe { sub.free(p, len) };
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn per_node_bfc_from_the_registry_is_bound() {
    for (policy, mode) in [("bind", sys::MPOL_BIND), ("preferred", sys::MPOL_PREFERRED)] {
        let r = Registry::with_builtins();
        let env = EnvConfig::from_pairs([
            ("TENSOR_ALLOC_NUMA", "0"),
            ("TENSOR_ALLOC_NUMA_POLICY", policy),
        ])
        .unwrap();
        let a = r.cpu_allocator(Some(0), &env).unwrap();
        assert_eq!(a.name(), "bfc");
        let layout = Layout::from_size_align(8 << 20, 4096).unwrap();
        let p = a.allocate(layout).unwrap().cast::<u8>();
        touch(p, layout.size());
        placed_on(p, layout.size(), 0, mode);
        // SAFETY: `p` came from `a` with `layout` and is freed once.
        unsafe { a.deallocate(p, layout) };
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_node_the_kernel_does_not_have_is_an_error() {
    // A topology claiming node 1000: the kernel refuses to bind there (EINVAL).
    let fake = Topology::from_nodes(vec![NodeInfo {
        id: 1000,
        cpus: vec![0],
        mem_total_bytes: 1 << 30,
    }])
    .unwrap();
    let sub = NumaSubAllocator::for_topology(1000, &fake).unwrap();
    match sub.alloc(4096, 1 << 20) {
        Err(AllocatorError::InvalidRequest { reason, .. }) => {
            assert!(
                reason.contains("mbind(MPOL_BIND, node 1000) failed"),
                "{reason}"
            );
        }
        Ok((p, len)) => {
            // Only where binding is unavailable: plain memory, no error.
            assert_eq!(numa::binding_status(), Some(false));
            eprintln!("notice: mbind unavailable; node 1000 degraded to plain mmap");
            // SAFETY: the region came from `sub.alloc` with this size and is freed once.
            unsafe { sub.free(p, len) };
        }
        Err(e) => panic!("{e}"),
    }
    let e = NumaSubAllocator::new(1000).unwrap_err();
    assert!(
        e.to_string().contains("NUMA node 1000 is not online"),
        "{e}"
    );
}

#[test]
#[cfg_attr(miri, ignore)]
fn the_current_node_agrees_with_getcpu() {
    let t = Topology::system();
    eprintln!("topology: {t:?}");
    let node = numa::current_node().unwrap();
    assert!(t.is_online(node));
    if let Ok((_, kernel_node)) = sys::getcpu() {
        // The thread may migrate between the two calls; on one node they always agree.
        if !t.is_numa() {
            assert_eq!(node, kernel_node);
        }
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn visitors_see_each_region_with_its_node() {
    use std::sync::{Arc, Mutex};
    type Seen = Arc<Mutex<Vec<(&'static str, usize, usize)>>>;
    let seen: Seen = Default::default();
    let (a, f) = (seen.clone(), seen.clone());
    let sub = NumaSubAllocator::new(0)
        .unwrap()
        .with_alloc_visitor(Arc::new(move |_p, node, len| {
            a.lock().unwrap().push(("alloc", node, len))
        }))
        .with_free_visitor(Arc::new(move |_p, node, len| {
            f.lock().unwrap().push(("free", node, len))
        }));
    let (p, len) = sub.alloc(64, 10_000).unwrap();
    assert_eq!(len, 10_000usize.next_multiple_of(page_size()));
    // SAFETY: the region came from `sub.alloc` with this size and is freed once.
    unsafe { sub.free(p, len) };
    assert_eq!(
        *seen.lock().unwrap(),
        vec![("alloc", 0, len), ("free", 0, len)]
    );
    let e = sub.alloc(3, 100).unwrap_err().to_string();
    assert!(e.contains("numa(0)") && e.contains("power of two"), "{e}");
}
