"""jaxonnx beside jax2onnx on every example (and a 24-block GPT), in one process:
conversion time, where jaxonnx spends it, graph size, onnxruntime latency, error
against JAX. Every conversion gets a new model instance (no tracing-cache hits).

    python benchmarks/compare.py [--runs 5] [--models mlp gpt] [--write-docs]

jax2onnx and matplotlib come from benchmarks/requirements.txt (install with the
project pins as constraints, see that file). Without jax2onnx its columns say
"not installed"; a jax2onnx failure on a model is shown in its cells.

--write-docs rewrites the generated part of docs/benchmarks/compare.md (machine,
table, chart docs/benchmarks/performance.png); the analysis below it is kept.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import jax  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

import doc_section  # noqa: E402
import _common  # noqa: E402
import timing  # noqa: E402
import jaxonnx  # noqa: E402
from jaxonnx import _core, _pipeline, _plugins, _source  # noqa: E402  (for the phase breakdown)

MODELS = ("mlp", "cnn", "vit", "gpt", "gpt24", "lstm")
# Models that are another size of an example: name -> (example, NAME, factory).
VARIANTS = {
    "gpt24": ("gpt", "GPT 24 blocks, d=128",
              lambda m: m.GPT(256, 32, 128, 4, 24, rngs=m.nnx.Rngs(0))),
}
LATENCY_BATCH = 8
DOC = ROOT / "docs" / "benchmarks" / "compare.md"
CHART = ROOT / "docs" / "benchmarks" / "performance.png"
BEGIN, END = "<!-- compare.py: begin -->", "<!-- compare.py: end -->"


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def median(xs):
    return statistics.median(xs) if xs else float("nan")


# ------------------------------------------------------------------ converters

def jaxonnx_convert(fn, specs):
    return jaxonnx.to_onnx(fn, specs)


def jaxonnx_phases(fn, specs):
    """The steps of jaxonnx.to_onnx (python/jaxonnx/_convert.py), timed one by one:
    tracing (_pipeline.trace, as to_onnx traces), then the core's own phase times (_core.convert's
    Converted.times): the jaxpr's transfer to C++, lowering through the plugins, the passes,
    and serialization."""
    registry = _plugins.registry(None)

    t_trace, program = timed(lambda: _pipeline.trace(fn, specs, [], [], registry, "fast"))
    closed = program.closed
    names = [f"in_{i}" for i in range(len(specs))]

    def core(optimize):
        return _core.convert(registry, closed, _core.ConvertOptions(
            opset=23, model_name="bench", input_names=names, describe_source=_source.describe,
            producer_version=jaxonnx.__version__, optimize=optimize))
    raw = core(False).model
    times = core(True).times
    return {"trace": t_trace, "import": times["import"], "lower": times["lower"],
            "passes": times["passes"], "export": times["export"],
            "raw_nodes": _common.count_nodes(onnx.load_from_string(raw))}


def peer():
    import logging
    for name in ("jax2onnx", "onnx_ir"):  # its notes on values it leaves untyped
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        from jax2onnx import to_onnx
    except ImportError:
        return None
    return lambda fn, specs: to_onnx(fn, specs)


def failure(e):
    return f"error: {type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"


# ------------------------------------------------------------------ measuring

def start_up(j2o):
    """Times each converter's first call in the process on a one-op function
    (plugin loading, imports), so that the per-model "first" columns don't carry it."""
    spec = _common.specs([_common.Input(("B", 4))])
    parts = [f"jaxonnx {timed(lambda: jaxonnx_convert(jax.numpy.tanh, spec))[0] * 1e3:.0f} ms"]
    if j2o is not None:
        try:
            parts.append(f"jax2onnx {timed(lambda: j2o(jax.numpy.tanh, spec))[0] * 1e3:.0f} ms")
        except Exception as e:
            parts.append(f"jax2onnx {failure(e)}")
    return ", ".join(parts)


def latency(sessions, feed_of, runs):
    """Median seconds per run of every session, in alternating blocks (timing.py)."""
    return timing.block_latency(sessions, feed_of, runs)


