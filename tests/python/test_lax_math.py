"""lax_math plugin: transcendental, rounding and float binary math primitives."""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from jax import lax

import jaxonnx
import jaxonnx._core as core
from jaxonnx import _plugins

from helpers import check, check_harness, op_types, symbolic_specs

FLOATS = [(np.float32, False), (np.float64, True)]
FLOAT_IDS = ["f32", "f64"]
INTS = [(np.int32, False), (np.int64, True)]
NAN, INF = np.nan, np.inf


def _declared_ops():
    reg = core.Registry([str(_plugins.BUNDLED_PLUGINS)])
    return {p["name"]: set(p["onnx_ops"]) for plugin in reg.plugins if plugin["name"] == "lax_math"
            for p in plugin["primitives"]}


DECLARED = _declared_ops()


def assert_declared(model, prim):
    """Every op in the model is one the primitive declares in .emits()."""
    assert set(op_types(model)) <= DECLARED[prim], (prim, set(op_types(model)) - DECLARED[prim])


# ------------------------------------------------------------ input domains --

def _uniform(lo, hi):
    return lambda s, d, rng: rng.uniform(lo, hi, size=s).astype(d)


def _gamma_inputs(s, d, rng):
    x = rng.uniform(-6, 8, size=s)
    x = np.where(np.abs(x - np.round(x)) < 0.05, x + 0.3, x)  # away from poles
    return x.astype(d)


DOMAIN = {
    "any": lambda s, d, rng: (rng.standard_normal(size=s) * 3).astype(d),
    "trig": _uniform(-10, 10),
    "unit": _uniform(-0.99, 0.99),
    "ge1": lambda s, d, rng: (1 + rng.exponential(3, size=s)).astype(d),
    "gt-1": lambda s, d, rng: (-1 + rng.exponential(2, size=s) + 1e-3).astype(d),
    "gamma": _gamma_inputs,
    "small": lambda s, d, rng: (rng.standard_normal(size=s) * 1e-6).astype(d),
}

