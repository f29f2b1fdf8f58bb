"""lax_cumulative plugin: cumsum / cumprod / cummax / cummin / cumlogsumexp."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from helpers import check, int64_fault_inputs, op_types

FLOATS = [(np.float32, False), (np.float64, True)]
CUM = {
    "cumsum": lax.cumsum,
    "cumprod": lax.cumprod,
    "cummax": lax.cummax,
    "cummin": lax.cummin,
    "cumlogsumexp": lax.cumlogsumexp,
}


def cum(name, axis, reverse):
    return lambda x: CUM[name](x, axis=axis, reverse=reverse)


def cum_all(names, axis, reverse):
    """One model with every primitive in `names` (fewer onnxruntime sessions)."""
    return lambda x: tuple(CUM[n](x, axis=axis, reverse=reverse) for n in names)


def small(shape, dtype, rng):
    """Values near 1 in magnitude so long products stay finite, with some zeros/negatives."""
    x = rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1, 1], size=shape)
    return x.astype(dtype)


# Symbolic along the batch axis (0) and, for axis 0, along the cumulative axis itself.
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("reverse", [False, True], ids=["fwd", "rev"])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_cumulative(axis, reverse, dtype, x64):
    check(cum_all(sorted(CUM), axis, reverse), [("B", 5, 3)], [dtype], x64=x64, make_inputs=small,
          rtol=1e-5 if not x64 else None)


@pytest.mark.parametrize("shape", [(2, 6), (6,)], ids=str)
def test_cumulative_static_opset18(shape):
    check(cum_all(sorted(CUM), 0 if len(shape) == 1 else 1, False), [shape], make_inputs=small,
          opset=18)


INTS = [(np.int32, False), (np.int64, True), (np.int8, False), (np.uint8, False), (np.int16, False),
        (np.uint32, False)]


@pytest.mark.parametrize("reverse", [False, True], ids=["fwd", "rev"])
@pytest.mark.parametrize("dtype,x64", INTS, ids=["i32", "i64", "i8", "u8", "i16", "u32"])
def test_cumulative_int(dtype, x64, reverse):
    check(cum_all(["cumsum", "cumprod", "cummax", "cummin"], 1, reverse), [("B", 6)], [dtype],
          x64=x64)


@pytest.mark.parametrize("dtype,x64", [(np.uint16, False), (np.uint64, True)], ids=["u16", "u64"])
def test_cummax_cummin_full_range_unsigned(dtype, x64):
    # onnxruntime has no uint16/uint64 ReduceMax: widened / top-bit-flipped, order kept.
    def gen(s, d, rng):
        info = np.iinfo(d)
        return rng.integers(info.min, info.max, size=s, dtype=d, endpoint=True)
    check(cum_all(["cummax", "cummin"], 1, False), [("B", 6)], [dtype], x64=x64, make_inputs=gen)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.int64, np.uint64], ids=["i64", "u64"])
def test_cummax_cummin_64bit_exact(dtype, reverse):
    # onnxruntime's int64 Max/Min compare low words as signed when the high words are equal
    # (jaxonnx/max_min.hpp): the scan picks with Where instead; the fault's own rows first.
    rows = np.array([[3, 2**31, 2**31 + 7, 5, 2**32 + 2**31, 2**32 + 1]], dtype)
    check(cum_all(["cummax", "cummin"], 1, reverse), [(1, 6)], [dtype], x64=True, make_inputs=lambda s, d, rng: rows)
    model = check(cum_all(["cummax", "cummin"], 1, reverse), [("B", 6)], [dtype], x64=True,
                  make_inputs=int64_fault_inputs)
    assert not {"Max", "Min"} & set(op_types(model))


@pytest.mark.parametrize("shape", [(2, 5), (2, 8), (2, 1), ("B", 5)], ids=str)
def test_int_cumprod_scan_lengths(shape):
    # Static lengths take ceil(log2 n) doubling steps: check lengths around powers of two.
    check(cum_all(["cumprod"], 1, False), [shape], [np.int32])
    check(cum_all(["cumprod"], 1, True), [shape], [np.int32])


def test_integer_overflow_wraps():
    def gen(s, d, rng):
        return rng.integers(50, 120, size=s).astype(d)
    check(lambda x: (lax.cumsum(x, 1), lax.cumprod(x, 1)), [("B", 6)], [np.int8], make_inputs=gen)
    check(lambda x: lax.cumprod(x, 1), [("B", 8)], [np.int32], make_inputs=gen)


def test_jnp_cumsum_cumprod():
    check(lambda x: (jnp.cumsum(x, axis=-1), jnp.cumprod(x, axis=0), jnp.cumsum(x)), [("B", 4)],
          make_inputs=small)


def test_cumsum_is_one_cumsum():
    assert op_types(check(cum("cumsum", 1, True), [("B", 5)])) == ["CumSum"]
    assert op_types(check(cum("cumsum", 0, False), [("B", 5)], [np.int32])) == ["CumSum"]


def test_cumsum_small_int_casts_around():
    model = check(cum("cumsum", 1, False), [("B", 5)], [np.uint8])
    assert op_types(model) == ["Cast", "CumSum", "Cast"]


@pytest.mark.parametrize("reverse", [False, True], ids=["fwd", "rev"])
def test_symbolic_cumulative_axis_only(reverse):
    # The cumulative axis is the only symbolic dim, and the last.
    check(cum_all(sorted(CUM), 1, reverse), [(3, "B")], make_inputs=small)
    check(cum_all(["cumprod"], 1, reverse), [(3, "B")], [np.int32])


# --------------------------------------------------------------------- NaN --

def with_nans(shape, dtype, rng):
    x = rng.standard_normal(size=shape).astype(dtype)
    flat = x.reshape(-1)
    flat[3::7] = np.nan
    flat[1::5] = np.inf
    flat[2::11] = -np.inf
    x = flat.reshape(shape)
    x[0] = rng.standard_normal(size=shape[1:]).astype(dtype)  # a NaN-free row
    return x


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("reverse", [False, True], ids=["fwd", "rev"])
def test_cumulative_nan_inf(reverse, dtype, x64):
    check(cum_all(sorted(CUM), 1, reverse), [("B", 9)], [dtype], x64=x64, make_inputs=with_nans)


def test_cummax_nan_sticks():
    def gen(s, d, rng):
        return np.array([[1.0, np.nan, 5.0, 0.0], [3.0, 2.0, np.nan, 9.0]], d)[: s[0]]
    check(lambda x: (lax.cummax(x, 1), lax.cummin(x, 1), lax.cummax(x, 1, reverse=True)),
          [(2, 4)], make_inputs=gen)


# ------------------------------------------------------------ cumlogsumexp --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_cumlogsumexp_large_and_infinite(dtype, x64):
    def gen(s, d, rng):
        rows = [[1000.0, 1000.0, 999.0, -1000.0, 0.0],
                [-np.inf, -np.inf, -np.inf, 1.0, -np.inf],
                [-np.inf, np.inf, 1.0, np.inf, -np.inf],
                [-500.0, -1000.0, -1e30, 1e30, 3.0]]
        return np.array(rows, d)
    check(lambda x: (lax.cumlogsumexp(x, 1), lax.cumlogsumexp(x, 1, reverse=True)), [(4, 5)],
          x64=x64, make_inputs=gen)


def test_cumulative_f16():
    check(cum_all(sorted(CUM), 1, False), [("B", 5)], [np.float16], make_inputs=small)


# ------------------------------------------------------------ O(n) memory --

def test_float_scans_are_log_depth_not_pairwise():
    # No n x n construction: no Range mask or Reduce* over a pairwise axis; a
    # static n takes ceil(log2 n) Pad/Slice steps.
    for name in ["cumprod", "cummax", "cummin", "cumlogsumexp"]:
        ops = op_types(check(cum(name, 1, False), [("B", 9)], make_inputs=small))
        assert not any(o.startswith("Reduce") or o == "Range" for o in ops), ops
        assert ops.count("Pad") == 4  # ceil(log2 9) steps


def test_long_axis():
    # n = 5000 would need 25M elements per row pairwise; the scan holds 2n.
    check(cum_all(["cummax", "cumlogsumexp", "cumprod"], 1, True), [(2, 5000)],
          make_inputs=lambda s, d, rng: rng.uniform(0.9999, 1.0001, size=s).astype(d), rtol=1e-4)
