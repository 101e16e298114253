//! Tensor-like allocation workloads shared by `tensor-alloc bench` and the criterion benches.
//!
//! Every workload is seeded and deterministic, allocates through any [`Allocator`], writes into what
//! it allocates (so lazily-mapped memory is really faulted in, as a tensor runtime would), and
//! reports allocation failure as an error instead of panicking.
//!
//! - `step`: a 60-op inference step; each op allocates one 64-byte-aligned output of 1 KiB–4 MiB that
//!   is freed after its last consumer (the next op, and with 20 % chance a skip connection to op
//!   i+3..=i+8).
//! - `large`: 64 live slots churned with 256 KiB–64 MiB buffers, touching one byte per page; the
//!   slots are filled and churned for as many rounds as are timed before the timed rounds.
//! - `small`: 10,000 live 8–512 B objects churned.
//! - `same-size`: 1 MiB alloc/free repeated; `same-size-16`: 16 × 1 MiB live at a time.

use crate::alloc::{AllocError, Allocator, AllocatorError, Layout, TensorAllocator};
use core::ptr::NonNull;
use serde::Serialize;
use std::time::Instant;

/// The harness's random numbers (also at their old path for existing callers).
pub use crate::test_support::Rng;

/// The workloads of `tensor-alloc bench`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// A 60-op inference step replay.
    Step,
    /// 64 slots churned with 256 KiB–64 MiB buffers.
    Large,
    /// 10,000 live small objects churned.
    Small,
    /// 1 MiB alloc/free repeated.
    SameSize,
    /// 16 × 1 MiB allocated, then freed, repeated.
    SameSize16,
}

impl Workload {
    /// All workloads, in display order.
    pub const ALL: [Workload; 5] = [
        Workload::Step,
        Workload::Large,
        Workload::Small,
        Workload::SameSize,
        Workload::SameSize16,
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Step => "step",
            Workload::Large => "large",
            Workload::Small => "small",
            Workload::SameSize => "same-size",
            Workload::SameSize16 => "same-size-16",
        }
    }

    /// Whether the live set empties regularly, so a [`BumpAllocator`] can serve it (every
    /// step, every op, every 16 ops); `large` and `small` keep blocks live throughout.
    pub fn fits_bump(self) -> bool {
        matches!(
            self,
            Workload::Step | Workload::SameSize | Workload::SameSize16
        )
    }

    /// What one "op" is in this workload's per-op figure.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::Step => "step",
            _ => "op",
        }
    }
}

/// Knobs for one run. `scale` multiplies the default amount of work per round.
#[derive(Debug, Clone, Copy)]
pub struct WorkloadConfig {
    /// Seed for sizes and schedules.
    pub seed: u64,
    /// Timed rounds (the median is reported).
    pub rounds: usize,
    /// Work per round relative to the default (1.0).
    pub scale: f64,
}

/// Most rounds a [`WorkloadConfig`] may ask for (each round replays the whole workload).
pub const MAX_ROUNDS: usize = 1000;
/// Largest `scale` of a [`WorkloadConfig`] (100 × the default work per round).
pub const MAX_SCALE: f64 = 100.0;

impl WorkloadConfig {
    /// Checks the knobs: `rounds` in `1..=MAX_ROUNDS`, `scale` finite in `(0, MAX_SCALE]`. The
    /// message names the knob as the CLI flag (`--rounds`, `--scale`).
    pub fn validate(&self) -> Result<(), String> {
        if self.rounds == 0 || self.rounds > MAX_ROUNDS {
            return Err(format!(
                "--rounds {} is out of range: expected 1 to {MAX_ROUNDS} (each round replays the whole workload)",
                self.rounds
            ));
        }
        if !(self.scale > 0.0 && self.scale <= MAX_SCALE) {
            return Err(format!(
                "--scale {} is out of range: expected a number above 0 and at most {MAX_SCALE} (times the default work per round)",
                short_number(self.scale)
            ));
        }
        Ok(())
    }
}