def latency_alone(sessions, feed_of, runs):
    """Median seconds per run of each session timed alone (its runs back to back,
    after the same warm-up): what one model on an otherwise idle machine sees."""
    out = []
    for s in sessions:
        feed = feed_of(s)
        for _ in range(5):
            s.run(None, feed)
        t = []
        for _ in range(runs):
            start = time.perf_counter()
            s.run(None, feed)
            t.append(time.perf_counter() - start)
        out.append(median(t))
    return out


def measure(name, runs, latency_runs, j2o):
    example, title, factory = VARIANTS.get(name, (name, None, None))
    module = importlib.import_module(example)

    def new():
        """A new instance for every conversion: JAX caches a trace per function
        object, and a user converts a model once, so no run may hit that cache."""
        return factory(module) if factory else module.make_model()
    fn = new()
    inputs = module.inputs()
    specs = _common.specs(inputs)
    row = {"model": title or module.NAME}

    # First calls, in this order: make_jaxpr, jaxonnx, jax2onnx. The first
    # make_jaxpr pays JAX's one-time costs for this model; the converters'
    # first calls then show their own start-up (plugin loading, imports).
    row["jaxpr_first"], _ = timed(lambda f=new(): jax.make_jaxpr(f)(*specs))
    row["jaxonnx_first"], model = timed(lambda f=new(): jaxonnx_convert(f, specs))
    models = {"jaxonnx": model}
    if j2o is not None:
        try:
            row["jax2onnx_first"], models["jax2onnx"] = timed(lambda f=new(): j2o(f, specs))
        except Exception as e:  # the peer's failure is a cell, not a crash
            row["jax2onnx_failure"] = failure(e)

    # Medians, interleaved so that a change of machine load hits all three.
    t = {"jaxpr": [], "jaxonnx": [], "jax2onnx": []}
    phases = []
    # Each run converts a new instance: JAX's trace cache, keyed on the callable,
    # must not answer for any of the three.
    for _ in range(runs):
        t["jaxpr"].append(timed(lambda f=new(): jax.make_jaxpr(f)(*specs))[0])
        t["jaxonnx"].append(timed(lambda f=new(): jaxonnx_convert(f, specs))[0])
        if "jax2onnx" in models:
            t["jax2onnx"].append(timed(lambda f=new(): j2o(f, specs))[0])
        phases.append(jaxonnx_phases(new(), specs))
    for k, v in t.items():
        if v:
            row[k] = median(v)
    for k in phases[0]:
        row[f"phase_{k}"] = median([p[k] for p in phases])

    # Graphs, onnxruntime latency and error at batch 8 (fn: a model of its own).
    xs = _common.sample(inputs, LATENCY_BATCH, seed=LATENCY_BATCH)
    want = [np.asarray(w) for w in jax.tree.leaves(_common.jitted(fn)(*xs))]
    sessions = {}
    for k, m in models.items():
        row[f"{k}_nodes"] = _common.count_nodes(m)
        row[f"{k}_bytes"] = m.ByteSize()
        try:
            onnx.checker.check_model(m, full_check=True)
            s = _common.session(m)
            feed = {v.name: x for v, x in zip(s.get_inputs(), xs)}
            got = s.run(None, feed)
            row[f"{k}_error"] = max(float(np.abs(g - w).max()) for g, w in zip(got, want))
            sessions[k] = (s, feed)
        except Exception as e:
            row[f"{k}_ort_error"] = failure(e)
    if sessions:
        ss = [s for s, _ in sessions.values()]
        feed_of = lambda s: next(f for t, f in sessions.values() if t is s)  # noqa: E731
        lat = latency(ss, feed_of, latency_runs)
        alone = latency_alone(ss, feed_of, latency_runs)
        for k, v, a in zip(sessions, lat, alone):
            row[f"{k}_latency"] = v
            row[f"{k}_latency_alone"] = a
    return row


# ------------------------------------------------------------------ reporting

