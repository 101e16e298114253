//! The machine's NUMA topology as Linux describes it under `/sys/devices/system/node`:
//!
//! ```text
//! online            node list, e.g. "0-1" or "0,2-3"
//! node<N>/cpulist   CPU list of node N, e.g. "0-7,16-23" (empty for a memory-only node)
//! node<N>/meminfo   "Node <N> MemTotal:  <kB> kB" among other lines
//! ```
//!
//! The root is a parameter ([`Topology::from_sysfs`]) so tests present fake machines;
//! [`Topology::system`] reads the real tree once per process. Parsing is strict: malformed content
//! is a [`TopologyError`] naming the file, the content and what was expected, never a panic or a
//! silent default. A kernel without NUMA support has no such directory; the machine is then one
//! node holding every CPU and all RAM ([`TopologySource::Fallback`]).

use super::sys::{self, MAX_NODES};
use super::NumaError;
use std::path::{Path, PathBuf};

/// Where Linux publishes the node topology.
pub const SYSFS_NODE_ROOT: &str = "/sys/devices/system/node";

/// CPU numbers at or above this are refused as malformed (Linux's `NR_CPUS` is at most 8192);
/// it bounds what a corrupt list such as `0-4294967295` can make the parser allocate.
pub const MAX_CPUS: usize = 1 << 16;

/// One online node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node number.
    pub id: usize,
    /// Its CPUs, ascending (empty for a memory-only node).
    pub cpus: Vec<usize>,
    /// Its memory (`MemTotal` of its `meminfo`), in bytes.
    pub mem_total_bytes: u64,
}

/// Where a [`Topology`] came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologySource {
    /// Read from this sysfs node directory.
    Sysfs(PathBuf),
    /// Not read: one node with every CPU and all RAM; the text says why.
    Fallback(String),
    /// Described in code ([`Topology::from_nodes`]).
    Given,
}

/// The online NUMA nodes, ascending by id. Never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    nodes: Vec<NodeInfo>,
    source: TopologySource,
}

/// Malformed or unreadable topology files. Each message names the file and, for content, the
/// text found and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// A file could not be read.
    #[error("cannot read NUMA topology file {}: {message}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
    /// A file's content does not parse.
    #[error("malformed NUMA topology file {}: {content:?} is not {expected}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The offending content (trimmed, at most 80 characters).
        content: String,
        /// What the file should hold.
        expected: String,
    },
}

/// What a node or CPU list looks like (the kernel's `%*pbl` format).
pub const LIST_FORM: &str = "a list of numbers and ascending ranges such as 0-3,8,10-11";

/// Parses the kernel's list format (`0-3,8,10-11`; empty = no members) into ascending, distinct
/// numbers below `limit`. The error says what is wrong with which item.
pub fn parse_list(text: &str, limit: usize) -> Result<Vec<usize>, String> {
    let text = text.trim();
    let mut out = Vec::new();
    if text.is_empty() {
        return Ok(out);
    }
    let number = |s: &str| -> Result<usize, String> {
        let s = s.trim();
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{LIST_FORM} ({s:?} is not a number)"));
        }
        match s.parse::<usize>() {
            Ok(n) if n < limit => Ok(n),
            _ => Err(format!(
                "{LIST_FORM} with numbers below {limit} ({s} is too large)"
            )),
        }
    };
    for item in text.split(',') {
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let n = number(item)?;
                (n, n)
            }
        };
        if lo > hi {
            return Err(format!("{LIST_FORM} (range {:?} goes down)", item.trim()));
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The `MemTotal` of `node` from a node `meminfo` text, in bytes.
pub fn parse_meminfo(text: &str, node: usize) -> Result<u64, String> {
    let expected = || format!("a node meminfo with a line \"Node {node} MemTotal: <number> kB\"");
    for line in text.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        if t.len() >= 3 && t[0] == "Node" && t[2] == "MemTotal:" {
            return match t.as_slice() {
                [_, id, _, kb, "kB"] if id.parse() == Ok(node) => kb
                    .parse::<u64>()
                    .ok()
                    .and_then(|kb| kb.checked_mul(1024))
                    .ok_or_else(expected),
                _ => Err(expected()),
            };
        }
    }
    Err(expected())
}

fn snippet(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_string(),
    }
}

