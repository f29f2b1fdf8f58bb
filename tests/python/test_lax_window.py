"""lax_window plugin: reduce_window_sum / reduce_window_max / reduce_window_min and the
generic reduce_window (monoid bodies), plus flax pooling end to end."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxonnx
import onnx
from helpers import check, check_harness, int64_fault_inputs, op_types
from jaxonnx.testing import Variant, expect_graph
from jaxonnx.testing import check as check_variants

FLOATS = [(np.float32, False), (np.float64, True)]
PRIMS = {
    "sum": lax.reduce_window_sum_p,
    "max": lax.reduce_window_max_p,
    "min": lax.reduce_window_min_p,
}

# (window, strides, padding, window_dilation) over NHWC, rank 4.
WINDOWS = [
    ((1, 2, 2, 1), (1, 2, 2, 1), ((0, 0),) * 4, (1, 1, 1, 1)),
    ((1, 3, 3, 1), (1, 1, 1, 1), ((0, 0), (1, 1), (1, 1), (0, 0)), (1, 1, 1, 1)),
    ((1, 3, 2, 2), (1, 2, 1, 1), ((0, 0), (2, 1), (0, 3), (1, 0)), (1, 1, 2, 1)),  # channel window
    ((2, 2, 1, 1), (1, 3, 1, 1), ((1, 0), (0, 0), (-1, 1), (0, 0)), (1, 2, 1, 1)),  # batch window
]


def bind(name, window, strides, padding, dilation):
    return lambda x: PRIMS[name].bind(
        x, window_dimensions=window, window_strides=strides, padding=padding,
        base_dilation=(1,) * len(window), window_dilation=dilation)


def all_windows(*names):
    # Every window of every primitive in one model (fewer onnxruntime sessions),
    # jitted so the JAX reference is one XLA compile rather than one per op.
    return jax.jit(lambda x: tuple(bind(n, *w)(x) for n in names for w in WINDOWS))


def with_specials(shape, dtype, rng):
    x = rng.standard_normal(size=shape).astype(dtype)
    flat = x.reshape(-1)
    flat[3::13] = np.nan
    flat[5::7] = -np.inf
    flat[6::11] = np.inf
    return flat.reshape(shape)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("shape", [(2, 6, 7, 3), ("B", 6, 7, 3)], ids=str)
def test_reduce_window(dtype, x64, shape):
    model = check(all_windows("sum", "max", "min"), [shape], [dtype], x64=x64)
    assert {"Pad", "Slice", "Add", "Max", "Min"} <= set(op_types(model))


def test_symbolic_spatial_dims():
    # Window over symbolic extents: slice ends count from the end, so no extent is needed.
    check(all_windows("sum", "max"), [("B", "H", 6, 3)])


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_same_padding_over_symbolic_extents(dtype, x64):
    # "SAME" over a variable-size image: JAX's padding is an expression of H and W
    # (floordiv(...)), computed at run time; sizes 1, odd and even.
    def fn(x):
        outs = []
        for window, stride in (((3, 3), (2, 2)), ((2, 2), (1, 1)), ((3, 2), (1, 2))):
            dims, strides = (1, *window, 1), (1, *stride, 1)
            outs.append(lax.reduce_window(x, -jnp.inf, lax.max, dims, strides, "SAME"))
            outs.append(lax.reduce_window(x, 0.0, lax.add, dims, strides, "SAME"))
        return outs

    model = check(jax.jit(fn), [("B", "H", "W", 3)], [dtype], x64=x64,
                  batches=[dict(B=2, H=7, W=6), dict(B=1, H=1, W=1), dict(B=3, H=4, W=9)])
    assert "Pad" in op_types(model)


def test_nan_and_inf_propagate():
    # Windows of NaN, of -inf/+inf only and of padding only (JAX: the identity, +-inf).
    model = check(all_windows("max", "min", "sum"), [("B", 6, 7, 3)], make_inputs=with_specials,
                  opset=18)
    assert "IsNaN" not in op_types(model)  # onnxruntime's elementwise Max/Min propagate NaN


INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.bool_]


def test_reduce_window_int_and_bool():
    # One input per dtype in one model. Full-range values: sums wrap, and padding
    # must be the dtype's own extreme (int16 computes in int32 but pads with -32768).
    def gen(shape, d, rng):
        if d == np.bool_:
            return rng.integers(0, 2, size=shape).astype(d)
        info = np.iinfo(d)
        return rng.integers(info.min, info.max, size=shape, dtype=d, endpoint=True)

    def f(*xs):
        return tuple(all_windows(*(("max", "min") if x.dtype == np.bool_ else ("sum", "max", "min")))(x)
                     for x in xs)
    # jit: one XLA compile for the JAX reference instead of one per op and dtype.
    check(jax.jit(f), [("B", 5, 6, 2)] * len(INTS), INTS, x64=True, make_inputs=gen, batches=(3,))


@pytest.mark.parametrize("dtype", [np.int64, np.uint64], ids=["i64", "u64"])
def test_reduce_window_max_min_64bit_exact(dtype):
    # onnxruntime's int64 Max/Min compare low words as signed when the high words are equal
    # (jaxonnx/max_min.hpp): windows pick with Where instead. A fixed window and a generic
    # one with a non-identity init (folded in with the same pick).
    lo, hi = dtype(np.iinfo(dtype).min), dtype(np.iinfo(dtype).max)
    init = dtype(2**31 + 5)

    def f(x):
        return (lax.reduce_window(x, lo, lax.max, (1, 3), (1, 1), "SAME"),
                lax.reduce_window(x, hi, lax.min, (2, 2), (1, 2), "VALID"),
                lax.reduce_window(x, init, lax.max, (1, 2), (1, 1), "VALID"))
    model = check(f, [("B", 8)], [dtype], x64=True, make_inputs=int64_fault_inputs, batches=(2, 5))
    if dtype == np.int64:  # uint64's Max/Min kernels are right
        assert not {"Max", "Min"} & set(op_types(model))


# Identity inits, and non-identity ones (XLA folds those in once per window,
# padded elements do not count).
GENERIC = [(lax.add, 0.0), (lax.max, -np.inf), (lax.min, np.inf), (lax.mul, 1.0),
           (lax.add, 2.5), (lax.max, 0.5), (lax.min, -0.5), (lax.mul, -2.0)]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_generic_reduce_window(dtype, x64):
    @jax.jit
    def f(x):
        return tuple(lax.reduce_window(x, dtype(init), op, w, s, p, window_dilation=d)
                     for op, init in GENERIC for w, s, p, d in WINDOWS)
    check(f, [("B", 6, 7, 3)], [dtype], x64=x64, make_inputs=with_specials, rtol=1e-4)


def test_generic_identity_init_folds_away():
    model = check(lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2), (1, 1), "VALID"), [("B", 5)])
    expect_graph(model, ["Slice -> Add", "Slice -> Add"], match="exact", counts={"Slice": 2})


@pytest.mark.parametrize("op,init", [(lax.bitwise_and, -1), (lax.bitwise_or, 0),
                                     (lax.bitwise_xor, 3), (lax.max, 7)], ids=["and", "or", "xor", "max"])
def test_generic_int(op, init):
    check(lambda x: lax.reduce_window(x, np.int32(init), op, (1, 2, 3), (1, 1, 2),
                                      ((0, 0), (1, 1), (0, 2))),
          [("B", 5, 6)], [np.int32], make_inputs=lambda s, d, r: r.integers(-99, 99, size=s, dtype=d))


def test_generic_variadic():
    def f(x, y):
        return lax.reduce_window((x, y), (0.0, -np.inf), lambda a, b: (a[0] + b[0], lax.max(a[1], b[1])),
                                 (1, 3), (1, 2), "SAME")
    check(f, [("B", 7), ("B", 7)])


def test_generic_non_monoid_fails():
    with pytest.raises(Exception, match="reduce_window"):
        jaxonnx.to_onnx(lambda x: lax.reduce_window(x, 0.0, lambda a, b: a + 2 * b, (2,), (1,), "VALID"),
                        [jax.ShapeDtypeStruct((5,), np.float32)])


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_base_dilation(dtype, x64):
    """Nearest-neighbour upsampling as a sum over a base-dilated signal ([a, b, c] ->
    [a, b, b, c]), a padded max over one, and an int min with a strided window; the
    dilated axis is symbolic, 1 at B = 1."""
    def fn(x):
        up = lax.reduce_window(x, 0.0, lax.add, (1, 2), (1, 1), "VALID", base_dilation=(1, 2))
        peak = lax.reduce_window(x, -jnp.inf, lax.max, (3, 1), (1, 1), ((1, 1), (0, 0)),
                                 base_dilation=(2, 1))
        big = jnp.int32(jnp.iinfo(jnp.int32).max)
        low = lax.reduce_window(x.astype(jnp.int32), big, lax.min, (2, 3), (2, 1),
                                ((0, 1), (2, 0)), base_dilation=(3, 2))
        return up, peak, low
    check(fn, [("B", 4)], [dtype], x64=x64, batches=(1, 2, 5))


nnx = pytest.importorskip("flax.nnx")


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("shape", [(2, 8, 8, 3), ("B", 8, 8, 3)], ids=str)
def test_flax_pooling(shape, dtype, x64):
    nn = nnx  # flax.linen's pooling functions are the same

    @jax.jit
    def f(x):
        return (nn.max_pool(x, (2, 2), (2, 2), "VALID"),
                nn.max_pool(x, (3, 3), (1, 1), "SAME"),
                nn.avg_pool(x, (3, 3), (2, 2), "SAME"),
                nn.avg_pool(x, (3, 3), (1, 1), "SAME", count_include_pad=False),
                nn.min_pool(x, (2, 3), (1, 2), "VALID"))
    check(f, [shape], [dtype], x64=x64)


def test_half_floats():
    # Computed in float32 (no 16-bit Pad kernels), rounded once at the end.
    check(all_windows("sum", "max", "min"), [("B", 6, 7, 3)], [np.float16], batches=(3,))
    # bfloat16 takes the same path; onnxruntime's Python API cannot feed it, so only validate.
    model = jaxonnx.to_onnx(all_windows("sum", "max"), [jax.ShapeDtypeStruct((2, 6, 7, 3), jnp.bfloat16)])
    onnx.checker.check_model(model, full_check=True)


# ------------------------------------------------------------ complex mul --

def _unit_complex(s, d, rng):
    """Complex values near the unit circle: long window products stay finite."""
    z = np.exp(1j * rng.uniform(-np.pi, np.pi, size=s)) * rng.uniform(0.5, 1.5, size=s)
    return z.astype(d)


@pytest.mark.parametrize("cdtype,real,tol", [("complex64", "float32", 1e-5), ("complex128", "float64", None)],
                         ids=["c64", "c128"])
def test_complex_mul_window(cdtype, real, tol):
    # Padding and base-dilation holes hold 1 + 0i (the packed form is padded with
    # 0 and set to [1, 0] there); non-identity inits fold in once per window.
    one, other = np.dtype(cdtype).type(1), np.dtype(cdtype).type(0.5 - 2j)

    def f(z):
        return (lax.reduce_window(z, one, lax.mul, (1, 2, 2), (1, 1, 1), "VALID"),
                lax.reduce_window(z, other, lax.mul, (1, 3, 2), (1, 2, 1), ((0, 0), (1, 2), (2, 0))),
                lax.reduce_window(z, one, lax.mul, (1, 2, 3), (1, 1, 2), ((0, 0), (0, 1), (1, 1)),
                                  base_dilation=(1, 2, 1), window_dilation=(1, 1, 2)),
                lax.reduce_window(z, other, lax.mul, (2, 1, 2), (1, 1, 1), "SAME"))
    check_variants(f, [(("B", 5, 6), cdtype)], variants=[Variant(real, False), Variant(real, True)],
                   make_inputs=_unit_complex, rtol=tol, atol=tol)


@pytest.mark.parametrize("init", [0, 1, 2])
def test_complex_mul_window_catalog(init):
    check_harness("reduce_window_mul", f"dtypes_shape_complex64_4_6_initvalue_{init}_windowdimensions_2_2_"
                  "windowstrides_1_1_padding_0_0_0_0_basedilation_1_1_windowdilation_1_1_enablexla_True")
