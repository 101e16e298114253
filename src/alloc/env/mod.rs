//! Environment configuration of the allocator registry: one family of `TENSOR_ALLOC_*` variables,
//! plus TensorFlow's `TF_CPU_ALLOCATOR_USE_BFC` and `TF_CPU_BFC_MEM_LIMIT_IN_MB` as aliases.
//!
//! The parser takes any iterator of `(key, value)` pairs ([`EnvConfig::from_pairs`]), so tests do
//! not touch the process environment; [`EnvConfig::from_process_env`] reads the real one, and
//! [`process_env`] reads it once per process. Validation is strict, like PyTorch's allocator
//! config: an unknown or misspelled `TENSOR_ALLOC_*` variable, an unparsable value, or an alias
//! that disagrees with its native variable is an [`EnvError`] naming the variable, the value and
//! what is accepted. Variables outside the family are ignored.
//!
//! | variable | values | effect |
//! |---|---|---|
//! | `TENSOR_ALLOC_CPU_ALLOCATOR` | `cpu`, `pool`, `bfc`, any registered name, `tracking`, `tracking(<name>)` | which factory `cpu_allocator()` uses (overrides priorities) |
//! | `TENSOR_ALLOC_BFC_MEMORY_LIMIT` | bytes, optional `KiB`/`MiB`/`GiB` suffix (e.g. `512MiB`) | `BfcOptions::memory_limit` |
//! | `TENSOR_ALLOC_BFC_GROWTH` | `double`, `exact` | `BfcOptions::growth` |
//! | `TENSOR_ALLOC_BFC_GC` | `on`, `off` | `BfcOptions::garbage_collection` |
//! | `TENSOR_ALLOC_BFC_DIRTY_RATIO` | a ratio ≥ 0 (e.g. `0.2`), or `off` | `BfcOptions::dirty_pages` (`BfcDirtyPages::max_dirty_ratio`; `off`: `None`) |
//! | `TENSOR_ALLOC_BFC_HUGE_PAGES` | `off`, or a byte count with optional suffix (e.g. `32MiB`) | `BfcOptions::pages.huge_page_min_region_bytes` (`off`: `None`) |
//! | `TENSOR_ALLOC_POOL_LIMIT` | a count (`0` disables caching) | `PoolOptions::max_cached_buffers` |
//! | `TENSOR_ALLOC_TRACK` | `0`, `1` | wrap the CPU allocator in `TrackingAllocator` |
//! | `TENSOR_ALLOC_LARGE_ALLOC_WARNING` | a fraction in (0, 1], or `off` | `CpuOptions::large_alloc_warning_fraction` |
//! | `TENSOR_ALLOC_TOTAL_ALLOC_WARNING` | a fraction in (0, 1], or `off` | `CpuOptions::total_warning_fraction` |
//! | `TENSOR_ALLOC_NUMA` | `auto`, `off`, a node list (`0,2-3`) | per-node allocators of `cpu_allocator(Some(node))` |
//! | `TENSOR_ALLOC_NUMA_POLICY` | `bind`, `preferred` | `mbind` mode of node-bound memory |
//! | `TENSOR_ALLOC_GLOBAL` | `system`, `hybrid` | mode of [`crate::GlobalAllocator`]; validated here, read by it |
//! | `TENSOR_ALLOC_GLOBAL_THRESHOLD` | bytes (4 KiB to 1 TiB), optional suffix | hybrid mode's large-buffer threshold |
//! | `TENSOR_ALLOC_GLOBAL_LIMIT` | bytes, at least 1 MiB, optional suffix | cap on bytes in use through `GlobalAllocator` |
//! | `TENSOR_ALLOC_GLOBAL_HUGE_PAGES` | `on`, `off` | transparent huge pages for the hybrid mode's large heap |
//! | `TENSOR_ALLOC_LOG` | a `tracing` filter | read by the CLI only |
//! | `TENSOR_ALLOC_STRESS` | a whole number | scale of the randomized stress tests; ignored here |
//! | `TENSOR_ALLOC_ISA` | `scalar`, `avx2`, `avx512`, `avx512vnni` | kernel path of the interpreter (`docs/isa.md`); validated here, read by it |
//! | `TENSOR_ALLOC_BENCH_MODELS` | model file stems, comma-separated | the model benches' filter; ignored here |
//! | `TF_CPU_ALLOCATOR_USE_BFC` | `true`/`1`, `false`/`0` | alias: `true` = `bfc`; `false` = not `bfc` |
//! | `TF_CPU_BFC_MEM_LIMIT_IN_MB` | MiB | alias of `TENSOR_ALLOC_BFC_MEMORY_LIMIT` |

