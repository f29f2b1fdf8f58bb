"""lax_reduction plugin: reduce_sum / reduce_prod / reduce_max / reduce_min /
reduce_and / reduce_or / reduce_xor / argmax / argmin."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxonnx
from helpers import check, check_harness, int64_fault_inputs, op_types

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
@pytest.mark.parametrize("name", sorted(REDUCE))
@pytest.mark.parametrize("shape", [(2, 3, 4), ("B", 3, 4)], ids=str)
def test_reduce(name, dtype, x64, shape):
    # Every AXES entry in one model (fewer onnxruntime sessions).
    model = check(lambda x: tuple(reduce(name, a)(x) for a in AXES), [shape], [dtype], x64=x64,
                  rtol=1e-5 if not x64 else None)
    assert ONNX_OP[name] in op_types(model)


@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduce_empty_axes_is_identity(name):
    model = check(lambda x: reduce(name, ())(x) * 2.0, [("B", 4)])
    assert op_types(model) == ["Mul"]


@pytest.mark.parametrize("dtype,x64", [(np.int32, False), (np.int64, True)], ids=["i32", "i64"])
@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduce_int(name, dtype, x64):
    model = check(reduce(name, (1,)), [("B", 5)], [dtype], x64=x64)
    # Integer sums are an exact CumSum (onnxruntime's ReduceSum goes through double); int64
    # max/min a TopK(k=1) (onnxruntime's int64 ReduceMax/ReduceMin compare wrongly).
    if name == "reduce_sum":
        assert op_types(model) == ["CumSum", "Gather"]
    else:
        assert op_types(model) == ([ONNX_OP[name]] if dtype == np.int32 else ["TopK", "Squeeze"])


@pytest.mark.parametrize("dtype", [np.int64, np.uint64], ids=["i64", "u64"])
@pytest.mark.parametrize("shape", [(3, 6, 4), ("B", 6, 4)], ids=str)
def test_reduce_max_min_64bit_exact(shape, dtype):
    # Every AXES entry in one model, the symbolic one with B = 1 and 7, and the fault's own row.
    fns = [reduce(n, a) for n in ("reduce_max", "reduce_min") for a in AXES]
    model = check(lambda x: tuple(f(x) for f in fns), [shape], [dtype], x64=True, make_inputs=int64_fault_inputs)
    assert "TopK" in op_types(model) and not {"ReduceMax", "ReduceMin"} & set(op_types(model))
    fault = np.array([[2**31, 1, 2, 3], [0, 0, 2**31, 2**31]], dtype)
    check(lambda x: (jnp.max(x, axis=1), jnp.min(x, axis=1)), [(2, 4)], [dtype], x64=True,
          make_inputs=lambda s, d, rng: fault)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64], ids=["i64", "u64"])
def test_reduce_max_min_64bit_empty(dtype):
    # JAX's identities (the type's min for max, max for min), over a static 0 axis and a
    # symbolic one that is 0 at run time.
    check(lambda x: (reduce("reduce_max", (1,))(x), reduce("reduce_min", (1,))(x)), [(3, 0)], [dtype], x64=True)
    check(lambda x: (reduce("reduce_max", (0,))(x), reduce("reduce_min", (0,))(x)), [("B", 3)], [dtype],
          x64=True, batches=(0, 4), make_inputs=int64_fault_inputs)


@pytest.mark.parametrize("dtype,x64", [(np.int32, False), (np.int64, True), (np.uint8, False)],
                         ids=["i32", "i64", "u8"])
def test_reduce_sum_int_exact_and_wraps(dtype, x64):
    def gen(s, d, rng):
        info = np.iinfo(d)
        return rng.integers(info.max // 3, info.max, size=s, dtype=d) | np.array(1, d)
    check(lambda x: (reduce("reduce_sum", (1,))(x), reduce("reduce_sum", (0, 1))(x)), [("B", 5)],
          [dtype], x64=x64, make_inputs=gen)


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


# ------------------------------------------- psum / pmax / pmin, positional --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("shape", [(2, 3, 4), ("B", 3, 4)], ids=str)
def test_collectives_over_positional_axes(shape, dtype, x64):
    # lax.psum(x, 1) outside a mapped axis is a reduction; NaNs propagate. (JAX's own pmean
    # fails on positional axes.)
    def fn(x):
        return (lax.psum(x, 1), lax.pmax(x, (0, 2)), lax.pmin(x, 2), lax.psum((x > 0).astype(jnp.int32), 0),
                lax.pmax(x, ()))
    model = check(fn, [shape], [dtype], x64=x64, make_inputs=with_nans)
    assert {"ReduceSum", "ReduceMax", "ReduceMin"} <= set(op_types(model))


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
@pytest.mark.parametrize("shape", [(2, 3, 4), ("B", 3, 4)], ids=str)
def test_argmax(shape, dtype, index_dtype, x64):
    dt = {"float": np.float64 if x64 else np.float32, "int32": np.int32}[dtype]
    check(lambda x: tuple(argmax(a, index_dtype)(x) for a in range(3)), [shape], [dt], x64=x64)


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


# -------------------------------------------------------------- reduce_prod --

def bind(prim, axes):
    return lambda x: prim.bind(x, axes=tuple(axes))


def several(prim, axes_list):
    """One model reducing over each axes tuple (fewer onnxruntime sessions)."""
    return lambda x: tuple(prim.bind(x, axes=tuple(a)) for a in axes_list)


def near_one(shape, dtype, rng):
    x = rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1, 1], size=shape)
    flat = x.reshape(-1)
    flat[4::13] = 0.0
    return x.astype(dtype)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("shape", [(2, 3, 4), ("B", 3, 4)], ids=str)
def test_reduce_prod(shape, dtype, x64):
    model = check(several(lax.reduce_prod_p, AXES), [shape], [dtype], x64=x64, make_inputs=near_one)
    assert set(op_types(model)) == {"ReduceProd"}


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_reduce_prod_nan_inf(dtype, x64):
    check(bind(lax.reduce_prod_p, (1,)), [("B", 9)], [dtype], x64=x64, make_inputs=with_nans)

    def inf_zero(s, d, rng):
        x = np.ones(s, d)
        x[..., 0], x[..., 3] = np.inf, 0.0  # inf * 0 = NaN
        return x
    check(bind(lax.reduce_prod_p, (1,)), [("B", 5)], [dtype], x64=x64, make_inputs=inf_zero)


INTS = [(np.int32, False), (np.int64, True), (np.int8, False), (np.uint8, False), (np.uint32, False)]
INT_IDS = ["i32", "i64", "i8", "u8", "u32"]


@pytest.mark.parametrize("dtype,x64,shape", [(d, x, ("B", 5, 4)) for d, x in INTS] + [(np.int32, False, (3, 5, 4))],
                         ids=INT_IDS + ["i32-static"])
def test_reduce_prod_int_wraps(shape, dtype, x64):
    # Products overflow: JAX wraps (onnxruntime's integer ReduceProd would saturate).
    def gen(s, d, rng):
        x = rng.integers(1, 100, size=s)
        if np.issubdtype(d, np.signedinteger):
            x *= rng.choice([1, -1], size=s)
        return x.astype(d)
    check(several(lax.reduce_prod_p, [(1,), (0,), (0, 2), (0, 1, 2)]), [shape], [dtype], x64=x64,
          make_inputs=gen)


def test_jnp_prod():
    check(lambda x: (jnp.prod(x, axis=1), jnp.prod(x)), [("B", 4)], make_inputs=near_one)


# ------------------------------------------------------- reduce_and/or/xor --

LOGIC = [lax.reduce_and_p, lax.reduce_or_p, lax.reduce_xor_p]


def logic(axes):
    return lambda x: tuple(p.bind(x, axes=tuple(axes)) for p in LOGIC)


@pytest.mark.parametrize("opset", [18, 23])
@pytest.mark.parametrize("shape", [(4, 5), ("B", 5)], ids=str)
def test_reduce_logic_bool(shape, opset):
    check(lambda x: logic((1,))(x) + logic((0, 1))(x), [shape], [np.bool_], opset=opset)


def test_reduce_logic_bool_structure():
    ops = [op_types(check(bind(p, (1,)), [("B", 3)], [np.bool_])) for p in LOGIC]
    assert ops == [["ReduceMin"], ["ReduceMax"], ["Cast", "ReduceSum", "Mod", "Cast"]]


def test_jnp_any_all():
    check(lambda x: (jnp.any(x > 0, axis=1), jnp.all(x > 0), jnp.logical_xor.reduce(x > 0, axis=0)),
          [("B", 4)])


@pytest.mark.parametrize("dtype,x64,shape",
                         [(d, x, ("B", 5, 2)) for d, x in INTS + [(np.int16, False), (np.uint64, True)]]
                         + [(np.int32, False, (3, 5, 2))],
                         ids=INT_IDS + ["i16", "u64", "i32-static"])
def test_reduce_logic_int_is_bitwise(shape, dtype, x64):
    def gen(s, d, rng):
        info = np.iinfo(d)
        x = rng.integers(info.min, info.max, size=s, dtype=d, endpoint=True)
        x[..., 0, :] = info.max  # all bits set, and the sign bit for signed types
        x[..., 1, :] |= np.array(info.min, d)
        return x
    check(lambda x: logic((1,))(x) + logic((0, 2))(x), [shape], [dtype], x64=x64, make_inputs=gen)


@pytest.mark.parametrize("prim", LOGIC + [lax.reduce_prod_p], ids=lambda p: p.name)
def test_new_reductions_empty_axes_is_identity(prim):
    dt = np.float32 if prim is lax.reduce_prod_p else np.int32
    assert op_types(check(lambda x: bind(prim, ())(x) * 2, [("B", 4)], [dt])) == ["Mul"]


# ------------------------------------------------------------------ argmin --

def argmin(axis, index_dtype):
    return lambda x: lax.argmin(x, axis, index_dtype)


def both_args(axis, index_dtype):
    return lambda x: (lax.argmin(x, axis, index_dtype), lax.argmax(x, axis, index_dtype))


@pytest.mark.parametrize("index_dtype,x64", [(np.int32, False), (np.int64, True)], ids=["i32", "i64"])
@pytest.mark.parametrize("shape", [(2, 3, 4), ("B", 3, 4)], ids=str)
def test_argmin(shape, index_dtype, x64):
    dt = np.float64 if x64 else np.float32
    f = lambda x: tuple(lax.argmin(x, a, index_dtype) for a in range(3))  # noqa: E731
    check(f, [shape], [dt], x64=x64)
    check(f, [shape], [np.int32], x64=x64)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("opset", [18, 23])
def test_argmin_returns_first_nan(dtype, x64, opset):
    check(argmin(1, np.int32), [("B", 9)], [dtype], x64=x64, make_inputs=with_nans, opset=opset)

    def gen(s, d, rng):
        x = np.zeros(s, d)
        x[..., 0] = -np.inf
        x[..., 2] = np.nan
        x[..., 3] = np.nan
        return x
    check(argmin(1, np.int32), [("B", 4)], [dtype], x64=x64, make_inputs=gen)


def test_argmin_ties_and_bool():
    def gen(s, d, rng):
        return rng.integers(0, 2, size=s).astype(d)  # many equal minima
    check(argmin(1, np.int32), [("B", 8)], make_inputs=gen)
    check(both_args(1, np.int32), [("B", 5)], [np.bool_])


@pytest.mark.parametrize("dtype,x64", [(np.int16, False), (np.uint16, False), (np.uint32, False),
                                       (np.uint64, True), (np.int8, False)],
                         ids=["i16", "u16", "u32", "u64", "i8"])
def test_arg_ints_without_kernels(dtype, x64):
    # Full-range values: uint64 > 2^63 must still order above small ones.
    def gen(s, d, rng):
        info = np.iinfo(d)
        return rng.integers(info.min, info.max, size=s, dtype=d, endpoint=True)
    check(both_args(1, np.int32), [("B", 6)], [dtype], x64=x64, make_inputs=gen)


def test_argmin_int_emits_no_nan_handling():
    assert op_types(check(argmin(1, np.int32), [("B", 5)], [np.int32])) == ["ArgMin", "Cast"]


def test_jnp_argmin():
    check(lambda x: (jnp.argmin(x, axis=-1), jnp.argmin(x)), [("B", 5)])


# ---------------------------------------------------------- generic reduce --

MONOIDS = {"add": lax.add, "mul": lax.mul, "max": lax.max, "min": lax.min}


@pytest.mark.parametrize("dtype,x64", FLOATS + [(np.int32, False)], ids=["f32", "f64", "i32"])
@pytest.mark.parametrize("shape", [(2, 3, 4), ("B", 3, 4)], ids=str)
def test_generic_reduce_with_a_monoid_body(shape, dtype, x64):
    # lax.reduce with an identity init becomes reduce_sum & co. in JAX itself;
    # another init keeps the generic primitive, folded in once as XLA does.
    # (XLA leaves such an init out when the reduced extent is 1: a non-identity
    # init is unspecified in XLA, so the reduced extents here are never 1.)
    def fn(x):
        return tuple(lax.reduce(x, dtype(3), op, dims)
                     for op in MONOIDS.values() for dims in [(1,), (0, 2)])
    check(fn, [shape], [dtype], x64=x64)


def test_generic_reduce_body_operand_order_and_nan():
    check(lambda x: (lax.reduce(x, np.float32(1), lambda a, b: b + a, (1,)),
                     lax.reduce(x, np.float32(-5), lax.max, (0, 1))),
          [("B", 5)], make_inputs=with_nans)


def test_generic_reduce_bool_and_bits():
    def fn(b, i):
        return (lax.reduce(b, True, lax.bitwise_and, (1,)), lax.reduce(b, True, lax.bitwise_or, (1,)),
                lax.reduce(b, True, lax.bitwise_xor, (1,)), lax.reduce(i, np.int32(6), lax.bitwise_or, (1,)),
                lax.reduce(i, np.int32(5), lax.bitwise_and, (1,)))
    check(fn, [("B", 5), ("B", 5)], [np.bool_, np.int32])


def test_generic_variadic_reduce_one_monoid_per_operand():
    def fn(x, y):
        return lax.reduce((x, y), (np.float32(1), np.float32(2)),
                          lambda a, b: (a[0] + b[0], jnp.maximum(a[1], b[1])), (1,))
    model = check(fn, [("B", 4), ("B", 4)])
    assert {"ReduceSum", "ReduceMax"} <= set(op_types(model))


@pytest.mark.parametrize("body,why", [
    (lambda a, b: a * 2.0 + b, "equations"),
    (lambda a, b: a - b, "not add/mul"),
], ids=["two-eqns", "sub"])
def test_generic_reduce_with_another_body_is_refused(body, why):
    with pytest.raises(jaxonnx.ConversionError, match=f"reduce.*{why}"):
        jaxonnx.to_onnx(lambda x: lax.reduce(x, 1.0, body, (1,)), [("B", 4)])


# An empty batch is an input JAX defines: reductions over it give the identity
# (any -> False, all -> True, max -> -inf, sum -> 0), where onnxruntime's bool
# ReduceMax/ReduceMin kernels fail, max/min's NaN mask is a bool reduction, and
# an exact integer sum keeps the last element of a scan.
@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("fn", [
    lambda x: jnp.any(x > 0, axis=0),
    lambda x: jnp.all(x > 0, axis=0),
    lambda x: lax.reduce_max(x, (0,)),
    lambda x: lax.reduce_min(x, (0, 2)),
    lambda x: jnp.any(x > 0),
    lambda x: jnp.sum((x * 10).astype(jnp.int32), axis=0),
    lambda x: jnp.prod((x * 3).astype(jnp.int32), axis=(0, 1)),
], ids=["any", "all", "max", "min", "any_all_axes", "int_sum", "int_prod"])
def test_reduction_over_an_empty_batch(fn, x64):
    check(fn, [("B", 3, 2)], x64=x64, batches=(0, 1, 4))


def test_bool_reduction_stays_bool_over_static_axes():
    # Only a possibly empty axis needs the uint8 detour.
    model = check(lambda x: jnp.any(x > 0, axis=1), [("B", 3)])
    assert "Cast" not in op_types(model)


def test_generic_reduce_complex_max_min_catalog():
    # Variadic: a complex max (lexicographic, tests/python/test_complex.py) beside an int32 min.
    check_harness("reduce", "gen_max_min_shape_complex64_4_6_initvalue_3_nr_operands_2_dimensions_0_")


@pytest.mark.parametrize("dtype", [np.int64, np.uint64], ids=["i64", "u64"])
def test_generic_reduce_max_min_64bit(dtype):
    # The x64 catalog's reduce_gen_max_min_..._uint64_... case, by hand (its harness exists
    # only in an x64 process): a 64-bit max beside an int32 min, inits folded in.
    def f(x, y):
        return lax.reduce((x, y), (dtype(3), np.int32(0)), lambda a, b: (lax.max(a[0], b[0]), lax.min(a[1], b[1])),
                          (0,))
    # B >= 2: XLA skips a non-identity init over an extent of 1.
    check(f, [("B", 6), ("B", 6)], [dtype, np.int32], x64=True, make_inputs=int64_fault_inputs, batches=(2, 7))
