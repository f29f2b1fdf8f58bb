"""How conversion time and peak memory grow with the model: GPT (examples/gpt.py)
with 6, 12, 24 and 48 blocks, wider as it deepens (weights from ~20 MB to ~4 GB),
for jax.make_jaxpr (the tracing floor), jaxonnx and jax2onnx.

    python benchmarks/scaling.py [--configs 6x256 12x512 24x768 48x1024 48x1320]
                                 [--tools make_jaxpr jaxonnx jax2onnx] [--write-docs]

Every (model, tool) runs in a child process that builds a new model instance
(so no tracing cache is hit), then times the tool's step alone and reads the
process's peak RSS over that step (reset through /proc/self/clear_refs first,
so building the model does not count). Both converters return a ModelProto
(return_mode="proto", in memory like make_jaxpr) below 2 GB of weights and write
a file into a temporary folder above (jaxonnx then writes external data); each
tool converts a one-op
function first, so its one-time start-up is not counted. A failure (e.g. jax2onnx past
protobuf's 2 GB) is shown in its cell.

--write-docs rewrites the scaling section of docs/benchmarks/scaling.md (between its
scaling.py markers) and the chart docs/benchmarks/scaling.png (matplotlib).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import doc_section

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks" / "scaling.md"
CHART = ROOT / "docs" / "benchmarks" / "scaling.png"
BEGIN, END = "<!-- scaling.py: begin -->", "<!-- scaling.py: end -->"
TOOLS = ("make_jaxpr", "jaxonnx", "jax2onnx")
VOCAB, CONTEXT = 256, 32

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, os.path.join(sys.argv[1], "examples"))
blocks, width, tool, folder = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
import jax, numpy as np
from flax import nnx
import gpt, _common

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024

model = gpt.GPT(%(vocab)d, %(context)d, width, max(2, width // 64), blocks, rngs=nnx.Rngs(0))
weights = sum(x.nbytes for x in jax.tree.leaves(nnx.state(model)))
specs = _common.specs([_common.Input(("B", %(context)d), np.int32)])
path = os.path.join(folder, "model.onnx")
# In memory (a ModelProto) like make_jaxpr, unless protobuf's 2 GB forces a file.
mode = "file" if weights > 1.9e9 else "proto"
if tool == "jaxonnx":
    import jaxonnx
    convert = lambda fn, s, p: jaxonnx.to_onnx(fn, s, return_mode=mode, output_path=p)
elif tool == "jax2onnx":
    import jax2onnx
    convert = lambda fn, s, p: jax2onnx.to_onnx(fn, s, return_mode=mode, output_path=p)
else:
    convert = lambda fn, s, p: jax.make_jaxpr(fn)(*s)
# One-time start-up (plugin loading, first-call imports) is not the model's cost.
convert(lambda x: x + 1, [jax.ShapeDtypeStruct((2,), np.float32)], os.path.join(folder, "w.onnx"))
step = lambda: convert(model, specs, path)
base = status("VmRSS")
open("/proc/self/clear_refs", "w").write("5")
t = time.perf_counter()
step()
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "peak_rss": status("VmHWM"), "base_rss": base,
                  "weights": weights}))
""" % {"vocab": VOCAB, "context": CONTEXT}


def run_one(blocks, width, tool, max_gb):
    weights = 4 * (blocks * 12 * width * width + (VOCAB + CONTEXT) * width + width * VOCAB)
    if weights > max_gb * 1e9:
        return {"error": f"skipped (over --max-gb {max_gb:g} for {tool})"}
    with tempfile.TemporaryDirectory(prefix="jaxonnx-scaling-") as folder:
        p = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(blocks), str(width), tool,
                            folder], capture_output=True, text=True)
    if p.returncode != 0:
        lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
        return {"error": lines[-1][:160] if lines else f"exit {p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def table(rows, tools):
    head = "| blocks x width | weights | " + " | ".join(
        f"{t} s | {t} peak RSS" for t in tools) + " | jaxonnx / make_jaxpr |"
    lines = [head, "|" + "---|" * (2 + 2 * len(tools) + 1)]
    for r in rows:
        cells = [f"{r['blocks']} x {r['width']}", f"{r['weights'] / 1e6:,.0f} MB"]
        for t in tools:
            m = r[t]
            if "error" in m:
                cells += [m["error"] if m["error"].startswith("skipped") else f"failed: {m['error']}", ""]
            else:
                cells += [f"{m['seconds']:.2f}", f"{m['peak_rss'] / 1e9:.2f} GB"]
        a, b = r.get("jaxonnx", {}), r.get("make_jaxpr", {})
        cells.append(f"{a['seconds'] / b['seconds']:.2f}x" if "seconds" in a and "seconds" in b
                     else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def chart(rows, tools):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for t in tools:
        pts = [(r["weights"] / 1e9, r[t]) for r in rows if "seconds" in r[t]]
        if not pts:
            continue
        ax1.plot([w for w, _ in pts], [m["seconds"] for _, m in pts], "o-", label=t)
        ax2.plot([w for w, _ in pts], [m["peak_rss"] / 1e9 for _, m in pts], "o-", label=t)
    ax1.set(xlabel="weights (GB)", ylabel="seconds", title="time")
    ax2.set(xlabel="weights (GB)", ylabel="peak RSS (GB)", title="peak memory")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(CHART, dpi=100)


def write_docs(text):
    doc_section.write_section(DOC, BEGIN, END, text, "# Scaling (benchmarks/scaling.py)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", nargs="+", default=["6x256", "12x512", "24x768", "48x1024", "48x1320"],
                    help="BLOCKSxWIDTH")
    ap.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS)
    ap.add_argument("--jax2onnx-max-gb", type=float, default=2.5,
                    help="skip jax2onnx on models with more weights (GB; default 2.5): it holds "
                         "several copies (6.4 GB peak for 2.4 GB of weights)")
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    for c in args.configs:
        blocks, width = map(int, c.split("x"))
        row = {"blocks": blocks, "width": width}
        for t in args.tools:
            row[t] = run_one(blocks, width, t, args.jax2onnx_max_gb if t == "jax2onnx" else 1e9)
            row["weights"] = row.get("weights") or row[t].get("weights", 0)
            print(f"{c} {t}: {json.dumps(row[t])}", file=sys.stderr, flush=True)
        rows.append(row)
    text = ("Conversion time and peak RSS (each in a new process and on a new model instance; "
            "peak RSS includes the model's own weights; return_mode=\"proto\" below 2 GB of "
            "weights, \"file\" above). Generated by "
            "`python benchmarks/scaling.py --write-docs`.\n\n" + table(rows, args.tools)
            + "\n\n![scaling](scaling.png)")
    print(text)
    if args.write_docs:
        chart(rows, args.tools)
        write_docs(text)


if __name__ == "__main__":
    main()
