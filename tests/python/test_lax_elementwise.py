"""lax_elementwise plugin: arithmetic, transcendental, comparison, select_n, convert_element_type
(every dtype pair, XLA's saturation), reduce_precision (bit-exact), stop_gradient, copy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from helpers import check, check_harness, op_types, random_input

SHAPES = [(3, 4), ("B", 4)]
FLOATS = [(np.float32, False), (np.float64, True)]
# f32 on a static shape and f64 on a symbolic batch, where both shapes x dtypes add little.
PAIRED = [(np.float32, False, (3, 4)), (np.float64, True, ("B", 4))]
PAIRED_IDS = ["f32-static", "f64-B"]


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
# Each test converts one jitted function with one output per primitive: one
# conversion and one JAX compile per dtype/shape keeps the suite fast.

def pos(x):
    return lax.abs(x) + 0.1


UNARY = {
    "exp": lax.exp,
    "log": lambda x: lax.log(pos(x)),
    "tanh": lax.tanh,
    "logistic": lax.logistic,
    "sqrt": lambda x: lax.sqrt(pos(x)),
    "rsqrt": lambda x: lax.rsqrt(pos(x)),
    "abs": lax.abs,
    "sign": lax.sign,
    "erf": lax.erf,
    "neg": lax.neg,
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


def all_of(table, *names):
    """A jitted fn returning every primitive of `table` (or `names`) applied to its inputs."""
    names = names or sorted(table)
    return jax.jit(lambda *xs: [table[n](*xs) for n in names])


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_unary_float(dtype, x64, shape):
    check(all_of(UNARY), [shape], [dtype], x64=x64)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_binary_and_compare_float(dtype, x64, shape):
    check(all_of({**BINARY, **COMPARE}), [shape, shape], [dtype, dtype], x64=x64)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_scalar_literal_operand(dtype, x64):
    # `mul a 2.0:f32[]`: a rank-0 literal against a batch of values.
    check(lambda x: x * 2.0 + 1.0, [("B", 4)], [dtype], x64=x64)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_rsqrt_is_reciprocal_of_sqrt(dtype, x64):
    model = check(lax.rsqrt, [("B", 4)], [dtype], x64=x64, make_inputs=positive)
    assert op_types(model) == ["Sqrt", "Reciprocal"]


# --------------------------------------------------------------------- pow --

@pytest.mark.parametrize("dtype,x64,shape", PAIRED, ids=PAIRED_IDS)
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


POWERS = [0, 1, 2, 3, 5, 8, -1, -2, -3]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_integer_pow_is_a_mul_chain(dtype, x64):
    fn = jax.jit(lambda x: [lax.integer_pow(x, y) for y in POWERS])
    model = check(fn, [("B", 4)], [dtype], x64=x64, make_inputs=positive)
    assert "Pow" not in op_types(model)
    # Alone, x**3 is x*x then (x*x)*x, as JAX expands it; x**-1 is 1/x.
    assert op_types(check(lambda x: lax.integer_pow(x, 3), [("B", 4)])) == ["Mul", "Mul"]
    assert op_types(check(lambda x: lax.integer_pow(x, -1), [("B", 4)], make_inputs=positive)) == ["Div"]


def test_integer_pow_zero_of_nan_is_one():
    model = check(lambda x: lax.integer_pow(x, 0), [("B", 3)], make_inputs=with_nans)
    assert "Pow" not in op_types(model)


def test_integer_pow_int32():
    check(jax.jit(lambda x: [lax.integer_pow(x, y) for y in (0, 2, 3, 7)]), [("B", 4)], [np.int32])


# ---------------------------------------------------------------- integers --

INT_TYPES = [(np.int32, False), (np.int64, True)]


@pytest.mark.parametrize("dtype,x64", INT_TYPES, ids=["i32", "i64"])
def test_int_arithmetic_and_compare(dtype, x64):
    names = ["add", "sub", "mul", "max", "min"]
    fn = jax.jit(lambda x, y: [BINARY[n](x, y) for n in names] + [lax.neg(x), lax.abs(x), lax.sign(x)]
                 + [COMPARE[n](x, y) for n in sorted(COMPARE)])
    check(fn, [("B", 4), ("B", 4)], [dtype, dtype], x64=x64)


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


def test_neg_unsigned_wraps():
    model = check(lax.neg, [("B", 4)], [np.uint32])
    assert "Neg" not in op_types(model)


# -------------------------------------------------------------- NaN / bool --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_nan_inf_through_max_min_sign_compare(dtype, x64):
    check(all_of({**BINARY, **COMPARE, "sign": lambda x, y: lax.sign(x)},
                 "max", "min", "sign", "eq", "ne", "lt", "gt"),
          [("B", 6), ("B", 6)], [dtype, dtype], x64=x64, make_inputs=with_nans)


def test_compare_bool():
    check(all_of(COMPARE), [("B", 4), ("B", 4)], [np.bool_, np.bool_])


@pytest.mark.parametrize("name,onnx_op", [("max", "Or"), ("min", "And")])
def test_max_min_bool_are_or_and(name, onnx_op):
    model = check(BINARY[name], [("B", 4), ("B", 4)], [np.bool_, np.bool_])
    assert op_types(model) == [onnx_op]


# ---------------------------------------------------------------- select_n --

@pytest.mark.parametrize("dtype,x64,shape", PAIRED, ids=PAIRED_IDS)
def test_select_n_bool_predicate(dtype, x64, shape):
    model = check(lambda p, a, b: lax.select_n(p, a, b), [shape, shape, shape],
                  [np.bool_, dtype, dtype], x64=x64)
    assert op_types(model) == ["Where"]


def test_select_n_scalar_predicate():
    check(lambda p, a, b: lax.select_n(p, a, b), [(), ("B", 4), ("B", 4)],
          [np.bool_, np.float32, np.float32])


def test_where_with_literal():
    # jnp.where -> a jit around select_n with a literal case.
    check(lambda x: jnp.where(x > 0, x, 0.5), [("B", 4)])


# -------------------------------------------------------- convert_element_type --

CONVERSIONS = [
    (np.float32, np.float64, True),
    (np.int64, np.int32, True),
    (np.bool_, np.float32, False),
    (np.int32, np.bool_, False),
    (np.float64, np.bool_, True),
]


@pytest.mark.parametrize("src,dst,x64", CONVERSIONS,
                         ids=[f"{np.dtype(a).name}->{np.dtype(b).name}" for a, b, _ in CONVERSIONS])
def test_convert_element_type_is_one_cast(src, dst, x64):
    model = check(lambda x: lax.convert_element_type(x, dst), [(3, 4)], [src], x64=x64)
    assert op_types(model) == ["Cast"]


def test_convert_float_to_int_truncates_toward_zero():
    def gen(s, d, rng):
        vals = np.array([-2.7, -1.5, -0.5, -0.2, 0.0, 0.2, 0.5, 1.5, 2.7, 9.99], d)
        return np.resize(vals, s).astype(d)
    check(jax.jit(lambda x: (lax.convert_element_type(x, np.int32), lax.convert_element_type(x, np.int8))),
          [("B", 10)], make_inputs=gen)


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


# -------------------------------------------------------------------- copy --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_copy_is_identity(dtype, x64):
    model = check(lambda x: jnp.array(x, copy=True) + 1.0, [("B", 4)], [dtype], x64=x64)
    assert set(op_types(model)) <= {"Identity", "Add"}  # an identity pass may drop the copy


def test_output_that_is_an_input_goes_through_copy():
    # The core routes a graph output that is a graph input through `copy`.
    model = check(lambda x: (x, lax.stop_gradient(x)), [("B", 4)])
    assert op_types(model) == ["Identity", "Identity"]


@pytest.mark.parametrize("opset", [18, 21, 23])
def test_elementwise_every_opset(opset):
    def fn(x, y, p):
        z = lax.select_n(p, lax.max(x, y), lax.integer_pow(x, -3) + lax.erf(y))
        return (lax.convert_element_type(z > lax.rsqrt(lax.abs(x) + 1.0), np.int32), lax.sign(z),
                lax.convert_element_type(z * 1e9, np.int32), lax.reduce_precision(z, 5, 10),
                lax.reduce_precision(z, 4, 3), lax.convert_element_type(lax.reduce_precision(
                    z.astype(ml_dtypes.bfloat16), 8, 3), np.float32))
    check(jax.jit(fn), [("B", 4), ("B", 4), ("B", 4)], [np.float32, np.float32, np.bool_],
          opset=opset, rtol=1e-4, atol=1e-4)


# ------------------------------------------- convert_element_type: full matrix --

import ml_dtypes  # noqa: E402

BF16 = ml_dtypes.bfloat16
ALL_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
              np.uint64, np.float16, BF16, np.float32, np.float64]
# Float edge values: NaN, +-inf, out of range of every int type (JAX/XLA saturate, NaN -> 0),
# truncation toward zero, negatives into unsigned (-> 0), and the int32/int64 bounds.
FLOAT_EDGES = [np.nan, np.inf, -np.inf, 1e20, -1e20, 3e9, -3e9, 70000.0, -70000.0, 300.0, -300.0,
               200.7, -129.5, 2.5, -2.5, 0.0, -0.0, 0.7, -0.7, 2.0**31, -2.0**31, 2.0**32, 9.3e18,
               -2.0**63, 2.0**63, 1.9e19]
INT_EDGES = [-(2**63), 2**63 - 1, -1, 0, 1, 127, 128, -129, 255, 256, -32769, 65535, 70000,
             2**31 - 1, -(2**31), 2**32 + 5, 2**53 + 1, 2**62 + 2**40 + 1, -5, 42]


def edge_inputs(shape, dtype, rng):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        vals = np.array([True, False], bool)
    elif np.issubdtype(dtype, np.integer):
        vals = np.array([np.int64(v) if v < 2**63 else np.uint64(v) for v in INT_EDGES]
                        ).astype(np.int64).astype(dtype)  # wraps into the dtype, as intended
    else:
        with np.errstate(over="ignore"):
            vals = np.array(FLOAT_EDGES, np.float64).astype(dtype)
    return np.resize(vals, shape).astype(dtype)


def convert_all(src):
    """x -> x converted to every dtype (bfloat16 goes in/out through float32: onnxruntime's
    Python API takes no bfloat16 arrays)."""
    def fn(x):
        if src is BF16:
            x = lax.convert_element_type(x, BF16)
        outs = []
        for dst in ALL_DTYPES:
            y = lax.convert_element_type(x, dst)
            outs.append(lax.convert_element_type(y, np.float32) if dst is BF16 else y)
        return outs
    return fn


@pytest.mark.parametrize("src", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_convert_every_pair(src):
    io = np.float32 if src is BF16 else src
    # jit: JAX computes the expected values in one compile instead of op by op.
    check(jax.jit(convert_all(src)), [(len(FLOAT_EDGES),)], [io], x64=True, make_inputs=edge_inputs)


@pytest.mark.parametrize("src,dst,x64", [(np.float32, np.int32, False), (np.float64, np.uint64, True),
                                         (np.float16, np.int16, False), (np.int32, np.float32, False),
                                         (np.float64, np.bool_, True)],
                         ids=["f32->i32", "f64->u64", "f16->i16", "i32->f32", "f64->bool"])
def test_convert_symbolic_batch(src, dst, x64):
    check(lambda x: lax.convert_element_type(x, dst), [("B", len(FLOAT_EDGES))], [src], x64=x64,
          make_inputs=edge_inputs)


def test_convert_float_to_int_structure():
    # In-range bounds exact in float32 (int16): IsNaN, Where, Clip, Cast. int32's max is
    # not a float32, so values >= 2^31 are patched to it with one more Where.
    model = check(lambda x: lax.convert_element_type(x, np.int16), [("B", 4)])
    assert op_types(model) == ["IsNaN", "Where", "Clip", "Cast"]
    model = check(lambda x: lax.convert_element_type(x, np.int32), [("B", 4)])
    assert op_types(model) == ["IsNaN", "Where", "Clip", "Cast", "GreaterOrEqual", "Where"]


def test_convert_weak_type_param():
    def fn(x):
        # weak_type=True, same dtype: no node.
        return lax.convert_element_type_p.bind(x, new_dtype=np.dtype(np.float32), weak_type=True,
                                               sharding=None) * 2.0
    model = check(fn, [("B", 4)])
    assert op_types(model) == ["Mul"]


# --------------------------------------------------------- reduce_precision --

def precision_inputs(shape, dtype, rng):
    """Random magnitudes over the whole range plus ties, subnormals, NaN and inf."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    big = 300 if dtype == np.float64 else 38
    x = rng.standard_normal(n) * 10.0 ** rng.uniform(-big, big, n)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-11,
                        1 + 3 * 2**-11, 65519.0, 65520.0, 3.4e38, 2**-14 * (1 - 2**-12),
                        2**-14 * (1 - 2**-11), 2**-15, 6e-8, 1e-40, 1.5e-40, 2**-126 * 0.75,
                        1e-310, 239.9, 240.0, 248.0, 57344.0, 61440.0, 1.1754942e-38, -2.5e-45])
    x[:len(special)] = special[:n]
    with np.errstate(over="ignore"):
        return x.astype(dtype).reshape(shape)


