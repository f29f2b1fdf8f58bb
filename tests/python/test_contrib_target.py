"""target="onnxruntime-contrib": onnxruntime's com.microsoft ops where they are
measurably faster (docs/benchmarks/contrib_ops.md), nowhere else.

Causal self-attention becomes GroupQueryAttention for that target and stays the
standard Attention for every other; the host refusing a com.microsoft node for
another target is tests/cpp/test_lowering.cpp's.
"""

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from flax import nnx

import jaxonnx
from helpers import all_op_types, symbolic_specs
from jaxonnx import _core
from jaxonnx.testing import ort_session

CONTRIB = "onnxruntime-contrib"


def _domain_ops(graph):
    """(domain, op_type) of every node of `graph` and its subgraphs."""
    graph = getattr(graph, "graph", graph)
    out = []
    for n in graph.node:
        out.append((n.domain, n.op_type))
        for a in n.attribute:
            if a.HasField("g"):
                out += _domain_ops(a.g)
    return out


class Block(nnx.Module):
    """A pre-norm decoder block: LayerNorm, causal self-attention, gelu MLP."""

    def __init__(self, width=32, heads=4, kv_heads=2, *, rngs):
        self.heads, self.kv_heads, self.head = heads, kv_heads, width // heads
        self.norm1 = nnx.LayerNorm(width, rngs=rngs)
        self.q = nnx.Linear(width, width, rngs=rngs)
        self.kv = nnx.Linear(width, 2 * kv_heads * self.head, rngs=rngs)
        self.out = nnx.Linear(width, width, rngs=rngs)
        self.norm2 = nnx.LayerNorm(width, rngs=rngs)
        self.up = nnx.Linear(width, 4 * width, rngs=rngs)
        self.down = nnx.Linear(4 * width, width, rngs=rngs)

    def __call__(self, x):
        b, t, _ = x.shape
        h = self.norm1(x)
        q = self.q(h).reshape(b, t, self.heads, self.head)
        k, v = jnp.split(self.kv(h).reshape(b, t, 2 * self.kv_heads, self.head), 2, axis=2)
        a = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(b, t, self.heads * self.head)
        x = x + self.out(a)
        return x + self.down(jax.nn.gelu(self.up(self.norm2(x))))


def _parity(fn, shapes, target, batches=(1, 3, 0), opset=None):
    """The model for `target` (checked, then run in onnxruntime against JAX at each batch)."""
    model = jaxonnx.to_onnx(fn, symbolic_specs(shapes, [np.float32] * len(shapes)), target=target,
                            opset=opset)
    # onnx has no com.microsoft schemas: full_check checks the rest of the model
    # and infers no type through the contrib node (its outputs are declared).
    onnx.checker.check_model(model, full_check=True)
    sess = ort_session(model, "all")
    rng = np.random.default_rng(0)
    for b in batches:
        xs = [rng.standard_normal(tuple(b if d == "B" else d for d in s)).astype(np.float32)
              for s in shapes]
        got = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs)})
        want = jax.tree_util.tree_leaves(fn(*xs))
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-5, err_msg=f"B={b}")
    return model


def test_profile_is_declared_data():
    profiles = {p["name"]: p for p in _core.targets()}
    assert profiles[CONTRIB]["domains"] == ["com.microsoft"]
    assert profiles[CONTRIB]["default_opset"] == 23
    # Only the advisory dequantize_weights (targets.hpp): it runs the standard Attention.
    assert [(w, refused) for w, refused, _ in profiles[CONTRIB]["lacks"]] == [("dequantize_weights", False)]
    assert all(p["domains"] == [] for name, p in profiles.items() if name != CONTRIB)


