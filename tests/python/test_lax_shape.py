"""lax_shape plugin: broadcast_in_dim, reshape, squeeze, transpose."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from helpers import check, op_types

FLOATS = [(np.float32, False), (np.float64, True)]
SHAPE_OPS = {"Shape", "Concat", "Gather", "Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Neg"}


def sym(x, shape):
    """`shape` with "i" entries replaced by x.shape[i] (keeps symbolic dims symbolic)."""
    return tuple(x.shape[int(d[1:])] if isinstance(d, str) else d for d in shape)


# -------------------------------------------------------- broadcast_in_dim --

# (input shape, output shape with "dN" = input dim N, broadcast_dimensions, expected ops)
BROADCASTS = [
    ((3, 4), (2, 3, 4), (1, 2), ["Expand"]),               # new leading axis: Expand alone
    (("B", 4), (2, "d0", 4), (1, 2), ["Expand"]),
    ((3,), (3, 4), (0,), ["Unsqueeze", "Expand"]),          # new trailing axis
    (("B",), ("d0", 5), (0,), ["Unsqueeze", "Expand"]),
    ((3, 1), (3, 4), (0, 1), ["Expand"]),                    # stretch a 1
    (("B", 1), ("d0", 4), (0, 1), ["Expand"]),
    ((3, 4), (3, 1, 4), (0, 2), ["Unsqueeze"]),              # expand_dims: no Expand
    (("B", 4), ("d0", 1, 4), (0, 2), ["Unsqueeze"]),
    (("B", 4), (1, "d0", 4), (1, 2), ["Unsqueeze"]),
    ((), (2, 3), (), ["Expand"]),                            # scalar
    ((1, 4), ("B", 4), (0, 1), None),                        # a symbolic target dim
]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("case", BROADCASTS, ids=lambda c: f"{c[0]}->{c[1]}")
def test_broadcast_in_dim(case, dtype, x64):
    in_shape, out_shape, bdims, expected = case
    if "B" in out_shape:
        # The symbolic target dim comes from a second input.
        def fn(x, y):
            return lax.broadcast_in_dim(x, (y.shape[0],) + out_shape[1:], bdims)
        check(fn, [in_shape, ("B",)], [dtype, dtype], x64=x64)
        return
    model = check(lambda x: lax.broadcast_in_dim(x, sym(x, out_shape), bdims), [in_shape], [dtype],
                  x64=x64)
    ops = [op for op in op_types(model) if op not in SHAPE_OPS]
    assert ops == expected


def test_broadcast_same_shape_emits_no_node():
    model = check(lambda x: lax.broadcast_in_dim(x, x.shape, (0, 1)) * 2.0, [("B", 4)])
    assert op_types(model) == ["Mul"]


def test_broadcast_keeps_present_symbolic_dims_static():
    # [B, 1] -> [B, 4]: Expand's shape is the constant [1, 4]; no runtime Shape.
    model = check(lambda x: lax.broadcast_in_dim(x, (x.shape[0], 4), (0, 1)), [("B", 1)])
    assert op_types(model) == ["Expand"]


def test_broadcast_literal_scalar():
    check(lambda x: x + lax.broadcast_in_dim(1.5, x.shape, ()), [("B", 4)])


def test_broadcast_int_and_bool():
    check(lambda x: lax.broadcast_in_dim(x, (2,) + x.shape, (1, 2)), [("B", 3)], [np.int32])
    check(lambda x: lax.broadcast_in_dim(x, (2,) + x.shape, (1, 2)), [("B", 3)], [np.bool_])


def test_expand_dims_is_broadcast_in_dim():
    # JAX 0.10 has no expand_dims primitive: jnp.expand_dims binds broadcast_in_dim.
    model = check(lambda x: jnp.expand_dims(x, (0, 2)), [("B", 4)])
    assert op_types(model) == ["Unsqueeze"]


# ----------------------------------------------------------------- reshape --

def _b(x, i):
    return x.shape[i]


# (input shape, fn(x) -> new_sizes, expected: ops that must not appear)
RESHAPES = [
    ((3, 4), lambda x: (12,), ()),
    ((3, 4), lambda x: (2, 6), ()),
    ((2, 3, 4), lambda x: (4, 6), ()),
    (("B", 3, 4), lambda x: (_b(x, 0), 12), ("Shape",)),        # 0 copies B
    (("B", 12), lambda x: (_b(x, 0), 3, 4), ("Shape",)),
    (("B", 3), lambda x: (3, _b(x, 0)), ("Shape",)),             # -1 infers B
    (("B", 4), lambda x: (_b(x, 0) * 4,), ("Shape",)),
    (("B", 4), lambda x: (2, _b(x, 0) * 2), ("Shape",)),
    # Not 0 and -1 together: -1 next to B = 0 cannot be inferred (empty batch).
    (("B", "C", 4), lambda x: (_b(x, 0), _b(x, 1) * 4), ()),
    (("B", "C"), lambda x: (_b(x, 1), _b(x, 0)), ()),           # needs runtime dims
    (("B", "C", 2), lambda x: (_b(x, 1), 2, _b(x, 0)), ()),
]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("case", RESHAPES, ids=lambda c: str(c[0]))
def test_reshape(case, dtype, x64):
    in_shape, new_sizes, forbidden = case
    model = check(lambda x: lax.reshape(x, new_sizes(x)), [in_shape], [dtype], x64=x64)
    assert "Reshape" in op_types(model)
    for op in forbidden:
        assert op not in op_types(model)


def test_reshape_runtime_dims_differ_per_batch():
    # (B, C) -> (C, B) with B != C at run time.
    import onnxruntime as ort
    import jaxonnx
    from helpers import symbolic_specs
    model = jaxonnx.to_onnx(lambda x: lax.reshape(x, (x.shape[1], x.shape[0])),
                            symbolic_specs([("B", "C")], [np.float32]))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (got,) = sess.run(None, {sess.get_inputs()[0].name: x})
    np.testing.assert_array_equal(got, x.reshape(3, 2))


def test_reshape_zero_size_sets_allowzero():
    model = check(lambda x: lax.reshape(x, (4, 0)), [(0, 4)])
    (node,) = [n for n in model.graph.node if n.op_type == "Reshape"]
    assert any(a.name == "allowzero" and a.i == 1 for a in node.attribute)


def test_reshape_same_shape_emits_no_node():
    model = check(lambda x: lax.reshape(x, x.shape) * 2.0, [("B", 4)])
    assert op_types(model) == ["Mul"]


def test_reshape_int_and_bool():
    check(lambda x: lax.reshape(x, (x.shape[0] * 3,)), [("B", 3)], [np.int32])
    check(lambda x: lax.reshape(x, (x.shape[0] * 3,)), [("B", 3)], [np.bool_])


# jnp-level reshapes of a symbolic batch: one Reshape whose target is a constant
# (0 copies B, -1 infers the one symbolic dim), so no runtime Shape.
JNP_RESHAPES = [
    (("B", 8), lambda x: jnp.reshape(x, (-1, 4))),
    (("B", 8), lambda x: x.reshape(x.shape[0] * 2, 4)),
    (("B", 8), lambda x: jnp.reshape(x, (2, -1, 2))),
    (("B", 2, 4), lambda x: x.reshape(x.shape[0], 8)),
    (("B", 2, 4), lambda x: x.reshape(x.shape[0], -1)),
    (("B", 2, 4), lambda x: jnp.ravel(x)),
]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("case", JNP_RESHAPES, ids=lambda c: str(c[0]))
def test_jnp_reshape_symbolic(case, dtype, x64):
    shape, fn = case
    model = check(fn, [shape], [dtype], x64=x64)
    assert op_types(model) == ["Reshape"]


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_jnp_expand_dims_symbolic_is_one_unsqueeze(axis):
    model = check(lambda x: jnp.expand_dims(x, axis), [("B", 8)])
    assert op_types(model) == ["Unsqueeze"]

# ----------------------------------------------------------------- squeeze --

SQUEEZES = [
    ((1, 3, 1, 4), (0, 2)),
    ((3, 1), (1,)),
    (("B", 1, 4), (1,)),
    ((1, "B"), (0,)),
    ((1, 1), (0, 1)),
]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("shape,dims", SQUEEZES, ids=str)
def test_squeeze(shape, dims, dtype, x64):
    model = check(lambda x: lax.squeeze(x, dims), [shape], [dtype], x64=x64)
    assert op_types(model) == ["Squeeze"]


# --------------------------------------------------------------- transpose --

TRANSPOSES = [
    ((2, 3, 4), (2, 0, 1)),
    ((3, 4), (1, 0)),
    (("B", 3, 4), (0, 2, 1)),
    (("B", 3, 4), (2, 1, 0)),
]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("shape,perm", TRANSPOSES, ids=str)
def test_transpose(shape, perm, dtype, x64):
    model = check(lambda x: lax.transpose(x, perm), [shape], [dtype], x64=x64)
    assert op_types(model) == ["Transpose"]


# Size-1 axes: moving only them moves no data (one Reshape); else the
# Transpose runs without them (onnxruntime walks a size-1 axis element by
# element), between a Squeeze and an Unsqueeze. (shape, perm, expected ops)
UNIT_TRANSPOSES = [
    (("B", 1, 2, 4), (0, 2, 1, 3), ["Reshape"]),
    ((3, 1, 4, 1), (3, 0, 2, 1), ["Reshape"]),
    (("B", 2, 6, 1, 4), (0, 1, 4, 3, 2), ["Squeeze", "Transpose", "Unsqueeze"]),
    (("B", 1, 2, 4, 3), (0, 2, 4, 1, 3), ["Squeeze", "Transpose", "Unsqueeze"]),
    ((1, 3, 1, 4), (3, 2, 1, 0), ["Squeeze", "Transpose", "Unsqueeze"]),
]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("shape,perm,ops", UNIT_TRANSPOSES, ids=str)
def test_transpose_with_size_one_axes(shape, perm, ops, dtype, x64):
    model = check(lambda x: lax.transpose(x, perm), [shape], [dtype], x64=x64)
    assert op_types(model) == ops
    transposes = [n for n in model.graph.node if n.op_type == "Transpose"]
    for n in transposes:  # of the axes that are not 1 only
        assert len(n.attribute[0].ints) == sum(d != 1 for d in shape)


def test_transpose_identity_emits_no_node():
    model = check(lambda x: lax.transpose(x, (0, 1)) * 2.0, [("B", 4)])
    assert op_types(model) == ["Mul"]


@pytest.mark.parametrize("opset", [18, 19, 20, 21, 22, 23])
def test_shape_ops_every_opset(opset):
    def fn(x):
        y = lax.broadcast_in_dim(x, (x.shape[0], 2, 3, 4), (0, 2, 3))
        y = lax.reshape(y, (x.shape[0], 2, 12))
        y = lax.transpose(y, (0, 2, 1))
        return lax.squeeze(lax.broadcast_in_dim(y, (1,) + y.shape, (1, 2, 3)), (0,))
    check(fn, [("B", 3, 4)], opset=opset)


# ----------------------------------------------------- stack, tile, dims --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("shape", [(2, 3), ("B", 3)], ids=str)
def test_stack(shape, axis, dtype, x64):
    model = check(lambda x, y: jnp.stack([x, y, x * y], axis=axis), [shape, shape],
                  [dtype, dtype], x64=x64)
    assert op_types(model).count("Concat") == 1


def test_stack_one_operand_is_one_unsqueeze():
    model = check(lambda x: jnp.stack([x], axis=1), [("B", 3)])
    assert op_types(model) == ["Unsqueeze"]


@pytest.mark.parametrize("dtype,x64", FLOATS + [(np.int32, False), (np.bool_, False)],
                         ids=["f32", "f64", "i32", "bool"])
@pytest.mark.parametrize("reps", [(2,), (1, 3), (2, 1, 2)], ids=str)
@pytest.mark.parametrize("shape", [(2, 3), ("B", 3)], ids=str)
def test_tile(shape, reps, dtype, x64):
    model = check(lambda x: jnp.tile(x, reps), [shape], [dtype], x64=x64)
    assert "Tile" in op_types(model)


def test_tile_by_ones_emits_no_node():
    model = check(lambda x: lax.tile_p.bind(x, reps=(1, 1)) * 2.0, [("B", 3)])
    assert op_types(model) == ["Mul"]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_mean_and_var_over_a_symbolic_axis_use_the_runtime_dim(dtype, x64):
    # jnp.mean over B divides by dim_as_value(B), a runtime value, not a number.
    model = check(lambda x: (jnp.mean(x, axis=0), jnp.var(x, axis=0), jnp.std(x)), [("B", 3)],
                  [dtype], x64=x64)
    assert "Shape" in op_types(model)


@pytest.mark.parametrize("x64", [False, True], ids=["i32", "i64"])
def test_dim_as_value_of_an_expression(x64):
    # 2*B - 1 as an integer scalar, in JAX's index dtype.
    from jax._src import core as jax_core
    def fn(x):
        return jax_core.dimension_as_value(2 * x.shape[0] - 1) + jnp.zeros((), jnp.int32)
    check(fn, [("B", 3)], x64=x64)


# Reshape's -1 cannot be inferred next to a dim that is 0 at run time (a
# copied batch dim of an empty batch): then the dim takes its runtime value.
@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("fn,shape", [
    (lambda x: x.reshape(x.shape[0], x.shape[1] * 2), ("B", "N", 2)),
    (lambda x: x.reshape(-1, 2), ("B", 3, 2)),
    (lambda x: x.reshape(x.shape[0], x.shape[1] * 2, 3), ("B", "N", 2, 3)),
], ids=["copied_batch", "minus_one", "two_symbols"])
def test_reshape_of_an_empty_batch(fn, shape, x64):
    check(fn, [shape], x64=x64, batches=(0, 1, 3))


# reshape with `dimensions`: the operand is transposed to that order first
# (jnp.column_stack and dstack emit it).
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("fn,shapes", [
    (lambda x: lax.reshape(x, (x.shape[0] * 3, 4), dimensions=(0, 2, 1)), [("B", 4, 3)]),
    (lambda x: lax.reshape(x, (12, x.shape[0]), dimensions=(1, 2, 0)), [("B", 3, 4)]),
    (lambda x: jnp.column_stack([x, x[:, 0]]), [(5, "B")]),
    (lambda x, y: jnp.dstack([x, y]), [("B", 3), ("B", 3)]),
], ids=["perm021", "perm120", "column_stack", "dstack"])
def test_transposing_reshape(fn, shapes, dtype, x64):
    model = check(fn, shapes, [dtype] * len(shapes), x64=x64)
    assert "Transpose" in op_types(model) or "Concat" in op_types(model)