use super::global::config as global_config;
use super::numa::{NumaMode, NumaPolicy};
use super::{BfcDirtyPages, BfcGrowth, BfcOptions, CpuOptions, PoolOptions};
use std::ffi::OsStr;

/// Prefix of the crate's variables.
pub const PREFIX: &str = "TENSOR_ALLOC_";

/// `TENSOR_ALLOC_CPU_ALLOCATOR`.
pub const CPU_ALLOCATOR: &str = "TENSOR_ALLOC_CPU_ALLOCATOR";
/// `TENSOR_ALLOC_BFC_MEMORY_LIMIT`.
pub const BFC_MEMORY_LIMIT: &str = "TENSOR_ALLOC_BFC_MEMORY_LIMIT";
/// `TENSOR_ALLOC_BFC_GROWTH`.
pub const BFC_GROWTH: &str = "TENSOR_ALLOC_BFC_GROWTH";
/// `TENSOR_ALLOC_BFC_GC`.
pub const BFC_GC: &str = "TENSOR_ALLOC_BFC_GC";
/// `TENSOR_ALLOC_BFC_DIRTY_RATIO`.
pub const BFC_DIRTY_RATIO: &str = "TENSOR_ALLOC_BFC_DIRTY_RATIO";
/// `TENSOR_ALLOC_BFC_HUGE_PAGES`.
pub const BFC_HUGE_PAGES: &str = "TENSOR_ALLOC_BFC_HUGE_PAGES";
/// `TENSOR_ALLOC_POOL_LIMIT`.
pub const POOL_LIMIT: &str = "TENSOR_ALLOC_POOL_LIMIT";
/// `TENSOR_ALLOC_TRACK`.
pub const TRACK: &str = "TENSOR_ALLOC_TRACK";
/// `TENSOR_ALLOC_LARGE_ALLOC_WARNING`.
pub const LARGE_ALLOC_WARNING: &str = "TENSOR_ALLOC_LARGE_ALLOC_WARNING";
/// `TENSOR_ALLOC_TOTAL_ALLOC_WARNING`.
pub const TOTAL_ALLOC_WARNING: &str = "TENSOR_ALLOC_TOTAL_ALLOC_WARNING";
/// `TENSOR_ALLOC_NUMA`.
pub const NUMA: &str = "TENSOR_ALLOC_NUMA";
/// `TENSOR_ALLOC_NUMA_POLICY`.
pub const NUMA_POLICY: &str = "TENSOR_ALLOC_NUMA_POLICY";
/// `TENSOR_ALLOC_GLOBAL` (read by [`crate::GlobalAllocator`]; validated here).
pub const GLOBAL: &str = global_config::GLOBAL;
/// `TENSOR_ALLOC_GLOBAL_THRESHOLD` (read by [`crate::GlobalAllocator`]; validated here).
pub const GLOBAL_THRESHOLD: &str = global_config::GLOBAL_THRESHOLD;
/// `TENSOR_ALLOC_GLOBAL_LIMIT` (read by [`crate::GlobalAllocator`]; validated here).
pub const GLOBAL_LIMIT: &str = global_config::GLOBAL_LIMIT;
/// `TENSOR_ALLOC_GLOBAL_HUGE_PAGES` (read by [`crate::GlobalAllocator`]; validated here).
pub const GLOBAL_HUGE_PAGES: &str = global_config::GLOBAL_HUGE_PAGES;
/// `TENSOR_ALLOC_LOG` (the CLI's `tracing` filter; accepted and ignored here).
pub const LOG: &str = "TENSOR_ALLOC_LOG";
/// `TENSOR_ALLOC_STRESS` (the test suite's scale factor for randomized stress tests; accepted
/// and ignored here).
pub const STRESS: &str = "TENSOR_ALLOC_STRESS";
/// `TENSOR_ALLOC_BENCH_MODELS` (the model benches' filter, `benches/interpreter.rs`; any value).
pub const BENCH_MODELS: &str = "TENSOR_ALLOC_BENCH_MODELS";
/// `TENSOR_ALLOC_ISA` (the interpreter's kernel path, `docs/isa.md`; validated here).
pub const ISA: &str = "TENSOR_ALLOC_ISA";
/// The values [`ISA`] accepts (any case).
const ISA_VALUES: [&str; 4] = ["scalar", "avx2", "avx512", "avx512vnni"];
/// TensorFlow's `TF_CPU_ALLOCATOR_USE_BFC`.
pub const TF_USE_BFC: &str = "TF_CPU_ALLOCATOR_USE_BFC";
/// TensorFlow's `TF_CPU_BFC_MEM_LIMIT_IN_MB`.
pub const TF_BFC_MEM_LIMIT_MB: &str = "TF_CPU_BFC_MEM_LIMIT_IN_MB";

