"""lax_linalg_iter plugin: eigh, svd, qr, geqrf, householder_product as ONNX Loops,
and the jnp.linalg functions built on them (norm(ord=2), pinv, matrix_rank).

Eigenvector and singular-vector signs are not fixed by JAX (LAPACK) either, so
those are compared through sign-invariant quantities computed in the program
itself (|v|, a reconstruction, u^T u); QR's signs follow LAPACK and are
compared as they are."""

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from jax import lax
from jax._src.lax import linalg as lax_linalg

import jaxonnx
from helpers import check, check_harness, op_types, symbolic_specs

F32, F64 = (np.float32, False), (np.float64, True)
# Jacobi rounds differently from LAPACK's kernels.
TOL = {np.float32: dict(rtol=2e-4, atol=2e-4), np.float64: dict(rtol=1e-9, atol=1e-9)}


def _id(v):
    if isinstance(v, type):
        return {np.float32: "f32", np.float64: "f64"}[v]
    return "x64" if v is True else "x32" if v is False else str(v)


def jcheck(fn, *args, **kwargs):
    return check(jax.jit(fn), *args, **kwargs)


def mT(x):
    return jnp.swapaxes(x, -1, -2)


def symmetric(shape, dtype, rng):
    m = rng.standard_normal(size=shape)
    return (m + np.swapaxes(m, -1, -2)).astype(dtype)


def loops(model):
    return op_types(model).count("Loop")


# -------------------------------------------------------------------- eigh --

SQUARE = [((1, 1), *F32), ((4, 4), *F32), (("B", 5, 5), *F32), ((2, 3, 6, 6), *F32),
          ((3, 3), *F64), (("B", 7, 7), *F64), (("B", 2, 4, 4), *F64)]


@pytest.mark.parametrize("shape,dtype,x64", SQUARE, ids=_id)
def test_eigh(dtype, x64, shape):
    def fn(a):
        w, v = jnp.linalg.eigh(a)
        return w, jnp.abs(v), (v * w[..., None, :]) @ mT(v), mT(v) @ v

    model = jcheck(fn, [shape], [dtype], x64=x64, make_inputs=symmetric, **TOL[dtype])
    assert loops(model) == (1 if shape[-1] > 1 else 0)


def test_eigh_reads_one_triangle():
    # lax.linalg.eigh reads only the lower (or upper) triangle: NaN in the other must not matter.
    def inputs(shape, dtype, rng):
        a = symmetric(shape, dtype, rng)
        a[..., np.triu_indices(shape[-1], 1)[0], np.triu_indices(shape[-1], 1)[1]] = np.nan
        return a

    def fn(a):
        v, w = lax.linalg.eigh(a, lower=True)
        u, x = lax.linalg.eigh(mT(a), lower=False)
        return w, jnp.abs(v), x, jnp.abs(u)

    jcheck(fn, [("B", 4, 4)], make_inputs=inputs, **TOL[np.float32])


def test_eigh_repeated_and_zero_eigenvalues():
    # Diagonal, identity and zero matrices: already converged, no 0/0.
    def inputs(shape, dtype, rng):
        a = np.zeros(shape, dtype)
        a[1] = np.eye(shape[-1])
        a[2] = np.diag(rng.standard_normal(shape[-1]))
        a[3] = 2.0 * np.eye(shape[-1])
        a[3, 0, 1] = a[3, 1, 0] = 1.0
        return a

    def fn(a):
        w, v = jnp.linalg.eigh(a)
        return w, (v * w[..., None, :]) @ mT(v), mT(v) @ v

    check(jax.jit(fn), [(4, 5, 5)], x64=True, make_inputs=inputs, **TOL[np.float64])


def test_eigh_larger_than_the_old_unrolling_limit():
    def fn(a):
        w, v = jnp.linalg.eigh(a)
        return w, (v * w[..., None, :]) @ mT(v)

    jcheck(fn, [(80, 80)], x64=True, make_inputs=symmetric, **TOL[np.float64])


# --------------------------------------------------------------------- svd --

RECT = [((1, 1), *F32), ((4, 4), *F32), (("B", 6, 3), *F32), ((2, 3, 5), *F32),
        ((5, 5), *F64), (("B", 3, 7), *F64), (("B", 2, 6, 4), *F64)]


@pytest.mark.parametrize("full", [False, True], ids=["thin", "full"])
@pytest.mark.parametrize("shape,dtype,x64", RECT, ids=_id)
def test_svd(dtype, x64, shape, full):
    k = min(shape[-2:])

    def fn(a):
        u, s, vt = jnp.linalg.svd(a, full_matrices=full)
        # The first k columns of u / rows of vt are unique up to sign; a full
        # u's completion is any orthonormal one, so only u^T u is compared.
        return (s, jnp.abs(u[..., :, :k]), jnp.abs(vt[..., :k, :]), (u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :],
                mT(u) @ u, vt @ mT(vt))

    jcheck(fn, [shape], [dtype], x64=x64, **TOL[dtype])


@pytest.mark.parametrize("shape,dtype,x64", [(("B", 4, 6), *F32), ((3, 3), *F64)], ids=_id)
def test_svd_values_only(dtype, x64, shape):
    model = jcheck(lambda a: jnp.linalg.svd(a, compute_uv=False), [shape], [dtype], x64=x64, **TOL[dtype])
    assert loops(model) == 1


