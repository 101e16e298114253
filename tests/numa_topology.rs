//! NUMA topology parsing and the registry's per-node allocators on fake 2- and 4-node machines
//! (sysfs trees built in a temporary directory). No memory is bound here: the per-node
//! allocators take their regions from a recording NUMA-capable sub-allocator factory.

use std::path::Path;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};
use tensor_alloc::alloc::numa::{
    self, NodeInfo, SubContext, SubFactories, SubFactory, TopologyError,
};
use tensor_alloc::alloc::registry::{Registry, RegistryError};
use tensor_alloc::alloc::{EnvConfig, Layout, MmapSubAllocator, NumaError, SubAllocator, Topology};

/// Writes a sysfs node tree: `online` and, per node, `cpulist` and `meminfo`.
fn tree(dir: &Path, nodes: &[(usize, &str, u64)]) {
    let ids: Vec<usize> = nodes.iter().map(|n| n.0).collect();
    std::fs::write(dir.join("online"), format!("{}\n", numa::format_list(&ids))).unwrap();
    for &(id, cpus, kb) in nodes {
        let d = dir.join(format!("node{id}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cpulist"), format!("{cpus}\n")).unwrap();
        let meminfo = format!(
            "Node {id} MemTotal:       {kb} kB\nNode {id} MemFree:        {} kB\nNode {id} MemUsed:        {} kB\n",
            kb / 2,
            kb / 2
        );
        std::fs::write(d.join("meminfo"), meminfo).unwrap();
    }
}

fn two_nodes() -> (tempfile::TempDir, Topology) {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), &[(0, "0-3", 8 << 20), (1, "4-7", 8 << 20)]);
    let t = Topology::from_sysfs(dir.path()).unwrap();
    (dir, t)
}

fn four_nodes() -> (tempfile::TempDir, Topology) {
    let dir = tempfile::tempdir().unwrap();
    // Node 3 is memory-only (no CPUs), as on machines with CXL or HBM nodes.
    tree(
        dir.path(),
        &[
            (0, "0-1,8-9", 4 << 20),
            (1, "2-3,10-11", 4 << 20),
            (2, "4-7", 16 << 20),
            (3, "", 64 << 20),
        ],
    );
    let t = Topology::from_sysfs(dir.path()).unwrap();
    (dir, t)
}

#[test]
fn two_and_four_node_trees_parse() {
    let (_d, t) = two_nodes();
    assert_eq!(t.node_ids(), vec![0, 1]);
    assert!(t.is_numa());
    assert_eq!(t.nodes()[1].cpus, vec![4, 5, 6, 7]);
    assert_eq!(t.nodes()[1].mem_total_bytes, 8 << 30);
    assert_eq!(
        (t.node_of_cpu(3), t.node_of_cpu(4), t.node_of_cpu(8)),
        (Some(0), Some(1), None)
    );

    let (_d, t) = four_nodes();
    assert_eq!(t.node_ids(), vec![0, 1, 2, 3]);
    assert_eq!(t.nodes()[0].cpus, vec![0, 1, 8, 9]);
    assert!(t.nodes()[3].cpus.is_empty());
    assert_eq!(t.nodes()[3].mem_total_bytes, 64 << 30);
    assert_eq!((t.node_of_cpu(10), t.node_of_cpu(6)), (Some(1), Some(2)));
    let e = t.check_online(4).unwrap_err().to_string();
    assert_eq!(e, "NUMA node 4 is not online (online nodes: 0-3)");

    // Online nodes need not be contiguous.
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), &[(0, "0", 1024), (2, "1", 1024)]);
    assert_eq!(
        Topology::from_sysfs(dir.path()).unwrap().node_ids(),
        vec![0, 2]
    );
}

/// Asserts that reading the tree fails naming `file` (relative to the root) and `content`.
fn malformed(dir: &Path, file: &str, content: &str, expected: &str) {
    let e = Topology::from_sysfs(dir).unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains(&dir.join(file).display().to_string())
            && s.contains(&format!("{content:?}"))
            && s.contains(expected),
        "{file}: {s}"
    );
    assert!(matches!(e, TopologyError::Malformed { .. }), "{e:?}");
}