/// `x` as the user would write it: plain for ordinary numbers, in scientific notation when
/// the plain form would be long (`1e308`, not 309 digits; `1e-300`, not 300 zeros).
pub fn short_number(x: f64) -> String {
    let plain = format!("{x}");
    if plain.len() > 24 {
        format!("{x:e}")
    } else {
        plain
    }
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        Self {
            seed: 42,
            rounds: 7,
            scale: 1.0,
        }
    }
}

/// The outcome of running one workload on one allocator.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadResult {
    /// Workload name.
    pub workload: &'static str,
    /// Unit of `median_ns_per_op` ("op" or "step").
    pub unit: &'static str,
    /// Ops (or steps) per round.
    pub ops_per_round: u64,
    /// Median over rounds of nanoseconds per op.
    pub median_ns_per_op: f64,
    /// Every round's nanoseconds per op.
    pub samples_ns_per_op: Vec<f64>,
    /// Nanoseconds per op of the untimed warm-up, where the warm-up is itself the workload's
    /// churn (`large`: filling the slots, then as many rounds as are timed). It includes the
    /// first touch of every page up to the warm-up's high-water mark of live bytes, which any
    /// allocator pays once; the timed rounds measure churn after it.
    pub warmup_ns_per_op: Option<f64>,
    /// Most bytes the workload held live at once (its own accounting, not the allocator's).
    pub peak_live_bytes: u64,
    /// Peak resident memory growth of the process during the run (`VmHWM` after a reset, minus the
    /// resident size before), where Linux allows the reset.
    pub peak_rss_growth_bytes: Option<u64>,
    /// Minor page faults of the process per op (or step) during the timed rounds
    /// (`getrusage`; the warm-up and initial fill are not counted): the cost a caching
    /// allocator saves by reusing resident memory, and a steadier measure than time on a noisy
    /// machine.
    pub page_faults_per_op: Option<f64>,
}

/// Median of a non-empty slice (NaN for an empty one).
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

struct Block {
    ptr: NonNull<u8>,
    layout: Layout,
}

/// How a failed allocation is described: the allocator's name, limit and bytes in use when the
/// allocator can say them ([`run`]), a generic description otherwise.
type Describe<'a> = &'a dyn Fn(Layout) -> AllocatorError;

/// The description for an allocator that only implements `allocator_api2::Allocator`.
fn generic_failure(layout: Layout) -> AllocatorError {
    AllocatorError::OutOfMemory {
        allocator: "(allocator under test)".into(),
        size: layout.size(),
        align: layout.align(),
        bytes_in_use: 0,
        limit: None,
        largest_free_chunk: None,
    }
}

fn alloc_block<A: Allocator + ?Sized>(
    a: &A,
    size: usize,
    align: usize,
    describe: Describe<'_>,
) -> Result<Block, AllocatorError> {
    let layout =
        Layout::from_size_align(size, align).map_err(|e| AllocatorError::InvalidRequest {
            allocator: "workload".into(),
            size,
            align,
            reason: e.to_string(),
        })?;
    let p = a.allocate(layout).map_err(|_| describe(layout))?;
    Ok(Block {
        ptr: p.cast(),
        layout,
    })
}

#[inline]
fn touch_ends(b: &Block) {
    let n = b.layout.size();
    if n > 0 {
        // SAFETY: the block is live and `n` bytes long.
        unsafe {
            b.ptr.as_ptr().write_volatile(1);
            b.ptr.as_ptr().add(n - 1).write_volatile(1);
        }
    }
}

#[inline]
fn touch_pages(b: &Block) {
    let n = b.layout.size();
    let mut off = 0;
    while off < n {
        // SAFETY: off < n, inside the live block.
        unsafe { b.ptr.as_ptr().add(off).write_volatile(1) };
        off += 4096;
    }
    touch_ends(b);
}

#[inline]
fn free_block<A: Allocator + ?Sized>(a: &A, b: Block) {
    // SAFETY: `b` came from `a.allocate(b.layout)` and is freed once (it is moved in).
    unsafe { a.deallocate(b.ptr, b.layout) }
}

