"""Crisp ops: binding specs (ABI 1.2) route jax.nn / flax calls to one ONNX op.

Each op: numbers against JAX through onnxruntime (f32, f64 where onnxruntime
has the kernel, static and symbolic batch), the fused op in the graph, under
jit and vmap; the window restores every target, also on an exception; crisp
on and off give the same numbers; below the op's opset the reference lowers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from flax import nnx

import jaxonnx
from jaxonnx import _bindings, _plugins
from helpers import FUSED_ATTENTION, FUSED_TARGET, all_op_types, check, op_types, symbolic_specs
from jaxonnx.testing import expect_graph

ROOT = Path(__file__).resolve().parents[2]

# (jax.nn function, kwargs, ONNX op, onnxruntime has a float64 kernel)
ACTIVATIONS = [
    ("relu", {}, "Relu", True),
    ("sigmoid", {}, "Sigmoid", True),
    ("gelu", {"approximate": True}, "Gelu", False),
    ("gelu", {"approximate": False}, "Gelu", False),
    ("elu", {"alpha": 0.7}, "Elu", False),
    ("celu", {"alpha": 1.3}, "Celu", False),
    ("selu", {}, "Selu", False),
    ("leaky_relu", {"negative_slope": 0.05}, "LeakyRelu", False),
    ("hard_sigmoid", {}, "HardSigmoid", False),
    ("hard_swish", {}, "HardSwish", False),
    ("softplus", {}, "Softplus", False),
    ("mish", {}, "Mish", False),
    ("softmax", {}, "Softmax", True),
    ("softmax", {"axis": 1}, "Softmax", True),
    ("log_softmax", {}, "LogSoftmax", True),
]
IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for n, kw, _, _ in ACTIVATIONS]


def wide_inputs(shape, dtype, rng):
    return (rng.standard_normal(size=shape) * 4).astype(dtype)


@pytest.mark.parametrize("name,kwargs,op,f64", ACTIVATIONS, ids=IDS)
@pytest.mark.parametrize("shape", [(3, 5), ("B", 5)], ids=["static", "symbolic"])
def test_activation(name, kwargs, op, f64, shape):
    fn = lambda x: getattr(jax.nn, name)(x, **kwargs)  # noqa: E731
    model = check(fn, [shape], make_inputs=wide_inputs)
    assert op in op_types(model)
    if f64:
        model = check(fn, [shape], x64=True, make_inputs=wide_inputs)
        assert op in op_types(model)


@pytest.mark.parametrize("name,kwargs,op,f64", ACTIVATIONS[:4] + ACTIVATIONS[-3:],
                         ids=IDS[:4] + IDS[-3:])
def test_activation_under_jit_and_vmap(name, kwargs, op, f64):
    f = lambda x: getattr(jax.nn, name)(x, **kwargs)  # noqa: E731
    for fn in (jax.jit(f), jax.vmap(f), jax.vmap(jax.jit(f))):
        model = check(fn, [("B", 4, 6)], make_inputs=wide_inputs)
        assert op in op_types(model)


def test_flax_namespaces_bind_too():
    model = check(lambda x: nnx.relu(nnx.gelu(x)), [("B", 8)])
    assert {"Relu", "Gelu"} <= set(op_types(model))


def test_below_the_ops_opset_the_reference_is_lowered():
    model = check(lambda x: jax.nn.gelu(x), [("B", 8)], opset=18)
    assert "Gelu" not in op_types(model)
    model = check(lambda x: jax.nn.gelu(x), [("B", 8)], opset=20)
    assert "Gelu" in op_types(model)


@pytest.mark.parametrize("opset", [13, 17, 19])
def test_exact_gelu_below_opset_20_is_the_form_onnxruntime_fuses(opset, tmp_path):
    # Five ops instead of JAX's erfc-based sixty, and the form onnxruntime's
    # session optimizer turns into one Gelu kernel (checked on its optimized model).
    fn = lambda x: jax.nn.gelu(x, approximate=False)  # noqa: E731
    model = check(fn, [("B", 8)], opset=opset, make_inputs=lambda s, d, r: (4 * r.standard_normal(s)).astype(d))
    assert op_types(model) == ["Div", "Erf", "Add", "Mul", "Mul"]
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    assert [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node] == ["Gelu"]


@pytest.mark.parametrize("opset", [13, 17, 19])
def test_tanh_gelu_below_opset_20_is_x_times_a_sigmoid(opset):
    # 0.5 (1 + tanh z) = sigmoid(2 z): six ops for JAX's nine, within rounding
    # of JAX's (check() compares at every optimization level; wide inputs
    # reach the tail where 1 + tanh cancels and overflow in x^3).
    fn = lambda x: jax.nn.gelu(x, approximate=True)  # noqa: E731
    model = check(fn, [("B", 8)], opset=opset, make_inputs=wide_inputs)
    assert op_types(model) == ["Mul", "Mul", "Add", "Mul", "Sigmoid", "Mul"]

    def extremes(shape, dtype, rng):  # x^3 overflows; 1 + tanh cancels; Sigmoid's tail
        x = rng.standard_normal(size=shape) * 4
        x[..., :] = [-1e20, 1e20, -1e13, 1e13, -30.0, -10.0, -6.0, 0.0]
        return x.astype(dtype)
    check(fn, [("B", 8)], opset=opset, make_inputs=extremes)


def test_gelu_float64_lowers_the_reference():
    model = check(lambda x: jax.nn.gelu(x), [("B", 8)], x64=True)
    assert "Gelu" not in op_types(model)  # onnxruntime has no float64 Gelu


@pytest.mark.parametrize("name", ["relu", "elu", "leaky_relu"])
def test_jvp_differentiates_the_original(name):
    # (gelu's and softmax's tangents need add_any, which no bundled plugin
    # lowers yet; test_eager_calls_in_the_window_run_the_original grads them)
    f = getattr(jax.nn, name)
    g = lambda x: jax.jvp(f, (x,), (jnp.cos(x),))  # noqa: E731
    check(g, [(3, 5)])
    check(jax.vmap(g), [("B", 3, 5)])


# ------------------------------------------------------------------ layers

def linear(din, dout, use_bias=True):
    return nnx.Linear(din, dout, use_bias=use_bias, rngs=nnx.Rngs(0))


@pytest.mark.parametrize("use_bias", [True, False])
def test_linear_2d_is_gemm(use_bias):
    model = check(linear(6, 4, use_bias), [("B", 6)])
    assert op_types(model).count("Gemm") == 1
    assert "MatMul" not in op_types(model)


def test_linear_3d_is_gemm_on_rows():
    # The rows pass: [B, 3, 6] as [B*3, 6] rows, where MatMul + Add is one Gemm.
    model = check(linear(6, 4), [("B", 3, 6)])
    assert op_types(model) == ["Reshape", "Gemm", "Reshape"]


def test_linear_float64():
    with jax.enable_x64(True):
        m = nnx.Linear(6, 4, param_dtype=jnp.float64, rngs=nnx.Rngs(0))
    model = check(m, [("B", 6)], x64=True)
    assert op_types(model) == ["Gemm"]


def test_linear_under_vmap_and_jit():
    m = linear(6, 4)
    model = check(jax.vmap(jax.jit(lambda x: m(x))), [("B", 2, 6)])
    assert op_types(model) == ["Reshape", "Gemm", "Reshape"]


def test_layer_norm():
    m = nnx.LayerNorm(8, rngs=nnx.Rngs(0))
    m.scale[...] = jax.random.normal(jax.random.key(1), (8,))
    m.bias[...] = jax.random.normal(jax.random.key(2), (8,))
    model = check(m, [("B", 3, 8)], make_inputs=wide_inputs)
    assert op_types(model) == ["LayerNormalization"]
    model = check(jax.vmap(m), [("B", 3, 8)], make_inputs=wide_inputs)
    assert op_types(model) == ["LayerNormalization"]
    no_bias = nnx.LayerNorm(8, use_bias=False, rngs=nnx.Rngs(0))
    assert op_types(check(no_bias, [("B", 8)])) == ["LayerNormalization"]


def near_constant_rows(shape, dtype, rng):
    # var ~ 1e-12, far below eps: the result is (x - mean) / sqrt(eps), where
    # float32 rounding eps (ONNX's attribute type) would show at 1e-8 relative.
    return (1 + 1e-6 * rng.standard_normal(size=shape)).astype(dtype)


def test_layer_norm_float64():
    with jax.enable_x64(True):
        m = nnx.LayerNorm(8, param_dtype=jnp.float64, epsilon=1e-5, rngs=nnx.Rngs(0))
        exact = nnx.LayerNorm(8, param_dtype=jnp.float64, epsilon=0.5, rngs=nnx.Rngs(0))
    # eps as float64 holds it: LayerNormalization of k * x (docs/crisp_ops.md).
    model = check(m, [("B", 8)], x64=True, make_inputs=near_constant_rows, rtol=1e-12, atol=1e-12)
    assert op_types(model) == ["Mul", "LayerNormalization"]
    # An eps float32 holds exactly needs nothing more.
    model = check(exact, [("B", 8)], x64=True, make_inputs=near_constant_rows, rtol=1e-12,
                  atol=1e-12)
    assert op_types(model) == ["LayerNormalization"]


def test_rms_and_batch_norm_float64_keep_epsilon_exact():
    with jax.enable_x64(True):
        rms = nnx.RMSNorm(8, param_dtype=jnp.float64, epsilon=1e-5, rngs=nnx.Rngs(0))
        bn = nnx.BatchNorm(8, use_running_average=True, param_dtype=jnp.float64, epsilon=1e-5,
                           rngs=nnx.Rngs(0))
        # flax keeps the statistics float32 (the reference then lowers): float64 ones,
        # and a zero variance: (x - mean) / sqrt(eps) exactly.
        bn.mean.value = jnp.linspace(-1, 1, 8, dtype=jnp.float64)
        bn.var.value = jnp.zeros(8, jnp.float64)
    tiny = lambda s, d, r: 1e-6 * near_constant_rows(s, d, r)  # noqa: E731  (mean(x^2) << eps)
    model = check(rms, [("B", 8)], x64=True, make_inputs=tiny, rtol=1e-12, atol=1e-18)
    assert op_types(model) == ["Mul", "RMSNormalization"]
    model = check(bn, [("B", 8)], x64=True, rtol=1e-12, atol=1e-12)
    assert "Add" in op_types(model) and "BatchNormalization" in op_types(model)


def test_rms_norm():
    m = nnx.RMSNorm(8, rngs=nnx.Rngs(0))
    m.scale[...] = jax.random.normal(jax.random.key(1), (8,))
    model = check(m, [("B", 3, 8)], make_inputs=wide_inputs)
    assert op_types(model) == ["RMSNormalization"]
    model = check(m, [("B", 3, 8)], make_inputs=wide_inputs, opset=22)
    assert "RMSNormalization" not in op_types(model)


def test_batch_norm_inference():
    m = nnx.BatchNorm(4, use_running_average=True, rngs=nnx.Rngs(0))
    m.mean[...] = jnp.arange(4.0)
    m.var[...] = jnp.arange(1.0, 5.0)
    m.scale[...] = jnp.array([0.5, 1.0, 2.0, -1.0])
    model = check(m, [("B", 5, 5, 4)])
    assert op_types(model).count("BatchNormalization") == 1
    assert op_types(check(m, [("B", 4)])) == ["BatchNormalization"]


def test_linen_dense_and_layer_norm():
    import flax.linen as nn

    class M(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.LayerNorm()(nn.Dense(5)(x))

    m = M()
    params = m.init(jax.random.key(0), jnp.ones((2, 4)))
    model = check(lambda x: m.apply(params, x), [("B", 4)])
    assert op_types(model) == ["Gemm", "LayerNormalization"]


def test_a_configuration_no_spec_handles_traces_the_original():
    m = nnx.LayerNorm(8, reduction_axes=(-2, -1), feature_axes=-1, rngs=nnx.Rngs(0))
    check(m, [("B", 3, 8)])
    # No spec binds it: the decomposition is traced (the fuse pass, off here, may
    # still fuse it).
    model = jaxonnx.to_onnx(m, [("B", 3, 8)], fuse=False)
    assert "LayerNormalization" not in op_types(model)


def test_group_norm():
    m = nnx.GroupNorm(6, num_groups=3, rngs=nnx.Rngs(0))
    m.scale[...] = jax.random.normal(jax.random.key(1), (6,))
    m.bias[...] = jax.random.normal(jax.random.key(2), (6,))
    model = check(m, [(2, 4, 5, 6)], rtol=1e-4, atol=1e-4)
    assert op_types(model) == ["Transpose", "GroupNormalization", "Transpose"]
    # onnxruntime's op fails on a batch of 0, which JAX defines: a symbolic
    # batch runs it inside an If that gives the empty input back, followed by
    # OpenVINO's barrier (adding -0.0).
    model = check(m, [("B", 4, 5, 6)], rtol=1e-4, atol=1e-4, batches=(0, 1, 3))
    assert all_op_types(model).count("GroupNormalization") == 1
    expect_graph(model, ["If -> Add -> Transpose"])
    check(m, [(0, 4, 5, 6)])  # a static 0: the reference
    assert "GroupNormalization" not in all_op_types(check(m, [("B", 4, 5, 6)], opset=20))


@pytest.mark.parametrize("pool,op", [("max_pool", "MaxPool"), ("avg_pool", "AveragePool")])
@pytest.mark.parametrize("padding", ["VALID", "SAME", ((1, 0), (0, 1))])
def test_pool(pool, op, padding):
    fn = lambda x: getattr(nnx, pool)(x, window_shape=(2, 3), strides=(2, 1), padding=padding)  # noqa: E731
    model = check(fn, [("B", 7, 6, 3)])
    assert op in op_types(model)


@pytest.mark.parametrize("pool,op", [("max_pool", "MaxPool"), ("avg_pool", "AveragePool")])
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_same_pool_over_symbolic_extents(pool, op, count_include_pad):
    # A fully convolutional net on variable-size images: SAME pads depend on H and W,
    # so the pool asks ONNX for SAME_UPPER (JAX pads the odd element at the end too).
    kwargs = {} if pool == "max_pool" else {"count_include_pad": count_include_pad}
    fn = lambda x: getattr(nnx, pool)(x, (3, 3), strides=(2, 2), padding="SAME", **kwargs)  # noqa: E731
    model = check(fn, [("B", "H", "W", 3)],
                  batches=[dict(B=2, H=7, W=6), dict(B=1, H=1, W=1), dict(B=2, H=4, W=5)])
    (node,) = [n for n in model.graph.node if n.op_type == op]
    assert {a.name: a.s for a in node.attribute if a.name == "auto_pad"} == {"auto_pad": b"SAME_UPPER"}


def test_avg_pool_without_padded_counts():
    fn = lambda x: nnx.avg_pool(x, (3, 3), padding="SAME", count_include_pad=False)  # noqa: E731
    assert "AveragePool" in op_types(check(fn, [("B", 5, 5, 2)]))


def test_exact_keeps_max_pool_nan_propagation():
    fn = lambda x: nnx.max_pool(x, (2, 2), strides=(2, 2))  # noqa: E731
    spec = [jax.ShapeDtypeStruct((1, 2, 2, 1), np.float32)]
    exact = jaxonnx.to_onnx(fn, spec, crisp="exact")
    assert "MaxPool" not in op_types(exact)
    x = np.array([1.0, np.nan, 0.0, 2.0], np.float32).reshape(1, 2, 2, 1)
    out = ort.InferenceSession(exact.SerializeToString()).run(None, {"in_0": x})[0]
    assert np.isnan(out).all() and np.isnan(np.asarray(fn(x))).all()
    assert "MaxPool" in op_types(jaxonnx.to_onnx(fn, spec))



def test_exact_keeps_float64_log_softmax_of_inf():
    # onnxruntime's float64 LogSoftmax gives a row holding +inf NaN there and
    # -inf elsewhere; JAX (and the float32 kernel) a row of NaN.
    fn = lambda x: jax.nn.log_softmax(x)  # noqa: E731
    x = np.array([[np.inf, 1.0, 2.0], [0.5, 1.0, 2.0]])
    with jax.enable_x64(True):
        spec = [jax.ShapeDtypeStruct((2, 3), np.float64)]
        exact = jaxonnx.to_onnx(fn, spec, crisp="exact", enable_double_precision=True)
        crisp = jaxonnx.to_onnx(fn, spec, enable_double_precision=True)
        want = np.asarray(fn(x))
    assert "LogSoftmax" not in op_types(exact) and "LogSoftmax" in op_types(crisp)
    out = ort.InferenceSession(exact.SerializeToString()).run(None, {"in_0": x})[0]
    np.testing.assert_allclose(out, want, rtol=1e-12)  # NaN where JAX has NaN
    assert np.isnan(want[0]).all()
    f32 = jaxonnx.to_onnx(fn, [jax.ShapeDtypeStruct((2, 3), np.float32)], crisp="exact")
    assert "LogSoftmax" in op_types(f32)


# ------------------------------------------------------------------ the window

class Boom(Exception):
    pass


def test_window_restores_every_target_also_on_an_exception():
    before = (jax.nn.gelu, nnx.gelu, nnx.Linear.__dict__["__call__"], "__call__" in
              nnx.LayerNorm.__dict__, nnx.max_pool)

    def fails(x):
        assert jax.nn.gelu is not before[0]  # the window is open while tracing
        raise Boom()

    with pytest.raises(jaxonnx.ConversionError, match="Boom"):  # the user's error, wrapped
        jaxonnx.to_onnx(fails, [(2,)])
    after = (jax.nn.gelu, nnx.gelu, nnx.Linear.__dict__["__call__"], "__call__" in
             nnx.LayerNorm.__dict__, nnx.max_pool)
    assert all(a is b for a, b in zip(before, after))


def test_crisp_false_traces_through():
    model = jaxonnx.to_onnx(lambda x: jax.nn.gelu(x), [("B", 4)], crisp=False, fuse=False)
    assert "Gelu" not in op_types(model)


def test_windows_of_two_threads_take_turns():
    # Thread A holds a window open; a crisp=False conversion in thread B must
    # wait for it (it would otherwise trace A's patched targets), and both
    # leave every target as it was.
    import threading
    import time

    before = (jax.nn.gelu, nnx.Linear.__dict__["__call__"])
    entered, events = threading.Event(), []

    def holder():
        with _bindings.window(_plugins.registry(None)):
            entered.set()
            time.sleep(0.5)
            events.append("closed")

    def plain():
        entered.wait()
        model = jaxonnx.to_onnx(lambda x: jax.nn.gelu(x), [("B", 4)], crisp=False, fuse=False)
        events.append(("converted", op_types(model)))

    threads = [threading.Thread(target=holder), threading.Thread(target=plain)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert events[0] == "closed"
    assert events[1][0] == "converted" and "Gelu" not in events[1][1]
    assert (jax.nn.gelu, nnx.Linear.__dict__["__call__"]) == before


def test_crisp_rejects_other_values():
    for bad in ("yes", 0, 1):
        with pytest.raises(jaxonnx.ConversionError, match="crisp"):
            jaxonnx.to_onnx(jax.nn.relu, [(2,)], crisp=bad)


def test_eager_calls_in_the_window_run_the_original():
    reg = _plugins.registry(None)
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    with _bindings.window(reg):
        eager = jax.nn.gelu(x)
        jitted = jax.jit(jax.nn.gelu)(x)  # binds the primitive; XLA runs its reference
        grad = jax.grad(lambda v: jnp.sum(jax.nn.gelu(v)))(x)
    np.testing.assert_allclose(eager, jax.nn.gelu(x), rtol=1e-6)
    np.testing.assert_allclose(jitted, jax.nn.gelu(x), rtol=1e-6)
    np.testing.assert_allclose(grad, jax.grad(lambda v: jnp.sum(jax.nn.gelu(v)))(x), rtol=1e-6)


def test_every_binding_spec_compiles_and_has_a_dotted_target():
    reg = _plugins.registry(None)
    specs = _bindings._specs(reg)
    assert "jax.nn.gelu" in specs and "flax.nnx.Linear.__call__" in specs
    for target, ss in specs.items():
        assert "." in target and all(s.primitive.startswith("jaxonnx.nn.") for s in ss)


def test_a_spec_expression_outside_the_language_is_refused():
    with pytest.raises(jaxonnx.ConversionError, match="do not allow"):
        _bindings._compile("x.__class__", "test")
    with pytest.raises(jaxonnx.ConversionError, match="do not allow"):
        _bindings._compile("open('f')", "test")


# ------------------------------------------------------------------ models

sys.path.insert(0, str(ROOT / "examples"))


@pytest.mark.parametrize("name", ["mlp", "cnn", "gpt", "vit"])
def test_examples_give_the_same_numbers_with_crisp_on_and_off(name):
    import importlib
    module = importlib.import_module(name)
    model = module.make_model(small=True)
    import _common
    specs = _common.specs(module.inputs(small=True))
    on = jaxonnx.to_onnx(model, specs)
    off = jaxonnx.to_onnx(model, specs, crisp=False, fuse=False)
    assert len(on.graph.node) < len(off.graph.node)
    args = _common.sample(module.inputs(small=True), 2)
    feeds = {i.name: a for i, a in zip(on.graph.input, args)}
    a = ort.InferenceSession(on.SerializeToString()).run(None, feeds)
    b = ort.InferenceSession(off.SerializeToString()).run(None, feeds)
    expected = jax.tree_util.tree_leaves(model(*args))
    for x, y, e in zip(a, b, expected):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(x, np.asarray(e), rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ attention

def qkv_inputs(shape, dtype, rng):
    return rng.standard_normal(size=shape).astype(dtype)


# Each attention test runs in the default target (MatMul/Softmax/MatMul: onnxruntime's
# tools cannot read the standard Attention op) and in FUSED_TARGET (onnxruntime's
# fused attention ops, behind an empty-size guard).
TARGETS = pytest.mark.parametrize("target", ["onnxruntime", FUSED_TARGET], ids=["default", "fused"])


def _fused(model):
    return [t for t in all_op_types(model) if t in FUSED_ATTENTION]


@TARGETS
@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}, {"scale": 0.3}], ids=str)
def test_dot_product_attention(kwargs, target):
    fn = lambda q, k, v: jax.nn.dot_product_attention(q, k, v, **kwargs)  # noqa: E731
    model = check(fn, [("B", 5, 2, 8), ("B", 7 if not kwargs.get("is_causal") else 5, 2, 8),
                       ("B", 7 if not kwargs.get("is_causal") else 5, 2, 8)], target=target)
    if target == FUSED_TARGET:
        assert len(_fused(model)) == 1
        assert "Softmax" not in all_op_types(model) and "Transpose" not in all_op_types(model)
    else:
        assert not _fused(model) and all_op_types(model).count("Softmax") == 1
        assert "If" not in all_op_types(model)  # the decomposed form handles every size


def test_dot_product_attention_with_a_mask():
    mask = jnp.asarray(np.tril(np.ones((1, 1, 5, 5), np.bool_)))
    fn = lambda q, k, v: jax.nn.dot_product_attention(q, k, v, mask=mask)  # noqa: E731
    model = check(fn, [("B", 5, 2, 8)] * 3, target=FUSED_TARGET)
    assert "Attention" in all_op_types(model)
    exact = jaxonnx.to_onnx(fn, symbolic_specs([("B", 5, 2, 8)] * 3, [np.float32] * 3),
                            crisp="exact", target=FUSED_TARGET)
    assert "Attention" not in all_op_types(exact)  # an infinite logit at a blocked position


def _masks_with_blocked_rows(shape, dtype, rng):
    """Random bool masks whose last query row and first batch are blocked entirely
    (JAX: the mean of the values); other operands standard normal."""
    if np.dtype(dtype) != np.bool_:
        return rng.standard_normal(size=shape).astype(dtype)
    m = rng.integers(0, 2, size=shape).astype(np.bool_)
    if m.size:
        m[..., -1, :] = False
        m[0] = False
    return m


# (operand shapes after q, k, v; how fn calls dot_product_attention with them)
_MASKED = {
    "padding mask (B,1,T,S)": ([("B", 1, "T", "S")], lambda q, k, v, m: dict(mask=m)),
    "per-head mask (B,H,T,S)": ([("B", 2, "T", "S")], lambda q, k, v, m: dict(mask=m)),
    "bias": ([("B", 2, "T", "S")], lambda q, k, v, b: dict(bias=b)),
    "bias and mask": ([("B", 2, "T", "S"), ("B", 1, "T", "S")],
                      lambda q, k, v, b, m: dict(bias=b, mask=m)),
}


@TARGETS
@pytest.mark.parametrize("case", list(_MASKED), ids=str)
def test_masked_attention_agrees_on_every_row(case, target):
    # Rows the mask blocks entirely are the mean of the values in JAX (logits
    # replaced by finfo.min); Attention gets JAX's additive mask, and the
    # decomposed form masks as JAX does, so both agree.
    extra, kwargs = _MASKED[case]
    fn = lambda q, k, v, *ms: jax.nn.dot_product_attention(q, k, v, **kwargs(q, k, v, *ms))  # noqa: E731
    dtypes = [np.float32] * 3 + [np.bool_ if "mask" in case and i == len(extra) - 1 else np.float32
                                 for i in range(len(extra))]
    model = check(fn, [("B", "T", 2, 8), ("B", "S", 2, 8), ("B", "S", 2, 8)] + extra, dtypes,
                  make_inputs=_masks_with_blocked_rows,
                  batches=[dict(B=2, T=5, S=7), dict(B=3, T=1, S=1), dict(B=1, T=4, S=1)], target=target)
    assert ("Attention" in all_op_types(model)) == (target == FUSED_TARGET)


@TARGETS
def test_attention_with_a_key_padding_mask_broadcast_over_queries(target):
    # BERT's padding mask, (B, 1, 1, S): onnxruntime's Attention does not broadcast
    # a mask over the query length, so the lowering spells it out.
    def fn(q, k, v, valid):
        return jax.nn.dot_product_attention(q, k, v, mask=valid[:, None, None, :])

    model = check(fn, [("B", "T", 2, 8), ("B", "T", 2, 8), ("B", "T", 2, 8), ("B", "T")],
                  [np.float32] * 3 + [np.bool_], make_inputs=_masks_with_blocked_rows,
                  batches=[dict(B=2, T=5), dict(B=1, T=1)], target=target)
    assert ("Attention" in all_op_types(model)) == (target == FUSED_TARGET)


@TARGETS
def test_multi_head_attention_with_a_padding_mask(target):
    # The program: nnx attention over padded sequences, B and T symbolic;
    # the padded query rows (and a sequence that is all padding) match JAX too.
    class Encoder(nnx.Module):
        def __init__(self, rngs):
            self.attn = nnx.MultiHeadAttention(4, 16, decode=False, rngs=rngs)

        def __call__(self, x, valid):
            return self.attn(x, mask=nnx.make_attention_mask(valid, valid))

    m = Encoder(nnx.Rngs(0))

    def inputs(shape, dtype, rng):
        if np.dtype(dtype) != np.bool_:
            return rng.standard_normal(size=shape).astype(dtype)
        lengths = np.arange(shape[0]) % (shape[1] + 1)  # 0 (all padding), 1, 2, ...
        return np.arange(shape[1])[None, :] < lengths[:, None]

    model = check(m, [("B", "T", 16), ("B", "T")], [np.float32, np.bool_], make_inputs=inputs,
                  batches=[dict(B=4, T=5), dict(B=1, T=1)], target=target)
    assert ("Attention" in all_op_types(model)) == (target == FUSED_TARGET)


def test_dot_product_attention_below_opset_23_and_under_vmap():
    fn = lambda q, k, v: jax.nn.dot_product_attention(q, k, v)  # noqa: E731
    assert "Attention" not in all_op_types(check(fn, [("B", 5, 2, 8)] * 3, opset=22, target=FUSED_TARGET))
    check(jax.vmap(fn), [("B", 3, 5, 2, 8)] * 3)  # rank 5: the reference


def test_multi_head_attention_is_one_attention():
    m = nnx.MultiHeadAttention(2, 16, decode=False, rngs=nnx.Rngs(0))
    model = check(lambda x: m(x), [("B", 6, 16)], target=FUSED_TARGET)
    # q, k, v: one Gemm each on [B*6, 16] rows (the rows pass), reshaped for
    # Attention (the heads' Reshapes merge into those); the output projection
    # likewise.
    static = check(lambda x: m(x), [(2, 6, 16)], target=FUSED_TARGET)
    assert sorted(op_types(static)) == sorted(["Reshape"] * 6 + ["Gemm"] * 4 + ["Attention"])
    # A symbolic batch may be 0, which onnxruntime's Attention refuses: an If
    # on the batch size runs Attention, or returns the empty result; adding
    # -0.0 after it keeps OpenVINO from reading garbage (see empty_guard.hpp).
    assert sorted(op_types(model)) == sorted(["Reshape"] * 6 + ["Gemm"] * 4 +
                                             ["Add", "Shape", "ReduceMin", "Equal", "If"])
    expect_graph(model, ["If -> Reshape -> Add -> Gemm"])
    (branch,) = [a.g for n in model.graph.node if n.op_type == "If" for a in n.attribute
                 if a.name == "else_branch"]
    assert all_op_types(branch) == ["Attention"]


def test_multi_head_attention_in_the_default_target():
    # The default target: the heads as MatMul/Softmax/MatMul between Transposes,
    # no empty-size guard, and only standard ops symbolic shape inference reads.
    m = nnx.MultiHeadAttention(2, 16, decode=False, rngs=nnx.Rngs(0))
    model = check(lambda x: m(x), [("B", 6, 16)], batches=(0, 1, 3))
    ops = op_types(model)
    # The projections: one Gemm each on rows; the heads: two MatMuls.
    assert ops.count("Gemm") == 4 and ops.count("MatMul") == 2, ops
    assert ops.count("Softmax") == 1 and ops.count("Transpose") == 4, ops
    assert not set(ops) & (FUSED_ATTENTION | {"If"}), ops


@TARGETS
@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}], ids=str)
def test_dot_product_attention_over_empty_sizes(kwargs, target):
    # onnxruntime's Attention refuses a batch, query or key length of 0; JAX
    # gives an empty result (zeros without keys).
    fn = lambda q, k, v: jax.nn.dot_product_attention(q, k, v, **kwargs)  # noqa: E731
    kv = "S" if kwargs else "T"
    check(fn, [("B", "S", 2, 8), ("B", kv, 2, 8), ("B", kv, 2, 8)],
          batches=[dict(B=0, S=3, T=4), dict(B=2, S=0, T=4), dict(B=2, S=3, T=0), dict(B=2, S=3, T=4)],
          target=target)
    m = nnx.MultiHeadAttention(2, 16, decode=False, rngs=nnx.Rngs(0))
    check(lambda x: m(x), [("B", 6, 16)], batches=(0, 2), target=target)


def test_linear_general():
    m = nnx.LinearGeneral(6, (2, 4), rngs=nnx.Rngs(0))
    model = check(m, [("B", 3, 6)])
    # On rows (a Gemm there), the way back merged into the heads' Reshape.
    assert op_types(model) == ["Reshape", "Gemm", "Reshape"]


@pytest.mark.parametrize("opset", [13, None], ids=["opset13", "default"])
def test_linear_general_zero_size_output(opset):
    # The kernel (6, 3, 0) flattened to (6, 0): a 0 in Reshape's shape must
    # mean 0 (allowzero), not "copy the kernel's dim 1" (3).
    m = nnx.LinearGeneral(6, (3, 0), kernel_init=nnx.initializers.normal(), rngs=nnx.Rngs(0))
    check(m, [("B", 6)], opset=opset)


@pytest.mark.parametrize("make", [
    lambda: nnx.RMSNorm(4, param_dtype=jnp.float64, rngs=nnx.Rngs(0)),
    lambda: (lambda x: nnx.max_pool(x, (2, 2), strides=(1, 1))),
], ids=["RMSNormalization", "MaxPool"])
def test_float64_layers_load_and_match(make, request):
    # (BatchNorm: flax keeps its statistics in float32 whatever param_dtype says,
    # and mixed dtypes lower the reference)
    with jax.enable_x64(True):
        fn = make()
    model = check(fn, [("B", 3, 3, 4)], x64=True)
    assert request.node.callspec.id in op_types(model)


# ------------------------------------------------------------------ embed

def index_inputs(n):
    """Indices in [-n, n): jnp.take reads a negative one from the end, as Gather does."""
    def make(shape, dtype, rng):
        return rng.integers(-n, n, size=shape).astype(dtype)
    return make


@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize("shape", [(3, 5), ("B", 5)], ids=["static", "symbolic"])
def test_embed_is_clip_gather(index, shape):
    m = nnx.Embed(10, 4, rngs=nnx.Rngs(0))
    model = check(m, [shape], [index], x64=index == np.int64, make_inputs=index_inputs(10))
    expect_graph(model, ["Clip -> Gather"], match="exact", counts={"Clip": 1, "Gather": 1})


def test_embed_float64_table():
    with jax.enable_x64(True):
        m = nnx.Embed(10, 4, param_dtype=jnp.float64, rngs=nnx.Rngs(0))
    model = check(m, [("B", 5)], [np.int32], x64=True, make_inputs=index_inputs(10))
    expect_graph(model, ["Clip -> Gather"], match="exact")


def test_embed_under_jit_and_vmap():
    m = nnx.Embed(10, 4, rngs=nnx.Rngs(0))
    model = check(jax.vmap(jax.jit(lambda i: m(i))), [("B", 2, 5)], [np.int32],
                  make_inputs=index_inputs(10))
    expect_graph(model, ["Clip -> Gather"], match="exact")


def test_embed_out_of_range_is_clamped_and_exact_keeps_the_nan_row():
    m = nnx.Embed(10, 4, rngs=nnx.Rngs(0))
    specs = symbolic_specs([("B",)], [np.int32])
    idx = np.array([-11, -10, -1, 0, 9, 10, 25], np.int32)
    table = np.asarray(m.embedding[...])
    crisp = jaxonnx.to_onnx(m, specs)
    got = ort.InferenceSession(crisp.SerializeToString()).run(None, {"in_0": idx})[0]
    # in range: JAX's rows; out of range: the first or last row (JAX: NaN)
    np.testing.assert_array_equal(got, table[[0, 0, 9, 0, 9, 9, 9]])
    exact = jaxonnx.to_onnx(m, specs, crisp="exact")
    assert "Clip" not in op_types(exact)
    got = ort.InferenceSession(exact.SerializeToString()).run(None, {"in_0": idx})[0]
    np.testing.assert_array_equal(got, np.asarray(m(idx)))
    assert np.isnan(got[[0, 5, 6]]).all()


def test_embed_below_opset_23_and_in_the_gpt():
    m = nnx.Embed(10, 4, rngs=nnx.Rngs(0))
    assert "Clip" in op_types(check(m, [("B", 5)], [np.int32], opset=18,
                                    make_inputs=index_inputs(10)))
    import importlib
    import _common
    gpt = importlib.import_module("gpt")
    model = jaxonnx.to_onnx(gpt.make_model(small=True), _common.specs(gpt.inputs(small=True)))
    # One Where: the causal mask as Attention's additive mask (not the exact Embed's row test).
    expect_graph(model, ["Clip -> Gather -> Add"], counts={"Gather": 1, "Clip": 1, "Where": 1})


# ------------------------------------------------------------------ LSTM cell

def lstm_cell(kind, features=4, hidden=8, dtype=jnp.float32):
    cls = nnx.LSTMCell if kind == "LSTMCell" else nnx.OptimizedLSTMCell
    cell = cls(features, hidden, param_dtype=dtype, rngs=nnx.Rngs(0))
    # nonzero biases, so that their place in the fused Gemm is tested
    for lin in ([cell.hi, cell.hf, cell.hg, cell.ho] if kind == "LSTMCell" else [cell.dense_h]):
        lin.bias[...] = jax.random.normal(jax.random.key(3), lin.bias.shape, dtype)
    return cell


@pytest.mark.parametrize("kind", ["LSTMCell", "OptimizedLSTMCell"])
@pytest.mark.parametrize("batch", [3, "B"])
def test_lstm_cell_is_two_gemms(kind, batch):
    cell = lstm_cell(kind)
    model = check(lambda c, h, x: cell((c, h), x), [(batch, 8), (batch, 8), (batch, 4)])
    expect_graph(model, ["Gemm -> Gemm -> Split", "Mul -> Add -> Tanh -> Mul"],
                 counts={"Gemm": 2, "Split": 2 if kind == "LSTMCell" else 1})


def test_lstm_cell_float64():
    with jax.enable_x64(True):
        cell = lstm_cell("LSTMCell", dtype=jnp.float64)
    model = check(lambda c, h, x: cell((c, h), x), [("B", 8), ("B", 8), ("B", 4)], x64=True)
    assert op_types(model).count("Gemm") == 2


def rnn_model(kind, features=4, hidden=8):
    rnn = nnx.RNN(lstm_cell(kind, features, hidden), return_carry=True, rngs=False)
    graphdef, state = nnx.split(rnn)

    def run(x):  # as examples/lstm.py: the module merged inside the traced function
        zeros = jnp.zeros((x.shape[0], hidden), x.dtype)
        (c, h), ys = nnx.merge(graphdef, state, copy=True)(x, initial_carry=(zeros, zeros))
        return c, h, ys
    return run


@pytest.mark.parametrize("kind", ["LSTMCell", "OptimizedLSTMCell"])
def test_rnn_loop_body_has_two_gemms_per_step(kind):
    model = check(rnn_model(kind), [("B", 5, 4)], rtol=1e-4, atol=1e-5)
    (loop,) = [n for n in model.graph.node if n.op_type == "Loop"]
    body = [n.op_type for n in loop.attribute[0].g.node]
    assert body.count("Gemm") == 2 and "MatMul" not in body, body


def test_lstm_cell_under_jit_and_vmap_and_opset_18():
    cell = lstm_cell("LSTMCell")
    fn = jax.vmap(jax.jit(lambda c, h, x: cell((c, h), x)))
    check(fn, [("B", 2, 8), ("B", 2, 8), ("B", 2, 4)])  # rank 3: the reference
    model = check(jax.jit(lambda c, h, x: cell((c, h), x)), [("B", 8), ("B", 8), ("B", 4)],
                  opset=18)
    assert op_types(model).count("Gemm") == 2
