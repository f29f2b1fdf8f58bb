"""lax_total_order plugin: lt_to / le_to / eq_to, and the jnp functions built on them."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from helpers import check

FLOATS = [(np.float32, False), (np.float64, True)]
IDS = ["f32", "f64"]


def specials(shape, dtype, rng):
    """Signed zeros, infinities and NaN among small integers (many ties)."""
    pool = np.array([0.0, -0.0, 1.0, -1.0, 2.0, np.inf, -np.inf, np.nan], dtype)
    return rng.choice(pool, size=shape)


def compare_all(x, y):
    return lax.lt_to_p.bind(x, y), lax.le_to_p.bind(x, y), lax.eq_to_p.bind(x, y)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_total_order_floats(dtype, x64):
    check(compare_all, [("B", 16), ("B", 16)], x64=x64, make_inputs=specials)
    check(compare_all, [(4, 8), (4, 8)], x64=x64, make_inputs=specials)


def test_total_order_zero_and_nan_pairs():
    pairs = np.array([[-0.0, 0.0], [0.0, -0.0], [0.0, 0.0], [np.nan, np.nan], [np.nan, np.inf],
                      [1.0, np.nan], [-np.inf, -0.0]], np.float32)
    check(lambda p: compare_all(p[:, 0], p[:, 1]), [(7, 2)], make_inputs=lambda s, d, rng: pairs)




@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint16, np.bool_, np.float16],
                         ids=["i32", "i8", "u16", "bool", "f16"])
def test_total_order_other_dtypes(dtype):
    check(compare_all, [("B", 6), ("B", 6)], [dtype, dtype])


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_searchsorted_digitize_interp(dtype, x64):
    grid = np.array([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0], dtype)

    def f(x):
        return (jnp.searchsorted(grid, x), jnp.searchsorted(grid, x, side="right"),
                jnp.digitize(x, grid), jnp.interp(x, grid, grid ** 2),
                jnp.searchsorted(jnp.sort(x, axis=-1)[0], grid))
    check(f, [("B", 5)], x64=x64)


def test_bucketize_with_ties():
    edges = np.array([0.0, 1.0, 2.0], np.float32)
    check(lambda x: (jnp.digitize(x, edges), jnp.digitize(x, edges, right=True)), [("B", 8)],
          make_inputs=lambda s, d, rng: rng.integers(-1, 4, size=s).astype(d))
