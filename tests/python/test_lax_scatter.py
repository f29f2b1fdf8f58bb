"""lax_scatter plugin: scatter / scatter-add / scatter-sub / scatter-mul / scatter-min /
scatter-max (x.at[...].set/add/subtract/multiply/min/max) and dynamic_update_slice.

The JAX references are jitted: eager scatters compile one XLA program each,
which would dominate this file's runtime.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from helpers import check, check_harness, op_types, random_input
from jaxonnx.testing import Variant
from jaxonnx.testing import check as check_variants

F32, F64, I32 = (np.float32, False), (np.float64, True), (np.int32, False)
Mode = lax.GatherScatterMode


def indices_in(lo, hi):
    """Input generator: int inputs are drawn from [lo, hi) (as indices: duplicates,
    negatives and out-of-range values); the rest are random."""

    def gen(shape, dtype, rng):
        if np.issubdtype(np.dtype(dtype), np.integer):
            return rng.integers(lo, hi, size=shape).astype(dtype)
        return random_input(shape, dtype, rng)

    return gen


@jax.jit
def row_ops(x, i, u):
    """Every scatter primitive on whole rows, default mode (FILL_OR_DROP) and clip."""
    return (
        x.at[i].set(u),
        x.at[i].add(u),
        x.at[i].subtract(u),
        x.at[i].multiply(u),
        x.at[i].min(u),
        x.at[i].max(u),
        x.at[i].set(u, mode="clip"),
        x.at[i].add(u, mode="drop"),
        x.at[i].max(u, mode="clip"),
    )


@pytest.mark.parametrize("dtype,x64,n,opset", [
    (*F32, "B", 23), (*F64, 5, 23), (*F64, "B", 23), (*I32, "B", 23), (*F32, 5, 18),
])
def test_row_updates(dtype, x64, n, opset):
    # Indices in [-7, 9): negatives are normalized by jnp, the rest may be out
    # of range for every batch size; duplicates are frequent.
    model = check(row_ops, [(n, 4), (8,), (8, 4)], [dtype, np.int32, dtype], x64=x64,
                  make_inputs=indices_in(-7, 9), opset=opset)
    assert set(op_types(model)) >= {"ScatterND", "Pad", "Slice"}


@jax.jit
def window_ops(x, i, j, u2, u3, xb, ib, ub):
    """Columns, element pairs, partial windows (general index grids), and the
    operand_batching_dims / scatter_indices_batching_dims vmap makes."""
    return (
        x.at[:, i].set(u2),               # window dim before the scatter dim
        x.at[:, i].add(u2, mode="clip"),
        x.at[i, j].multiply(u3),          # two scatter dims, no window
        x.at[i, j].set(u3, mode="clip"),
        x.at[1:3, i].min(u2[1:3]),        # partial window along dim 0
        x.at[1:3, i].max(u2[1:3], mode="clip"),
        jax.vmap(lambda x, i, u: x.at[i].add(u))(xb, ib, ub),
        jax.vmap(lambda x, i, u: x.at[:, i].set(u.T))(xb, ib, ub),
    )


@pytest.mark.parametrize("dtype,x64,n", [(*F32, 6), (*F32, "B"), (*F64, "B"), (*I32, 6)])
def test_window_updates(dtype, x64, n):
    check(window_ops, [(n, 5), (3,), (3,), (n, 3), (3,), (n, 4, 4), (n, 3), (n, 3, 4)],
          [dtype, np.int32, np.int32, dtype, dtype, dtype, np.int32, dtype],
          x64=x64, make_inputs=indices_in(-6, 8), batches=(7,))


@jax.jit
def nd_ops(x, i, u, j, k, v):
    return (
        x.at[:, i, 1:3].max(u),          # scatter dim between two window dims
        x.at[..., j].multiply(3.0),      # the scatter dim last
        x[0].at[k].set(v),               # a 2-D array of row indices
    )


@pytest.mark.parametrize("dtype,x64", [F32, F64])
def test_rank3_and_2d_indices(dtype, x64):
    check(nd_ops, [("B", 5, 4), (3,), ("B", 3, 2), (2,), (2, 3), (2, 3, 4)],
          [dtype, np.int32, dtype, np.int32, np.int32, dtype], x64=x64,
          make_inputs=indices_in(-6, 7), batches=(2,))


def test_duplicates_last_set_wins_and_reductions_combine():
    i = np.array([1, 3, 1, 1, -9, 9, 3], np.int32)

    @jax.jit
    def fn(x, u):
        return x.at[i].set(u), x.at[i].add(u), x.at[i].multiply(u), x.at[i].min(u), x.at[i].max(u)

    check(fn, [(5,), (7,)])


def test_min_max_propagate_nan():
    # onnxruntime's ScatterND max/min lets a later update replace a NaN.
    i = np.array([0, 0, 1, 2, 2, 3], np.int32)
    x = np.array([1, np.nan, 3, 4, 5], np.float32)
    u = np.array([np.nan, 2, 7, np.nan, -1, 0], np.float32)

    @jax.jit
    def fn(x, u):
        return x.at[i].max(u), x.at[i].min(u)

    check(fn, [(5,), (6,)], make_inputs=lambda s, d, r: x if s == (5,) else u)


def scatter_dn(**kw):
    return lax.ScatterDimensionNumbers(**kw)


def test_partial_windows_out_of_bounds():
    # A window partly out of range is dropped whole (FILL_OR_DROP; XLA's CPU
    # backend does the same for PROMISE_IN_BOUNDS) or clamped to fit (CLIP).
    dn = scatter_dn(update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,))

    @jax.jit
    def fn(x, i, u):
        return [f(x, i[:, None], u, dn, mode=mode)
                for mode in (Mode.FILL_OR_DROP, Mode.CLIP, Mode.PROMISE_IN_BOUNDS)
                for f in (lax.scatter, lax.scatter_add, lax.scatter_sub)]

    check(fn, [(8,), (6,), (6, 3)], [np.float32, np.int32, np.float32], make_inputs=indices_in(-2, 9))


@jax.jit
def dus_ops(x, k, j, m, u, v):
    return (lax.dynamic_update_slice(x, u, (k, j, m)),
            lax.dynamic_update_slice(x, v, (j, k, jnp.int32(0))),  # full rows: ScatterND slices
            x.at[0, m].set(v[0, 0]),                          # traced scalar index
            lax.dynamic_update_slice_in_dim(x, v, m, 1))


@pytest.mark.parametrize("dtype,x64,n", [(*F32, 3), (*F32, "B"), (*F64, 3), (*F64, "B"), (*I32, 3)])
def test_dynamic_update_slice(dtype, x64, n):
    # Start indices out of range are clamped to [0, dim - update_dim].
    check(dus_ops, [(n, 6, 4), (), (), (), (1, 2, 3), (1, 1, 4)],
          [dtype, np.int32, np.int32, np.int32, dtype, dtype], x64=x64,
          make_inputs=indices_in(-4, 9), batches=(1, 7, 2))


def test_dynamic_update_slice_symbolic_update():
    @jax.jit
    def fn(x, u, k):
        return lax.dynamic_update_slice(x, u, (k, jnp.int32(1)))

    check(fn, [("B", 6), ("B", 2), ()], [np.float32, np.float32, np.int32],
          make_inputs=indices_in(-3, 9))


def test_row_set_is_a_single_scatternd():
    # x.at[i].set(rows) with in-range promises needs no index arithmetic.
    @jax.jit
    def fn(x, i, u):
        return x.at[i].set(u, mode="promise_in_bounds", unique_indices=True)

    model = check(fn, [(5, 4), (3,), (3, 4)], [np.float32, np.int32, np.float32],
                  make_inputs=indices_in(0, 5))
    ops = op_types(model)
    assert "ScatterND" in ops and "Gather" not in ops and "Range" not in ops, ops

    @jax.jit
    def clip(x, i, u):
        return x.at[i].set(u, mode="clip")

    ops = op_types(check(clip, [(5, 4), (3,), (3, 4)], [np.float32, np.int32, np.float32],
                         make_inputs=indices_in(-3, 8)))
    assert ops.count("ScatterND") == 1 and "Pad" not in ops and "Gather" not in ops, ops


def test_overlapping_windows_apply_in_scatter_index_order():
    # The window dim comes before the scatter dim in `updates`; whole windows
    # still apply in scatter-index order (the last one wins), as in XLA.
    dn = scatter_dn(update_window_dims=(0,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,))
    i = np.array([[0], [1], [2], [1], [0]], np.int32)

    @jax.jit
    def fn(x, u):
        return lax.scatter(x, i, u, dn, mode="clip"), lax.scatter_mul(x, i, u, dn, mode="clip")

    check(fn, [(6,), (3, 5)])


def test_integer_wraparound():
    i = np.array([0, 0, 0, 1, 1], np.int32)

    @jax.jit
    def fn(x, u):
        return x.at[i].add(u), x.at[i].multiply(u), x.at[i].subtract(u)

    big = lambda s, d, r: r.integers(2**28, 2**31 - 1, size=s).astype(d)
    check(fn, [(3,), (5,)], [np.int32, np.int32], make_inputs=big)


def test_other_dtypes():
    # bool min/max go through uint8, int16/uint16 through int32, float16
    # reductions through float32 (onnxruntime kernels); int8 products wrap.
    dtypes = [np.bool_, np.int8, np.int16, np.uint16, np.float16]

    @jax.jit
    def fn(i, *xu):
        out = []
        for x, u in zip(xu[::2], xu[1::2]):
            out += [x.at[i].set(u), x.at[i].max(u), x.at[i].min(u)]
            if x.dtype != jnp.bool_:
                out += [x.at[i].add(u), x.at[i].multiply(u), x.at[i].subtract(u)]
        return out

    shapes = [(4,)] + [(5, 2), (4, 2)] * len(dtypes)
    check(fn, shapes, [np.int32] + [d for d in dtypes for _ in (0, 1)], make_inputs=indices_in(-6, 7))


# ------------------------------------------------------- complex min / max --

def _tied_complex(shape, dtype, rng):
    """Parts from a few small integers (real parts tie often, so the imaginary
    part decides); int inputs are indices in [-2, 8) (dropped, clipped, duplicated)."""
    if np.issubdtype(np.dtype(dtype), np.integer):
        return rng.integers(-2, 8, size=shape).astype(dtype)
    return (rng.integers(-2, 3, size=shape) + 1j * rng.integers(-2, 3, size=shape)).astype(dtype)


@jax.jit
def complex_min_max(z, i, u):
    # JAX orders complex values lexicographically: real part, then imaginary.
    return (z.at[i].max(u), z.at[i].min(u),
            z.at[i].max(u, mode=Mode.CLIP), z.at[i, 1].min(u[:, 0]),
            z.at[i[:, None], jnp.arange(4)[None, :3]].max(u[:, :3]))


@pytest.mark.parametrize("cdtype,real", [("complex64", "float32"), ("complex128", "float64")], ids=["c64", "c128"])
def test_complex_scatter_min_max(cdtype, real):
    check_variants(complex_min_max, [((6, 4), cdtype), (("B",), "int32"), (("B", 4), cdtype)],
                   variants=[Variant(real, False), Variant(real, True)], batches=(1, 5, 9),
                   make_inputs=_tied_complex)


@pytest.mark.parametrize("group", ["scatter_max", "scatter_min"])
def test_complex_scatter_min_max_catalog(group):
    check_harness(group, "dtypes_shape_complex64_5_scatterindices_0_2_updateshape_2_dimension_numbers_"
                  "ScatterDimensionNumbers_update_window_dims_inserted_window_dims_0_scatter_dims_to_operand_"
                  "dims_0_operand_batching_dims_scatter_indices_batching_dims_indicesaresorted_False_unique"
                  "indices_False_mode_GatherScatterMode_FILL_OR_DROP_enablexla_True")
