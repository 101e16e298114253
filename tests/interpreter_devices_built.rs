//! A split run on a model built in code (no `../shared` needed): an int8 ADD on the npu, a TANH
//! and an ADD on the cpu, a graph output produced on the npu and also read by the cpu. Outputs
//! equal the single-device run's bit for bit; an npu with no memory sends everything back.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use tensor_alloc::interpreter::device::{CpuDevice, DeviceSet, NpuConfig, NpuDevice};
use tensor_alloc::interpreter::partition::TenginePolicy;
use tensor_alloc::interpreter::schedule::PartitionedInterpreter;
use tensor_alloc::interpreter::Interpreter;
use tensor_alloc::model::Model;

fn model() -> Model {
    common::split_model()
}

fn fill(bytes: &mut [u8], seed: u8) {
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(37).wrapping_add(seed);
    }
}

fn single(model: &Model) -> Vec<Vec<u8>> {
    let mut i = Interpreter::new(model).unwrap();
    fill(i.input_bytes_mut(0).unwrap(), 1);
    fill(i.input_bytes_mut(1).unwrap(), 2);
    i.invoke().unwrap();
    (0..2)
        .map(|k| i.output_bytes(k).unwrap().to_vec())
        .collect()
}

fn split(model: &Model, devices: &DeviceSet) -> (PartitionedInterpreter, Vec<Vec<u8>>) {
    let mut p = PartitionedInterpreter::build(model, devices, &TenginePolicy).unwrap();
    for _ in 0..2 {
        fill(p.input_bytes_mut(0).unwrap(), 1);
        fill(p.input_bytes_mut(1).unwrap(), 2);
        p.invoke().unwrap();
    }
    let outs = (0..p.num_outputs())
        .map(|k| p.output_bytes(k).unwrap().to_vec())
        .collect();
    (p, outs)
}

// Tengine on ADD TANH ADD: TANH (unlisted) is the one blocked op; the range [1, 3) weighs
// 0 + 1 < 3, so ops 1 and 2 run on the cpu; op 0 is the main subgraph, on the npu. Copies: x
// and y to the npu at invoke start (x is also read on the cpu: no copy there), a back to the
// cpu after subgraph 0 (read by TANH and a graph output).
#[test]
fn npu_and_cpu_split_is_bit_exact() {
    let m = model();
    let expected = single(&m);
    let devices = DeviceSet::from_names("cpu,npu").unwrap();
    let (p, outs) = split(&m, &devices);
    let part = p.partition();
    let shape: Vec<(&str, Vec<usize>)> = part
        .subgraphs
        .iter()
        .map(|s| (s.device_name.as_str(), s.nodes.clone()))
        .collect();
    assert_eq!(shape, vec![("npu", vec![0]), ("cpu", vec![1, 2])]);
    let copies: Vec<(usize, &str, &str)> = part
        .copies
        .iter()
        .map(|c| (c.tensor, c.from.as_str(), c.to.as_str()))
        .collect();
    assert_eq!(
        copies,
        vec![(0, "cpu", "npu"), (1, "cpu", "npu"), (2, "npu", "cpu")]
    );
    assert_eq!(part.bytes_copied_per_invoke, 3 * 32);
    assert_eq!(part.subgraphs[0].outputs, vec![2]);
    assert_eq!(part.subgraphs[1].wait_count, 1);
    assert_eq!(outs, expected);
    assert_eq!(p.spaces().len(), 2);
}

#[test]
fn host_devices_share_memory_and_match() {
    let m = model();
    let expected = single(&m);
    let devices = DeviceSet::from_names("cpu,cpu-reference").unwrap();
    let (p, outs) = split(&m, &devices);
    assert_eq!(p.partition().bytes_copied_per_invoke, 0);
    assert_eq!(p.spaces().len(), 1);
    assert_eq!(outs, expected);
}

#[test]
fn npu_without_memory_falls_back_to_the_cpu() {
    let m = model();
    let expected = single(&m);
    let npu = NpuDevice::new(NpuConfig {
        memory_bytes: 16,
        ..NpuConfig::default()
    });
    let devices = DeviceSet::new(vec![Arc::new(CpuDevice::new()), Arc::new(npu)]).unwrap();
    let (p, outs) = split(&m, &devices);
    let part = p.partition();
    assert!(part.subgraphs.iter().all(|s| s.device_name == "cpu"));
    assert!(
        part.decisions[0].reason.contains("memory fallback"),
        "{:?}",
        part.decisions[0]
    );
    assert_eq!(part.bytes_copied_per_invoke, 0);
    assert_eq!(outs, expected);
}
