#!/usr/bin/env python3
"""LiteRT's outputs of consecutive invokes of one interpreter: the reference of a model that keeps
state across invokes (resource variables, stateful RNNs). Usage:
    python tools/invoke_sequence.py MODEL.tflite OUT_DIR [N]
Writes OUT_DIR/input_K.npy and OUT_DIR/output_K.npy for K = 0..N-1 (N = 3 by default): seeded
uniform inputs in [-1, 1), invoked in order on LiteRT's built-in kernels (no delegate), one thread.
Needs ai-edge-litert (tested with 2.3.0)."""
import os
import sys

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType


def main():
    model, out = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    os.makedirs(out, exist_ok=True)
    it = Interpreter(
        model_path=model,
        num_threads=1,
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    it.allocate_tensors()
    (inp,) = it.get_input_details()
    (outp,) = it.get_output_details()
    rng = np.random.default_rng(7)
    for k in range(n):
        x = rng.uniform(-1.0, 1.0, size=inp["shape"]).astype(inp["dtype"])
        it.set_tensor(inp["index"], x)
        it.invoke()
        np.save(os.path.join(out, f"input_{k}.npy"), x)
        np.save(os.path.join(out, f"output_{k}.npy"), it.get_tensor(outp["index"]))
    print(f"{model}: {n} invokes written to {out}")


if __name__ == "__main__":
    main()
