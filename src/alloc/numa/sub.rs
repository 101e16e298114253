//! [`NumaSubAllocator`]: regions of anonymous `mmap` bound to one NUMA node with `mbind`.

use super::sys::{self, NodeMask};
use super::{NumaError, NumaPolicy, Topology};
use crate::alloc::sub::{SubAllocator, SubVisitor, Visitors};
use crate::alloc::{AllocatorError, MmapSubAllocator};
use core::ptr::NonNull;

/// Hands out page-aligned anonymous mappings bound to one node.
///
/// Each region is mapped (untouched: no page exists yet), then bound with `mbind` to the node
/// under the configured [`NumaPolicy`], and only then handed out, so every page faulted in by the
/// user follows the policy. Freeing unmaps. Visitors receive the node as their index.
///
/// Trade-offs: one extra system call per region (caching allocators above it ask for few, large
/// regions); regions are page granular. If the kernel or sandbox refuses `mbind` (`ENOSYS`,
/// `EPERM`, `EACCES`), regions stay plain `mmap` from then on with one notice per process (see
/// [`binding_status`](super::binding_status)); any other `mbind` failure (e.g. `EINVAL` for a node
/// the process's cpuset excludes) unmaps the region and is an error.
pub struct NumaSubAllocator {
    node: usize,
    policy: NumaPolicy,
    mask: NodeMask,
    map: MmapSubAllocator,
    visitors: Visitors,
    name: String,
}

impl core::fmt::Debug for NumaSubAllocator {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("NumaSubAllocator")
            .field("node", &self.node)
            .field("policy", &self.policy)
            .field("visitors", &self.visitors)
            .finish()
    }
}

impl NumaSubAllocator {
    /// Memory bound to `node` (`MPOL_BIND`), which must be online on this machine
    /// ([`Topology::system`]).
    pub fn new(node: usize) -> Result<Self, NumaError> {
        Self::for_topology(node, Topology::system())
    }

    /// Memory bound to `node`, which must be online in `topology`.
    pub fn for_topology(node: usize, topology: &Topology) -> Result<Self, NumaError> {
        topology.check_online(node)?;
        Ok(Self {
            node,
            policy: NumaPolicy::Bind,
            mask: NodeMask::single(node),
            map: MmapSubAllocator::new(),
            visitors: Visitors::default(),
            name: format!("numa({node})"),
        })
    }

    /// Uses `policy` instead of `MPOL_BIND` (builder style).
    pub fn with_policy(mut self, policy: NumaPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Adds an alloc visitor (builder style).
    pub fn with_alloc_visitor(mut self, v: SubVisitor) -> Self {
        self.visitors.on_alloc(v);
        self
    }

    /// Adds a free visitor (builder style).
    pub fn with_free_visitor(mut self, v: SubVisitor) -> Self {
        self.visitors.on_free(v);
        self
    }

    /// The node.
    pub fn node(&self) -> usize {
        self.node
    }

    /// The placement policy.
    pub fn policy(&self) -> NumaPolicy {
        self.policy
    }

    /// Binds a fresh, untouched region; `Ok` also when binding is unavailable (degraded).
    fn bind(&self, ptr: NonNull<u8>, len: usize, alignment: usize) -> Result<(), AllocatorError> {
        if super::binding_unavailable() {
            return Ok(());
        }
        let result = match super::simulated_errno() {
            Some(e) => Err(e),
            None => sys::mbind(
                ptr.as_ptr() as usize,
                len,
                self.policy.mode(),
                &self.mask,
                0,
            ),
        };
        match result {
            Ok(()) => {
                super::binding_worked();
                Ok(())
            }
            Err(e) if sys::is_unsupported(&e) => {
                super::binding_refused(&e, self.node);
                Ok(())
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => Err(AllocatorError::OutOfMemory {
                allocator: self.name.clone(),
                size: len,
                align: alignment,
                bytes_in_use: 0,
                limit: None,
                largest_free_chunk: None,
            }),
            Err(e) => Err(AllocatorError::InvalidRequest {
                allocator: self.name.clone(),
                size: len,
                align: alignment,
                reason: format!(
                    "mbind({}, node {}) failed: {e}; the kernel does not let this process place memory on that node",
                    self.policy.mode_name(),
                    self.node
                ),
            }),
        }
    }
}

impl SubAllocator for NumaSubAllocator {
    fn alloc(
        &self,
        alignment: usize,
        num_bytes: usize,
    ) -> Result<(NonNull<u8>, usize), AllocatorError> {
        // The mmap sub-allocator validates the alignment, rounds to pages and never touches the
        // mapping, so binding below happens before the first page fault.
        let (ptr, len) = self
            .map
            .alloc(alignment, num_bytes)
            .map_err(|e| rename(e, &self.name))?;
        if let Err(e) = self.bind(ptr, len, alignment) {
            // SAFETY: `ptr`/`len` is the region just received from `self.map`, never handed out.
            unsafe { self.map.free(ptr, len) };
            return Err(e);
        }
        self.visitors.visit_alloc(ptr, self.node, len);
        Ok((ptr, len))
    }

    unsafe fn free(&self, ptr: NonNull<u8>, num_bytes: usize) {
        self.visitors.visit_free(ptr, self.node, num_bytes);
        // SAFETY: the caller guarantees `ptr`/`num_bytes` is a whole region from `alloc`, which
        // got it from `self.map` with that received size.
        unsafe { self.map.free(ptr, num_bytes) }
    }

    fn supports_coalescing(&self) -> bool {
        // Adjacent regions are both bound to this node and may be unmapped piecewise.
        true
    }

    fn numa_node(&self) -> Option<usize> {
        Some(self.node)
    }

    fn host_accessible(&self) -> bool {
        // `mmap` regions (read/write) bound to a node with `mbind`: ordinary host memory.
        self.map.host_accessible()
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// Reports the inner mmap sub-allocator's errors under this allocator's name.
fn rename(e: AllocatorError, name: &str) -> AllocatorError {
    match e {
        AllocatorError::OutOfMemory {
            size,
            align,
            bytes_in_use,
            limit,
            largest_free_chunk,
            ..
        } => AllocatorError::OutOfMemory {
            allocator: name.to_string(),
            size,
            align,
            bytes_in_use,
            limit,
            largest_free_chunk,
        },
        AllocatorError::InvalidRequest {
            size,
            align,
            reason,
            ..
        } => AllocatorError::InvalidRequest {
            allocator: name.to_string(),
            size,
            align,
            reason,
        },
        other => other,
    }
}
