"""The prefill of a Llama-style decoder (a prompt's pass with no cache) in
onnxruntime, jaxonnx's graph (default target) beside jax2onnx's and beside
jax.jit of the same program, against the GEMM roofline (issue 37).

    python benchmarks/prefill.py [--lengths 128 256 512] [--batches 1 4 8]
        [--spellings einsum sdpa] [--threads 0] [--runs 6] [--write-docs]

The model is tests/python/llm_models.py's Llama at bench size (vocab 8192,
width 512, 4 layers, 8 query heads and 2 key/value heads of 64 (GQA), MLP 1408,
RoPE, RMSNorm, SwiGLU) in its prompt form, llm_models.prefill: (input_ids,
attention_mask, position_ids) [B, T] -> logits [B, T, vocab], with genai's mask
convention (a key is visible when it is at or before the query and its mask is
1). Two spellings of the attention: "einsum" (einsum, where(mask, s,
finfo.min), softmax) and "sdpa" (jax.nn.dot_product_attention with a boolean
mask). Both converters convert the same program with a symbolic batch and
batch ("B") and the length T static (jax2onnx fails on a symbolic one), each
from a new model instance.

Per (spelling, T, B): the runners are timed in alternating blocks, each after
an idle pause (benchmarks/timing.py), median of --runs kept runs. With the
default threads, jaxonnx's graph is also timed on one intra-op thread: on this
2-core machine shared with other work, onnxruntime's two-thread pool loses
more to a busy core than one thread does.
Roofline: the graph's matrix-product FLOPs at that (B, T) (attention's
included; roofline.count_flops on jaxonnx's graph with the shapes fixed) over
the best MatMul GFLOP/s onnxruntime reaches on this machine, measured before
and after the models in the same run (the better kept). --write-docs rewrites
the generated block of docs/benchmarks/prefill.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from jax import export  # noqa: E402

import compare  # noqa: E402
import doc_section  # noqa: E402
import llm_models as lm  # noqa: E402
import roofline  # noqa: E402
import timing  # noqa: E402

SPEC = lm.Spec("llama_prefill", vocab=8192, width=512, layers=4, heads=8, kv_heads=2, head_dim=64,
               hidden=1408)
SPELLINGS = {"einsum": SPEC, "sdpa": dataclasses.replace(SPEC, sdpa=True)}
DOC = ROOT / "docs" / "benchmarks" / "prefill.md"
BEGIN, END = "<!-- prefill.py: begin -->", "<!-- prefill.py: end -->"


def specs(length):
    """input_ids, attention_mask, position_ids: int32 [B, length], B symbolic.
    (A symbolic length too would serve every T with one graph, as genai runs
    it, but jax2onnx 0.17.1 fails on it: '_DynamicDimSentinel' object has no
    attribute 'rmax'.)"""
    b, = export.symbolic_shape("B")
    return [jax.ShapeDtypeStruct((b, length), np.int32)] * 3


def program(spec):
    """A new instance of the prefill program (its own weights' arrays)."""
    return lm.prefill(spec, lm.init(spec))


def inputs(batch, length, seed=0):
    """A batch of full prompts: random ids, mask 1, positions 0..T-1."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(2, SPEC.vocab, (batch, length)).astype(np.int32)
    mask = np.ones((batch, length), np.int32)
    positions = np.tile(np.arange(length, dtype=np.int32), (batch, 1))
    return ids, mask, positions


def convert(spec, length, j2o, to_onnx=None):
    """{"jaxonnx": ModelProto, "jax2onnx": ModelProto or an error text}."""
    import jaxonnx
    models = {"jaxonnx": (to_onnx or jaxonnx.to_onnx)(program(spec), specs(length))}
    if j2o is not None:
        try:
            models["jax2onnx"] = j2o(program(spec), specs(length))
        except Exception as e:  # the peer's failure is a cell, not a crash
            models["jax2onnx"] = compare.failure(e)
    return models


def static(model, batch, length):
    """A copy of `model` with B (and T) fixed (for roofline.count_flops)."""
    m = onnx.ModelProto.FromString(model.SerializeToString())
    dims = {"B": batch, "T": length}
    for vi in list(m.graph.input) + list(m.graph.output):
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in dims:
                d.dim_value = dims[d.dim_param]
            elif d.HasField("dim_param"):  # a derived output dim: let the run give it
                d.ClearField("dim_param")
    del m.graph.value_info[:]
    return m


def matmul_flops(model, batch, length):
    xs = inputs(batch, length)
    feed = {i.name: x for i, x in zip(model.graph.input, xs)}
    return roofline.count_flops(static(model, batch, length), batch, feed).matmul


class Session:
    """An onnxruntime session as timing.block_latency runs it."""

    def __init__(self, model, threads):
        self.sess = roofline.session(model, threads)
        self.names = [i.name for i in self.sess.get_inputs()]

    def feed(self, xs):
        return dict(zip(self.names, xs))

    def run(self, _, feed):
        return self.sess.run(None, feed)


class Jit:
    """jax.jit of the program, as timing.block_latency runs a session."""

    def __init__(self, spec):
        self.f = jax.jit(program(spec))

    def feed(self, xs):
        return {"xs": tuple(jax.device_put(x) for x in xs)}

    def run(self, _, feed):
        return jax.block_until_ready(self.f(*feed["xs"]))


def check(runners, xs):
    """Largest |difference| of each runner's logits from jax.jit's (a sanity check)."""
    ref = np.asarray(runners["jax.jit"].run(None, runners["jax.jit"].feed(xs)))
    return {k: float(np.max(np.abs(np.asarray(r.run(None, r.feed(xs))[0]) - ref)))
            for k, r in runners.items() if k != "jax.jit"}


def measure(spelling, lengths, batches, threads, runs, j2o):
    spec = SPELLINGS[spelling]
    rows, notes = [], []
    jit = Jit(spec)
    for t in lengths:
        models = convert(spec, t, j2o)
        runners = {k: Session(m, threads) for k, m in models.items() if not isinstance(m, str)}
        if threads is None:  # the same graph on one intra-op thread (a shared machine: see the doc)
            runners["jaxonnx 1 thread"] = Session(models["jaxonnx"], 1)
        runners["jax.jit"] = jit
        notes += [f"{k} (T={t}): {m}" for k, m in models.items() if isinstance(m, str)]
        for b in batches:
            xs = inputs(b, t, seed=b * t)
            err = check(runners, xs)
            feeds = {id(r): r.feed(xs) for r in runners.values()}
            times = timing.block_latency(list(runners.values()), lambda r: feeds[id(r)], runs,
                                         block=3, warmup=2)
            flops = matmul_flops(models["jaxonnx"], b, t)
            rows.append(dict(T=t, B=b, flops=flops, times=dict(zip(runners, times)), err=err))
            print(f"  {spelling} T={t} B={b}: " + ", ".join(
                f"{k} {s * 1e3:.1f} ms" for k, s in zip(runners, times)), flush=True)
    return rows, notes


def table(spelling, rows, peak):
    lines = [f"**{spelling}** attention:", "",
             "| T | B | GFLOP | roofline ms | jaxonnx ms | % of roofline | jax2onnx ms | "
             "jaxonnx / jax2onnx | jax.jit ms | jaxonnx / jax.jit | jaxonnx 1 thread ms | "
             "1 thread / jax.jit | max error vs jax.jit |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        floor = r["flops"] / (peak * 1e9)
        ours = r["times"]["jaxonnx"]
        peer = r["times"].get("jax2onnx")
        jit = r["times"]["jax.jit"]
        lines.append(
            f"| {r['T']} | {r['B']} | {r['flops'] / 1e9:.1f} | {floor * 1e3:.1f} | {ours * 1e3:.1f} | "
            f"{100 * floor / ours:.0f}% | " + (f"{peer * 1e3:.1f} | {ours / peer:.2f} | " if peer else
                                              "- | - | ") +
            f"{jit * 1e3:.1f} | {ours / jit:.2f} | " +
            (f"{one * 1e3:.1f} | {one / jit:.2f} | " if (one := r["times"].get("jaxonnx 1 thread")) else "- | - | ") +
            f"{r['err']['jaxonnx']:.1e} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--spellings", nargs="+", default=list(SPELLINGS), choices=list(SPELLINGS))
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads; 0 = onnxruntime's default")
    ap.add_argument("--runs", type=int, default=6, help="kept runs per runner and shape")
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args(argv)
    threads = args.threads or None

    j2o = compare.peer()
    peaks = [roofline.matmul_peak(threads)[0]]
    results = {}
    for spelling in args.spellings:
        results[spelling] = measure(spelling, args.lengths, args.batches, threads, args.runs, j2o)
    peaks.append(roofline.matmul_peak(threads)[0])
    peak = max(peaks)
    setting = "onnxruntime's default threads" if threads is None else f"{threads} intra-op thread(s)"
    out = [f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores, {setting}; MatMul peak "
           f"{peak:.1f} GFLOP/s (before {peaks[0]:.1f}, after {peaks[1]:.1f}); median of "
           f"{args.runs} runs per cell.", ""]
    for spelling, (rows, notes) in results.items():
        out.append(table(spelling, rows, peak))
        out.extend([""] + notes if notes else [])
        out.append("")
    text = "\n".join(out)
    print(text)
    if args.write_docs:
        doc_section.write_section(DOC, BEGIN, END, text, "## Figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
