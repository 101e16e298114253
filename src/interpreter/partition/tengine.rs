//! Tengine's graph split (`split_graph_node_to_sub_graph` in its `split.c`), as a baseline.
//!
//! Tengine has one accelerator per context; here it is the first non-fallback device of the
//! set (other devices get nothing). The algorithm, on ops in model order:
//!
//! 1. **Blocked ops**: ops the accelerator refuses (an op it does not list, or a precision it
//!    does not run). The precision test is the device's own `supports` answer, over inputs and
//!    outputs; Tengine's `node_in_precision` looks at output dtypes only (a quantized output
//!    always passes).
//! 2. **Back-to-front scan** over the blocked ops: for blocked op `b` with the next blocked op
//!    `e` (or the end), count the complexity of `[b, e)`: every op the accelerator *lists*
//!    weighs 1, FULLY_CONNECTED 3 (`b` itself counts when only its precision blocked it). Below
//!    3, all of `[b, e)` runs on the CPU; otherwise `(b, e)` runs on the accelerator and `b` on
//!    the CPU. Subgraphs are pushed in scan order (back to front).
//! 3. **Main subgraph**: ops before the first blocked op run on the accelerator, whatever their
//!    complexity.
//! 4. **Merge**: adjacent subgraphs of the list on the same device merge, repeatedly.
//!
//! Subgraphs are contiguous ranges of model order. Tengine keeps empty subgraphs (an empty
//! range) in its list, where they stop two CPU neighbours from merging; this port keeps that
//! effect and drops the empty subgraphs from the result.

use super::{complexity, Partition, PartitionError, PartitionGraph, Policy};
use crate::interpreter::device::DeviceSet;
use rust_alloc::{string::String, string::ToString, vec::Vec};

/// Tengine's split policy (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default)]
pub struct TenginePolicy;

/// Tengine's `MODEL_COMPLEX_COUNT`: a range below this complexity stays on the CPU.
pub const TENGINE_COMPLEX_COUNT: usize = 3;

impl Policy for TenginePolicy {
    fn name(&self) -> &str {
        "tengine"
    }

    fn partition(
        &self,
        graph: &PartitionGraph,
        devices: &DeviceSet,
    ) -> Result<Partition, PartitionError> {
        let cpu = devices.fallback();
        let nn = devices.preference().next().unwrap_or(cpu);
        let n = graph.nodes.len();
        let blocked: Vec<usize> = (0..n)
            .filter(|&k| nn == cpu || graph.refusal(k, nn).is_some())
            .collect();
        let mut reasons = vec![String::new(); n];
        // (device, positions) in Tengine's list order: back to front, then the main subgraph.
        let mut list: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, &b) in blocked.iter().enumerate().rev() {
            let e = blocked.get(i + 1).copied().unwrap_or(n);
            let c: usize = (b..e)
                .filter(|&k| graph.nodes[k].listed.get(nn).copied().unwrap_or(false))
                .map(|k| complexity(graph.nodes[k].builtin))
                .sum();
            let why_blocked = graph.refusal(b, nn).unwrap_or("no accelerator").to_string();
            if c < TENGINE_COMPLEX_COUNT {
                reasons[b] = format!("blocked: {why_blocked}");
                for r in reasons.iter_mut().take(e).skip(b + 1) {
                    *r = format!(
                        "range of ops {b}..{e} has complexity {c} < {TENGINE_COMPLEX_COUNT}"
                    );
                }
                list.push((cpu, (b..e).collect()));
            } else {
                for r in reasons.iter_mut().take(e).skip(b + 1) {
                    *r = format!("range after blocked op {b} has complexity {c}");
                }
                reasons[b] = format!("blocked: {why_blocked}");
                list.push((nn, (b + 1..e).collect()));
                list.push((cpu, vec![b]));
            }
        }
        let stop = blocked.first().copied().unwrap_or(n);
        for r in reasons.iter_mut().take(stop) {
            *r = "before the first blocked op (Tengine's main subgraph)".to_string();
        }
        list.push((nn, (0..stop).collect()));
        // Merge adjacent same-device entries, from the end of the list (the front of the model).
        'merge: loop {
            let len = list.len();
            for i in 1..len {
                let (last, cur) = (len - i, len - 1 - i);
                if list[cur].0 == list[last].0 {
                    let (_, nodes) = list.remove(cur);
                    list[cur].1.extend(nodes);
                    continue 'merge;
                }
            }
            break;
        }
        list.reverse();
        list.retain(|(_, nodes)| !nodes.is_empty());
        let mut device_of = vec![cpu; n];
        let mut groups = Vec::with_capacity(list.len());
        for (d, mut nodes) in list {
            nodes.sort_unstable();
            for &k in &nodes {
                device_of[k] = d;
            }
            groups.push(nodes);
        }
        for (k, r) in reasons.iter_mut().enumerate() {
            let name = devices.get(device_of[k]).name();
            *r = format!("{name}: {r}");
        }
        Partition::from_assignment(self.name(), graph, devices, &device_of, &groups, &reasons)
    }
}
