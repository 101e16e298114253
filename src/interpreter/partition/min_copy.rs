//! The default policy: offload the weighted ops, place everything else to copy the fewest bytes,
//! group on the DAG.
//!
//! 1. **Preference.** Each op goes to the first device, in the set's preference order
//!    (accelerators in list order, then the fallback), that runs it.
//! 2. **Regions.** A region is a subgraph on a non-fallback device as step 4 would group the
//!    current assignment (a convex set of ops: ops connected only through other devices' ops,
//!    like the two ends of a residual connection around a CPU op, are different regions). A
//!    region that has no weighted op (CONV, FC...: an op with a constant
//!    input of rank ≥ 2), has fewer than `min_nodes_per_partition` ops, or weighs less than
//!    `min_complexity` (Tengine's weights: FULLY_CONNECTED 3, others 1) goes to the next device
//!    that runs its ops: its copies would cost more than its work saves.
//! 3. **Placement of the glue.** Ops without weights that more than one device runs (ADD,
//!    pooling, RESHAPE, SOFTMAX...) move, one at a time, to whichever device lowers the bytes
//!    copied per invoke, until no move lowers them. Weighted ops stay where step 1 put them.
//!    Steps 2 and 3 repeat until nothing changes.
//! 4. **Grouping on the DAG** (not on model-order ranges): the fewest subgraphs the greedy
//!    topological grouping finds, never a cycle (see `group_on_dag`).
//!
//! Every op's decision records the step that placed it.

use super::Policy;
use super::{complexity, copy_bytes, group_on_dag, Partition, PartitionError, PartitionGraph};
use crate::interpreter::device::DeviceSet;
use rust_alloc::{string::String, string::ToString, vec::Vec};

/// The min-copy policy (see the [module docs](self)).
#[derive(Clone, Copy, Debug)]
pub struct MinCopyPolicy {
    /// A region of fewer ops on a non-fallback device moves to the next device (TFLite
    /// delegates' `min_nodes_per_partition`). Default 1.
    pub min_nodes_per_partition: usize,
    /// A region of lower complexity moves to the next device. Default 3 (Tengine's threshold).
    pub min_complexity: usize,
}

impl Default for MinCopyPolicy {
    fn default() -> Self {
        MinCopyPolicy {
            min_nodes_per_partition: 1,
            min_complexity: 3,
        }
    }
}

/// Bound on the rounds of steps 2–3 (each round that changes something lowers the copies or
/// moves ops down the preference order, so the loop ends well before this).
const MAX_ROUNDS: usize = 64;

impl Policy for MinCopyPolicy {
    fn name(&self) -> &str {
        "min-copy"
    }

    fn partition(
        &self,
        graph: &PartitionGraph,
        devices: &DeviceSet,
    ) -> Result<Partition, PartitionError> {
        let n = graph.nodes.len();
        let order: Vec<usize> = devices.preference().collect();
        let fallback = devices.fallback();
        let mut device_of = vec![fallback; n];
        let mut reasons = vec![String::new(); n];
        for k in 0..n {
            let mut refused = Vec::new();
            for &d in &order {
                match graph.refusal(k, d) {
                    None => {
                        device_of[k] = d;
                        break;
                    }
                    Some(r) => refused.push(format!("{} refused: {r}", devices.get(d).name())),
                }
            }
            reasons[k] = if refused.is_empty() {
                "first device in preference order that runs it".to_string()
            } else {
                format!("{}; the next device runs it", refused.join("; "))
            };
        }
        // Ops that may only move down the preference order (weighted ops).
        let flexible: Vec<bool> = (0..n)
            .map(|k| {
                !graph.nodes[k].weighted
                    && order
                        .iter()
                        .filter(|&&d| graph.refusal(k, d).is_none())
                        .count()
                        > 1
            })
            .collect();
        for _ in 0..MAX_ROUNDS {
            let demoted = self.demote_regions(graph, devices, &order, &mut device_of, &mut reasons);
            let moved = place_glue(graph, devices, &flexible, &mut device_of, &mut reasons);
            if !demoted && !moved {
                break;
            }
        }
        // A last pass, so the result never keeps a region step 3 created and step 2 rejects.
        self.demote_regions(graph, devices, &order, &mut device_of, &mut reasons);
        let groups = group_on_dag(graph, &device_of);
        for (k, r) in reasons.iter_mut().enumerate() {
            *r = format!("{}: {r}", devices.get(device_of[k]).name());
        }
        Partition::from_assignment(self.name(), graph, devices, &device_of, &groups, &reasons)
    }
}

impl MinCopyPolicy {
    /// Step 2: moves every too-small region to the next device that runs all of its ops (the
    /// fallback at worst). Returns whether anything moved.
    fn demote_regions(
        &self,
        graph: &PartitionGraph,
        devices: &DeviceSet,
        order: &[usize],
        device_of: &mut [usize],
        reasons: &mut [String],
    ) -> bool {
        let fallback = devices.fallback();
        let mut moved = false;
        for region in group_on_dag(graph, device_of) {
            let d = device_of[region[0]];
            if d == fallback {
                continue;
            }
            let weight: usize = region
                .iter()
                .map(|&k| complexity(graph.nodes[k].builtin))
                .sum();
            let weighted = region.iter().any(|&k| graph.nodes[k].weighted);
            let why = if !weighted {
                format!(
                    "its {}-op region on {} has no weighted op",
                    region.len(),
                    devices.get(d).name()
                )
            } else if region.len() < self.min_nodes_per_partition {
                format!(
                    "its region on {} has {} ops < min_nodes_per_partition {}",
                    devices.get(d).name(),
                    region.len(),
                    self.min_nodes_per_partition
                )
            } else if weight < self.min_complexity {
                format!(
                    "its region on {} has complexity {weight} < {}",
                    devices.get(d).name(),
                    self.min_complexity
                )
            } else {
                continue;
            };
            let after = order
                .iter()
                .position(|&o| o == d)
                .map_or(order.len(), |p| p + 1);
            let next = order[after..]
                .iter()
                .copied()
                .find(|&e| region.iter().all(|&k| graph.refusal(k, e).is_none()))
                .unwrap_or(fallback);
            for &k in &region {
                device_of[k] = next;
                reasons[k] = format!("moved off {}: {why}", devices.get(d).name());
            }
            moved = true;
        }
        moved
    }
}

/// Step 3: moves flexible ops while a move lowers the bytes copied. Returns whether any moved.
fn place_glue(
    graph: &PartitionGraph,
    devices: &DeviceSet,
    flexible: &[bool],
    device_of: &mut [usize],
    reasons: &mut [String],
) -> bool {
    let mut any = false;
    let mut cost = copy_bytes(graph, devices, device_of);
    loop {
        let mut improved = false;
        for k in 0..graph.nodes.len() {
            if !flexible[k] {
                continue;
            }
            let here = device_of[k];
            for d in 0..devices.len() {
                if d == here || graph.refusal(k, d).is_some() {
                    continue;
                }
                device_of[k] = d;
                let c = copy_bytes(graph, devices, device_of);
                if c < cost {
                    reasons[k] = format!(
                        "no weights; here the copies per invoke drop from {cost} B to {c} B"
                    );
                    cost = c;
                    improved = true;
                    any = true;
                    break;
                }
                device_of[k] = here;
            }
        }
        if !improved {
            return any;
        }
    }
}
