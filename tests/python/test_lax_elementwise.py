"""lax_elementwise plugin: arithmetic, transcendental, comparison, select_n, convert, stop_gradient."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from helpers import check, op_types, random_input

SHAPES = [(3, 4), ("B", 4)]
FLOATS = [(np.float32, False), (np.float64, True)]


def positive(shape, dtype, rng):
    return (np.abs(random_input(shape, dtype, rng)) + 0.1).astype(dtype)


def with_nans(shape, dtype, rng):
    """Random floats with NaN, inf and -inf sprinkled in."""
    x = random_input(shape, dtype, rng)
    flat = x.reshape(-1)
    flat[::3] = np.nan
    flat[1::5] = np.inf
    flat[2::7] = -np.inf
    return x


def nonzero_ints(shape, dtype, rng):
    x = random_input(shape, dtype, rng)
    return np.where(x == 0, 3, x).astype(dtype)


# ------------------------------------------------------------------ floats --

UNARY = {
    "exp": (lax.exp, None),
    "log": (lax.log, positive),
    "tanh": (lax.tanh, None),
    "logistic": (lax.logistic, None),
    "sqrt": (lax.sqrt, positive),
    "rsqrt": (lax.rsqrt, positive),
    "abs": (lax.abs, None),
    "sign": (lax.sign, None),
    "erf": (lax.erf, None),
    "neg": (lax.neg, None),
}

BINARY = {
    "add": lax.add,
    "sub": lax.sub,
    "mul": lax.mul,
    "div": lax.div,
    "max": lax.max,
    "min": lax.min,
}

COMPARE = {
    "eq": lax.eq,
    "ne": lax.ne,
    "lt": lax.lt,
    "le": lax.le,
    "gt": lax.gt,
    "ge": lax.ge,
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float(name, dtype, x64, shape):
    fn, gen = UNARY[name]
    check(fn, [shape], [dtype], x64=x64, make_inputs=gen)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_float(name, dtype, x64, shape):
    check(BINARY[name], [shape, shape], [dtype, dtype], x64=x64)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(COMPARE))
def test_compare_float(name, dtype, x64, shape):
    check(COMPARE[name], [shape, shape], [dtype, dtype], x64=x64)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_scalar_literal_operand(dtype, x64):
    # `mul a 2.0:f32[]`: a rank-0 literal against a batch of values.
    check(lambda x: x * 2.0 + 1.0, [("B", 4)], [dtype], x64=x64)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_rsqrt_is_reciprocal_of_sqrt(dtype, x64):
    model = check(lax.rsqrt, [("B", 4)], [dtype], x64=x64, make_inputs=positive)
    assert op_types(model) == ["Sqrt", "Reciprocal"]


# --------------------------------------------------------------------- pow --

@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_pow_float_exponent(dtype, x64, shape):
    def gen(s, d, rng):
        return positive(s, d, rng)
    check(lax.pow, [shape, shape], [dtype, dtype], x64=x64, make_inputs=gen)


@pytest.mark.parametrize("dtype,int_dtype,x64", [(np.float32, np.int32, False),
                                                  (np.float64, np.int32, True),
                                                  (np.float64, np.int64, True)],
                         ids=["f32^i32", "f64^i32", "f64^i64"])
def test_pow_integer_exponent_dtype(dtype, int_dtype, x64):
    # lax.pow with an integer y: negative bases and negative exponents are fine.
    def gen(s, d, rng):
        if np.issubdtype(d, np.integer):
            return rng.integers(-4, 5, size=s).astype(d)
        return random_input(s, d, rng)
    model = check(lax.pow, [("B", 4), ("B", 4)], [dtype, int_dtype], x64=x64, make_inputs=gen)
    assert "Pow" in op_types(model)


@pytest.mark.parametrize("y", [0, 1, 2, 3, 5, 8, -1, -2, -3])
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_integer_pow_is_a_mul_chain(y, dtype, x64):
    model = check(lambda x: lax.integer_pow(x, y), [("B", 4)], [dtype], x64=x64,
                  make_inputs=positive if y < 0 else None)
    assert "Pow" not in op_types(model)


def test_integer_pow_zero_of_nan_is_one():
    model = check(lambda x: lax.integer_pow(x, 0), [("B", 3)], make_inputs=with_nans)
    assert "Pow" not in op_types(model)


@pytest.mark.parametrize("y", [2, 3, 7])
def test_integer_pow_int32(y):
    check(lambda x: lax.integer_pow(x, y), [("B", 4)], [np.int32])


# ---------------------------------------------------------------- integers --

INT_TYPES = [(np.int32, False), (np.int64, True)]


@pytest.mark.parametrize("dtype,x64", INT_TYPES, ids=["i32", "i64"])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "max", "min"])
def test_binary_int(name, dtype, x64):
    check(BINARY[name], [("B", 4), ("B", 4)], [dtype, dtype], x64=x64)


@pytest.mark.parametrize("dtype,x64", INT_TYPES, ids=["i32", "i64"])
def test_integer_div_rounds_toward_zero(dtype, x64):
    def gen(s, d, rng):
        return nonzero_ints(s, d, rng)
    model = check(lax.div, [("B", 6), ("B", 6)], [dtype, dtype], x64=x64, make_inputs=gen)
    # And explicitly on the cases where floor and truncation differ:
    import onnxruntime as ort
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    a = np.array([[-7, 7, -7, 7, -1, 1]], dtype)
    b = np.array([[2, -2, -2, 2, 3, -3]], dtype)
    got = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], [a, b])))[0]
    np.testing.assert_array_equal(got, np.array([[-3, -3, 3, 3, 0, 0]], dtype))


@pytest.mark.parametrize("dtype,x64", INT_TYPES, ids=["i32", "i64"])
@pytest.mark.parametrize("name", ["neg", "abs", "sign"])
def test_unary_int(name, dtype, x64):
    check(UNARY[name][0], [("B", 4)], [dtype], x64=x64)


def test_neg_unsigned_wraps():
    model = check(lax.neg, [("B", 4)], [np.uint32])
    assert "Neg" not in op_types(model)


@pytest.mark.parametrize("name", sorted(COMPARE))
def test_compare_int32(name):
    check(COMPARE[name], [("B", 4), ("B", 4)], [np.int32, np.int32])


# -------------------------------------------------------------- NaN / bool --

@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_max_min_propagate_nan(name, dtype, x64):
    check(BINARY[name], [("B", 6), ("B", 6)], [dtype, dtype], x64=x64, make_inputs=with_nans)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_sign_of_nan_is_nan(dtype, x64):
    check(lax.sign, [("B", 6)], [dtype], x64=x64, make_inputs=with_nans)


@pytest.mark.parametrize("name", ["eq", "ne", "lt", "gt"])
def test_compare_with_nan(name):
    check(COMPARE[name], [("B", 6), ("B", 6)], make_inputs=with_nans)


@pytest.mark.parametrize("name", sorted(COMPARE))
def test_compare_bool(name):
    check(COMPARE[name], [("B", 4), ("B", 4)], [np.bool_, np.bool_])


@pytest.mark.parametrize("name,onnx_op", [("max", "Or"), ("min", "And")])
def test_max_min_bool_are_or_and(name, onnx_op):
    model = check(BINARY[name], [("B", 4), ("B", 4)], [np.bool_, np.bool_])
    assert op_types(model) == [onnx_op]


# ---------------------------------------------------------------- select_n --

@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_select_n_bool_predicate(dtype, x64, shape):
    model = check(lambda p, a, b: lax.select_n(p, a, b), [shape, shape, shape],
                  [np.bool_, dtype, dtype], x64=x64)
    assert op_types(model) == ["Where"]


def test_select_n_scalar_predicate():
    check(lambda p, a, b: lax.select_n(p, a, b), [(), ("B", 4), ("B", 4)],
          [np.bool_, np.float32, np.float32])


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_select_n_int32_predicate(n):
    def gen(s, d, rng):
        if d == np.int32:
            return rng.integers(0, n, size=s).astype(d)
        return random_input(s, d, rng)
    shapes = [("B", 4)] * (n + 1)
    check(lambda p, *cases: lax.select_n(p, *cases), shapes, [np.int32] + [np.float32] * n,
          make_inputs=gen)


def test_where_with_literal():
    # jnp.where -> a jit around select_n with a literal case.
    check(lambda x: jnp.where(x > 0, x, 0.5), [("B", 4)])


# -------------------------------------------------------- convert_element_type --

CONVERSIONS = [
    (np.float32, np.int32, False),
    (np.float32, np.float64, True),
    (np.float64, np.float32, True),
    (np.float64, np.int64, True),
    (np.int32, np.float32, False),
    (np.int64, np.int32, True),
    (np.bool_, np.float32, False),
    (np.bool_, np.int32, False),
    (np.int32, np.bool_, False),
    (np.float32, np.bool_, False),
    (np.float64, np.bool_, True),
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("src,dst,x64", CONVERSIONS,
                         ids=[f"{np.dtype(a).name}->{np.dtype(b).name}" for a, b, _ in CONVERSIONS])
def test_convert_element_type(src, dst, x64, shape):
    model = check(lambda x: lax.convert_element_type(x, dst), [shape], [src], x64=x64)
    assert op_types(model) == ["Cast"]


@pytest.mark.parametrize("dst", [np.int32, np.int8])
def test_convert_float_to_int_truncates_toward_zero(dst):
    def gen(s, d, rng):
        vals = np.array([-2.7, -1.5, -0.5, -0.2, 0.0, 0.2, 0.5, 1.5, 2.7, 9.99], d)
        return np.resize(vals, s).astype(d)
    check(lambda x: lax.convert_element_type(x, dst), [("B", 10)], make_inputs=gen)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_convert_float_to_bool_nan_and_zero(dtype, x64):
    def gen(s, d, rng):
        vals = np.array([np.nan, 0.0, -0.0, 1e-30, -2.0, np.inf], d)
        return np.resize(vals, s).astype(d)
    check(lambda x: lax.convert_element_type(x, np.bool_), [("B", 6)], [dtype], x64=x64,
          make_inputs=gen)


def test_convert_same_dtype_emits_nothing():
    # A weak-type-only conversion: no Cast.
    model = check(lambda x: lax.convert_element_type(x, np.float32) * 3.0, [("B", 4)])
    assert op_types(model) == ["Mul"]


# ----------------------------------------------------------- stop_gradient --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_stop_gradient_emits_no_node(dtype, x64):
    model = check(lambda x: lax.stop_gradient(x) * x, [("B", 4)], [dtype], x64=x64)
    assert op_types(model) == ["Mul"]


# --------------------------------------------------------------------- erf --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_erf_edge_values(dtype, x64):
    # Around the float64 approximation's range switches (|x| = 1, 8, underflow), and NaN/inf.
    vals = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-300, 0.5, -0.999, 1.0, -1.0, 1.001, 3.0, -5.0,
            7.99, 8.0, 8.5, -12.0, 26.0, 27.5, 40.0]

    def gen(s, d, rng):
        return np.resize(np.array(vals, d), s).astype(d)
    check(lax.erf, [("B", len(vals))], [dtype], x64=x64, make_inputs=gen)


# -------------------------------------------------------------------- copy --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_copy_is_identity(dtype, x64):
    model = check(lambda x: jnp.array(x, copy=True) + 1.0, [("B", 4)], [dtype], x64=x64)
    assert set(op_types(model)) <= {"Identity", "Add"}  # an identity pass may drop the copy


def test_output_that_is_an_input_goes_through_copy():
    # The core routes a graph output that is a graph input through `copy`.
    model = check(lambda x: (x, lax.stop_gradient(x)), [("B", 4)])
    assert op_types(model) == ["Identity", "Identity"]


@pytest.mark.parametrize("opset", [18, 19, 20, 21, 22, 23])
def test_elementwise_every_opset(opset):
    def fn(x, y, p):
        z = lax.select_n(p, lax.max(x, y), lax.integer_pow(x, -3) + lax.erf(y))
        return lax.convert_element_type(z > lax.rsqrt(lax.abs(x) + 1.0), np.int32), lax.sign(z)
    check(fn, [("B", 4), ("B", 4), ("B", 4)], [np.float32, np.float32, np.bool_], opset=opset,
          rtol=1e-4, atol=1e-4)
