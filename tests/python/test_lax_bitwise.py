"""lax_bitwise plugin: not/and/or/xor, shifts, population_count, clz, bitcast_convert_type."""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxonnx
import onnx
from helpers import check, check_harness, op_types, ort_session, symbolic_specs

# (dtype, x64): 64-bit integers need x64.
INTS = [
    (np.int8, False), (np.int16, False), (np.int32, False), (np.int64, True),
    (np.uint8, False), (np.uint16, False), (np.uint32, False), (np.uint64, True),
]
INT_IDS = [np.dtype(d).name for d, _ in INTS]
BF16 = np.dtype(jnp.bfloat16)
SHAPE = ("B", 32)  # per-dtype tests are symbolic; test_static_shape covers static shapes


def full_range(shape, dtype, rng):
    """Integers over the whole range, with min/max, 0, +-1 and powers of two planted."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype).reshape(-1)
    n = info.bits
    special = [0, 1, info.max, info.min, info.max - 1, info.min + 1]
    special += [(1 << k) for k in range(n - (1 if info.min < 0 else 0))]
    if info.min < 0:
        special += [-1, -2, -(1 << (n - 2))]
    special = np.array([v % (1 << n) for v in special], dtype=np.uint64).astype(dtype)
    rng.shuffle(special)
    k = min(len(special), x.size)
    x[:k] = special[:k]
    return x.reshape(shape)


def shift_inputs():
    """Alternates values (full range) and shift amounts (0, 1, n-1, n, n+3, negatives, huge)."""
    calls = [0]

    def gen(shape, dtype, rng):
        calls[0] += 1
        if calls[0] % 2:
            return full_range(shape, dtype, rng)
        info = np.iinfo(dtype)
        n = info.bits
        amounts = [0, 1, 2, n - 1, n, n + 3, n // 2, info.max]
        if info.min < 0:
            amounts += [-1, -n, info.min]
        amounts += list(range(n))
        wrapped = np.array([a % (1 << n) for a in amounts], dtype=np.uint64)  # two's complement
        return rng.choice(wrapped, size=shape).astype(dtype)

    return gen


# ------------------------------------------------------- logical / bitwise --

def bitwise_all(x, y):
    return x & y, x | y, x ^ y, ~x


@pytest.mark.parametrize("dtype,x64", INTS + [(np.bool_, False)], ids=INT_IDS + ["bool"])
def test_bitwise(dtype, x64):
    check(bitwise_all, [SHAPE, SHAPE], [dtype, dtype], x64=x64, make_inputs=full_range)


def test_bool_ops_are_logical():
    model = check(lambda a, b: (a & b, a | b, ~a, a ^ b), [("B", 4)] * 2, [np.bool_] * 2)
    assert sorted(op_types(model)) == ["And", "Not", "Or", "Xor"]


def test_int_and_is_one_bitwise_and():
    model = check(lambda a, b: a & b, [("B", 4)] * 2, [np.int32] * 2, make_inputs=full_range)
    assert op_types(model) == ["BitwiseAnd"]


def test_bitwise_with_scalar_literal_opset18():
    check(lambda x: (x & 0xF0, x | 3, x ^ -1), [("B", 8)], [np.int32], make_inputs=full_range, opset=18)


# ------------------------------------------------------------------ shifts --

def shifts(x, s):
    return lax.shift_left(x, s), lax.shift_right_logical(x, s), lax.shift_right_arithmetic(x, s)


@pytest.mark.parametrize("dtype,x64", INTS, ids=INT_IDS)
def test_shifts(dtype, x64):
    """Out-of-range and negative amounts: 0 for left/logical, sign fill for arithmetic."""
    check(shifts, [SHAPE, SHAPE], [dtype, dtype], x64=x64, make_inputs=shift_inputs())


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint32])
def test_shifts_opset18(dtype):
    check(shifts, [("B", 32)] * 2, [dtype] * 2, make_inputs=shift_inputs(), opset=18)


def test_shift_by_scalar_literal():
    check(lambda x: (x << 3, x >> 31, lax.shift_right_logical(x, np.int32(7))), [("B", 16)], [np.int32],
          make_inputs=full_range)


def test_shift_right_arithmetic_of_unsigned_shifts_the_sign_bit():
    def gen(shape, dtype, rng):
        return np.resize(np.array([200, 128, 255, 127, 1, 0], dtype), shape)
    check(lambda x: lax.shift_right_arithmetic(x, np.uint8(1)), [("B", 6)], [np.uint8], make_inputs=gen)


# ----------------------------------------------------- popcount / clz --

@pytest.mark.parametrize("dtype,x64", INTS, ids=INT_IDS)
def test_population_count_and_clz(dtype, x64):
    check(lambda x: (lax.population_count(x), lax.clz(x)), [SHAPE], [dtype], x64=x64, make_inputs=full_range)


def test_popcount_clz_opset18():
    check(lambda x: (lax.population_count(x), lax.clz(x)), [("B", 40)], [np.int16], make_inputs=full_range,
          opset=18)


# ---------------------------------------------------------------- bitcast --

def bitcast(to):
    return lambda x: lax.bitcast_convert_type(x, to)


def float_specials(shape, dtype, rng):
    """Random bit patterns over every exponent, plus zeros, subnormals, extremes, inf and (canonical) NaN."""
    dtype = np.dtype(dtype)
    if not (np.issubdtype(dtype, np.floating) or dtype == BF16):
        return full_range(shape, dtype, rng)
    u = np.dtype(f"uint{dtype.itemsize * 8}")
    x = full_range(shape, u, rng).view(dtype).copy().reshape(-1)
    x[np.isnan(x)] = np.nan  # a NaN's sign and payload are not observable in ONNX
    fi = jnp.finfo(dtype)  # bfloat16 too
    sub = fi.smallest_subnormal
    special = [0.0, -0.0, sub, -sub, sub * 3, fi.smallest_normal, -fi.smallest_normal,
               fi.smallest_normal - sub, fi.max, -fi.max, np.inf, -np.inf, np.nan, 1.0, -1.0, 1.5,
               1.0 + float(fi.eps), 2.0 ** -100, 0.1]
    k = min(len(special), x.size)
    x[:k] = np.array(special, dtype)[:k]
    return x.reshape(shape)


SAME_WIDTH = [
    (np.int8, np.uint8, False), (np.uint8, np.int8, False), (np.int16, np.uint16, False),
    (np.uint16, np.int16, False), (np.int32, np.uint32, False), (np.uint32, np.int32, False),
    (np.int64, np.uint64, True), (np.uint64, np.int64, True),
    (np.uint32, np.float32, False), (np.int32, np.float32, False),
    (np.float32, np.uint32, False), (np.float32, np.int32, False),
    (np.uint64, np.float64, True), (np.int64, np.float64, True),
    (np.float64, np.uint64, True), (np.float64, np.int64, True),
    (np.float16, np.uint16, False), (np.uint16, np.float16, False),
    (np.float16, np.int16, False), (np.int16, np.float16, False),
    (jnp.bfloat16, np.uint16, False), (np.uint16, jnp.bfloat16, False),
    (jnp.bfloat16, np.int16, False), (np.int16, jnp.bfloat16, False),
    (np.float16, jnp.bfloat16, False), (jnp.bfloat16, np.float16, False),
]


def check_bitcast(src, dst, shape, x64=False):
    """check() of bitcast src -> dst on float_specials. bfloat16 enters and leaves the model
    as float32 (onnxruntime's Python API has no bfloat16 arrays; the conversions are exact)."""
    def fn(x):
        y = bitcast(dst)(x.astype(src) if np.dtype(src) == BF16 else x)
        return y.astype(np.float32) if np.dtype(dst) == BF16 else y

    io = np.float32 if np.dtype(src) == BF16 else src
    gen = (lambda s, d, r: float_specials(s, src, r).astype(np.float32)) if io is not src else float_specials
    return check(fn, [shape], [io], x64=x64, make_inputs=gen)


@pytest.mark.parametrize("src,dst,x64", SAME_WIDTH,
                         ids=[f"{np.dtype(a).name}-{np.dtype(b).name}" for a, b, _ in SAME_WIDTH])
def test_bitcast_same_width(src, dst, x64):
    check_bitcast(src, dst, SHAPE, x64)


# (src, dst, x64, input shape): narrow -> wide takes a trailing axis of the ratio.
WIDTH_CHANGE = [
    (np.float32, np.uint8, False, ("B", 8)),
    (np.uint8, np.float32, False, ("B", 8, 4)),
    (np.uint16, np.uint8, False, ("B", 8)),
    (np.uint8, np.int16, False, (3, 2)),
    (np.uint32, np.uint16, False, ("B", 8)),
    (np.int16, np.uint32, False, ("B", 8, 2)),
    (np.int64, np.int8, True, ("B", 8)),
    (np.int8, np.int64, True, ("B", 8, 8)),
    (np.float64, np.uint32, True, ("B", 8)),
    (np.uint32, np.float64, True, ("B", 8, 2)),
    (np.float64, np.float32, True, ("B", 8)),
    (np.float32, np.float64, True, (4, 2)),
    (np.float32, np.float16, False, ("B", 8)),
    (np.float16, np.float32, False, ("B", 8, 2)),
    (jnp.bfloat16, np.uint8, False, ("B", 8)),
    (np.uint8, jnp.bfloat16, False, ("B", 8, 2)),
    (np.float64, jnp.bfloat16, True, (3, 4)),
    (jnp.bfloat16, np.float64, True, ("B", 4)),
]


@pytest.mark.parametrize("src,dst,x64,shape", WIDTH_CHANGE,
                         ids=[f"{np.dtype(a).name}-{np.dtype(b).name}" for a, b, _, _ in WIDTH_CHANGE])
def test_bitcast_width_change(src, dst, x64, shape):
    check_bitcast(src, dst, shape, x64)


def every_exponent(dtype):
    """2^k, 2^k (1 + 2^-(mbits)), 2^k * 1.75 and their negatives for every k, subnormals included."""
    fi = jnp.finfo(dtype)  # bfloat16 too
    ks = np.arange(fi.minexp - fi.nmant, fi.maxexp)
    p = np.ldexp(np.ones(ks.shape), ks)  # float64 holds every power of two here
    x = np.concatenate([p, p + np.ldexp(p, -fi.nmant), p * 1.75])
    return np.concatenate([x, -x]).astype(dtype)


@pytest.mark.parametrize("fdtype,udtype,x64", [(np.float32, np.uint32, False), (np.float64, np.int64, True),
                                               (np.float16, np.uint16, False), (jnp.bfloat16, np.int16, False)],
                         ids=["f32", "f64", "f16", "bf16"])
def test_bitcast_every_exponent(fdtype, udtype, x64):
    """Bit for bit both ways (the model's float output compared by its bits: -0.0 included)."""
    x = every_exponent(fdtype)
    x = np.concatenate([x, np.array([0.0, -0.0, np.inf, -np.inf], fdtype)])
    u = x.view(udtype)
    io = np.float32 if np.dtype(fdtype) == BF16 else fdtype
    with (jax.enable_x64(True) if x64 else contextlib.nullcontext()):
        encode = jaxonnx.to_onnx(lambda v: bitcast(udtype)(v.astype(fdtype)), [x.astype(io)],
                                 enable_double_precision=x64)
        decode = jaxonnx.to_onnx(lambda b: bitcast(fdtype)(b).astype(io), [u], enable_double_precision=x64)
    for m in (encode, decode):
        onnx.checker.check_model(m, full_check=True)
    got = ort_session(encode).run(None, {encode.graph.input[0].name: x.astype(io)})[0]
    np.testing.assert_array_equal(got, u)
    got = ort_session(decode).run(None, {decode.graph.input[0].name: u})[0]
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), x.astype(io).view(f"u{got.itemsize}"))


