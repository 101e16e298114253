//! Tests of the environment configuration: each variable family, TensorFlow aliases, errors
//! and closest-name suggestions.

use super::*;

fn parse(pairs: &[(&str, &str)]) -> Result<EnvConfig, EnvError> {
    EnvConfig::from_pairs(pairs.iter().copied())
}

fn err(pairs: &[(&str, &str)]) -> String {
    parse(pairs).unwrap_err().to_string()
}

#[test]
fn nothing_set_is_the_default_and_foreign_variables_are_ignored() {
    let c = parse(&[("PATH", "/bin"), ("TF_OTHER", "x"), ("HOME", "/root")]).unwrap();
    assert_eq!(c, EnvConfig::default());
    assert_eq!(c.bfc_options(), BfcOptions::default());
    assert_eq!(c.pool_options(), PoolOptions::default());
    assert_eq!(c.cpu_options(), CpuOptions::default());
    assert!(!c.tracking());
}

#[test]
fn global_allocator_variables_are_known_and_validated() {
    parse(&[
        (GLOBAL, "system"),
        (GLOBAL_THRESHOLD, "1MiB"),
        (GLOBAL_LIMIT, "8GiB"),
        (GLOBAL_HUGE_PAGES, "on"),
    ])
    .unwrap();
    for (k, v, want) in [
        (GLOBAL, "mimalloc", "system | hybrid"),
        (GLOBAL_THRESHOLD, "100", "4096"),
        (GLOBAL_LIMIT, "0", "at least 1MiB"),
        (GLOBAL_LIMIT, "64KiB", "at least 1MiB"),
        (GLOBAL_HUGE_PAGES, "maybe", "on | off"),
    ] {
        let e = err(&[(k, v)]);
        assert!(e.contains(k) && e.contains(v) && e.contains(want), "{e}");
    }
}

/// Issue 32: empty values of the global allocator's variables passed silently while every other
/// empty value was an error. One rule now: an empty value is an error naming the variable.
#[test]
fn empty_values_are_errors_for_every_variable() {
    for &(k, _) in KNOWN_VARIABLES {
        for v in ["", "  "] {
            let e = err(&[(k, v)]);
            assert!(
                e.contains(k) && e.contains(&format!("{v:?}")),
                "{k}={v:?}: {e}"
            );
        }
    }
}

#[test]
fn cpu_allocator() {
    for name in ["cpu", "pool", "bfc", "my_alloc", "tracking(bfc)"] {
        let c = parse(&[(CPU_ALLOCATOR, name)]).unwrap();
        let v = c.cpu_allocator.unwrap();
        assert_eq!((v.value.as_str(), v.variable), (name, CPU_ALLOCATOR));
    }
    for bad in ["", "  ", "b fc"] {
        let e = err(&[(CPU_ALLOCATOR, bad)]);
        assert!(
            e.contains(CPU_ALLOCATOR) && e.contains("cpu | pool | bfc"),
            "{e}"
        );
    }
}

#[test]
fn bfc_memory_limit_with_suffixes() {
    for (raw, bytes) in [
        ("1073741824", 1u64 << 30),
        ("512MiB", 512 << 20),
        ("512 mib", 512 << 20),
        ("64KiB", 64 << 10),
        ("2GiB", 2 << 30),
        ("100B", 100),
    ] {
        let c = parse(&[(BFC_MEMORY_LIMIT, raw)]).unwrap();
        assert_eq!(c.bfc_options().memory_limit, Some(bytes), "{raw}");
    }
    for bad in ["", "12MB", "-5", "1.5GiB", "0", "99999999999999GiB", "GiB"] {
        let e = err(&[(BFC_MEMORY_LIMIT, bad)]);
        assert!(
            e.contains(BFC_MEMORY_LIMIT)
                && e.contains(&format!("{bad:?}"))
                && e.contains("KiB/MiB/GiB"),
            "{e}"
        );
    }
}

#[test]
fn bfc_growth_and_gc() {
    let c = parse(&[(BFC_GROWTH, "exact"), (BFC_GC, "off")]).unwrap();
    let o = c.bfc_options();
    assert_eq!((o.growth, o.garbage_collection), (BfcGrowth::Exact, false));
    let c = parse(&[(BFC_GROWTH, "Double"), (BFC_GC, "on")]).unwrap();
    let o = c.bfc_options();
    assert_eq!((o.growth, o.garbage_collection), (BfcGrowth::Double, true));
    let e = err(&[(BFC_GROWTH, "triple")]);
    assert!(
        e.contains("double | exact") && e.contains("\"triple\""),
        "{e}"
    );
    let e = err(&[(BFC_GC, "yes")]);
    assert!(e.contains(BFC_GC) && e.contains("on | off"), "{e}");
}

