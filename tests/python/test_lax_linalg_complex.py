"""lax_linalg on complex matrices (cholesky, triangular_solve, lu of complex64 and
complex128, carried packed as float[..., 2]) and triangular_solve of float16 /
bfloat16 (solved in float32, rounded once): parity with JAX through onnxruntime,
static, batched and symbolic, unrolled and as a Loop, 0x0, and JAX's catalog cases."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax import lax

import jaxonnx
from helpers import all_op_types, catalog_harness, check_harness
from jaxonnx.testing import ort_session
from jaxonnx.testing import Variant, check

CPLX = ["complex64", "complex128"]
REAL_OF = {"complex64": "float32", "complex128": "float64"}
# The unrolled / Loop factorizations round differently from LAPACK's blocked kernels.
TOL = {"complex64": dict(rtol=1e-4, atol=1e-4), "complex128": dict(rtol=1e-9, atol=1e-9)}
# One symbolic model for every size: the symbol takes these values in turn
# (1 and 3 would be unrolled were they static, 70 would be a Loop).
SIZES = (1, 3, 70)
SYM_TOL = {"complex64": dict(rtol=2e-3, atol=2e-3), "complex128": dict(rtol=1e-9, atol=1e-9)}


def run(fn, specs, dtype, symbolic=False, **kw):
    """jaxonnx.testing.check in dtype's precision (complex inputs go in packed)."""
    return check(jax.jit(fn), specs, variants=[Variant(REAL_OF[dtype], symbolic)], **kw)


def cnormal(shape, rng):
    return rng.standard_normal(size=shape) + 1j * rng.standard_normal(size=shape)


def hpd_dirty(shape, dtype, rng):
    """Hermitian positive definite M M^H + n I, then noise in the strict upper
    triangle and on the diagonal's imaginary part (the raw primitive reads only
    the lower triangle's real diagonal and passes the upper one through)."""
    m = cnormal(shape, rng)
    n = shape[-1]
    a = m @ np.conj(np.swapaxes(m, -1, -2)) + n * np.eye(n)
    a = a + 0.1 * np.triu(cnormal(shape, rng), 1) + 0.3j * np.eye(n)
    return a.astype(dtype)


def ctriangular(shape, dtype, rng):
    """Square shapes: complex normal entries over sqrt(n) (unit-diagonal solves
    stay well conditioned up to n = 70), a dominant diagonal of any phase."""
    x = cnormal(shape, rng)
    if shape[-1] == shape[-2]:
        n = shape[-1]
        d = (2 + np.abs(rng.standard_normal(size=shape[:-1]))) * np.exp(2j * np.pi * rng.random(size=shape[:-1]))
        x = x * (1 - np.eye(n)) / np.sqrt(n) + d[..., None] * np.eye(n)
    return x.astype(dtype)


def chol(x):
    return jnp.linalg.cholesky(x), lax.linalg.cholesky_p.bind(x)


# ---------------------------------------------------------------- cholesky --

@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (2, 5, 5), (70, 70)], ids=str)
def test_cholesky(dtype, shape):
    models = run(chol, [(shape, dtype)], dtype, make_inputs=hpd_dirty, **TOL[dtype])
    assert ("Loop" in all_op_types(next(iter(models.values())))) == (shape[-1] > 64)


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("shape,sizes", [(("n", "n"), SIZES), ((2, "n", "n"), SIZES), (("B", 5, 5), (1, 7))], ids=str)
def test_cholesky_symbolic(dtype, shape, sizes):
    run(chol, [(shape, dtype)], dtype, symbolic=True, make_inputs=hpd_dirty, batches=sizes, **SYM_TOL[dtype])


@pytest.mark.parametrize("shape,sizes", [(("B", 3, 3), (4,)), ((4, "n", "n"), (3, 70))], ids=str)
def test_cholesky_not_positive_definite_is_all_nan(shape, sizes):
    # JAX gives NaN in both parts of the whole failed matrix.
    def inputs(shape, dtype, rng):
        a = hpd_dirty(shape, dtype, rng)
        a[1, 0, 0] = -1.0 + 2j                     # negative first pivot (its imaginary part is ignored)
        a[2, -1, -1] = -1e3                        # a last pivot <= 0
        return a

    run(chol, [(shape, "complex64")], "complex64", symbolic=True, make_inputs=inputs, batches=sizes,
        **SYM_TOL["complex64"])


# -------------------------------------------------------- triangular_solve --

COMBOS = list(itertools.product([True, False], repeat=5))  # left, lower, transpose_a, conjugate_a, unit


