"""lax_gather plugin: gather (every form jnp indexing produces) and dynamic_slice."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxonnx
from helpers import check as _check, check_harness, op_types, random_input

FLOATS = [(np.float32, False), (np.float64, True)]
FLOAT_IDS = ["f32", "f64"]
SHAPES = {"static": 4, "sym": "B"}
# (batch, dtype, x64): both dtypes under a symbolic batch, f32 for the static one.
CASES = [pytest.param(4, np.float32, False, id="static-f32"), pytest.param("B", np.float32, False, id="sym-f32"),
         pytest.param("B", np.float64, True, id="sym-f64")]


def check(fn, *args, **kw):
    # jit: the JAX reference runs as one compiled call instead of op by op.
    return _check(jax.jit(fn), *args, **kw)


def indices_in(lo, hi):
    """Inputs: floats at random, integer inputs (indices) uniform in [lo, hi)."""
    def gen(shape, dtype, rng):
        if np.issubdtype(np.dtype(dtype), np.integer):
            return rng.integers(lo, hi, size=shape).astype(dtype)
        return random_input(shape, dtype, rng)
    return gen


# ------------------------------------------------------- slicing as gather --

def slicing_forms(x):
    # With a symbolic dim anywhere, JAX emits these as gather (not slice).
    return (x[:, 1:], x[:, 1:-1:2], x[0:1], jnp.diff(x), x[:, 2], x[:, None, 2:5], x[:, ::-1], x[-1])


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("batch", SHAPES.values(), ids=SHAPES.keys())
def test_slicing_forms(dtype, x64, batch):
    check(slicing_forms, [(batch, 6)], [dtype], x64=x64)


def test_slice_prefix_is_a_slice():
    model = check(lambda x: x[:, 1:], [("B", 6)])
    assert op_types(model) == ["Slice"]
    model = check(lambda x: jnp.diff(x), [("B", 6)])
    assert sorted(op_types(model)) == ["Slice", "Slice", "Sub"]
    # A strided slice comes as iota-built indices: one Gather on folded constants.
    model = check(lambda x: x[:, 1:-1:2], [("B", 6)])
    assert op_types(model) == ["Gather"]
    model = check(lambda x: x[:, 2], [("B", 6)])
    assert "Gather" not in op_types(model) and "Slice" in op_types(model)


def test_slicing_opset18():
    check(lambda x: (x[:, 1:], x[:, 1:-1:2], jnp.diff(x, axis=0)), [("B", 6)], opset=18)


# ----------------------------------------------------------- index arrays --

def index_forms(x, i, j):
    # x: (B, 5, 6); i: (3,), j: (N, 1) with N the batch
    return (x[:, i],            # Gather on axis 1
            x[:, :, i],         # Gather on the last axis
            x[:, i, j],         # advanced indexing, broadcast (N, 3): GatherND
            x[:, j, 1:4],       # index + slice: a window on an indexed axis
            x[j[:, 0], :, i[:, None]],  # mixed axes
            x[..., i],
            jnp.take(x, i, axis=2))


@pytest.mark.parametrize("batch,dtype,x64", CASES)
def test_index_arrays(batch, dtype, x64):
    check(index_forms, [(batch, 5, 6), (3,), (batch, 1)], [dtype, np.int32, np.int32], x64=x64,
          make_inputs=indices_in(-5, 5))


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_index_first_axis_symbolic_indices(dtype, x64):
    # x[idx] and x[i, j] with a batch of indices into a static table.
    check(lambda x, i: (x[i], x[i, i[::-1]], x[i][:, None]), [(5, 6), ("B",)], [dtype, np.int32], x64=x64,
          make_inputs=indices_in(-5, 5))


@pytest.mark.parametrize("idx_dtype,x64", [(np.uint8, False), (np.int64, True), (np.int16, False)],
                         ids=["u8", "i64", "i16"])
def test_index_dtypes(idx_dtype, x64):
    check(lambda x, i: (x[i], jnp.take(x, i, axis=1)), [(5, 5), ("B", 2)], [np.float32, idx_dtype], x64=x64,
          make_inputs=indices_in(0, 5))


# ------------------------------------------------------ take / modes / fill --

@pytest.mark.parametrize("batch,dtype,x64", CASES)
def test_take_modes(batch, dtype, x64):
    # Indices well out of range: fill gives NaN, clip clamps, wrap takes mod.
    def f(t, ids):
        t = jnp.asarray(t)
        return (jnp.take(t, ids, axis=0),
                jnp.take(t, ids, axis=0, mode="clip"),
                jnp.take(t, ids, axis=0, mode="wrap"),
                jnp.take(t, ids, axis=1, mode="fill", fill_value=-1.5),
                t.at[ids].get(mode="fill"),
                t.at[ids].get(mode="clip"))
    check(f, [(10, 4), (batch, 5)], [dtype, np.int32], x64=x64, make_inputs=indices_in(-25, 25))


def test_fill_int_and_bool():
    # Default fills: int min, uint max, True; Where runs in a wider type for bool / int16.
    dtypes = [np.int32, np.bool_, np.int16, np.uint8]

    def f(*ts):
        i = ts[-1]
        return tuple((jnp.asarray(t).at[i].get(mode="fill"), jnp.asarray(t).at[:, i].get(mode="fill"))
                     for t in ts[:-1])
    check(f, [(4, 4)] * 4 + [("B",)], dtypes + [np.int32], make_inputs=indices_in(-9, 9))


def test_fill_uint64_and_int64_exact():
    # uint64's default fill, 2**64 - 1, is above int64's max: the param crosses
    # the binding as its bits and the fill is exact; int64's is its min.
    def f(u, i, ids):
        return (jnp.take(u, ids, mode="fill"), jnp.take(i, ids, mode="fill"),
                jnp.take(u, ids, mode="fill", fill_value=np.uint64(2**64 - 2)),
                u.at[ids].get(mode="fill", fill_value=2**63))

    def gen(shape, dtype, rng):
        if dtype == np.uint64:
            return rng.integers(2**63, 2**64 - 1, size=shape, dtype=np.uint64)
        if shape == (6,):
            return rng.integers(-2**63, 2**63 - 1, size=shape, dtype=np.int64)
        return rng.integers(-9, 9, size=shape).astype(dtype)
    check(f, [(6,), (6,), ("B",)], [np.uint64, np.int64, np.int32], x64=True, make_inputs=gen)


def test_int_param_beyond_64_bits_is_refused_clearly():
    # An int param that fits neither int64 nor uint64 cannot cross the binding:
    # a ConversionError that says so, not pybind11's cast error.
    dnums = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
    f = lambda x, i: lax.gather(x, i, dnums, (1,), mode="fill", fill_value=2**70)
    with pytest.raises(jaxonnx.ConversionError, match="does not fit 64 bits"):
        with jax.enable_x64(True):
            jaxonnx.to_onnx(f, [jax.ShapeDtypeStruct((6,), np.uint64), jax.ShapeDtypeStruct((3, 1), np.int32)],
                            enable_double_precision=True)


@pytest.mark.parametrize("batch,dtype,x64", CASES)
def test_promise_in_bounds_clamps_as_xla(batch, dtype, x64):
    # XLA clamps starts the promise did not keep (as dynamic_slice does), where
    # ONNX Gather would wrap a negative index or fail past the end.
    dn = lax.GatherDimensionNumbers
    promise = lax.GatherScatterMode.PROMISE_IN_BOUNDS

    def f(x, i1, i2, s):
        return (
            # one indexed axis, a window of 5 on an axis of 10 (starts up to 8)
            lax.gather(x, i1, dn(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(1,),
                                 operand_batching_dims=(0,), start_indices_batching_dims=(0,)),
                       (1, 5), mode=promise),
            # point gathers on two axes (GatherND)
            lax.gather(x, i2, dn(offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(0, 1)),
                       (1, 1), mode=promise),
            # one axis, x[idx] (Gather)
            lax.gather(x, i1[:, :1], dn(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)),
                       (1, 10), mode=promise),
            # no batch position (Slice)
            lax.gather(x, s, dn(offset_dims=(0, 1), collapsed_slice_dims=(), start_index_map=(0, 1)),
                       (1, 5), mode=promise),
        )
    check(f, [(batch, 10), (batch, 1), (4, 2), (2,)], [dtype, np.int32, np.int32, np.int32], x64=x64,
          make_inputs=indices_in(-3, 12))


@pytest.mark.parametrize("name", [
    "batchdims_shape_3_10_start_indices_shape_3_2_slice_sizes_1_5_enable_xla_True",
    "op_shape_10_10_10_offset_dims_2_3_4_start_index_map_1_2_start_indices_shape_1_4_2_slice_sizes_2_2_3_"
    "enable_xla_True",
    "op_shape_10_10_10_offset_dims_2_3_4_start_index_map_1_2_start_indices_shape_1_4_2_slice_sizes_2_3_3_"
    "enable_xla_True"], ids=["batching_dims", "window_2_2_3", "window_2_3_3"])
def test_catalog_promise_in_bounds(name):
    # The catalog's own out-of-range starts (-1; 8 with a slice of 5 on 10).
    check_harness("gather", name)


@pytest.mark.parametrize("dtype,x64,opset", [(np.float32, False, 18), (np.float64, True, 23)], ids=FLOAT_IDS)
def test_fill_and_clip_multi_axis(dtype, x64, opset):
    # Two indexed axes: the mask needs both components in range.
    def f(x, i, j):
        x = jnp.asarray(x)
        return x.at[:, i, j].get(mode="fill"), x.at[:, i, j].get(mode="clip"), x.at[i, j].get(mode="fill")
    check(f,
          [("B", 5, 6), (4,), (4,)], [dtype, np.int32, np.int32], x64=x64, make_inputs=indices_in(-8, 8),
          opset=opset)


@pytest.mark.parametrize("batch,dtype,x64", CASES)
def test_take_along_axis(batch, dtype, x64):
    def f(x, i2, i3, x3):
        return (jnp.take_along_axis(x, i2, axis=1),
                jnp.take_along_axis(x3, i3, axis=1),
                jnp.take_along_axis(x3, i3[:, :, :1], axis=1),   # broadcast along the last axis
                jnp.take_along_axis(x, i2, axis=1, mode="clip"))
    model = check(f, [(batch, 6), (batch, 3), (batch, 3, 4), (batch, 6, 4)],
                  [dtype, np.int32, np.int32, dtype], x64=x64, make_inputs=indices_in(-8, 8))
    assert "GatherElements" in op_types(model)


def test_take_along_axis_structure():
    model = check(lambda x, i: jnp.take_along_axis(x, i, axis=1, mode="promise_in_bounds"),
                  [("B", 6), ("B", 3)], [np.float32, np.int32], make_inputs=indices_in(0, 6))
    assert "GatherElements" in op_types(model) and "Transpose" not in op_types(model)


def test_fill_on_slice_path():
    # No batch positions, FILL_OR_DROP: a whole slice is valid or all fill.
    dnums = lax.GatherDimensionNumbers(offset_dims=(0, 1), collapsed_slice_dims=(), start_index_map=(1,))

    def f(x, s):
        return (lax.gather(x, s, dnums, (x.shape[0], 3), mode="fill"),
                lax.gather(x, s, dnums, (x.shape[0], 3), mode="clip"))
    check(f, [("B", 6), (1,)], [np.float32, np.int32], make_inputs=indices_in(-3, 7), batches=(1, 7, 2))


@pytest.mark.parametrize("batch,dtype,x64", CASES)
def test_gather_every_indexed_axis_whole(batch, dtype, x64):
    # Every start clamps to 0: each batch position reads the same (sliced) operand, and
    # FILL_OR_DROP keeps only the positions whose starts are all 0. With operand
    # batching dims the paired axis is not broadcast.
    whole = lax.GatherDimensionNumbers(offset_dims=(2, 3, 4), collapsed_slice_dims=(), start_index_map=(1, 2))
    collapsed = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(0,), start_index_map=(2,))
    batching = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(2,),
                                          operand_batching_dims=(0,), start_indices_batching_dims=(0,))

    def f(x, i2, i1):
        return (lax.gather(x, i2, whole, (1, 5, 4), mode="promise_in_bounds"),
                lax.gather(x, i2, whole, (x.shape[0], 5, 4), mode="fill"),
                lax.gather(x, i1, collapsed, (1, 3, 4), mode="clip"),
                lax.gather(x, i1, batching, (1, 5, 4), mode="fill"))
    model = check(f, [(batch, 5, 4), (1, 3, 2), (batch, 1)], [dtype, np.int32, np.int32], x64=x64,
                  make_inputs=indices_in(-1, 2))
    assert "Expand" in op_types(model)


@pytest.mark.parametrize("enable_xla", ["True", "False"])
def test_catalog_every_indexed_axis_whole(enable_xla):
    check_harness("gather", "op_shape_10_10_10_offset_dims_2_3_4_start_index_map_1_2_start_indices_shape_1_4_2_"
                  f"slice_sizes_10_10_10_enable_xla_{enable_xla}")


def test_gather_kept_and_windowed_dims():
    # Size-1 slices kept (not collapsed) and a short window on a non-indexed axis.
    kept = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0,))
    win = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    two = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(1,), start_index_map=(1, 0))

    def f(x, i, ij):
        return (lax.gather(x, i, kept, (1, 6), mode="clip"),
                lax.gather(x, i, win, (1, 3), mode="fill"),
                lax.gather(jnp.stack([x, -x]), ij, two, (1, 1, 6), mode="clip"))
    check(f, [(5, 6), ("B", 1), ("B", 2)], [np.float32, np.int32, np.int32], make_inputs=indices_in(-2, 6))


def test_vmapped_dynamic_slice_and_index():
    # Batching dims plus windows on indexed axes (clip mode).
    ds = jax.vmap(lambda x, i: lax.dynamic_slice(x, (i, 0), (3, 2)))
    ix = jax.vmap(lambda x, i: x[i])
    model = check(lambda x, i: (ds(x, i), ix(x, i)), [("B", 6, 4), ("B",)], [np.float32, np.int32],
                  make_inputs=indices_in(-8, 8))
    assert "GatherND" in op_types(model)


# ---------------------------------------------------------- dynamic_slice --

@pytest.mark.parametrize("batch,dtype,x64", CASES)
def test_dynamic_slice(batch, dtype, x64):
    # Starts well outside [0, dim - size] are clamped as JAX does.
    def f(x, i, j):
        return (lax.dynamic_slice(x, (0, i), (x.shape[0], 3)),
                lax.dynamic_slice_in_dim(x, j, 2, axis=1),
                lax.dynamic_slice(x[:, :, None], (0, i, 0), (x.shape[0], 4, 1)),
                lax.dynamic_index_in_dim(x, i, axis=1, keepdims=False))
    it = np.int64 if x64 else np.int32  # the literal starts JAX adds are of the default int type
    check(f, [(batch, 6), (), ()], [dtype, it, it], x64=x64, make_inputs=indices_in(-9, 9))


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_traced_scalar_index(dtype, x64):
    # x[i] with a traced scalar: dynamic_slice on the static axis, gather otherwise.
    check(lambda x, y, i: (x[i], x[i, 1:3], y[:, i]), [(5, 6), ("B", 6), ()], [dtype, dtype, np.int32],
          x64=x64, make_inputs=indices_in(-5, 5))


def test_dynamic_slice_static_and_literal_starts():
    model = check(lambda x: lax.dynamic_slice(x, (1, 9), (2, 3)), [(4, 6)])
    assert op_types(model) == ["Slice"]
    check(lambda x, i: lax.dynamic_slice(x, (i, 2), (3, 2)), [(5, 6), ()], [np.float32, np.int64],
          x64=True, make_inputs=indices_in(-9, 9), opset=18)


# ------------------------------------------------------------ end to end --

def test_token_embedding():
    from flax import nnx
    emb = nnx.Embed(num_embeddings=50, features=8, rngs=nnx.Rngs(0))
    table = jax.random.normal(jax.random.PRNGKey(1), (50, 8))

    def f(ids):
        return emb(ids), jnp.take(table, ids, axis=0)
    model = check(f, [("B", 7)], [np.int32], make_inputs=indices_in(0, 50))
    assert "Gather" in op_types(model)
