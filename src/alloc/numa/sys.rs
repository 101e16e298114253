//! The Linux NUMA system calls the crate uses, through `libc::syscall`, and the constants of
//! `linux/mempolicy.h` they need (defined here so the crate does not depend on which of them a
//! given `libc` release exports).
//!
//! Every wrapper returns the raw `errno` as [`std::io::Error`]; callers decide what a failure
//! means (see [`is_unsupported`]).

use std::io;
use std::os::raw::{c_int, c_long, c_uint, c_ulong};

/// `MPOL_DEFAULT`: the process's default policy (allocate on the faulting CPU's node).
pub const MPOL_DEFAULT: c_int = 0;
/// `MPOL_PREFERRED`: allocate on the given node, fall back to others when it is full.
pub const MPOL_PREFERRED: c_int = 1;
/// `MPOL_BIND`: allocate only on the given nodes; a full node fails the page fault.
pub const MPOL_BIND: c_int = 2;
/// `get_mempolicy` flag: return the node of the page at `addr` (with [`MPOL_F_ADDR`]) instead of
/// the policy.
pub const MPOL_F_NODE: c_ulong = 1 << 0;
/// `get_mempolicy` flag: look up the policy (or node) of the address `addr`.
pub const MPOL_F_ADDR: c_ulong = 1 << 1;
/// `mbind` flag: fail if existing pages of the range do not follow the policy.
pub const MPOL_MF_STRICT: c_uint = 1 << 0;

/// The largest node number the kernel can have (`MAX_NUMNODES` with `NODES_SHIFT` = 10, the
/// largest configuration Linux supports). Node numbers above it are refused before any syscall.
pub const MAX_NODES: usize = 1024;

const WORD_BITS: usize = c_ulong::BITS as usize;

/// A node bitmask in the kernel's layout: bit `n` of the array of `unsigned long` is node `n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeMask {
    words: Vec<c_ulong>,
}

impl NodeMask {
    /// The mask with only `node` set. `node` must be below [`MAX_NODES`] (callers validate it
    /// against the topology first); larger values are clamped into a mask the kernel rejects.
    pub fn single(node: usize) -> Self {
        let node = node.min(MAX_NODES - 1);
        let mut words = vec![0; node / WORD_BITS + 1];
        words[node / WORD_BITS] = 1 << (node % WORD_BITS);
        Self { words }
    }

    /// An empty mask with room for every node the kernel can have ([`MAX_NODES`]), for the
    /// kernel to fill.
    pub fn all_nodes_capacity() -> Self {
        Self {
            words: vec![0; MAX_NODES / WORD_BITS],
        }
    }

    /// The nodes set in the mask, ascending.
    pub fn nodes(&self) -> Vec<usize> {
        (0..self.bits())
            .filter(|&n| self.words[n / WORD_BITS] & (1 << (n % WORD_BITS)) != 0)
            .collect()
    }

    /// How many node bits the mask holds (a multiple of the word size).
    pub fn bits(&self) -> usize {
        self.words.len() * WORD_BITS
    }

    /// The `maxnode` argument for this mask. The kernel decrements `maxnode` before reading
    /// (`get_nodes()` in `mm/mempolicy.c` reads `maxnode - 1` bits), so passing `bits()` would
    /// drop the highest bit: a one-word mask for node 63 would arrive empty. Passing `bits() + 1`
    /// makes the kernel read exactly the bits the mask holds.
    pub fn maxnode(&self) -> c_ulong {
        (self.bits() + 1) as c_ulong
    }

    fn as_ptr(&self) -> *const c_ulong {
        self.words.as_ptr()
    }
}

fn check(rc: c_long) -> io::Result<c_long> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `mbind(addr, len, mode, mask, maxnode, flags)`: sets the memory policy of the pages of
/// `[addr, addr + len)`. `addr` must be page aligned (the kernel refuses others with `EINVAL`).
/// Addresses are plain numbers here: the kernel looks them up, nothing dereferences them.
///
/// Only the policy changes; no memory of the range is read or written by this call, so it cannot
/// break memory safety (a foreign range merely gets another placement policy).
pub fn mbind(
    addr: usize,
    len: usize,
    mode: c_int,
    mask: &NodeMask,
    flags: c_uint,
) -> io::Result<()> {
    // SAFETY: the kernel reads `maxnode - 1` = `mask.bits()` bits from `mask.as_ptr()`, which
    // points at `mask.words` (exactly that many bits, alive for the call). The address range is
    // only looked up in the process's mappings, never dereferenced by user space.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            addr,
            len as c_ulong,
            mode as c_ulong,
            mask.as_ptr(),
            mask.maxnode(),
            flags as c_ulong,
        )
    };
    check(rc).map(drop)
}

