"""Every example converts with a symbolic batch, passes the ONNX checker and
matches JAX in onnxruntime at two batch sizes (small model sizes, for speed)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import _common  # noqa: E402
import run_all  # noqa: E402


def quick_model(module):
    """module.make_model(small=True) with its parameters drawn by numpy: flax's
    initializers compile one small XLA program per parameter shape, which is
    most of this file's time otherwise. The LSTM example returns a function,
    not a module: it is built as it is."""
    if module.__name__ == "lstm":
        return module.make_model(small=True)
    abstract = nnx.eval_shape(lambda: module.make_model(small=True))
    graphdef, params, rest = nnx.split(abstract, nnx.Param, ...)
    rng = np.random.default_rng(0)

    def draw(p):
        x = rng.standard_normal(p.shape)
        x = x / np.sqrt(p.shape[-2]) if len(p.shape) >= 2 else 1 + 0.1 * x
        return jnp.asarray(x.astype(p.dtype))
    return nnx.merge(graphdef, jax.tree.map(draw, params), rest)


@pytest.mark.parametrize("name", run_all.EXAMPLES)
def test_example_converts_and_matches_jax(name):
    module = importlib.import_module(name)
    onnx_model, reference, inputs = module.convert(quick_model(module), small=True)
    # The batch stays symbolic in the graph's inputs and outputs.
    assert onnx_model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "B"
    assert onnx_model.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "B"
    report = _common.verify(onnx_model, reference, inputs)
    assert report["ok"], report


def test_lstm_scan_becomes_a_loop():
    import lstm

    onnx_model, _, _ = lstm.convert(small=True)
    assert "Loop" in [n.op_type for n in onnx_model.graph.node]


def test_example_writes_a_file(tmp_path):
    import mlp

    path = tmp_path / "mlp.onnx"
    mlp.convert(quick_model(mlp), path=str(path))
    assert path.stat().st_size > 1000
