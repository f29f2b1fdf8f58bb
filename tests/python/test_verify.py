"""jaxonnx.first_divergence finds the equation a plugin lowers wrongly."""

import jax
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


# ------------------------------------------------------------------ verify=True

def test_verify_passes_a_correct_model_at_every_size():
    # B at 1 and two larger sizes, T its own values: a model that is right passes.
    def fn(x, m):
        return jnp.cumsum(jnp.tanh(x), axis=1) * m[..., None], jnp.argmax(x, axis=-1)

    specs = [jax.ShapeDtypeStruct(("B", "T", 4), jnp.float32), jax.ShapeDtypeStruct(("B", "T"), jnp.float32)]
    model = jaxonnx.to_onnx(fn, specs, verify=True)
    assert [d.dim_param for d in model.graph.input[0].type.tensor_type.shape.dim[:2]] == ["B", "T"]


def test_verify_names_the_miscompiled_equation(miscompiled, tmp_path):
    fn = _program(_negate_primitive())
    out = tmp_path / "model.onnx"
    with pytest.raises(jaxonnx.ConversionError) as err:
        jaxonnx.to_onnx(fn, [("B", 3)], plugin_dirs=miscompiled, verify=True, return_mode="file",
                        output_path=out)
    message = str(err.value)
    assert "output 0" in message and "B=1" in message and "max abs diff" in message
    assert "equation 2 (test.negate, lowered by plugin 'test_miscompiled')" in message
    assert f"test_verify.py:{fn.__code__.co_firstlineno + 2}" in message
    assert not out.exists()  # nothing written
    # Off by default: the same conversion returns the (wrong) model.
    jaxonnx.to_onnx(fn, [("B", 3)], plugin_dirs=miscompiled)


def test_verify_covers_input_params_layouts_and_keys():
    from flax import nnx

    class Net(nnx.Module):
        def __init__(self, rngs):
            self.conv = nnx.Conv(3, 4, (3, 3), rngs=rngs)
            self.drop = nnx.Dropout(0.5, rngs=rngs)

        def __call__(self, x, deterministic=True):
            return self.drop(nnx.relu(self.conv(x)), deterministic=deterministic)

    net = Net(nnx.Rngs(0))
    before = nnx.state(net, nnx.RngState)
    jaxonnx.to_onnx(net, [("B", 8, 8, 3)], input_params={"deterministic": True},
                    inputs_as_nchw=[0], outputs_as_nchw=[0], verify=True)
    after = nnx.state(net, nnx.RngState)
    assert jax.tree.all(jax.tree.map(lambda a, b: bool((a == b).all()), before, after))

    def draw(key, x):
        return x + jax.random.normal(key, x.shape)

    jaxonnx.to_onnx(draw, [jax.random.key(0), ("B", 3)], verify=True)


def test_verify_reports_a_model_onnxruntime_cannot_run(monkeypatch):
    from jaxonnx import _verify

    def refuse(model, optimized=False):
        raise RuntimeError("no kernel")

    monkeypatch.setattr(_verify, "_session", refuse)
    with pytest.raises(jaxonnx.ConversionError, match="verify: onnxruntime cannot load the model: no kernel"):
        jaxonnx.to_onnx(lambda x: x + 1.0, [(2,)], verify=True)


def test_cli_convert_verify(tmp_path):
    import subprocess
    import sys

    (tmp_path / "progs.py").write_text(
        "import jax.numpy as jnp\n"
        "def make():\n"
        "    return lambda x: jnp.sin(x) * 2.0\n")
    run = subprocess.run([sys.executable, "-m", "jaxonnx", "convert", "progs:make", "--input", "B,3",
                          "--verify", "-o", str(tmp_path / "m.onnx")], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "m.onnx").exists()
