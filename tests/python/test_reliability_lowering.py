"""Regression tests for issue 14 ("Reliability") that concern what a conversion
emits: each failed before its fix (a crash in onnxruntime, a model the checker
rejects, a wrong name or a silent bad conversion)."""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from jax import lax

import jaxonnx
from helpers import check, op_types

INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def _run(model, *args):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), args)})


# -- bug 2: integer division gives JAX's results where onnxruntime's Div traps

@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda t: np.dtype(t).name)
def test_integer_div_by_zero_and_int_min_by_minus_one(dtype):
    info = np.iinfo(dtype)
    signed = info.min < 0
    x = np.array([7, info.max, 0, info.min, 5, info.min, 9, 3], dtype)
    y = np.array([0, 0, 0, -1 if signed else 0, 2, 1, -3 if signed else 3, 0], dtype)
    with jax.enable_x64(True):
        model = jaxonnx.to_onnx(lax.div, [x.shape, y.shape], enable_double_precision=True)
        model = jaxonnx.to_onnx(lambda a, b: lax.div(a, b),
                                [jax.ShapeDtypeStruct(x.shape, dtype),
                                 jax.ShapeDtypeStruct(y.shape, dtype)],
                                enable_double_precision=True)
        expected = np.asarray(lax.div(x, y))
    onnx.checker.check_model(model, full_check=True)
    got, = _run(model, x, y)  # before the fix: SIGFPE (INT_MIN / -1) or an onnxruntime error
    np.testing.assert_array_equal(got, expected)


def test_floor_divide_and_remainder_by_zero_match_jax():
    def fn(a, b):
        return a // b, a % b, jnp.divmod(a, b)[0]
    x = np.array([7, -7, 0, -2**31, 5], np.int32)
    y = np.array([0, 0, 0, -1, -2], np.int32)
    model = jaxonnx.to_onnx(fn, [jax.ShapeDtypeStruct((5,), np.int32)] * 2)
    for got, want in zip(_run(model, x, y), fn(jnp.asarray(x), jnp.asarray(y))):
        np.testing.assert_array_equal(got, np.asarray(want))


def test_float_div_stays_one_node():
    model = check(lambda a, b: a / b, [("B", 3), ("B", 3)])
    assert op_types(model) == ["Div"]


# -- bug 3: implicit size-1 broadcasting in multi-node lowerings

BROADCAST_FNS = {
    "atan2": jnp.arctan2,
    "nextafter": jnp.nextafter,
    "rem": lambda a, b: lax.rem(a, b),
    "fmod": jnp.fmod,
}


@pytest.mark.parametrize("name", sorted(BROADCAST_FNS))
@pytest.mark.parametrize("shapes", [[(3, 1), (3, 4)], [(3, 4), (1, 4)], [("B", 1), (1, 4)]],
                         ids=["col", "row", "sym"])
def test_binary_math_broadcasts_size_one_dims(name, shapes):
    fn = BROADCAST_FNS[name]
    check(fn, shapes)  # before: wrong declared shapes, the checker rejected the model


def test_bind_output_checks_the_shape():
    # The host refuses a lowering whose bound value is declared with another
    # shape than JAX's output (test_reliability_plugins checks the message);
    # here: every bundled lowering of a broadcasting program passes that check.
    check(lambda a, b: jnp.arctan2(a, b) + lax.rem(a, b) * jnp.nextafter(a, b),
          [(2, 1, 3), (1, 5, 1)], x64=True)


# -- bug 7: dtypes ONNX cannot carry, and functions returning nothing

@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "int2"])
def test_unsupported_input_dtypes_are_refused(dtype):
    spec = jax.ShapeDtypeStruct((3,), jnp.dtype(dtype))
    with pytest.raises(jaxonnx.ConversionError, match=f"input 'in_0' has dtype {dtype}"):
        jaxonnx.to_onnx(lambda x: x, [spec])


def test_unsupported_intermediate_dtype_is_refused_with_its_source_line():
    def fn(x):
        return x.astype(jnp.float8_e4m3fn).astype(jnp.float32)
    with pytest.raises(jaxonnx.ConversionError, match="float8_e4m3fn") as info:
        jaxonnx.to_onnx(fn, [(3,)])
    assert "test_reliability_lowering.py" in str(info.value)


def test_complex_output_is_carried_packed():
    # Complex values are no longer refused: a complex64 output is float32[..., 2]
    # (tests/python/test_complex.py covers the primitives).
    model = jaxonnx.to_onnx(lambda x: x * 1j, [(3,)])
    dims = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    assert dims == [3, 2] and model.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT


def test_complex_operand_a_plugin_does_not_lower_is_refused_clearly():
    # The plugin, primitive, complex aval and the user's line are named.
    with pytest.raises(jaxonnx.ConversionError,
                       match=r"plugin 'lax_cumulative' failed to lower 'cumlogsumexp' \(inputs: complex64\[3\]\) "
                             r"at .*test_reliability_lowering.py.*takes a floating operand, got complex64"):
        jaxonnx.to_onnx(lambda x: lax.cumlogsumexp(x * 1j), [(3,)])


@pytest.mark.parametrize("ret", [None, (), {}], ids=["None", "tuple", "dict"])
def test_function_returning_nothing_is_refused(ret):
    with pytest.raises(jaxonnx.ConversionError, match="returned no arrays"):
        jaxonnx.to_onnx(lambda x: ret, [(3,)])


# -- bug 8: the user's input names win over generated names

@pytest.mark.parametrize("name", ["add", "add_1", "in_0", "mul"])
def test_input_param_named_like_a_generated_value(name):
    def fn(x, **kw):
        return (x + 1.0) + (x + 2.0) * kw[name]
    model = jaxonnx.to_onnx(fn, [(3,)], input_params={name: np.float32(2.0)})
    onnx.checker.check_model(model, full_check=True)
    inputs = [i.name for i in model.graph.input]
    assert inputs[1] == name and len(set(inputs)) == 2
    x = np.arange(3, dtype=np.float32)
    three = np.array(3.0, np.float32)
    got, = _run(model, x, three)
    np.testing.assert_allclose(got, fn(x, **{name: three}))


# -- bug 9: Transpose -> Cast(from bool) -> MatMul crashed onnxruntime at session creation

def test_transposed_bool_matmul_runs():
    def fn(m, x):
        return jnp.dot(m.T, x)
    specs = [jax.ShapeDtypeStruct((4, 3), np.bool_), jax.ShapeDtypeStruct((4, 5), np.float32)]
    model = jaxonnx.to_onnx(fn, specs)
    onnx.checker.check_model(model, full_check=True)
    ops = op_types(model)
    assert ops.index("Cast") < ops.index("Transpose"), ops  # the Cast reads the bool input
    m = np.random.default_rng(0).integers(0, 2, (4, 3)).astype(bool)
    x = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
    got, = _run(model, m, x)  # before: a segfault in onnxruntime 1.31 (default optimizations)
    np.testing.assert_allclose(got, np.asarray(fn(m, x)), rtol=1e-6)


# -- bug 12 (the GIL released, Ctrl-C during a conversion): tests/python/test_interrupt.py
