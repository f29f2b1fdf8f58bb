"""lax_reduction plugin: reduce_sum / reduce_max / reduce_min / argmax."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from helpers import check, op_types

FLOATS = [(np.float32, False), (np.float64, True)]
REDUCE = {
    "reduce_sum": lax.reduce_sum_p,
    "reduce_max": lax.reduce_max_p,
    "reduce_min": lax.reduce_min_p,
}
ONNX_OP = {"reduce_sum": "ReduceSum", "reduce_max": "ReduceMax", "reduce_min": "ReduceMin"}


def reduce(name, axes):
    prim = REDUCE[name]
    if name == "reduce_sum":
        return lambda x: prim.bind(x, axes=tuple(axes), out_sharding=None)
    return lambda x: prim.bind(x, axes=tuple(axes))


def with_nans(shape, dtype, rng):
    """Rows with no NaN, one NaN, several NaNs, and infinities."""
    x = rng.standard_normal(size=shape).astype(dtype)
    flat = x.reshape(-1)
    flat[1::4] = np.nan
    flat[2::9] = np.inf
    flat[5::11] = -np.inf
    x = flat.reshape(shape)
    if x.ndim >= 2 and x.shape[0] > 1:
        x[0] = rng.standard_normal(size=x.shape[1:]).astype(dtype)  # a NaN-free row
    return x


AXES = [(0,), (1,), (0, 1), (1, 2), (0, 1, 2)]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("name", sorted(REDUCE))
@pytest.mark.parametrize("shape", [(2, 3, 4), ("B", 3, 4)], ids=str)
def test_reduce(name, axes, dtype, x64, shape):
    model = check(reduce(name, axes), [shape], [dtype], x64=x64, rtol=1e-5 if not x64 else None)
    assert ONNX_OP[name] in op_types(model)


@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduce_empty_axes_is_identity(name):
    model = check(lambda x: reduce(name, ())(x) * 2.0, [("B", 4)])
    assert op_types(model) == ["Mul"]


@pytest.mark.parametrize("dtype,x64", [(np.int32, False), (np.int64, True)], ids=["i32", "i64"])
@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduce_int(name, dtype, x64):
    model = check(reduce(name, (1,)), [("B", 5)], [dtype], x64=x64)
    assert op_types(model) == [ONNX_OP[name]]


def test_jnp_sum_and_mean():
    check(lambda x: (jnp.sum(x, axis=-1), jnp.max(x, axis=0)), [("B", 6)])


# --------------------------------------------------------------------- NaN --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("axes", [(1,), (0, 1)], ids=str)
@pytest.mark.parametrize("name", ["reduce_max", "reduce_min"])
def test_reduce_max_min_propagate_nan(name, axes, dtype, x64):
    check(reduce(name, axes), [("B", 5)], [dtype], x64=x64, make_inputs=with_nans)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_reduce_sum_with_nan(dtype, x64):
    check(reduce("reduce_sum", (1,)), [("B", 5)], [dtype], x64=x64, make_inputs=with_nans)


# -------------------------------------------------------------------- bool --

@pytest.mark.parametrize("opset", [18, 19, 20, 23])
@pytest.mark.parametrize("name", ["reduce_max", "reduce_min"])
def test_reduce_bool_is_any_all(name, opset):
    model = check(reduce(name, (1,)), [("B", 3)], [np.bool_], opset=opset)
    if opset >= 20:
        assert op_types(model) == [ONNX_OP[name]]
    else:
        assert op_types(model) == ["Cast", ONNX_OP[name], "Cast"]


def test_jnp_any_all_via_max_min():
    check(lambda b: (jnp.max(b, axis=0), jnp.min(b)), [("B", 3)], [np.bool_])


# ------------------------------------------------------------------ argmax --

def argmax(axis, index_dtype):
    return lambda x: lax.argmax(x, axis, index_dtype)


@pytest.mark.parametrize("index_dtype,x64", [(np.int32, False), (np.int64, True)], ids=["i32", "i64"])
@pytest.mark.parametrize("dtype", ["float", "int32"])
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("shape", [(2, 3, 4), ("B", 3, 4)], ids=str)
def test_argmax(shape, axis, dtype, index_dtype, x64):
    dt = {"float": np.float64 if x64 else np.float32, "int32": np.int32}[dtype]
    check(argmax(axis, index_dtype), [shape], [dt], x64=x64)


def test_argmax_ties_pick_first():
    def gen(s, d, rng):
        return rng.integers(0, 2, size=s).astype(d)  # many equal maxima
    check(argmax(1, np.int32), [("B", 8)], make_inputs=gen)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("opset", [18, 23])
def test_argmax_returns_first_nan(dtype, x64, opset):
    check(argmax(1, np.int32), [("B", 9)], [dtype], x64=x64, make_inputs=with_nans, opset=opset)
    check(argmax(0, np.int32), [("B", 9)], [dtype], x64=x64, make_inputs=with_nans, opset=opset)


def test_argmax_nan_after_inf():
    def gen(s, d, rng):
        x = np.zeros(s, d)
        x[..., 0] = np.inf
        x[..., 2] = np.nan
        return x
    check(argmax(1, np.int32), [("B", 4)], make_inputs=gen)


def test_argmax_bool():
    check(argmax(1, np.int32), [("B", 5)], [np.bool_])


def test_argmax_int_emits_no_nan_handling():
    model = check(argmax(1, np.int32), [("B", 5)], [np.int32])
    assert op_types(model) == ["ArgMax", "Cast"]


def test_jnp_argmax():
    check(lambda x: jnp.argmax(x, axis=-1), [("B", 5)])
