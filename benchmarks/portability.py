"""Portability matrix: every benchmark model, a set of realistic test models and
one probe per known failure pattern, converted by jaxonnx (and by jax2onnx 0.17.1
as the peer, where installed), through every ONNX runtime and tool of
benchmarks/portability_targets.py, each compared with JAX at a symbolic batch of
1 and 3 (float32).

    python benchmarks/portability.py [--models gpt,bert] [--targets ort,tract]
        [--converters jaxonnx] [--opset 18] [--markdown] [--json F] [--keep DIR]
    python benchmarks/portability.py --report F [--markdown]

Models: the benchmark models of benchmarks/compare.py (mlp, cnn, vit, gpt, gpt24,
lstm); the realistic programs of benchmarks/portability_models.py (bert, resnet,
unet, lstm_tagger, mixer, gpt_causal) and its probes (the smallest program per
failure pattern). A cell is pass, mismatch (the largest error relative to
max(1, |JAX|)), fail (known reasons get a label from LABELS; the messages are
listed in full under the tables) or n/a (the runtime is missing). Each cell runs
in a worker process, so a runtime that crashes or hangs costs that cell only.

The runtimes come from scripts/requirements.txt (openvino, tract, onnxsim,
onnxslim); jax2onnx from benchmarks/requirements.txt. --markdown prints the
tables as docs/portability.md has them; --json saves the run, --report prints a
saved run again; --keep leaves the converted models and their data in DIR.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib
import importlib.metadata
import json
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import jax  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402

import _common  # noqa: E402
import compare  # noqa: E402  (its MODELS and VARIANTS are the benchmark models)
import jaxonnx  # noqa: E402
import portability_models  # noqa: E402
from portability_targets import TARGETS, Worker, installed  # noqa: E402

BATCHES = (1, 3)
CONVERTERS = ("jaxonnx", "jaxonnx-portable", "jax2onnx")

# Known failure messages -> the label a cell shows: (target or None for any,
# regex, label). docs/portability.md gives each label's diagnosed cause. First
# match wins; an unknown message shows its start.
LABELS = [
    ("tract", r"FoldUniformMask", "And(mask, Expand(True)) folded to a wrong shape"),
    ("tract", r"\"ConstantOfShape\".*F64", "ConstantOfShape without value typed f64"),
    ("tract", r"Duplicate node name: If", "two If nodes: duplicate node name If"),
    ("tract", r"Unimplemented\(Loop\)", "Loop not implemented"),
    ("tract", r"Bool is not a number", "ReduceMax over bool"),
    ("tract", r"IsInf.*F64", "IsInf on float64 (TopK key)"),
    ("tract", r"Output mismatch after rewiring", "Slice ends computed from a symbolic dim"),
    ("tract", r"panicked at .*could not broadcast array", "panic (ndarray broadcast) on a negative Pad"),
    ("tract", r"shape input is variable", "Reshape to a computed shape"),
    ("tract", r"EinSum.*\n?.*fact\.len\(\) ==", "MatMul of a constant-valued tensor of symbolic shape (a scan's zero state)"),
    (None, r"inconsistent q_sequence_length", "Attention mask [B,1,1,T] not broadcast"),
    ("symshape", r"_infer_Attention", "standard Attention taken for the contrib op"),
    ("symshape", r"object of type 'NoneType' has no len|'NoneType' object is not iterable",
     "Reduce* with axes as input left without shape"),
    ("reference", r"has shape .* JAX's|Inconsistent permutation", "Loop scan outputs concatenated, not stacked"),
    ("reference", r"index can't contain negative values", "negative Pad refused"),
    ("quantize", r"unknown initializers/tensors", "value read by a Loop body lost"),
    ("quantize", r"weights left float inside If/Loop bodies", "weights inside If/Loop bodies left float"),
    (None, r"patched_max_pool\(\) takes 1 positional", "max_pool with a positional window"),
    (None, r"MultiheadAttention mask handling is not supported", "eqx MultiheadAttention mask"),
    (None, r"Symbolic dimension 'B' used in a context that requires a constant", "lax.pad over symbolic B"),
]


@dataclasses.dataclass
class Entry:
    title: str
    make: object        # () -> a new callable to convert
    inputs: list        # Inputs with "B"
    group: str          # a key of GROUPS


def entries():
    """name -> Entry, benchmark models first."""
    out = {}
    for name in compare.MODELS:
        example, title, factory = compare.VARIANTS.get(name, (name, None, None))
        module = importlib.import_module(example)
        make = (lambda f=factory, m=module: f(m)) if factory else module.make_model
        out[name] = Entry(title or module.NAME, make, module.inputs(), "benchmark")
    for group, builders in (("realistic", portability_models.MODELS), ("probe", portability_models.PROBES)):
        for name, build in builders.items():
            m = build()
            out[name] = Entry(m.title, m.make, m.inputs(), group)
    return out


def sample(inputs, batch):
    if all(isinstance(i, portability_models.Input) for i in inputs):
        return portability_models.sample(inputs, batch, seed=batch)
    return _common.sample(inputs, batch, seed=batch)


# ------------------------------------------------------------------ converting

def converter(name, opset):
    """(fn, specs) -> ModelProto, or None where the converter is not installed."""
    if name == "jaxonnx":
        return lambda fn, specs: jaxonnx.to_onnx(fn, specs, opset=opset)
    if name == "jaxonnx-portable":  # to_onnx(target="portable"): its own opset unless given
        return lambda fn, specs: jaxonnx.to_onnx(fn, specs, target="portable",
                                                 opset=None if opset == 23 else opset)
    import logging
    for logger in ("jax2onnx", "onnx_ir"):  # its notes on values it leaves untyped
        logging.getLogger(logger).setLevel(logging.ERROR)
    try:
        from jax2onnx import to_onnx
    except ImportError:
        return None
    return lambda fn, specs: to_onnx(fn, specs, opset=opset)


def first_line(e, limit=160):
    text = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def prepare(name, entry, converters, opset, work):
    """Converts the model with each converter and writes the models and the data
    (inputs and JAX's outputs at each batch) into `work`; {converter: path or
    failure text}, and the data path."""
    fn = entry.make()
    data = {}
    for b in BATCHES:
        xs = sample(entry.inputs, b)
        want = jax.tree.leaves(jax.jit(fn)(*xs))
        data.update({f"b{b}_in{i}": x for i, x in enumerate(xs)})
        data.update({f"b{b}_out{i}": np.asarray(w) for i, w in enumerate(want)})
    data_path = work / f"{name}.npz"
    np.savez(data_path, **data)
    specs = _common.specs(entry.inputs)
    models = {}
    for conv, to_onnx in converters.items():
        try:
            model = to_onnx(entry.make(), specs)  # its own instance: a converter may patch or mutate
        except Exception as e:
            models[conv] = f"conversion failed: {first_line(e)}"
            continue
        path = work / f"{name}.{conv}.onnx"
        onnx.save(model, path)
        models[conv] = path
    return models, data_path


# ------------------------------------------------------------------ reporting

def label(detail, target=None):
    for where, pattern, text in LABELS:
        if where in (None, target) and re.search(pattern, detail):
            return text
    detail = re.sub(r"^(at B=\d+|conversion failed): ", "", detail)
    return detail if len(detail) <= 60 else detail[:57] + "..."


def cell_text(cell, target=None):
    if cell["status"] == "mismatch":
        return f"mismatch {cell['err']:.1e}"
    if cell["status"] == "fail":
        return f"fail: {label(cell['detail'], target)}"
    return cell["status"]


GROUPS = {"benchmark": "benchmark models (benchmarks/compare.py)",
          "realistic": "realistic models (benchmarks/portability_models.py)",
          "probe": "probes: the smallest program per failure pattern"}


def _grid(head, rows, markdown):
    """rows: lists of cells, or a str (a group's heading)."""
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in rows:
            cells = [f"*{r}*"] + [""] * (len(head) - 1) if isinstance(r, str) else r
            out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
        return "\n".join(out)
    cells = [r for r in rows if not isinstance(r, str)]
    widths = [max(len(str(r[i])) for r in cells + [head]) for i in range(len(head))]
    return "\n".join(f"[{r}]" if isinstance(r, str) else "  ".join(str(c).ljust(w) for c, w in zip(r, widths))
                     for r in [head] + rows)


def table(run, conv, markdown):
    results, targets = run["results"], run["targets"]
    rows, group = [], None
    for name in run["models"]:
        r = results[name]
        if r["group"] != group:
            group = r["group"]
            rows.append(GROUPS[group])
        if conv not in r["cells"]:
            failed = r["models"].get(conv)
            rows.append([name, f"conversion failed: {label(failed)}" if failed else "not installed"]
                        + [""] * (len(targets) - 1))
            continue
        rows.append([name] + [cell_text(r["cells"][conv][t], t) for t in targets])
    return _grid(["model"] + targets, rows, markdown)


def summary(run, markdown):
    """Passes per target and converter."""
    results, targets = run["results"], run["targets"]
    rows = []
    for conv in run["converters"]:
        row, total, n = [conv], 0, 0
        for t in targets:
            cells = [results[m]["cells"].get(conv, {}).get(t) for m in run["models"]]
            passed = sum(1 for c in cells if c and c["status"] == "pass")
            counted = sum(1 for c in cells if not c or c["status"] != "n/a")
            row.append(f"{passed}/{counted}")
            total, n = total + passed, n + counted
        rows.append(row + [f"{total}/{n}"])
    return _grid(["converter"] + targets + ["all"], rows, markdown)


def failures(run):
    """The failing cells grouped by converter, target and label: the models, and
    the first one's message in full."""
    groups = {}
    for name in run["models"]:
        r = run["results"][name]
        for conv in run["converters"]:
            cells = r["cells"].get(conv)
            if cells is None:
                if conv in r["models"]:
                    groups.setdefault((conv, "conversion", label(r["models"][conv])), []).append(
                        (name, r["models"][conv]))
                continue
            for t in run["targets"]:
                c = cells[t]
                if c["status"] == "fail":
                    groups.setdefault((conv, t, label(c["detail"], t)), []).append((name, c["detail"]))
                elif c["status"] == "mismatch":
                    groups.setdefault((conv, t, "mismatch"), []).append(
                        (name, f"max error {c['err']:.2e} ({c['detail']})"))
    order = {k: i for i, k in enumerate(run["converters"] + ["conversion"] + run["targets"])}
    keys = sorted(groups, key=lambda k: (order[k[0]], order[k[1]]))  # stable: model order within
    return [f"{conv} / {t} / {lab} — {', '.join(n for n, _ in groups[conv, t, lab])}: "
            f"{groups[conv, t, lab][0][1]}" for conv, t, lab in keys]


def legend(run):
    return [f"{name}: {run['results'][name]['title']}" for name in run["models"]]


def version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine():
    dists = ("jax", "flax", "equinox", "onnx", "onnxruntime", "openvino", "tract", "onnxsim",
             "onnxslim", "jax2onnx", "jaxonnx")
    return (f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; "
            f"{platform.system()} {platform.machine()}, Python {platform.python_version()}\n"
            f"- " + ", ".join(f"{d} {version(d)}" for d in dists))


def report(run, markdown):
    parts = [run["machine"], f"- opset {run['opset']}; batches {', '.join(map(str, BATCHES))} "
                             f"of a symbolic batch dim; float32", ""]
    parts += [("**Passes**" if markdown else "Passes") + " (cells that pass / cells with the runtime installed)",
              "", summary(run, markdown)]
    for conv in run["converters"]:
        parts += ["", f"**{conv}**" if markdown else conv, "", table(run, conv, markdown)]
    parts += ["", "Models:", ""] + [f"- {line}" for line in legend(run)]
    fails = failures(run)
    if fails:
        parts += ["", "Failures (converter / target / label — models: the first one's message):", ""]
        parts += [f"- {f}" for f in fails]
    return "\n".join(parts)


# ------------------------------------------------------------------ main

def csv(text, allowed, what):
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in allowed]
    if bad:
        raise SystemExit(f"unknown {what}: {', '.join(bad)} (known: {', '.join(allowed)})")
    return names


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated model names (default: all)")
    parser.add_argument("--targets", help=f"comma-separated, of: {', '.join(TARGETS)} (default: all)")
    parser.add_argument("--converters", default=",".join(CONVERTERS),
                        help="comma-separated, of: jaxonnx, jaxonnx-portable (target=\"portable\"), jax2onnx (default: all)")
    parser.add_argument("--opset", type=int, default=23)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per cell")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables (for docs)")
    parser.add_argument("--json", type=Path, help="also write every cell here")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="keep the converted models (NAME.CONVERTER.onnx) and their data (NAME.npz) in DIR")
    parser.add_argument("--report", type=Path, metavar="JSON",
                        help="print the report of a run saved with --json (converts nothing)")
    args = parser.parse_args(argv)
    if args.report:
        print(report(json.loads(args.report.read_text()), args.markdown))
        return 0

    all_entries = entries()
    names = csv(args.models, list(all_entries), "model") if args.models else list(all_entries)
    targets = csv(args.targets, list(TARGETS), "target") if args.targets else list(TARGETS)
    convs = {}
    for c in csv(args.converters, CONVERTERS, "converter"):
        to_onnx = converter(c, args.opset)
        if to_onnx is None:
            print(f"{c} is not installed: its column is left out", file=sys.stderr)
        else:
            convs[c] = to_onnx
    for t in targets:
        if not installed(t):
            print(f"{t}: not installed, its cells are n/a", file=sys.stderr)

    results = {}
    worker = Worker(args.timeout)
    with tempfile.TemporaryDirectory(prefix="portability-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in names:
            print(f"{name}: converting ...", file=sys.stderr, flush=True)
            models, data = prepare(name, all_entries[name], convs, args.opset, work)
            cells = {}
            for conv, path in models.items():
                if isinstance(path, str):  # the conversion failed
                    continue
                cells[conv] = {}
                for t in targets:
                    start = time.perf_counter()
                    cell = worker.run(t, path, data)
                    cell["seconds"] = round(time.perf_counter() - start, 2)
                    cells[conv][t] = cell
                    print(f"  {conv} / {t}: {cell_text(cell, t)}  ({cell['seconds']} s)", file=sys.stderr,
                          flush=True)
            results[name] = {"title": all_entries[name].title, "group": all_entries[name].group,
                             "models": {c: p for c, p in models.items() if isinstance(p, str)},
                             "cells": cells}
        worker.close()
    run = {"machine": machine(), "opset": args.opset, "models": names, "targets": targets,
           "converters": list(convs), "results": results}
    print(report(run, args.markdown))
    if args.json:
        args.json.write_text(json.dumps(run, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
