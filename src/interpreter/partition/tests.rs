//! Golden tests of both policies on hand-built graphs; each expected result is worked out in the
//! comment above it.

use super::*;
use crate::interpreter::device::Support;
use crate::model::BuiltinOp;

/// Device set `cpu,npu`: index 0 is the cpu (fallback), 1 the npu.
fn devices() -> DeviceSet {
    DeviceSet::from_names("cpu,npu").unwrap()
}

/// An op of the hand-built graphs: its kind, whether the npu runs it, whether the npu lists
/// the op at all (Tengine's allowed ops), whether it has weights.
#[derive(Clone, Copy)]
struct Op {
    op: BuiltinOp,
    npu: bool,
    listed: bool,
    weighted: bool,
}

const CONV: Op = Op {
    op: BuiltinOp::CONV_2D,
    npu: true,
    listed: true,
    weighted: true,
};
const FC: Op = Op {
    op: BuiltinOp::FULLY_CONNECTED,
    npu: true,
    listed: true,
    weighted: true,
};
/// A float FULLY_CONNECTED: listed, refused by precision.
const FC_F32: Op = Op { npu: false, ..FC };
const TANH: Op = Op {
    op: BuiltinOp::TANH,
    npu: false,
    listed: false,
    weighted: false,
};
const POOL: Op = Op {
    op: BuiltinOp::AVERAGE_POOL_2D,
    npu: true,
    listed: true,
    weighted: false,
};

fn node(k: usize, op: Op, inputs: Vec<usize>, output: usize) -> PartitionNode {
    PartitionNode {
        index: k,
        builtin: op.op,
        op: op.op.to_string(),
        inputs,
        outputs: vec![output],
        support: vec![
            Support::Yes,
            if op.npu {
                Support::Yes
            } else {
                Support::No("refused in this test".into())
            },
        ],
        listed: vec![true, op.listed],
        weighted: op.weighted,
    }
}

fn activation(bytes: usize) -> PartitionTensor {
    PartitionTensor {
        name: String::new(),
        bytes,
        class: TensorClass::Activation,
    }
}

/// A chain: tensor 0 is the graph input, op k reads tensor k and writes tensor k + 1 (100 bytes
/// each), the last tensor is the graph output.
fn chain(ops: &[Op]) -> PartitionGraph {
    let tensors = (0..=ops.len()).map(|_| activation(100)).collect();
    let nodes = ops
        .iter()
        .enumerate()
        .map(|(k, &op)| node(k, op, vec![k], k + 1))
        .collect();
    PartitionGraph::new(tensors, nodes, vec![0], vec![ops.len()]).unwrap()
}

/// (device index, op indices) of each subgraph.
fn shape(p: &Partition) -> Vec<(usize, Vec<usize>)> {
    p.subgraphs
        .iter()
        .map(|s| (s.device, s.nodes.clone()))
        .collect()
}

// Ops 0..7 = CONV CONV TANH CONV TANH FC CONV; blocked: 2 and 4.
// Scan from the back: [4, 7) weighs 0 (TANH unlisted) + 3 (FC) + 1 = 4 ≥ 3, so 5..6 go to the
// npu and 4 to the cpu; [2, 4) weighs 0 + 1 = 1 < 3, so 2..3 go to the cpu. The main subgraph
// [0, 2) goes to the npu. List: npu[5,6] cpu[4] cpu[2,3] npu[0,1]; cpu[4] and cpu[2,3] merge.
#[test]
fn tengine_back_to_front_scan_and_merge() {
    let g = chain(&[CONV, CONV, TANH, CONV, TANH, FC, CONV]);
    let p = TenginePolicy.partition(&g, &devices()).unwrap();
    assert_eq!(
        shape(&p),
        vec![(1, vec![0, 1]), (0, vec![2, 3, 4]), (1, vec![5, 6])]
    );
    p.validate(&g, &devices()).unwrap();
    // Copies: tensor 0 cpu→npu, 2 npu→cpu, 5 cpu→npu, 7 (graph output) npu→cpu.
    let copied: Vec<usize> = p.copies.iter().map(|c| c.tensor).collect();
    assert_eq!(copied, vec![0, 2, 5, 7]);
    assert_eq!(p.bytes_copied_per_invoke, 400);
    assert_eq!(
        p.subgraphs.iter().map(|s| s.wait_count).collect::<Vec<_>>(),
        vec![0, 1, 1]
    );
}

// Ops CONV FC(float) TANH CONV; blocked: 1 (precision) and 2. From the back: [2, 4) weighs
// 0 + 1 = 1 < 3, so cpu[2,3]; [1, 2) weighs 3 (a listed FC counts though blocked), so an empty
// npu subgraph and cpu[1]; main npu[0]. List: cpu[2,3] npu[] cpu[1] npu[0]: the empty npu entry
// keeps the two cpu entries apart, so nothing merges and two cpu subgraphs follow each other.
#[test]
fn tengine_empty_device_subgraph_blocks_a_merge() {
    let g = chain(&[CONV, FC_F32, TANH, CONV]);
    let p = TenginePolicy.partition(&g, &devices()).unwrap();
    assert_eq!(shape(&p), vec![(1, vec![0]), (0, vec![1]), (0, vec![2, 3])]);
    p.validate(&g, &devices()).unwrap();
}

// Nothing blocked: Tengine's main subgraph is the whole graph, on the npu, whatever its
// complexity (one POOL weighs 1). Everything blocked: every range is on the cpu and they merge.
#[test]
fn tengine_all_or_nothing() {
    let g = chain(&[POOL]);
    let p = TenginePolicy.partition(&g, &devices()).unwrap();
    assert_eq!(shape(&p), vec![(1, vec![0])]);
    let g = chain(&[TANH, TANH]);
    let p = TenginePolicy.partition(&g, &devices()).unwrap();
    assert_eq!(shape(&p), vec![(0, vec![0, 1])]);
}

