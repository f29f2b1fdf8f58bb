"""my_plugin's tests: the generated ones (testcases.py x variants), the
descriptor check, and the primitive in JAX."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxonnx import testing

import my_plugin
from my_plugin.testcases import TESTCASES  # noqa: F401  (read by the jaxonnx.testing plugin)


def test_generated(jaxonnx_case):
    jaxonnx_case.run()


def test_descriptor():
    (so,) = my_plugin.PLUGIN_DIR.glob("my_plugin*")
    info = testing.check_plugin(so)
    assert [p["name"] for p in info["primitives"]] == ["my_plugin.softsign"]


def test_found_through_the_entry_point():
    import jaxonnx
    assert my_plugin.plugin_dir() in jaxonnx.plugin_folders()


@pytest.mark.parametrize("run", [lambda f, x: f(x), lambda f, x: jax.jit(f)(x)], ids=["eager", "jit"])
def test_runs_in_jax(run):
    x = jnp.linspace(-3, 3, 12).reshape(3, 4)
    np.testing.assert_allclose(run(my_plugin.softsign, x), my_plugin.softsign_reference(x),
                               rtol=1e-6)


def test_gradient_goes_through_the_reference():
    x = jnp.linspace(-3, 3, 7)
    grad = jax.grad(lambda v: my_plugin.softsign(v).sum())(x)
    np.testing.assert_allclose(grad, 1 / (1 + jnp.abs(x)) ** 2, rtol=1e-6)
