//! The allocator registry: TensorFlow's `AllocatorFactoryRegistry` and `ProcessState` CPU
//! allocator accessor.
//!
//! A [`Factory`] has a name, a priority, a description, a constructor, and optionally a per-NUMA-node
//! constructor. The process-wide registry ([`global`]) starts with the built-ins:
//!
//! | name | priority | allocator |
//! |---|---|---|
//! | `cpu` | 100 | [`AlignedCpuAllocator`] (warning thresholds from the environment) |
//! | `bfc` | 50 | [`BfcAllocator`] (limit, growth, GC from the environment) |
//! | `pool` | 40 | [`PoolAllocator`] (count limit from the environment) |
//!
//! and `tracking` wraps any of them (`tracking(<name>)`, or `TENSOR_ALLOC_TRACK=1` for the CPU
//! allocator).
//!
//! # Selection
//! 1. If `TENSOR_ALLOC_CPU_ALLOCATOR` (or `TF_CPU_ALLOCATOR_USE_BFC=true`) names an allocator,
//!    it is used; an unknown name is an error listing the registered ones.
//! 2. Otherwise the factory with the **highest priority** wins (`TF_CPU_ALLOCATOR_USE_BFC=false`
//!    takes `bfc` out of the running). **Tie-break:** among equal priorities the
//!    lexicographically smallest name wins (byte order of the UTF-8 name). Registration order
//!    never matters, so the choice is the same whatever order crates register in. (TensorFlow
//!    leaves ties unspecified.)
//!
//! # Freezing
//! Registering the same name with the same priority twice is an error. Once an allocator has
//! been handed out ([`Registry::cpu_allocator`] or [`Registry::create`]), the registry is frozen
//! and further registration is an error, as in TensorFlow.
//!
//! # NUMA
//! `cpu_allocator(Some(node))` follows the registry's [`NumaPlan`] (`TENSOR_ALLOC_NUMA` resolved
//! against the topology once, with the first call's environment). When it shares (`off`, or
//! `auto` on one node) every node gets the shared instance. Otherwise each enabled node gets its
//! own allocator from a factory with a per-node constructor: the selected one, or — when the
//! selection was made by priority and the winner has none — the highest-priority factory that
//! has one (NUMA-capable factories win, TensorFlow's rule; the built-in `bfc` and `pool` have
//! one, `cpu` has not). Per-node constructors take their memory from
//! [`FactoryContext::sub_allocator`], where NUMA-capable sub-allocator factories win for a node
//! ([`SubFactories`]). A node that is not online, or not listed, is a [`RegistryError::Numa`].
//!
//! [`Registry::new`] builds an independent registry (tests use it without touching the process
//! state); [`global`] and [`cpu_allocator`] are the process-wide ones.

use super::env::{self, EnvConfig, EnvError};
use super::numa::{self, NumaError, NumaPlan, SubFactories, SubFactory, Topology};
use super::{
    AlignedCpuAllocator, AllocatorRef, BfcAllocator, FactoryError, PoolAllocator, SharedAllocator,
    TrackingAllocator,
};
use crate::sync::Mutex;
use rust_alloc::collections::BTreeMap;
use rust_alloc::sync::Arc;

/// What a constructor gets: the NUMA node (`None` = no affinity) and the validated configuration.
#[derive(Debug, Clone, Copy)]
pub struct FactoryContext<'a> {
    /// The NUMA node the allocator is for (`None`: no affinity).
    pub numa_node: Option<usize>,
    /// The environment configuration.
    pub env: &'a EnvConfig,
    /// The registry's sub-allocator factories (see [`FactoryContext::sub_allocator`]).
    pub sub_allocators: &'a SubFactories,
    /// The NUMA topology the registry works with.
    pub topology: &'a Topology,
}

/// A constructor of allocators.
pub type Constructor =
    Arc<dyn Fn(&FactoryContext<'_>) -> Result<AllocatorRef, FactoryError> + Send + Sync>;

/// A named allocator factory with a priority.
#[derive(Clone)]
pub struct Factory {
    name: String,
    priority: i32,
    description: String,
    create: Constructor,
    create_for_node: Option<Constructor>,
}

impl core::fmt::Debug for Factory {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Factory")
            .field("name", &self.name)
            .field("priority", &self.priority)
            .field("numa", &self.create_for_node.is_some())
            .finish()
    }
}