@pytest.mark.parametrize("dtype,x64", [F32, F64], ids=["f32", "f64"])
def test_svd_symbolic_row_count(dtype, x64):
    # A PCA over a symbolic number of samples: min(N, 4) values, fewer than 4 when N < 4.
    def fn(a):
        u, s, vt = jnp.linalg.svd(a, full_matrices=False)
        return s, jnp.abs(vt), (u * s[..., None, :]) @ vt, jnp.linalg.svd(a, compute_uv=False)

    def inputs(shape, dtype, rng):
        return rng.standard_normal(size=(shape[0] + 2, *shape[1:])).astype(dtype)  # N = 3 and 9

    jcheck(fn, [("N", 4)], [dtype], x64=x64, make_inputs=inputs, **TOL[dtype])


@pytest.mark.parametrize("shape", [("N", 4), ("m", "n"), (3, "n")], ids=str)
def test_svd_symbolic_full_matrices_needs_a_square(shape):
    with pytest.raises(jaxonnx.ConversionError, match="svd.*full_matrices.*square.*symbolic"):
        jaxonnx.to_onnx(jnp.linalg.svd, symbolic_specs([shape], [np.float32]))


def test_svd_rank_deficient():
    # Zero columns give exactly zero singular values (and zero columns of u,
    # where LAPACK completes u: those are not compared).
    def inputs(shape, dtype, rng):
        a = rng.standard_normal(size=shape).astype(dtype)
        a[..., 1] = 0.0
        return a

    def fn(a):
        u, s, vt = jnp.linalg.svd(a, full_matrices=False)
        return s, (u * s[..., None, :]) @ vt

    jcheck(fn, [("B", 5, 4)], x64=True, make_inputs=inputs, **TOL[np.float64])


def test_svd_larger_than_the_old_unrolling_limit():
    jcheck(lambda a: jnp.linalg.svd(a, compute_uv=False), [(70, 66)], x64=True, **TOL[np.float64])


@pytest.mark.parametrize("dtype,x64", [F32, F64], ids=["f32", "f64"])
def test_norm2_pinv_matrix_rank(dtype, x64):
    def inputs(shape, dtype, rng):
        a = rng.standard_normal(size=shape).astype(dtype)
        a[::2, :, 0] = 0.0  # rank 3 of 4 on every other element
        return a

    def fn(a):
        return (jnp.linalg.norm(a, ord=2, axis=(-2, -1)), jnp.linalg.pinv(a), jnp.linalg.matrix_rank(a),
                jnp.linalg.cond(a[..., :4, :]))

    jcheck(fn, [("B", 5, 4)], [dtype], x64=x64, make_inputs=inputs, **TOL[dtype])


# ---------------------------------------------------------------------- qr --

@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape,dtype,x64", RECT, ids=_id)
def test_qr(dtype, x64, shape, mode):
    # Householder with LAPACK's sign conventions: q and r match as they are.
    jcheck(lambda a: jnp.linalg.qr(a, mode=mode), [shape], [dtype], x64=x64, **TOL[dtype])


def test_qr_zero_columns():
    # A column already zero below the diagonal gets no reflection (tau = 0), as in geqrf.
    def inputs(shape, dtype, rng):
        a = rng.standard_normal(size=shape).astype(dtype)
        a[0] = 0.0
        a[1, :, 0] = 0.0
        a[2] = np.triu(a[2])
        return a

    jcheck(lambda a: (jnp.linalg.qr(a), lax_linalg.geqrf(a)), [(3, 4, 4)], x64=True, make_inputs=inputs,
           **TOL[np.float64])


@pytest.mark.parametrize("shape,dtype,x64", [(("B", 5, 3), *F32), ((4, 4), *F64), (("B", 3, 5), *F64)], ids=_id)
def test_geqrf_householder_product(dtype, x64, shape):
    def fn(a):
        r, taus = lax_linalg.geqrf(a)
        if shape[-2] >= shape[-1]:
            return r, taus, lax_linalg.householder_product(r, taus)
        return r, taus, lax_linalg.householder_product(r[..., :, : shape[-2]], taus)

    model = jcheck(fn, [shape], [dtype], x64=x64, **TOL[dtype])
    assert loops(model) == 2


def test_qr_larger_than_the_old_unrolling_limit():
    jcheck(jnp.linalg.qr, [(90, 70)], x64=True, **TOL[np.float64])


# ------------------------------------------------------------------ errors --

def test_pivoted_qr_is_refused():
    with pytest.raises(jaxonnx.ConversionError, match="pivoting"):
        jaxonnx.to_onnx(lambda a: lax.linalg.qr(a, pivoting=True), [jax.ShapeDtypeStruct((3, 3), np.float32)])


def test_opset_18():
    def fn(a):
        w, v = jnp.linalg.eigh(a + mT(a))
        u, s, vt = jnp.linalg.svd(a)
        q, r = jnp.linalg.qr(a)
        return w, jnp.abs(v), s, (u * s[..., None, :]) @ vt, q, r

    jcheck(fn, [("B", 4, 4)], opset=18, **TOL[np.float32])


def test_deterministic():
    spec = [jax.ShapeDtypeStruct((2, 5, 3), np.float32)]
    fn = lambda a: (jnp.linalg.svd(a), jnp.linalg.qr(a), jnp.linalg.eigh(a[..., :3, :]))
    assert jaxonnx.to_onnx(fn, spec).SerializeToString() == jaxonnx.to_onnx(fn, spec).SerializeToString()


