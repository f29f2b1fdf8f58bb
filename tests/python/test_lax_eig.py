"""lax_eig plugin: eig (jnp.linalg.eig / eigvals) and schur (jax.scipy.linalg.schur)
of real matrices, as LAPACK's geev / gees compute them (JAX calls those on CPU).

What is compared, and why (docs/api.md#eig-and-schur says the same to users):
- eigenvalues: values AND order, wherever LAPACK's own order is a stable function
  of the input (well separated spectra with complex pairs, triangular matrices,
  small sizes). Where it is not (clusters of real eigenvalues in larger matrices:
  a one-ulp change of the input reorders JAX's own eigenvalues of ~25% of random
  16x16 symmetric float64 matrices), the sorted spectrum is compared.
- eigenvectors, right and left: geev's normalization exactly (unit 2-norm,
  largest component real) on triangular matrices; elsewhere up to the sign of each column, which
  in LAPACK hangs on rounding too (a one-ulp input change flips some column of
  ~20% of random 16x16 matrices), so the program multiplies each column by the
  sign of its largest component's real part before comparing; A V = V diag(w).
- schur: T and Z exactly on triangular input; elsewhere what is unique about
  them: diag(T) in order, Z T Z^T = A, Z^T Z = I, and T's quasi-triangular
  shape with standardized 2x2 blocks (which of the two standard forms a block
  takes, like the eigenvector signs, depends on rounding in LAPACK itself)."""

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax import lax

import jaxonnx
from helpers import check_harness
from jaxonnx.testing import Variant, check

VARIANTS = [Variant("float32", False), Variant("float32", True), Variant("float64", False),
            Variant("float64", True)]
F64 = VARIANTS[2:]
TOL = dict(rtol=2e-4, atol=2e-4)  # float32 follows LAPACK's path, not its last bits
SIZES = [1, 2, 3, 5, 8, 16]


def run(fn, spec, gen, variants=VARIANTS, **kw):
    models = {}
    for v in variants:
        tol = TOL if v.dtype == "float32" else dict(rtol=1e-8, atol=1e-8)
        models.update(check(fn, [spec], variants=[v], make_inputs=gen, **{**tol, **kw}))
    return models


# ------------------------------------------------------------------ inputs --

def _spectrum(n, rng, pairs):
    """Block-diagonal with well separated eigenvalues; `pairs` 2x2 blocks a +- bi."""
    m = np.zeros((n, n))
    slots = rng.permutation(n)
    j = 0
    for p in range(pairs):
        c, b = 0.9 * slots[j] - n / 2 + 0.2 * rng.random(), 0.6 + 0.2 * p + 0.1 * rng.random()
        m[j:j + 2, j:j + 2] = [[c, b], [-b, c]]
        j += 2
    for j in range(j, n):
        m[j, j] = 0.9 * slots[j] - n / 2 + 0.2 * rng.random() + 0.05
    return m