#[test]
fn malformed_files_are_errors_naming_file_and_content() {
    let cases: &[(&str, &str, &str)] = &[
        ("online", "0-", "not a number"),
        ("online", "", "non-empty list of online nodes"),
        ("online", "1-0", "goes down"),
        ("online", "0-99999", "below 1024"),
        ("node1/cpulist", "4-7x", "not a number"),
        ("node1/cpulist", "0-4294967296", "below 65536"),
        ("node1/cpulist", "3-5", "CPU 3 is also on node 0"),
        ("node1/meminfo", "Node 1 MemFree: 5 kB", "Node 1 MemTotal"),
        ("node1/meminfo", "Node 0 MemTotal: 5 kB", "Node 1 MemTotal"),
        (
            "node1/meminfo",
            "Node 1 MemTotal: many kB",
            "Node 1 MemTotal",
        ),
    ];
    for &(file, content, expected) in cases {
        let (dir, _) = two_nodes();
        std::fs::write(dir.path().join(file), format!("{content}\n")).unwrap();
        malformed(dir.path(), file, content, expected);
    }
    // A missing file is a read error naming it.
    let (dir, _) = two_nodes();
    std::fs::remove_file(dir.path().join("node1/meminfo")).unwrap();
    let e = Topology::from_sysfs(dir.path()).unwrap_err();
    assert!(matches!(e, TopologyError::Read { .. }), "{e:?}");
    assert!(e.to_string().contains("node1/meminfo"), "{e}");
    // Binary junk is an error too, not a panic.
    let (dir, _) = two_nodes();
    std::fs::write(dir.path().join("online"), [0xff, 0xfe, 0]).unwrap();
    assert!(Topology::from_sysfs(dir.path()).is_err());
}

#[test]
fn a_cpu_outside_the_topology_has_no_node() {
    let t = Topology::from_nodes(vec![NodeInfo {
        id: 0,
        cpus: vec![100_000],
        mem_total_bytes: 0,
    }])
    .unwrap();
    let e = t.current_node().unwrap_err();
    assert!(matches!(e, NumaError::CpuWithoutNode { .. }), "{e}");
    assert!(
        e.to_string().contains("belongs to no online NUMA node"),
        "{e}"
    );
    assert!(Topology::from_nodes(vec![]).is_none());
}

/// Regions handed out per node, recorded by a NUMA-capable fake (plain mmap, no binding).
type Log = Arc<Mutex<Vec<Option<usize>>>>;

fn recording(name: &str, priority: i32, numa: bool, log: Log) -> SubFactory {
    let make = move |ctx: &SubContext<'_>| {
        let log = log.clone();
        let node = ctx.numa_node;
        let visitor =
            Arc::new(move |_p: NonNull<u8>, _i: usize, _n: usize| log.lock().unwrap().push(node));
        Ok(Box::new(MmapSubAllocator::new().with_alloc_visitor(visitor)) as Box<dyn SubAllocator>)
    };
    if numa {
        SubFactory::numa(name, priority, make)
    } else {
        SubFactory::new(name, priority, make)
    }
}