def test_subset_by_index():
    # JAX's CPU kernels refuse subset_by_index; compared with numpy instead.
    def fn(a):
        v, w = lax.linalg.eigh(a[..., :4] + mT(a[..., :4]), subset_by_index=(1, 3))
        u, s, vt = lax.linalg.svd(a, full_matrices=False, subset_by_index=(1, 3))
        return w, jnp.abs(v), s, jnp.abs(u), jnp.abs(vt)

    with jax.enable_x64(True):
        model = jaxonnx.to_onnx(fn, [jax.ShapeDtypeStruct((2, 4, 5), np.float64)], enable_double_precision=True)
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    a = np.random.default_rng(0).standard_normal((2, 4, 5))
    w, v, s, u, vt = sess.run(None, {sess.get_inputs()[0].name: a})
    sym = a[..., :4] + np.swapaxes(a[..., :4], -1, -2)
    wr, vr = np.linalg.eigh(sym)
    ur, sr, vtr = np.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(w, wr[..., 1:3], atol=1e-9)
    np.testing.assert_allclose(v, np.abs(vr[..., :, 1:3]), atol=1e-9)
    np.testing.assert_allclose(s, sr[..., 1:3], atol=1e-9)
    np.testing.assert_allclose(u, np.abs(ur[..., :, 1:3]), atol=1e-9)
    np.testing.assert_allclose(vt, np.abs(vtr[..., 1:3, :]), atol=1e-9)


# ------------------------------------------------------- tridiagonal_solve --

# Batch shapes: none, symbolic, two static dims; n = 1 (no elimination step) too.
TRIDIAG = [((), 1, *F32), (("B",), 6, *F32), ((2, 3), 4, *F32), ((), 5, *F64), (("B",), 2, *F64),
           (("B", 2), 7, *F64), ((), "N", *F32), ((3,), "N", *F64)]


@pytest.mark.parametrize("batch,n,dtype,x64", TRIDIAG, ids=_id)
def test_tridiagonal_solve(dtype, x64, batch, n):
    # gtsv pivots (random diagonals swap rows often), so x matches LAPACK's to rounding.
    fn = lambda dl, d, du, b: lax.linalg.tridiagonal_solve(dl, d, du, b)
    shapes = [(*batch, n)] * 3 + [(*batch, n, 3)]
    model = jcheck(fn, shapes, [dtype] * 4, x64=x64, **TOL[dtype])  # a symbolic n runs as 1 and 7
    assert loops(model) == 2


def test_tridiagonal_solve_singular_is_nan():
    # A zero pivot (gtsv's info > 0) gives NaN for that batch element only, as JAX.
    def inputs(shape, dtype, rng):
        x = rng.standard_normal(size=shape).astype(dtype)
        if len(shape) == 2:
            x[1] = 0.0  # element 1: dl, d and du all zero
        return x

    fn = lambda dl, d, du, b: lax.linalg.tridiagonal_solve(dl, d, du, b)
    jcheck(fn, [(3, 4)] * 3 + [(3, 4, 2)], x64=True, make_inputs=inputs)


def test_tridiagonal_solve_perturb_singular_is_refused():
    fn = lambda dl, d, du, b: lax.linalg.tridiagonal_solve(dl, d, du, b, perturb_singular=True)
    with pytest.raises(jaxonnx.ConversionError, match="tridiagonal_solve.*perturb_singular"):
        jaxonnx.to_onnx(fn, symbolic_specs([(4,)] * 3 + [(4, 1)], [np.float32] * 4))


# --------------------------------------------------------- cholesky_update --

def upper_factor_and_vector(shape, dtype, rng):
    if len(shape) == 1:  # w, with zero entries: drotg's identity rotation (c = 1, s = 0)
        w = rng.standard_normal(size=shape).astype(dtype)
        w[::3] = 0.0
        return w
    m = rng.standard_normal(size=shape)
    spd = m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])
    return np.swapaxes(np.linalg.cholesky(spd), -1, -2).astype(dtype)


@pytest.mark.parametrize("n,dtype,x64", [(4, *F32), (5, *F64)], ids=_id)
def test_cholesky_update(dtype, x64, n):
    # JAX's primitive has no batch dims (vmap of it is not defined); R^T R is compared too.
    def fn(r, w):
        r2 = lax.linalg.cholesky_update(r, w)
        return r2, mT(r2) @ r2

    jcheck(fn, [(n, n), (n,)], [dtype] * 2, x64=x64, make_inputs=upper_factor_and_vector, **TOL[dtype])


# ---------------------------------------------------------------- ormqr --

@pytest.mark.parametrize("shape,dtype,x64,left,transpose", [
    (("B", 5, 3), *F32, True, False), ((2, 4, 4), *F64, True, True),
    ((2, 4, 4), *F64, False, False), (("B", 5, 3), *F32, False, True)],
    ids=["q_c-f32-B", "qt_c-f64", "c_q-f64", "c_qt-f32-B"])
def test_ormqr(dtype, x64, shape, left, transpose):
    m = shape[-2]
    cshape = (*shape[:-2], m, 2) if left else (*shape[:-2], 3, m)

    def fn(a, c):
        h, taus = lax_linalg.geqrf(a)
        return lax_linalg.ormqr(h, taus, c, left=left, transpose=transpose)

    jcheck(fn, [shape, cshape], [dtype] * 2, x64=x64, **TOL[dtype])


def test_scipy_qr_multiply():
    # jax.scipy.linalg.qr_multiply is ormqr on jnp.linalg.qr(mode="raw").
    fn = lambda a, c: jax.scipy.linalg.qr_multiply(a, c)
    jcheck(fn, [(5, 3), (2, 5)], x64=True, **TOL[np.float64])


# ------------------------------------------------- hessenberg, tridiagonal --