def matrices(kind):
    """make_inputs for check(): [..., n, n] matrices of one family."""
    def gen(shape, dtype, rng):
        *batch, n, _ = shape
        out = np.empty((int(np.prod(batch, dtype=int)), n, n))
        for b in range(out.shape[0]):
            if kind in ("mixed", "real"):  # S M S^-1, S well conditioned
                m = _spectrum(n, rng, n // 3 if kind == "mixed" else 0)
                s = np.eye(n) + 0.3 * rng.standard_normal((n, n)) / np.sqrt(n)
                a = s @ m @ np.linalg.inv(s)
            elif kind in ("upper", "lower"):  # already Schur (lower: dgebal permutes it)
                a = np.triu(rng.standard_normal((n, n)), 1) + _spectrum(n, rng, 0)
                a = a if kind == "upper" else a.T
            elif kind == "symmetric":
                q, _ = np.linalg.qr(rng.standard_normal((n, n)))
                a = q @ _spectrum(n, rng, 0) @ q.T
                a = (a + a.T) / 2
            elif kind == "rotation":  # orthogonal: eigenvalues on the unit circle
                q, _ = np.linalg.qr(rng.standard_normal((n, n)))
                r = np.eye(n)
                for j in range(0, n - 1, 2):
                    t = 0.3 + 0.6 * j / n + 0.05 * rng.random()
                    r[j:j + 2, j:j + 2] = [[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]
                a = q @ r @ q.T
            elif kind == "scaled":  # dgebal's scaling matters: D A D^-1
                d = 10.0 ** rng.integers(-3, 4, n)
                a = d[:, None] * (np.eye(n) * 3 + rng.standard_normal((n, n))) / d[None, :]
            elif kind == "random":
                a = rng.standard_normal((n, n))
            out[b] = a
        return out.reshape(shape).astype(dtype)
    return gen


def batch(n):
    return ("B", n, n)


# -------------------------------------------------------------- programs --

def canon_columns(v):
    """Each column times the sign of its largest component's real part."""
    k = jnp.argmax(jnp.abs(v), axis=-2, keepdims=True)
    f = jnp.take_along_axis(v.real, k, axis=-2)
    return v * jnp.where(f < 0, -1, 1).astype(v.dtype)


def eig_canon(a):
    w, v = jnp.linalg.eig(a)
    return w, canon_columns(v)


def eig_residual(a):
    """|A V - V diag(w)| and V's column norms: what any eigendecomposition satisfies."""
    w, v = jnp.linalg.eig(a)
    av = jnp.einsum("...ij,...jk->...ik", a.astype(v.dtype), v)
    return jnp.abs(av - v * w[..., None, :]).max(axis=(-1, -2)), jnp.linalg.norm(v, axis=-2)


def schur_invariants(a):
    t, z = jax.scipy.linalg.schur(a)
    zt = jnp.swapaxes(z, -1, -2)
    off = jnp.diagonal(t, -1, -2, -1) * jnp.diagonal(t, 1, -2, -1)  # b c of a 2x2 block (< 0)
    return jnp.diagonal(t, 0, -2, -1), off, z @ t @ zt, zt @ z, jnp.tril(t, -2)


# ------------------------------------------------------------------- tests --

@pytest.mark.parametrize("n", SIZES)
def test_eigvals_order_with_complex_pairs(n):
    run(jnp.linalg.eigvals, batch(n), matrices("mixed"))


@pytest.mark.parametrize("n", SIZES)
def test_eig_vectors_normalized_as_geev(n):
    run(eig_canon, batch(n), matrices("mixed"))


@pytest.mark.parametrize("kind", ["upper", "lower"])
@pytest.mark.parametrize("n", [2, 5, 16])
def test_eig_of_triangular_is_exact(kind, n):
    """Already Schur (dgebal isolates every eigenvalue): order, values and geev's
    normalization, signs included, match as they are."""
    run(jnp.linalg.eig, batch(n), matrices(kind))
    run(lambda a: jax.scipy.linalg.schur(a), batch(n), matrices(kind))


@pytest.mark.parametrize("kind", ["real", "symmetric", "random", "scaled"])
@pytest.mark.parametrize("n", [2, 3, 5])
def test_eig_small(kind, n):
    # float32 5x5 matrices with only real eigenvalues: LAPACK's order is not
    # stable (see the top); float64 and the sorted spectrum are.
    unstable = n == 5 and kind in ("real", "symmetric")
    run(eig_canon, batch(n), matrices(kind), variants=F64 if unstable else VARIANTS)
    if unstable:
        run(lambda a: jnp.sort(jnp.linalg.eigvals(a).real), batch(n), matrices(kind))


@pytest.mark.parametrize("kind", ["real", "symmetric"])
@pytest.mark.parametrize("n", [8, 16])
def test_eig_real_spectrum_sorted(kind, n):
    """Clusters of real eigenvalues: LAPACK's order is not stable, the set is."""
    run(lambda a: (jnp.sort(jnp.linalg.eigvals(a).real), eig_residual(a)[0] < 1e-3), batch(n),
        matrices(kind))


@pytest.mark.parametrize("n", [3, 8, 16])
def test_eig_rotation(n):
    run(eig_canon, batch(n), matrices("rotation"))


@pytest.mark.parametrize("n", [5, 16])
def test_eig_balancing_scales(n):
    run(eig_canon, batch(n), matrices("scaled"))


@pytest.mark.parametrize("n", [3, 8])
def test_eig_invariants(n):
    run(lambda a: tuple(x < 1e-3 for x in eig_residual(a)[:1]) + (eig_residual(a)[1],), batch(n),
        matrices("random"))


def test_eig_batch_rank_two():
    run(eig_canon, ("B", 2, 5, 5), matrices("mixed"))
    run(jnp.linalg.eigvals, (3, 2, 4, 4), matrices("mixed"), variants=VARIANTS[::2])


def test_eig_static_unbatched():
    run(jnp.linalg.eigvals, (6, 6), matrices("mixed"), variants=VARIANTS[::2])


def eig_all_canon(a):
    w, vl, vr = lax.linalg.eig(a)
    return w, canon_columns(vl), canon_columns(vr)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_eig_left_eigenvectors(n):
    """lax.linalg.eig's default: w, left (u^H A = w u^H) and right eigenvectors."""
    run(eig_all_canon, batch(n), matrices("mixed"))
    run(lambda a: lax.linalg.eig(a, compute_right_eigenvectors=False), batch(n), matrices("lower"))


def test_eig_primitive_right_only_and_none():
    run(lambda a: lax.linalg.eig(a, compute_left_eigenvectors=False)[0], batch(5), matrices("mixed"))
    run(lambda a: lax.linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False),
        batch(5), matrices("mixed"))


@pytest.mark.parametrize("n", SIZES)
def test_schur_invariants(n):
    run(schur_invariants, batch(n), matrices("mixed"))


@pytest.mark.parametrize("n", [3, 8])
def test_schur_real_spectrum(n):
    diag = lambda a: jax.scipy.linalg.schur(a)[0].diagonal(0, -2, -1)
    run(diag, batch(n), matrices("real"), variants=VARIANTS if n < 5 else F64)
    run(lambda a: jnp.sort(diag(a)), batch(n), matrices("real"))


def test_schur_without_vectors():
    run(lambda a: lax.linalg.schur(a, compute_schur_vectors=False)[0].diagonal(0, -2, -1),
        batch(5), matrices("mixed"))


def companion_roots(c):
    """The roots of polynomials c[..., 0] x^m + ... + c[..., m] (c[..., 0] != 0), as
    jnp.roots finds them: the eigenvalues of the companion matrix. (jnp.roots
    itself also sorts complex values, which lax_sort does not lower.)"""
    m = c.shape[-1] - 1
    top = -c[..., 1:] / c[..., :1]
    below = jnp.broadcast_to(jnp.eye(m - 1, m, dtype=c.dtype), c.shape[:-1] + (m - 1, m))
    return jnp.linalg.eigvals(jnp.concatenate([top[..., None, :], below], axis=-2))


def test_polynomial_roots():
    def coefficients(shape, dtype, rng):
        roots = lambda: np.concatenate([np.arange(1, 4) + 0.1 * rng.random(3), [0.5 + 1j, 0.5 - 1j]])
        out = [np.poly(roots()).real for _ in range(int(np.prod(shape[:-1], dtype=int)))]
        return np.stack(out).reshape(shape).astype(dtype)
    run(companion_roots, ("B", 6), coefficients)


def test_graph_is_a_loop_not_unrolled():
    small = jaxonnx.to_onnx(jnp.linalg.eig, [jax.ShapeDtypeStruct((3, 3), np.float32)])
    big = jaxonnx.to_onnx(jnp.linalg.eig, [jax.ShapeDtypeStruct((24, 24), np.float32)])
    assert [n.op_type for n in small.graph.node].count("Loop") == 1
    # The per-matrix work sits in nested Loop bodies: the node count does not grow with n.
    count = lambda g: sum(1 + sum(count(a.g) for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)
                          for n in g.node)
    assert count(big.graph) == count(small.graph)


def test_refusals():
    spec = jax.ShapeDtypeStruct((4, 4), np.complex64)
    with pytest.raises(jaxonnx.ConversionError, match="schur of a complex matrix"):
        jaxonnx.to_onnx(jax.scipy.linalg.schur, [spec])
    real = jax.ShapeDtypeStruct((4, 4), np.float32)
    with pytest.raises(jaxonnx.ConversionError, match="schur.*sort_eig_vals"):
        jaxonnx.to_onnx(lambda a: lax.linalg.schur(a, sort_eig_vals=True), [real])
    sym = jax.ShapeDtypeStruct(jax.export.symbolic_shape("n, n"), np.float32)
    with pytest.raises(jaxonnx.ConversionError, match="eig.*matrix dims.*static"):
        jaxonnx.to_onnx(jnp.linalg.eigvals, [sym])


# ------------------------------------------------------------ empty operands --

@pytest.mark.parametrize("shape", [(0, 0), (3, 0, 0), ("B", 0, 0), (0, 4, 4)], ids=str)
def test_eig_and_schur_of_empty_matrices(shape):
    # 0x0 matrices, or no matrix: every result empty, of the right shapes and
    # dtypes (complex carried packed), and no Loop over nothing.
    def f(a):
        w, vl, vr = lax.linalg.eig(a)
        t, z = lax.linalg.schur(a)
        return w, vl, vr, t, z
    models = run(f, shape, matrices("mixed"), variants=VARIANTS if "B" in shape else VARIANTS[::2])
    for m in models.values():
        assert all(n.op_type != "Loop" for n in m.graph.node)


@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("right", [False, True])
def test_catalog_eig_0x0(left, right):
    for dtype in ["float32", "complex64"]:
        check_harness("eig", f"shape_{dtype}_0_0_computelefteigenvectors_{left}_computerighteigenvectors_{right}")


# ----------------------------------------------------------------- complex --
# eig of complex64/complex128 matrices runs the real path on a shifted real
# embedding (plugins/lax_eig/complex_eig.cpp). Its eigenvalue order is not
# zgeev's (eig's order is not defined), so the programs return what does not
# depend on it: the power sums of the eigenvalues (the spectrum as a
# multiset), the residuals |A V - V diag(w)|, |U^H A - diag(w) U^H| and the
# vectors' norms.

CPLX_VARIANTS = {"complex64": [Variant("float32", False), Variant("float32", True)],
                 "complex128": [Variant("float64", False), Variant("float64", True)]}


def complex_eig_invariants(a, left=True, right=True):
    out = lax.linalg.eig(a, compute_left_eigenvectors=left, compute_right_eigenvectors=right)
    w = out[0]
    scale = jnp.max(jnp.abs(w), axis=-1, keepdims=True) + 1
    p, sums = jnp.ones_like(w), []
    for _ in range(a.shape[-1]):
        p = p * w / scale
        sums.append(p.sum(-1))
    res = [jnp.stack(sums, -1)]
    h = lambda x: jnp.conj(jnp.swapaxes(x, -1, -2))
    if left:
        vl = out[1]
        res += [jnp.abs(h(vl) @ a - w[..., :, None] * h(vl)).max(axis=(-1, -2)), jnp.linalg.norm(vl, axis=-2)]
    if right:
        vr = out[-1]
        res += [jnp.abs(a @ vr - vr * w[..., None, :]).max(axis=(-1, -2)), jnp.linalg.norm(vr, axis=-2)]
    return res


def complex_matrices(kind):
    def gen(shape, dtype, rng):
        *batch, n, _ = shape
        out = np.empty((int(np.prod(batch, dtype=int)), n, n), np.complex128)
        for b in range(out.shape[0]):
            z = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
            if kind == "random":
                a = z
            elif kind == "degenerate":  # cycles through the hard cases
                q, _ = np.linalg.qr(z)
                a = [np.eye(n), np.zeros((n, n)), matrices("real")((n, n), np.float64, rng),  # real-valued
                     (z + z.conj().T) / 2,  # Hermitian: real eigenvalues
                     q @ np.diag([2.0, 2.0, 1j, 1j, -1.0][:n] + [0.5] * (n - 5)) @ q.conj().T,  # repeated
                     np.diag(np.arange(n) * (1 + 1j))][b % 6]
            out[b] = a
        return out.reshape(shape).astype(dtype)
    return gen


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), ("B", 6, 6), (2, 3, 4, 4)], ids=str)
def test_eig_complex(shape, dtype):
    tol = TOL if dtype == "complex64" else dict(rtol=1e-8, atol=1e-8)
    variants = CPLX_VARIANTS[dtype] if "B" in shape else CPLX_VARIANTS[dtype][:1]
    check(complex_eig_invariants, [(shape, dtype)], variants=variants, make_inputs=complex_matrices("random"), **tol)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_eig_complex_degenerate(dtype):
    # Identity, zero, real-valued, Hermitian, repeated eigenvalues (a
    # diagonalizable U D U^H), and an exact diagonal: the shift keeps A's half
    # of the embedding's spectrum apart from the conjugate half in each.
    tol = TOL if dtype == "complex64" else dict(rtol=1e-8, atol=1e-8)
    check(complex_eig_invariants, [((6, 5, 5), dtype)], variants=CPLX_VARIANTS[dtype][:1],
          make_inputs=complex_matrices("degenerate"), **tol)