/// Every variable of the family, with its accepted values (for errors and documentation).
pub const KNOWN_VARIABLES: &[(&str, &str)] = &[
    (
        CPU_ALLOCATOR,
        "cpu | pool | bfc | a registered allocator name | tracking | tracking(<name>)",
    ),
    (
        BFC_MEMORY_LIMIT,
        "a byte count with an optional KiB/MiB/GiB suffix, e.g. 1073741824 or 512MiB",
    ),
    (BFC_GROWTH, "double | exact"),
    (BFC_GC, "on | off"),
    (
        BFC_DIRTY_RATIO,
        "a ratio of resident free memory to bytes in use, >= 0 and <= 100 (e.g. 0.2), or off",
    ),
    (
        BFC_HUGE_PAGES,
        "off, or the smallest region (bytes, optional KiB/MiB/GiB suffix) advised to use huge pages",
    ),
    (POOL_LIMIT, "a count of cached buffers (0 disables caching)"),
    (TRACK, "0 | 1"),
    (LARGE_ALLOC_WARNING, "a fraction in (0, 1] or off"),
    (TOTAL_ALLOC_WARNING, "a fraction in (0, 1] or off"),
    (
        NUMA,
        "auto | off | a list of NUMA node numbers and ascending ranges below 1024, e.g. 0 or 0,2-3",
    ),
    (NUMA_POLICY, "bind | preferred"),
    (GLOBAL, global_config::EXPECTED_MODE),
    (GLOBAL_THRESHOLD, global_config::EXPECTED_THRESHOLD),
    (GLOBAL_LIMIT, global_config::EXPECTED_LIMIT),
    (GLOBAL_HUGE_PAGES, global_config::EXPECTED_HUGE_PAGES),
    (LOG, "a tracing filter such as info or tensor_alloc=debug"),
    (STRESS, "a whole number (test-suite scale factor)"),
    (ISA, "scalar | avx2 | avx512 | avx512vnni"),
    (
        BENCH_MODELS,
        "comma-separated model file stems (the model benches' filter)",
    ),
    (TF_USE_BFC, "true | false | 1 | 0"),
    (TF_BFC_MEM_LIMIT_MB, "a whole number of MiB"),
];

/// A configuration error: names the variable, the value and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// A `TENSOR_ALLOC_*` variable that does not exist.
    #[error(
        "unknown environment variable {name}={value:?}{}; known variables: {}",
        .suggestion.as_ref().map(|s| format!(" (did you mean {s}?)")).unwrap_or_default(),
        KNOWN_VARIABLES.iter().map(|k| k.0).collect::<Vec<_>>().join(", ")
    )]
    UnknownVariable {
        /// The variable as set.
        name: String,
        /// Its value.
        value: String,
        /// The closest known name, if one is close.
        suggestion: Option<&'static str>,
    },
    /// A value that does not parse.
    #[error("invalid value {name}={value:?}: expected {expected}")]
    InvalidValue {
        /// The variable.
        name: &'static str,
        /// The rejected value.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// A TensorFlow alias and its native variable are both set and disagree.
    #[error(
        "{alias}={alias_value:?} conflicts with {native}={native_value:?}: \
         set only one of them, or make them agree"
    )]
    Conflict {
        /// The TensorFlow alias (or `TENSOR_ALLOC_TRACK=0` against a `tracking(...)` name).
        alias: &'static str,
        /// Its value.
        alias_value: String,
        /// The native variable.
        native: &'static str,
        /// Its value.
        native_value: String,
    },
    /// A variable of the family whose value is not valid UTF-8.
    #[error("environment variable {name} is not valid UTF-8")]
    NotUnicode {
        /// The variable.
        name: String,
    },
}