SQUARE_REDUCE = [((1, 1), *F32), (("B", 5, 5), *F32), ((2, 3, 4, 4), *F32), ((2, 2), *F64), (("B", 6, 6), *F64)]


@pytest.mark.parametrize("shape,dtype,x64", SQUARE_REDUCE, ids=_id)
def test_hessenberg(dtype, x64, shape):
    # gehrd's packed output and taus, LAPACK's signs; and scipy's h, q built on it.
    jcheck(lax.linalg.hessenberg, [shape], [dtype], x64=x64, **TOL[dtype])


def test_scipy_hessenberg_with_q():
    jcheck(lambda a: jax.scipy.linalg.hessenberg(a, calc_q=True), [(5, 5)], x64=True, **TOL[np.float64])


@pytest.mark.parametrize("shape,dtype,x64,lower", [
    ((1, 1), *F32, True), (("B", 5, 5), *F32, False), ((2, 3, 4, 4), *F32, True), ((2, 2), *F64, False),
    (("B", 6, 6), *F64, True)], ids=["1x1-f32-lower", "B5-f32-upper", "2x3x4-f32-lower", "2-f64-upper",
                                    "B6-f64-lower"])
def test_tridiagonal(dtype, x64, shape, lower):
    # Non-symmetric inputs: only the `lower` (upper) triangle is read, the other strict
    # triangle comes back as it was (LAPACK leaves it).
    jcheck(lambda a: lax.linalg.tridiagonal(a, lower=lower), [shape], [dtype], x64=x64, **TOL[dtype])


def test_new_linalg_at_opset_18():
    def fn(a, dl, b):
        h, taus = lax_linalg.geqrf(a)
        return (lax.linalg.hessenberg(a), lax.linalg.tridiagonal(a), lax_linalg.ormqr(h, taus, b),
                lax.linalg.tridiagonal_solve(dl, a[..., 0] + 4, dl, b))

    jcheck(fn, [("B", 4, 4), ("B", 4), ("B", 4, 2)], opset=18, **TOL[np.float32])


def test_householder_reductions_beyond_lapack_blocking():
    # n = 40 takes LAPACK's blocked gehrd / sytrd paths (and a long gtsv): same results to rounding.
    def fn(a, b):
        return (lax.linalg.hessenberg(a), lax.linalg.tridiagonal(a, lower=False),
                lax.linalg.tridiagonal_solve(a[0], a[1] + 8, a[2], b))

    jcheck(fn, [(40, 40), (40, 2)], x64=True, **TOL[np.float64])


# ------------------------------------------------- symbolic matrix sizes --
# One model for every matrix size: trip counts, iotas, eye, masks and the Jacobi
# pair schedule come from the input's Shape. check() gives every symbol the same
# value (1, 2, 5, 9 here); TALL and WIDE inputs make m != n from it.

SIZES = (1, 2, 5, 9)
SQUARE_SYM = [(("n", "n"), *F32), (("B", "n", "n"), *F64)]
SYM = [(("n", "n"), "square", *F32), (("B", "n", "n"), "square", *F64), (("m", "n"), "tall", *F64),
       (("m", "n"), "wide", *F32), (("B", "m", "n"), "tall", *F32)]


def shaped(kind, base=None):
    """make_inputs for check(): m = n + 3 (tall) or n = m + 3 (wide) from one symbol value."""
    def make(shape, dtype, rng):
        shape = tuple(shape)
        if kind == "tall":
            shape = (*shape[:-2], shape[-2] + 3, shape[-1])
        elif kind == "wide":
            shape = (*shape[:-2], shape[-2], shape[-1] + 3)
        return (base or (lambda s, d, r: r.standard_normal(size=s).astype(d)))(shape, dtype, rng)
    return make


def sym_ids(v):
    return "x".join(map(str, v)) if isinstance(v, tuple) else _id(v)


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape,kind,dtype,x64", SYM, ids=sym_ids)
def test_qr_symbolic(dtype, x64, shape, kind, mode):
    model = jcheck(lambda a: jnp.linalg.qr(a, mode=mode), [shape], [dtype], x64=x64, make_inputs=shaped(kind),
                   batches=SIZES, **TOL[dtype])
    assert "Range" in op_types(model)  # the iotas are computed, not constants


@pytest.mark.parametrize("shape,kind,dtype,x64", SYM, ids=sym_ids)
def test_geqrf_householder_product_symbolic(dtype, x64, shape, kind):
    # JAX's householder_product cannot trace a symbolic m != n (it compares m < n).
    def fn(a):
        r, taus = lax_linalg.geqrf(a)
        return (r, taus, lax_linalg.householder_product(r, taus)) if kind == "square" else (r, taus)

    model = jcheck(fn, [shape], [dtype], x64=x64, make_inputs=shaped(kind), batches=SIZES, **TOL[dtype])
    assert loops(model) == (2 if kind == "square" else 1)


@pytest.mark.parametrize("shape,dtype,x64", SQUARE_SYM, ids=sym_ids)
def test_eigh_symbolic(dtype, x64, shape):
    def fn(a):
        w, v = jnp.linalg.eigh(a)
        v2, w2 = lax.linalg.eigh(a, lower=False)
        return w, jnp.abs(v), (v * w[..., None, :]) @ mT(v), mT(v) @ v, w2, jnp.abs(v2)

    model = jcheck(fn, [shape], [dtype], x64=x64, make_inputs=symmetric, batches=SIZES, **TOL[dtype])
    assert loops(model) == 2