/// The `large` workload's state: [`LargeChurn::SLOTS`] slots, each holding one buffer of
/// 256 KiB–64 MiB (log-uniform) with one byte touched per page; `peak` is the most bytes live
/// at once so far.
struct LargeChurn {
    rng: Rng,
    slots: Vec<Option<Block>>,
    live: u64,
    peak: u64,
}

impl LargeChurn {
    const SLOTS: usize = 64;

    fn new(seed: u64) -> Self {
        Self {
            rng: Rng::new(seed),
            slots: (0..Self::SLOTS).map(|_| None).collect(),
            live: 0,
            peak: 0,
        }
    }

    /// Allocates a fresh buffer into slot `s` (which must be empty).
    fn put<A: Allocator + ?Sized>(
        &mut self,
        a: &A,
        s: usize,
        describe: Describe<'_>,
    ) -> Result<(), AllocatorError> {
        let size = self.rng.log_range(256 << 10, 64 << 20) as usize;
        let b = alloc_block(a, size, 64, describe)?;
        touch_pages(&b);
        self.live += size as u64;
        self.peak = self.peak.max(self.live);
        self.slots[s] = Some(b);
        Ok(())
    }

    /// Fills every empty slot.
    fn fill<A: Allocator + ?Sized>(
        &mut self,
        a: &A,
        describe: Describe<'_>,
    ) -> Result<(), AllocatorError> {
        for s in 0..Self::SLOTS {
            if self.slots[s].is_none() {
                self.put(a, s, describe)?;
            }
        }
        Ok(())
    }

    /// `n` ops, each freeing a random slot's buffer and allocating a new one into it.
    fn churn<A: Allocator + ?Sized>(
        &mut self,
        a: &A,
        n: u64,
        describe: Describe<'_>,
    ) -> Result<(), AllocatorError> {
        for _ in 0..n {
            let s = self.rng.below(Self::SLOTS as u64) as usize;
            if let Some(b) = self.slots[s].take() {
                self.live -= b.layout.size() as u64;
                free_block(a, b);
            }
            self.put(a, s, describe)?;
        }
        Ok(())
    }

    /// Frees every buffer.
    fn free_all<A: Allocator + ?Sized>(&mut self, a: &A) {
        for b in self.slots.iter_mut().filter_map(Option::take) {
            free_block(a, b);
        }
        self.live = 0;
    }
}

/// The precomputed schedule of the `step` workload.
#[derive(Debug, Clone)]
pub struct StepSchedule {
    /// Output size of each op (private: `run` relies on the schedule `new` builds).
    sizes: Vec<usize>,
    /// For each op, the outputs (op indices) whose last consumer it is.
    frees_after: Vec<Vec<usize>>,
}

impl StepSchedule {
    /// The seeded 60-op schedule.
    pub fn new(seed: u64) -> Self {
        const OPS: usize = 60;
        let mut rng = Rng::new(seed);
        let mut sizes = vec![];
        let mut last = vec![0usize; OPS];
        for (i, l) in last.iter_mut().enumerate() {
            sizes.push(rng.log_range(1024, 4 << 20) as usize);
            let mut end = (i + 1).min(OPS - 1);
            if rng.chance(0.2) {
                end = (i + rng.range(3, 8) as usize).min(OPS - 1);
            }
            *l = end;
        }
        let mut frees_after = vec![vec![]; OPS];
        for (i, &l) in last.iter().enumerate() {
            frees_after[l].push(i);
        }
        Self { sizes, frees_after }
    }

    /// Output size of each op.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    /// For each op, the outputs (op indices) whose last consumer it is.
    pub fn frees_after(&self) -> &[Vec<usize>] {
        &self.frees_after
    }