/// The error of a call expected to fail.
fn fails<T>(r: Result<T, RegistryError>) -> RegistryError {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

fn env(pairs: &[(&str, &str)]) -> EnvConfig {
    EnvConfig::from_pairs(pairs.iter().copied()).unwrap()
}

fn registry(t: Topology, log: &Log) -> Registry {
    let r = Registry::with_builtins().with_topology(t);
    r.register_sub_allocator(recording("fake-numa", 60, true, log.clone()))
        .unwrap();
    r
}

fn touch(a: &tensor_alloc::alloc::AllocatorRef) {
    let l = Layout::from_size_align(1 << 20, 64).unwrap();
    let p = a.allocate(l).unwrap();
    // SAFETY: `p` is a live block of `l.size()` bytes from `a`, freed once with its layout.
    unsafe {
        p.cast::<u8>().as_ptr().write_bytes(1, l.size());
        a.deallocate(p.cast(), l);
    }
}

#[test]
fn numa_capable_sub_allocator_factories_win_for_a_node() {
    let log: Log = Default::default();
    let mut subs = SubFactories::default();
    subs.register(recording("big", 1000, false, log.clone()))
        .unwrap();
    // For a node, the built-in NUMA-capable `numa` (priority 50) beats the non-NUMA `big` (1000).
    assert_eq!(subs.select(Some(0)).unwrap().name(), "numa");
    subs.register(recording("fake-numa", 70, true, log.clone()))
        .unwrap();
    assert_eq!(subs.select(Some(0)).unwrap().name(), "fake-numa");
    assert_eq!(
        subs.select(None).unwrap().name(),
        "big",
        "no node: priority alone"
    );
    let order: Vec<&str> = subs.factories().iter().map(|f| f.name()).collect();
    assert_eq!(order, ["fake-numa", "numa", "big", "mmap"]);
    assert!(subs.register(recording("big", 1000, true, log)).is_err());
}

#[test]
fn per_node_allocators_on_a_four_node_machine() {
    let (_d, t) = four_nodes();
    let log: Log = Default::default();
    let r = registry(t, &log);
    let e = EnvConfig::default();
    let shared = r.cpu_allocator(None, &e).unwrap();
    assert_eq!(shared.name(), "cpu", "no affinity: the priority winner");
    let per_node: Vec<_> = (0..4)
        .map(|n| r.cpu_allocator(Some(n), &e).unwrap())
        .collect();
    for (n, a) in per_node.iter().enumerate() {
        assert_eq!(
            a.name(),
            "bfc",
            "node {n}: 'cpu' has no per-node constructor, 'bfc' does"
        );
        assert!(Arc::ptr_eq(a, &r.cpu_allocator(Some(n), &e).unwrap()));
        assert!(!Arc::ptr_eq(a, &shared));
        touch(a);
    }
    assert_eq!(
        *log.lock().unwrap(),
        vec![Some(0), Some(1), Some(2), Some(3)]
    );
    assert!(
        matches!(r.numa_plan(), Some(numa::NumaPlan::PerNode { ref nodes, from: None }) if nodes == &[0, 1, 2, 3])
    );
    let err = fails(r.cpu_allocator(Some(4), &e));
    assert!(matches!(
        err,
        RegistryError::Numa(NumaError::NodeNotOnline { node: 4, .. })
    ));
    assert_eq!(
        err.to_string(),
        "NUMA node 4 is not online (online nodes: 0-3)"
    );
}

#[test]
fn configuration_chooses_the_per_node_allocator() {
    for (pairs, name) in [
        (&[("TF_CPU_ALLOCATOR_USE_BFC", "false")][..], "pool"),
        (&[("TENSOR_ALLOC_CPU_ALLOCATOR", "pool")][..], "pool"),
        (
            &[("TENSOR_ALLOC_CPU_ALLOCATOR", "tracking(bfc)")][..],
            "tracking(bfc)",
        ),
        (&[("TENSOR_ALLOC_TRACK", "1")][..], "tracking(bfc)"),
    ] {
        let (_d, t) = two_nodes();
        let log: Log = Default::default();
        let r = registry(t, &log);
        let a = r.cpu_allocator(Some(1), &env(pairs)).unwrap();
        assert_eq!(a.name(), name, "{pairs:?}");
        touch(&a);
        assert_eq!(*log.lock().unwrap(), vec![Some(1)], "{pairs:?}");
    }
    // A variable naming a factory without a per-node constructor is obeyed: it serves every node.
    let (_d, t) = two_nodes();
    let log: Log = Default::default();
    let r = registry(t, &log);
    let e = env(&[("TENSOR_ALLOC_CPU_ALLOCATOR", "cpu")]);
    let a = r.cpu_allocator(Some(1), &e).unwrap();
    assert!(Arc::ptr_eq(&a, &r.cpu_allocator(None, &e).unwrap()));
}

#[test]
fn numa_variable_off_lists_and_errors() {
    let log: Log = Default::default();
    let (_d, t) = four_nodes();
    let r = registry(t, &log);
    let e = env(&[("TENSOR_ALLOC_NUMA", "off")]);
    let a = r.cpu_allocator(Some(2), &e).unwrap();
    assert!(
        Arc::ptr_eq(&a, &r.cpu_allocator(None, &e).unwrap()),
        "off: shared"
    );
    assert!(
        Arc::ptr_eq(&a, &r.cpu_allocator(Some(9), &e).unwrap()),
        "off: no check"
    );

    let (_d, t) = four_nodes();
    let r = registry(t, &log);
    let e = env(&[("TENSOR_ALLOC_NUMA", "0,2-3")]);
    assert_eq!(r.cpu_allocator(Some(3), &e).unwrap().name(), "bfc");
    let s = fails(r.cpu_allocator(Some(1), &e)).to_string();
    assert_eq!(
        s,
        "NUMA node 1 is not among the nodes enabled by TENSOR_ALLOC_NUMA=\"0,2-3\" (0,2-3); add it to the list or use auto"
    );

    let (_d, t) = four_nodes();
    let r = registry(t, &log);
    let e = env(&[("TENSOR_ALLOC_NUMA", "0,5")]);
    let s = fails(r.cpu_allocator(Some(0), &e)).to_string();
    assert!(
        s.contains(
            "TENSOR_ALLOC_NUMA=\"0,5\" names NUMA node 5, which is not online (online nodes: 0-3)"
        ),
        "{s}"
    );
}

#[test]
fn one_node_shares_under_auto_and_binds_when_listed() {
    let one = || Topology::single_node(2, 1 << 30, "test");
    let log: Log = Default::default();
    let r = registry(one(), &log);
    let e = EnvConfig::default();
    let a = r.cpu_allocator(Some(0), &e).unwrap();
    assert!(Arc::ptr_eq(&a, &r.cpu_allocator(None, &e).unwrap()));
    assert!(matches!(r.numa_plan(), Some(numa::NumaPlan::Shared(_))));

    let r = registry(one(), &log);
    let e = env(&[("TENSOR_ALLOC_NUMA", "0")]);
    let a = r.cpu_allocator(Some(0), &e).unwrap();
    assert_eq!(a.name(), "bfc");
    assert!(!Arc::ptr_eq(&a, &r.cpu_allocator(None, &e).unwrap()));
    let err = fails(r.sub_allocator(Some(1), &e));
    assert!(matches!(
        err,
        RegistryError::Numa(NumaError::NodeNotOnline { node: 1, .. })
    ));
}