fn read(path: PathBuf) -> Result<(PathBuf, String), TopologyError> {
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok((path, text)),
        Err(e) => Err(TopologyError::Read {
            path,
            message: e.to_string(),
        }),
    }
}

fn malformed(path: PathBuf, text: &str, expected: String) -> TopologyError {
    TopologyError::Malformed {
        path,
        content: snippet(text),
        expected,
    }
}

impl Topology {
    /// Reads a sysfs node directory laid out as `/sys/devices/system/node` (see the module docs).
    /// Errors: a missing or unreadable file, a malformed list or `meminfo`, an empty `online`
    /// list, or a CPU claimed by two nodes.
    pub fn from_sysfs(root: impl AsRef<Path>) -> Result<Self, TopologyError> {
        let root = root.as_ref();
        let (path, text) = read(root.join("online"))?;
        let ids = parse_list(&text, MAX_NODES).map_err(|e| malformed(path.clone(), &text, e))?;
        if ids.is_empty() {
            return Err(malformed(
                path,
                &text,
                "a non-empty list of online nodes".into(),
            ));
        }
        let mut nodes: Vec<NodeInfo> = Vec::with_capacity(ids.len());
        for id in ids {
            let dir = root.join(format!("node{id}"));
            let (path, text) = read(dir.join("cpulist"))?;
            let cpus =
                parse_list(&text, MAX_CPUS).map_err(|e| malformed(path.clone(), &text, e))?;
            if let Some((cpu, other)) = cpus.iter().find_map(|c| {
                nodes
                    .iter()
                    .find(|n| n.cpus.binary_search(c).is_ok())
                    .map(|n| (*c, n.id))
            }) {
                let why = format!(
                    "a CPU list disjoint from the other nodes' (CPU {cpu} is also on node {other})"
                );
                return Err(malformed(path, &text, why));
            }
            let (path, text) = read(dir.join("meminfo"))?;
            let mem_total_bytes =
                parse_meminfo(&text, id).map_err(|e| malformed(path.clone(), &text, e))?;
            nodes.push(NodeInfo {
                id,
                cpus,
                mem_total_bytes,
            });
        }
        Ok(Self {
            nodes,
            source: TopologySource::Sysfs(root.to_path_buf()),
        })
    }

    /// A topology described in code: `None` unless `nodes` is non-empty with ascending, distinct
    /// ids below the kernel's node limit.
    pub fn from_nodes(nodes: Vec<NodeInfo>) -> Option<Self> {
        let ascending = nodes.windows(2).all(|w| w[0].id < w[1].id);
        let bounded = nodes.last().is_some_and(|n| n.id < MAX_NODES);
        (ascending && bounded).then_some(Self {
            nodes,
            source: TopologySource::Given,
        })
    }

    /// One node (0) with `cpus` CPUs and `mem_total_bytes` of memory: the view of a machine or
    /// kernel without NUMA.
    pub fn single_node(cpus: usize, mem_total_bytes: u64, why: impl Into<String>) -> Self {
        Self {
            nodes: vec![NodeInfo {
                id: 0,
                cpus: (0..cpus.max(1)).collect(),
                mem_total_bytes,
            }],
            source: TopologySource::Fallback(why.into()),
        }
    }

    /// Reads [`SYSFS_NODE_ROOT`]. A missing directory (a kernel built without NUMA) gives the
    /// one-node view; malformed content is an error.
    pub fn detect() -> Result<Self, TopologyError> {
        let root = Path::new(SYSFS_NODE_ROOT);
        if !root.join("online").exists() {
            // SAFETY: sysconf has no preconditions.
            let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
            return Ok(Self::single_node(
                usize::try_from(cpus).unwrap_or(1),
                crate::alloc::cpu::physical_ram_bytes(),
                format!("{SYSFS_NODE_ROOT}/online does not exist (kernel without NUMA support)"),
            ));
        }
        Self::from_sysfs(root)
    }