/// A setting together with the variable that set it (for selection reports).
#[derive(Debug, Clone, PartialEq)]
pub struct FromVar<T> {
    /// The parsed value.
    pub value: T,
    /// The variable it came from.
    pub variable: &'static str,
    /// The raw text of the variable.
    pub raw: String,
}

/// The validated configuration. `Default` = nothing set.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EnvConfig {
    /// The CPU allocator named by `TENSOR_ALLOC_CPU_ALLOCATOR` or `TF_CPU_ALLOCATOR_USE_BFC=true`.
    pub cpu_allocator: Option<FromVar<String>>,
    /// `TF_CPU_ALLOCATOR_USE_BFC=false`: any allocator but `bfc` (priority decides among them).
    pub exclude_bfc: Option<FromVar<()>>,
    /// BFC memory limit in bytes.
    pub bfc_memory_limit: Option<FromVar<u64>>,
    /// BFC growth policy.
    pub bfc_growth: Option<BfcGrowth>,
    /// BFC garbage collection.
    pub bfc_gc: Option<bool>,
    /// BFC dirty-page budget (`Some(None)` = `off`).
    pub bfc_dirty_ratio: Option<Option<f64>>,
    /// BFC huge-page threshold (`Some(None)` = `off`).
    pub bfc_huge_pages: Option<Option<usize>>,
    /// Pool count limit.
    pub pool_limit: Option<usize>,
    /// Wrap the CPU allocator in tracking.
    pub track: Option<FromVar<bool>>,
    /// Large-allocation warning fraction (`Some(0.0)` = off).
    pub large_alloc_warning: Option<f64>,
    /// Total-use warning fraction (`Some(0.0)` = off).
    pub total_alloc_warning: Option<f64>,
    /// Per-node allocators (`TENSOR_ALLOC_NUMA`; unset = `auto`).
    pub numa: Option<FromVar<NumaMode>>,
    /// Placement of node-bound memory (`TENSOR_ALLOC_NUMA_POLICY`; unset = `bind`).
    pub numa_policy: Option<NumaPolicy>,
}

/// Levenshtein distance (small strings only).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The known name closest to `name`, when it is close enough to be a likely typo.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let upper = name.to_ascii_uppercase();
    candidates
        .into_iter()
        .map(|c| (edit_distance(&upper, &c.to_ascii_uppercase()), c))
        .filter(|&(d, c)| d <= (c.len() / 3).max(2))
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

fn expected(name: &str) -> &'static str {
    KNOWN_VARIABLES
        .iter()
        .find(|k| k.0 == name)
        .map(|k| k.1)
        .unwrap_or("a valid value")
}

fn invalid(name: &'static str, value: &str) -> EnvError {
    EnvError::InvalidValue {
        name,
        value: value.to_string(),
        expected: expected(name),
    }
}

/// An `InvalidValue` error with a specific description of what is accepted.
fn invalid_because(name: &'static str, value: &str, expected: &'static str) -> EnvError {
    EnvError::InvalidValue {
        name,
        value: value.to_string(),
        expected,
    }
}

/// Whether `s` has the form [`parse_bytes`] accepts (digits and an optional suffix), so a
/// `None` from it means the number is too large.
fn bytes_syntax(s: &str) -> bool {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    digits > 0
        && matches!(
            t[digits..].trim().to_ascii_lowercase().as_str(),
            "" | "b" | "kib" | "mib" | "gib"
        )
}

/// `tracking(tracking(...))` (or `tracking(tracking)`): tracking wraps a factory once.
pub(crate) fn nested_tracking(variable: &'static str, name: &str, raw: &str) -> Option<EnvError> {
    let (tracked, inner) = parse_allocator_name(name);
    (tracked && inner.is_some_and(|i| parse_allocator_name(i).0)).then(|| {
        invalid_because(
            variable,
            raw,
            "a factory name or tracking(<name>) around one (tracking wraps once: tracking(tracking(...)) is not an allocator)",
        )
    })
}