// The same chain as the first Tengine test under min-copy: npu regions {0,1} (complexity 2) and
// {3} (1) are below 3 and go to the cpu; {5,6} (4) stays. Two subgraphs, 200 bytes copied
// (tensor 5 in, tensor 7 out) against Tengine's three subgraphs and 400 bytes.
#[test]
fn min_copy_drops_small_regions() {
    let g = chain(&[CONV, CONV, TANH, CONV, TANH, FC, CONV]);
    let p = MinCopyPolicy::default().partition(&g, &devices()).unwrap();
    assert_eq!(shape(&p), vec![(0, vec![0, 1, 2, 3, 4]), (1, vec![5, 6])]);
    assert_eq!(p.bytes_copied_per_invoke, 200);
    assert!(
        p.decisions[0].reason.contains("complexity 2 < 3"),
        "{:?}",
        p.decisions[0]
    );
    p.validate(&g, &devices()).unwrap();
    // min_nodes_per_partition 3 also drops {5,6}.
    let strict = MinCopyPolicy {
        min_nodes_per_partition: 3,
        ..MinCopyPolicy::default()
    };
    let p = strict.partition(&g, &devices()).unwrap();
    assert_eq!(shape(&p), vec![(0, (0..7).collect())]);
    assert_eq!(p.bytes_copied_per_invoke, 0);
}

// Two branches interleaved in model order: ops 0, 2, 4 are a CONV chain on the graph input,
// ops 1, 3 a TANH chain on it, op 5 (TANH, two inputs) joins them. On the DAG the npu chain is
// one region of complexity 3 and one subgraph; the cpu ops form one more. Model-order ranges
// would need five subgraphs for the same assignment.
#[test]
fn min_copy_groups_on_the_dag() {
    let mut tensors: Vec<PartitionTensor> = (0..7).map(|_| activation(100)).collect();
    tensors[0].bytes = 50;
    let nodes = vec![
        node(0, CONV, vec![0], 1),
        node(1, TANH, vec![0], 2),
        node(2, CONV, vec![1], 3),
        node(3, TANH, vec![2], 4),
        node(4, CONV, vec![3], 5),
        node(5, TANH, vec![4, 5], 6),
    ];
    let g = PartitionGraph::new(tensors, nodes, vec![0], vec![6]).unwrap();
    let p = MinCopyPolicy::default().partition(&g, &devices()).unwrap();
    assert_eq!(shape(&p), vec![(1, vec![0, 2, 4]), (0, vec![1, 3, 5])]);
    // Tensor 0 (50 B) to the npu at invoke start, tensor 5 back after subgraph 0.
    assert_eq!(p.bytes_copied_per_invoke, 150);
    assert_eq!(p.subgraphs[1].inputs, vec![0, 5]);
    assert_eq!(p.subgraphs[1].wait_count, 1);
    p.validate(&g, &devices()).unwrap();
}

// A CONV (npu) feeds both a TANH (cpu) and a POOL whose 25-byte result goes to the cpu too.
// The CONV's 100-byte output is copied to the cpu anyway, so the POOL (no weights, both devices
// run it) moves to the cpu: copies drop from 10 + 100 + 25 to 10 + 100 bytes.
#[test]
fn min_copy_places_glue_where_copies_drop() {
    let tensors = vec![
        activation(10),
        activation(100),
        activation(25),
        activation(100),
        activation(100),
    ];
    let nodes = vec![
        node(0, CONV, vec![0], 1),
        node(1, POOL, vec![1], 2),
        node(2, TANH, vec![1], 3),
        node(3, TANH, vec![2, 3], 4),
    ];
    let g = PartitionGraph::new(tensors, nodes, vec![0], vec![4]).unwrap();
    let policy = MinCopyPolicy {
        min_complexity: 1,
        ..MinCopyPolicy::default()
    };
    let p = policy.partition(&g, &devices()).unwrap();
    assert_eq!(shape(&p), vec![(1, vec![0]), (0, vec![1, 2, 3])]);
    assert_eq!(p.bytes_copied_per_invoke, 110);
    assert!(
        p.decisions[1].reason.contains("from 135 B to 110 B"),
        "{:?}",
        p.decisions[1]
    );
}

// A graph output produced in the middle of a subgraph is one of its outputs (the SSD case), and
// constants are neither inputs nor waited for.
#[test]
fn mid_subgraph_graph_output_and_constants() {
    let mut tensors: Vec<PartitionTensor> = (0..4).map(|_| activation(100)).collect();
    tensors[3].class = TensorClass::Constant;
    let nodes = vec![node(0, TANH, vec![0, 3], 1), node(1, TANH, vec![1, 3], 2)];
    let g = PartitionGraph::new(tensors, nodes, vec![0], vec![1, 2]).unwrap();
    let p = MinCopyPolicy::default().partition(&g, &devices()).unwrap();
    assert_eq!(p.subgraphs.len(), 1);
    assert_eq!(p.subgraphs[0].inputs, vec![0]);
    assert_eq!(p.subgraphs[0].outputs, vec![1, 2]);
    assert_eq!(p.subgraphs[0].wait_count, 0);
}

// An assignment that reads a later subgraph's tensor is refused, not run.
#[test]
fn from_assignment_refuses_a_cycle() {
    let g = chain(&[TANH, TANH]);
    let err = Partition::from_assignment("test", &g, &devices(), &[0, 0], &[vec![1], vec![0]], &[])
        .unwrap_err();
    assert!(err.to_string().contains("later subgraph"), "{err}");
}
