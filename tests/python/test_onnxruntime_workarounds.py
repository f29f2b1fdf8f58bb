"""Where onnxruntime is at fault and jaxonnx works around it.

Each workaround has two tests: one that shows onnxruntime's behaviour on a
hand-made model (when it fails, onnxruntime changed: the workaround may go),
and one that fails if the workaround is removed from the lowering.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import all_op_types, check

LEVELS = [ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
          ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, ort.GraphOptimizationLevel.ORT_ENABLE_ALL]


def _session(model, level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL):
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _model(nodes, inputs, outputs, initializers=(), opset=23):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


# ----------------------------------------------- Pad with `axes` after a Transpose

def test_onnxruntime_transpose_optimizer_mishandles_pad_axes():
    # onnxruntime 1.31.1 and 1.32.0: the transpose optimizer (basic level and
    # up) pushes a Transpose through a Pad whose `axes` input (opset 18) is
    # given, and permutes the pads as if they were full rank: the session
    # fails in an inserted Gather. Hence plugin_sdk's pad_axis: full-rank pads.
    f = TensorProto.FLOAT
    model = _model(
        [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
         helper.make_node("Pad", ["t", "pads", "v", "axes"], ["p"], mode="constant"),
         helper.make_node("Relu", ["p"], ["r"]),
         helper.make_node("Transpose", ["r"], ["y"], perm=[0, 3, 1, 2])],
        [helper.make_tensor_value_info("x", f, ["B", 3, 4, 5])],
        [helper.make_tensor_value_info("y", f, None)],
        [numpy_helper.from_array(np.array([1, 1], np.int64), "pads"),
         numpy_helper.from_array(np.array(-np.inf, np.float32), "v"),
         numpy_helper.from_array(np.array([1], np.int64), "axes")], opset=18)
    x = np.ones((2, 3, 4, 5), np.float32)
    assert _session(model, LEVELS[0]).run(None, {"x": x})[0].shape == (2, 3, 6, 5)
    with pytest.raises(Exception, match="out of data bounds"):
        _session(model).run(None, {"x": x})


def _pooled_between_transposes(x):
    # A padded max window on an NHWC view of an NCHW tensor (a ResNet stem
    # written channels-last): Transpose, Pad, Slices and Max, Transpose back.
    y = jnp.transpose(x, (0, 2, 3, 1))
    y = jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1),
                              ((0, 0), (1, 1), (1, 1), (0, 0)))
    return jnp.transpose(jnp.cumsum(y, axis=1), (0, 3, 1, 2))


@pytest.mark.parametrize("level", LEVELS, ids=lambda lv: lv.name)
def test_padded_windows_between_transposes_run_at_every_level(level):
    model = check(_pooled_between_transposes, [("B", 3, 8, "W")],
                  batches=[dict(B=2, W=8), dict(B=1, W=3)])
    for graph_pad in (n for n in model.graph.node if n.op_type == "Pad"):
        assert len(graph_pad.input) == 3, "a Pad with `axes`: see pad_axis in idioms.hpp"
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 5)).astype(np.float32)
    got = _session(model, level).run(None, {model.graph.input[0].name: x})[0]
    np.testing.assert_allclose(got, np.asarray(_pooled_between_transposes(x)), rtol=1e-5, atol=1e-5)
    assert "Pad" in all_op_types(model)


# ------------------------------------------------ Attention rows of lowest logits

def test_onnxruntime_zeroes_attention_rows_of_lowest_logits():
    # Why nn_attention's additive mask is -1e30 and not finfo.min: onnxruntime
    # 1.31.1's CPU Attention gives zeros for a row whose every logit is the
    # float's lowest value, where JAX gives the mean of the values.
    # (test_crisp.py's masked-attention tests fail if the mask goes back.)
    f = TensorProto.FLOAT
    model = _model(
        [helper.make_node("Attention", ["q", "k", "v", "m"], ["y"], q_num_heads=1, kv_num_heads=1)],
        [helper.make_tensor_value_info(n, f, None) for n in "qkvm"],
        [helper.make_tensor_value_info("y", f, None)])
    sess = _session(model)
    q, k, v = np.random.default_rng(0).standard_normal((3, 1, 3, 4)).astype(np.float32)
    lowest = np.full((3, 3), np.finfo(np.float32).min, np.float32)
    np.testing.assert_array_equal(sess.run(None, dict(q=q, k=k, v=v, m=lowest))[0], 0)
    y = sess.run(None, dict(q=q, k=k, v=v, m=np.full((3, 3), -1e30, np.float32)))[0]
    np.testing.assert_allclose(y[0], np.broadcast_to(v[0].mean(0), (3, 4)), rtol=1e-6)


# ------------------------------------------------ float64 scales beside a MatMul

def _scaled_attention_logits(q, k):
    return jax.nn.softmax(jnp.einsum("btd,bsd->bts", q, k) / jnp.sqrt(8.0), axis=-1)


def test_onnxruntime_fuses_float64_scales_into_a_float32_alpha():
    # onnxruntime 1.31.1 (extended level and up): MatMul -> Div(sqrt 8) in
    # float64 becomes FusedMatMul with a float32 alpha; the result is off by
    # float32 rounding. Hence onnx_fusion's f64_scale_* rules.
    d = TensorProto.DOUBLE
    model = _model(
        [helper.make_node("MatMul", ["a", "b"], ["p"]), helper.make_node("Div", ["p", "s"], ["y"])],
        [helper.make_tensor_value_info("a", d, [2, 3]), helper.make_tensor_value_info("b", d, [3, 4])],
        [helper.make_tensor_value_info("y", d, None)],
        [numpy_helper.from_array(np.array(np.sqrt(8.0)), "s")])
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((2, 3)), "b": rng.standard_normal((3, 4))}
    exact = feeds["a"] @ feeds["b"] / np.sqrt(8.0)
    np.testing.assert_allclose(_session(model, LEVELS[0]).run(None, feeds)[0], exact, rtol=1e-14)
    err = np.abs(_session(model).run(None, feeds)[0] - exact).max()
    assert 1e-12 < err < 1e-6, err


@pytest.mark.parametrize("level", LEVELS, ids=lambda lv: lv.name)
def test_float64_attention_keeps_float64_precision_at_every_level(level):
    with jax.enable_x64(True):
        import jaxonnx
        from helpers import symbolic_specs

        model = jaxonnx.to_onnx(_scaled_attention_logits,
                                symbolic_specs([("B", 5, 8), ("B", 6, 8)], [np.float64] * 2),
                                enable_double_precision=True)
        rng = np.random.default_rng(0)
        q, k = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 6, 8))
        expected = np.asarray(_scaled_attention_logits(q, k))
    got = _session(model, level).run(None, {"in_0": q, "in_1": k})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_onnxruntime_int64_max_min_compare_low_words_as_signed(op):
    # kernels.hpp, kFaulty: from 4 elements on, int64 values with equal high words
    # compare their low words as signed, so a uint32 widened to int64 would lose.
    x = np.array([[2**31, 1, 2, 3]] if op == "ReduceMax" else [[0, 0, 2**31, 2**31]], np.int64)
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.INT64, None)],
                   [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
                   [numpy_helper.from_array(np.array([1], np.int64), "axes")])
    got = _session(model).run(None, {"x": x})[0]
    want = x.max(axis=1) if op == "ReduceMax" else x.min(axis=1)
    assert not np.array_equal(got, want)


def test_uint32_max_min_are_not_widened_to_int64():
    x = np.array([[2**31, 1, 2, 3, 4], [7, 2**32 - 1, 2**31 + 5, 0, 2**31]], np.uint32)
    check(lambda v: (jnp.max(v, axis=1), jnp.min(v, axis=1)), [(2, 5)], dtypes=[np.uint32],
          make_inputs=lambda s, d, rng: x)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_onnxruntime_int64_topk_k1_is_right_on_the_same_inputs(op):
    # What lax_reduction's int64/uint64 max/min use instead of ReduceMax/ReduceMin.
    x = np.array([[2**31, 1, 2, 3]] if op == "ReduceMax" else [[0, 0, 2**31, 2**31]], np.int64)
    node = helper.make_node("TopK", ["x", "k"], ["y", "i"], axis=1, largest=int(op == "ReduceMax"))
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.INT64, None)],
                   [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
                   [numpy_helper.from_array(np.array([1], np.int64), "k")])
    got = _session(model).run(["y"], {"x": x})[0]
    want = x.max(axis=1, keepdims=True) if op == "ReduceMax" else x.min(axis=1, keepdims=True)
    np.testing.assert_array_equal(got, want)


def test_int64_max_min_do_not_use_reduce_max_min():
    x = np.array([[2**31, 1, 2, 3, 4], [0, 0, 2**31, 2**31, 5], [-2**31, -2**31 - 1, -1, -5, 2**32]], np.int64)
    model = check(lambda v: (jnp.max(v, axis=1), jnp.min(v, axis=1), jnp.max(v), jnp.min(v)), [("B", 5)],
                  dtypes=[np.int64], x64=True, make_inputs=lambda s, d, rng: np.resize(x, s).astype(d),
                  batches=(3, 7))
    assert not {"ReduceMax", "ReduceMin"} & set(all_op_types(model))


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_onnxruntime_int64_elementwise_max_min_compare_low_words_as_signed(op):
    # The elementwise int64 kernels share ReduceMax/ReduceMin's fault, from one element on
    # (max(3, 2**31) is 3); uint64's are right. Hence max_or_min (Where) in lax_elementwise,
    # lax_math (clamp) and lax_reduction (reduce's init).
    a = np.array([3, 3], np.int64)
    b = np.array([2**31, 2**32 + 2**31], np.int64) if op == "Max" else np.array([2**31, 2**31 + 5], np.int64)
    model = _model([helper.make_node(op, ["a", "b"], ["y"])],
                   [helper.make_tensor_value_info(n, TensorProto.INT64, None) for n in "ab"],
                   [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    got = _session(model).run(None, {"a": a, "b": b})[0]
    want = np.maximum(a, b) if op == "Max" else np.minimum(a, b)
    assert not np.array_equal(got, want)


def test_int64_elementwise_max_min_clamp_are_exact():
    x = np.array([[3, 2**31, 2**31 + 7, -2**31 - 1, 5], [2**32 + 2**31, 2**32 + 1, -1, 7, 2**62]], np.int64)

    def f(a, b):
        return jnp.maximum(a, b), jnp.minimum(a, b), jnp.clip(a, 3, 2**31 + 5), jnp.maximum(a, 3)
    model = check(f, [("B", 5), ("B", 5)], dtypes=[np.int64, np.int64], x64=True, batches=(2, 6),
                  make_inputs=lambda s, d, rng: np.resize(rng.permutation(x.reshape(-1)), s).astype(d))
    assert not {"Max", "Min"} & set(all_op_types(model))
