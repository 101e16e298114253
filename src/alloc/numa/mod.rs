//! NUMA: the machine's topology, memory bound to a node, the check of where pages really are,
//! and the per-node allocator plan of the registry.
//!
//! - [`Topology`]: online nodes with their CPUs and memory, from `/sys/devices/system/node` (or an
//!   injected root, for tests); [`current_node`] is the calling thread's node.
//! - [`NumaSubAllocator`]: page-aligned anonymous `mmap` bound to one node with `mbind`
//!   (`MPOL_BIND`, or `MPOL_PREFERRED` through [`NumaPolicy`]); the region is not touched before it
//!   is bound, so its first fault already follows the policy.
//! - [`node_of`] / [`nodes_of_pages`]: where the kernel placed memory (`get_mempolicy` /
//!   `move_pages`).
//! - [`NumaMode`] / [`NumaPlan`]: `TENSOR_ALLOC_NUMA` (`auto` | `off` | a node list) resolved
//!   against the topology; `registry::cpu_allocator(Some(node))` then builds one allocator per
//!   node on that node's sub-allocator ([`SubFactories`]: NUMA-capable sub-allocator factories win
//!   the lookup over the others, TensorFlow's rule).
//!
//! # Degraded machines
//! With one online node, `auto` hands out the shared allocator for every node. When the kernel or
//! sandbox refuses memory policies (`mbind` → `ENOSYS`, `EPERM`, `EACCES`: a kernel without
//! `CONFIG_NUMA`, Docker's default seccomp profile), node-bound sub-allocators keep working on
//! plain `mmap`. Each of the two cases logs one `tracing` notice per process and is never an
//! error; [`binding_status`] reports which applies.

mod factory;
mod sub;
pub mod sys;
mod topology;

pub(crate) use factory::numa_capable;
pub use factory::{plan, NumaPlan, SubConstructor, SubContext, SubFactories, SubFactory};
pub use sub::NumaSubAllocator;
pub use topology::{
    parse_list, parse_meminfo, NodeInfo, Topology, TopologyError, TopologySource, LIST_FORM,
    MAX_CPUS, SYSFS_NODE_ROOT,
};

// Process-wide facts about the kernel (not shared data the loom models explore): std atomics.
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, Ordering};

/// `TENSOR_ALLOC_NUMA`: whether `cpu_allocator(Some(node))` builds per-node allocators.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NumaMode {
    /// Per-node allocators on every online node when there are at least two; otherwise off.
    #[default]
    Auto,
    /// Never: every node gets the shared allocator.
    Off,
    /// Per-node allocators on exactly these nodes (ascending, distinct), even on a one-node
    /// machine; each must be online.
    Nodes(Vec<usize>),
}

impl NumaMode {
    /// Parses `auto`, `off` (case-insensitive) or a node list such as `0` or `0,2-3`.
    pub fn parse(text: &str) -> Option<Self> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("auto") {
            return Some(Self::Auto);
        }
        if t.eq_ignore_ascii_case("off") {
            return Some(Self::Off);
        }
        match parse_list(t, sys::MAX_NODES) {
            Ok(nodes) if !nodes.is_empty() => Some(Self::Nodes(nodes)),
            _ => None,
        }
    }
}

/// How node-bound memory is placed (`TENSOR_ALLOC_NUMA_POLICY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NumaPolicy {
    /// `MPOL_BIND`: pages only ever come from the node. When the node is full, the page fault
    /// fails (the process gets the OOM killer or `SIGBUS`), not the allocation call.
    #[default]
    Bind,
    /// `MPOL_PREFERRED`: the node first, other nodes when it is full. Never fails for placement,
    /// but locality is not guaranteed.
    Preferred,
}

impl NumaPolicy {
    /// Parses `bind` or `preferred` (case-insensitive).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "bind" => Some(Self::Bind),
            "preferred" => Some(Self::Preferred),
            _ => None,
        }
    }

    /// The `mbind` mode.
    pub fn mode(self) -> std::os::raw::c_int {
        match self {
            Self::Bind => sys::MPOL_BIND,
            Self::Preferred => sys::MPOL_PREFERRED,
        }
    }

    /// `MPOL_BIND` or `MPOL_PREFERRED`.
    pub fn mode_name(self) -> &'static str {
        match self {
            Self::Bind => "MPOL_BIND",
            Self::Preferred => "MPOL_PREFERRED",
        }
    }
}

