"""lax_slicing plugin: rev, slice, concatenate, split, pad, iota."""

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from helpers import check, op_types

FLOATS = [(np.float32, False), (np.float64, True)]
FLOAT_IDS = ["f32", "f64"]
SHAPE_OPS = {"Shape", "Concat", "Gather", "Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Neg"}


def main_ops(model):
    """The model's ops without the runtime shape arithmetic."""
    return [op for op in op_types(model) if op not in SHAPE_OPS]


# --------------------------------------------------------------------- rev --

REVS = [((3, 4), (0,)), ((3, 4), (0, 1)), (("B", 4), (0,)), (("B", 4), (1,)), (("B", 3, 4), (2, 0))]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape,dims", REVS, ids=str)
def test_rev(shape, dims, dtype, x64):
    model = check(lambda x: lax.rev(x, dims), [shape], [dtype], x64=x64)
    assert op_types(model) == ["Slice"]  # one Slice for all axes


@pytest.mark.parametrize("dtype", [np.int32, np.bool_])
def test_flip_int_and_bool(dtype):
    model = check(jnp.flip, [("B", 3)], [dtype])
    assert op_types(model) == ["Slice"]


def test_rev_size_one_axis_emits_no_node():
    model = check(lambda x: lax.rev(x, (0,)) * 2.0, [(1, 4)])
    assert op_types(model) == ["Mul"]


def test_rev_empty_axis():
    check(lambda x: lax.rev(x, (0, 1)), [(0, 4)])


# ------------------------------------------------------------------- slice --

def _B(x):
    return x.shape[0]


# (shape, fn(x) -> (start, limit, strides))
SLICES = [
    ((6, 8), lambda x: ((1, 0), (5, 8), (2, 1))),
    ((6, 8), lambda x: ((0, 1), (6, 8), None)),
    ((6, 8), lambda x: ((2, 3), (3, 7), (1, 3))),
    (("B", 8), lambda x: ((0, 1), (_B(x), 8), None)),       # limit = the symbolic dim
    (("B", 8), lambda x: ((1, 1), (_B(x), 8), (2, 3))),
    (("B", 8), lambda x: ((0, 2), (_B(x), 6), None)),
]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("case", SLICES, ids=lambda c: str(c[0]))
def test_slice(case, dtype, x64):
    shape, params = case
    model = check(lambda x: lax.slice(x, *params(x)), [shape], [dtype], x64=x64)
    # A limit that is the whole dim needs no runtime shape value.
    assert op_types(model) == ["Slice"]


@pytest.mark.parametrize("dtype", [np.int32, np.bool_])
def test_slice_int_and_bool(dtype):
    check(lambda x: lax.slice(x, (0, 1), (x.shape[0], 3), (1, 2)), [("B", 4)], [dtype])


def test_full_slice_emits_no_node():
    model = check(lambda x: lax.slice(x, (0, 0), x.shape) * 2.0, [("B", 4)])
    assert op_types(model) == ["Mul"]


def test_slice_symbolic_limit_inside_dim():
    # (2B, 4)[:B]: the limit B is a runtime value, not "to the end".
    check(lambda x: lax.slice(jnp.concatenate([x, x]), (0, 0), (x.shape[0], 4)), [("B", 4)])


@pytest.mark.parametrize("index", [np.s_[1:-1:2], np.s_[:, 1:], np.s_[::-1, ::3], np.s_[2:3]],
                         ids=["1:-1:2", ":,1:", "::-1,::3", "2:3"])
def test_jnp_basic_indexing(index):
    check(lambda x: x[index], [(6, 8)])


# ------------------------------------------------------------- concatenate --

CONCATS = [
    ([(3, 4), (2, 4)], 0),
    ([("B", 4), ("B", 2), ("B", 1)], 1),
    ([("B", 4), ("B", 4)], 0),       # a 2*B result
    ([(2, 3), (2, 3)], -1),
]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shapes,axis", CONCATS, ids=str)
def test_concatenate(shapes, axis, dtype, x64):
    model = check(lambda *xs: jnp.concatenate(xs, axis=axis), shapes, [dtype] * len(shapes), x64=x64)
    assert op_types(model) == ["Concat"]


@pytest.mark.parametrize("dtype", [np.int32, np.bool_])
def test_concatenate_int_and_bool(dtype):
    check(lambda x, y: jnp.concatenate([x, y, x], axis=0), [("B", 3), (2, 3)], [dtype, dtype])


def test_concatenate_with_empty_operand():
    check(lambda x, y: jnp.concatenate([x, y], axis=1), [("B", 4), ("B", 0)])


def test_concatenate_with_constant():
    check(lambda x: jnp.concatenate([x, jnp.ones((1, 4), x.dtype)]), [("B", 4)])


# ------------------------------------------------------------------- split --