#[test]
fn bfc_huge_pages() {
    assert_eq!(
        parse(&[])
            .unwrap()
            .bfc_options()
            .pages
            .huge_page_min_region_bytes,
        None
    );
    let o = parse(&[(BFC_HUGE_PAGES, "32MiB")]).unwrap().bfc_options();
    assert_eq!(o.pages.huge_page_min_region_bytes, Some(32 << 20));
    let o = parse(&[(BFC_HUGE_PAGES, "OFF")]).unwrap().bfc_options();
    assert_eq!(o.pages.huge_page_min_region_bytes, None);
    let e = err(&[(BFC_HUGE_PAGES, "on")]);
    assert!(e.contains(BFC_HUGE_PAGES) && e.contains("\"on\""), "{e}");
}

#[test]
fn bfc_dirty_ratio() {
    assert_eq!(
        parse(&[]).unwrap().bfc_options().dirty_pages,
        BfcOptions::default().dirty_pages
    );
    for (raw, want) in [
        ("0.2", Some(0.2)),
        ("0", Some(0.0)),
        (" 1.5 ", Some(1.5)),
        ("OFF", None),
    ] {
        let c = parse(&[(BFC_DIRTY_RATIO, raw)]).unwrap();
        assert_eq!(
            c.bfc_options().dirty_pages.map(|d| d.max_dirty_ratio),
            want,
            "{raw}"
        );
    }
    for bad in ["", "-0.1", "abc", "NaN", "inf", "101", "20%"] {
        let e = err(&[(BFC_DIRTY_RATIO, bad)]);
        assert!(
            e.contains(BFC_DIRTY_RATIO) && e.contains(&format!("{bad:?}")) && e.contains("or off"),
            "{e}"
        );
    }
}

#[test]
fn pool_limit() {
    assert_eq!(
        parse(&[(POOL_LIMIT, "250")])
            .unwrap()
            .pool_options()
            .max_cached_buffers,
        250
    );
    assert_eq!(parse(&[(POOL_LIMIT, "0")]).unwrap().pool_limit, Some(0));
    for bad in ["-1", "lots", "1e3"] {
        let e = err(&[(POOL_LIMIT, bad)]);
        assert!(e.contains(POOL_LIMIT) && e.contains("count"), "{e}");
    }
}

#[test]
fn values_accepted_silently_before_are_errors_with_the_right_words() {
    let e = err(&[(LOG, "[")]);
    assert!(e.contains(LOG) && e.contains("tracing filter"), "{e}");
    assert!(parse(&[(LOG, "info,tensor_alloc=debug")]).is_ok());
    let e = err(&[(STRESS, "banana")]);
    assert!(e.contains(STRESS) && e.contains("whole number"), "{e}");
    // 0 is a byte count: the message says why it is refused.
    let e = err(&[(BFC_MEMORY_LIMIT, "0")]);
    assert!(e.contains("above 0"), "{e}");
    let e = err(&[(BFC_MEMORY_LIMIT, "99999999999999GiB")]);
    assert!(e.contains("below 2^64"), "{e}");
    for v in ["17592186044416", "99999999999999999999"] {
        let e = err(&[(TF_BFC_MEM_LIMIT_MB, v)]);
        assert!(e.contains("17592186044415"), "{e}");
    }
    assert_eq!(
        parse(&[(TF_BFC_MEM_LIMIT_MB, "17592186044415")])
            .unwrap()
            .bfc_memory_limit
            .unwrap()
            .value,
        17592186044415 << 20
    );
    for v in ["tracking(tracking(cpu))", "tracking(tracking)"] {
        let e = err(&[(CPU_ALLOCATOR, v)]);
        assert!(e.contains("tracking wraps once"), "{e}");
    }
}

#[test]
fn track() {
    assert!(parse(&[(TRACK, "1")]).unwrap().tracking());
    assert!(!parse(&[(TRACK, "0")]).unwrap().tracking());
    let e = err(&[(TRACK, "true")]);
    assert!(e.contains(TRACK) && e.contains("0 | 1"), "{e}");
}