# name: (fn, domain, edge values)
COMMON = [0.0, -0.0, NAN, INF, -INF]
UNARY = {
    "sin": (lax.sin, "trig", COMMON[:3] + [1e3, -1e3, 1e-30]),
    "cos": (lax.cos, "trig", COMMON[:3] + [1e3, -1e3, 1e-30]),
    "tan": (lax.tan, "trig", COMMON[:3] + [1.57, -1.5707, 1e-30, 100.0]),
    "asin": (lax.asin, "unit", COMMON + [1.0, -1.0, 1.5, -1.5, 1e-30, 0.9999999, -0.5]),
    "acos": (lax.acos, "unit", COMMON + [1.0, -1.0, 1.5, -1.5, 1e-30, 0.9999999, -0.9999999]),
    "atan": (lax.atan, "any", COMMON + [1.0, -1.0, 1e30, -1e30, 1e-30, 0.66, 2.4142137, 0.4]),
    "sinh": (lax.sinh, "any", COMMON + [1e-30, -1e-7, 0.999, 1.0, 88.0, -88.0, 89.5, 1000.0]),
    "cosh": (lax.cosh, "any", COMMON + [1e-30, 88.0, -88.0, 89.0, 1000.0, -1000.0]),
    "asinh": (lax.asinh, "any", COMMON + [1e-30, -1e-7, 1e30, -1e30, 3.0e8, 1.0]),
    "acosh": (lax.acosh, "ge1", COMMON + [1.0, 1.0000001, 0.5, -1.0, -2.0, 1e30, 3.0e8]),
    "atanh": (lax.atanh, "unit", COMMON + [1.0, -1.0, 1.5, -2.0, 1e-30, -1e-7, 0.9999999]),
    "floor": (lax.floor, "any", COMMON + [-0.5, 0.5, -1.0, 1e30, -2.5, 16777217.0]),
    "ceil": (lax.ceil, "any", COMMON + [-0.5, 0.5, -1.0, 1e30, -2.5, 16777217.0]),
    "is_finite": (lax.is_finite, "any", COMMON + [1e30, -3.4e38, 1e-40]),
    "exp2": (lax.exp2, "any", COMMON + [1e-8, -1.0, 0.5, 10.0, 127.5, 128.0, -126.0, -1100.0]),
    "expm1": (lax.expm1, "any", COMMON + [1e-30, -1e-30, 1e-7, -1e-7, 1e-4, 0.49, 0.51, -0.51,
                                          80.0, 88.7, 89.0, 800.0, -120.0]),
    "log1p": (lax.log1p, "gt-1", COMMON + [1e-30, -1e-30, 1e-7, -1e-7, 1e-4, -0.5, -1.0, -2.0,
                                           1e30, 3.0]),
    "cbrt": (lax.cbrt, "any", COMMON + [-8.0, 27.0, -1e-30, 1e30, -1e-3, 2.0]),
    "erfc": (lax.erfc, "any", COMMON + [0.5, -0.5, 1.0, -1.0, 1.5, 2.5, 5.0, 8.5, 9.5, 26.0, 30.0,
                                        -5.0, 1e-30]),
    "erf_inv": (lax.erf_inv, "unit", COMMON + [1.0, -1.0, 1.5, -1.5, 0.99999, -0.999999, 1e-30,
                                               0.5, 0.9, 0.995]),
    "lgamma": (lax.lgamma, "gamma", COMMON + [1.0, 2.0, 0.5, -0.5, -1.0, -2.0, -2.5, 1e-30, 3.5,
                                              1e10, 100.5, -100.5]),
    "digamma": (lax.digamma, "gamma", COMMON + [1.0, 2.0, 0.5, -0.5, -1.0, -2.0, -2.5, 1e-3,
                                                1.4616321, 1e10, 100.5, -100.5]),
    "square": (lax.square, "any", COMMON + [1e20, -1e-30, 3.0]),
    "round_away": (lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO), "any", []),
    "round_even": (lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), "any", []),
}
PRIM = {"round_away": "round", "round_even": "round"}


def convert(fn, specs, x64=False, opset=23):
    """A validated model of fn for these specs ("B" strings symbolic) and its session."""
    with (jax.enable_x64(True) if x64 else contextlib.nullcontext()):
        shapes, dtypes = zip(*specs)
        model = jaxonnx.to_onnx(fn, symbolic_specs(shapes, dtypes), enable_double_precision=x64,
                                opset=opset)
    onnx.checker.check_model(model, full_check=True)
    return model, ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def run(fn, args, x64=False, opset=23):
    """Converts fn for these concrete args and runs it in onnxruntime: (got, JAX's)."""
    _, sess = convert(fn, [(a.shape, a.dtype) for a in args], x64, opset)
    return evaluate(fn, sess, args, x64)


def evaluate(fn, sess, args, x64=False):
    with (jax.enable_x64(True) if x64 else contextlib.nullcontext()):
        want = [np.asarray(w) for w in jax.tree_util.tree_leaves(fn(*args))]
    got = sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), args)})
    return got, want


def assert_same(got, want, rtol, atol):
    """Values within tolerance, NaN where JAX has NaN, and the sign of every zero."""
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype, x64):
    """One model with a symbolic batch, run on in-domain random values (batch 1
    and 40) and on the edge values (NaN, infinities, signed zeros, extremes)."""
    fn, domain, edges = UNARY[name]
    model, sess = convert(fn, [(("B",), dtype)], x64)
    assert_declared(model, PRIM.get(name, name))
    rng = np.random.default_rng(0)
    tol = 1e-9 if x64 else 1e-5
    inputs = [DOMAIN[domain]((n,), dtype, rng) for n in (1, 40)] + [np.array(edges or [0.5], dtype)]
    for x in inputs:
        [got], [want] = evaluate(fn, sess, [x], x64)
        assert_same(got, want, tol, tol)


