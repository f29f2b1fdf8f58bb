"""The optimizer as users see it: on by default, optimize=False, JAXONNX_DUMP_IR,
determinism, and the node counts it saves. Every helpers.check call also
compares the optimized model with the raw lowering in onnxruntime."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import pytest

import jaxonnx
from helpers import assert_same_result, check, example_plugin_build_dir, op_types

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "examples" / "out_of_tree_plugin"))
import demo  # noqa: E402
import mlp  # noqa: E402


def transpose_round_trip(x):
    return jnp.transpose(jnp.exp(x.T + 1.0)) * 2.0


def test_optimize_is_on_by_default_and_folds_a_transpose_pair():
    model = check(transpose_round_trip, [("B", 3)])
    raw = jaxonnx.to_onnx(transpose_round_trip, [("B", 3)], optimize=False)
    assert op_types(raw).count("Transpose") == 2
    assert "Transpose" not in op_types(model)
    assert len(model.graph.node) < len(raw.graph.node)


def test_optimize_false_keeps_the_raw_lowering():
    def fn(x):
        return jnp.reshape(jnp.reshape(x, (4, 6)), (24,)) + 0.0

    raw = jaxonnx.to_onnx(fn, [(2, 12)], optimize=False)
    assert op_types(raw).count("Reshape") == 2
    model = check(fn, [(2, 12)])
    assert op_types(model).count("Reshape") == 1


def test_branching_consumer_keeps_the_transposes():
    def fn(x):
        t = jnp.exp(x.T)
        return t.T, t + 1.0

    model = check(fn, [(2, 3)])
    assert op_types(model).count("Transpose") == 2


def test_duplicates_merge():
    def fn(x):
        return jnp.exp(x) * 3.0 + jnp.exp(x) * 3.0

    model = check(fn, [("B", 4)])
    assert op_types(model).count("Exp") == 1
    assert op_types(model).count("Mul") == 1


def test_conversion_is_deterministic():
    def fn(x):
        return jnp.tanh(x.T).T + jnp.tanh(x)

    a = jaxonnx.to_onnx(fn, [("B", 5)], return_mode="bytes")
    b = jaxonnx.to_onnx(fn, [("B", 5)], return_mode="bytes")
    assert a == b


def test_dump_folder_gets_the_graph_around_every_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXONNX_DUMP_IR", str(tmp_path / "dump"))
    jaxonnx.to_onnx(transpose_round_trip, [("B", 3)])
    files = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert files[0] == "000_r1_before_noop.txt"
    assert files[1] == "001_r1_after_noop.txt"
    assert len(files) % 2 == 0
    passes = {f.split("_", 3)[3][:-4] for f in files}
    assert passes == {"noop", "transpose", "fold", "cse", "fuse", "rows", "dce"}
    before = (tmp_path / "dump" / files[0]).read_text()
    assert "Transpose" in before and "graph jax_model" in before
    last = (tmp_path / "dump" / files[-1]).read_text()
    assert "Transpose" not in last


def test_dump_folder_untouched_without_optimizing(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXONNX_DUMP_IR", str(tmp_path / "dump"))
    jaxonnx.to_onnx(transpose_round_trip, [("B", 3)], optimize=False)
    assert not (tmp_path / "dump").exists()


def _same_outputs(a, b, x):
    sa = ort.InferenceSession(a.SerializeToString(), providers=["CPUExecutionProvider"])
    sb = ort.InferenceSession(b.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = {sa.get_inputs()[0].name: x}
    for u, v in zip(sa.run(None, feed), sb.run(None, feed)):
        assert_same_result(u, v)


def test_mlp_example_with_and_without_passes():
    optimized, _, _ = mlp.convert()
    raw, _, _ = mlp.convert(optimize=False)
    assert len(optimized.graph.node) <= len(raw.graph.node)
    for batch in (1, 7):
        _same_outputs(optimized, raw,
                      np.random.default_rng(batch).standard_normal((batch, 30)).astype(np.float32))


@pytest.fixture(scope="module")
def plugin_dir():
    return demo.build(example_plugin_build_dir(ROOT))


def test_out_of_tree_example_with_and_without_passes(plugin_dir):
    optimized, _ = demo.convert(plugin_dir)
    raw, _ = demo.convert(plugin_dir, optimize=False)
    assert "HardSwish" in op_types(optimized)
    x = np.linspace(-5, 5, 7 * 8, dtype=np.float32).reshape(7, 8)
    _same_outputs(optimized, raw, x)


_W = {k: np.random.default_rng(i).standard_normal((16, 16)).astype(np.float32) * 0.1
      for i, k in enumerate(("q", "k", "v", "up", "down"))}


def _layer_norm(x):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5)


def transformer_block(x):  # [B, 8, 16]: single-head attention + MLP, jnp ops only
    h = _layer_norm(x)
    q, k, v = h @ _W["q"], h @ _W["k"], h @ _W["v"]
    scores = jnp.einsum("bsd,btd->bst", q, k) / 4.0
    x = x + jax.nn.softmax(scores, axis=-1) @ v
    h = _layer_norm(x)
    return x + jax.nn.gelu(h @ _W["up"], approximate=True) @ _W["down"]


def layout_round_trip(x):  # NHWC -> NCHW, elementwise, back
    y = jnp.transpose(x, (0, 3, 1, 2))
    y = jnp.tanh(y * 2.0 + 1.0)
    return jnp.transpose(y, (0, 2, 3, 1))


@pytest.mark.parametrize("fn,shapes", [(transformer_block, [("B", 8, 16)]),
                                       (layout_round_trip, [("B", 4, 4, 3)])],
                         ids=["transformer-block", "layout-round-trip"])
def test_programs_match_jax_with_and_without_passes(fn, shapes):
    model = check(fn, shapes, atol=1e-4, rtol=1e-4)
    raw = jaxonnx.to_onnx(fn, shapes, optimize=False)
    assert len(model.graph.node) < len(raw.graph.node)
