//! Partition properties on random DAGs and on every shared model (skipped with a notice when
//! `../shared` is absent), checked against a recomputation written here from the rules alone: every op on a device that runs it, each op in exactly one subgraph, no cycle
//! between subgraphs, and inputs, outputs and wait counts as the rules define them.
#![cfg(not(loom))]

mod common;

use std::collections::{BTreeSet, HashMap};
use tensor_alloc::interpreter::device::{DeviceSet, Support};
use tensor_alloc::interpreter::partition::{
    MinCopyPolicy, Partition, PartitionGraph, PartitionNode, PartitionTensor, Policy,
    TenginePolicy, TensorClass,
};
use tensor_alloc::model::{BuiltinOp, Model};
use tensor_alloc::workload::Rng;

const OPS: &[BuiltinOp] = &[
    BuiltinOp::CONV_2D,
    BuiltinOp::FULLY_CONNECTED,
    BuiltinOp::ADD,
    BuiltinOp::RESHAPE,
    BuiltinOp::TANH,
    BuiltinOp::CONCATENATION,
];

/// A random DAG over `devices.len()` devices: ops in topological order reading 1–3 earlier
/// tensors (some constant), the fallback runs everything, other devices a random part.
fn random_graph(rng: &mut Rng, n_devices: usize, fallback: usize) -> PartitionGraph {
    let n_inputs = rng.range(1, 3) as usize;
    let n_ops = rng.range(1, 40) as usize;
    let mut tensors: Vec<PartitionTensor> = Vec::new();
    let mut activations: Vec<usize> = Vec::new();
    let add = |tensors: &mut Vec<PartitionTensor>, class, rng: &mut Rng| {
        tensors.push(PartitionTensor {
            name: format!("t{}", tensors.len()),
            bytes: rng.log_range(1, 1 << 16) as usize,
            class,
        });
        tensors.len() - 1
    };
    for _ in 0..n_inputs {
        let t = add(&mut tensors, TensorClass::Activation, rng);
        activations.push(t);
    }
    let inputs = activations.clone();
    let mut nodes = Vec::new();
    for k in 0..n_ops {
        let op = OPS[rng.below(OPS.len() as u64) as usize];
        let mut ins = BTreeSet::new();
        for _ in 0..rng.range(1, 3) {
            ins.insert(activations[rng.below(activations.len() as u64) as usize]);
        }
        let mut ins: Vec<usize> = ins.into_iter().collect();
        let weighted = rng.chance(0.4);
        if weighted {
            ins.push(add(&mut tensors, TensorClass::Constant, rng));
        }
        let outs: Vec<usize> = (0..rng.range(1, 2))
            .map(|_| add(&mut tensors, TensorClass::Activation, rng))
            .collect();
        activations.extend(&outs);
        let support = (0..n_devices)
            .map(|d| {
                if d == fallback || rng.chance(0.6) {
                    Support::Yes
                } else {
                    Support::No("random refusal".into())
                }
            })
            .collect();
        nodes.push(PartitionNode {
            index: k,
            builtin: op,
            op: op.to_string(),
            inputs: ins,
            outputs: outs,
            support,
            listed: (0..n_devices).map(|_| rng.chance(0.7)).collect(),
            weighted,
        });
    }
    // Graph outputs: the last op's outputs and, sometimes, a tensor in the middle.
    let mut outputs = nodes.last().map(|n| n.outputs.clone()).unwrap_or_default();
    if rng.chance(0.5) {
        let t = activations[rng.below(activations.len() as u64) as usize];
        if !outputs.contains(&t) {
            outputs.push(t);
        }
    }
    PartitionGraph::new(tensors, nodes, inputs, outputs).unwrap()
}