# float64: the primitives that are built from other ops at float64.
@pytest.mark.parametrize("dtype,x64,names", [
    (np.float32, False, sorted(UNARY)),
    (np.float64, True, ["tan", "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh",
                        "expm1", "log1p", "erfc", "erf_inv", "lgamma", "digamma", "round_away"])],
    ids=FLOAT_IDS)
def test_unary_static_shape(dtype, x64, names):
    fns = [UNARY[n][0] for n in names]
    check(lambda x: [f(x) for f in fns], [(2, 3)], [dtype], x64=x64, make_inputs=DOMAIN["unit"])


def test_expm1_log1p_are_accurate_near_zero():
    # exp(x) - 1 and log(1 + x) would lose every digit here.
    x = np.array([1e-10, -1e-10, 3e-8, -3e-8, 1e-5, -1e-5], np.float32)
    for fn in (lax.expm1, lax.log1p):
        [got], [want] = run(fn, [x])
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


def test_float16_computes_in_float32():
    model = check(lax.lgamma, [("B", 4)], [np.float16], make_inputs=DOMAIN["gamma"], rtol=1e-2)
    assert op_types(model)[0] == "Cast"
    check(lax.tan, [("B", 4)], [np.float16])


@pytest.mark.parametrize("opset", [18, 23])
def test_opset_18(opset):
    check(lambda x: (lax.erf_inv(x), lax.atan2(x, x + 1), lax.round(x), lax.rem(x, 0.7)),
          [("B", 3)], make_inputs=DOMAIN["unit"], opset=opset)


def test_float64_builds_ops_onnxruntime_lacks():
    # onnxruntime has no float64 Tan/Atan/Sinh/...: no such node at float64.
    for fn, op in [(lax.tan, "Tan"), (lax.atan, "Atan"), (lax.asinh, "Asinh"), (lax.cosh, "Cosh")]:
        model = check(fn, [(4,)], x64=True)
        assert op not in op_types(model)
        assert op_types(check(fn, [(4,)])) == [op]


# ------------------------------------------------------------------- round --

HALVES = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.4, 0.49999997, -0.49999997, 4503599627370497.0,
          8388609.0, 8388608.5, 0.49999999999999994, -2.5000000000000004, 1e30, -1e30, 0.0, -0.0, NAN, INF, -INF, 2.4999998, 3.5, -3.5]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("method", [lax.RoundingMethod.AWAY_FROM_ZERO,
                                    lax.RoundingMethod.TO_NEAREST_EVEN], ids=["away", "even"])
def test_round_halves(method, dtype, x64):
    x = np.array(HALVES, dtype)
    [got], [want] = run(lambda v: lax.round(v, method), [x], x64)
    assert_same(got, want, 0, 0)


def test_round_even_is_one_node_and_jnp_round():
    model = check(lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), [("B", 3)])
    assert op_types(model) == ["Round"]
    check(jnp.round, [("B", 3)], make_inputs=lambda s, d, rng: (rng.integers(-8, 8, s) / 2).astype(d))


# --------------------------------------------------------------------- rem --

REM_X = [5, -5, 5, -5, 7, -7, 0, 1, 6, -6]
REM_Y = [3, 3, -3, -3, 0, 0, 3, -1, 2, -4]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", [(7,), ("B", 5)], ids=str)
def test_rem_float(shape, dtype, x64):
    check(lax.rem, [shape, shape], [dtype, dtype], x64=x64)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_rem_float_edges(dtype, x64):
    x = np.array([5.0, -5.0, 5.0, -5.0, 1.0, INF, 1.0, -0.0, 0.0, NAN, 1e30, 7.5, -1.0, 1e-30], dtype)
    y = np.array([3.0, 3.0, -3.0, -3.0, 0.0, 2.0, INF, 1.0, -1.0, 1.0, 3.3, NAN, -INF, 3.0], dtype)
    [got], [want] = run(lax.rem, [x, y], x64)
    assert_same(got, want, 1e-6, 0)