def all_triangular_solves(a, bl, br):
    return tuple(
        lax.linalg.triangular_solve(a, bl if left else br, left_side=left, lower=lower,
                                    transpose_a=trans, conjugate_a=conj, unit_diagonal=unit)
        for left, lower, trans, conj, unit in COMBOS)


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("n,batch", [(1, ()), (4, (2,)), (70, ())], ids=str)
def test_triangular_solve_all_params(dtype, n, batch):
    shapes = [(*batch, n, n), (*batch, n, 3), (*batch, 3, n)]
    run(all_triangular_solves, [(s, dtype) for s in shapes], dtype, make_inputs=ctriangular, **TOL[dtype])


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("shapes,sizes", [([(2, "n", "n"), (2, "n", 3), (2, 3, "n")], SIZES),
                                          ([("B", 4, 4), ("B", 4, 3), ("B", 3, 4)], (1, 7))], ids=["n", "B"])
def test_triangular_solve_symbolic(dtype, shapes, sizes):
    run(all_triangular_solves, [(s, dtype) for s in shapes], dtype, symbolic=True, make_inputs=ctriangular,
        batches=sizes, **SYM_TOL[dtype])


@pytest.mark.parametrize("shape", [(3, 3), ("n", "n")], ids=str)
def test_triangular_solve_reads_only_its_triangle(shape):
    # NaN in the other triangle (and on the diagonal when unit_diagonal) never reaches the result.
    def inputs(shape, dtype, rng):
        x = ctriangular(shape, dtype, rng)
        if shape[-1] == shape[-2]:
            iu = np.triu_indices(shape[-1])
            x[..., iu[0], iu[1]] = np.nan + 1j * np.nan
        return x

    def fn(a, bl, br):
        return tuple(lax.linalg.triangular_solve(a, bl if left else br, left_side=left, lower=True,
                                                 transpose_a=trans, conjugate_a=conj, unit_diagonal=True)
                     for left, trans, conj in itertools.product([True, False], repeat=3))

    k = 2
    specs = [(shape, "complex64"), ((shape[0], k), "complex64"), ((k, shape[0]), "complex64")]
    run(fn, specs, "complex64", symbolic=isinstance(shape[0], str), make_inputs=inputs, batches=(3, 70),
        **SYM_TOL["complex64"])


def half_triangular(shape, dtype, rng):
    return ctriangular(shape, np.complex64, rng).real.astype(dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(4, 4), ("B", 5, 5), (2, "n", "n")], ids=str)
def test_triangular_solve_half_precision(dtype, shape):
    # Solved in float32 and rounded once. JAX's own float16/bfloat16 solve
    # (XLA's expander) rounds as it goes (it differs from the float32 solution
    # rounded once by up to 1.6e-3 for float16 and 8.8e-3 for bfloat16,
    # relative to the largest entry): agreement to the dtype's tolerance.
    # onnxruntime's Python API takes no bfloat16 arrays: bfloat16 goes in and
    # out as float32, rounded to bfloat16 inside.
    dt = jnp.dtype(dtype)
    io = dt if dtype == "float16" else jnp.dtype("float32")
    n = shape[-1]
    specs = [(shape, io), ((*shape[:-1], 2), io), ((*shape[:-2], 2, n), io)]

    def fn(a, bl, br):
        a, bl, br = a.astype(dt), bl.astype(dt), br.astype(dt)
        return tuple(lax.linalg.triangular_solve(a, bl if left else br, left_side=left, lower=lower,
                                                 transpose_a=trans, unit_diagonal=unit).astype(io)
                     for left, lower, trans, unit in itertools.product([True, False], repeat=4))

    models = check(jax.jit(fn), specs, variants=[Variant("float32", shape != (4, 4))],
                   make_inputs=lambda s, d, rng: half_triangular(s, dt, rng).astype(d), batches=(1, 6),
                   rtol=3e-2, atol=3e-2)
    # The solve's result is rounded to the half type once.
    model = next(iter(models.values()))
    half = {"float16": onnx.TensorProto.FLOAT16, "bfloat16": onnx.TensorProto.BFLOAT16}[dtype]
    casts = [a.i for node in model.graph.node if node.op_type == "Cast" for a in node.attribute if a.name == "to"]
    assert casts.count(half) >= 16, casts


# ---------------------------------------------------------------------- lu --

@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (3, 5), (5, 3), (2, 4, 4), (70, 70), (66, 80)], ids=str)
def test_lu(dtype, shape):
    # lu, pivots and permutation all compared (random entries: unique pivots).
    models = run(lax.linalg.lu, [(shape, dtype)], dtype, **TOL[dtype])
    assert ("Loop" in all_op_types(next(iter(models.values())))) == (max(shape[-2:]) > 64)


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("shape,sizes", [(("n", "n"), SIZES), ((2, "m", 4), (1, 6, 70)), (("B", 4, 6), (1, 7))],
                         ids=str)
def test_lu_symbolic(dtype, shape, sizes):
    run(lax.linalg.lu, [(shape, dtype)], dtype, symbolic=True, batches=sizes, **SYM_TOL[dtype])