/// Checks `p` against the rules, recomputed from `g` without the library's helpers.
fn check(g: &PartitionGraph, devices: &DeviceSet, p: &Partition, what: &str) {
    let mut sub_of: HashMap<usize, usize> = HashMap::new();
    for (i, s) in p.subgraphs.iter().enumerate() {
        assert_eq!(s.index, i, "{what}");
        assert!(!s.nodes.is_empty(), "{what}: empty subgraph");
        for &n in &s.nodes {
            assert!(sub_of.insert(n, i).is_none(), "{what}: op {n} twice");
            let node = g.nodes.iter().find(|x| x.index == n).unwrap();
            assert_eq!(
                node.support[s.device],
                Support::Yes,
                "{what}: op {n} on a device that refuses it"
            );
        }
    }
    assert_eq!(sub_of.len(), g.nodes.len(), "{what}: ops missing");
    let mut producer: HashMap<usize, usize> = HashMap::new();
    for node in &g.nodes {
        for &t in &node.outputs {
            producer.insert(t, sub_of[&node.index]);
        }
    }
    // No cycle: Kahn's algorithm on the subgraph graph.
    let n = p.subgraphs.len();
    let mut edges: BTreeSet<(usize, usize)> = BTreeSet::new();
    for node in &g.nodes {
        for &t in &node.inputs {
            if let Some(&from) = producer.get(&t) {
                let to = sub_of[&node.index];
                if from != to {
                    edges.insert((from, to));
                }
            }
        }
    }
    let mut indeg = vec![0; n];
    for &(_, b) in &edges {
        indeg[b] += 1;
    }
    let mut queue: Vec<usize> = (0..n).filter(|&s| indeg[s] == 0).collect();
    let mut seen = 0;
    while let Some(s) = queue.pop() {
        seen += 1;
        for &(a, b) in &edges {
            if a == s {
                indeg[b] -= 1;
                if indeg[b] == 0 {
                    queue.push(b);
                }
            }
        }
    }
    assert_eq!(seen, n, "{what}: cycle between subgraphs");
    for (i, s) in p.subgraphs.iter().enumerate() {
        let mine: Vec<&PartitionNode> = g.nodes.iter().filter(|x| sub_of[&x.index] == i).collect();
        let mut inputs = BTreeSet::new();
        let mut outputs = BTreeSet::new();
        for node in &mine {
            for &t in &node.inputs {
                if g.tensors[t].class == TensorClass::Activation && producer.get(&t) != Some(&i) {
                    inputs.insert(t);
                }
            }
            for &t in &node.outputs {
                let read_elsewhere = g
                    .nodes
                    .iter()
                    .any(|x| sub_of[&x.index] != i && x.inputs.contains(&t));
                if read_elsewhere || g.outputs.contains(&t) {
                    outputs.insert(t);
                }
            }
        }
        let wait = inputs.iter().filter(|t| producer.contains_key(t)).count();
        assert_eq!(
            s.inputs,
            inputs.into_iter().collect::<Vec<_>>(),
            "{what}: inputs of {i}"
        );
        assert_eq!(
            s.outputs,
            outputs.into_iter().collect::<Vec<_>>(),
            "{what}: outputs of {i}"
        );
        assert_eq!(s.wait_count, wait, "{what}: wait count of {i}");
    }
    // Copies: each activation once to every other memory space reading it. Host devices share
    // the fallback's space; the others have their own.
    let host = devices.fallback();
    let space = |d: usize| {
        if devices.get(d).host_addressable() {
            host
        } else {
            d
        }
    };
    let mut bytes = 0;
    for (t, tensor) in g.tensors.iter().enumerate() {
        if tensor.class != TensorClass::Activation {
            continue;
        }
        let from = producer
            .get(&t)
            .map_or(host, |&s| space(p.subgraphs[s].device));
        let mut to: BTreeSet<usize> = g
            .nodes
            .iter()
            .filter(|x| x.inputs.contains(&t))
            .map(|x| space(p.subgraphs[sub_of[&x.index]].device))
            .collect();
        if g.outputs.contains(&t) {
            to.insert(host);
        }
        bytes += to.iter().filter(|&&d| d != from).count() * tensor.bytes;
    }
    assert_eq!(p.bytes_copied_per_invoke, bytes, "{what}: bytes copied");
}

#[test]
fn random_dags_satisfy_the_partition_rules() {
    // cpu is the fallback (index 0); npu and a second accelerator-like set.
    let sets = [
        DeviceSet::from_names("cpu,npu").unwrap(),
        DeviceSet::from_names("cpu,npu,cpu-reference").unwrap(),
        DeviceSet::from_names("npu,cpu-reference,cpu").unwrap(),
    ];
    let mut rng = Rng::new(17);
    for case in 0..400 {
        let devices = &sets[case % sets.len()];
        let g = random_graph(&mut rng, devices.len(), devices.fallback());
        let policies: [(&str, Box<dyn Policy>); 3] = [
            ("min-copy", Box::new(MinCopyPolicy::default())),
            (
                "min-copy(1,1)",
                Box::new(MinCopyPolicy {
                    min_nodes_per_partition: 1,
                    min_complexity: 1,
                }),
            ),
            ("tengine", Box::new(TenginePolicy)),
        ];
        for (name, policy) in policies {
            let p = policy.partition(&g, devices).unwrap();
            check(&g, devices, &p, &format!("case {case} {name}"));
        }
    }
}

#[test]
fn shared_model_partitions_satisfy_the_partition_rules() {
    let Some(shared) = common::shared() else {
        return;
    };
    let mut checked = 0;
    for set in ["tflm", "keras"] {
        for case in common::cases(&shared, set) {
            let model = Model::load(&case.model).unwrap();
            for names in ["cpu,npu", "cpu,cpu-reference,npu", "npu,cpu"] {
                let devices = DeviceSet::from_names(names).unwrap();
                let g = match PartitionGraph::from_model(&model, &devices) {
                    Ok(g) => g,
                    Err(e) => {
                        // Models with ops no device runs (an Ethos-U custom op, sparse weights
                        // read by FULLY_CONNECTED) say so instead of partitioning.
                        eprintln!("skip {} on {names}: {e}", case.name);
                        continue;
                    }
                };
                let policies: [(&str, Box<dyn Policy>); 2] = [
                    ("min-copy", Box::new(MinCopyPolicy::default())),
                    ("tengine", Box::new(TenginePolicy)),
                ];
                for (name, policy) in policies {
                    let p = policy.partition(&g, &devices).unwrap();
                    check(&g, &devices, &p, &format!("{} {names} {name}", case.name));
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 0);
}