@pytest.mark.parametrize("dtype,x64", INTS + [(np.int8, False), (np.uint8, False), (np.uint32, False),
                                               (np.int16, False), (np.uint16, False), (np.uint64, True)],
                         ids=["i32", "i64", "i8", "u8", "u32", "i16", "u16", "u64"])
def test_rem_int_sign_of_dividend_and_zero_divisor(dtype, x64):
    info = np.iinfo(dtype)
    if info.min < 0:
        xs, ys = REM_X + [info.min, info.min, info.max, info.min], REM_Y + [-1, 0, info.min, info.min]
    else:
        xs, ys = [5, 7, 0, info.max, 9, 1], [3, 0, 0, 7, info.max, 1]
    x, y = np.array(xs, dtype), np.array(ys, dtype)
    [got], [want] = run(lax.rem, [x, y], x64)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype,x64", INTS, ids=["i32", "i64"])
def test_rem_int_symbolic_and_literal(dtype, x64):
    check(lambda x: lax.rem(x, dtype(3)), [("B", 4)], [dtype], x64=x64)
    model = check(lax.rem, [("B", 4), ("B", 4)], [dtype, dtype], x64=x64)
    assert_declared(model, "rem")


def test_jnp_fmod():
    check(jnp.fmod, [("B", 3), ("B", 3)])


# ------------------------------------------------------------------- clamp --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", [(5,), ("B", 4)], ids=str)
def test_clamp_scalar_bounds(shape, dtype, x64):
    model = check(lambda x: lax.clamp(dtype(-0.5), x, dtype(0.75)), [shape], [dtype], x64=x64)
    assert op_types(model) == ["Max", "Min"]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_clamp_array_bounds_and_nan(dtype, x64):
    lo = np.array([NAN, 0, 0, NAN, 0, 2, -INF, 0], dtype)
    x = np.array([0.5, 0.5, NAN, 0.5, 0.5, 0.5, 3.0, 5.0], dtype)
    hi = np.array([1, NAN, 1, 1, 1, 1, INF, 1], dtype)
    [got], [want] = run(lax.clamp, [lo, x, hi], x64)
    assert_same(got, want, 0, 0)
    check(lax.clamp, [("B", 3)] * 3, [dtype] * 3, x64=x64)


@pytest.mark.parametrize("dtype,x64", INTS + [(np.int16, False), (np.uint8, False), (np.uint16, False)],
                         ids=["i32", "i64", "i16", "u8", "u16"])
def test_clamp_int(dtype, x64):
    model = check(lambda x: lax.clamp(dtype(3), x, dtype(12)), [("B", 6)], [dtype], x64=x64)
    assert_declared(model, "clamp")
    check(lax.clamp, [("B", 6)] * 3, [dtype] * 3, x64=x64)


def test_jnp_clip():
    check(lambda x: jnp.clip(x, -1.0, 1.0), [("B", 4)])


# ------------------------------------------------------------------ square --

@pytest.mark.parametrize("dtype,x64", FLOATS + INTS, ids=FLOAT_IDS + ["i32", "i64"])
def test_square_is_mul(dtype, x64):
    model = check(lax.square, [("B", 3)], [dtype], x64=x64)
    assert op_types(model) == ["Mul"]


# ------------------------------------------------------------------- atan2 --

