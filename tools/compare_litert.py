#!/usr/bin/env python3
"""Times every shared model (and the converter-output models of testdata/converter) in tensor-alloc's
interpreter and in LiteRT in the same run.

Usage (needs a venv with ai-edge-litert 2.3.0, e.g. from ../shared/tools/setup_venv.sh):
    VENV/bin/python tools/compare_litert.py [--runs 50] [--models a,b] [--dir DIR] [--binary target/release/tensor-alloc]

For each model: tensor-alloc `run --json --repeat N` on the reference input (median invoke), LiteRT with
its built-in kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES, 1 thread) and LiteRT with XNNPACK (1 thread), each
a median of N timed `invoke()` calls after warm-up, measured back to back. Prints a table with ratios
(ours / LiteRT) and the geometric mean; `--json` prints the rows.
"""
import argparse, json, math, os, statistics, subprocess, sys, time
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared")


def litert_median(path, input_files, runs, xnnpack):
    """Runs `litert_child` in a separate process: LiteRT crashes on some models."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", path, "--runs", str(runs)]
    if xnnpack:
        cmd.append("--xnnpack")
    for f in input_files:
        cmd += ["--input", f]
    p = subprocess.run(cmd, capture_output=True, text=True)
    try:
        v = json.loads(p.stdout.strip().splitlines()[-1])
        return v
    except Exception:
        return None


def median_invoke_us(it, runs, warmup=3):
    """Median of `runs` timed `invoke()` calls of the LiteRT interpreter `it`, in µs, after `warmup`."""
    for _ in range(warmup):
        it.invoke()
    times = []
    for _ in range(runs):
        t = time.perf_counter_ns()
        it.invoke()
        times.append((time.perf_counter_ns() - t) / 1e3)
    return statistics.median(times)


def litert_child(path, input_files, runs, xnnpack):
    from ai_edge_litert import interpreter as lit
    inputs = [np.load(f) for f in input_files]
    kw = {"num_threads": 1}
    if not xnnpack:
        kw["experimental_op_resolver_type"] = lit.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    try:
        it = lit.Interpreter(model_path=path, **kw)
        it.allocate_tensors()
        for d, x in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], x)
        return median_invoke_us(it, runs)
    except Exception as e:  # LiteRT refuses some models (e.g. person_detect)
        return None


def ours_median(binary, path, input_files, runs):
    cmd = [binary, "run", path, "--json", "--repeat", str(runs)]
    for f in input_files:
        cmd += ["--input", f]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"
    v = json.loads(p.stdout)
    return v["latency"]["median_us"], v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--models", default="")
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "tensor-alloc"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", action="append", default=[],
                    help="also time the models in DIR (inputs from DIR/reference/NAME/input_K.npy when present)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--xnnpack", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--input", action="append", default=[], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(litert_child(a.child, a.input, a.runs, a.xnnpack)))
        return
    want = set(filter(None, a.models.split(",")))
    rows = []
    conv = os.path.join(ROOT, "testdata", "converter")
    groups = [(os.path.join(SHARED, "models", "tflm"), os.path.join(SHARED, "reference")),
              (os.path.join(SHARED, "models", "keras"), os.path.join(SHARED, "reference", "keras")),
              (conv, os.path.join(conv, "reference"))]
    groups += [(d, os.path.join(d, "reference")) for d in a.dir]
    for mdir, refroot in groups:
        if not os.path.isdir(mdir):
            continue
        for f in sorted(os.listdir(mdir)):
            name = f[:-7]
            if not f.endswith(".tflite") or (want and name not in want):
                continue
            path = os.path.join(mdir, f)
            rd = os.path.join(refroot, name)
            files = []
            k = 0
            while os.path.exists(os.path.join(rd, f"input_{k}.npy")):
                files.append(os.path.join(rd, f"input_{k}.npy"))
                k += 1
            ours, info = ours_median(a.binary, path, files, a.runs)
            ref = litert_median(path, files, a.runs, False)
            xnn = litert_median(path, files, a.runs, True)
            rows.append({"model": name, "ours_us": ours, "litert_us": ref, "xnnpack_us": xnn,
                         "note": None if ours is not None else info})
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'model':<40} {'ours µs':>10} {'LiteRT µs':>10} {'ratio':>7} {'XNNPACK µs':>11} {'ratio':>7}")
    logs = []
    for r in rows:
        def fmt(v):
            return f"{v:10.1f}" if v is not None else f"{'-':>10}"
        ratio = r["ours_us"] / r["litert_us"] if r["ours_us"] and r["litert_us"] else None
        xr = r["ours_us"] / r["xnnpack_us"] if r["ours_us"] and r["xnnpack_us"] else None
        if ratio:
            logs.append(math.log(ratio))
        print(f"{r['model']:<40} {fmt(r['ours_us'])} {fmt(r['litert_us'])} "
              f"{(f'{ratio:7.2f}' if ratio else '      -')} {fmt(r['xnnpack_us'])} {(f'{xr:7.2f}' if xr else '      -')}"
              + (f"  ({r['note']})" if r["note"] else ""))
    if logs:
        print(f"geometric mean ours/LiteRT built-in: {math.exp(sum(logs) / len(logs)):.2f} over {len(logs)} models")


if __name__ == "__main__":
    main()