@pytest.mark.parametrize("shape,kind,dtype,x64", SYM, ids=sym_ids)
def test_svd_symbolic(dtype, x64, shape, kind):
    def fn(a):
        u, s, vt = jnp.linalg.svd(a, full_matrices=False)
        return s, jnp.abs(u), jnp.abs(vt), (u * s[..., None, :]) @ vt, jnp.linalg.svd(a, compute_uv=False)

    jcheck(fn, [shape], [dtype], x64=x64, make_inputs=shaped(kind), batches=SIZES, **TOL[dtype])


@pytest.mark.parametrize("shape,dtype,x64", SQUARE_SYM, ids=sym_ids)
def test_svd_symbolic_square_full_matrices(dtype, x64, shape):
    def fn(a):
        u, s, vt = jnp.linalg.svd(a)
        return s, jnp.abs(u), jnp.abs(vt), (u * s[..., None, :]) @ vt, mT(u) @ u

    jcheck(fn, [shape], [dtype], x64=x64, batches=SIZES, **TOL[dtype])


@pytest.mark.parametrize("shape,kind,dtype,x64", [(("m", "n"), "tall", *F32), (("B", "m", "n"), "wide", *F64),
                                                  (("n", "n"), "square", *F64), (("B", "n", "n"), "square", *F32)],
                         ids=sym_ids)
def test_norm2_pinv_cond_symbolic(dtype, x64, shape, kind):
    # JAX traces pinv only for a square symbolic matrix (it compares m and n), and
    # matrix_rank for none (its tolerance calls .astype on the symbolic size).
    def rank_deficient(shape, dtype, rng):
        a = rng.standard_normal(size=shape).astype(dtype)
        a[..., 0] = 0.0
        return a

    def fn(a):
        if kind != "square":
            return jnp.linalg.norm(a, ord=2, axis=(-2, -1)), jnp.linalg.cond(a)
        return jnp.linalg.norm(a, ord=2, axis=(-2, -1)), jnp.linalg.pinv(a), jnp.linalg.cond(a + 3 * jnp.eye(
            a.shape[-1], dtype=a.dtype))

    jcheck(fn, [shape], [dtype], x64=x64, make_inputs=shaped(kind, rank_deficient if kind == "square" else None),
           batches=SIZES, **TOL[dtype])


@pytest.mark.parametrize("left,transpose,dtype,x64", [(True, False, *F32), (True, True, *F64), (False, False, *F64),
                                                      (False, True, *F32)], ids=["q_c", "qt_c", "c_q", "c_qt"])
def test_ormqr_symbolic(dtype, x64, left, transpose):
    # a [B, m, n] (m = n + 3), c [B, m, 2] or [B, 3, m]; check() asks for a, then c.
    calls = []

    def inputs(shape, dtype, rng):
        calls.append(shape)
        if len(calls) % 2 == 0:  # c
            shape = (*shape[:-2], shape[-2] + 3, 2) if left else (*shape[:-2], 3, shape[-1] + 3)
        else:
            shape = (*shape[:-2], shape[-2] + 3, shape[-1])
        return rng.standard_normal(size=shape).astype(dtype)

    def fn(a, c):
        h, taus = lax_linalg.geqrf(a)
        return lax_linalg.ormqr(h, taus, c, left=left, transpose=transpose)

    cshape = ("B", "m", 2) if left else ("B", 3, "m")
    jcheck(fn, [("B", "m", "n"), cshape], [dtype] * 2, x64=x64, make_inputs=inputs, batches=SIZES, **TOL[dtype])


@pytest.mark.parametrize("shape,dtype,x64", SQUARE_SYM, ids=sym_ids)
def test_hessenberg_symbolic(dtype, x64, shape):
    jcheck(lax.linalg.hessenberg, [shape], [dtype], x64=x64, batches=SIZES, **TOL[dtype])


def test_scipy_hessenberg_symbolic():
    jcheck(lambda a: jax.scipy.linalg.hessenberg(a, calc_q=True), [("n", "n")], x64=True, batches=SIZES,
           **TOL[np.float64])


@pytest.mark.parametrize("lower", [True, False], ids=["lower", "upper"])
@pytest.mark.parametrize("shape,dtype,x64", SQUARE_SYM, ids=sym_ids)
def test_tridiagonal_symbolic(dtype, x64, shape, lower):
    jcheck(lambda a: lax.linalg.tridiagonal(a, lower=lower), [shape], [dtype], x64=x64, batches=SIZES, **TOL[dtype])


@pytest.mark.parametrize("dtype,x64", [F32, F64], ids=["f32", "f64"])
def test_tridiagonal_solve_symbolic_sizes(dtype, x64):
    fn = lambda dl, d, du, b: lax.linalg.tridiagonal_solve(dl, d, du, b)
    jcheck(fn, [("B", "n")] * 3 + [("B", "n", 2)], [dtype] * 4, x64=x64, batches=SIZES, **TOL[dtype])


@pytest.mark.parametrize("dtype,x64", [F32, F64], ids=["f32", "f64"])
def test_cholesky_update_symbolic(dtype, x64):
    def fn(r, w):
        r2 = lax.linalg.cholesky_update(r, w)
        return r2, mT(r2) @ r2

    jcheck(fn, [("n", "n"), ("n",)], [dtype] * 2, x64=x64, make_inputs=upper_factor_and_vector, batches=SIZES,
           **TOL[dtype])