impl Factory {
    /// A factory whose allocator has no NUMA affinity (one instance serves every node).
    pub fn new<F>(
        name: impl Into<String>,
        priority: i32,
        description: impl Into<String>,
        create: F,
    ) -> Self
    where
        F: Fn(&FactoryContext<'_>) -> Result<AllocatorRef, FactoryError> + Send + Sync + 'static,
    {
        Self {
            name: name.into(),
            priority,
            description: description.into(),
            create: Arc::new(create),
            create_for_node: None,
        }
    }

    /// Adds a per-NUMA-node constructor: `cpu_allocator(Some(node))` then builds one allocator
    /// per node with it (`ctx.numa_node` is `Some(node)`).
    pub fn with_numa<F>(mut self, create_for_node: F) -> Self
    where
        F: Fn(&FactoryContext<'_>) -> Result<AllocatorRef, FactoryError> + Send + Sync + 'static,
    {
        self.create_for_node = Some(Arc::new(create_for_node));
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The priority (higher wins).
    pub fn priority(&self) -> i32 {
        self.priority
    }
    /// What the factory builds.
    pub fn description(&self) -> &str {
        &self.description
    }
    /// Whether it has a per-NUMA-node constructor.
    pub fn numa_enabled(&self) -> bool {
        self.create_for_node.is_some()
    }
}

/// A registry error: names the allocator, the variable and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Same name and priority registered twice.
    #[error("allocator factory '{name}' with priority {priority} is already registered")]
    Duplicate {
        /// The name.
        name: String,
        /// The priority.
        priority: i32,
    },
    /// Registration after an allocator was handed out.
    #[error(
        "cannot register allocator factory '{name}': the registry is frozen because an \
         allocator has already been handed out; register factories before first use"
    )]
    Frozen {
        /// The name that was being registered.
        name: String,
    },
    /// A name that is not registered.
    #[error(
        "unknown allocator '{name}'{}{}; registered: {}",
        .variable.map(|v| format!(" (from {v})")).unwrap_or_default(),
        .suggestion.as_ref().map(|s| format!(", did you mean '{s}'?")).unwrap_or_default(),
        .registered.join(", ")
    )]
    Unknown {
        /// The requested name.
        name: String,
        /// The variable that asked for it, if any.
        variable: Option<&'static str>,
        /// The closest registered name.
        suggestion: Option<String>,
        /// Every registered name (plus the `tracking(<name>)` forms).
        registered: Vec<String>,
    },
    /// No factory can be selected.
    #[error("no allocator factory is registered{}", if *.bfc_excluded { " (other than 'bfc', excluded by TF_CPU_ALLOCATOR_USE_BFC=false)" } else { "" })]
    Empty {
        /// Whether `bfc` was excluded by `TF_CPU_ALLOCATOR_USE_BFC=false`.
        bfc_excluded: bool,
    },
    /// The configuration is invalid.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// A NUMA node request or `TENSOR_ALLOC_NUMA` does not fit the topology.
    #[error(transparent)]
    Numa(#[from] NumaError),
    /// A constructor failed.
    #[error("allocator factory '{name}' failed to construct an allocator: {reason}")]
    Construction {
        /// The factory.
        name: String,
        /// Its error.
        #[source]
        reason: FactoryError,
    },
}

/// Why an allocator was chosen.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum SelectionReason {
    /// A variable named it.
    Variable {
        /// The variable.
        variable: &'static str,
        /// Its raw value.
        value: String,
    },
    /// Highest priority.
    Priority {
        /// The next factory in selection order, with its priority (if any).
        runner_up: Option<(String, i32)>,
        /// Whether the runner-up had the same priority (the name tie-break decided).
        tie_broken_by_name: bool,
        /// `TF_CPU_ALLOCATOR_USE_BFC=false` took `bfc` out of the running.
        bfc_excluded: bool,
    },
}

