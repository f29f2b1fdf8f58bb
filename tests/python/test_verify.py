"""jaxonnx.first_divergence finds the equation a plugin lowers wrongly."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import core as jax_core
from jax.extend import core as jex_core

import jaxonnx
from test_plugin_host import build_test_plugins


@pytest.fixture(scope="module")
def miscompiled():
    return [build_test_plugins() / "miscompiled"]


def _negate_primitive():
    """test.negate with a JAX impl (negation); the plugin lowers it to Identity."""
    prim = jex_core.Primitive("test.negate")
    prim.def_impl(lambda x: -x)
    prim.def_abstract_eval(lambda x: jax_core.ShapedArray(x.shape, x.dtype))
    return prim


def _program(negate):
    def fn(x):
        y = jnp.sin(x) * 2.0
        z = negate.bind(y)  # the wrong lowering
        return jnp.exp(z) + 1.0
    return fn


def test_first_divergence_names_the_miscompiled_equation(miscompiled):
    fn = _program(_negate_primitive())
    x = np.linspace(0.1, 1.0, 6, dtype=np.float32).reshape(2, 3)
    found = jaxonnx.first_divergence(fn, [x], plugin_dirs=miscompiled)
    assert isinstance(found, jaxonnx.Divergence)
    assert (found.index, found.primitive, found.plugin, found.output) == (2, "test.negate",
                                                                         "test_miscompiled", 0)
    line = fn.__code__.co_firstlineno + 2
    assert f"test_verify.py:{line}" in found.source
    np.testing.assert_allclose(found.expected, -found.got, rtol=1e-6)
    assert "max abs diff" in found.detail and "test.negate" in str(found)
    # The final output differs too, as allclose reports; first_divergence names the cause.
    path = jaxonnx.to_onnx(fn, [(2, 3)], plugin_dirs=miscompiled, return_mode="bytes")
    assert not jaxonnx.allclose(fn, path, [x])[0]


def test_first_divergence_is_none_when_every_equation_agrees():
    def fn(x, scale):
        return jnp.cumsum(jnp.tanh(x) * scale, axis=0).astype(jnp.int32)

    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    assert jaxonnx.first_divergence(fn, [x], input_params={"scale": 3.0}) is None
    assert jaxonnx.first_divergence(fn, [(4, 3)], input_params={"scale": 3.0}) is None
