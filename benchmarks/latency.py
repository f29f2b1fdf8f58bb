"""onnxruntime latency of jaxonnx's and jax2onnx's graphs at batch 8 and batch 1,
with onnxruntime's default threads and with one intra-op thread, as ratios
jaxonnx / jax2onnx and as a percentage of the machine's compute roofline
(benchmarks/roofline.py: the model's matrix-product FLOPs at the best GFLOP/s
onnxruntime's MatMul / Conv reaches here, measured in the same run).

    python benchmarks/latency.py [--models vit gpt] [--runs 20] [--rounds 3] [--write-docs]

Each converter gets a new model instance. Both graphs of a model are timed in
alternating blocks (benchmarks/timing.py) per batch and thread setting, in --rounds
rounds over the four settings (a cell is the median of the rounds). The peaks
are measured before and after the models (the better of the two is kept: the
roofline is the best the machine does). --write-docs rewrites the generated block
of docs/benchmarks/latency.md and draws docs/benchmarks/roofline.png.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

import doc_section  # noqa: E402
import _common  # noqa: E402
import compare  # noqa: E402
import roofline  # noqa: E402
import timing  # noqa: E402

MODELS = compare.MODELS
TRANSFORMERS = ("vit", "gpt", "gpt24")
BATCHES = (8, 1)
THREADS = (None, 1)   # onnxruntime's default, one intra-op thread
SETTINGS = [(b, t) for b in BATCHES for t in THREADS]
DOC = ROOT / "docs" / "benchmarks" / "latency.md"
CHART = ROOT / "docs" / "benchmarks" / "roofline.png"
BEGIN, END = "<!-- latency.py: begin -->", "<!-- latency.py: end -->"


def label(setting):
    b, t = setting
    return f"B={b}, {'default threads' if t is None else f'{t} thread'}"


def key(setting):
    b, t = setting
    return f"b{b}_t{'default' if t is None else t}"


def convert(name, j2o):
    """{"jaxonnx": model, "jax2onnx": model or an error text}, each from a new instance."""
    example, title, factory = compare.VARIANTS.get(name, (name, None, None))
    module = importlib.import_module(example)

    def new():
        return factory(module) if factory else module.make_model()
    inputs = module.inputs()
    specs = _common.specs(inputs)
    models = {"jaxonnx": compare.jaxonnx_convert(new(), specs)}
    if j2o is not None:
        try:
            models["jax2onnx"] = j2o(new(), specs)
        except Exception as e:  # the peer's failure is a cell, not a crash
            models["jax2onnx"] = compare.failure(e)
    return title or module.NAME, inputs, models


def measure(name, j2o, runs, rounds):
    title, inputs, models = convert(name, j2o)
    row = {"name": name, "model": title, "flops": {}, "latency": {}, "ratios": {}, "notes": []}
    ok = {k: m for k, m in models.items() if not isinstance(m, str)}
    for k, m in models.items():
        if isinstance(m, str):
            row["notes"].append(f"jax2onnx: {m}")
    # The same kernels after onnxruntime's optimizations: the ratio is noise, not a graph's doing.
    row["same_kernels"] = len(ok) == 2 and len({str(roofline.kernels(m)) for m in ok.values()}) == 1
    sessions = {t: {k: roofline.session(m, t) for k, m in ok.items()} for t in THREADS}
    feeds = {}
    for b in BATCHES:
        xs = _common.sample(inputs, b, seed=b)
        first = sessions[None]
        feeds[b] = {k: {v.name: x for v, x in zip(s.get_inputs(), xs)} for k, s in first.items()}
        outs = {k: s.run(None, feeds[b][k]) for k, s in first.items()}
        if len(outs) == 2 and not all(np.allclose(a, c, rtol=1e-3, atol=1e-4)
                                      for a, c in zip(*outs.values())):
            row["notes"].append(f"B={b}: jaxonnx and jax2onnx outputs differ")
        row["flops"][b] = {k: roofline.count_flops(m, b, feeds[b][k]) for k, m in ok.items()}
    # Rounds over every setting, so that a change of load reaches all of them; each
    # round times the two graphs of a setting in alternating blocks.
    times = {s: {k: [] for k in ok} for s in SETTINGS}
    for _ in range(rounds):
        for b, t in SETTINGS:
            order = list(ok)
            by = {sessions[t][k]: feeds[b][k] for k in order}
            lat = timing.block_latency([sessions[t][k] for k in order], by.__getitem__, runs)
            for k, v in zip(order, lat):
                times[(b, t)][k].append(v)
    for s, ts in times.items():
        row["latency"][s] = {k: statistics.median(v) for k, v in ts.items()}
        if len(ts) == 2:
            row["ratios"][s] = [a / c for a, c in zip(ts["jaxonnx"], ts["jax2onnx"])]
    for b, fs in row["flops"].items():
        if len(fs) == 2 and fs["jaxonnx"].total != fs["jax2onnx"].total:
            row["notes"].append(f"B={b}: FLOPs counted differ: jaxonnx {fs['jaxonnx'].total}, "
                                f"jax2onnx {fs['jax2onnx'].total}")
        for k, f in fs.items():
            row["notes"].extend(f"{k} B={b}: {n}" for n in f.notes)
    return row


def ratio(row, setting):
    """The median over the rounds of jaxonnx / jax2onnx (None without jax2onnx)."""
    rs = row["ratios"].get(setting)
    return statistics.median(rs) if rs else None


def percent(row, setting, peaks, who="jaxonnx"):
    b, t = setting
    lat = row["latency"].get(setting, {})
    if who not in lat:
        return None
    return roofline.percent_of_roofline(row["flops"][b][who], lat[who], peaks[t])


def gmean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def peaks_table(peaks):
    lines = ["| threads | MatMul GFLOP/s (best; M x K x N: GFLOP/s) | Conv GFLOP/s (best; N, C, H, W, C_out, 3x3: GFLOP/s) | copy GB/s |",
             "|---|---|---|---|"]
    for t, p in peaks.items():
        mm = ", ".join(f"{'x'.join(map(str, s))}: {v:.0f}" for s, v in p.matmul_sizes.items())
        cv = ", ".join(f"{','.join(map(str, s))}: {v:.0f}" for s, v in p.conv_sizes.items())
        lines.append(f"| {'default' if t is None else t} | **{p.matmul:.0f}** ({mm}) | "
                     f"**{p.conv:.0f}** ({cv}) | **{p.copy:.1f}** |")
    return "\n".join(lines)


def table(rows, peaks):
    head = ["model", "MFLOP<br>at B=1"] + [f"{label(s)}<br>µs · ratio (range) · % roofline" for s in SETTINGS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "failure" in r:
            lines.append(f"| {r['model']} | jaxonnx failed: {r['failure']} |" + " |" * (len(head) - 2))
            continue
        cells = [r["model"], f"{r['flops'][1]['jaxonnx'].total / 1e6:.2f}"]
        for s in SETTINGS:
            lat = r["latency"][s]["jaxonnx"]
            q, p = ratio(r, s), percent(r, s, peaks)
            p2 = percent(r, s, peaks, "jax2onnx")
            rs = r["ratios"].get(s, [])
            spread = f" ({min(rs):.2f}-{max(rs):.2f})" if len(rs) > 1 else ""
            mark = "" if q is None or q <= 1 else " =" if r.get("same_kernels") else " ✗"
            cells.append(f"{lat * 1e6:.0f} · " + ("-" if q is None else f"{q:.2f}x{mark}{spread}")
                         + f" · {p:.0f}%" + ("" if p2 is None else f" ({p2:.0f}%)"))
        lines.append("| " + " | ".join(cells) + " |")
    ok = [r for r in rows if "failure" not in r]
    for title, subset in (("geometric mean, all models", ok),
                          ("geometric mean, transformers", [r for r in ok if r["name"] in TRANSFORMERS])):
        cells = [title, ""]
        for s in SETTINGS:
            g = gmean([ratio(r, s) for r in subset])
            cells.append("-" if g is None else f"{g:.2f}x")
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"{r['model']}: {n}" for r in ok for n in r["notes"]]
    notes += [f"{r['model']}: onnxruntime runs the same kernels for both graphs once it has optimized "
              f"them (benchmarks/roofline.py kernels()), so its ratios are timing noise (= where above 1)"
              for r in ok if r.get("same_kernels")]
    return "\n".join(lines + [""] + [f"- {n}" for n in notes])


def chart(rows, peaks, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if "failure" not in r]
    names = [r["model"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
    width = 0.8 / len(SETTINGS)
    for i, s in enumerate(SETTINGS):
        xs = [j + (i - (len(SETTINGS) - 1) / 2) * width for j in range(len(rows))]
        q = [ratio(r, s) or 0 for r in rows]
        p = [percent(r, s, peaks) or 0 for r in rows]
        p2 = [percent(r, s, peaks, "jax2onnx") or 0 for r in rows]
        left.bar(xs, q, width, label=label(s))
        bars = right.bar(xs, p, width, label=f"{label(s)}: jaxonnx")
        right.scatter(xs, p2, marker="_", s=120, color="black", zorder=3,
                      label="jax2onnx" if i == 0 else None)
        for x, y in zip(xs, q):
            if y:
                left.text(x, y, f"{y:.2f}", ha="center", va="bottom", fontsize=6)
        for x, y in zip(xs, p):
            right.text(x, y, f"{y:.0f}", ha="center", va="bottom", fontsize=6,
                       color=bars.patches[0].get_facecolor())
    left.axhline(1.0, color="black", linewidth=0.8)
    left.set_ylim(0, max([1.0] + [ratio(r, s) or 0 for r in rows for s in SETTINGS]) * 1.3)  # room for the legend
    left.set_xticks(range(len(rows)), names, fontsize=8)
    left.set_ylabel("latency jaxonnx / jax2onnx (lower is better)")
    left.set_title("latency ratio to jax2onnx")
    left.legend(fontsize=7)
    right.set_xticks(range(len(rows)), names, fontsize=8)
    right.set_ylabel("% of the compute roofline (higher is better)")
    right.set_title("jaxonnx's % of roofline (black: jax2onnx's)")
    right.set_ylim(0, max([1.0] + [percent(r, s, peaks, w) or 0 for r in rows for s in SETTINGS
                                   for w in ("jaxonnx", "jax2onnx")]) * 1.35)
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_docs(text):
    doc_section.write_section(DOC, BEGIN, END, text, "# Batch 1, one thread and the roofline (benchmarks/latency.py)")


def best_peaks(a, b):
    """Per thread setting, the better of two measurements of each peak."""
    out = {}
    for t in a:
        x, y = a[t], b[t]
        out[t] = roofline.Peaks(
            t, max(x.matmul, y.matmul), max(x.conv, y.conv), max(x.copy, y.copy),
            {s: max(v, y.matmul_sizes[s]) for s, v in x.matmul_sizes.items()},
            {s: max(v, y.conv_sizes[s]) for s, v in x.conv_sizes.items()})
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--runs", type=int, default=20, help="kept onnxruntime runs per median")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds over every setting; a cell is the median of the rounds")
    parser.add_argument("--peak-runs", type=int, default=10, help="runs per peak shape")
    parser.add_argument("--chart", type=Path, default=CHART)
    parser.add_argument("--json", type=Path, help="also write the raw measurements here")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)

    load = os.getloadavg()
    j2o = compare.peer()
    print("measuring the peaks ...", file=sys.stderr, flush=True)
    before = {t: roofline.measure_peaks(t, runs=args.peak_runs) for t in THREADS}
    rows = []
    for name in args.models:
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        try:
            rows.append(measure(name, j2o, args.runs, args.rounds))
        except Exception as e:  # a model jaxonnx cannot convert is a row, not a crash
            rows.append({"name": name, "model": name, "failure": compare.failure(e)})
    print("measuring the peaks again ...", file=sys.stderr, flush=True)
    after = {t: roofline.measure_peaks(t, runs=args.peak_runs) for t in THREADS}
    peaks = best_peaks(before, after)
    load_end = os.getloadavg()

    text = (f"{compare.machine(load)}; at the end: {', '.join(f'{x:.1f}' for x in load_end)}\n\n"
            f"What onnxruntime reaches on this machine (float32, CPUExecutionProvider, the "
            f"better of a measurement before and one after the models; copy: an elementwise "
            f"Add streaming 512 MiB, bytes read + written per second):\n\n"
            f"{peaks_table(peaks)}\n\n{table(rows, peaks)}\n\n"
            f"Each cell: jaxonnx's median latency, its ratio to jax2onnx's (✗ where above 1, = where above "
            f"1 but onnxruntime runs the same kernels for both; the median of {args.rounds} rounds, the rounds' range in parentheses), jaxonnx's % of the compute roofline (jax2onnx's in parentheses). The "
            f"roofline is the model's matrix-product FLOPs (MatMul, Gemm, Attention, Conv; "
            f"benchmarks/roofline.py counts them from the graph with the batch fixed) at "
            f"the peak GFLOP/s above for the same thread setting. Both graphs of a model "
            f"timed in alternating blocks, {args.runs} kept runs each per setting and round, "
            f"rounds over all four settings in turn; the "
            f"transformers are ViT, GPT and GPT 24 blocks.\n\n"
            f"![latency ratio and % of roofline]({args.chart.name})")
    print(text)
    try:
        chart(rows, peaks, args.chart)
        print(f"\nchart: {args.chart}", file=sys.stderr)
    except ImportError:
        print("\nno chart: matplotlib is not installed (benchmarks/requirements.txt)", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(
            {"peaks": {str(t): vars(p) | {"matmul_sizes": {str(k): v for k, v in p.matmul_sizes.items()},
                                          "conv_sizes": {str(k): v for k, v in p.conv_sizes.items()}}
                       for t, p in peaks.items()},
             "rows": [{"model": r["model"], **({"failure": r["failure"]} if "failure" in r else {
                 "flops": {b: {k: f.total for k, f in fs.items()} for b, fs in r["flops"].items()},
                 "latency": {key(s): v for s, v in r["latency"].items()},
                 "ratios": {key(s): v for s, v in r["ratios"].items()}, "notes": r["notes"]})}
                 for r in rows]}, indent=1))
    if args.write_docs:
        write_docs(text)
        print(f"updated {DOC}", file=sys.stderr)
    return 0 if all("failure" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