def test_bitcast_opset18():
    check(lambda x: (bitcast(jnp.uint32)(x), bitcast(jnp.uint8)(x)), [("B", 32)], [np.float32],
          make_inputs=float_specials, opset=18)
    check(bitcast(jnp.float32), [("B", 32)], [np.uint32], make_inputs=full_range, opset=18)


def test_bitcast_round_trip_is_exact():
    def fn(x):
        return bitcast(jnp.float32)(bitcast(jnp.uint32)(x)) == x

    check(fn, [("B", 64)], [np.float32], make_inputs=float_specials)


def test_uniform_bits_to_float():
    """jax.random.uniform's core: mantissa bits | 0x3F800000, bitcast to float32, minus 1."""
    def fn(bits):
        return lax.bitcast_convert_type(lax.shift_right_logical(bits, np.uint32(9)) | np.uint32(0x3F800000),
                                        jnp.float32) - 1.0

    check(fn, [("B", 64)], [np.uint32], make_inputs=full_range, rtol=0, atol=0)


def test_bitcast_same_dtype_emits_nothing():
    model = check(lambda x: bitcast(jnp.int32)(x) + 1, [("B", 4)], [np.int32])
    assert op_types(model) == ["Add"]


@pytest.mark.parametrize("fdtype", [np.float16, jnp.bfloat16], ids=["f16", "bf16"])
def test_bitcast_half_every_pattern_is_exact(fdtype):
    """All 65536 bit patterns both ways, compared bit for bit: decoding gives
    the float of those bits (a NaN pattern: some NaN), encoding gives the bits
    back (a NaN: the canonical quiet NaN, its sign and payload being
    unobservable in ONNX)."""
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    want = bits.view(fdtype)
    nan = np.isnan(want)
    # bfloat16 leaves and enters as float32 (exact; onnxruntime's Python API has no bfloat16).
    io = np.float32 if np.dtype(fdtype) == BF16 else fdtype
    decode = jaxonnx.to_onnx(lambda b: bitcast(fdtype)(b).astype(io), symbolic_specs([("N",)], [np.uint16]))
    encode = jaxonnx.to_onnx(lambda v: bitcast(np.uint16)(v.astype(fdtype)), symbolic_specs([("N",)], [io]))
    for m in (decode, encode):
        onnx.checker.check_model(m, full_check=True)
    got = ort_session(decode).run(None, {decode.graph.input[0].name: bits})[0]
    assert got.dtype == np.dtype(io)
    w = want.astype(io).view(f"u{np.dtype(io).itemsize}")
    np.testing.assert_array_equal(got.view(w.dtype)[~nan], w[~nan])
    assert np.isnan(got[nan]).all()
    got = ort_session(encode).run(None, {encode.graph.input[0].name: want.astype(io)})[0]
    np.testing.assert_array_equal(got[~nan], bits[~nan])
    canonical = np.array(np.nan, fdtype).view(np.uint16)
    assert (got[nan] == canonical).all()


@pytest.mark.parametrize("name", [
    "dtypes_to_new_dtypes_shape_float16_2_3_newdtype_uint16",
    "dtypes_to_new_dtypes_shape_uint16_2_3_newdtype_float16",
    "dtypes_to_new_dtypes_shape_int16_2_3_newdtype_float16",
])
def test_bitcast_half_catalog(name):
    # float16 only: check_harness feeds onnxruntime's Python API, which has no bfloat16
    # arrays (the bfloat16 cases above go through float32).
    check_harness("bitcast_convert_type", name)


@pytest.mark.parametrize("fn,dtype", [
    (bitwise_all, np.int32), (shifts, np.int32), (lambda x, y: (lax.population_count(x), lax.clz(y)), np.int32),
    (lambda x, y: (bitcast(jnp.uint32)(x), bitcast(jnp.uint8)(y)), np.float32),
], ids=["bitwise", "shifts", "popcount_clz", "bitcast"])
def test_static_shape(fn, dtype):
    gen = shift_inputs() if fn is shifts else float_specials
    check(fn, [(3, 32), (3, 32)], [dtype, dtype], make_inputs=gen)
