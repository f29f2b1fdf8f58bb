"""jax.nn.dot_product_attention with fewer key/value heads than query heads
(grouped-query attention) on the default and portable targets: nn_attention's
decomposed form (MatMul, Softmax, MatMul with the group's query heads as rows),
not JAX's own GQA traced inline (which transposes the logits twice and keeps
its softmax unfused); parity with JAX, masks and causal included."""

import jax
import numpy as np
import onnx
import pytest

import jaxonnx
from helpers import all_op_types, check, symbolic_specs


def _attention(q, k, v, mask=None, causal=False):
    return jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=causal)


# JAX takes dot_product_attention's softmax in float32 whatever the input
# dtype (jax/_src/nn/functions.py, _dot_product_attention_core); the ONNX form
# keeps float64 throughout: float64 agrees to float32 rounding, not closer.
F64_VS_JAX = 1e-6


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads,kv_heads", [(4, 2), (6, 1), (4, 4)])
def test_gqa_matches_jax(heads, kv_heads, causal, x64):
    shapes = [("B", "T", heads, 8), ("B", "T", kv_heads, 8), ("B", "T", kv_heads, 8)]
    tol = F64_VS_JAX if x64 else None
    model = check(lambda q, k, v: _attention(q, k, v, causal=causal), shapes, x64=x64,
                  batches=[{"B": 1, "T": 5}, {"B": 3, "T": 2}], rtol=tol, atol=tol)
    ops = all_op_types(model.graph)
    assert ops.count("Softmax") == 1 and ops.count("MatMul") == 2, ops
    assert not set(ops) & {"ReduceMax", "ReduceSum", "Exp", "IsNaN"}, ops  # not JAX's traced GQA


def test_gqa_with_a_mask_matches_jax_and_does_not_move_the_logits():
    """A boolean [B, 1, T, S] mask (a decoder's padding and causal mask), fully
    masked rows included; the logits are made, masked and normalized in place."""
    spec = [jax.ShapeDtypeStruct((2, 6, 4, 8), np.float32)] + \
        [jax.ShapeDtypeStruct((2, 6, 2, 8), np.float32)] * 2
    mask_spec = jax.ShapeDtypeStruct((2, 1, 6, 6), np.bool_)
    model = jaxonnx.to_onnx(lambda q, k, v, m: _attention(q, k, v, mask=m), spec + [mask_spec])
    onnx.checker.check_model(model, full_check=True)
    # q, k and v to heads-first and the result back: nothing moves the [.., T, S] logits
    assert all_op_types(model.graph).count("Transpose") <= 4, all_op_types(model.graph)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(s.shape).astype(np.float32) for s in spec]
    m = rng.random((2, 1, 6, 6)) > 0.5
    m[0, 0, 2] = False  # a fully masked query row: the mean of the values, as in JAX
    from jaxonnx.testing import ort_session
    sess = ort_session(model, "all")
    got = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs + [m])})[0]
    np.testing.assert_allclose(got, np.asarray(_attention(*xs, mask=m)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_portable_gqa_at_every_size(dtype):
    """target="portable" takes the same form; a batch or length of 0 gives JAX's empty result."""
    x64 = dtype == np.float64
    shapes = [("B", "T", 4, 8), ("B", "T", 2, 8), ("B", "T", 2, 8)]
    with jax.enable_x64(x64):
        model = jaxonnx.to_onnx(lambda q, k, v: _attention(q, k, v, causal=True),
                                symbolic_specs(shapes, [dtype] * 3), target="portable", opset=18,
                                enable_double_precision=x64)
    onnx.checker.check_model(model, full_check=True)
    assert "Softmax" in all_op_types(model.graph)
    from jaxonnx.testing import ort_session
    sess = ort_session(model, "all")
    rng = np.random.default_rng(2)
    for b, t in [(1, 5), (2, 3), (0, 4), (2, 0)]:
        xs = [rng.standard_normal((b, t, h, 8)).astype(dtype) for h in (4, 2, 2)]
        with jax.enable_x64(x64):
            want = np.asarray(_attention(*xs, causal=True))
        got = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs)})[0]
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=F64_VS_JAX if x64 else 1e-5,
                                   atol=F64_VS_JAX if x64 else 1e-6)