SYMBOLIC_PROGRAMS = {
    "qr": (lambda a: jnp.linalg.qr(a, mode="complete"), [("m", "n")]),
    "geqrf": (lambda a: lax_linalg.geqrf(a), [("m", "n")]),
    "eigh": (lambda a: jnp.linalg.eigh(a), [("n", "n")]),
    "svd": (lambda a: jnp.linalg.svd(a, full_matrices=False), [("m", "n")]),
    "svd_square": (lambda a: jnp.linalg.svd(a), [("n", "n")]),
    "ormqr": (lambda a, c: lax_linalg.ormqr(*lax_linalg.geqrf(a), c), [("m", "n"), ("m", 2)]),
    "hessenberg": (lax.linalg.hessenberg, [("n", "n")]),
    "tridiagonal": (lambda a: lax.linalg.tridiagonal(a, lower=False), [("n", "n")]),
    "tridiagonal_solve": (lax.linalg.tridiagonal_solve, [("n",)] * 3 + [("n", 2)]),
    "cholesky_update": (lax.linalg.cholesky_update, [("n", "n"), ("n",)]),
}


@pytest.mark.parametrize("name", sorted(SYMBOLIC_PROGRAMS))
def test_symbolic_size_zero_and_one_run(name):
    # n = 0 and n = 1 (m = n or n + 1): the model runs, and matches JAX where JAX computes them.
    fn, shapes = SYMBOLIC_PROGRAMS[name]
    model = jaxonnx.to_onnx(fn, symbolic_specs(shapes, [np.float32] * len(shapes)))
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for n, m in [(0, 0), (1, 1), (0, 1), (1, 2)]:
        if m != n and not any("m" in s for s in shapes):
            continue
        args = [rng.standard_normal([{"n": n, "m": m}.get(d, d) for d in s]).astype(np.float32) + 2.0
                for s in shapes]
        got = sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), args)})
        try:
            expected = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
        except Exception:  # JAX itself refuses this size (hessenberg's taus at n = 0)
            continue
        assert [g.shape for g in got] == [np.shape(e) for e in expected]
        if n == 1 and "svd" not in name and "eigh" not in name:
            for g, e in zip(got, expected):
                np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def all_op_types(graph):
    """Op types of a graph and its Loop bodies."""
    out = []
    for n in graph.node:
        out.append(n.op_type)
        out += [t for a in n.attribute if a.type == onnx.AttributeProto.GRAPH for t in all_op_types(a.g)]
    return out


@pytest.mark.parametrize("name", sorted(SYMBOLIC_PROGRAMS))
def test_static_sizes_keep_their_constants(name):
    # A static matrix size gives constant iotas, masks, schedules and trip counts: no Shape, no Range.
    fn, shapes = SYMBOLIC_PROGRAMS[name]
    specs = [jax.ShapeDtypeStruct(tuple({"n": 4, "m": 6}.get(d, d) for d in s), np.float32) for s in shapes]
    ops = all_op_types(jaxonnx.to_onnx(fn, specs).graph)
    assert "Loop" in ops and "Shape" not in ops and "Range" not in ops, ops


@pytest.mark.parametrize("prim,shape", [("eigh", ("n", "n")), ("svd", ("m", 4))])
def test_subset_by_index_needs_a_static_size(prim, shape):
    fn = {"eigh": lambda a: lax.linalg.eigh(a, subset_by_index=(0, 1)),
          "svd": lambda a: lax.linalg.svd(a, full_matrices=False, subset_by_index=(0, 1))}[prim]
    with pytest.raises(jaxonnx.ConversionError, match=f"{prim}.*subset_by_index.*static matrix size"):
        jaxonnx.to_onnx(fn, symbolic_specs([shape], [np.float32]))


@pytest.mark.parametrize("shape,dtype,x64", [((0, 0), *F32), ((3, 0, 0), *F64), (("B", 0, 0), *F32),
                                             (("B", 0, 0), *F64), ((0, 5, 5), *F32)], ids=_id)
def test_eigh_of_empty_matrices(dtype, x64, shape):
    # 0x0 matrices, or no matrix: empty results of the right shapes, no Loop.
    model = jcheck(lambda a: lax.linalg.eigh(a), [shape], [dtype], x64=x64, make_inputs=symmetric)
    assert loops(model) == 0


@pytest.mark.parametrize("dtype", ["float32", "complex64"])
@pytest.mark.parametrize("lower", [False, True])
def test_catalog_eigh_0x0(dtype, lower):
    check_harness("eigh", f"shape_{dtype}_0_0_lower_{lower}")


# ----------------------------------------------------------------- complex --
# eigh, svd and qr of complex64/complex128 matrices (carried packed). Vectors
# are unique up to a unit phase per column, so the programs return what is
# phase-invariant: |v|, reconstructions, v^H v.

CTOL = {"complex64": dict(rtol=2e-4, atol=2e-4), "complex128": dict(rtol=1e-9, atol=1e-9)}
REAL_OF = {"complex64": "float32", "complex128": "float64"}


def ccheck(fn, shape, dtype, make_inputs=None, **kw):
    """jaxonnx.testing.check on one complex input, static and (with a symbol) symbolic."""
    from jaxonnx.testing import Variant, check as tcheck
    variants = [Variant(REAL_OF[dtype], False)] + ([Variant(REAL_OF[dtype], True)] if "B" in shape else [])
    return tcheck(jax.jit(fn), [(shape, dtype)], variants=variants, make_inputs=make_inputs,
                  **{**CTOL[dtype], **kw})


def cnormal(shape, dtype, rng):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def hermitian(shape, dtype, rng):
    m = cnormal(shape, dtype, rng)
    return (m + np.conj(np.swapaxes(m, -1, -2))).astype(dtype)