/// Which allocator the registry chooses and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Selection {
    /// The factory chosen.
    pub factory: String,
    /// Its priority.
    pub priority: i32,
    /// Why.
    pub reason: SelectionReason,
    /// The variable that turned tracking on (`TENSOR_ALLOC_TRACK=1` or a `tracking(..)` name).
    pub tracking: Option<String>,
}

impl Selection {
    /// The name of the allocator that will be handed out (`tracking(<factory>)` when tracked).
    pub fn allocator_name(&self) -> String {
        if self.tracking.is_some() {
            format!("tracking({})", self.factory)
        } else {
            self.factory.clone()
        }
    }
}

impl core::fmt::Display for Selection {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "'{}' (priority {})", self.factory, self.priority)?;
        match &self.reason {
            SelectionReason::Variable { variable, value } => {
                write!(f, " chosen by {variable}={value}")?
            }
            SelectionReason::Priority {
                runner_up,
                tie_broken_by_name,
                bfc_excluded,
            } => {
                write!(f, " chosen as the highest priority")?;
                match runner_up {
                    Some((n, p)) if *tie_broken_by_name => {
                        write!(f, " (tied with '{n}' at {p}; the smaller name wins)")?
                    }
                    Some((n, p)) => write!(f, " (next: '{n}' at {p})")?,
                    None => {}
                }
                if *bfc_excluded {
                    write!(f, ", 'bfc' excluded by {}=false", env::TF_USE_BFC)?;
                }
            }
        }
        if let Some(t) = &self.tracking {
            write!(f, "; wrapped in tracking ({t})")?;
        }
        Ok(())
    }
}

/// One row of [`Registry::factories`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FactoryInfo {
    /// Name.
    pub name: String,
    /// Priority.
    pub priority: i32,
    /// Description.
    pub description: String,
    /// Has a per-NUMA-node constructor.
    pub numa: bool,
}

#[derive(Default)]
struct Inner {
    factories: Vec<Factory>,
    frozen: bool,
    /// The CPU allocator per node key (`usize::MAX` = no affinity), with its selection.
    cpu: BTreeMap<usize, AllocatorRef>,
    cpu_selection: Option<Selection>,
    subs: SubFactories,
    /// `None`: [`Topology::system`].
    topology: Option<Arc<Topology>>,
    numa: Option<NumaPlan>,
}

impl Inner {
    fn topology(&self) -> &Topology {
        self.topology
            .as_deref()
            .unwrap_or_else(|| Topology::system())
    }
}

/// A registry of allocator factories. See the [module docs](self).
#[derive(Default)]
pub struct Registry {
    inner: Mutex<Inner>,
}

impl core::fmt::Debug for Registry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Registry")
            .field("factories", &self.factories())
            .field("frozen", &self.is_frozen())
            .finish()
    }
}

/// Selection order: priority descending, then name ascending.
fn order(a: &Factory, b: &Factory) -> core::cmp::Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| a.name.as_bytes().cmp(b.name.as_bytes()))
}

