use super::*;
use crate::alloc::{Layout, SystemAllocator};

fn expect_err<T>(r: Result<T, RegistryError>) -> RegistryError {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

fn env(pairs: &[(&str, &str)]) -> EnvConfig {
    EnvConfig::from_pairs(pairs.iter().copied()).unwrap()
}

fn system_factory(name: &str, priority: i32) -> Factory {
    Factory::new(name, priority, "test", |_| {
        Ok(Arc::new(SystemAllocator) as AllocatorRef)
    })
}

#[test]
fn builtins_and_default_selection() {
    let r = Registry::with_builtins();
    let names: Vec<(String, i32)> = r
        .factories()
        .into_iter()
        .map(|f| (f.name, f.priority))
        .collect();
    assert_eq!(
        names,
        vec![("cpu".into(), 100), ("bfc".into(), 50), ("pool".into(), 40)]
    );
    let s = r.select(&EnvConfig::default()).unwrap();
    assert_eq!((s.factory.as_str(), s.priority), ("cpu", 100));
    assert_eq!(
        s.reason,
        SelectionReason::Priority {
            runner_up: Some(("bfc".into(), 50)),
            tie_broken_by_name: false,
            bfc_excluded: false
        }
    );
    assert!(s.to_string().contains("highest priority"), "{s}");
    let a = r.cpu_allocator(None, &EnvConfig::default()).unwrap();
    assert_eq!(a.name(), "cpu");
}

#[test]
fn each_builtin_can_be_chosen_by_variable_and_works() {
    for name in ["cpu", "bfc", "pool"] {
        let r = Registry::with_builtins();
        let e = env(&[(env::CPU_ALLOCATOR, name)]);
        let s = r.select(&e).unwrap();
        assert_eq!(s.factory, name);
        assert_eq!(
            s.reason,
            SelectionReason::Variable {
                variable: env::CPU_ALLOCATOR,
                value: name.into()
            }
        );
        let a = r.cpu_allocator(None, &e).unwrap();
        assert_eq!(a.name(), name);
        let l = Layout::from_size_align(4096, 64).unwrap();
        let p = a.allocate(l).unwrap();
        assert_eq!(p.as_ptr().cast::<u8>() as usize % 64, 0);
        assert_eq!(a.stats().bytes_in_use, 4096);
        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
        unsafe { a.deallocate(p.cast(), l) };
    }
}

#[test]
fn tf_alias_selects_bfc_and_configures_it() {
    let r = Registry::with_builtins();
    let e = env(&[(env::TF_USE_BFC, "true"), (env::TF_BFC_MEM_LIMIT_MB, "64")]);
    let s = r.select(&e).unwrap();
    assert_eq!(s.factory, "bfc");
    assert!(
        s.to_string().contains("TF_CPU_ALLOCATOR_USE_BFC=true"),
        "{s}"
    );
    let a = r.cpu_allocator(None, &e).unwrap();
    assert_eq!(a.stats().bytes_limit, Some(64 << 20));
    let too_big = Layout::from_size_align(128 << 20, 64).unwrap();
    assert!(a.try_allocate(too_big).is_err());
}

#[test]
fn tf_alias_false_excludes_bfc() {
    let r = Registry::new();
    r.register(system_factory("bfc", 500)).unwrap();
    r.register(system_factory("other", 1)).unwrap();
    let s = r.select(&env(&[(env::TF_USE_BFC, "false")])).unwrap();
    assert_eq!(s.factory, "other");
    assert!(s.to_string().contains("excluded"), "{s}");
    let only = Registry::new();
    only.register(system_factory("bfc", 1)).unwrap();
    let e = only
        .select(&env(&[(env::TF_USE_BFC, "false")]))
        .unwrap_err();
    assert_eq!(e, RegistryError::Empty { bfc_excluded: true });
}

#[test]
fn highest_priority_wins_and_ties_break_by_name() {
    let r = Registry::new();
    r.register(system_factory("zeta", 10)).unwrap();
    r.register(system_factory("beta", 10)).unwrap();
    r.register(system_factory("alpha", 5)).unwrap();
    let s = r.select(&EnvConfig::default()).unwrap();
    assert_eq!(s.factory, "beta", "equal priority: the smaller name wins");
    assert!(matches!(
        s.reason,
        SelectionReason::Priority {
            tie_broken_by_name: true,
            ..
        }
    ));
    // Registration order does not matter.
    let r2 = Registry::new();
    r2.register(system_factory("beta", 10)).unwrap();
    r2.register(system_factory("zeta", 10)).unwrap();
    assert_eq!(r2.select(&EnvConfig::default()).unwrap().factory, "beta");
    r.register(system_factory("alpha", 11)).unwrap();
    assert_eq!(r.select(&EnvConfig::default()).unwrap().factory, "alpha");
}

#[test]
fn duplicate_name_and_priority_is_an_error() {
    let r = Registry::with_builtins();
    let e = r.register(system_factory("cpu", 100)).unwrap_err();
    assert_eq!(
        e,
        RegistryError::Duplicate {
            name: "cpu".into(),
            priority: 100
        }
    );
    assert!(e.to_string().contains("'cpu' with priority 100"));
    // Same name, another priority: allowed; the higher one is used for that name.
    r.register(system_factory("cpu", 200)).unwrap();
    let a = r.cpu_allocator(None, &EnvConfig::default()).unwrap();
    assert_eq!(a.name(), "system");
}

#[test]
fn registration_after_first_use_is_an_error() {
    let r = Registry::with_builtins();
    r.register(system_factory("mine", 1)).unwrap();
    assert!(!r.is_frozen());
    let _a = r.cpu_allocator(None, &EnvConfig::default()).unwrap();
    assert!(r.is_frozen());
    let e = r.register(system_factory("late", 1000)).unwrap_err();
    assert_eq!(
        e,
        RegistryError::Frozen {
            name: "late".into()
        }
    );
    assert!(e.to_string().contains("frozen"));
    let r = Registry::with_builtins();
    let _b = r.create("pool", &EnvConfig::default()).unwrap();
    assert!(r.register(system_factory("late", 1)).is_err());
}

#[test]
fn unknown_names_list_the_registered_ones() {
    let r = Registry::with_builtins();
    let e = r.select(&env(&[(env::CPU_ALLOCATOR, "bcf")])).unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("'bcf'")
            && s.contains(env::CPU_ALLOCATOR)
            && s.contains("did you mean 'bfc'")
            && s.contains("cpu, pool"),
        "{s}"
    );
    let e = expect_err(r.create("nope", &EnvConfig::default()));
    assert!(
        matches!(e, RegistryError::Unknown { variable: None, .. }),
        "{e}"
    );
}