PRECISIONS = [(8, 7), (5, 10), (4, 3), (5, 2), (8, 10), (11, 10), (8, 23), (11, 52), (6, 20)]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_reduce_precision_exact(dtype, x64):
    # Bit-exact (tolerance 1e-300) against XLA for every (exponent, mantissa) pair.
    fn = jax.jit(lambda x: [lax.reduce_precision(x, e, m) for e, m in PRECISIONS])
    check(fn, [("B", 64)], [dtype], x64=x64, make_inputs=precision_inputs, rtol=1e-300, atol=1e-300)


@pytest.mark.parametrize("src", [np.float16, BF16], ids=["f16", "bf16"])
def test_reduce_precision_half_types(src):
    def fn(x):
        y = lax.convert_element_type(x, src) if src is BF16 else x
        return [lax.convert_element_type(lax.reduce_precision(y, e, m), np.float32)
                for e, m in [(4, 3), (5, 7), (5, 4), (8, 3), (5, 10), (8, 7)]]
    io = np.float32 if src is BF16 else src
    check(jax.jit(fn), [(64,)], [io], make_inputs=precision_inputs, rtol=1e-300, atol=1e-300)


def test_reduce_precision_bfloat16_is_cast_round_trip():
    model = check(lambda x: lax.reduce_precision(x, 8, 7), [("B", 64)],
                  make_inputs=precision_inputs, rtol=1e-300, atol=1e-300)
    assert op_types(model) == ["Cast", "Cast"]


