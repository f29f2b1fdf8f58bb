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
    with pytest.raises(jaxonnx.ConversionError, match="eig of a complex matrix"):
        jaxonnx.to_onnx(jnp.linalg.eigvals, [spec])
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