/// The built-in factories: `cpu` (100), `bfc` (50), `pool` (40).
pub fn builtin_factories() -> Vec<Factory> {
    vec![
        Factory::new(
            "cpu",
            100,
            "AlignedCpuAllocator: posix_memalign, exact stats, large-allocation warnings",
            |ctx| {
                Ok(
                    Arc::new(AlignedCpuAllocator::with_options(ctx.env.cpu_options()))
                        as AllocatorRef,
                )
            },
        ),
        Factory::new(
            "bfc",
            50,
            "BfcAllocator: best-fit with coalescing over mmap regions",
            |ctx| {
                BfcAllocator::try_new(ctx.env.bfc_options())
                    .map(|a| Arc::new(a) as AllocatorRef)
                    .map_err(FactoryError::from)
            },
        )
        .with_numa(|ctx| {
            let opts = ctx.env.bfc_options();
            opts.validate().map_err(|e| e.to_string())?;
            let sub = ctx.sub_allocator()?;
            Ok(Arc::new(BfcAllocator::with_sub_allocator(sub, opts)) as AllocatorRef)
        }),
        Factory::new(
            "pool",
            40,
            "PoolAllocator: cache of freed buffers by size, LRU eviction, auto-resize",
            |ctx| Ok(Arc::new(PoolAllocator::new(ctx.env.pool_options())) as AllocatorRef),
        )
        .with_numa(|ctx| {
            let sub = ctx.sub_allocator()?;
            Ok(Arc::new(PoolAllocator::with_sub_allocator(
                ctx.env.pool_options(),
                sub,
            )) as AllocatorRef)
        }),
    ]
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry with the built-in factories ([`builtin_factories`]).
    pub fn with_builtins() -> Self {
        let r = Self::new();
        r.inner.lock().factories = builtin_factories();
        r
    }

    /// Registers a factory. Errors: the same name and priority already registered, or the
    /// registry is frozen.
    pub fn register(&self, factory: Factory) -> Result<(), RegistryError> {
        let mut g = self.inner.lock();
        if g.frozen {
            return Err(RegistryError::Frozen { name: factory.name });
        }
        if g.factories
            .iter()
            .any(|f| f.name == factory.name && f.priority == factory.priority)
        {
            return Err(RegistryError::Duplicate {
                name: factory.name,
                priority: factory.priority,
            });
        }
        tracing::debug!(name = %factory.name, priority = factory.priority, "allocator factory registered");
        g.factories.push(factory);
        Ok(())
    }

    /// Whether an allocator has been handed out (registration is closed).
    pub fn is_frozen(&self) -> bool {
        self.inner.lock().frozen
    }

    /// The registered factories in selection order (priority descending, then name).
    pub fn factories(&self) -> Vec<FactoryInfo> {
        let mut v: Vec<Factory> = self.inner.lock().factories.clone();
        v.sort_by(order);
        v.into_iter()
            .map(|f| FactoryInfo {
                numa: f.numa_enabled(),
                name: f.name,
                priority: f.priority,
                description: f.description,
            })
            .collect()
    }

    fn unknown(factories: &[Factory], name: &str, variable: Option<&'static str>) -> RegistryError {
        let mut registered: Vec<String> = factories.iter().map(|f| f.name.clone()).collect();
        registered.sort();
        registered.dedup();
        let suggestion =
            env::closest(name, registered.iter().map(String::as_str)).map(String::from);
        registered.push("tracking".into());
        registered.push("tracking(<name>)".into());
        RegistryError::Unknown {
            name: name.to_string(),
            variable,
            suggestion,
            registered,
        }
    }

    /// The highest-priority factory named `name`.
    fn find<'a>(factories: &'a [Factory], name: &str) -> Option<&'a Factory> {
        factories
            .iter()
            .filter(|f| f.name == name)
            .min_by(|a, b| order(a, b))
    }

    fn select_in(factories: &[Factory], env: &EnvConfig) -> Result<Selection, RegistryError> {
        let mut tracking = env
            .track
            .as_ref()
            .filter(|t| t.value)
            .map(|t| format!("{}={}", t.variable, t.raw));
        if let Some(chosen) = &env.cpu_allocator {
            let (tracked, inner) = env::parse_allocator_name(&chosen.value);
            if tracked && tracking.is_none() {
                tracking = Some(format!("{}={}", chosen.variable, chosen.raw));
            }
            if let Some(inner) = inner {
                let f = Self::find(factories, inner)
                    .ok_or_else(|| Self::unknown(factories, inner, Some(chosen.variable)))?;
                return Ok(Selection {
                    factory: f.name.clone(),
                    priority: f.priority,
                    reason: SelectionReason::Variable {
                        variable: chosen.variable,
                        value: chosen.raw.clone(),
                    },
                    tracking,
                });
            }
            // Bare `tracking`: the priority winner, wrapped.
        }
        let bfc_excluded = env.exclude_bfc.is_some();
        let mut candidates: Vec<&Factory> = factories
            .iter()
            .filter(|f| !(bfc_excluded && f.name == "bfc"))
            .collect();
        candidates.sort_by(|a, b| order(a, b));
        let first = candidates
            .first()
            .ok_or(RegistryError::Empty { bfc_excluded })?;
        let runner_up = candidates.iter().find(|f| f.name != first.name);
        Ok(Selection {
            factory: first.name.clone(),
            priority: first.priority,
            reason: SelectionReason::Priority {
                runner_up: runner_up.map(|f| (f.name.clone(), f.priority)),
                tie_broken_by_name: runner_up.is_some_and(|f| f.priority == first.priority),
                bfc_excluded,
            },
            tracking,
        })
    }

    /// Which allocator [`cpu_allocator`](Self::cpu_allocator) would hand out under `env`, and
    /// why. Does not freeze the registry.
    pub fn select(&self, env: &EnvConfig) -> Result<Selection, RegistryError> {
        Self::select_in(&self.inner.lock().factories, env)
    }

    fn build(
        f: &Factory,
        numa_node: Option<usize>,
        env: &EnvConfig,
        tracking: bool,
        (sub_allocators, topology): (&SubFactories, &Topology),
    ) -> Result<AllocatorRef, RegistryError> {
        let ctx = FactoryContext {
            numa_node,
            env,
            sub_allocators,
            topology,
        };
        let ctor = match (numa_node, &f.create_for_node) {
            (Some(_), Some(c)) => c,
            _ => &f.create,
        };
        let a = ctor(&ctx).map_err(|reason| RegistryError::Construction {
            name: f.name.clone(),
            reason,
        })?;
        Ok(if tracking {
            Arc::new(TrackingAllocator::new(SharedAllocator::new(a)))
        } else {
            a
        })
    }

    /// Builds a fresh allocator by name (`<name>`, `tracking(<name>)` or `tracking` for the
    /// priority winner). Freezes the registry.
    pub fn create(&self, name: &str, env: &EnvConfig) -> Result<AllocatorRef, RegistryError> {
        if env::nested_tracking(env::CPU_ALLOCATOR, name, name).is_some() {
            // `tracking(tracking(x))`: tracking wraps a factory once.
            let (_, inner) = env::parse_allocator_name(name);
            let g = self.inner.lock();
            let mut e = Self::unknown(&g.factories, name, None);
            if let RegistryError::Unknown { suggestion, .. } = &mut e {
                *suggestion = inner.map(String::from);
            }
            return Err(e);
        }
        let mut g = self.inner.lock();
        let (tracked, inner) = env::parse_allocator_name(name);
        let f = match inner {
            Some(n) => {
                Self::find(&g.factories, n).ok_or_else(|| Self::unknown(&g.factories, n, None))?
            }
            None => {
                let sel = Self::select_in(&g.factories, env)?;
                Self::find(&g.factories, &sel.factory)
                    .ok_or_else(|| Self::unknown(&g.factories, &sel.factory, None))?
            }
        }
        .clone();
        g.frozen = true;
        let (subs, topology) = (g.subs.clone(), g.topology.clone());
        drop(g);
        let topology = topology.as_deref().unwrap_or_else(|| Topology::system());
        Self::build(&f, None, env, tracked, (&subs, topology))
    }

    /// The CPU allocator for `numa_node` (`None`: no affinity), created on first use and the
    /// same handle afterwards; wrapped in tracking when the selection says so. Whether a node
    /// gets its own allocator follows the [NUMA plan](self#numa); otherwise every node shares
    /// the `None` instance. Freezes the registry.
    ///
    /// The selection and the NUMA plan are made once, with the `env` of the first call. Errors:
    /// [`RegistryError::Numa`] for a node that is not online or not enabled by
    /// `TENSOR_ALLOC_NUMA`, or a listed node that is not online.
    pub fn cpu_allocator(
        &self,
        numa_node: Option<usize>,
        env: &EnvConfig,
    ) -> Result<AllocatorRef, RegistryError> {
        let mut g = self.inner.lock();
        let sel = match &g.cpu_selection {
            Some(s) => s.clone(),
            None => {
                let s = Self::select_in(&g.factories, env)?;
                tracing::info!(selection = %s, "CPU allocator selected");
                g.cpu_selection = Some(s.clone());
                s
            }
        };
        if g.numa.is_none() {
            let p = numa::plan(env.numa.as_ref(), g.topology())?;
            tracing::debug!(plan = ?p, "NUMA plan");
            g.numa = Some(p);
        }
        let selected = Self::find(&g.factories, &sel.factory)
            .ok_or_else(|| Self::unknown(&g.factories, &sel.factory, None))?;
        let node = match &g.numa {
            Some(p) => p.node_for(numa_node, g.topology())?,
            None => None,
        };
        let per_node = node.and_then(|_| numa::numa_capable(&g.factories, selected, &sel, env));
        let (f, key) = match (per_node, node) {
            (Some(f), Some(n)) => (f.clone(), n),
            _ => (selected.clone(), usize::MAX),
        };
        if let Some(a) = g.cpu.get(&key) {
            return Ok(a.clone());
        }
        g.frozen = true;
        let node = (key != usize::MAX).then_some(key);
        let a = Self::build(
            &f,
            node,
            env,
            sel.tracking.is_some(),
            (&g.subs, g.topology()),
        )?;
        g.cpu.insert(key, a.clone());
        Ok(a)
    }

    /// Uses `topology` instead of the machine's ([`Topology::system`]) for NUMA decisions
    /// (builder style; tests present fake machines with it).
    pub fn with_topology(self, topology: Topology) -> Self {
        self.inner.lock().topology = Some(Arc::new(topology));
        self
    }

    /// Registers a sub-allocator factory. Errors as [`register`](Self::register): the same name
    /// and priority twice, or a frozen registry.
    pub fn register_sub_allocator(&self, factory: SubFactory) -> Result<(), RegistryError> {
        let mut g = self.inner.lock();
        if g.frozen {
            return Err(RegistryError::Frozen {
                name: factory.name().to_string(),
            });
        }
        let priority = factory.priority();
        g.subs
            .register(factory)
            .map_err(|name| RegistryError::Duplicate { name, priority })
    }

    /// A new sub-allocator for `numa_node` from the sub-allocator factories (see
    /// [`SubFactories`]); placement policy from `env`.
    pub fn sub_allocator(
        &self,
        numa_node: Option<usize>,
        env: &EnvConfig,
    ) -> Result<Box<dyn super::SubAllocator>, RegistryError> {
        let g = self.inner.lock();
        if let Some(node) = numa_node {
            g.topology().check_online(node)?;
        }
        let ctx = numa::SubContext {
            numa_node,
            topology: g.topology(),
            policy: env.numa_policy.unwrap_or_default(),
        };
        g.subs
            .create(&ctx)
            .map_err(|reason| RegistryError::Construction {
                name: "sub-allocator".into(),
                reason,
            })
    }

    /// The NUMA plan fixed by the first [`cpu_allocator`](Self::cpu_allocator) call, if any.
    pub fn numa_plan(&self) -> Option<NumaPlan> {
        self.inner.lock().numa.clone()
    }

    /// The selection made by the first [`cpu_allocator`](Self::cpu_allocator) call, if any.
    pub fn cpu_selection(&self) -> Option<Selection> {
        self.inner.lock().cpu_selection.clone()
    }
}

/// The process-wide registry, with the built-ins registered.
pub fn global() -> &'static Registry {
    static GLOBAL: once_cell::sync::Lazy<Registry> =
        once_cell::sync::Lazy::new(Registry::with_builtins);
    &GLOBAL
}

/// Registers a factory in the process-wide registry (before the first allocator is handed out).
pub fn register(factory: Factory) -> Result<(), RegistryError> {
    global().register(factory)
}

/// The process's CPU allocator for `numa_node`, configured from the process environment (read
/// once): per node when the [NUMA plan](self#numa) enables it, the shared "no affinity" instance
/// otherwise (`None`, `TENSOR_ALLOC_NUMA=off`, or `auto` on a one-node machine). TensorFlow's
/// `ProcessState::GetCPUAllocator(numa_node)`.
pub fn cpu_allocator(numa_node: Option<usize>) -> Result<AllocatorRef, RegistryError> {
    let env = env::process_env()?;
    global().cpu_allocator(numa_node, env)
}

/// What [`cpu_allocator`] chooses under the process environment, and why.
pub fn process_selection() -> Result<Selection, RegistryError> {
    let env = env::process_env()?;
    match global().cpu_selection() {
        Some(s) => Ok(s),
        None => global().select(env),
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
