"""lax_special plugin: bessel_i0e / bessel_i1e (Cephes series)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from helpers import check, check_harness

FLOATS = [(np.float32, False), (np.float64, True)]
IDS = ["f32", "f64"]


def wide(shape, dtype, rng):
    """Both intervals, the split at 8, zeros, infinities and NaN."""
    x = rng.standard_normal(shape) * 10
    flat = x.reshape(-1)
    flat[:8] = [0.0, -0.0, 8.0, -8.0, np.inf, -np.inf, np.nan, 1e-30][: flat.size]
    return x.astype(dtype)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_bessel_i0e_i1e(dtype, x64):
    f = lambda x: (lax.bessel_i0e(x), lax.bessel_i1e(x))
    check(f, [("B", 24)], x64=x64, make_inputs=wide, rtol=1e-6 if not x64 else 1e-14, atol=1e-30)
    check(f, [(3, 40)], x64=x64, make_inputs=wide, rtol=1e-6 if not x64 else 1e-14, atol=1e-30)


def test_scipy_bessel_and_grad():
    f = lambda x: (jax.scipy.special.i0(x), jax.scipy.special.i1e(x), jax.scipy.special.i0e(x),
                   jax.grad(lambda y: jnp.sum(jax.scipy.special.i0e(y)))(x))
    check(f, [("B", 12)], make_inputs=lambda s, d, rng: (rng.standard_normal(s) * 4).astype(d),
          rtol=1e-5)


def test_bessel_f16():
    check(lambda x: (lax.bessel_i0e(x), lax.bessel_i1e(x)), [("B", 6)], [np.float16])


# ------------------------------------------------- zeta / polygamma (lax_math) --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_zeta(dtype, x64):
    # x in (1.05, 8) and q in (0.05, 20): zeta(x, q) = zeta(x, exp(log q)).
    f = lambda x, lq: lax.zeta(x, jnp.exp(lq))
    gen = lambda s, d, rng: rng.uniform(1.05, 3.0, size=s).astype(d)
    check(f, [("B", 10), ("B", 10)], x64=x64, make_inputs=gen, rtol=1e-5 if not x64 else 1e-12)


def test_zeta_poles_and_domain():
    x = np.array([1.0, 0.5, 2.0, 2.0, 2.5, 3.0, 2.0, 4.0], np.float64)
    q = np.array([2.0, 2.0, 0.0, -2.0, -1.5, -1.5, 1e-3, 1e3], np.float64)
    args = iter([x, q] * 2)
    check(lambda a, b: lax.zeta(a, b), [(8,), (8,)], x64=True, make_inputs=lambda s, d, r: next(args),
          rtol=1e-12)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_polygamma_and_digamma_gradient(dtype, x64):
    def f(x):
        n = jnp.broadcast_to(jnp.array([0, 1, 2, 3]), x.shape)
        return (jax.scipy.special.polygamma(n, x),
                jax.grad(lambda y: jnp.sum(jax.scipy.special.digamma(y)))(x),  # polygamma(1, .)
                jax.scipy.special.zeta(x + 1.0, x))
    check(f, [("B", 4)], x64=x64, make_inputs=lambda s, d, rng: rng.uniform(0.2, 9, size=s).astype(d),
          rtol=1e-4 if not x64 else 1e-10)


def test_polygamma_bad_order_is_nan():
    check(lambda n, x: lax.polygamma(n, x), [(4,), (4,)], x64=True,
          make_inputs=lambda s, d, rng: np.array([-1.0, 0.5, 1.0, 2.0], d))


# ----------------------------------------------- igamma / igammac (lax_math) --

def gamma_args(shape, dtype, rng):
    """a and x over both branches (series, continued fraction), with exact zeros."""
    v = rng.gamma(2.0, 3.0, size=shape)
    v.reshape(-1)[::7] = 0.0
    return v.astype(dtype)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_igamma_igammac(dtype, x64):
    f = lambda a, x: (lax.igamma(a, x), lax.igammac(a, x))
    check(f, [("B", 16), ("B", 16)], x64=x64, make_inputs=gamma_args,
          rtol=1e-4 if not x64 else 1e-11, atol=1e-6 if not x64 else 1e-13)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_igamma_igammac_broadcasting(dtype, x64):
    # lax broadcasts size-1 dims ((1, 16) against (B, 16)): the masked Loops
    # carry state of the result's shape, so both operands are expanded first.
    f = lambda a, x: (lax.igamma(a, x), lax.igammac(a, x), lax.igamma(x, a), lax.igammac(x, a),
                      lax.random_gamma_grad(a, x))
    check(f, [(1, 16), ("B", 16)], x64=x64, make_inputs=gamma_args,
          rtol=1e-4 if not x64 else 1e-11, atol=1e-6 if not x64 else 1e-13)


@pytest.mark.parametrize("group", ["igamma", "igammac"])
@pytest.mark.parametrize("shapes", ["lhs_float32_20_20_rhs_float32_1_20_", "lhs_float32_1_20_rhs_float32_20_20_"])
def test_catalog_igamma_broadcasting(group, shapes):
    check_harness(group, f"broadcasting_{shapes}")


def test_igamma_edges():
    a = np.array([0.0, 0.0, -1.0, 2.0, 2.0, np.nan, 1e-3, 50.0, 3.0], np.float64)
    x = np.array([0.0, 1.0, 1.0, np.inf, -1.0, 1.0, 1e3, 49.0, 1e-300], np.float64)
    args = iter([a, x])
    check(lambda p, q: (lax.igamma(p, q), lax.igammac(p, q)), [(9,), (9,)], x64=True,
          make_inputs=lambda s, d, r: next(args), rtol=1e-11, atol=1e-13)


def test_gamma_distribution_cdf():
    f = lambda x: (jax.scipy.stats.gamma.cdf(x, 2.5), jax.scipy.special.gammaincc(3.0, x),
                   jax.scipy.stats.chi2.cdf(x, 4.0))
    check(f, [("B", 8)], make_inputs=lambda s, d, rng: rng.uniform(0, 12, size=s).astype(d), rtol=1e-4,
          atol=1e-6)


# ------------------------------------- regularized_incomplete_beta (lax_math) --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_betainc(dtype, x64):
    def gen(s, d, rng):
        return rng.uniform(0.05, 0.95, size=s).astype(d)
    f = lambda a, b, x: lax.betainc(a * 5, b * 3, x)
    check(f, [("B", 12)] * 3, x64=x64, make_inputs=gen, rtol=1e-4 if not x64 else 1e-10,
          atol=1e-6 if not x64 else 1e-12)


def test_betainc_edges_and_beta_cdf():
    a = np.array([0.0, 1.0, 2.0, -1.0, 2.0, 2.0, np.inf, 1e-3], np.float64)
    b = np.array([1.0, 0.0, 3.0, 1.0, 3.0, 3.0, 1.0, 2.0], np.float64)
    x = np.array([0.5, 0.5, 0.0, 0.5, 1.0, 1.5, 0.5, 0.3], np.float64)
    args = iter([a, b, x])
    check(lambda p, q, r: lax.betainc(p, q, r), [(8,)] * 3, x64=True, make_inputs=lambda s, d, g: next(args),
          rtol=1e-10)
    check(lambda v: jax.scipy.stats.beta.cdf(v, 2.0, 5.0), [("B", 6)],
          make_inputs=lambda s, d, rng: rng.uniform(0, 1, size=s).astype(d), rtol=1e-4, atol=1e-6)