/// Parses a byte count with an optional binary suffix (`KiB`, `MiB`, `GiB`, or `B`; case
/// insensitive, optional space): `"512MiB"` → 536870912.
pub fn parse_bytes(s: &str) -> Option<u64> {
    // One parser for the registry and the global allocator (which cannot allocate).
    global_config::parse_bytes(s.as_bytes())
}

/// Splits an allocator name as `TENSOR_ALLOC_CPU_ALLOCATOR` takes it: `(wrapped in tracking,
/// inner name)`; bare `tracking` has no inner name (the priority winner is wrapped).
pub fn parse_allocator_name(s: &str) -> (bool, Option<&str>) {
    if s == "tracking" {
        return (true, None);
    }
    match s
        .strip_prefix("tracking(")
        .and_then(|r| r.strip_suffix(')'))
    {
        Some(inner) => (true, Some(inner)),
        None => (false, Some(s)),
    }
}

fn parse_fraction(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("off") {
        return Some(0.0);
    }
    let f: f64 = t.parse().ok()?;
    (f > 0.0 && f <= 1.0).then_some(f)
}

/// TensorFlow's variables as read, applied after the native ones (they may conflict with them).
#[derive(Default)]
struct TfAliases {
    /// `TF_CPU_ALLOCATOR_USE_BFC`: the value and its raw text.
    use_bfc: Option<(bool, String)>,
    /// `TF_CPU_BFC_MEM_LIMIT_IN_MB` in bytes, and its raw text.
    memory_limit: Option<(u64, String)>,
}

/// The pairs that belong to the family (prefix or a TensorFlow alias), last value winning.
fn family_vars<I, K, V>(pairs: I) -> rust_alloc::collections::BTreeMap<String, String>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    let mut vars = rust_alloc::collections::BTreeMap::new();
    for (k, v) in pairs {
        let k = k.as_ref();
        if k.starts_with(PREFIX) || k == TF_USE_BFC || k == TF_BFC_MEM_LIMIT_MB {
            vars.insert(k.to_string(), v.as_ref().to_string());
        }
    }
    vars
}

/// `TENSOR_ALLOC_CPU_ALLOCATOR`: one allocator name, `tracking(...)` at most once.
fn parse_cpu_allocator(t: &str, v: &str) -> Result<FromVar<String>, EnvError> {
    if t.is_empty() || t.chars().any(char::is_whitespace) {
        return Err(invalid(CPU_ALLOCATOR, v));
    }
    if let Some(e) = nested_tracking(CPU_ALLOCATOR, t, v) {
        return Err(e);
    }
    Ok(FromVar {
        value: t.to_string(),
        variable: CPU_ALLOCATOR,
        raw: v.to_string(),
    })
}

/// `TENSOR_ALLOC_BFC_MEMORY_LIMIT`: a byte count above 0 with an optional suffix.
fn parse_bfc_memory_limit(t: &str, v: &str) -> Result<FromVar<u64>, EnvError> {
    let n = match parse_bytes(t) {
        Some(0) => {
            return Err(invalid_because(
                BFC_MEMORY_LIMIT,
                v,
                "a byte count above 0 (a limit of 0 bytes would refuse every allocation; unset the variable for no limit), with an optional KiB/MiB/GiB suffix",
            ))
        }
        Some(n) => n,
        None if bytes_syntax(t) => {
            return Err(invalid_because(
                BFC_MEMORY_LIMIT,
                v,
                "a byte count below 2^64 (16 EiB), with an optional KiB/MiB/GiB suffix",
            ))
        }
        None => return Err(invalid(BFC_MEMORY_LIMIT, v)),
    };
    Ok(FromVar {
        value: n,
        variable: BFC_MEMORY_LIMIT,
        raw: v.to_string(),
    })
}

/// `TENSOR_ALLOC_BFC_DIRTY_RATIO`: `off` (`None`) or a ratio in 0..=100.
fn parse_dirty_ratio(t: &str, v: &str) -> Result<Option<f64>, EnvError> {
    if t.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let r: f64 = t.parse().map_err(|_| invalid(BFC_DIRTY_RATIO, v))?;
    if !(0.0..=100.0).contains(&r) {
        return Err(invalid(BFC_DIRTY_RATIO, v));
    }
    Ok(Some(r))
}

