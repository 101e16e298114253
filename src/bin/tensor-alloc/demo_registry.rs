//! The registry part of the no-argument demo: which CPU allocator the registry selects and why,
//! and a pool allocator's cache statistics on a repeated inference step.

use tensor_alloc::alloc::registry::{self, Factory, Registry};
use tensor_alloc::alloc::{
    AllocatorRef, EnvConfig, PoolAllocator, PoolOptions, SystemAllocator, TensorAllocator,
};
use tensor_alloc::workload::StepSchedule;

/// Prints the registry section of the demo.
pub fn section() -> Result<(), String> {
    println!("\nAllocator registry (TensorFlow's AllocatorFactoryRegistry):");
    let global = registry::global();
    for f in global.factories() {
        println!(
            "   {:<6} priority {:>4}  {}",
            f.name, f.priority, f.description
        );
    }
    match registry::process_selection() {
        Ok(sel) => println!("   this process would use {sel}"),
        Err(e) => println!("   the environment is invalid: {e}"),
    }

    // A private registry: user factories, priorities and the tie-break, without touching the
    // process-wide one.
    let r = Registry::with_builtins();
    let system =
        |_: &registry::FactoryContext<'_>| Ok(std::sync::Arc::new(SystemAllocator) as AllocatorRef);
    r.register(Factory::new("glibc", 100, "glibc malloc", system))
        .map_err(|e| e.to_string())?;
    let sel = r.select(&EnvConfig::default()).map_err(|e| e.to_string())?;
    println!("   with a user factory 'glibc' at priority 100 as well: {sel}");
    let env =
        EnvConfig::from_pairs([("TF_CPU_ALLOCATOR_USE_BFC", "true")]).map_err(|e| e.to_string())?;
    let sel = r.select(&env).map_err(|e| e.to_string())?;
    println!("   with TF_CPU_ALLOCATOR_USE_BFC=true: {sel}");
    let bad = EnvConfig::from_pairs([("TENSOR_ALLOC_POOL_LIMT", "64")]);
    if let Err(e) = bad {
        println!("   a misspelled variable is an error: {e}");
    }

    println!("\nPool allocator: 20 steps of a 60-op inference schedule (1 KiB–4 MiB tensors):");
    let pool = PoolAllocator::new(PoolOptions::default());
    let sched = StepSchedule::new(42);
    for _ in 0..20 {
        sched.run(&pool).map_err(|e| e.to_string())?;
    }
    let ps = pool.pool_stats();
    let s = pool.stats();
    println!(
        "   hits {} / misses {} (hit rate {:.1} %), evictions {}, cached {} buffers = {:.2} MiB, limit {}",
        ps.hits,
        ps.misses,
        ps.hit_rate() * 100.0,
        ps.evictions,
        ps.cached_buffers,
        ps.cached_bytes as f64 / (1 << 20) as f64,
        ps.count_limit
    );
    println!(
        "   peak in use {:.2} MiB, reserved now {:.2} MiB",
        s.peak_bytes_in_use as f64 / (1 << 20) as f64,
        s.bytes_reserved as f64 / (1 << 20) as f64
    );
    let (n, bytes) = pool.trim();
    println!(
        "   trim(): returned {n} buffers ({:.2} MiB) to the system",
        bytes as f64 / (1 << 20) as f64
    );
    Ok(())
}