ATAN2_PAIRS = [(0.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (-0.0, -0.0), (1.0, 0.0), (1.0, -0.0),
               (-1.0, 0.0), (-1.0, -0.0), (0.0, 1.0), (-0.0, 1.0), (0.0, -1.0), (-0.0, -1.0),
               (INF, INF), (-INF, INF), (INF, -INF), (-INF, -INF), (1.0, INF), (-1.0, INF),
               (1.0, -INF), (-1.0, -INF), (INF, 1.0), (-INF, -1.0), (NAN, 1.0), (1.0, NAN),
               (1.0, 1.0), (-1.0, -1.0), (1.0, -1.0), (1e-30, -1e30), (3.0, 4.0), (-4.0, 3.0),
               (1e30, 1e-30), (2.0, -7.0)]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_atan2_quadrants_zeros_and_infinities(dtype, x64):
    y, x = (np.array(v, dtype) for v in zip(*ATAN2_PAIRS))
    [got], [want] = run(lax.atan2, [y, x], x64)
    assert_same(got, want, 1e-9 if x64 else 1e-6, 0)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", [(6,), ("B", 5)], ids=str)
def test_atan2(shape, dtype, x64):
    model = check(lax.atan2, [shape, shape], [dtype, dtype], x64=x64)
    assert_declared(model, "atan2")
    check(lambda y: jnp.arctan2(y, 2.0), [shape], [dtype], x64=x64)


# --------------------------------------------------------------- nextafter --

def _nextafter_cases(dtype):
    f = np.finfo(dtype)
    special = np.array([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 3.0, f.max, -f.max, f.tiny, -f.tiny,
                        f.smallest_subnormal, -f.smallest_subnormal, 2 * f.tiny, f.tiny * 1.5,
                        f.tiny * 4, f.tiny - f.smallest_subnormal, INF, -INF, NAN, 1e-30, 1e30,
                        2.0 ** -100, 2.0 ** -101, 1.5 * 2.0 ** -100], dtype)
    rng = np.random.default_rng(0)
    itype = np.uint32 if dtype == np.float32 else np.uint64
    bits = rng.integers(0, np.iinfo(itype).max, size=400, dtype=itype).view(dtype)
    pow2 = np.ldexp(np.ones(40, dtype), rng.integers(f.minexp - f.nmant, f.maxexp, 40)).astype(dtype)
    xs = np.concatenate([special, bits, pow2, -pow2])
    targets = np.array([INF, -INF, 0.0, -0.0, NAN, 1.0], dtype)
    x = np.repeat(xs, len(targets))
    y = np.tile(targets, len(xs))
    y = np.concatenate([y, xs])  # x == y
    x = np.concatenate([x, xs])
    return x, y


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_nextafter_is_bit_exact(dtype, x64):
    """Bit-identical to IEEE nextafter (numpy) everywhere, and to JAX wherever no
    subnormal is involved: XLA on CPU treats subnormal operands and results as
    zero (e.g. nextafter(tiny, 0) is 0 in JAX), onnxruntime does not."""
    x, y = _nextafter_cases(dtype)
    with np.errstate(all="ignore"):
        [got], [want] = run(lax.nextafter, [x, y], x64)
        ieee = np.nextafter(x, y)
    bits = f"u{got.itemsize}"
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ieee))
    ok = ~np.isnan(ieee)
    np.testing.assert_array_equal(got[ok].view(bits), ieee[ok].view(bits))
    tiny = np.finfo(dtype).tiny
    normal = ok & ~np.any([(v != 0) & (np.abs(v) < tiny) for v in (x, y, ieee)], axis=0)
    np.testing.assert_array_equal(got[normal].view(bits), want[normal].view(bits))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_nextafter_symbolic(dtype, x64):
    model = check(lax.nextafter, [("B", 3), ("B", 3)], [dtype, dtype], x64=x64)
    assert_declared(model, "nextafter")
    check(lambda x: jnp.nextafter(x, 0.0), [("B", 3)], [dtype], x64=x64)


