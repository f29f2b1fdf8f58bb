"""jaxonnx beside jax2onnx on the "zoo-style" models (benchmarks/zoo_models.py):
graph size, onnxruntime latency and error against JAX, per model, with the
geometric mean of the latency ratios.

    python benchmarks/zoo.py [--models unet t5] [--blocks 10] [--runs 20] [--write-docs]

Each conversion gets a new model instance. Both models are checked against JAX at
B = 1 and B = 4; latency is measured at B = 8 (CPUExecutionProvider, default
threads) in alternating blocks: per block each session runs `--runs` + 1 times and
the first run of the block is dropped (it pays for the switch between sessions);
the median over all blocks is reported. jax2onnx comes from
benchmarks/requirements.txt; a peer failure is a cell, not a crash.

--write-docs rewrites the zoo block of docs/benchmarks/zoo.md (between its markers).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "examples"))

import jax  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from jax import export  # noqa: E402

import doc_section  # noqa: E402
import _common  # noqa: E402
import jaxonnx  # noqa: E402
import timing  # noqa: E402
from compare import peer  # noqa: E402
from portability_models import sample  # noqa: E402
from zoo_models import MODELS  # noqa: E402

DOC = ROOT.parent / "docs" / "benchmarks" / "zoo.md"
BEGIN, END = "<!-- zoo.py: begin -->", "<!-- zoo.py: end -->"
CHECK_BATCHES = (1, 4)
LATENCY_BATCH = 8


def specs(inputs):
    scope = export.SymbolicScope()
    return [jax.ShapeDtypeStruct(export.symbolic_shape(", ".join(str(d) for d in i.shape),
                                                       scope=scope), i.dtype) for i in inputs]


def failure(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:90] if text else ''}"


def session(model):
    options = ort.SessionOptions()
    options.log_severity_level = 3  # the peer's stale value_info shapes: warnings only
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def max_error(sess, fn, inputs):
    """The largest absolute difference from JAX over CHECK_BATCHES."""
    err = 0.0
    for b in CHECK_BATCHES:
        xs = sample(inputs, b, seed=b)
        want = [np.asarray(w) for w in jax.tree.leaves(jax.jit(fn)(*xs))]
        got = sess.run(None, {v.name: x for v, x in zip(sess.get_inputs(), xs)})
        for g, w in zip(got, want):
            if g.shape != w.shape:
                raise AssertionError(f"shape {g.shape} != JAX's {w.shape} at B={b}")
            err = max(err, float(np.abs(g.astype(np.float64) - w).max()))
    return err


def measure(name, j2o, blocks, runs):
    m = MODELS[name]
    inputs = m.inputs()
    s = specs(inputs)
    row = {"name": name, "title": m.title}
    converters = {"jaxonnx": lambda f: jaxonnx.to_onnx(f, s)}
    if j2o is not None:
        converters["jax2onnx"] = lambda f: j2o(f, s)
    sessions = {}
    for k, convert in converters.items():
        try:
            model = convert(m.make())
        except Exception as e:  # noqa: BLE001  (a failure is a cell)
            row[f"{k}_failure"] = "convert: " + failure(e)
            continue
        row[f"{k}_nodes"] = _common.count_nodes(model)
        try:
            sess = session(model)
            row[f"{k}_error"] = max_error(sess, m.make(), inputs)
            sessions[k] = sess
        except Exception as e:  # noqa: BLE001
            row[f"{k}_failure"] = "run: " + failure(e)
    if sessions:
        xs = sample(inputs, LATENCY_BATCH, seed=LATENCY_BATCH)
        def feed_of(ss):
            return {v.name: x for v, x in zip(ss.get_inputs(), xs)}
        for k, t in zip(sessions, timing.block_latency(list(sessions.values()), feed_of,
                                                       blocks * runs, block=runs)):
            row[f"{k}_latency"] = t
    return row


def table(rows, blocks, runs, peer_note):
    head = ["model", "nodes<br>jaxonnx / jax2onnx",
            f"ORT µs at B={LATENCY_BATCH}<br>jaxonnx / jax2onnx", "latency ratio<br>(≤ 1)",
            "max error vs JAX<br>jaxonnx / jax2onnx"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    ratios, notes = [], []

    def cell(r, k, fmt):
        if f"{k}_failure" in r:
            return "fails" if k == "jax2onnx" else "**fails**"
        if k == "jax2onnx" and peer_note:
            return peer_note
        return fmt(r)

    for r in rows:
        sides = ("jaxonnx", "jax2onnx")
        nodes = " / ".join(cell(r, k, lambda r, k=k: str(r[f"{k}_nodes"])) for k in sides)
        lat = " / ".join(cell(r, k, lambda r, k=k: f"{r[f'{k}_latency'] * 1e6:.0f}") for k in sides)
        err = " / ".join(cell(r, k, lambda r, k=k: f"{r[f'{k}_error']:.1e}") for k in sides)
        q = "-"
        if "jaxonnx_latency" in r and "jax2onnx_latency" in r:
            v = r["jaxonnx_latency"] / r["jax2onnx_latency"]
            ratios.append(v)
            q = f"{v:.2f}{'' if v <= 1.0 else ' ✗'}"
        lines.append(f"| {r['title']} | {nodes} | {lat} | {q} | {err} |")
        for k in ("jaxonnx", "jax2onnx"):
            if f"{k}_failure" in r:
                notes.append(f"{r['name']}: {k} {r[f'{k}_failure']}")
    if ratios:
        gm = statistics.geometric_mean(ratios)
        notes.insert(0, f"geometric mean of the latency ratios: {gm:.2f} over {len(ratios)} "
                        f"models both convert")
    text = "\n".join(lines + [""] + [f"- {n}" for n in notes])
    return text + (f"\n\nLatency: {blocks} alternating blocks of {runs} runs per session (each "
                   f"block's first run dropped), median; onnxruntime {ort.__version__}, "
                   f"CPUExecutionProvider, default threads; load average at start "
                   f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}.")


def write_docs(text):
    doc_section.write_section(DOC, BEGIN, END, text, "# Zoo-style models (benchmarks/zoo.py)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    j2o = peer()
    rows = []
    for name in args.models:
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        rows.append(measure(name, j2o, args.blocks, args.runs))
    text = table(rows, args.blocks, args.runs, "not installed" if j2o is None else "")
    print(text)
    if args.write_docs:
        write_docs(text)
        print(f"updated {DOC}", file=sys.stderr)
    return 0 if all("jaxonnx_failure" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
