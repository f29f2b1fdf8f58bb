"""What every example shares: symbolic input specs, conversion, the check
against JAX in onnxruntime, and the command line.

An example module defines NAME, make_model(small=False) (the callable to
convert: an nnx module or a function) and inputs(small=False) (a list of
Input). `small` gives the sizes the tests use.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import jax
import numpy as np
import onnx
import onnxruntime as ort
from jax import export

import jaxonnx

# The concrete batch sizes the symbolic batch "B" takes when the models run.
BATCHES = (1, 8)

# One scope for every symbolic dim: the same text gives the same JAX dim, so
# repeated conversions of one example hit JAX's tracing caches.
_SCOPE = export.SymbolicScope()


@dataclasses.dataclass(frozen=True)
class Input:
    shape: tuple          # ints and "B" (the symbolic batch)
    dtype: type = np.float32
    high: int = 0         # integer inputs: values drawn from [0, high)


def specs(inputs):
    """The inputs as jax.ShapeDtypeStructs (what both converters accept)."""
    out = []
    for i in inputs:
        dims = export.symbolic_shape(", ".join(str(d) for d in i.shape), scope=_SCOPE)
        out.append(jax.ShapeDtypeStruct(dims, i.dtype))
    return out


def sample(inputs, batch, seed=0):
    """Random concrete arrays for `inputs` with "B" = batch."""
    rng = np.random.default_rng(seed)
    arrays = []
    for i in inputs:
        shape = tuple(batch if d == "B" else d for d in i.shape)
        if np.issubdtype(i.dtype, np.integer):
            arrays.append(rng.integers(0, i.high, size=shape).astype(i.dtype))
        else:
            arrays.append(rng.standard_normal(shape).astype(i.dtype))
    return arrays


def convert(example, model=None, path=None, optimize=True, small=False):
    """Converts `example` (a module); returns (onnx model, the JAX callable, its Inputs)."""
    model = model if model is not None else example.make_model(small=small)
    inputs = example.inputs(small=small)
    name = example.__name__.rsplit(".", 1)[-1]
    onnx_model = jaxonnx.to_onnx(model, specs(inputs), model_name=name, optimize=optimize)
    if path:
        onnx.save(onnx_model, path)
    return onnx_model, model, inputs


def count_nodes(graph):
    """Nodes of an ONNX graph, those of its subgraphs (Loop/If bodies) included."""
    if isinstance(graph, onnx.ModelProto):
        graph = graph.graph
    n = 0
    for node in graph.node:
        n += 1
        for a in node.attribute:
            n += sum(count_nodes(g) for g in ([a.g] if a.HasField("g") else []) + list(a.graphs))
    return n


# onnxruntime's graph optimization levels: a model must agree with JAX at each.
LEVELS = {"disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
          "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
          "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
          "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}


def session(onnx_model, level="all"):
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: no notes about unused initializers
    options.graph_optimization_level = LEVELS[level]
    return ort.InferenceSession(onnx_model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def jitted(fn):
    """fn compiled whole by XLA: much faster to check than op by op."""
    return jax.jit(lambda *xs: fn(*xs))


def max_error(sess, reference, inputs, batch):
    """max |onnxruntime - JAX| over every output, and the largest |JAX| value."""
    xs = sample(inputs, batch, seed=batch)
    got = sess.run(None, {v.name: x for v, x in zip(sess.get_inputs(), xs)})
    want = jax.tree.leaves(reference(*xs))
    err = max(float(np.abs(g - np.asarray(w)).max()) for g, w in zip(got, want))
    return err, max(float(np.abs(np.asarray(w)).max()) for w in want)


def verify(onnx_model, reference, inputs, batches=BATCHES):
    """Checks the model with the ONNX checker and compares it with JAX at `batches`,
    in onnxruntime sessions at every graph optimization level (the largest error)."""
    onnx.checker.check_model(onnx_model, full_check=True)
    sessions = [session(onnx_model, level) for level in LEVELS]
    reference = jitted(reference)
    errors, scale = [], 1.0
    for batch in batches:
        worst = 0.0
        for sess in sessions:
            err, big = max_error(sess, reference, inputs, batch)
            worst = max(worst, err)
            scale = max(scale, big)
        errors.append(worst)
    return {"nodes": count_nodes(onnx_model), "bytes": onnx_model.ByteSize(),
            "errors": errors, "ok": all(e <= 1e-4 * scale for e in errors)}


def main(example):
    """`python examples/<name>.py [output.onnx]`: convert, check, print the report."""
    path = sys.argv[1] if len(sys.argv) > 1 else None
    onnx_model, reference, inputs = convert(example, path=path)
    r = verify(onnx_model, reference, inputs)
    print(f"{example.NAME}: {r['nodes']} nodes, {r['bytes'] / 1024:.1f} KiB")
    for batch, err in zip(BATCHES, r["errors"]):
        print(f"  batch {batch}: max |onnxruntime - jax| = {err:.2e}")
    if path:
        print(f"  written to {Path(path).resolve()}")
    return 0 if r["ok"] else 1