#[test]
fn warning_fractions() {
    let c = parse(&[(LARGE_ALLOC_WARNING, "0.25"), (TOTAL_ALLOC_WARNING, "off")]).unwrap();
    let o = c.cpu_options();
    assert_eq!(o.large_alloc_warning_fraction, 0.25);
    assert_eq!(o.total_warning_fraction, 0.0, "off disables the warning");
    for bad in ["0", "1.5", "-0.1", "NaN", "half"] {
        let e = err(&[(TOTAL_ALLOC_WARNING, bad)]);
        assert!(
            e.contains(TOTAL_ALLOC_WARNING) && e.contains("(0, 1]"),
            "{e}"
        );
        let e = err(&[(LARGE_ALLOC_WARNING, bad)]);
        assert!(e.contains(LARGE_ALLOC_WARNING), "{e}");
    }
}

#[test]
fn log_and_stress_are_known_and_ignored() {
    assert_eq!(parse(&[(LOG, "debug")]).unwrap(), EnvConfig::default());
    assert_eq!(parse(&[(STRESS, "10")]).unwrap(), EnvConfig::default());
}

#[test]
fn unknown_variables_suggest_the_closest_name() {
    let e = parse(&[("TENSOR_ALLOC_TRAK", "1")]).unwrap_err();
    assert_eq!(
        e,
        EnvError::UnknownVariable {
            name: "TENSOR_ALLOC_TRAK".into(),
            value: "1".into(),
            suggestion: Some(TRACK),
        }
    );
    let s = e.to_string();
    assert!(s.contains("did you mean TENSOR_ALLOC_TRACK?"), "{s}");
    let s = err(&[("TENSOR_ALLOC_BFC_MEMORY_LIMT", "1GiB")]);
    assert!(
        s.contains("did you mean TENSOR_ALLOC_BFC_MEMORY_LIMIT?"),
        "{s}"
    );
    let s = err(&[("TENSOR_ALLOC_CPU_ALOCATOR", "bfc")]);
    assert!(
        s.contains("did you mean TENSOR_ALLOC_CPU_ALLOCATOR?"),
        "{s}"
    );
    let s = err(&[("TENSOR_ALLOC_SOMETHING_ELSE_ENTIRELY", "x")]);
    assert!(
        !s.contains("did you mean") && s.contains("known variables"),
        "{s}"
    );
}

#[test]
fn tf_use_bfc_alias() {
    let c = parse(&[(TF_USE_BFC, "true")]).unwrap();
    let v = c.cpu_allocator.unwrap();
    assert_eq!((v.value.as_str(), v.variable), ("bfc", TF_USE_BFC));
    let c = parse(&[(TF_USE_BFC, "0")]).unwrap();
    assert!(c.cpu_allocator.is_none() && c.exclude_bfc.is_some());
    // Agreeing with the native variable is fine.
    parse(&[(TF_USE_BFC, "1"), (CPU_ALLOCATOR, "bfc")]).unwrap();
    parse(&[(TF_USE_BFC, "false"), (CPU_ALLOCATOR, "pool")]).unwrap();
    parse(&[(TF_USE_BFC, "true"), (CPU_ALLOCATOR, "tracking(bfc)")]).unwrap();
    parse(&[(TF_USE_BFC, "false"), (CPU_ALLOCATOR, "tracking(cpu)")]).unwrap();
    // Bare `tracking` wraps the priority winner: the alias picks (or excludes) bfc.
    let c = parse(&[(TF_USE_BFC, "true"), (CPU_ALLOCATOR, "tracking")]).unwrap();
    assert_eq!(c.cpu_allocator.unwrap().value, "tracking(bfc)");
    let c = parse(&[(TF_USE_BFC, "false"), (CPU_ALLOCATOR, "tracking")]).unwrap();
    assert_eq!(c.cpu_allocator.unwrap().value, "tracking");
    assert!(c.exclude_bfc.is_some());
    // Disagreeing is an error naming both, also through tracking(<name>).
    for (alias, native) in [
        ("false", "tracking(bfc)"),
        ("true", "tracking(pool)"),
        ("0", "bfc"),
    ] {
        let e = err(&[(TF_USE_BFC, alias), (CPU_ALLOCATOR, native)]);
        assert!(
            e.contains(TF_USE_BFC)
                && e.contains(CPU_ALLOCATOR)
                && e.contains(&format!("{native:?}")),
            "{e}"
        );
    }
    // TENSOR_ALLOC_TRACK=0 against a tracking(...) name is a conflict too; =1 agrees.
    for name in ["tracking", "tracking(bfc)"] {
        let e = err(&[(TRACK, "0"), (CPU_ALLOCATOR, name)]);
        assert!(e.contains(TRACK) && e.contains(&format!("{name:?}")), "{e}");
        parse(&[(TRACK, "1"), (CPU_ALLOCATOR, name)]).unwrap();
    }
    let e = err(&[(TF_USE_BFC, "true"), (CPU_ALLOCATOR, "pool")]);
    assert!(
        e.contains(TF_USE_BFC) && e.contains(CPU_ALLOCATOR) && e.contains("\"pool\""),
        "{e}"
    );
    let e = err(&[(TF_USE_BFC, "false"), (CPU_ALLOCATOR, "bfc")]);
    assert!(e.contains("conflicts"), "{e}");
    let e = err(&[(TF_USE_BFC, "yes")]);
    assert!(e.contains(TF_USE_BFC) && e.contains("true | false"), "{e}");
}