/// `TENSOR_ALLOC_BFC_HUGE_PAGES`: `off` (`None`) or a region size in bytes.
fn parse_huge_pages(t: &str, v: &str) -> Result<Option<usize>, EnvError> {
    if t.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    parse_bytes(t)
        .and_then(|n| usize::try_from(n).ok())
        .map(Some)
        .ok_or_else(|| invalid(BFC_HUGE_PAGES, v))
}

/// `TF_CPU_BFC_MEM_LIMIT_IN_MB`: whole MiB whose byte count fits in 64 bits, above 0.
fn parse_tf_memory_limit_mb(t: &str, v: &str) -> Result<u64, EnvError> {
    const RANGE: &str = "a whole number of MiB from 1 to 17592186044415 (the byte count must fit in 64 bits; unset the variable for no limit)";
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(TF_BFC_MEM_LIMIT_MB, v));
    }
    t.parse::<u64>()
        .ok()
        .and_then(|mb| mb.checked_mul(1 << 20))
        .filter(|&b| b > 0)
        .ok_or_else(|| invalid_because(TF_BFC_MEM_LIMIT_MB, v, RANGE))
}

impl EnvConfig {
    /// Parses `(key, value)` pairs. Keys outside the family are ignored; the order of the pairs
    /// does not matter (a key given twice keeps its last value, like an environment).
    pub fn from_pairs<I, K, V>(pairs: I) -> Result<Self, EnvError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut c = EnvConfig::default();
        let mut aliases = TfAliases::default();
        for (k, v) in &family_vars(pairs) {
            c.set(k, v, &mut aliases)?;
        }
        c.check_track_agrees()?;
        c.apply_tf_use_bfc(aliases.use_bfc)?;
        c.apply_tf_memory_limit(aliases.memory_limit)?;
        Ok(c)
    }

    /// Parses one variable of the family into `self` (TensorFlow's aliases into `aliases`, applied
    /// once every native variable is known).
    fn set(&mut self, k: &str, v: &str, aliases: &mut TfAliases) -> Result<(), EnvError> {
        let t = v.trim();
        // One rule for every variable of the family: set means a value (an empty one is an
        // error, never a silent default).
        if t.is_empty() {
            if let Some(&(name, _)) = KNOWN_VARIABLES.iter().find(|known| known.0 == k) {
                return Err(invalid(name, v));
            }
        }
        match k {
            CPU_ALLOCATOR => self.cpu_allocator = Some(parse_cpu_allocator(t, v)?),
            BFC_MEMORY_LIMIT => self.bfc_memory_limit = Some(parse_bfc_memory_limit(t, v)?),
            BFC_GROWTH => {
                self.bfc_growth = Some(match t.to_ascii_lowercase().as_str() {
                    "double" => BfcGrowth::Double,
                    "exact" => BfcGrowth::Exact,
                    _ => return Err(invalid(BFC_GROWTH, v)),
                })
            }
            BFC_GC => {
                self.bfc_gc = Some(match t.to_ascii_lowercase().as_str() {
                    "on" => true,
                    "off" => false,
                    _ => return Err(invalid(BFC_GC, v)),
                })
            }
            BFC_DIRTY_RATIO => self.bfc_dirty_ratio = Some(parse_dirty_ratio(t, v)?),
            BFC_HUGE_PAGES => self.bfc_huge_pages = Some(parse_huge_pages(t, v)?),
            POOL_LIMIT => self.pool_limit = Some(t.parse().map_err(|_| invalid(POOL_LIMIT, v))?),
            TRACK => {
                let on = match t {
                    "1" => true,
                    "0" => false,
                    _ => return Err(invalid(TRACK, v)),
                };
                self.track = Some(FromVar {
                    value: on,
                    variable: TRACK,
                    raw: v.to_string(),
                });
            }
            LARGE_ALLOC_WARNING => {
                self.large_alloc_warning =
                    Some(parse_fraction(t).ok_or_else(|| invalid(LARGE_ALLOC_WARNING, v))?);
            }
            TOTAL_ALLOC_WARNING => {
                self.total_alloc_warning =
                    Some(parse_fraction(t).ok_or_else(|| invalid(TOTAL_ALLOC_WARNING, v))?);
            }
            NUMA => {
                self.numa = Some(FromVar {
                    value: NumaMode::parse(t).ok_or_else(|| invalid(NUMA, v))?,
                    variable: NUMA,
                    raw: v.to_string(),
                });
            }
            NUMA_POLICY => {
                self.numa_policy =
                    Some(NumaPolicy::parse(t).ok_or_else(|| invalid(NUMA_POLICY, v))?);
            }
            LOG => {
                // The CLI's filter: refused here rather than silently replaced by the default.
                #[cfg(feature = "cli")]
                if tracing_subscriber::EnvFilter::try_new(t).is_err() {
                    return Err(invalid(LOG, v));
                }
            }
            // Read by the global allocator itself, with the same parsers.
            GLOBAL if global_config::parse_mode(t.as_bytes()).is_none() => {
                return Err(invalid(GLOBAL, v))
            }
            GLOBAL_THRESHOLD if global_config::parse_threshold(t.as_bytes()).is_none() => {
                return Err(invalid(GLOBAL_THRESHOLD, v))
            }
            GLOBAL_LIMIT if global_config::parse_limit(t.as_bytes()).is_none() => {
                return Err(invalid(GLOBAL_LIMIT, v))
            }
            GLOBAL_HUGE_PAGES if global_config::parse_huge_pages(t.as_bytes()).is_none() => {
                return Err(invalid(GLOBAL_HUGE_PAGES, v))
            }
            GLOBAL | GLOBAL_THRESHOLD | GLOBAL_LIMIT | GLOBAL_HUGE_PAGES => {}
            ISA => {
                if !ISA_VALUES.iter().any(|i| i.eq_ignore_ascii_case(t)) {
                    return Err(invalid(ISA, v));
                }
            }
            BENCH_MODELS => {}
            STRESS => {
                if t.parse::<u64>().is_err() {
                    return Err(invalid(STRESS, v));
                }
            }
            TF_USE_BFC => {
                let b = match t.to_ascii_lowercase().as_str() {
                    "true" | "1" => true,
                    "false" | "0" => false,
                    _ => return Err(invalid(TF_USE_BFC, v)),
                };
                aliases.use_bfc = Some((b, v.to_string()));
            }
            TF_BFC_MEM_LIMIT_MB => {
                aliases.memory_limit = Some((parse_tf_memory_limit_mb(t, v)?, v.to_string()))
            }
            other => {
                return Err(EnvError::UnknownVariable {
                    name: other.to_string(),
                    value: v.to_string(),
                    suggestion: closest(other, KNOWN_VARIABLES.iter().map(|k| k.0)),
                })
            }
        }
        Ok(())
    }

    /// `TENSOR_ALLOC_TRACK=0` and a `tracking(...)` allocator name say opposite things.
    fn check_track_agrees(&self) -> Result<(), EnvError> {
        if let (Some(t), Some(ca)) = (&self.track, &self.cpu_allocator) {
            if !t.value && parse_allocator_name(&ca.value).0 {
                return Err(EnvError::Conflict {
                    alias: TRACK,
                    alias_value: t.raw.clone(),
                    native: CPU_ALLOCATOR,
                    native_value: ca.raw.clone(),
                });
            }
        }
        Ok(())
    }

    /// `TF_CPU_ALLOCATOR_USE_BFC`: names `bfc` (keeping a `tracking` wrapper) or excludes it;
    /// an error when `TENSOR_ALLOC_CPU_ALLOCATOR` names another allocator.
    fn apply_tf_use_bfc(&mut self, alias: Option<(bool, String)>) -> Result<(), EnvError> {
        let Some((use_bfc, raw)) = alias else {
            return Ok(());
        };
        let exclude = |raw| FromVar {
            value: (),
            variable: TF_USE_BFC,
            raw,
        };
        match &self.cpu_allocator {
            // `tracking` alone wraps whatever the priorities pick: the alias decides that.
            Some(native) if parse_allocator_name(&native.value).1.is_none() => {
                if use_bfc {
                    self.cpu_allocator = Some(FromVar {
                        value: "tracking(bfc)".into(),
                        variable: TF_USE_BFC,
                        raw,
                    });
                } else {
                    self.exclude_bfc = Some(exclude(raw));
                }
            }
            Some(native) => {
                let is_bfc = parse_allocator_name(&native.value).1 == Some("bfc");
                if use_bfc != is_bfc {
                    return Err(EnvError::Conflict {
                        alias: TF_USE_BFC,
                        alias_value: raw,
                        native: CPU_ALLOCATOR,
                        native_value: native.raw.clone(),
                    });
                }
            }
            None if use_bfc => {
                self.cpu_allocator = Some(FromVar {
                    value: "bfc".into(),
                    variable: TF_USE_BFC,
                    raw,
                })
            }
            None => self.exclude_bfc = Some(exclude(raw)),
        }
        Ok(())
    }

    /// `TF_CPU_BFC_MEM_LIMIT_IN_MB`: the BFC limit unless the native variable sets it; an error
    /// when both are set and disagree.
    fn apply_tf_memory_limit(&mut self, alias: Option<(u64, String)>) -> Result<(), EnvError> {
        let Some((bytes, raw)) = alias else {
            return Ok(());
        };
        match &self.bfc_memory_limit {
            Some(native) if native.value != bytes => Err(EnvError::Conflict {
                alias: TF_BFC_MEM_LIMIT_MB,
                alias_value: raw,
                native: BFC_MEMORY_LIMIT,
                native_value: native.raw.clone(),
            }),
            Some(_) => Ok(()),
            None => {
                self.bfc_memory_limit = Some(FromVar {
                    value: bytes,
                    variable: TF_BFC_MEM_LIMIT_MB,
                    raw,
                });
                Ok(())
            }
        }
    }
    /// Reads the process environment (every call reads it again; see [`process_env`]).
    pub fn from_process_env() -> Result<Self, EnvError> {
        let mut pairs = vec![];
        for (k, v) in std::env::vars_os() {
            let Some(k) = k.to_str().map(str::to_string) else {
                continue; // a non-UTF-8 name cannot be one of ours
            };
            if !(k.starts_with(PREFIX) || k == TF_USE_BFC || k == TF_BFC_MEM_LIMIT_MB) {
                continue;
            }
            let v = OsStr::to_str(&v)
                .ok_or_else(|| EnvError::NotUnicode { name: k.clone() })?
                .to_string();
            pairs.push((k, v));
        }
        Self::from_pairs(pairs)
    }

    /// Whether the CPU allocator is to be wrapped in tracking.
    pub fn tracking(&self) -> bool {
        self.track.as_ref().is_some_and(|t| t.value)
    }

    /// BFC options: defaults with the configured limit, growth, GC, huge pages and dirty-page
    /// budget applied.
    pub fn bfc_options(&self) -> BfcOptions {
        let mut o = BfcOptions::default();
        if let Some(l) = &self.bfc_memory_limit {
            o.memory_limit = Some(l.value);
        }
        if let Some(g) = self.bfc_growth {
            o.growth = g;
        }
        if let Some(gc) = self.bfc_gc {
            o.garbage_collection = gc;
        }
        if let Some(h) = self.bfc_huge_pages {
            o.pages.huge_page_min_region_bytes = h;
        }
        if let Some(r) = self.bfc_dirty_ratio {
            o.dirty_pages = r.map(|max_dirty_ratio| BfcDirtyPages {
                max_dirty_ratio,
                ..BfcDirtyPages::default()
            });
        }
        o
    }

    /// Pool options: defaults with the configured count limit applied.
    pub fn pool_options(&self) -> PoolOptions {
        let mut o = PoolOptions::default();
        if let Some(n) = self.pool_limit {
            o.max_cached_buffers = n;
        }
        o
    }

    /// CPU allocator options: defaults with the configured warning fractions (`off` = 0, which
    /// disables that warning).
    pub fn cpu_options(&self) -> CpuOptions {
        let mut o = CpuOptions::default();
        if let Some(f) = self.large_alloc_warning {
            o.large_alloc_warning_fraction = f;
        }
        if let Some(f) = self.total_alloc_warning {
            o.total_warning_fraction = f;
        }
        o
    }
}

/// The process environment, read and validated once (later changes are not seen).
pub fn process_env() -> Result<&'static EnvConfig, EnvError> {
    static ENV: once_cell::sync::OnceCell<Result<EnvConfig, EnvError>> =
        once_cell::sync::OnceCell::new();
    ENV.get_or_init(EnvConfig::from_process_env)
        .as_ref()
        .map_err(Clone::clone)
}

#[cfg(all(test, not(loom)))]
mod tests;