    /// Most bytes live at once during one step.
    pub fn peak_live(&self) -> u64 {
        let mut live = 0u64;
        let mut peak = 0u64;
        for i in 0..self.sizes.len() {
            live += self.sizes[i] as u64;
            peak = peak.max(live);
            for &j in &self.frees_after[i] {
                live -= self.sizes[j] as u64;
            }
        }
        peak
    }

    /// Replays one step through `a`.
    pub fn run<A: Allocator + ?Sized>(&self, a: &A) -> Result<(), AllocatorError> {
        self.run_described(a, &generic_failure)
    }

    fn run_described<A: Allocator + ?Sized>(
        &self,
        a: &A,
        describe: Describe<'_>,
    ) -> Result<(), AllocatorError> {
        let mut live: [Option<Block>; 60] = core::array::from_fn(|_| None);
        for i in 0..self.sizes.len() {
            let b = alloc_block(a, self.sizes[i], 64, describe);
            let b = match b {
                Ok(b) => b,
                Err(e) => {
                    for b in live.iter_mut().filter_map(Option::take) {
                        free_block(a, b);
                    }
                    return Err(e);
                }
            };
            touch_ends(&b);
            live[i] = Some(b);
            for &j in &self.frees_after[i] {
                if let Some(b) = live[j].take() {
                    free_block(a, b);
                }
            }
        }
        for b in live.iter_mut().filter_map(Option::take) {
            free_block(a, b);
        }
        Ok(())
    }
}

/// Minor page faults of the process so far.
fn minor_faults() -> Option<u64> {
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct, and getrusage only
    // writes into the struct it is given.
    let mut u: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    (rc == 0).then(|| u.ru_minflt.max(0) as u64)
}

fn clear_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn proc_status_kib(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The bench's floor: a thread-safe bump allocator over one anonymous mapping.
///
/// One atomic word holds the cursor and the number of live blocks. `allocate` rounds the
/// cursor up to the alignment, advances it and counts the block in one compare-and-swap;
/// `deallocate` uncounts it in one compare-and-swap and moves the cursor back to the start when
/// it was the last live block. That is about the least work a shareable allocator can do per
/// call (a few instructions and one atomic read-modify-write, no lookup, no reuse
/// bookkeeping), so another allocator's time over this one's in the same run measures that
/// allocator's own overhead on top of the harness, on any machine. It serves workloads whose
/// live set empties regularly ([`Workload::fits_bump`]); elsewhere the cursor would only grow.
pub struct BumpAllocator {
    base: NonNull<u8>,
    capacity: usize,
    /// `cursor << LIVE_BITS | live`: bytes handed out since the last reset, blocks live.
    state: core::sync::atomic::AtomicU64,
}

/// Bits of [`BumpAllocator`]'s state word that count live blocks.
const LIVE_BITS: u32 = 24;
const LIVE_MASK: u64 = (1 << LIVE_BITS) - 1;

// SAFETY: the mapping is only reached through `allocate`/`deallocate`, whose state changes are
// atomic; the pointer is never dereferenced by the allocator itself.
unsafe impl Send for BumpAllocator {}
// SAFETY: as for `Send`.
unsafe impl Sync for BumpAllocator {}

impl BumpAllocator {
    /// Address space reserved by [`BumpAllocator::new`] (pages are only backed once touched).
    pub const DEFAULT_CAPACITY: usize = 1 << 30;

    /// A bump allocator over `capacity` bytes (at most 2^40) of fresh anonymous, unreserved
    /// address space.
    pub fn new(capacity: usize) -> Result<Self, AllocatorError> {
        let fail = || AllocatorError::OutOfMemory {
            allocator: "bump".into(),
            size: capacity,
            align: 4096,
            bytes_in_use: 0,
            limit: None,
            largest_free_chunk: None,
        };
        if capacity == 0 || (capacity as u64) >> (64 - LIVE_BITS) != 0 {
            return Err(fail());
        }
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing; no
        // existing memory is affected.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                capacity,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(fail());
        }
        Ok(Self {
            // SAFETY: mmap succeeded, so `p` is a non-null page-aligned address.
            base: unsafe { NonNull::new_unchecked(p.cast()) },
            capacity,
            state: core::sync::atomic::AtomicU64::new(0),
        })
    }
}