SPLITS = [
    ((6, 8), lambda x: jnp.split(x, [1, 3], axis=0)),
    (("B", 8), lambda x: jnp.split(x, 2, axis=1)),
    (("B", 8), lambda x: jnp.array_split(x, 3, axis=1)),
    # Symbolic sizes (B, B): split's `split` input is computed at run time.
    (("B", 4), lambda x: jnp.split(jnp.concatenate([x, x]), 2, axis=0)),
]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("case", SPLITS, ids=lambda c: str(c[0]))
def test_split(case, dtype, x64):
    shape, fn = case
    model = check(fn, [shape], [dtype], x64=x64)
    assert "Split" in op_types(model)


@pytest.mark.parametrize("dtype", [np.int32, np.bool_])
def test_split_int_and_bool(dtype):
    check(lambda x: jnp.split(x, [1, 4], axis=1), [("B", 6)], [dtype])


def test_split_empty_part():
    model = check(lambda x: jnp.split(x, [0, 2], axis=1), [("B", 4)])  # sizes (0, 2, 2)
    assert op_types(model) == ["Split"]


# --------------------------------------------------------------------- pad --

# (shape, padding_config, expected ops without shape arithmetic)
PADS = [
    ((3, 4), ((1, 2, 0), (0, 3, 0)), ["Pad"]),
    (("B", 4), ((1, 2, 0), (0, 0, 0)), ["Pad"]),
    (("B", 4), ((-1, 2, 0), (1, -2, 0)), ["Pad"]),        # negative = crop
    # Interior: Unsqueeze, Pad, Reshape interleave; the edge Pad crops the surplus.
    ((3, 4), ((0, 0, 1), (0, 0, 0)), ["Unsqueeze", "Pad", "Reshape", "Pad"]),
    (("B", 4), ((1, 2, 1), (-1, 3, 2)), ["Unsqueeze", "Pad", "Reshape", "Pad"]),  # both axes
    ((3, 2), ((0, 1, 1), (0, 0, 0)), ["Unsqueeze", "Pad", "Reshape"]),  # high == interior
    (("B", 3, 4), ((0, 0, 0), (0, 0, 2), (1, 0, 0)), None),
    ((2, "B"), ((0, 0, 1), (1, 1, 0)), None),                # symbolic dim after the interior axis
    (("B", 2, "B"), ((0, 0, 1), (0, 0, 0), (0, 0, 1)), None),  # two merged symbolic dims
    ((4,), ((-1, -1, 1),), None),                            # crop the interior-padded result
]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("case", PADS, ids=lambda c: f"{c[0]}{c[1]}")
def test_pad(case, dtype, x64):
    shape, config, expected = case
    # The padding value is a runtime input here.
    model = check(lambda x, v: lax.pad(x, v, config), [shape, ()], [dtype, dtype], x64=x64)
    if expected is not None:
        assert main_ops(model) == expected


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_pad_crops_a_dim_that_is_zero_at_run_time(dtype, x64):
    """A shift-by-one of the differences (x[1:] - x[:-1], then lax.pad by (-1, 1)): the
    rows are B - 1, none at B = 1, where JAX gives an empty array. Also interior padding
    of such a dim, and crops past a static dim."""
    def fn(x):
        d = x[1:] - x[:-1]
        return (lax.pad(d, 0.0, ((-1, 1, 0), (0, 0, 0))),
                lax.pad(d, 1.0, ((0, 0, 2), (1, -1, 0))),
                lax.pad(x[:, :2], 0.0, ((0, 0, 0), (-3, 2, 0))))
    model = check(fn, [("B", 3)], x64=x64, batches=(1, 2, 5))
    assert "Slice" in main_ops(model)


@pytest.mark.parametrize("dtype", [np.int32, np.bool_, np.int16, np.uint8, np.float16])
def test_pad_other_dtypes(dtype):
    # int16 has no onnxruntime Pad kernel: padded in int32 and cast back.
    config = ((1, 0, 1), (2, -1, 0))
    check(lambda x, v: lax.pad(x, v, config), [("B", 3), ()], [dtype, dtype])


def test_pad_bfloat16():
    config = ((1, 0, 1), (2, -1, 0))
    check(lambda x: lax.pad(x.astype(jnp.bfloat16), jnp.bfloat16(3), config).astype(jnp.float32),
          [("B", 3)])


def test_pad_literal_value_and_no_interior_is_one_pad():
    model = check(lambda x: lax.pad(x, -7.0, ((2, 1, 0), (0, 1, 0))), [("B", 3)])
    assert op_types(model) == ["Pad"]


def test_pad_empty_input_is_all_padding():
    model = check(lambda x: lax.pad(x, 2.0, ((1, 1, 1), (0, 2, 0))), [(0, 3)])
    assert op_types(model) == ["Expand"]


