"""lax_special plugin: bessel_i0e / bessel_i1e (Cephes series)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from helpers import check

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
