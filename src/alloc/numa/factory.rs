//! Sub-allocator factories (TensorFlow's `SubAllocator` side of `AllocatorFactoryRegistry`) and
//! the per-node plan that `registry::cpu_allocator(Some(node))` follows.

use super::{notice_one_node, NumaError, NumaMode, NumaPolicy, NumaSubAllocator, Topology};
use crate::alloc::env::{EnvConfig, FromVar};
use crate::alloc::registry::{Factory, FactoryContext, Selection, SelectionReason};
use crate::alloc::{FactoryError, MmapSubAllocator, SubAllocator};
use rust_alloc::sync::Arc;

/// What a sub-allocator constructor gets.
#[derive(Debug, Clone, Copy)]
pub struct SubContext<'a> {
    /// The node the memory is for (`None`: no affinity).
    pub numa_node: Option<usize>,
    /// The topology the node belongs to.
    pub topology: &'a Topology,
    /// How node-bound memory is placed.
    pub policy: NumaPolicy,
}

/// A constructor of sub-allocators.
pub type SubConstructor =
    Arc<dyn Fn(&SubContext<'_>) -> Result<Box<dyn SubAllocator>, FactoryError> + Send + Sync>;

/// A named sub-allocator factory with a priority; NUMA-capable ones bind memory to
/// `ctx.numa_node`.
#[derive(Clone)]
pub struct SubFactory {
    name: String,
    priority: i32,
    numa: bool,
    create: SubConstructor,
}

impl core::fmt::Debug for SubFactory {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SubFactory")
            .field("name", &self.name)
            .field("priority", &self.priority)
            .field("numa", &self.numa)
            .finish()
    }
}