@pytest.mark.parametrize("shape", [(4, 2), ("B", 4, 2)], ids=str)
def test_lu_pivots_by_abs_re_plus_abs_im(shape):
    # getrf's izamax picks the first row of maximal |re| + |im|, not of |z|:
    # in the column [3, 2 + 2i] it takes row 1 (|z| would take row 0); ties
    # (1 + i, -2, 2i) take the first; a zero column is left unscaled.
    def inputs(shape, dtype, rng):
        a = np.zeros(shape, dtype)
        a[..., :, 1] = cnormal(shape[:-1], rng)
        a[..., :, 0] = [3, 2 + 2j, 1, 0] if len(shape) == 2 else 0
        if len(shape) == 3:
            a[0, :, 0] = [3, 2 + 2j, 1, 0]
            a[1, :, 0] = [0, 1 + 1j, -2, 2j]
            if shape[0] > 2:
                a[2, :, 0] = 0                        # zero first pivot
        return a

    run(lax.linalg.lu, [(shape, "complex128")], "complex128", symbolic=isinstance(shape[0], str),
        make_inputs=inputs, batches=(3,))
    lu, piv, perm = lax.linalg.lu(np.array([[3, 1], [2 + 2j, 1]], np.complex64))
    assert piv.tolist() == [1, 1]


@pytest.mark.parametrize("dtype", CPLX)
def test_jnp_linalg_solve_and_inv(dtype):
    # lu, lu_pivots_to_permutation and triangular_solve together.
    fn = lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.inv(a))
    run(fn, [(("B", 4, 4), dtype), (("B", 4, 2), dtype)], dtype, symbolic=True, make_inputs=ctriangular,
        **TOL[dtype])
    run(fn, [(("n", "n"), dtype), (("n", 2), dtype)], dtype, symbolic=True, make_inputs=ctriangular,
        batches=SIZES, **SYM_TOL[dtype])


# ------------------------------------------------------------------- empty --

@pytest.mark.parametrize("dtype", CPLX)
def test_empty_matrices(dtype):
    # 0x0 (and 3x0 for lu), static and symbolic: the Loops run no iteration.
    def fn(a, b, c):
        return (*chol(a), *all_triangular_solves(a, b, jnp.swapaxes(b, -1, -2)), *lax.linalg.lu(a),
                *lax.linalg.lu(c))

    run(fn, [((2, 0, 0), dtype), ((2, 0, 2), dtype), ((3, 0), dtype)], dtype)
    run(fn, [((2, "n", "n"), dtype), ((2, "n", 2), dtype), ((3, "n"), dtype)], dtype, symbolic=True, batches=(0,))
    run(fn, [(("B", 3, 3), dtype), (("B", 3, 2), dtype), ((3, 0), dtype)], dtype, symbolic=True, batches=(0,))


# ----------------------------------------------------------- JAX's catalog --

CATALOG = ([("cholesky", f"shape_complex64_{s}_") for s in ("1_1", "4_4", "2_5_5", "200_200", "1000_0_0")]
           + [("lu", f"shape_complex64_{s}_") for s in ("5_5", "3_5_5", "3_5")]
           + [("triangular_solve", f"dtypes_a_{d}_4_4_b_{d}_4_1_leftside_True_lower_False_transposea_False_"
                                   f"conjugatea_False_unitdiagonal_{u}")
              for d in ("complex64", "float16") for u in (False, True)]
           + [("triangular_solve", f"complex_transformations_a_complex64_4_4_b_complex64_4_1_leftside_True_"
                                   f"lower_{lo}_transposea_{t}_conjugatea_{c}_unitdiagonal_False")
              for lo, t, c in itertools.product([False, True], repeat=3)])


@pytest.mark.parametrize("group,name", CATALOG, ids=[n for _, n in CATALOG])
def test_catalog(group, name):
    # (the bfloat16 triangular_solve cases cannot be fed through onnxruntime's
    # Python API; test_triangular_solve_half_precision covers them.)
    if name == "shape_complex64_200_200_":
        return check_harness_at_scale(group, name)
    check_harness(group, name)


def check_harness_at_scale(group, name):
    """check_harness with the catalog's tolerance, relative to the result's
    scale: a 200x200 complex64 factor of entries up to ~200 rounds beyond
    float32's elementwise 1e-5 in its small entries (as LAPACK's blocked
    kernel and a column-by-column Loop sum in different orders)."""
    h = catalog_harness(group, name)
    args = h.dyn_args_maker(np.random.RandomState(0))
    model = jaxonnx.to_onnx(h.dyn_fun, args)
    onnx.checker.check_model(model, full_check=True)
    sess = ort_session(model)
    got = sess.run(None, {i.name: np.stack([a.real, a.imag], -1) for i, a in zip(sess.get_inputs(), args)})
    want = np.asarray(jax.jit(h.dyn_fun)(*args))
    want = np.stack([want.real, want.imag], -1)
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5 * scale)
