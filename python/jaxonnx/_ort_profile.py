"""Where onnxruntime spends a model's run, per op type: its own profiler
(SessionOptions.enable_profiling) over a few runs on random inputs made from
the conversion's input specs, for the conversion report (_report.py)."""

from __future__ import annotations

import json
import os
import tempfile
from typing import NamedTuple

import jax
import numpy as np

from jaxonnx import _verify
from jaxonnx._layout import TO_NCHW

RUNS = 10  # after one warm-up run, which the profile leaves out
SYMBOL_SIZE = 2  # the size every symbolic dim takes (jax2onnx's sample size too)


class OpTime(NamedTuple):
    op_type: str       # as onnxruntime ran it (after its own graph optimizations)
    nodes: int         # distinct nodes of this type that ran
    microseconds: float  # mean kernel time per run, summed over its nodes


class Profile(NamedTuple):
    ops: list          # [OpTime], slowest first
    runs: int
    inputs: str        # the input shapes, as "name: dtype[dims]"
    provider: str


def _feeds(session, specs, params, nchw_in, x64):
    """Random inputs for `session`: each spec's shape with every symbolic dim at
    SYMBOL_SIZE (verify's sampling), NCHW where the model takes NCHW, and the
    input_params' own example values."""
    env = {s: SYMBOL_SIZE for s in _verify._symbols(specs)}
    rng = np.random.default_rng(0)
    xs = []
    with jax.enable_x64(x64):
        for i, spec in enumerate(specs):
            shape = _verify._concrete_shape(spec.shape, env)
            x = _verify._model_value(_verify._sample(spec, shape, rng))
            xs.append(np.transpose(x, TO_NCHW) if i in nchw_in else np.asarray(x))
    return _verify._feeds(session, xs, params)


def _kernel_times(trace):
    """({(op type, node name): total microseconds}, runs) of onnxruntime's Node
    events after the first model run (a warm-up: its first-run allocations are
    not the model's cost)."""
    run_spans = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in trace
                       if e.get("cat") == "Session" and e.get("name") == "model_run")
    after = run_spans[0][1] if run_spans else 0
    out = {}
    for event in trace:
        if event.get("cat") != "Node" or not event.get("name", "").endswith("_kernel_time"):
            continue
        if event.get("ts", 0) < after:
            continue
        op = event.get("args", {}).get("op_name", "?")
        key = (op, event["name"][: -len("_kernel_time")])
        out[key] = out.get(key, 0.0) + float(event.get("dur", 0))
    return out, max(len(run_spans) - 1, 0)


def profile(model, specs, params, nchw_in=(), x64=False, runs=RUNS) -> Profile:
    """onnxruntime's per-op-type profile of `model` (bytes or a path) on the
    CPU provider, one thread, its default graph optimizations (the model as a
    user runs it): one warm-up run, then `runs` profiled ones. Raises what
    onnxruntime raises."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as folder:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(folder, "ort")
        session = ort.InferenceSession(os.fspath(model) if isinstance(model, os.PathLike) else model,
                                       options, providers=["CPUExecutionProvider"])
        feeds = _feeds(session, specs, params, set(nchw_in), x64)
        for _ in range(runs + 1):
            session.run(None, feeds)
        with open(session.end_profiling(), encoding="utf-8") as f:
            times, profiled = _kernel_times(json.load(f))
    by_op = {}
    for (op, _node), us in times.items():
        nodes, total = by_op.get(op, (0, 0.0))
        by_op[op] = (nodes + 1, total + us)
    ops = [OpTime(op, nodes, total / max(profiled, 1)) for op, (nodes, total) in by_op.items()]
    ops.sort(key=lambda o: (-o.microseconds, o.op_type))
    inputs = ", ".join(f"{name}: {a.dtype}{list(a.shape)}" for name, a in feeds.items())
    return Profile(ops, profiled, inputs, "CPUExecutionProvider, 1 thread")
