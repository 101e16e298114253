//! Configuration of the `#[global_allocator]`, read once from the environment without allocating
//! (`libc::getenv` and byte-slice parsing), so it can run inside the first allocation of the
//! process. Bad values fall back to the defaults and are remembered as a bit mask, for the
//! report made later, off the allocation path ([`crate::global::config_errors`]).

/// `TENSOR_ALLOC_GLOBAL`: `system` or `hybrid`.
pub const GLOBAL: &str = "TENSOR_ALLOC_GLOBAL";
/// `TENSOR_ALLOC_GLOBAL_THRESHOLD`: requests of at least this many bytes go to the large heap.
pub const GLOBAL_THRESHOLD: &str = "TENSOR_ALLOC_GLOBAL_THRESHOLD";
/// `TENSOR_ALLOC_GLOBAL_LIMIT`: most bytes in use through the global allocator.
pub const GLOBAL_LIMIT: &str = "TENSOR_ALLOC_GLOBAL_LIMIT";

/// `TENSOR_ALLOC_GLOBAL_HUGE_PAGES`: `on` asks for transparent huge pages on the large heap.
pub const GLOBAL_HUGE_PAGES: &str = "TENSOR_ALLOC_GLOBAL_HUGE_PAGES";

/// Default of `TENSOR_ALLOC_GLOBAL_THRESHOLD`: 256 KiB.
pub const DEFAULT_THRESHOLD: usize = 256 << 10;
/// Smallest accepted threshold: one 4 KiB page (the large heap hands out whole pages).
pub const MIN_THRESHOLD: u64 = 4 << 10;
/// Largest accepted threshold: 1 TiB.
pub const MAX_THRESHOLD: u64 = 1 << 40;

/// Smallest accepted `TENSOR_ALLOC_GLOBAL_LIMIT`: 1 MiB. A Rust program allocates infallibly
/// from its first line (arguments, the environment, `std`'s own start-up, log formatting), and a
/// refused infallible allocation aborts the process (`handle_alloc_error`: "memory allocation of
/// N bytes failed"). Below this limit the `tensor-alloc` commands cannot even start and report
/// an error (measured: they need up to about 100 KiB before doing any work), so a smaller value
/// is refused as a bad value (the allocator runs without a limit and the CLI refuses it at
/// start-up) instead of aborting every command.
pub const MIN_LIMIT: u64 = 1 << 20;

/// What each variable accepts (for error messages and the registry's list of variables).
pub const EXPECTED_MODE: &str = "system | hybrid";
/// What `TENSOR_ALLOC_GLOBAL_THRESHOLD` accepts.
pub const EXPECTED_THRESHOLD: &str =
    "a byte count from 4096 (4KiB) to 1TiB with an optional KiB/MiB/GiB suffix, e.g. 262144 or 256KiB";
/// What `TENSOR_ALLOC_GLOBAL_LIMIT` accepts.
pub const EXPECTED_LIMIT: &str =
    "a byte count of at least 1MiB (1048576, the smallest limit a process can start under) with an optional KiB/MiB/GiB suffix, e.g. 8GiB (unset for no limit)";

/// What `TENSOR_ALLOC_GLOBAL_HUGE_PAGES` accepts.
pub const EXPECTED_HUGE_PAGES: &str = "on | off";

/// Which backend serves what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GlobalMode {
    /// Everything from the system heap (`malloc`), counted.
    System,
    /// Requests of at least the threshold from the large-buffer heap, the rest from the system.
    Hybrid,
}

impl GlobalMode {
    /// The mode named `name` (`system` or `hybrid`, any case), as `TENSOR_ALLOC_GLOBAL` reads it.
    pub fn from_name(name: &str) -> Option<Self> {
        parse_mode(name.as_bytes())
    }
}

/// Bits of [`Config::errors`].
pub const BAD_MODE: u8 = 1;
/// Bit of a bad `TENSOR_ALLOC_GLOBAL_THRESHOLD`.
pub const BAD_THRESHOLD: u8 = 2;
/// Bit of a bad `TENSOR_ALLOC_GLOBAL_LIMIT`.
pub const BAD_LIMIT: u8 = 4;
/// Bit of a bad `TENSOR_ALLOC_GLOBAL_HUGE_PAGES`.
pub const BAD_HUGE_PAGES: u8 = 8;