/// A NUMA error: names the node, the variable or the system call, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumaError {
    /// The topology files are malformed or unreadable.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A node was requested that is not online.
    #[error("NUMA node {node} is not online (online nodes: {})", format_list(.online))]
    NodeNotOnline {
        /// The requested node.
        node: usize,
        /// The online nodes.
        online: Vec<usize>,
    },
    /// The node list of a variable names a node that is not online.
    #[error(
        "{variable}={value:?} names NUMA node {node}, which is not online (online nodes: {}); \
         expected auto, off, or a list of online nodes",
        format_list(.online)
    )]
    ConfiguredNodeNotOnline {
        /// The variable.
        variable: &'static str,
        /// Its raw value.
        value: String,
        /// The offending node.
        node: usize,
        /// The online nodes.
        online: Vec<usize>,
    },
    /// A node is online but the configured list leaves it out.
    #[error(
        "NUMA node {node} is not among the nodes enabled by {variable}={value:?} ({}); \
         add it to the list or use auto",
        format_list(.enabled)
    )]
    NodeNotEnabled {
        /// The requested node.
        node: usize,
        /// The variable.
        variable: &'static str,
        /// Its raw value.
        value: String,
        /// The enabled nodes.
        enabled: Vec<usize>,
    },
    /// The calling CPU is on no node of the topology.
    #[error("CPU {cpu} belongs to no online NUMA node (online nodes: {})", format_list(.online))]
    CpuWithoutNode {
        /// The CPU.
        cpu: usize,
        /// The online nodes.
        online: Vec<usize>,
    },
    /// The kernel or sandbox offers no NUMA memory policies.
    #[error("{call} is not available ({message}): this kernel or sandbox does not expose NUMA memory policies")]
    Unsupported {
        /// The system call.
        call: &'static str,
        /// The OS error.
        message: String,
    },
    /// A system call failed for another reason.
    #[error("{call} failed: {message}")]
    Syscall {
        /// The system call.
        call: &'static str,
        /// The OS error.
        message: String,
    },
}

impl NumaError {
    fn from_io(call: &'static str, e: &std::io::Error) -> Self {
        if sys::is_unsupported(e) {
            Self::Unsupported {
                call,
                message: e.to_string(),
            }
        } else {
            Self::Syscall {
                call,
                message: e.to_string(),
            }
        }
    }
}

/// Formats ascending numbers in the kernel's list form: `[0, 2, 3, 4]` → `"0,2-4"`.
pub fn format_list(items: &[usize]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < items.len() {
        let mut j = i;
        while j + 1 < items.len() && items[j + 1] == items[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(&items[i].to_string());
        if j > i {
            out.push('-');
            out.push_str(&items[j].to_string());
        }
        i = j + 1;
    }
    out
}

/// The NUMA node of the CPU the calling thread runs on, per [`Topology::system`].
pub fn current_node() -> Result<usize, NumaError> {
    Topology::system().current_node()
}

/// The node holding the page that contains `ptr` (`get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR)`).
/// Touch the page first: an untouched anonymous page is faulted in as the shared zero page.
/// [`NumaError::Unsupported`] where the sandbox refuses the call.
pub fn node_of(ptr: *const u8) -> Result<usize, NumaError> {
    let page = (ptr as usize) & !(crate::alloc::sub::page_size() - 1);
    sys::node_of_addr(page).map_err(|e| NumaError::from_io("get_mempolicy", &e))
}

/// The memory policy of the page containing `ptr`, as the kernel reports it (`get_mempolicy`
/// with `MPOL_F_ADDR`): the proof that a range was bound, even on a one-node machine where the
/// node of every page is 0 anyway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagePolicy {
    /// `MPOL_DEFAULT`, `MPOL_PREFERRED`, `MPOL_BIND`, … (see [`sys`]).
    pub mode: i32,
    /// The policy's nodes, ascending (empty for `MPOL_DEFAULT`).
    pub nodes: Vec<usize>,
}

impl PagePolicy {
    /// The mode's name (`MPOL_BIND`, …), or `"other"`.
    pub fn mode_name(&self) -> &'static str {
        match self.mode {
            sys::MPOL_DEFAULT => "MPOL_DEFAULT",
            sys::MPOL_PREFERRED => "MPOL_PREFERRED",
            sys::MPOL_BIND => "MPOL_BIND",
            _ => "other",
        }
    }
}

/// The policy of the page containing `ptr` (see [`PagePolicy`]). [`NumaError::Unsupported`]
/// where the sandbox refuses the call.
pub fn policy_of(ptr: *const u8) -> Result<PagePolicy, NumaError> {
    let page = (ptr as usize) & !(crate::alloc::sub::page_size() - 1);
    let (mode, mask) =
        sys::policy_of_addr(page).map_err(|e| NumaError::from_io("get_mempolicy", &e))?;
    Ok(PagePolicy {
        mode,
        nodes: mask.nodes(),
    })
}