impl Drop for BumpAllocator {
    fn drop(&mut self) {
        // SAFETY: `base..base+capacity` is the mapping made in `new`; blocks handed out must not
        // outlive the allocator (the `Allocator` contract).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.capacity) };
    }
}

// SAFETY: a block is `[cursor rounded up to align, + size)` inside the mapping (the mapping is
// page-aligned, so offsets rounded up to a power-of-two alignment up to 4096 are aligned
// addresses, and larger alignments are refused). The cursor only moves forward while any block
// is live, so live blocks never overlap; it returns to 0 only in the same atomic step that
// uncounts the last live block. The mapping stays until `drop`.
unsafe impl Allocator for BumpAllocator {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        use core::sync::atomic::Ordering::Relaxed;
        let align = layout.align() as u64;
        if align > 4096 {
            return Err(AllocError);
        }
        let mut s = self.state.load(Relaxed);
        loop {
            let start = ((s >> LIVE_BITS) + align - 1) & !(align - 1);
            let end = start + layout.size() as u64;
            if end > self.capacity as u64 || s & LIVE_MASK == LIVE_MASK {
                return Err(AllocError);
            }
            match self.state.compare_exchange_weak(
                s,
                (end << LIVE_BITS) | ((s & LIVE_MASK) + 1),
                Relaxed,
                Relaxed,
            ) {
                Ok(_) => {
                    // SAFETY: `start ≤ end ≤ capacity`, so the block lies inside the mapping.
                    let p = unsafe { self.base.add(start as usize) };
                    return Ok(NonNull::slice_from_raw_parts(p, layout.size()));
                }
                Err(now) => s = now,
            }
        }
    }

    #[inline]
    unsafe fn deallocate(&self, _ptr: NonNull<u8>, _layout: Layout) {
        use core::sync::atomic::Ordering::Relaxed;
        let mut s = self.state.load(Relaxed);
        loop {
            // The caller frees a live block, so the count is at least 1.
            let next = if s & LIVE_MASK == 1 { 0 } else { s - 1 };
            match self.state.compare_exchange_weak(s, next, Relaxed, Relaxed) {
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
    }
}

/// Runs `w` on a fresh [`BumpAllocator`] (the bench's floor); `None` for a workload it cannot
/// serve (see [`Workload::fits_bump`]).
pub fn run_bump(
    w: Workload,
    cfg: &WorkloadConfig,
) -> Option<Result<WorkloadResult, AllocatorError>> {
    if !w.fits_bump() {
        return None;
    }
    let a = match BumpAllocator::new(BumpAllocator::DEFAULT_CAPACITY) {
        Ok(a) => a,
        Err(e) => return Some(Err(e)),
    };
    let describe_fn = |layout: Layout| {
        AllocatorError::out_of_memory(
            "bump",
            layout,
            &crate::alloc::AllocatorStats {
                bytes_limit: Some(a.capacity as u64),
                ..Default::default()
            },
        )
    };
    Some(run_described(&a, w, cfg, &describe_fn))
}

/// Runs `w` on `a` and measures it. A failed allocation is reported with `a`'s name, limit
/// and bytes in use at the moment it failed.
pub fn run<A: TensorAllocator + ?Sized>(
    a: &A,
    w: Workload,
    cfg: &WorkloadConfig,
) -> Result<WorkloadResult, AllocatorError> {
    let describe_fn = |layout: Layout| AllocatorError::out_of_memory(a.name(), layout, &a.stats());
    run_described(a, w, cfg, &describe_fn)
}

fn run_described<A: Allocator + ?Sized>(
    a: &A,
    w: Workload,
    cfg: &WorkloadConfig,
    describe: Describe<'_>,
) -> Result<WorkloadResult, AllocatorError> {
    let scale = |n: f64| ((n * cfg.scale).round() as u64).max(1);
    let rss_before = proc_status_kib("VmRSS:");
    let rss_reset = clear_peak_rss();
    let mut faults_before = None;
    let mut warmup_ns_per_op = None;
    // Grows with the rounds actually run: a huge `rounds` must not overflow a capacity.
    let mut samples = Vec::with_capacity(cfg.rounds.min(MAX_ROUNDS));
    let ops;
    let peak_live;
    match w {
        Workload::Step => {
            let sched = StepSchedule::new(cfg.seed);
            let steps = scale(20.0);
            ops = steps;
            peak_live = sched.peak_live();
            sched.run_described(a, describe)?; // warm-up
            faults_before = minor_faults();
            for _ in 0..cfg.rounds {
                let t = Instant::now();
                for _ in 0..steps {
                    sched.run_described(a, describe)?;
                }
                samples.push(t.elapsed().as_nanos() as f64 / steps as f64);
            }
        }
        Workload::Large => {
            let n = scale(64.0);
            ops = n;
            let mut churn = LargeChurn::new(cfg.seed);
            let outcome = (|| {
                // Warm-up, untimed: fill every slot, then as many churn rounds as are timed.
                let t = Instant::now();
                churn.fill(a, describe)?;
                for _ in 0..cfg.rounds {
                    churn.churn(a, n, describe)?;
                }
                let warm_ops = LargeChurn::SLOTS as u64 + n * cfg.rounds as u64;
                warmup_ns_per_op = Some(t.elapsed().as_nanos() as f64 / warm_ops as f64);
                faults_before = minor_faults();
                for _ in 0..cfg.rounds {
                    let t = Instant::now();
                    churn.churn(a, n, describe)?;
                    samples.push(t.elapsed().as_nanos() as f64 / n as f64);
                }
                Ok::<(), AllocatorError>(())
            })();
            churn.free_all(a);
            outcome?;
            peak_live = churn.peak;
        }
        Workload::Small => {
            let n = scale(200_000.0);
            ops = n;
            let mut rng = Rng::new(cfg.seed);
            let mut slots: Vec<Block> = Vec::with_capacity(10_000);
            let mut live = 0u64;
            let mut failed = None;
            for _ in 0..10_000 {
                let size = rng.range(8, 512) as usize;
                match alloc_block(a, size, 8, describe) {
                    Ok(b) => {
                        touch_ends(&b);
                        live += size as u64;
                        slots.push(b);
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            let mut peak = live;
            faults_before = minor_faults();
            if failed.is_none() {
                'outer: for _ in 0..cfg.rounds {
                    let t = Instant::now();
                    for _ in 0..n {
                        let s = rng.below(slots.len() as u64) as usize;
                        let size = rng.range(8, 512) as usize;
                        match alloc_block(a, size, 8, describe) {
                            Ok(b) => {
                                touch_ends(&b);
                                let old = core::mem::replace(&mut slots[s], b);
                                live = live + size as u64 - old.layout.size() as u64;
                                peak = peak.max(live);
                                free_block(a, old);
                            }
                            Err(e) => {
                                failed = Some(e);
                                break 'outer;
                            }
                        }
                    }
                    samples.push(t.elapsed().as_nanos() as f64 / n as f64);
                }
            }
            for b in slots {
                free_block(a, b);
            }
            if let Some(e) = failed {
                return Err(e);
            }
            peak_live = peak;
        }
        Workload::SameSize => {
            let n = scale(200_000.0);
            ops = n;
            peak_live = 1 << 20;
            faults_before = minor_faults();
            for _ in 0..cfg.rounds {
                let t = Instant::now();
                for _ in 0..n {
                    let b = alloc_block(a, 1 << 20, 64, describe)?;
                    // SAFETY: block is live and 1 MiB long.
                    unsafe { b.ptr.as_ptr().write_volatile(1) };
                    free_block(a, b);
                }
                samples.push(t.elapsed().as_nanos() as f64 / n as f64);
            }
        }
        Workload::SameSize16 => {
            let n = scale(10_000.0);
            ops = n * 16;
            peak_live = 16 << 20;
            faults_before = minor_faults();
            for _ in 0..cfg.rounds {
                let t = Instant::now();
                for _ in 0..n {
                    let mut v: [Option<Block>; 16] = core::array::from_fn(|_| None);
                    let mut err = None;
                    for slot in v.iter_mut() {
                        match alloc_block(a, 1 << 20, 64, describe) {
                            Ok(b) => {
                                // SAFETY: block is live and 1 MiB long.
                                unsafe { b.ptr.as_ptr().write_volatile(1) };
                                *slot = Some(b);
                            }
                            Err(e) => {
                                err = Some(e);
                                break;
                            }
                        }
                    }
                    for b in v.into_iter().flatten() {
                        free_block(a, b);
                    }
                    if let Some(e) = err {
                        return Err(e);
                    }
                }
                samples.push(t.elapsed().as_nanos() as f64 / ops as f64);
            }
        }
    }
    let page_faults_per_op = match (faults_before, minor_faults()) {
        (Some(a), Some(b)) => {
            Some(b.saturating_sub(a) as f64 / (ops as f64 * cfg.rounds.max(1) as f64))
        }
        _ => None,
    };
    let peak_rss_growth_bytes = match (rss_reset, rss_before, proc_status_kib("VmHWM:")) {
        (true, Some(before), Some(hwm)) => Some(hwm.saturating_sub(before) * 1024),
        _ => None,
    };
    Ok(WorkloadResult {
        workload: w.name(),
        unit: w.unit(),
        ops_per_round: ops,
        median_ns_per_op: median(&samples),
        samples_ns_per_op: samples,
        warmup_ns_per_op,
        peak_live_bytes: peak_live,
        peak_rss_growth_bytes,
        page_faults_per_op,
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::alloc::{AlignedCpuAllocator, TensorAllocator};

    #[test]
    fn every_workload_returns_all_memory() {
        let a = AlignedCpuAllocator::new();
        let cfg = WorkloadConfig {
            seed: 1,
            rounds: 2,
            scale: 0.01,
        };
        for w in Workload::ALL {
            let r = run(&a, w, &cfg).unwrap();
            assert_eq!(r.samples_ns_per_op.len(), 2, "{w:?}");
            assert!(r.peak_live_bytes > 0);
            // Only `large` has a churning warm-up to report.
            assert_eq!(r.warmup_ns_per_op.is_some(), w == Workload::Large, "{w:?}");
            assert_eq!(a.stats().bytes_in_use, 0, "{w:?} leaked");
        }
    }

    #[test]
    fn step_schedule_is_deterministic_and_in_range() {
        let a = StepSchedule::new(9);
        let b = StepSchedule::new(9);
        assert_eq!(a.sizes, b.sizes);
        assert_eq!(a.sizes.len(), 60);
        assert!(a.sizes.iter().all(|&s| (1024..=4 << 20).contains(&s)));
        let freed: usize = a.frees_after.iter().map(Vec::len).sum();
        assert_eq!(freed, 60, "every output is freed exactly once");
        // Each output dies at the next op, or with a skip connection at op i+3..=i+8 (clamped
        // to the last op); about 20 % have a skip.
        let (mut skips, mut outputs) = (0, 0);
        for seed in 0..200 {
            let s = StepSchedule::new(seed);
            for (end, freed) in s.frees_after().iter().enumerate() {
                for &i in freed {
                    assert!(
                        end > i || (i == 59 && end == 59),
                        "seed {seed}: {i} freed at {end}"
                    );
                    let d = end - i;
                    assert!(d == 1 || (3..=8).contains(&d) || end == 59, "{i} -> {end}");
                    // Outputs far enough from the end show their skip distance exactly.
                    if i + 8 < 59 {
                        outputs += 1;
                        skips += usize::from(d >= 3);
                    }
                }
            }
        }
        let share = skips as f64 / outputs as f64;
        assert!((0.17..0.23).contains(&share), "skip share {share}");
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
