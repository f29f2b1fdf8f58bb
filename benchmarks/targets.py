"""What target="portable" costs in onnxruntime: every example model converted for
the default target and for "portable" (a new model instance per conversion), node
counts, and onnxruntime latency at batch 1 and 8 (timed in alternating blocks,
benchmarks/timing.py), as ratios portable / default.

    python benchmarks/targets.py [--models vit gpt] [--runs 40] [--write-docs]

--write-docs rewrites the generated part of the "Target profiles" section of
docs/performance.md.
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
TARGETS = ("onnxruntime", "portable")
BATCHES = (1, 8)
BEGIN, END = "<!-- targets.py: begin -->", "<!-- targets.py: end -->"


def measure(name, runs):
    module = importlib.import_module(name)
    specs = _common.specs(module.inputs())
    models = {t: jaxonnx.to_onnx(module.make_model(), specs, target=t) for t in TARGETS}
    options = ort.SessionOptions()
    sessions = [ort.InferenceSession(models[t].SerializeToString(), options,
                                     providers=["CPUExecutionProvider"]) for t in TARGETS]
    row = {"model": name, "nodes": {t: len(models[t].graph.node) for t in TARGETS}}
    for b in BATCHES:
        xs = _common.sample(module.inputs(), b, seed=b)

        def feed_of(s, xs=xs):
            return {i.name: x for i, x in zip(s.get_inputs(), xs)}
        row[f"b{b}"] = dict(zip(TARGETS, timing.block_latency(sessions, feed_of, runs)))
    return row


def table(rows):
    lines = ["| model | nodes (default / portable) | " +
             " | ".join(f"batch {b}: default, portable / default" for b in BATCHES) + " |",
             "|---|---|" + "---|" * len(BATCHES)]
    logs = {b: [] for b in BATCHES}
    for r in rows:
        cells = []
        for b in BATCHES:
            t = r[f"b{b}"]
            ratio = t["portable"] / t["onnxruntime"]
            logs[b].append(math.log(ratio))
            cells.append(f"{t['onnxruntime'] * 1e3:.2f} ms, {ratio:.2f}x")
        lines.append(f"| {r['model']} | {r['nodes']['onnxruntime']} / {r['nodes']['portable']} | "
                     + " | ".join(cells) + " |")
    lines.append("| geometric mean | | " + " | ".join(
        f"{math.exp(sum(v) / len(v)):.2f}x" for v in logs.values()) + " |")
    return "\n".join(lines)


def write_docs(text):
    doc_section.write_section(compare.DOC, BEGIN, END, text, "## Target profiles (benchmarks/targets.py)")


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