@pytest.mark.parametrize("left,right", [(False, False), (True, False), (False, True)])
def test_eig_complex_vector_choices(left, right):
    check(lambda a: complex_eig_invariants(a, left, right), [(("B", 4, 4), "complex64")],
          variants=CPLX_VARIANTS["complex64"], make_inputs=complex_matrices("random"), **TOL)


def test_eig_complex_normalized_as_zgeev():
    # Unit columns whose largest component is real and positive, as zgeev scales them.
    spec = jax.ShapeDtypeStruct((3, 6, 6), np.complex128)
    with jax.enable_x64(True):
        model = jaxonnx.to_onnx(lambda a: lax.linalg.eig(a), [spec], enable_double_precision=True)
    from jaxonnx.testing import ort_session, packed
    a = complex_matrices("random")((3, 6, 6), np.complex128, np.random.default_rng(1))
    sess = ort_session(model)
    w, vl, vr = [x[..., 0] + 1j * x[..., 1] for x in sess.run(None, {sess.get_inputs()[0].name: packed(a)})]
    ref = np.linalg.eigvals(a)
    for b in range(3):
        assert np.allclose(np.sort_complex(w[b]), np.sort_complex(ref[b]), atol=1e-10)
    for v in (vl, vr):
        np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1, atol=1e-12)
        k = np.argmax(np.abs(v), axis=-2)[..., None, :]
        top = np.take_along_axis(v, k, axis=-2)
        assert (top.imag == 0).all() and (top.real > 0).all()


