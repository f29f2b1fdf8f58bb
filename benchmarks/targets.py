"""What target="portable" costs and what target="onnxruntime-contrib" gains in
onnxruntime: every example model converted for the default target, for "portable"
and for "onnxruntime-contrib" (a new model instance per conversion), node counts,
and onnxruntime latency at batch 1 and 8 (timed in alternating blocks,
benchmarks/timing.py), as ratios to the default.

    python benchmarks/targets.py [--models vit gpt] [--runs 40] [--write-docs]

--write-docs rewrites the generated part of the "Target profiles" page,
docs/benchmarks/targets.md.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import onnxruntime as ort  # noqa: E402

import doc_section  # noqa: E402
import _common  # noqa: E402
import compare  # noqa: E402
import jaxonnx  # noqa: E402
import timing  # noqa: E402

MODELS = ("mlp", "cnn", "vit", "gpt", "lstm")
TARGETS = ("onnxruntime", "portable", "onnxruntime-contrib")
OTHERS = TARGETS[1:]
BATCHES = (1, 8)
BEGIN, END = "<!-- targets.py: begin -->", "<!-- targets.py: end -->"


def measure(name, runs):
    module = importlib.import_module(name)
    specs = _common.specs(module.inputs())
    models = {t: jaxonnx.to_onnx(module.make_model(), specs, target=t) for t in TARGETS}
    # A target that gives the default's very bytes is not timed: its ratio is 1
    # by construction (timing it would only show the noise).
    default = models[TARGETS[0]].SerializeToString()
    timed = [t for t in TARGETS if t == TARGETS[0] or models[t].SerializeToString() != default]
    options = ort.SessionOptions()
    sessions = [ort.InferenceSession(models[t].SerializeToString(), options,
                                     providers=["CPUExecutionProvider"]) for t in timed]
    row = {"model": name, "nodes": {t: len(models[t].graph.node) for t in TARGETS}}
    for b in BATCHES:
        xs = _common.sample(module.inputs(), b, seed=b)

        def feed_of(s, xs=xs):
            return {i.name: x for i, x in zip(s.get_inputs(), xs)}
        times = dict(zip(timed, timing.block_latency(sessions, feed_of, runs)))
        row[f"b{b}"] = {t: times.get(t, times[TARGETS[0]]) for t in TARGETS}
        row["same"] = [t for t in TARGETS if t not in timed]
    return row


def table(rows):
    lines = ["| model | nodes (default / portable / contrib) | " +
             " | ".join(f"batch {b}: default, portable / default, contrib / default" for b in BATCHES) + " |",
             "|---|---|" + "---|" * len(BATCHES)]
    logs = {(b, t): [] for b in BATCHES for t in OTHERS}
    for r in rows:
        cells = []
        for b in BATCHES:
            t = r[f"b{b}"]
            ratios = []
            for other in OTHERS:
                ratio = t[other] / t["onnxruntime"]
                logs[b, other].append(math.log(ratio))
                ratios.append("same graph" if other in r["same"] else f"{ratio:.2f}x")
            cells.append(f"{t['onnxruntime'] * 1e3:.2f} ms, " + ", ".join(ratios))
        lines.append(f"| {r['model']} | " + " / ".join(str(r["nodes"][t]) for t in TARGETS) + " | "
                     + " | ".join(cells) + " |")
    lines.append("| geometric mean | | " + " | ".join(
        ", ".join(f"{math.exp(sum(logs[b, t]) / len(logs[b, t])):.2f}x" for t in OTHERS)
        for b in BATCHES) + " |")
    return "\n".join(lines)


def write_docs(text):
    doc_section.write_section(ROOT / "docs" / "benchmarks" / "targets.md", BEGIN, END, text,
                              "# Target profiles (benchmarks/targets.py)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--runs", type=int, default=40, help="kept onnxruntime runs per median")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    rows = [measure(m, args.runs) for m in args.models]
    text = compare.machine(load) + "\n\n" + table(rows)
    print(text)
    if args.write_docs:
        write_docs(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