@pytest.mark.parametrize("target", ["onnxruntime", CONTRIB])
def test_transformer_block_parity_and_structure(target):
    block = Block(rngs=nnx.Rngs(0))
    model = _parity(block, [("B", 6, 32)], target)
    ops = _domain_ops(model)
    contrib = [op for domain, op in ops if domain == "com.microsoft"]
    domains = {o.domain: o.version for o in model.opset_import}
    if target == CONTRIB:
        assert contrib == ["GroupQueryAttention"]
        assert ("", "Attention") not in ops
        assert domains.get("com.microsoft") == 1
    else:  # onnxruntime's tools cannot read the standard Attention: decomposed
        assert contrib == [] and "com.microsoft" not in domains
        assert ("", "Attention") not in ops and ("", "Softmax") in ops
    assert ("", "LayerNormalization") in ops  # the rest of the graph is the default target's


@pytest.mark.parametrize("scale", [None, 0.3])
def test_causal_attention_static_seq_and_scale(scale):
    def f(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, scale=scale)

    model = _parity(f, [("B", 5, 4, 8), ("B", 5, 4, 8), ("B", 5, 4, 8)], CONTRIB)
    assert "GroupQueryAttention" in all_op_types(model)


def test_older_opset_keeps_it():
    """GroupQueryAttention is not of the default domain: at opset 18, where the
    standard Attention does not exist, the contrib target still gets it."""
    def f(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True)

    model = _parity(f, [("B", 5, 4, 8), ("B", 5, 2, 8), ("B", 5, 2, 8)], CONTRIB, opset=18)
    assert model.opset_import[0].version == 18
    assert "GroupQueryAttention" in all_op_types(model)


def test_symbolic_sequence_length():
    def f(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True)

    shapes = [("B", "T", 4, 8), ("B", "T", 2, 8), ("B", "T", 2, 8)]
    model = jaxonnx.to_onnx(f, symbolic_specs(shapes, [np.float32] * 3), target=CONTRIB)
    assert "GroupQueryAttention" in all_op_types(model)
    sess = ort_session(model, "all")
    rng = np.random.default_rng(1)
    for b, t in ((1, 1), (2, 7), (0, 3), (2, 0)):
        xs = [rng.standard_normal((b, t) + s[2:]).astype(np.float32) for s in shapes]
        got = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs)})[0]
        np.testing.assert_allclose(got, np.asarray(f(*xs)), rtol=1e-5, atol=1e-5)


def test_nan_and_infinity_as_jax():
    """The no-mask spec is exact: GroupQueryAttention must propagate as JAX does."""
    def f(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True)

    shapes = [("B", 5, 2, 8)] * 3
    model = jaxonnx.to_onnx(f, symbolic_specs(shapes, [np.float32] * 3), target=CONTRIB)
    sess = ort_session(model, "all")
    rng = np.random.default_rng(2)
    for bad in (np.nan, np.inf, -np.inf):
        xs = [rng.standard_normal((2, 5, 2, 8)).astype(np.float32) for _ in shapes]
        xs[0][0, 2, 1, 3] = bad
        xs[1][1, 1, 0, 0] = bad
        got = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs)})[0]
        np.testing.assert_allclose(got, np.asarray(f(*xs)), rtol=1e-5, atol=1e-5, equal_nan=True)


def test_what_gains_nothing_stays_standard():
    """Non-causal or masked attention, cross-attention (other key length): the
    standard Attention, which measured faster than MultiHeadAttention."""
    def f(q, k, v, kx, vx):
        mask = jnp.tril(jnp.ones((1, 1, 5, 5), bool))
        return (jax.nn.dot_product_attention(q, k, v),
                jax.nn.dot_product_attention(q, k, v, mask=mask),
                jax.nn.dot_product_attention(q, kx, vx, is_causal=True))

    s, x = ("B", 5, 4, 8), ("B", 7, 4, 8)
    model = _parity(f, [s, s, s, x, x], CONTRIB, batches=(1, 3))
    assert [op for d, op in _domain_ops(model) if d] == []
    assert all_op_types(model).count("Attention") == 3