#[test]
fn cpu_allocator_is_created_once_and_shared_across_nodes_without_numa() {
    let r = Registry::with_builtins();
    let e = EnvConfig::default();
    let a = r.cpu_allocator(None, &e).unwrap();
    let b = r.cpu_allocator(None, &e).unwrap();
    let c = r.cpu_allocator(Some(1), &e).unwrap();
    assert!(Arc::ptr_eq(&a, &b) && Arc::ptr_eq(&a, &c));
    // The selection is fixed by the first call.
    let d = r
        .cpu_allocator(None, &env(&[(env::CPU_ALLOCATOR, "pool")]))
        .unwrap();
    assert!(Arc::ptr_eq(&a, &d));
    assert_eq!(r.cpu_selection().unwrap().factory, "cpu");
}

#[test]
fn numa_factories_get_one_allocator_per_node() {
    use core::sync::atomic::{AtomicUsize, Ordering};
    let seen = Arc::new(AtomicUsize::new(0));
    let s2 = seen.clone();
    let two_nodes = Topology::from_nodes(
        (0..2)
            .map(|id| numa::NodeInfo {
                id,
                cpus: vec![id],
                mem_total_bytes: 1 << 30,
            })
            .collect(),
    )
    .unwrap();
    let r = Registry::new().with_topology(two_nodes);
    r.register(system_factory("numa", 1).with_numa(move |ctx| {
        s2.fetch_add(1 + ctx.numa_node.unwrap_or(100), Ordering::SeqCst);
        Ok(Arc::new(AlignedCpuAllocator::new()) as AllocatorRef)
    }))
    .unwrap();
    let e = EnvConfig::default();
    let n0 = r.cpu_allocator(Some(0), &e).unwrap();
    let n1 = r.cpu_allocator(Some(1), &e).unwrap();
    let n1b = r.cpu_allocator(Some(1), &e).unwrap();
    let none = r.cpu_allocator(None, &e).unwrap();
    assert!(!Arc::ptr_eq(&n0, &n1) && Arc::ptr_eq(&n1, &n1b));
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1 + 2,
        "per-node constructor ran for 0 and 1"
    );
    assert_eq!(
        none.name(),
        "system",
        "no affinity uses the plain constructor"
    );
    assert!(r.factories()[0].numa);
}