/// The node of every page of `[ptr, ptr + len)` (`move_pages` with no target nodes; nothing
/// moves). `None` for a page that is not resident. [`NumaError::Unsupported`] where the
/// sandbox refuses the call.
pub fn nodes_of_pages(ptr: *const u8, len: usize) -> Result<Vec<Option<usize>>, NumaError> {
    let page = crate::alloc::sub::page_size();
    let start = (ptr as usize) & !(page - 1);
    let end = (ptr as usize).saturating_add(len);
    // Addresses for the kernel to look up; nothing dereferences them here.
    let pages: Vec<*const u8> = (start..end)
        .step_by(page)
        .map(core::ptr::without_provenance::<u8>)
        .collect();
    let mut status = vec![0; pages.len()];
    sys::page_status(&pages, &mut status).map_err(|e| NumaError::from_io("move_pages", &e))?;
    let mut out = Vec::with_capacity(status.len());
    for s in status {
        match usize::try_from(s) {
            Ok(node) => out.push(Some(node)),
            Err(_) if s == -libc::ENOENT => out.push(None),
            Err(_) => {
                let e = std::io::Error::from_raw_os_error(-s);
                return Err(NumaError::from_io("move_pages", &e));
            }
        }
    }
    Ok(out)
}

const UNKNOWN: u8 = 0;
const WORKS: u8 = 1;
const UNAVAILABLE: u8 = 2;

/// Whether `mbind` has worked in this process: `Some(true)` after a successful binding,
/// `Some(false)` once the kernel or sandbox refused it (node-bound sub-allocators then use plain
/// `mmap` for the rest of the process), `None` before the first attempt.
pub fn binding_status() -> Option<bool> {
    match BINDING.load(Ordering::Relaxed) {
        WORKS => Some(true),
        UNAVAILABLE => Some(false),
        _ => None,
    }
}

/// Makes every later `mbind` of the node-bound sub-allocators fail with `errno` (0 restores the
/// real call). For tests of the degraded path on machines where binding works.
#[doc(hidden)]
pub fn simulate_binding_error(errno: i32) {
    SIMULATED_ERRNO.store(errno, Ordering::Relaxed);
}

static BINDING: AtomicU8 = AtomicU8::new(UNKNOWN);
static SIMULATED_ERRNO: AtomicI32 = AtomicI32::new(0);
static NOTICE_UNAVAILABLE: AtomicBool = AtomicBool::new(false);
static NOTICE_ONE_NODE: AtomicBool = AtomicBool::new(false);

fn binding_unavailable() -> bool {
    BINDING.load(Ordering::Relaxed) == UNAVAILABLE
}

fn simulated_errno() -> Option<std::io::Error> {
    match SIMULATED_ERRNO.load(Ordering::Relaxed) {
        0 => None,
        e => Some(std::io::Error::from_raw_os_error(e)),
    }
}

fn binding_worked() {
    let _ = BINDING.compare_exchange(UNKNOWN, WORKS, Ordering::Relaxed, Ordering::Relaxed);
}

/// Records that the kernel refused `mbind`; logs the notice once per process.
fn binding_refused(e: &std::io::Error, node: usize) {
    BINDING.store(UNAVAILABLE, Ordering::Relaxed);
    if !NOTICE_UNAVAILABLE.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            node,
            error = %e,
            "mbind is not available (kernel without NUMA or a sandbox refusing memory policies); \
             node-bound memory falls back to plain mmap for the rest of the process"
        );
    }
}

/// Logs once per process that `auto` found one node and hands out the shared allocator.
fn notice_one_node(topology: &Topology) {
    if !NOTICE_ONE_NODE.swap(true, Ordering::Relaxed) {
        tracing::info!(
            online = %format_list(&topology.node_ids()),
            "NUMA: one online node; per-node allocators are off (TENSOR_ALLOC_NUMA=auto)"
        );
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn modes_and_policies() {
        assert_eq!(NumaMode::parse(" AUTO "), Some(NumaMode::Auto));
        assert_eq!(NumaMode::parse("off"), Some(NumaMode::Off));
        assert_eq!(
            NumaMode::parse("0,2-3"),
            Some(NumaMode::Nodes(vec![0, 2, 3]))
        );
        for bad in ["", "on", "3-1", "0,", "1024", "-1", "all"] {
            assert_eq!(NumaMode::parse(bad), None, "{bad:?}");
        }
        assert_eq!(NumaPolicy::parse("Preferred"), Some(NumaPolicy::Preferred));
        assert_eq!(
            NumaPolicy::parse("bind").map(NumaPolicy::mode),
            Some(sys::MPOL_BIND)
        );
        assert_eq!(NumaPolicy::parse("interleave"), None);
    }

    #[test]
    fn lists_format_like_the_kernel() {
        assert_eq!(format_list(&[]), "");
        assert_eq!(format_list(&[0]), "0");
        assert_eq!(format_list(&[0, 2, 3, 4, 7, 8]), "0,2-4,7-8");
        let e = NumaError::NodeNotOnline {
            node: 5,
            online: vec![0, 1, 2, 3],
        };
        assert_eq!(
            e.to_string(),
            "NUMA node 5 is not online (online nodes: 0-3)"
        );
    }
}