@pytest.mark.parametrize("name", ["shape_complex64_5_5_computelefteigenvectors_True_computerighteigenvectors_True",
                                  "shape_complex64_2_6_6_computelefteigenvectors_False_computerighteigenvectors_True",
                                  "shape_complex64_2_6_6_computelefteigenvectors_False_computerighteigenvectors_False"])
def test_catalog_eig_complex(name):
    # The catalog's case, checked as benchmarks/catalog.py checks eig: the
    # eigenvalues matched to JAX's (any order), the eigen-equations, unit norms.
    from helpers import catalog_harness
    from jaxonnx.testing import ort_session, packed
    h = catalog_harness("eig", name)
    a = np.asarray(h.dyn_args_maker(np.random.RandomState(0))[0])
    model = jaxonnx.to_onnx(h.dyn_fun, [a])
    onnx.checker.check_model(model, full_check=True)
    sess = ort_session(model)
    got = [x[..., 0] + 1j * x[..., 1] for x in sess.run(None, {sess.get_inputs()[0].name: packed(a)})]
    want = jax.tree_util.tree_leaves(jax.jit(h.dyn_fun)(a))
    assert len(got) == len(want)
    w = got[0]
    n = a.shape[-1]
    for idx in np.ndindex(*a.shape[:-2]):
        np.testing.assert_allclose(np.sort_complex(w[idx]), np.sort_complex(np.asarray(want[0])[idx]), atol=1e-4 * n)
    h_ = lambda x: np.conj(np.swapaxes(x, -1, -2))
    vectors = got[1:]
    sides = [s for s, on in (("left", h.params["compute_left_eigenvectors"]),
                             ("right", h.params["compute_right_eigenvectors"])) if on]
    for side, v in zip(sides, vectors):
        lhs = h_(v) @ a if side == "left" else a @ v
        rhs = w[..., :, None] * h_(v) if side == "left" else v * w[..., None, :]
        np.testing.assert_allclose(lhs, rhs, atol=1e-4 * n)
        np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1, atol=1e-5)


def test_eig_repeated_complex_pairs():
    # Two equal 2x2 rotation blocks, alone and with a third: the 2x2 solve of
    # dtrevc3 meets an exactly singular block; perturbed as dlaln2 does, not 0/0.
    def gen(shape, dtype, rng):
        r = np.array([[0.5, -1.0], [1.0, 0.5]])
        a = np.zeros((2, 6, 6))
        a[0, :4, :4] = np.kron(np.eye(2), r)
        a[0, 4:, 4:] = [[2.0, 0.0], [0.0, -1.0]]
        a[1] = np.kron(np.eye(3), r)
        return a.reshape(shape).astype(dtype)
    run(eig_residual, (2, 6, 6), gen, variants=VARIANTS[::2])