def mH(x):
    return jnp.conj(mT(x))


def unitary(n, rng):
    q, _ = np.linalg.qr(rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n)))
    return q


CSQUARE = [((1, 1), "complex64"), ((4, 4), "complex64"), (("B", 5, 5), "complex64"), ((2, 3, 6, 6), "complex64"),
           ((3, 3), "complex128"), (("B", 7, 7), "complex128")]


@pytest.mark.parametrize("shape,dtype", CSQUARE, ids=str)
def test_eigh_complex(shape, dtype):
    def fn(a):
        w, v = jnp.linalg.eigh(a)
        return w, jnp.abs(v), (v * w[..., None, :]) @ mH(v), mH(v) @ v

    models = ccheck(fn, shape, dtype, make_inputs=hermitian)
    for m in models.values():
        assert loops(m) == (1 if shape[-1] > 1 else 0)


def test_eigh_complex_reads_one_triangle():
    # Only the lower (upper) triangle is read, and of the diagonal only its real part.
    def inputs(shape, dtype, rng):
        a = hermitian(shape, dtype, rng)
        iu = np.triu_indices(shape[-1], 1)
        a[..., iu[0], iu[1]] = np.nan
        a[..., np.arange(shape[-1]), np.arange(shape[-1])] += 5j
        return a

    def fn(a):
        v, w = lax.linalg.eigh(a, lower=True)
        u, x = lax.linalg.eigh(mT(a), lower=False)
        return w, jnp.abs(v), x, jnp.abs(u)

    ccheck(fn, ("B", 5, 5), "complex64", make_inputs=inputs)


def test_eigh_complex_repeated_eigenvalues():
    # Identity, zero, a diagonal, and U diag(1, 1, 2, 2, 2) U^H with a complex
    # unitary U: the vectors of a repeated eigenvalue must still be orthonormal.
    def inputs(shape, dtype, rng):
        n = shape[-1]
        a = np.zeros(shape, dtype)
        a[1] = np.eye(n)
        a[2] = np.diag(rng.standard_normal(n))
        u = unitary(n, rng)
        a[3] = (u * np.array([1.0, 1.0, 2.0, 2.0, 2.0])) @ u.conj().T
        a[4] = 1e-30 * hermitian((n, n), dtype, rng)
        return a

    def fn(a):
        w, v = jnp.linalg.eigh(a)
        return w, (v * w[..., None, :]) @ mH(v), mH(v) @ v

    ccheck(fn, (5, 5, 5), "complex128", make_inputs=inputs)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_eigh_complex_of_empty_matrices(dtype):
    ccheck(lambda a: lax.linalg.eigh(a), ("B", 0, 0), dtype)


CRECT = [((1, 1), "complex64"), ((4, 4), "complex64"), (("B", 6, 3), "complex64"), ((2, 3, 5), "complex64"),
         ((5, 5), "complex128"), (("B", 3, 7), "complex128"), (("B", 2, 6, 4), "complex128")]


@pytest.mark.parametrize("full", [False, True], ids=["thin", "full"])
@pytest.mark.parametrize("shape,dtype", CRECT, ids=str)
def test_svd_complex(shape, dtype, full):
    k = min(shape[-2:])

    def fn(a):
        u, s, vh = jnp.linalg.svd(a, full_matrices=full)
        return (s, jnp.abs(u[..., :, :k]), jnp.abs(vh[..., :k, :]), (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :],
                mH(u) @ u, vh @ mH(vh), jnp.linalg.svd(a, compute_uv=False))

    ccheck(fn, shape, dtype, make_inputs=cnormal)


@pytest.mark.parametrize("shape", [("M", 4), (3, "M")], ids=str)
def test_svd_complex_symbolic_dims(shape):
    # m or n symbolic (full_matrices=False): one model for every size, wide or tall.
    from jaxonnx.testing import Variant, check as tcheck

    def fn(a):
        u, s, vh = jnp.linalg.svd(a, full_matrices=False)
        return s, (u * s[..., None, :]) @ vh, mH(u) @ u

    tcheck(jax.jit(fn), [(shape, "complex64")], variants=[Variant("float32", True)], make_inputs=cnormal,
           batches=[2, 6], **CTOL["complex64"])


def test_svd_complex_rank_deficient_and_repeated():
    # Rank 2 of 5 (three zero singular values), a unitary (all ones) and a
    # matrix with a repeated pair: values, reconstruction, and V's
    # orthonormality (u's columns of zero singular values are zero, as for real).
    def inputs(shape, dtype, rng):
        a = np.zeros(shape, dtype)
        x, y = cnormal((5, 2), dtype, rng), cnormal((2, 5), dtype, rng)
        a[0] = x @ y
        a[1] = unitary(5, rng)
        a[2] = (unitary(5, rng) * np.array([3.0, 3.0, 1.0, 1.0, 0.5])) @ unitary(5, rng)
        return a

    def fn(a):
        u, s, vh = jnp.linalg.svd(a, full_matrices=False)
        return s, (u * s[..., None, :]) @ vh, vh @ mH(vh)

    ccheck(fn, (4, 5, 5), "complex128", make_inputs=inputs)


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape,dtype", [((4, 4), "complex64"), (("B", 6, 3), "complex64"), ((2, 3, 5), "complex64"),
                                         ((1, 1), "complex64"), (("B", 5, 7), "complex128"),
                                         ((7, 4), "complex128")], ids=str)
def test_qr_complex(shape, dtype, mode):
    # LAPACK's conventions (zgeqrf: R's diagonal real), so q and r compare as they are.
    ccheck(lambda a: jnp.linalg.qr(a, mode=mode), shape, dtype, make_inputs=cnormal)