# ------------------------------------------------------ select_n, more cases --

SELECT_DTYPES = [(np.float32, False), (np.float64, True), (np.int32, False), (np.bool_, False),
                 (np.int16, False), (np.uint64, True), (np.float16, False)]


@pytest.mark.parametrize("dtype,x64", SELECT_DTYPES, ids=lambda v: np.dtype(v).name
                         if not isinstance(v, bool) else str(v))
def test_select_n_int_which(dtype, x64):
    # n = 1, 2, 3, 5 cases from one in-range `which` (min keeps it below n: JAX leaves
    # out-of-range indices undefined). A binary tree of n - 1 Where nodes per select.
    calls = []

    def gen(s, d, rng):  # called once per input, in order: `which` first
        calls.append(None)
        if len(calls) % 6 == 1:
            return rng.integers(0, 5, size=s).astype(np.int32)
        return random_input(s, d, rng)

    def fn(p, *cases):
        return [lax.select_n(lax.min(p, np.int32(n - 1)), *cases[:n]) for n in (1, 2, 3, 5)]
    model = check(jax.jit(fn), [("B", 4)] * 6, [np.int32] + [dtype] * 5, x64=x64, make_inputs=gen)
    assert op_types(model).count("Where") == 0 + 1 + 2 + 4


def test_select_n_five_cases_structure():
    calls = []

    def gen(s, d, rng):
        calls.append(None)
        return rng.integers(0, 5, size=s).astype(np.int32) if len(calls) % 6 == 1 else random_input(s, d, rng)
    model = check(lambda p, *c: lax.select_n(p, *c), [(2, 3)] * 6, [np.int32] + [np.float32] * 5,
                  make_inputs=gen)
    assert sorted(op_types(model)) == ["Less"] * 4 + ["Where"] * 4