def _half_nextafter_cases(dtype):
    """Every finite, infinite and NaN value of the 16-bit float against +-inf, +-0, NaN, 1 and itself."""
    xs = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)
    with np.errstate(invalid="ignore"):
        xs = np.concatenate([xs[~np.isnan(xs)], np.array([np.nan], dtype)])
    targets = np.array([INF, -INF, 0.0, -0.0, NAN, 1.0], dtype)
    x = np.concatenate([np.repeat(xs, len(targets)), xs])
    y = np.concatenate([np.tile(targets, len(xs)), xs])
    return x, y


def _ieee_nextafter_16(x, y, dtype):
    """IEEE nextafter of 16-bit floats on their bits (numpy has none for bfloat16)."""
    bits = x.view(np.uint16).astype(np.int32)
    up = (y > x) == (x > 0)  # away from zero when moving outwards
    stepped = np.where(up, bits + 1, bits - 1).astype(np.uint16).view(dtype)
    tiny = np.array(1, np.uint16).view(dtype)
    from_zero = np.where(y > x, tiny, -tiny)
    r = np.where(x == 0, from_zero, stepped)
    r = np.where(x == y, y, r)
    return np.where(np.isnan(x) | np.isnan(y), np.array(np.nan, dtype), r).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16], ids=["f16", "bf16"])
def test_nextafter_half_is_bit_exact(dtype):
    """float16 / bfloat16 (in float32, rounded onto the neighbour by a Cast):
    bit-identical to IEEE nextafter over every value of the type against +-inf,
    +-0, NaN, 1 and itself, and to JAX wherever JAX keeps the subnormals: all of
    float16's, none of bfloat16's (XLA on CPU computes it in float32, where
    bfloat16's subnormals are subnormal and flushed to zero). The model takes
    and gives float32 (onnxruntime's Python API has no bfloat16 arrays); the
    conversions are exact."""
    x, y = _half_nextafter_cases(dtype)

    def fn(a, b):
        return lax.nextafter(a.astype(dtype), b.astype(dtype)).astype(np.float32)

    [got], [want] = run(jax.jit(fn), [x.astype(np.float32), y.astype(np.float32)])
    ieee = _ieee_nextafter_16(x, y, dtype).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ieee))
    ok = ~np.isnan(ieee)
    np.testing.assert_array_equal(got[ok].view(np.uint32), ieee[ok].view(np.uint32))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    if dtype == np.float16:
        np.testing.assert_array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))
    else:
        tiny = float(jnp.finfo(dtype).tiny)
        normal = ok & ~np.any([(v != 0) & (np.abs(v.astype(np.float32)) < tiny) for v in (x, y, ieee)], axis=0)
        np.testing.assert_array_equal(got[normal].view(np.uint32), want[normal].view(np.uint32))


def test_nextafter_half_catalog():
    # float16 (onnxruntime's Python API has no bfloat16 arrays: bfloat16 is covered above).
    check_harness("nextafter", "dtypes_lhs_float16_20_20_rhs_float16_20_20_")


def test_nextafter_float16_symbolic():
    model = check(lax.nextafter, [("B", 3), ("B", 3)], [np.float16, np.float16])
    assert_declared(model, "nextafter")


# ---------------------------------------------------------------- complex --

# real / imag / conj / complex on complex operands: tests/python/test_complex.py.


def test_jnp_real_conj_of_real_input_need_no_primitive():
    check(lambda x: (jnp.real(x) + jnp.conj(x), jnp.imag(x)), [("B", 3)])


# --------------------------------------------------------------------- erf --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_erf_edge_values(dtype, x64):
    # Around the float64 approximation's range switches (|x| = 1, 8, underflow), and NaN/inf.
    vals = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-300, 0.5, -0.999, 1.0, -1.0, 1.001, 3.0, -5.0,
            7.99, 8.0, 8.5, -12.0, 26.0, 27.5, 40.0]

    def gen(s, d, rng):
        return np.resize(np.array(vals, d), s).astype(d)
    check(lax.erf, [("B", len(vals))], [dtype], x64=x64, make_inputs=gen)