impl SubFactory {
    /// A factory whose memory has no node affinity.
    pub fn new<F>(name: impl Into<String>, priority: i32, create: F) -> Self
    where
        F: Fn(&SubContext<'_>) -> Result<Box<dyn SubAllocator>, FactoryError>
            + Send
            + Sync
            + 'static,
    {
        Self {
            name: name.into(),
            priority,
            numa: false,
            create: Arc::new(create),
        }
    }

    /// A NUMA-capable factory: it places memory on `ctx.numa_node`.
    pub fn numa<F>(name: impl Into<String>, priority: i32, create: F) -> Self
    where
        F: Fn(&SubContext<'_>) -> Result<Box<dyn SubAllocator>, FactoryError>
            + Send
            + Sync
            + 'static,
    {
        Self {
            numa: true,
            ..Self::new(name, priority, create)
        }
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The priority (higher wins within its class).
    pub fn priority(&self) -> i32 {
        self.priority
    }
    /// Whether it binds memory to a node.
    pub fn numa_enabled(&self) -> bool {
        self.numa
    }
}

/// The sub-allocator factories of a registry. Starts with the built-ins: `mmap` (priority 100,
/// no affinity: [`MmapSubAllocator`]) and `numa` (priority 50, NUMA-capable:
/// [`NumaSubAllocator`]).
///
/// **Lookup (TensorFlow's rule):** for a node, NUMA-capable factories win over all others
/// whatever their priorities; within a class the highest priority wins and equal priorities go
/// to the smaller name. Without a node, the highest priority wins overall.
#[derive(Clone, Debug)]
pub struct SubFactories {
    list: Vec<SubFactory>,
}

impl Default for SubFactories {
    fn default() -> Self {
        let mmap = SubFactory::new("mmap", 100, |_| {
            Ok(Box::new(MmapSubAllocator::new()) as Box<dyn SubAllocator>)
        });
        let numa = SubFactory::numa("numa", 50, |ctx| match ctx.numa_node {
            Some(node) => NumaSubAllocator::for_topology(node, ctx.topology)
                .map(|s| Box::new(s.with_policy(ctx.policy)) as Box<dyn SubAllocator>)
                .map_err(|e| FactoryError::Unavailable(e.to_string())),
            None => Ok(Box::new(MmapSubAllocator::new()) as Box<dyn SubAllocator>),
        });
        Self {
            list: vec![mmap, numa],
        }
    }
}

impl SubFactories {
    /// Adds a factory; `Err` with the clashing name if the name and priority are taken.
    pub fn register(&mut self, factory: SubFactory) -> Result<(), String> {
        if self
            .list
            .iter()
            .any(|f| f.name == factory.name && f.priority == factory.priority)
        {
            return Err(factory.name);
        }
        self.list.push(factory);
        Ok(())
    }

    /// The factories, in lookup order for a node (NUMA-capable first).
    pub fn factories(&self) -> Vec<&SubFactory> {
        let mut v: Vec<&SubFactory> = self.list.iter().collect();
        v.sort_by(|a, b| rank(a, b, true));
        v
    }

    /// The factory that serves `numa_node` (see the type docs).
    pub fn select(&self, numa_node: Option<usize>) -> Option<&SubFactory> {
        self.list
            .iter()
            .min_by(|a, b| rank(a, b, numa_node.is_some()))
    }

    /// Builds the sub-allocator for `ctx.numa_node` with the selected factory.
    pub fn create(&self, ctx: &SubContext<'_>) -> Result<Box<dyn SubAllocator>, FactoryError> {
        let f = self.select(ctx.numa_node).ok_or_else(|| {
            FactoryError::Unavailable("no sub-allocator factory is registered".into())
        })?;
        (f.create)(ctx).map_err(|e| e.context(&format!("sub-allocator factory '{}'", f.name)))
    }
}

/// Lookup order: (NUMA-capable first when a node is asked for), priority descending, name.
fn rank(a: &SubFactory, b: &SubFactory, for_node: bool) -> core::cmp::Ordering {
    let class = if for_node {
        b.numa.cmp(&a.numa)
    } else {
        core::cmp::Ordering::Equal
    };
    class
        .then_with(|| b.priority.cmp(&a.priority))
        .then_with(|| a.name.as_bytes().cmp(b.name.as_bytes()))
}

impl FactoryContext<'_> {
    /// The sub-allocator for this context's node, from the registry's sub-allocator factories
    /// (node-bound when a NUMA-capable factory serves it), placed by `TENSOR_ALLOC_NUMA_POLICY`.
    pub fn sub_allocator(&self) -> Result<Box<dyn SubAllocator>, FactoryError> {
        self.sub_allocators.create(&SubContext {
            numa_node: self.numa_node,
            topology: self.topology,
            policy: self.env.numa_policy.unwrap_or_default(),
        })
    }
}

/// How the registry serves `cpu_allocator(Some(node))`: resolved once from `TENSOR_ALLOC_NUMA`
/// and the topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NumaPlan {
    /// Every node gets the shared allocator; the text says why.
    Shared(String),
    /// One allocator per node, for these nodes only.
    PerNode {
        /// The enabled nodes, ascending.
        nodes: Vec<usize>,
        /// The variable and raw value that listed them (`None`: `auto`).
        from: Option<(&'static str, String)>,
    },
}

/// Resolves `TENSOR_ALLOC_NUMA` against `topology`. Errors: a listed node that is not online.
/// `auto` on one node logs one notice per process and shares.
pub fn plan(mode: Option<&FromVar<NumaMode>>, topology: &Topology) -> Result<NumaPlan, NumaError> {
    match mode {
        Some(FromVar {
            value: NumaMode::Off,
            variable,
            raw,
        }) => Ok(NumaPlan::Shared(format!("{variable}={raw}"))),
        Some(FromVar {
            value: NumaMode::Nodes(nodes),
            variable,
            raw,
        }) => {
            if let Some(&node) = nodes.iter().find(|&&n| !topology.is_online(n)) {
                return Err(NumaError::ConfiguredNodeNotOnline {
                    variable,
                    value: raw.clone(),
                    node,
                    online: topology.node_ids(),
                });
            }
            Ok(NumaPlan::PerNode {
                nodes: nodes.clone(),
                from: Some((variable, raw.clone())),
            })
        }
        _ if !topology.is_numa() => {
            notice_one_node(topology);
            Ok(NumaPlan::Shared("one online NUMA node".into()))
        }
        _ => Ok(NumaPlan::PerNode {
            nodes: topology.node_ids(),
            from: None,
        }),
    }
}

impl NumaPlan {
    /// The node key for a request: `None` = the shared allocator. Errors: a node that is not
    /// online, or not among the listed nodes.
    pub fn node_for(
        &self,
        requested: Option<usize>,
        topology: &Topology,
    ) -> Result<Option<usize>, NumaError> {
        let (Self::PerNode { nodes, from }, Some(node)) = (self, requested) else {
            return Ok(None);
        };
        topology.check_online(node)?;
        match from {
            Some((variable, value)) if !nodes.contains(&node) => Err(NumaError::NodeNotEnabled {
                node,
                variable,
                value: value.clone(),
                enabled: nodes.clone(),
            }),
            _ => Ok(Some(node)),
        }
    }
}

/// The factory that builds per-node allocators when the selected one has no per-node
/// constructor: chosen by priority, NUMA-capable factories win (TensorFlow's rule; `bfc` stays
/// excluded under `TF_CPU_ALLOCATOR_USE_BFC=false`). A factory named by a variable is kept as
/// chosen (`None`: it serves every node).
pub(crate) fn numa_capable<'a>(
    factories: &'a [Factory],
    selected: &'a Factory,
    selection: &Selection,
    env: &EnvConfig,
) -> Option<&'a Factory> {
    if selected.numa_enabled() {
        return Some(selected);
    }
    if !matches!(selection.reason, SelectionReason::Priority { .. }) {
        return None;
    }
    factories
        .iter()
        .filter(|f| f.numa_enabled() && !(env.exclude_bfc.is_some() && f.name() == "bfc"))
        .min_by(|a, b| {
            b.priority()
                .cmp(&a.priority())
                .then_with(|| a.name().as_bytes().cmp(b.name().as_bytes()))
        })
}
