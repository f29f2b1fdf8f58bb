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


def _negate_primitive(compiled=False):
    """test.negate with a JAX impl (negation), and with compiled=True an XLA lowering
    too (so jit and scan can hold it); the plugin lowers it to Identity."""
    prim = jex_core.Primitive("test.negate")
    prim.def_impl(lambda x: -x)
    prim.def_abstract_eval(lambda x: jax_core.ShapedArray(x.shape, x.dtype))
    if compiled:
        from jax.interpreters import mlir
        mlir.register_lowering(prim, mlir.lower_fun(lambda x: -x, multiple_results=False))
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


def test_first_divergence_descends_into_a_jit_call(miscompiled):
    # The whole program is one jit equation: the search goes on inside it and names
    # the negate there, with the jit as its enclosing equation.
    fn = jax.jit(_program(_negate_primitive(compiled=True)))
    x = np.linspace(0.1, 1.0, 6, dtype=np.float32).reshape(2, 3)
    found = jaxonnx.first_divergence(fn, [x], plugin_dirs=miscompiled)
    assert (found.index, found.primitive, found.plugin) == (2, "test.negate", "test_miscompiled")
    assert found.path == ((0, "jit"),)
    assert "inside equation 0 (jit)" in str(found)
    np.testing.assert_allclose(found.expected, -found.got, rtol=1e-6)


def test_first_divergence_descends_into_a_scan_body_at_its_first_step(miscompiled):
    negate = _negate_primitive(compiled=True)

    def fn(xs):
        def step(carry, x):
            y = negate.bind(jnp.cos(x) + carry)
            return carry + 1.0, y
        return jax.lax.scan(step, jnp.float32(0.5), xs)

    xs = np.linspace(0.1, 1.0, 12, dtype=np.float32).reshape(4, 3)
    found = jaxonnx.first_divergence(fn, [xs], plugin_dirs=miscompiled)
    assert found.primitive == "test.negate" and found.path == ((0, "scan"),)
    # The body's value at step 0: cos(xs[0]) + 0.5, which the Identity keeps unnegated.
    np.testing.assert_allclose(found.expected, -(np.cos(xs[0]) + 0.5), rtol=1e-6)
    np.testing.assert_allclose(found.got, np.cos(xs[0]) + 0.5, rtol=1e-6)


def test_first_divergence_compares_with_jit_not_equation_by_equation():
    # XLA compiling 10000 ** (k / 32) rounds some entries one ulp away from the
    # correctly rounded value that JAX's eager pow and onnxruntime give; at rotary
    # position 2**30 that ulp is ~64 radians, so sin differs outright. A user compares
    # with jax.jit, so first_divergence must too (it compared equation by equation
    # and returned None on this, issue 36).
    def fn(pos):
        inv = 1.0 / (10000.0 ** (jnp.arange(0, 32, 2, dtype=jnp.float32) / 32))
        return jnp.sin(pos[:, None].astype(jnp.float32) * inv)

    pos = np.array([3, 2**30], np.int32)
    with jax.disable_jit():
        eager = np.asarray(fn(jnp.asarray(pos)))
    if np.allclose(np.asarray(jax.jit(fn)(pos)), eager, atol=1e-6):
        pytest.skip("this XLA rounds 10000 ** (k / 32) as eager JAX does: nothing differs")
    found = jaxonnx.first_divergence(fn, [pos], rtol=1e-5, atol=1e-6)
    assert found is not None and found.primitive == "sin"
    assert np.allclose(found.expected[0], found.got[0], atol=1e-6)  # position 3 agrees
    assert not np.allclose(found.expected[1], found.got[1], atol=1e-2)


def test_first_divergence_says_so_when_only_the_whole_model_differs(miscompiled, monkeypatch):
    # Every equation agreeing while the model does not (a rewrite across equations):
    # an error that says so, never None. The per-equation search is made to find
    # nothing, so the miscompiled model stands in for such a rewrite.
    from jaxonnx import _verify
    monkeypatch.setattr(_verify._Search, "run", lambda self, *a, **k: None)
    fn = _program(_negate_primitive())
    x = np.linspace(0.1, 1.0, 6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(jaxonnx.ConversionError, match="every equation agrees.*output 0 differs"):
        jaxonnx.first_divergence(fn, [x], plugin_dirs=miscompiled)


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
