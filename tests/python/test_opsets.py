"""Opsets 13-17: the program is lowered at the requested opset (each plugin
picks the form that opset allows, or a decomposition), the model declares it,
checks, and matches JAX in onnxruntime. Below 13, relabelling or a clear error."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from flax import nnx
from helpers import all_op_types, check

import jaxonnx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import _common  # noqa: E402
from test_examples import quick_model  # noqa: E402


def declared(model):
    return {o.domain: o.version for o in model.opset_import}[""]


def layer_norm_by_hand(x):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * 1.5 + 0.25


def test_nnx_layer_norm_at_opset_16():
    ln = nnx.LayerNorm(8, rngs=nnx.Rngs(0))
    model = check(lambda x: ln(x), [("B", 8)], opset=16)
    assert declared(model) == 16
    assert "LayerNormalization" not in all_op_types(model.graph)


def test_hand_written_layer_norm_at_opset_16_and_17():
    model = check(layer_norm_by_hand, [("B", 8)], opset=16)
    assert declared(model) == 16 and "LayerNormalization" not in all_op_types(model.graph)
    model = check(layer_norm_by_hand, [("B", 8)], opset=17)
    assert "LayerNormalization" in all_op_types(model.graph)


def test_bilinear_resize_at_opset_13():
    model = check(lambda x: jax.image.resize(x, (x.shape[0], 9, 12, 3), "bilinear"),
                  [("B", 6, 8, 3)], opset=13)
    assert declared(model) == 13


@pytest.mark.parametrize("name", ["mlp", "cnn", "gpt", "vit", "lstm"])
def test_example_at_opsets_13_and_17(name):
    module = importlib.import_module(name)
    model = quick_model(module)
    inputs = module.inputs(small=True)
    reference = jax.jit(lambda *xs: model(*xs))
    for opset in (13, 17):
        onnx_model = jaxonnx.to_onnx(model, _common.specs(inputs), opset=opset)
        assert declared(onnx_model) == opset
        onnx.checker.check_model(onnx_model, full_check=True)
        assert onnx_model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "B"
        sess = _common.session(onnx_model)
        for batch in (1, 3):
            err, scale = _common.max_error(sess, reference, inputs, batch)
            assert err <= 1e-4 * max(1.0, scale), (opset, batch, err)


def _ints(shape, dtype, rng):
    return rng.integers(-1000, 1000, size=shape).astype(dtype)


def _indices_add(x):
    idx = jnp.array([0, 2, 0, 3])
    return jnp.asarray(x).at[idx].add(jnp.ones((4,) + x.shape[1:], x.dtype))


def _indices_max(x):
    idx = jnp.array([1, 1, 3])
    return jnp.asarray(x).at[idx].max(jnp.full((3,) + x.shape[1:], 0.5, x.dtype))


def _attention(q):
    return jax.nn.dot_product_attention(q, q * 0.5, q + 1.0)


def _group_norm(x):
    gn = nnx.GroupNorm(8, num_groups=4, rngs=nnx.Rngs(0))
    return gn(x)


def _rms_norm(x):
    return nnx.RMSNorm(8, rngs=nnx.Rngs(0))(x)


def _conv(x):
    w = jnp.asarray(np.random.default_rng(1).standard_normal((3, 3, 4, 5)), jnp.float32)
    return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _pool(x):
    m = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    a = nnx.avg_pool(x, (2, 2), (2, 2))
    return m, a


def _reductions(x):
    return (jnp.mean(x, 1), jnp.max(x, 1), jnp.min(x, (0, 1)), jnp.prod(x, 1),
            jax.nn.logsumexp(x, 1), jnp.linalg.norm(x, axis=1), jnp.argmax(x, 1), jnp.argmin(x, 0),
            jnp.cumsum(x, 1), jax.lax.cummax(x, axis=1))


def _shapes(x):
    return (*jnp.split(x, [2, 5], axis=1), jnp.pad(x, ((1, 2), (0, 3))),
            x.reshape(-1, 2, 3).transpose(0, 2, 1).reshape(x.shape[0], 6) * 2)


def _activations(x):
    return (jax.nn.gelu(x), jax.nn.gelu(x, approximate=False), jax.nn.hard_swish(x),
            jax.nn.mish(x), jax.nn.silu(x), jax.nn.softmax(x), jax.nn.log_softmax(x, axis=0))


def _norms(x):
    return _group_norm(x), _rms_norm(x)


def _scatters(x):
    return _indices_add(x), _indices_max(x)


def _fft(x):
    z = jnp.fft.fft(x[:, :4] + 1j * x[:, 4:])
    return (jnp.abs(jnp.fft.fft(x)), jnp.fft.irfft(jnp.fft.rfft(x), n=8), jnp.real(z), jnp.imag(z),
            jnp.real(jnp.fft.ifft(z)))


PRIMITIVES = {  # one model per family, to keep the file fast
    "reductions": (_reductions, [("B", 6)]),
    "shapes": (_shapes, [("B", 6)]),
    "activations": (_activations, [("B", 6)]),
    "attention": (_attention, [("B", 5, 2, 4)]),
    "norms": (_norms, [("B", 4, 8)]),
    "scatters": (_scatters, [(5, "B")]),
    "conv": (_conv, [("B", 6, 6, 4)]),
    "pooling": (_pool, [("B", 6, 6, 3)]),
    "fft": (_fft, [("B", 8)]),
}


@pytest.mark.parametrize("opset", [13, 15, 17])
@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitive_at_opset(name, opset):
    fn, shapes = PRIMITIVES[name]
    model = check(fn, shapes, opset=opset)
    assert declared(model) == opset


@pytest.mark.parametrize("opset", [13, 15, 17])
def test_bitwise_ops_at_opset(opset):
    def fn(x, y):
        return x & y, x | y, x ^ y, ~x, jnp.uint8(x) ^ jnp.uint8(y), jnp.int64(x) & 12345678901
    model = check(fn, [("B", 5), ("B", 5)], [np.int32, np.int32], make_inputs=_ints, opset=opset,
                  x64=True)
    assert declared(model) == opset


def test_fft_along_a_symbolic_axis_needs_opset_17():
    with pytest.raises(jaxonnx.ConversionError, match=r"symbolic axis .*needs opset 17"):
        jaxonnx.to_onnx(lambda x: jnp.abs(jnp.fft.fft(x)), [("N",)], opset=16)


def test_below_13_relabels_when_every_op_kept_its_form():
    # Sin and Cos have kept their opset-7 form.
    model = jaxonnx.to_onnx(lambda x: jnp.cos(jnp.sin(x)), [jax.ShapeDtypeStruct((3,), jnp.float32)],
                            opset=11)
    assert declared(model) == 11
    onnx.checker.check_model(model, full_check=True)


def test_below_13_names_the_ops_that_need_newer_forms():
    with pytest.raises(jaxonnx.ConversionError, match=r"opset 11: .*ReduceSum \(opset 13\)"):
        jaxonnx.to_onnx(lambda x: jnp.sum(x, 0), [jax.ShapeDtypeStruct((3, 2), jnp.float32)],
                        opset=11)


def test_a_node_in_a_newer_form_is_a_conversion_error():
    # What to_onnx runs on every model lowered below 18: int8 Add exists from 14.
    from onnx import TensorProto, helper

    from jaxonnx import _opset
    x = helper.make_tensor_value_info("x", TensorProto.INT8, [2])
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "g", [x],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(jaxonnx.ConversionError, match=r"opset 13: .*Add.*pass opset=14 or newer"):
        _opset.check_lowered(model.SerializeToString(), 13)
