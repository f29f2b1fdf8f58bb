"""Where onnxruntime spends a run of an example's graph, jaxonnx's beside jax2onnx's:
onnxruntime's profiler (SessionOptions.enable_profiling) on the session as it runs
(after onnxruntime's graph optimizations, so op types are the kernels that run:
FastGelu, SkipLayerNormalization, ...), time per op type and the slowest nodes.

    python benchmarks/ort_profile.py vit [gpt ...] [--batch 1] [--threads 1] [--runs 200]

Per op type: nodes per run and µs per run (the mean over the kept runs), each
graph's share of its kernel time. A control-flow node (If, Loop, Scan) counts
only its own time; the nodes of its bodies count under their own op types.
"overhead" is a run's wall time (onnxruntime's model_run event) less its kernels'
time: the executor, allocations, the If/Loop machinery between kernels, and the
profiler's own bookkeeping, which at batch 1 is a large part of it: the plain
latency of both sessions (timed in alternating blocks) is printed below the
table. The first 20 runs are dropped; per node the median over the runs. (Named ort_profile, not profile: benchmarks/ is on
sys.path when its scripts run, and the standard library has a profile module.)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402
import compare  # noqa: E402
import latency  # noqa: E402
import roofline  # noqa: E402
import timing  # noqa: E402

CONTROL_FLOW = {"If", "Loop", "Scan"}


def profile(model, feed, threads=1, runs=200, warmup=20):
    """Profiles `runs` runs of `model` after `warmup` runs. Returns
    {"runs", "wall" (median µs per run), "by_op": {op: (nodes per run, µs per run)},
    "nodes": {(op, node name): median µs per run}}; an op type's time is the sum of
    its nodes' medians."""
    with tempfile.TemporaryDirectory() as tmp:
        options = roofline.session_options(threads)
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tmp, "ort")
        sess = roofline.session(model, options=options)
        for _ in range(warmup + runs):
            sess.run(None, feed)
        events = json.load(open(sess.end_profiling()))
    run_windows = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                         if e.get("cat") == "Session" and e["name"] == "model_run")[warmup:]
    kept = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")
            and any(a <= e["ts"] <= b for a, b in run_windows)]
    # A control-flow kernel's time includes its bodies' kernels: take those out.
    own = {id(e): e["dur"] for e in kept}
    flow = [e for e in kept if e["args"].get("op_name") in CONTROL_FLOW]
    for e in kept:
        parents = [p for p in flow if p is not e and p["tid"] == e["tid"]
                   and p["ts"] <= e["ts"] and e["ts"] + e["dur"] <= p["ts"] + p["dur"]]
        if parents:
            own[id(max(parents, key=lambda p: p["ts"]))] -= e["dur"]
    n = len(run_windows)
    # Per node the median of its runs: a run preempted by another process on this
    # shared machine moves a mean, not a median.
    durations = collections.defaultdict(list)
    for e in kept:
        durations[(e["args"].get("op_name", "?"), e["name"].removesuffix("_kernel_time"))].append(own[id(e)])
    by_op, count, nodes = collections.Counter(), collections.Counter(), {}
    for (op, name), ds in durations.items():
        nodes[(op, name)] = statistics.median(ds)
        by_op[op] += nodes[(op, name)] * len(ds) / n  # a body node may run more or less than once
        count[op] += len(ds) / n
    wall = statistics.median(b - a for a, b in run_windows)
    return {"runs": n, "wall": wall, "by_op": {k: (count[k], v) for k, v in by_op.items()},
            "nodes": nodes}


def side_by_side(profiles, top):
    names = list(profiles)
    ops = sorted({op for p in profiles.values() for op in p["by_op"]},
                 key=lambda op: -max(p["by_op"].get(op, (0, 0))[1] for p in profiles.values()))
    kernel = {k: sum(v for _, v in p["by_op"].values()) for k, p in profiles.items()}
    lines = ["| op type | " + " | ".join(f"{k}: nodes, µs/run, share" for k in names) + " |",
             "|---|" + "---|" * len(names)]
    for op in ops:
        cells = []
        for k in names:
            c, t = profiles[k]["by_op"].get(op, (0, 0.0))
            cells.append(f"{c:.0f}, {t:.1f}, {100 * t / kernel[k]:.0f}%" if c else "-")
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    lines.append("| **kernels** | " + " | ".join(
        f"{sum(c for c, _ in profiles[k]['by_op'].values()):.0f}, {kernel[k]:.1f}" for k in names) + " |")
    lines.append("| **overhead** (run - kernels) | " + " | ".join(
        f"{profiles[k]['wall'] - kernel[k]:.1f}" for k in names) + " |")
    lines.append("| **run** (wall) | " + " | ".join(f"{profiles[k]['wall']:.1f}" for k in names) + " |")
    out = ["\n".join(lines)]
    for k in names:
        ranked = sorted(profiles[k]["nodes"].items(), key=lambda kv: -kv[1])[:top]
        out.append(f"{k}: slowest nodes (µs/run): " +
                   ", ".join(f"{name} [{op}] {t:.1f}" for (op, name), t in ranked))
    return "\n\n".join(out)


def run(name, batch, threads, runs, top):
    j2o = compare.peer()
    title, inputs, models = latency.convert(name, j2o)
    xs = _common.sample(inputs, batch, seed=batch)
    profiles, sessions, feeds = {}, [], {}
    for k, m in models.items():
        if isinstance(m, str):
            print(f"{k}: {m}")
            continue
        sess = roofline.session(m, threads)
        feed = {v.name: x for v, x in zip(sess.get_inputs(), xs)}
        profiles[k] = profile(m, feed, threads, runs)
        sessions.append(sess)
        feeds[sess] = feed
    # the profiler's own cost per node is large at batch 1: show the plain latency too
    plain = timing.block_latency(sessions, feeds.__getitem__, max(20, runs // 4))
    setting = "default threads" if threads is None else f"{threads} intra-op thread(s)"
    print(f"## {title}, batch {batch}, {setting}, {runs} profiled runs\n")
    print(side_by_side(profiles, top))
    print("\nwithout the profiler (timing.block_latency, µs): " +
          ", ".join(f"{k} {t * 1e6:.1f}" for k, t in zip(profiles, plain)))
    print()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", choices=compare.MODELS)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1,
                        help="intra-op threads; 0 = onnxruntime's default")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--top", type=int, default=12, help="slowest nodes listed per graph")
    args = parser.parse_args(argv)
    for name in args.models:
        run(name, args.batch, args.threads or None, args.runs, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