def test_pad_zero_config_emits_no_node():
    model = check(lambda x: lax.pad(x, 0.0, ((0, 0, 0), (0, 0, 0))) * 2.0, [("B", 3)])
    assert op_types(model) == ["Mul"]


@pytest.mark.parametrize("fn", [
    lambda x: jnp.pad(x, 2),
    lambda x: jnp.pad(x, (1, 2)),
    lambda x: jnp.pad(x, ((1, 0), (2, 3)), constant_values=1.5),
    lambda x: jnp.pad(x, ((0, 0), (0, 4))),
], ids=["2", "(1,2)", "per-axis-value", "right"])
def test_jnp_pad_constant(fn):
    model = check(fn, [("B", 3)])
    assert "Pad" in op_types(model)


# -------------------------------------------------------------------- iota --

def test_arange_static_is_constant():
    model = check(lambda x: x + jnp.arange(4, dtype=x.dtype), [("B", 4)])
    assert "Range" not in op_types(model)


@pytest.mark.parametrize("x64", [False, True], ids=["i32", "i64"])
def test_arange_symbolic(x64):
    model = check(lambda x: jnp.arange(x.shape[0]), [("B", 4)], x64=x64)
    assert "Range" in op_types(model)


@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
def test_iota_of_a_length_non_linear_in_the_batch(x64):
    """A pairwise grid over the batch: arange(2*B^2) shaped (B, 2*B)."""
    def fn(x):
        n = x.shape[0]
        grid = jnp.arange(2 * n * n, dtype=x.dtype).reshape(n, 2 * n)
        return grid + jnp.concatenate([x, x], axis=1)[:, :1]
    check(fn, [("B", 3)], x64=x64, batches=(1, 4))


IOTA_DTYPES = [(np.float32, False), (np.float64, True), (np.int32, False), (np.int64, True),
               (np.uint8, False), (np.int8, False), (np.float16, False)]


@pytest.mark.parametrize("dtype,x64", IOTA_DTYPES, ids=lambda d: np.dtype(d).name if d not in (True, False) else "")
@pytest.mark.parametrize("dim", [0, 1])
def test_broadcasted_iota_symbolic(dim, dtype, x64):
    check(lambda x: lax.broadcasted_iota(dtype, (x.shape[0], 3), dim), [("B", 2)], x64=x64)


@pytest.mark.parametrize("dtype,x64", IOTA_DTYPES, ids=lambda d: np.dtype(d).name if d not in (True, False) else "")
def test_broadcasted_iota_static(dtype, x64):
    model = check(lambda x: x + lax.broadcasted_iota(x.dtype, (2, 3, 4), 1), [(2, 3, 4)], [dtype],
                  x64=x64)
    # A constant [1, 3, 1]; Add broadcasts it itself, so the fuse pass drops its
    # Expand (onnx_fusion's expand-into-broadcast rule); float16 is counted in
    # float32 and cast once.
    assert [op for op in op_types(model) if op != "Cast"] == ["Add"]


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.float16, np.int32])
@pytest.mark.parametrize("n", [300, 3000], ids=["const", "range"])
def test_iota_wraps_and_rounds_like_jax(n, dtype):
    # Narrow ints wrap (uint8 256 -> 0), float16 rounds 2049 -> 2048, on both paths.
    model = check(lambda x: lax.iota(dtype, n), [(1,)])
    assert ("Range" in op_types(model)) == (n > 1024)


@pytest.mark.parametrize("fn", [jnp.tril, jnp.triu, lambda x: jnp.tril(x, -1), lambda x: jnp.triu(x, 2)],
                         ids=["tril", "triu", "tril-1", "triu2"])
@pytest.mark.parametrize("shape", [(5, 5), ("B", 4), (2, "B", 3)], ids=str)
def test_tril_triu(fn, shape):
    check(fn, [shape])


# -------------------------------------------------------------------- roll --

@pytest.mark.parametrize("shift,axis", [(2, 0), (-1, 1), (3, None), (9, 0)], ids=str)
@pytest.mark.parametrize("shape", [(5, 4), ("B", 4)], ids=str)
def test_roll(shape, shift, axis):
    # A symbolic axis makes the slice starts symbolic ("mod(-2, B)").
    check(lambda x: jnp.roll(x, shift, axis=axis), [shape])


# ------------------------------------------------------------------ opsets --

@pytest.mark.parametrize("opset", [18, 21, 23])
def test_slicing_ops_every_opset(opset):
    def fn(x):
        y = jnp.concatenate([jnp.flip(x, 0), lax.slice_in_dim(x, 1, 3, axis=1)], axis=1)
        y = lax.pad(y, 0.5, ((1, 0, 1), (0, 2, 0)))
        a, b = jnp.split(y, [2], axis=1)
        return a * lax.broadcasted_iota(jnp.float32, a.shape, 0), b
    check(fn, [("B", 3)], opset=opset)