    /// The machine's topology, read once per process. If the tree is malformed the one-node view
    /// is used and the error is logged once (`tracing` warning): allocation must not fail over a
    /// description of the machine.
    pub fn system() -> &'static Topology {
        static SYSTEM: once_cell::sync::OnceCell<Topology> = once_cell::sync::OnceCell::new();
        SYSTEM.get_or_init(|| match Self::detect() {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "NUMA topology unreadable; treating the machine as one node");
                Self::single_node(1, crate::alloc::cpu::physical_ram_bytes(), e.to_string())
            }
        })
    }

    /// The online nodes, ascending by id (never empty).
    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    /// The online node ids, ascending.
    pub fn node_ids(&self) -> Vec<usize> {
        self.nodes.iter().map(|n| n.id).collect()
    }

    /// The node `id`, if online.
    pub fn node(&self, id: usize) -> Option<&NodeInfo> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Whether `id` is an online node.
    pub fn is_online(&self, id: usize) -> bool {
        self.node(id).is_some()
    }

    /// Whether there is more than one online node (binding memory can make a difference).
    pub fn is_numa(&self) -> bool {
        self.nodes.len() > 1
    }

    /// Where the description came from.
    pub fn source(&self) -> &TopologySource {
        &self.source
    }

    /// The node of `cpu`, if some node lists it.
    pub fn node_of_cpu(&self, cpu: usize) -> Option<usize> {
        self.nodes
            .iter()
            .find(|n| n.cpus.binary_search(&cpu).is_ok())
            .map(|n| n.id)
    }

    /// Errors unless `node` is online: the error lists the online nodes.
    pub fn check_online(&self, node: usize) -> Result<(), NumaError> {
        if self.is_online(node) {
            Ok(())
        } else {
            Err(NumaError::NodeNotOnline {
                node,
                online: self.node_ids(),
            })
        }
    }

    /// The node of the CPU the calling thread runs on: `sched_getcpu` mapped through this
    /// topology's CPU lists (`getcpu`'s CPU number if `sched_getcpu` fails). The answer can be
    /// stale as soon as it is returned: the scheduler may move the thread.
    pub fn current_node(&self) -> Result<usize, NumaError> {
        let cpu = sys::current_cpu()
            .or_else(|_| sys::getcpu().map(|(cpu, _)| cpu))
            .map_err(|e| NumaError::Syscall {
                call: "sched_getcpu",
                message: e.to_string(),
            })?;
        self.node_of_cpu(cpu).ok_or(NumaError::CpuWithoutNode {
            cpu,
            online: self.node_ids(),
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn lists() {
        assert_eq!(
            parse_list("0-3,8,10-11\n", 64),
            Ok(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_list("", 64), Ok(vec![]));
        assert_eq!(parse_list("\n", 64), Ok(vec![]));
        assert_eq!(parse_list("5,1-2,2", 64), Ok(vec![1, 2, 5]));
        for (bad, why) in [
            ("3-1", "goes down"),
            ("0-", "not a number"),
            ("a", "not a number"),
            ("1,,2", "not a number"),
            ("-1", "not a number"),
            ("0-99999999999999999999", "too large"),
            ("64", "too large"),
        ] {
            let e = parse_list(bad, 64).unwrap_err();
            assert!(e.contains(why) && e.contains("0-3,8,10-11"), "{bad}: {e}");
        }
    }

    #[test]
    fn meminfo() {
        let text = "Node 1 MemTotal:       16384 kB\nNode 1 MemFree:  100 kB\n";
        assert_eq!(parse_meminfo(text, 1), Ok(16384 * 1024));
        for bad in [
            "Node 0 MemTotal: 16384 kB",
            "Node 1 MemTotal: lots kB",
            "Node 1 MemTotal: 16384 MB",
            "Node 1 MemFree: 5 kB",
            "",
        ] {
            let e = parse_meminfo(bad, 1).unwrap_err();
            assert!(e.contains("Node 1 MemTotal"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn single_node_view_and_lookups() {
        let t = Topology::single_node(4, 1 << 30, "test");
        assert_eq!(t.node_ids(), vec![0]);
        assert!(!t.is_numa());
        assert_eq!(t.node_of_cpu(3), Some(0));
        assert_eq!(t.node_of_cpu(4), None);
        assert!(t.check_online(0).is_ok());
        let e = t.check_online(2).unwrap_err().to_string();
        assert!(e.contains("node 2") && e.contains("online nodes: 0"), "{e}");
    }

    #[test]
    fn snippets_are_short() {
        let long = "9".repeat(200);
        assert_eq!(snippet(&long).chars().count(), 81);
        assert_eq!(snippet(" 0-1\n"), "0-1");
    }
}
