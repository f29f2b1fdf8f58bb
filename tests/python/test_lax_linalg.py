"""lax_linalg plugin: cholesky, triangular_solve, lu, lu_pivots_to_permutation,
custom_linear_solve, and the jnp.linalg / jax.scipy.linalg functions built on them."""

import itertools

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from jax import lax

import jaxonnx
import jaxonnx._core as core
from jaxonnx import _plugins
from helpers import check, op_types, symbolic_specs

FLOATS = [(np.float32, False), (np.float64, True)]
FLOAT_IDS = ["f32", "f64"]
# Unrolled factorizations round differently from LAPACK's blocked kernels.
TOL = {np.float32: dict(rtol=1e-4, atol=1e-4), np.float64: dict(rtol=1e-9, atol=1e-9)}


def spd(shape, dtype, rng):
    """Square shapes: M M^T + n I (well conditioned, positive definite); else normal."""
    m = rng.standard_normal(size=shape)
    if shape[-1] != shape[-2]:
        return m.astype(dtype)
    n = shape[-1]
    return (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(dtype)


def spd_dirty_upper(shape, dtype, rng):
    """SPD plus small noise in the strict upper triangle (the raw primitive
    reads only the lower one and passes the upper one through)."""
    a = spd(shape, dtype, rng)
    return (a + 0.1 * np.triu(rng.standard_normal(size=shape), 1)).astype(dtype)


def triangular(shape, dtype, rng):
    """Square shapes: normal entries with a dominant diagonal of either sign."""
    x = rng.standard_normal(size=shape)
    if shape[-1] != shape[-2]:
        return x.astype(dtype)
    n = shape[-1]
    d = np.sign(rng.standard_normal(size=shape[:-1])) * (2 + np.abs(rng.standard_normal(size=shape[:-1])))
    x = x * (1 - np.eye(n)) + d[..., None] * np.eye(n)
    return x.astype(dtype)


def jcheck(fn, *args, **kwargs):
    """helpers.check with fn under jax.jit: the eager JAX reference of these
    unrolled-in-XLA linalg calls costs several times more compile time op by op."""
    return check(jax.jit(fn), *args, **kwargs)


# ---------------------------------------------------------------- cholesky --

# Each shape in one dtype (eager JAX compiles per shape; this keeps the file fast).
F32, F64 = (np.float32, False), (np.float64, True)


def _id(v):
    if isinstance(v, type):
        return {np.float32: "f32", np.float64: "f64"}[v]
    return "x64" if v is True else "x32" if v is False else str(v)


@pytest.mark.parametrize("shape,dtype,x64", [((1, 1), *F32), (("B", 5, 5), *F32), ((2, 3, 3), *F64),
                                             (("B", 2, 2), *F64)], ids=_id)
def test_cholesky(dtype, x64, shape):
    fn = lambda x: (jnp.linalg.cholesky(x), lax.linalg.cholesky_p.bind(x))
    model = jcheck(fn, [shape], [dtype], x64=x64, make_inputs=spd_dirty_upper, **TOL[dtype])
    assert "Sqrt" in op_types(model) and "Loop" not in op_types(model)


def test_cholesky_not_positive_definite_is_all_nan():
    # JAX (potrf info != 0) returns NaN for the whole matrix, upper triangle too.
    def inputs(shape, dtype, rng):
        a = spd(shape, dtype, rng)
        a[1::3] = -a[1::3]                        # negative first pivot
        a[2::3, 2, 2] = 0.0                       # a later pivot <= 0
        if shape[0] > 3:
            a[3, 1, 0] = np.nan                   # NaN propagates into a pivot
        return a

    def fn(x):
        return lax.linalg.cholesky_p.bind(x), jnp.linalg.cholesky(x)

    jcheck(fn, [("B", 3, 3)], make_inputs=inputs)
    a = inputs((7, 3, 3), np.float32, np.random.default_rng(1))
    raw = np.asarray(lax.linalg.cholesky_p.bind(a))
    assert np.isnan(raw[1]).all() and np.isnan(raw[2]).all() and not np.isnan(raw[0]).any()


# -------------------------------------------------------- triangular_solve --

COMBOS = list(itertools.product([True, False], repeat=4))  # left, lower, transpose_a, unit


def all_triangular_solves(a, bl, br):
    return tuple(
        lax.linalg.triangular_solve(a, bl if left else br, left_side=left, lower=lower,
                                    transpose_a=trans, unit_diagonal=unit)
        for left, lower, trans, unit in COMBOS)


@pytest.mark.parametrize("n,batch,dtype,x64", [(1, (), *F32), (4, ("B",), *F32), (3, (2,), *F64),
                                              (5, ("B",), *F64)], ids=_id)
def test_triangular_solve_all_params(dtype, x64, n, batch):
    # Every (left_side, lower, transpose_a, unit_diagonal) in one model.
    shapes = [(*batch, n, n), (*batch, n, 4), (*batch, 4, n)]
    model = jcheck(all_triangular_solves, shapes, [dtype] * 3, x64=x64, make_inputs=triangular,
                  **TOL[dtype])
    assert "Loop" not in op_types(model)


def test_triangular_solve_reads_only_its_triangle():
    # The other triangle, and the diagonal when unit_diagonal, are never read:
    # NaN there must not reach the result.
    def inputs(shape, dtype, rng):
        x = triangular(shape, dtype, rng)
        if shape[-1] == shape[-2]:
            n = shape[-1]
            x[..., np.triu_indices(n)[0], np.triu_indices(n)[1]] = np.nan
        return x

    def fn(a, bl, br):
        return tuple(lax.linalg.triangular_solve(a, bl if left else br, left_side=left, lower=True,
                                                 transpose_a=trans, unit_diagonal=True)
                     for left in (True, False) for trans in (True, False))

    jcheck(fn, [("B", 3, 3), ("B", 3, 2), ("B", 2, 3)], make_inputs=inputs, **TOL[np.float32])


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_scipy_solve_triangular(dtype, x64):
    def fn(a, b):
        return tuple(jsl.solve_triangular(a, b, lower=lower, trans=trans, unit_diagonal=unit)
                     for lower, trans, unit in [(True, 0, False), (False, 1, True), (True, "C", True),
                                                (False, "T", False)])

    jcheck(fn, [("B", 4, 4), ("B", 4, 2)], [dtype] * 2, x64=x64, make_inputs=triangular, **TOL[dtype])


# ---------------------------------------------------------------------- lu --

@pytest.mark.parametrize("shape,dtype,x64", [((1, 1), *F32), ((3, 5), *F32), (("B", 5, 5), *F32),
                                             ((2, 2), *F64), ((5, 3), *F64), ((2, 3, 3), *F64),
                                             (("B", 4, 2), *F64)], ids=_id)
def test_lu(dtype, x64, shape):
    # lu, pivots (int32) and permutation (int32) all compared; normal inputs pivot a lot.
    model = jcheck(lax.linalg.lu, [shape], [dtype], x64=x64, **TOL[dtype])
    assert "ArgMax" in op_types(model) and "Loop" not in op_types(model)


def test_lu_ties_and_zero_pivots():
    # Small integers: ties in |column| (getrf picks the FIRST maximal row),
    # zero columns (a zero pivot leaves the column unscaled, no 0/0), and
    # singular matrices. Exact in float64, so pivots must match exactly.
    def inputs(shape, dtype, rng):
        a = rng.integers(-2, 3, size=shape).astype(dtype)
        a[0] = 0.0                                   # all-zero matrix
        if shape[0] > 1:
            a[1, :, 0] = 0.0                         # zero first column
        if shape[0] > 2:
            a[2, :, 0] = [1, -1, 1, -1]              # four-way tie
        return a

    jcheck(lax.linalg.lu, [("B", 4, 4)], x64=True, make_inputs=inputs)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_scipy_lu(dtype, x64):
    # jax.scipy.linalg.lu builds P, L, U from lu's outputs (2-D only: vmapped).
    fn = lambda a: (jax.vmap(jsl.lu)(a), jsl.lu_factor(a))
    jcheck(fn, [("B", 3, 3)], [dtype], x64=x64, **TOL[dtype])


@pytest.mark.parametrize("shape,size", [((3,), 5), (("B", 4), 4), ((2, 2), 3)], ids=str)
def test_lu_pivots_to_permutation(shape, size):
    def pivots(shape, dtype, rng):
        k = np.arange(shape[-1])
        return (k + rng.integers(0, size - k, size=shape)).astype(dtype)  # pivots[k] in [k, size)

    jcheck(lambda p: lax.linalg.lu_pivots_to_permutation(p, size), [shape], [np.int32],
          make_inputs=pivots)


# ------------------------------------------------------ custom_linear_solve --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_custom_linear_solve(dtype, x64):
    def fn(d, b):
        return lax.custom_linear_solve(lambda x: d * x, b, solve=lambda _, y: y / d, symmetric=True)

    def inputs(shape, dtype, rng):
        return (2 + rng.random(size=shape)).astype(dtype)

    jcheck(fn, [("B", 3), ("B", 3)], [dtype] * 2, x64=x64, make_inputs=inputs)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_cho_solve_and_lu_solve_by_hand(dtype, x64):
    # cholesky + triangular_solve, and lu + triangular_solve with the
    # permutation applied by a one-hot product (no gather needed).
    def fn(a, b):
        x1 = jsl.cho_solve(jsl.cho_factor(a, lower=True), b)
        lu, _, perm = lax.linalg.lu(a)
        p = (perm[..., :, None] == jnp.arange(a.shape[-1])).astype(a.dtype)
        y = lax.linalg.triangular_solve(lu, p @ b, left_side=True, lower=True, unit_diagonal=True)
        x2 = lax.linalg.triangular_solve(lu, y, left_side=True, lower=False)
        return x1, x2

    jcheck(fn, [("B", 4, 4), ("B", 4, 3)], [dtype] * 2, x64=x64, make_inputs=spd, **TOL[dtype])


# ----------------------------------------------------------- jnp.linalg --

def has_gather():
    return core.Registry([str(_plugins.BUNDLED_PLUGINS)]).has("gather")


needs_gather = pytest.mark.skipif(not has_gather(), reason="jnp.linalg.solve/inv/det also emit gather")


@needs_gather
@pytest.mark.parametrize("n,batch,dtype,x64", [(1, (), *F32), (4, ("B",), *F32), (3, (2,), *F64),
                                              (4, ("B",), *F64)], ids=_id)
def test_jnp_linalg_solve_inv_det(dtype, x64, n, batch):
    def fn(a, b):
        return (jnp.linalg.solve(a, b), jnp.linalg.solve(a, b[..., :1])[..., 0],
                jnp.linalg.inv(a), jnp.linalg.det(a), *jnp.linalg.slogdet(a))

    def inputs(shape, dtype, rng):
        x = rng.standard_normal(size=shape)
        if shape[-1] == shape[-2]:
            x = x + 2 * np.eye(shape[-1])
        return x.astype(dtype)

    model = jcheck(fn, [(*batch, n, n), (*batch, n, 2)], [dtype] * 2, x64=x64, make_inputs=inputs,
                  **TOL[dtype])
    assert "Loop" not in op_types(model)


@needs_gather
def test_det_of_singular_and_permuted_matrices():
    # det = 0 exactly for a zero pivot, and the sign follows the pivot parity.
    def inputs(shape, dtype, rng):
        a = rng.standard_normal(size=shape).astype(dtype)
        for i in range(shape[0]):
            if i % 3 == 0:
                a[i, :, 1] = 0.0                                     # singular
            elif i % 3 == 1:
                a[i] = np.eye(3, dtype=dtype)[[2, 0, 1]] * 3.0      # even permutation
            elif i % 6 == 2:
                a[i] = np.eye(3, dtype=dtype)[[1, 0, 2]] * -2.0     # odd permutation
        return a

    jcheck(lambda a: (jnp.linalg.det(a), *jnp.linalg.slogdet(a)), [("B", 3, 3)], x64=True,
          make_inputs=inputs)


# -------------------------------------------------------- symmetric_product --

@pytest.mark.parametrize("shape,dtype,x64", [((3, 4), *F32), (("B", 2, 3, 5), *F32), (("B", 4, 2), *F64)],
                         ids=str)
def test_symmetric_product(dtype, x64, shape):
    # alpha a a^T + beta c, the whole matrix (JAX's CPU lowering computes all of it).
    m = shape[-2]
    fn = lambda a, c: (lax.linalg.symmetric_product(a, c, alpha=0.5, beta=-2.0),
                       lax.linalg.symmetric_product(a, c, symmetrize_output=True))
    model = jcheck(fn, [shape, (*shape[:-1], m)], [dtype] * 2, x64=x64, **TOL[dtype])
    assert "MatMul" in op_types(model)


# ----------------------------------------------------------- opset, errors --

def test_opset_18():
    def fn(a, b):
        lu, piv, perm = lax.linalg.lu(a)
        return (lu, piv, perm, lax.linalg.cholesky(a),
                lax.linalg.triangular_solve(a, b, left_side=True, lower=True),
                lax.linalg.symmetric_product(b, a, alpha=2.0, beta=1.0))

    jcheck(fn, [("B", 3, 3), ("B", 3, 2)], make_inputs=spd, opset=18, **TOL[np.float32])


@pytest.mark.parametrize("fn,prim", [(lambda a: lax.linalg.schur(a.astype(jnp.complex64)), "schur"),
                                     (lambda a: lax.linalg.schur(a, sort_eig_vals=True), "schur")],
                         ids=["complex-schur", "sorted-schur"])
def test_unsupported_linalg_names_the_primitive(fn, prim):
    with pytest.raises(jaxonnx.ConversionError, match=f"'{prim}'"):
        jaxonnx.to_onnx(fn, [jax.ShapeDtypeStruct((3, 3), np.float32)])


# ------------------------------------------------ beyond the unrolling limit --

def well_conditioned(shape, dtype, rng):
    x = rng.standard_normal(size=shape)
    if shape[-1] == shape[-2]:
        x = x + shape[-1] * np.eye(shape[-1])
    return x.astype(dtype)


@pytest.mark.parametrize("shape,dtype,x64", [(("B", 70, 70), *F64), ((2, 66, 80), *F64), ((80, 66), *F32)],
                         ids=_id)
def test_lu_beyond_the_unrolling_limit_is_a_loop(dtype, x64, shape):
    model = jcheck(lax.linalg.lu, [shape], [dtype], x64=x64, **TOL[dtype])
    assert op_types(model).count("Loop") == 1


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_cholesky_and_triangular_solve_beyond_the_unrolling_limit(dtype, x64):
    def fn(a, b):
        return (jnp.linalg.cholesky(a), lax.linalg.cholesky_p.bind(a),
                *all_triangular_solves(jnp.linalg.cholesky(a), b, jnp.swapaxes(b, -1, -2)))

    # 70-term f32 sums (and unit-diagonal solves with L) round further from LAPACK's.
    tol = TOL[dtype] if x64 else dict(rtol=2e-3, atol=2e-3)
    model = jcheck(fn, [("B", 70, 70), ("B", 70, 3)], [dtype] * 2, x64=x64, make_inputs=spd, **tol)
    assert "Loop" in op_types(model)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_solve_inv_slogdet_beyond_the_unrolling_limit(dtype, x64):
    def pivots(shape, dtype, rng):
        if shape[-1] == 68:
            k = np.arange(68)
            return (k + rng.integers(0, 70 - k, size=shape)).astype(dtype)
        return well_conditioned(shape, dtype, rng)

    fn = lambda a, b, p: (jnp.linalg.solve(a, b), jnp.linalg.inv(a), jnp.linalg.slogdet(a),
                          lax.linalg.lu_pivots_to_permutation(p, 70))
    jcheck(fn, [("B", 72, 72), ("B", 72, 2), ("B", 68)], [dtype, dtype, np.int32], x64=x64,
           make_inputs=pivots, **TOL[dtype])


# ------------------------------------------------------ symbolic matrix size --

# One model for every size: the symbols take these values in turn (n = 1 and 3
# would be unrolled were they static, 70 would be a Loop; here all are one Loop).
SIZES = [dict(n=1, k=2, B=2), dict(n=3, k=1, B=1), dict(n=7, k=4, B=3), dict(n=70, k=2, B=2)]
# 70-term f32 sums round further from LAPACK's blocked kernels.
SYM_TOL = {np.float32: dict(rtol=2e-3, atol=2e-3), np.float64: dict(rtol=1e-9, atol=1e-9)}


def symbolic_dims(model):
    """The dim_params of the model's first input."""
    return [d.dim_param for d in model.graph.input[0].type.tensor_type.shape.dim]


@pytest.mark.parametrize("batch", [(), ("B",)], ids=["n", "Bn"])
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_cholesky_symbolic_size(dtype, x64, batch):
    fn = lambda x: (jnp.linalg.cholesky(x), lax.linalg.cholesky_p.bind(x))
    model = jcheck(fn, [(*batch, "n", "n")], [dtype], x64=x64, make_inputs=spd_dirty_upper, batches=SIZES,
                   **SYM_TOL[dtype])
    assert op_types(model).count("Loop") == 2 and symbolic_dims(model)[-2:] == ["n", "n"]  # two factorizations


def test_cholesky_symbolic_size_not_positive_definite_is_all_nan():
    def inputs(shape, dtype, rng):
        a = spd(shape, dtype, rng)
        a[1, 0, 0] = -1.0                          # negative first pivot
        a[2, -1, -1] = -1e3                        # a last pivot <= 0
        return a

    jcheck(lambda x: (lax.linalg.cholesky_p.bind(x), jnp.linalg.cholesky(x)), [("B", "n", "n")],
           make_inputs=inputs, batches=[dict(B=3, n=1), dict(B=4, n=5), dict(B=3, n=70)], **SYM_TOL[np.float32])


@pytest.mark.parametrize("batch", [(), ("B",)], ids=["n", "Bn"])
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_triangular_solve_symbolic_size(dtype, x64, batch):
    # Every (left_side, lower, transpose_a, unit_diagonal), a symbolic rhs width k too.
    shapes = [(*batch, "n", "n"), (*batch, "n", "k"), (*batch, "k", "n")]
    model = jcheck(all_triangular_solves, shapes, [dtype] * 3, x64=x64, make_inputs=well_conditioned,
                   batches=SIZES, **SYM_TOL[dtype])
    assert "Loop" in op_types(model)


def test_triangular_solve_symbolic_size_reads_only_its_triangle():
    def inputs(shape, dtype, rng):
        x = well_conditioned(shape, dtype, rng)
        if shape[-1] == shape[-2]:
            x[..., np.triu_indices(shape[-1])[0], np.triu_indices(shape[-1])[1]] = np.nan
        return x

    def fn(a, bl, br):
        return tuple(lax.linalg.triangular_solve(a, bl if left else br, left_side=left, lower=True,
                                                 transpose_a=trans, unit_diagonal=True)
                     for left in (True, False) for trans in (True, False))

    jcheck(fn, [("n", "n"), ("n", "k"), ("k", "n")], make_inputs=inputs, batches=SIZES, **SYM_TOL[np.float32])


@pytest.mark.parametrize("shape", [("n", "n"), ("B", "n", "n"), ("B", "m", "n")], ids=str)
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_lu_symbolic_size(dtype, x64, shape):
    # lu, pivots and permutation; m != n both ways, and across the unrolling limit.
    sizes = [dict(B=2, m=1, n=1), dict(B=1, m=3, n=5), dict(B=2, m=7, n=3), dict(B=1, m=70, n=66),
             dict(B=2, m=3, n=70)]
    if "m" not in shape:
        sizes = SIZES
    model = jcheck(lax.linalg.lu, [shape], [dtype], x64=x64, batches=sizes, **SYM_TOL[dtype])
    assert op_types(model).count("Loop") == 1


def test_lu_symbolic_size_ties_and_zero_pivots():
    # As test_lu_ties_and_zero_pivots: the first maximal row, zero pivots left unscaled.
    def inputs(shape, dtype, rng):
        a = rng.integers(-2, 3, size=shape).astype(dtype)
        a[0] = 0.0
        a[1, :, 0] = 0.0
        a[2, :, 0] = np.where(np.arange(shape[1]) % 2, -1.0, 1.0)
        return a

    jcheck(lax.linalg.lu, [("B", "n", "n")], x64=True, make_inputs=inputs,
           batches=[dict(B=3, n=1), dict(B=4, n=4), dict(B=3, n=9)])


@pytest.mark.parametrize("times", [1, 2], ids=["size=K", "size=2K"])
def test_lu_pivots_to_permutation_symbolic_count(times):
    # A symbolic pivot count K and permutation size (K, or 2K: JAX needs size >= K provably).
    def pivots(shape, dtype, rng):
        k = np.arange(shape[-1])
        return (k + rng.integers(0, times * shape[-1] - k, size=shape)).astype(dtype)

    fn = lambda p: lax.linalg.lu_pivots_to_permutation(p, times * p.shape[-1])
    model = jcheck(fn, [("B", "K")], [np.int32], make_inputs=pivots,
                   batches=[dict(B=2, K=1), dict(B=3, K=4), dict(B=1, K=9)])
    assert op_types(model).count("Loop") == 1


@needs_gather
@pytest.mark.parametrize("batch", [(), ("B",)], ids=["n", "Bn"])
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_jnp_and_scipy_linalg_symbolic_size(dtype, x64, batch):
    # The jnp.linalg / jax.scipy.linalg entry points on one model: a symbolic n and rhs width k.
    def fn(a, b):
        spd_a = a @ jnp.swapaxes(a, -1, -2)
        c = jnp.linalg.cholesky(spd_a)
        out = (jnp.linalg.solve(a, b), jnp.linalg.inv(a), jnp.linalg.det(a), *jnp.linalg.slogdet(a),
               jsl.cho_solve((c, True), b), *jsl.lu_factor(a))
        if not batch:  # these take one matrix
            out += (jsl.solve_triangular(c, b, lower=True), jsl.lu_solve(jsl.lu_factor(a), b), *jsl.lu(a))
        return out

    def inputs(shape, dtype, rng):
        x = rng.standard_normal(size=shape)
        if shape[-1] == shape[-2]:
            x = x / np.sqrt(shape[-1]) + 2 * np.eye(shape[-1])   # det stays O(1)
        return x.astype(dtype)

    model = jcheck(fn, [(*batch, "n", "n"), (*batch, "n", "k")], [dtype] * 2, x64=x64, make_inputs=inputs,
                   batches=SIZES, **SYM_TOL[dtype])
    assert symbolic_dims(model)[-2:] == ["n", "n"]


def test_symbolic_size_inside_a_scan_body():
    # The runtime size is read from the model input inside a Loop body (nested Loops).
    fn = lambda x: (lax.map(jnp.linalg.cholesky, x), lax.map(lambda a: jnp.linalg.solve(a, a[:, :1]), x))
    model = jcheck(fn, [("B", "n", "n")], make_inputs=spd, batches=SIZES, **SYM_TOL[np.float32])
    assert op_types(model).count("Loop") == 2


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_empty_matrices(dtype, x64):
    # A symbolic size may be 0 at run time (and 0 is a static size too): the
    # Loops then run no iteration and give JAX's empty results (lu of a 3x0
    # matrix: the identity permutation).
    def fn(a, b, c, p):
        return (jnp.linalg.cholesky(a), lax.linalg.cholesky_p.bind(a), *all_triangular_solves(a, b, jnp.swapaxes(b, -1, -2)),
                *lax.linalg.lu(a), *lax.linalg.lu(c), lax.linalg.lu_pivots_to_permutation(p, p.shape[-1]),
                jsl.cho_solve((a, True), b), *jsl.lu_factor(a), jsl.solve_triangular(a, b),
                jnp.linalg.solve(a, b), jnp.linalg.inv(a), jnp.linalg.det(a), *jnp.linalg.slogdet(a))

    def inputs(shape, dtype, rng):
        if dtype == np.int32:
            return np.zeros(shape, dtype)
        return well_conditioned(shape, dtype, rng)

    for sizes in ([dict(n=0, k=2, m=3), dict(n=2, k=0, m=0), dict(n=3, k=2, m=0)], [dict(n=0, k=2, m=3)]):
        shapes = [("n", "n"), ("n", "k"), ("m", "n"), ("n",)]
        if len(sizes) == 1:  # static sizes: 0x0, 3x0
            shapes = [(0, 0), (0, 2), (3, 0), (0,)]
        jcheck(fn, shapes, [dtype] * 3 + [np.int32], x64=x64, make_inputs=inputs, batches=sizes, **TOL[dtype])