#[test]
fn tracking_wraps_the_selected_allocator() {
    let r = Registry::with_builtins();
    let e = env(&[(env::TRACK, "1"), (env::CPU_ALLOCATOR, "pool")]);
    let s = r.select(&e).unwrap();
    assert_eq!(s.allocator_name(), "tracking(pool)");
    assert!(s.to_string().contains("TENSOR_ALLOC_TRACK=1"), "{s}");
    let a = r.cpu_allocator(None, &e).unwrap();
    assert_eq!(a.name(), "tracking(pool)");
    assert!(a.tracks_allocation_sizes());
    let l = Layout::from_size_align(100, 8).unwrap();
    let p = a.allocate(l).unwrap();
    assert_eq!(a.requested_size(p.cast()), Some(100));
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(p.cast(), l) };

    let r = Registry::with_builtins();
    let e = env(&[(env::CPU_ALLOCATOR, "tracking(bfc)")]);
    let s = r.select(&e).unwrap();
    assert_eq!((s.factory.as_str(), s.tracking.is_some()), ("bfc", true));
    let e = env(&[(env::CPU_ALLOCATOR, "tracking")]);
    assert_eq!(r.select(&e).unwrap().allocator_name(), "tracking(cpu)");
    assert_eq!(
        r.create("tracking(pool)", &EnvConfig::default())
            .unwrap()
            .name(),
        "tracking(pool)"
    );
}

#[test]
fn env_reaches_the_builtin_constructors() {
    let r = Registry::with_builtins();
    let e = env(&[(env::CPU_ALLOCATOR, "bfc"), (env::BFC_MEMORY_LIMIT, "8MiB")]);
    assert_eq!(
        r.cpu_allocator(None, &e).unwrap().stats().bytes_limit,
        Some(8 << 20)
    );
    let r = Registry::with_builtins();
    let e = env(&[(env::POOL_LIMIT, "0")]);
    let p = r.create("pool", &e).unwrap();
    let l = Layout::from_size_align(1000, 8).unwrap();
    let x = p.allocate(l).unwrap();
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { p.deallocate(x.cast(), l) };
    assert_eq!(p.stats().bytes_reserved, 0, "limit 0: nothing cached");
}

#[test]
fn the_process_wide_cpu_allocator_is_created_once_and_freezes_the_registry() {
    if let Err(e) = env::process_env() {
        eprintln!("skipping: the test process environment is invalid: {e}");
        return;
    }
    let a = cpu_allocator(None).unwrap();
    if !Topology::system().is_numa() {
        let b = cpu_allocator(Some(3)).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "one node: one instance for every node");
    }
    assert!(global().is_frozen());
    let e = register(system_factory("too-late", 1)).unwrap_err();
    assert!(matches!(e, RegistryError::Frozen { .. }), "{e}");
    let sel = process_selection().unwrap();
    assert_eq!(sel.allocator_name(), a.name());
}

#[test]
fn failing_constructors_are_reported() {
    let r = Registry::new();
    r.register(Factory::new("broken", 1, "fails", |_| {
        Err("no device".into())
    }))
    .unwrap();
    let e = expect_err(r.cpu_allocator(None, &EnvConfig::default()));
    assert_eq!(
        e.to_string(),
        "allocator factory 'broken' failed to construct an allocator: no device"
    );
}
