//! A user-defined device: a "dsp" that runs float FULLY_CONNECTED and RELU ops in a memory of its
//! own (a `pool` allocator from the registry), with a cost estimate per op. The model is split
//! across `cpu` and the dsp, run, and compared with the single-device run.
//!
//! ```sh
//! cargo run --example custom_device -- ../shared/models/tflm/hello_world_float.tflite
//! ```

use std::sync::Arc;
use tensor_alloc::alloc::{registry, AllocatorRef, EnvConfig};
use tensor_alloc::interpreter::device::{
    CpuDevice, Device, DeviceError, DeviceSet, OpQuery, Support,
};
use tensor_alloc::interpreter::partition::MinCopyPolicy;
use tensor_alloc::interpreter::schedule::PartitionedInterpreter;
use tensor_alloc::interpreter::{Interpreter, OpResolver};
use tensor_alloc::model::{BuiltinOp, Model};
use tensor_alloc::tensor::DType;

/// The ops the dsp runs.
const DSP_OPS: &[BuiltinOp] = &[BuiltinOp::FULLY_CONNECTED, BuiltinOp::RELU];

struct Dsp {
    kernels: OpResolver,
}

impl Device for Dsp {
    fn name(&self) -> &str {
        "dsp"
    }

    fn supports(&self, q: &OpQuery<'_>) -> Support {
        if !DSP_OPS.contains(&q.op) {
            return Support::No(format!("the dsp has no {} unit", q.op_name()));
        }
        match q
            .inputs
            .iter()
            .chain(q.outputs)
            .find(|o| o.dtype != DType::F32)
        {
            Some(o) => Support::No(format!("the dsp computes in float32, not {}", o.dtype)),
            None => Support::Yes,
        }
    }

    fn resolver(&self) -> OpResolver {
        self.kernels.clone()
    }

    fn allocator_name(&self) -> String {
        "pool".to_string()
    }

    fn allocator(&self) -> Result<AllocatorRef, DeviceError> {
        let err = |message: String| DeviceError::Allocator {
            device: "dsp".into(),
            allocator: "pool".into(),
            message,
        };
        let env = EnvConfig::from_process_env().map_err(|e| err(e.to_string()))?;
        registry::global()
            .create("pool", &env)
            .map_err(|e| err(e.to_string()))
    }

    fn host_addressable(&self) -> bool {
        false
    }

    fn lists_op(&self, op: BuiltinOp) -> bool {
        DSP_OPS.contains(&op)
    }

    fn cost(&self, q: &OpQuery<'_>) -> Option<u64> {
        Some(if q.op == BuiltinOp::FULLY_CONNECTED {
            3
        } else {
            1
        })
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "../shared/models/tflm/hello_world_float.tflite".to_string());
    let model = Model::load(&path)?;
    let dsp = Dsp {
        // The dsp runs the crate's kernels for its ops; a real one would register its own.
        kernels: OpResolver::with_builtins().subset(DSP_OPS),
    };
    let devices = DeviceSet::new(vec![Arc::new(CpuDevice::new()), Arc::new(dsp)])?;
    // Small regions are fine on this device: offload any FULLY_CONNECTED.
    let policy = MinCopyPolicy {
        min_complexity: 1,
        ..MinCopyPolicy::default()
    };
    let mut split = PartitionedInterpreter::build(&model, &devices, &policy)?;
    print!("{}", split.partition().to_text(split.graph()));

    let mut single = Interpreter::new(&model)?;
    for k in 0..split.num_inputs() {
        let bytes = single.input_bytes_mut(k)?;
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i % 7) as u8 * 9;
        }
        let copy = bytes.to_vec();
        split.input_bytes_mut(k)?.copy_from_slice(&copy);
    }
    single.invoke()?;
    split.invoke()?;
    for k in 0..split.num_outputs() {
        let same = single.output_bytes(k)? == split.output_bytes(k)?;
        println!("output {k}: split run equals the single-device run: {same}");
        if !same {
            return Err("outputs differ".into());
        }
    }
    Ok(())
}