/// The parsed configuration (`limit == u64::MAX`: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// `TENSOR_ALLOC_GLOBAL`.
    pub mode: GlobalMode,
    /// `TENSOR_ALLOC_GLOBAL_THRESHOLD` in bytes.
    pub threshold: usize,
    /// `TENSOR_ALLOC_GLOBAL_LIMIT` in bytes (`u64::MAX`: none).
    pub limit: u64,
    /// `TENSOR_ALLOC_GLOBAL_HUGE_PAGES`: `madvise(MADV_HUGEPAGE)` on the large heap's regions.
    pub huge_pages: bool,
    /// `BAD_*` bits of the variables whose values were refused.
    pub errors: u8,
}

/// Parses a byte count with an optional binary suffix (`B`, `KiB`, `MiB`, `GiB`; case insensitive,
/// spaces allowed around the number and before the suffix) without allocating.
pub fn parse_bytes(s: &[u8]) -> Option<u64> {
    let t = s.trim_ascii();
    let digits = t
        .iter()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(t.len());
    if digits == 0 {
        return None;
    }
    let mut n: u64 = 0;
    for &d in &t[..digits] {
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    let suffix = t[digits..].trim_ascii();
    let shift = if suffix.is_empty() || suffix.eq_ignore_ascii_case(b"b") {
        0
    } else if suffix.eq_ignore_ascii_case(b"kib") {
        10
    } else if suffix.eq_ignore_ascii_case(b"mib") {
        20
    } else if suffix.eq_ignore_ascii_case(b"gib") {
        30
    } else {
        return None;
    };
    n.checked_mul(1u64 << shift)
}

/// `TENSOR_ALLOC_GLOBAL`'s value.
pub fn parse_mode(s: &[u8]) -> Option<GlobalMode> {
    let t = s.trim_ascii();
    if t.eq_ignore_ascii_case(b"system") {
        Some(GlobalMode::System)
    } else if t.eq_ignore_ascii_case(b"hybrid") {
        Some(GlobalMode::Hybrid)
    } else {
        None
    }
}

/// `TENSOR_ALLOC_GLOBAL_THRESHOLD`'s value.
pub fn parse_threshold(s: &[u8]) -> Option<usize> {
    parse_bytes(s)
        .filter(|t| (MIN_THRESHOLD..=MAX_THRESHOLD).contains(t))
        .and_then(|t| usize::try_from(t).ok())
}

/// `TENSOR_ALLOC_GLOBAL_LIMIT`'s value.
pub fn parse_limit(s: &[u8]) -> Option<u64> {
    parse_bytes(s).filter(|&l| l >= MIN_LIMIT)
}

/// `TENSOR_ALLOC_GLOBAL_HUGE_PAGES`'s value (`on` or `off`, case insensitive).
pub fn parse_huge_pages(s: &[u8]) -> Option<bool> {
    let t = s.trim_ascii();
    if t.eq_ignore_ascii_case(b"on") {
        Some(true)
    } else if t.eq_ignore_ascii_case(b"off") {
        Some(false)
    } else {
        None
    }
}

impl Config {
    /// From `(variable, value)` lookups (`None`: unset). Unset values take the defaults; bad
    /// ones too, with their bit set in `errors`. An empty (or all-blank) value is a bad value,
    /// as it is for every variable of the family ([`crate::alloc::env`]).
    pub fn from_lookup(get: impl Fn(&str) -> Option<&'static [u8]>) -> Self {
        let mut c = Config {
            mode: GlobalMode::Hybrid,
            threshold: DEFAULT_THRESHOLD,
            limit: u64::MAX,
            huge_pages: false,
            errors: 0,
        };
        let set = |v: Option<&'static [u8]>| v;
        if let Some(v) = set(get(GLOBAL)) {
            match parse_mode(v) {
                Some(m) => c.mode = m,
                None => c.errors |= BAD_MODE,
            }
        }
        if let Some(v) = set(get(GLOBAL_THRESHOLD)) {
            match parse_threshold(v) {
                Some(t) => c.threshold = t,
                None => c.errors |= BAD_THRESHOLD,
            }
        }
        if let Some(v) = set(get(GLOBAL_LIMIT)) {
            match parse_limit(v) {
                Some(l) => c.limit = l,
                None => c.errors |= BAD_LIMIT,
            }
        }
        if let Some(v) = set(get(GLOBAL_HUGE_PAGES)) {
            match parse_huge_pages(v) {
                Some(h) => c.huge_pages = h,
                None => c.errors |= BAD_HUGE_PAGES,
            }
        }
        c
    }

    /// From the process environment through `libc::getenv` (no allocation).
    pub fn from_process_env() -> Self {
        Self::from_lookup(getenv)
    }
}

/// `getenv(name)` for a name known at compile time, as bytes; never allocates.
pub(crate) fn getenv(name: &str) -> Option<&'static [u8]> {
    // Names are short constants: a NUL-terminated copy on the stack.
    let mut buf = [0u8; 64];
    let b = name.as_bytes();
    if b.len() >= buf.len() {
        return None;
    }
    buf[..b.len()].copy_from_slice(b);
    // SAFETY: `buf` is NUL-terminated (zero-filled beyond the name). getenv returns a pointer into
    // the environment block or null; the environment is not modified by this crate, and the value
    // is read at once (treated as 'static for the duration of the parse only).
    let p = unsafe { libc::getenv(buf.as_ptr().cast()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: a non-null getenv result is a NUL-terminated C string.
    Some(unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn cfg(pairs: &'static [(&'static str, &'static str)]) -> Config {
        Config::from_lookup(|k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.as_bytes())
        })
    }

    #[test]
    fn defaults_and_good_values() {
        let c = cfg(&[]);
        assert_eq!(
            (c.mode, c.threshold, c.limit, c.huge_pages, c.errors),
            (GlobalMode::Hybrid, 256 << 10, u64::MAX, false, 0)
        );
        let c = cfg(&[
            (GLOBAL, " System "),
            (GLOBAL_THRESHOLD, "1 MiB"),
            (GLOBAL_LIMIT, "8GiB"),
            (GLOBAL_HUGE_PAGES, " ON"),
        ]);
        assert_eq!(
            (c.mode, c.threshold, c.limit, c.huge_pages, c.errors),
            (GlobalMode::System, 1 << 20, 8 << 30, true, 0)
        );
        assert!(!cfg(&[(GLOBAL_HUGE_PAGES, "off")]).huge_pages);
        assert_eq!(cfg(&[(GLOBAL, "")]).errors, BAD_MODE);
        assert_eq!(cfg(&[(GLOBAL_LIMIT, " ")]).errors, BAD_LIMIT);
        assert_eq!(cfg(&[(GLOBAL_LIMIT, "1MiB")]).limit, MIN_LIMIT);
    }

    #[test]
    fn bad_values_fall_back_and_are_flagged() {
        let c = cfg(&[
            (GLOBAL, "jemalloc"),
            (GLOBAL_THRESHOLD, "12"),
            (GLOBAL_LIMIT, "0"),
            (GLOBAL_HUGE_PAGES, "yes"),
        ]);
        assert_eq!(
            c.errors,
            BAD_MODE | BAD_THRESHOLD | BAD_LIMIT | BAD_HUGE_PAGES
        );
        assert_eq!(
            (c.mode, c.threshold, c.limit, c.huge_pages),
            (GlobalMode::Hybrid, DEFAULT_THRESHOLD, u64::MAX, false)
        );
        assert_eq!(parse_bytes(b"99999999999999999999"), None);
        assert_eq!(parse_bytes(b"17179869184GiB"), None);
        assert_eq!(parse_bytes(b"4 kb"), None);
        assert_eq!(parse_bytes(b"64KiB"), Some(64 << 10));
        assert_eq!(parse_threshold(b"2TiB"), None);
        for low in [&b"1"[..], b"1KiB", b"64KiB", b"1048575"] {
            assert_eq!(parse_limit(low), None, "{low:?}");
        }
    }
}
