#!/usr/bin/env python3
"""Times each operator of a model alone, in tensor-alloc's interpreter and in LiteRT + XNNPACK, in the
same run: where the whole-model ratio of `compare_litert.py` comes from.

Usage (needs a venv with ai-edge-litert 2.3.0, e.g. from ../shared/tools/setup_venv.sh):
    VENV/bin/python tools/compare_ops.py MODEL.tflite [--runs 200] [--ops 2,4,5] [--binary B] [--threads 1]

Each chosen operator becomes a one-operator model (its constant inputs kept, its other inputs made
graph inputs, its outputs graph outputs; written to a temporary folder), timed as
`compare_litert.py` times a model: our `run --json --repeat N` median against the median of N timed
LiteRT `invoke()` calls with XNNPACK (and `--builtin` adds LiteRT's built-in kernels). Operators
LiteRT cannot run alone are listed without its time. The table ends with the operators sorted by
the time we lose to XNNPACK. A one-operator model keeps its input in cache and pays each runtime's
per-invoke overhead once per operator, so per-operator sums differ from whole-model times: use it
to find where the gap is, and the whole-model comparison for the claim.
"""
import argparse, copy, json, os, subprocess, sys, tempfile
import numpy as np
from compare_litert import median_invoke_us


def split(model_path, ops, out_dir):
    """Writes one model per operator index in `ops` (all when empty); returns [(index, op name, path)]."""
    from ai_edge_litert.tools import flatbuffer_utils as fu
    model = fu.read_model(model_path)
    graph = model.subgraphs[0]
    indices = ops or list(range(len(graph.operators)))
    const = {i for i, t in enumerate(graph.tensors)
             if t.buffer is not None and t.buffer > 0 and model.buffers[t.buffer].data is not None
             and len(model.buffers[t.buffer].data) > 0}
    for b in model.buffers:
        if b.data is not None and len(b.data) == 0:
            b.data = None  # an empty vector would read as a constant of 0 bytes
    made = []
    for i in indices:
        op = graph.operators[i]
        name = fu.opcode_to_name(model, op.opcodeIndex) or str(op.opcodeIndex)
        one = copy.deepcopy(model)
        g = one.subgraphs[0]
        g.operators = [copy.deepcopy(op)]
        g.inputs = np.array([t for t in op.inputs if t >= 0 and t not in const], dtype=np.int32)
        g.outputs = np.array(list(op.outputs), dtype=np.int32)
        one.subgraphs = [g]
        one.signatureDefs = []
        path = os.path.join(out_dir, f"op{i}.tflite")
        fu.write_model(one, path)
        made.append((i, name, path))
    return made


def litert_median(path, runs, xnnpack, threads):
    """Runs `litert_child` in a separate process: LiteRT crashes on some models."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", path, "--runs", str(runs),
           "--threads", str(threads)]
    if xnnpack:
        cmd.append("--xnnpack")
    p = subprocess.run(cmd, capture_output=True, text=True)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except Exception:
        return None


def litert_child(path, runs, xnnpack, threads):
    from ai_edge_litert import interpreter as lit
    kw = {"num_threads": threads}
    if not xnnpack:
        kw["experimental_op_resolver_type"] = lit.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    try:
        it = lit.Interpreter(model_path=path, **kw)
        it.allocate_tensors()
        rng = np.random.default_rng(0)
        for d in it.get_input_details():
            dt = np.dtype(d["dtype"])
            if dt.kind == "f":
                x = rng.standard_normal(d["shape"]).astype(dt)
            else:
                info = np.iinfo(dt)
                x = rng.integers(max(info.min, -100), min(info.max, 100), d["shape"]).astype(dt)
            it.set_tensor(d["index"], x)
        return median_invoke_us(it, runs, warmup=5)
    except Exception:
        return None


def ours_median(binary, path, runs, threads):
    cmd = [binary, "run", path, "--json", "--repeat", str(runs), "--threads", str(threads)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    try:
        return json.loads(p.stdout)["latency"]["median_us"]
    except Exception:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--ops", default="")
    ap.add_argument("--binary", default="target/release/tensor-alloc")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--builtin", action="store_true")
    ap.add_argument("--child")
    ap.add_argument("--xnnpack", action="store_true")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(litert_child(a.child, a.runs, a.xnnpack, a.threads)))
        return
    if not a.model:
        ap.error("MODEL.tflite is required")
    ops = [int(s) for s in a.ops.split(",") if s]
    fmt = lambda v: f"{v:10.1f}" if v is not None else f"{'-':>10}"
    with tempfile.TemporaryDirectory() as d:
        rows = []
        print(f"{'op':>4}  {'name':<22}{'ours µs':>10}{'XNNPACK':>10}{'ratio':>7}"
              + (f"{'built-in':>10}" if a.builtin else ""))
        for i, name, path in split(a.model, ops, d):
            ours = ours_median(a.binary, path, a.runs, a.threads)
            xnn = litert_median(path, a.runs, True, a.threads)
            ratio = f"{ours / xnn:7.2f}" if ours and xnn else f"{'-':>7}"
            line = f"{i:>4}  {name:<22}{fmt(ours)}{fmt(xnn)}{ratio}"
            if a.builtin:
                line += fmt(litert_median(path, a.runs, False, a.threads))
            print(line, flush=True)
            rows.append((i, name, ours, xnn))
        both = [r for r in rows if r[2] and r[3]]
        print(f"sum over {len(both)} operators both ran: ours {sum(r[2] for r in both):.1f} µs, "
              f"XNNPACK {sum(r[3] for r in both):.1f} µs")
        by_name = {}
        for _, name, o, x in both:
            s = by_name.setdefault(name, [0.0, 0.0, 0])
            s[0] += o; s[1] += x; s[2] += 1
        print("by operator type (ours µs, XNNPACK µs, count):")
        for name, (o, x, n) in sorted(by_name.items(), key=lambda kv: kv[1][1] - kv[1][0]):
            print(f"  {name:<22}{o:10.1f}{x:10.1f}{n:5d}   lost {o - x:8.1f}")
        print("most time lost to XNNPACK:")
        for i, name, o, x in sorted(both, key=lambda r: r[3] - r[2])[:12]:
            print(f"  op {i:>4} {name:<22} {o - x:8.1f} µs ({o / x:.2f}x)")


if __name__ == "__main__":
    main()