#[test]
fn tf_bfc_memory_limit_alias() {
    let c = parse(&[(TF_BFC_MEM_LIMIT_MB, "512")]).unwrap();
    let l = c.bfc_memory_limit.clone().unwrap();
    assert_eq!((l.value, l.variable), (512 << 20, TF_BFC_MEM_LIMIT_MB));
    assert_eq!(c.bfc_options().memory_limit, Some(512 << 20));
    parse(&[(TF_BFC_MEM_LIMIT_MB, "512"), (BFC_MEMORY_LIMIT, "512MiB")]).unwrap();
    let e = err(&[(TF_BFC_MEM_LIMIT_MB, "512"), (BFC_MEMORY_LIMIT, "1GiB")]);
    assert!(
        e.contains(TF_BFC_MEM_LIMIT_MB) && e.contains(BFC_MEMORY_LIMIT),
        "{e}"
    );
    for bad in ["0", "1.5", "many", "99999999999999999"] {
        let e = err(&[(TF_BFC_MEM_LIMIT_MB, bad)]);
        assert!(e.contains(TF_BFC_MEM_LIMIT_MB) && e.contains("MiB"), "{e}");
    }
}

#[test]
fn numa_mode_and_policy() {
    let c = parse(&[(NUMA, "0,2-3"), (NUMA_POLICY, "preferred")]).unwrap();
    let m = c.numa.unwrap();
    assert_eq!(
        (m.value, m.variable),
        (NumaMode::Nodes(vec![0, 2, 3]), NUMA)
    );
    assert_eq!(c.numa_policy, Some(NumaPolicy::Preferred));
    assert_eq!(
        parse(&[(NUMA, "Auto")]).unwrap().numa.unwrap().value,
        NumaMode::Auto
    );
    assert_eq!(
        parse(&[(NUMA, "off")]).unwrap().numa.unwrap().value,
        NumaMode::Off
    );
    for bad in ["", "on", "3-1", "0,,1", "1024", "node0"] {
        let e = err(&[(NUMA, bad)]);
        assert!(
            e.contains(NUMA) && e.contains(&format!("{bad:?}")) && e.contains("auto | off"),
            "{e}"
        );
    }
    let e = err(&[(NUMA_POLICY, "interleave")]);
    assert!(
        e.contains(NUMA_POLICY) && e.contains("bind | preferred"),
        "{e}"
    );
}

#[test]
fn closest_name_is_case_insensitive_and_bounded() {
    let names = ["cpu", "pool", "bfc"];
    assert_eq!(closest("BFC", names), Some("bfc"));
    assert_eq!(closest("poool", names), Some("pool"));
    assert_eq!(closest("zzzzzzzz", names), None);
}

#[test]
fn isa_is_known_and_checked() {
    for v in ["scalar", "AVX2", "avx512", "avx512vnni"] {
        assert_eq!(parse(&[(ISA, v)]).unwrap(), EnvConfig::default());
    }
    let e = err(&[(ISA, "avx3")]);
    assert!(e.contains(ISA) && e.contains("avx512vnni"), "{e}");
}