/// The node holding the page at `addr`: `get_mempolicy(&node, NULL, 0, addr, MPOL_F_NODE |
/// MPOL_F_ADDR)`.
///
/// A page not yet touched is faulted in for reading by the kernel first (an anonymous page then
/// maps the shared zero page, whose node says nothing about the policy): touch memory before
/// asking. An unmapped `addr` is `EFAULT`.
pub fn node_of_addr(addr: usize) -> io::Result<usize> {
    let mut node: c_int = -1;
    // SAFETY: `node` is a valid `int` for the kernel to write; the nodemask pointer is null with
    // `maxnode` 0, so nothing else is written; `addr` is only looked up, not dereferenced here.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut node as *mut c_int,
            core::ptr::null_mut::<c_ulong>(),
            0 as c_ulong,
            addr,
            MPOL_F_NODE | MPOL_F_ADDR,
        )
    };
    check(rc)?;
    usize::try_from(node).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The policy of the page at `addr` and its node mask: `get_mempolicy(&mode, mask, maxnode,
/// addr, MPOL_F_ADDR)`. Does not fault the page in. `EFAULT` for an unmapped `addr`.
pub fn policy_of_addr(addr: usize) -> io::Result<(c_int, NodeMask)> {
    let mut mode: c_int = -1;
    let mut mask = NodeMask::all_nodes_capacity();
    // SAFETY: `mode` is a valid `int`; the kernel writes `maxnode - 1` = `mask.bits()` bits (the
    // same off-by-one as `mbind`) into `mask.words`, which holds exactly that many; `addr` is only
    // looked up.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut c_int,
            mask.words.as_mut_ptr(),
            mask.maxnode(),
            addr,
            MPOL_F_ADDR,
        )
    };
    check(rc)?;
    Ok((mode, mask))
}

/// `move_pages(0, n, pages, NULL, status, 0)`: with no target nodes the call moves nothing and
/// writes, per page, its node or a negative `errno` (`-ENOENT`: not present, `-EFAULT`: not
/// mapped). `status` must be as long as `pages` (`EINVAL` otherwise).
pub fn page_status(pages: &[*const u8], status: &mut [c_int]) -> io::Result<()> {
    if pages.len() != status.len() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: `pages` and `status` hold `pages.len()` elements each, alive for the call; the
    // kernel reads the page addresses (it only looks them up) and writes one `int` per page. A
    // null `nodes` array means "query only".
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0 as c_int,
            pages.len() as c_ulong,
            pages.as_ptr(),
            core::ptr::null::<c_int>(),
            status.as_mut_ptr(),
            0 as c_int,
        )
    };
    check(rc).map(drop)
}

/// The CPU the calling thread runs on (`sched_getcpu`).
pub fn current_cpu() -> io::Result<usize> {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).map_err(|_| io::Error::last_os_error())
}

/// The CPU and NUMA node the calling thread runs on, from the `getcpu` system call (the kernel's
/// own view, also on machines whose sysfs tree is not readable).
pub fn getcpu() -> io::Result<(usize, usize)> {
    let (mut cpu, mut node): (c_uint, c_uint) = (0, 0);
    // SAFETY: both out-pointers are valid `unsigned`s; the third (cache) argument may be null.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_getcpu,
            &mut cpu as *mut c_uint,
            &mut node as *mut c_uint,
            core::ptr::null_mut::<libc::c_void>(),
        )
    };
    check(rc)?;
    Ok((cpu as usize, node as usize))
}

/// Whether an error means "this kernel or sandbox does not offer NUMA policies" (`ENOSYS`: not
/// built with `CONFIG_NUMA`; `EPERM`/`EACCES`: refused by a seccomp profile, as Docker's default
/// one does without `CAP_SYS_NICE`), as opposed to a bad request.
pub fn is_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSYS) | Some(libc::EPERM) | Some(libc::EACCES)
    )
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn masks_and_the_maxnode_off_by_one() {
        let m = NodeMask::single(0);
        assert_eq!((m.words.as_slice(), m.bits()), (&[1][..], WORD_BITS));
        assert_eq!(m.maxnode() as usize, WORD_BITS + 1);
        let m = NodeMask::single(WORD_BITS - 1);
        assert_eq!(m.words, vec![1 << (WORD_BITS - 1)]);
        assert_eq!(m.maxnode() as usize, WORD_BITS + 1, "the top bit is read");
        let m = NodeMask::single(WORD_BITS + 2);
        assert_eq!(m.words, vec![0, 4]);
        assert_eq!(m.nodes(), vec![WORD_BITS + 2]);
        assert_eq!(NodeMask::all_nodes_capacity().bits(), MAX_NODES);
        assert_eq!(m.maxnode() as usize, 2 * WORD_BITS + 1);
    }

    #[test]
    fn unsupported_errors() {
        for e in [libc::ENOSYS, libc::EPERM, libc::EACCES] {
            assert!(is_unsupported(&io::Error::from_raw_os_error(e)));
        }
        for e in [libc::EINVAL, libc::ENOMEM, libc::EFAULT] {
            assert!(!is_unsupported(&io::Error::from_raw_os_error(e)));
        }
    }
}