def ratios(r):
    """jaxonnx / reference for each target (None where a side is missing)."""
    def div(a, b):
        return r[a] / r[b] if a in r and b in r and r[b] else None
    return {"conversion / make_jaxpr": div("jaxonnx", "jaxpr"),
            "conversion / jax2onnx": div("jaxonnx", "jax2onnx"),
            "nodes / jax2onnx": div("jaxonnx_nodes", "jax2onnx_nodes"),
            "latency / jax2onnx": div("jaxonnx_latency", "jax2onnx_latency"),
            "latency alone / jax2onnx": div("jaxonnx_latency_alone", "jax2onnx_latency_alone"),
            "size / jax2onnx": div("jaxonnx_bytes", "jax2onnx_bytes")}


TARGETS = {"conversion / make_jaxpr": 1.2, "conversion / jax2onnx": 0.1,
           "nodes / jax2onnx": 1.0, "latency / jax2onnx": 1.0}


def ms(r, k):
    return f"{r[k] * 1e3:.1f}" if k in r else "-"


def pair(r, a, b, fmt):
    return f"{fmt(r[a]) if a in r else '-'} / {fmt(r[b]) if b in r else '-'}"


def table(rows, peer_note):
    head = ["model", "make_jaxpr ms<br>median (first)", "jaxonnx ms<br>median (first)",
            "jax2onnx ms<br>median (first)", "jaxonnx phases ms<br>trace / import / lower / passes / export",
            "nodes<br>jaxonnx / jax2onnx", "KiB<br>jaxonnx / jax2onnx",
            f"ORT µs at B={LATENCY_BATCH}, interleaved<br>jaxonnx / jax2onnx",
            f"ORT µs at B={LATENCY_BATCH}, alone<br>jaxonnx / jax2onnx", "max error<br>jaxonnx / jax2onnx",
            "conv / make_jaxpr<br>(≤ 1.2)", "conv jaxonnx / jax2onnx<br>(≤ 0.1)",
            "nodes ratio<br>(≤ 1)", "latency ratio<br>interleaved (≤ 1)", "latency ratio<br>alone"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = []
    for r in rows:
        if "failure" in r:
            lines.append(f"| {r['model']} | jaxonnx failed: {r['failure']} |" + " |" * (len(head) - 2))
            continue
        q = ratios(r)
        j2o = f"{ms(r, 'jax2onnx')} ({ms(r, 'jax2onnx_first')})" if "jax2onnx" in r \
            else r.get("jax2onnx_failure", peer_note)
        cells = [r["model"], f"{ms(r, 'jaxpr')} ({ms(r, 'jaxpr_first')})",
                 f"{ms(r, 'jaxonnx')} ({ms(r, 'jaxonnx_first')})", j2o,
                 " / ".join(ms(r, f"phase_{k}") for k in ("trace", "import", "lower", "passes", "export")),
                 pair(r, "jaxonnx_nodes", "jax2onnx_nodes", str),
                 pair(r, "jaxonnx_bytes", "jax2onnx_bytes", lambda b: f"{b / 1024:.1f}"),
                 pair(r, "jaxonnx_latency", "jax2onnx_latency", lambda s: f"{s * 1e6:.0f}"),
                 pair(r, "jaxonnx_latency_alone", "jax2onnx_latency_alone", lambda s: f"{s * 1e6:.0f}"),
                 pair(r, "jaxonnx_error", "jax2onnx_error", lambda e: f"{e:.1e}")]
        for k in ("conversion / make_jaxpr", "conversion / jax2onnx", "nodes / jax2onnx",
                  "latency / jax2onnx"):
            v = q[k]
            cells.append("-" if v is None else f"{v:.2f}{'' if v <= TARGETS[k] else ' ✗'}")
        v = q["latency alone / jax2onnx"]
        cells.append("-" if v is None else f"{v:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
        for k in ("jaxonnx_ort_error", "jax2onnx_ort_error"):
            if k in r:
                notes.append(f"{r['model']}: {k.split('_')[0]} model in onnxruntime: {r[k]}")
    for k in ("nodes / jax2onnx", "latency / jax2onnx", "latency alone / jax2onnx"):
        vs = [ratios(r)[k] for r in rows if "failure" not in r]
        vs = [v for v in vs if v]
        if vs:
            notes.append(f"geometric mean of {k}: {statistics.geometric_mean(vs):.2f} "
                         f"over {len(vs)} models")
    return "\n".join(lines + [""] + [f"- {n}" for n in notes])


def chart(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(TARGETS) + ["size / jax2onnx"]
    names = [r["model"] for r in rows if "failure" not in r]
    data = [ratios(r) for r in rows if "failure" not in r]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(keys)
    for i, k in enumerate(keys):
        xs = [j + (i - (len(keys) - 1) / 2) * width for j in range(len(names))]
        ys = [d[k] if d[k] is not None else 0 for d in data]
        ax.bar(xs, ys, width, label=k + (f" (target ≤ {TARGETS[k]})" if k in TARGETS else ""))
        for x, y in zip(xs, ys):
            if y:
                ax.text(x, y, f"{y:.2g}", ha="center", va="bottom", fontsize=7)
        if k in TARGETS:
            for x in xs:
                ax.plot([x - width / 2, x + width / 2], [TARGETS[k]] * 2, color="black",
                        linewidth=2, solid_capstyle="butt", zorder=3)
    ax.set_yscale("log")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("jaxonnx / reference (log; lower is better)")
    ax.set_title("jaxonnx ratios; black ticks on the bars mark the targets")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine(load_before):
    cpu = platform.processor() or "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = ", ".join(f"{d} {version(d)}" for d in
                         ("jax", "jaxlib", "flax", "onnx", "onnxruntime", "jax2onnx", "jaxonnx"))
    load = ", ".join(f"{x:.1f}" for x in load_before) if load_before else "unknown"
    return (f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC\n"
            f"- CPU: {cpu}, {os.cpu_count()} logical cores; load average at start: {load}\n"
            f"- {platform.system()} {platform.release()}, Python {platform.python_version()}\n"
            f"- {versions}")


def write_docs(text):
    doc_section.write_section(DOC, BEGIN, END, text, "# Comparison with jax2onnx (benchmarks/compare.py)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--runs", type=int, default=7, help="conversions per median")
    parser.add_argument("--latency-runs", type=int, default=50, help="onnxruntime runs per median")
    parser.add_argument("--chart", type=Path, default=CHART)
    parser.add_argument("--json", type=Path, help="also write the raw measurements here")
    parser.add_argument("--write-docs", action="store_true",
                        help="rewrite the generated block of docs/benchmarks/compare.md")
    args = parser.parse_args()

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    j2o = peer()
    peer_note = "not installed" if j2o is None else "-"
    startup = start_up(j2o)
    rows = []
    for name in args.models:
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        try:
            rows.append(measure(name, args.runs, args.latency_runs, j2o))
        except Exception as e:  # a model jaxonnx cannot convert is a row, not a crash
            rows.append({"model": name, "failure": failure(e)})
    text = (f"{machine(load)}\n- one-time start-up, converting a one-op function first in the "
            f"process: {startup}\n\n{table(rows, peer_note)}\n"
            f"Conversion: {args.runs} interleaved runs per median, in one process, each on a "
            f"new model instance (no trace-cache hits); "
            f"\"first\" is the first call for the model, after the start-up above and one "
            f"make_jaxpr of the same model. "
            f"Phases (reported by the core): trace = make_jaxpr as to_onnx runs it; import = the jaxpr's "
            f"transfer to C++; lower = every equation through its plugin; passes = the "
            f"optimizer; export = serialization. The rest of a conversion is Python (input "
            f"specs, onnx.load_from_string of the result). "
            f"Nodes count Loop/If bodies. ORT: CPUExecutionProvider, default threads; "
            f"\"interleaved\" is the median of {args.latency_runs} runs of each model taken "
            f"in turn (the target: a machine's load hits both alike), \"alone\" the median of "
            f"{args.latency_runs} runs of each model back to back, after the interleaved ones. "
            f"✗ marks a missed target.\n\n"
            f"![jaxonnx / jax2onnx ratios]({args.chart.name})")
    print(text)
    try:
        chart(rows, args.chart)
        print(f"\nchart: {args.chart}", file=sys.stderr)
    except ImportError:
        print("\nno chart: matplotlib is not installed (benchmarks/requirements.txt)", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.write_docs:
        write_docs(text)
        print(f"updated {DOC}", file=sys.stderr)
    return 0 if all("failure" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