def test_select_n_single_case_bool_which():
    model = check(lambda p, x: lax.select_n(p, x) * 2.0, [("B", 4), ("B", 4)], [np.bool_, np.float32])
    assert op_types(model) == ["Mul"]


def test_select_n_bfloat16():
    def fn(p, a, b):
        return lax.select_n(p, a.astype(BF16), b.astype(BF16)).astype(np.float32)
    check(fn, [("B", 4)] * 3, [np.bool_, np.float32, np.float32])


# --------------------------------------------------------- dtype coverage --

MORE_INTS = [(np.int8, False), (np.uint8, False), (np.int16, False), (np.uint16, False),
             (np.uint32, False), (np.uint64, True)]


@pytest.mark.parametrize("dtype,x64", MORE_INTS, ids=lambda v: np.dtype(v).name
                         if not isinstance(v, bool) else str(v))
def test_int_dtypes_arithmetic_and_compare(dtype, x64):
    def fn(x, y):
        d = lax.div(x, lax.max(y, np.array(1, dtype)))
        return (lax.add(x, y), lax.sub(x, y), lax.mul(x, y), d, lax.max(x, y), lax.min(x, y),
                lax.sign(x), lax.abs(x) if np.issubdtype(dtype, np.signedinteger) else x,
                lax.neg(x), lax.eq(x, y), lax.ne(x, y), lax.lt(x, y), lax.ge(x, y),
                lax.integer_pow(x, 3))
    check(jax.jit(fn), [("B", 5), ("B", 5)], [dtype, dtype], x64=x64)


