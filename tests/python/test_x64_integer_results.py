"""64-bit mode: integer results keep JAX's dtype (int64), symbolic dims included (issue 16)."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from helpers import check

PROGRAMS = {
    "size": lambda x: (jnp.size(x), x.size),
    "dim_as_value": lambda x: (jnp.asarray(x.shape[0]), jnp.arange(x.shape[0] * 2)[-1],
                               x.shape[0] * jnp.ones((), jnp.int64)),
    "while_counter": lambda x: lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 2),
                                              (0, x)),
    "fori_counter": lambda x: lax.fori_loop(0, 5, lambda i, c: c + i, jnp.zeros((), jnp.int64)),
    "counts": lambda x: (jnp.argmax(x, axis=-1), jnp.sum(x > 0, axis=-1)),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_integer_results_are_int64(name, dtype):
    check(PROGRAMS[name], [("B", 4)], [dtype], x64=True)