def test_qr_complex_special_columns():
    # A zero column, a column already zero below a real (and a complex) diagonal
    # entry, and a purely imaginary matrix.
    def inputs(shape, dtype, rng):
        a = cnormal(shape, dtype, rng)
        a[0, :, 1] = 0
        a[1, 1:, 0] = 0
        a[1, 0, 0] = 2.0
        a[2, 1:, 0] = 0
        a[2, 0, 0] = 1.0 - 3.0j
        a[3] = 1j * a[3].imag
        return a

    ccheck(lambda a: (jnp.linalg.qr(a), lax_linalg.geqrf(a)), (4, 4, 4), "complex128", make_inputs=inputs)


@pytest.mark.parametrize("shape", [("M", 4), ("B", 3, "B")], ids=str)
def test_qr_complex_symbolic_dims(shape):
    from jaxonnx.testing import Variant, check as tcheck
    tcheck(jax.jit(jnp.linalg.qr), [(shape, "complex64")], variants=[Variant("float32", True)], make_inputs=cnormal,
           batches=[2, 6], **CTOL["complex64"])


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_geqrf_householder_product_complex(dtype):
    def fn(a):
        r, taus = lax_linalg.geqrf(a)
        return r, taus, lax_linalg.householder_product(r, taus)

    ccheck(fn, ("B", 6, 4), dtype, make_inputs=cnormal)


def _empty_decompositions(a):
    return (jnp.linalg.qr(a), jnp.linalg.qr(a, mode="complete"), jnp.linalg.svd(a, compute_uv=False),
            jnp.linalg.svd(a, full_matrices=False), jnp.linalg.svd(a))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 0), (0, 2, 3), ("B", 0, 4)], ids=str)
def test_complex_decompositions_of_empty_matrices(shape):
    # No singular value: s empty, a full u or vh the identity, as JAX gives.
    ccheck(_empty_decompositions, shape, "complex64")


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 0), ("B", 4, 0)], ids=str)
def test_svd_of_empty_matrices(shape):
    jcheck(_empty_decompositions, [shape])


def _harness_by_property(group, name):
    """The catalog case through jaxonnx and onnxruntime, checked as
    benchmarks/catalog.py checks a decomposition: the values JAX fixes, then
    the defining properties of the vectors."""
    from helpers import _packed, catalog_harness, ort_session
    h = catalog_harness(group, name)
    args = [np.asarray(a) for a in h.dyn_args_maker(np.random.RandomState(0))]
    model = jaxonnx.to_onnx(h.dyn_fun, args)
    onnx.checker.check_model(model, full_check=True)
    sess = ort_session(model)
    feed = dict(zip([i.name for i in sess.get_inputs()], [_packed(a) for a in args]))
    want = [np.asarray(w) for w in jax.tree_util.tree_leaves(jax.jit(h.dyn_fun)(*args))]
    got = [g[..., 0] + 1j * g[..., 1] if w.dtype.kind == "c" else g for g, w in zip(sess.run(None, feed), want)]
    for g, w in zip(got, want):
        assert g.shape == w.shape
    return h, args[0], got, want


def _near(x, y, n, tol=2e-4):
    np.testing.assert_allclose(x, y, rtol=0, atol=tol * n)


@pytest.mark.parametrize("name", ["shape_complex64_29_29_fullmatrices_True_computeuv_True",
                                  "shape_complex64_2_3_29_7_fullmatrices_True_computeuv_True",
                                  "shape_complex64_2_7_fullmatrices_False_computeuv_True",
                                  "shape_complex64_2_3_53_fullmatrices_True_computeuv_False"])
def test_catalog_svd_complex(name):
    h, a, got, want = _harness_by_property("svd", name)
    n = max(a.shape[-2:])
    _near(got[0], want[0], n)
    if h.params["compute_uv"]:
        s, u, vh = got
        k = s.shape[-1]
        _near((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a, n)
        _near(np.conj(np.swapaxes(u, -1, -2)) @ u, np.broadcast_to(np.eye(u.shape[-1]), u.shape[:-2] + (u.shape[-1],) * 2), n)
        _near(vh @ np.conj(np.swapaxes(vh, -1, -2)), np.broadcast_to(np.eye(vh.shape[-2]), vh.shape[:-1] + (vh.shape[-2],)), n)


@pytest.mark.parametrize("name", ["shape_complex64_50_50_lower_True", "shape_complex64_2_20_20_lower_False"])
def test_catalog_eigh_complex(name):
    h, a, got, want = _harness_by_property("eigh", name)
    v, w = got
    n = a.shape[-1]
    _near(w, want[1], n)
    full = np.tril(a) + np.conj(np.swapaxes(np.tril(a, -1), -1, -2)) if h.params["lower"] else \
        np.triu(a) + np.conj(np.swapaxes(np.triu(a, 1), -1, -2))
    _near(full @ v, v * w[..., None, :], n)
    _near(np.conj(np.swapaxes(v, -1, -2)) @ v, np.broadcast_to(np.eye(n), v.shape), n)


@pytest.mark.parametrize("name", ["multi_array_shape_complex64_3_4_fullmatrices_True",
                                  "multi_array_shape_complex64_2_200_100_fullmatrices_False"])
def test_catalog_qr_complex(name):
    h, a, got, want = _harness_by_property("qr", name)
    q, r = got
    n = max(a.shape[-2:])
    _near(q, want[0], n)
    _near(r, want[1], n)