@pytest.mark.parametrize("dtype,x64", [(np.float16, False), (BF16, False)], ids=["f16", "bf16"])
def test_half_float_dtypes(dtype, x64):
    def fn(x, y):
        a, b = x.astype(dtype), y.astype(dtype)
        pa = lax.abs(a) + 0.5
        outs = (a + b, a - b, a * b, a / pa, lax.max(a, b), lax.min(a, b), -a, lax.abs(a),
                lax.sign(a), lax.exp(a), lax.log(pa), lax.tanh(a), lax.logistic(a), lax.sqrt(pa),
                lax.rsqrt(pa), lax.erf(a), lax.pow(pa, b), lax.integer_pow(a, 3),
                lax.integer_pow(a, 0), lax.integer_pow(pa, -2))
        cmps = (a == b, a != b, a < b, a >= b)
        return [o.astype(np.float32) for o in outs] + list(cmps)
    check(jax.jit(fn), [("B", 6), ("B", 6)], rtol=2e-2, atol=2e-2)


def test_abs_and_sign_of_int_min():
    def gen(s, d, rng):
        info = np.iinfo(d)
        return np.resize(np.array([info.min, info.max, -1, 0, 1, -7], d), s)
    check(jax.jit(lambda x: (lax.abs(x), lax.sign(x), lax.neg(x))), [("B", 6)], [np.int32],
          make_inputs=gen)
    check(jax.jit(lambda x: (lax.abs(x), lax.sign(x))), [("B", 6)], [np.int8], make_inputs=gen)


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_integer_div_negative_operands(dtype):
    def gen(s, d, rng):
        vals = [[-7, 7, -7, 7, -1, 1, -128 if d == np.int8 else -32768],
                [2, -2, -2, 2, 3, -3, 3]]
        return np.resize(np.array(vals[0 if gen.first else 1], d), s)
    gen.first = True

    def mk(s, d, rng):
        out = gen(s, d, rng)
        gen.first = not gen.first
        return out
    check(lax.div, [("B", 7), ("B", 7)], [dtype, dtype], make_inputs=mk)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_max_min_nan_either_operand(dtype, x64):
    def mk(s, d, rng):
        mk.i += 1
        a = [np.nan, 1.0, np.nan, -np.inf, np.nan, 2.0]
        b = [1.0, np.nan, np.nan, np.nan, np.inf, 3.0]
        return np.resize(np.array(a if mk.i % 2 else b, d), s)
    mk.i = 0
    check(jax.jit(lambda x, y: (lax.max(x, y), lax.min(x, y), lax.max(y, x), lax.min(y, x))),
          [("B", 6), ("B", 6)], [dtype, dtype], x64=x64, make_inputs=mk)


def test_compare_unsigned_and_bool():
    names = sorted(COMPARE)
    fn = jax.jit(lambda x, y, p, q: [COMPARE[n](x, y) for n in names] + [COMPARE[n](p, q) for n in names])
    check(fn, [("B", 5)] * 4, [np.uint32, np.uint32, np.bool_, np.bool_])


@pytest.mark.parametrize("dst", ["int8", "int16", "int32"])
def test_convert_complex_to_int_catalog(dst):
    # JAX converts the real part (test_complex.py has the edge values).
    check_harness("convert_element_type", f"dtypes_to_dtypes_shape_complex64_100_100_olddtype_complex64_newdtype_{dst}")
