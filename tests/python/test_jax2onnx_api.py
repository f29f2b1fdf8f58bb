"""jax2onnx 0.17.1's documented usages, with only the import changed to jaxonnx."""

import inspect
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from flax import nnx

import jaxonnx
from jaxonnx import allclose, to_onnx


def _plugin_of(primitive):
    return next(p["name"] for p in jaxonnx._plugins.registry().plugins
                for q in p["primitives"] if q["name"] == primitive)


def _session(model):
    onnx.checker.check_model(model, full_check=True)
    return ort.InferenceSession(model.SerializeToString())


class MLP(nnx.Module):
    """jax2onnx's quick-start model."""

    def __init__(self, din, dmid, dout, *, rngs):
        self.linear1 = nnx.Linear(din, dmid, rngs=rngs)
        self.dropout = nnx.Dropout(rate=0.1, deterministic=True, rngs=rngs)
        self.bn = nnx.BatchNorm(dmid, use_running_average=True, rngs=rngs)
        self.linear2 = nnx.Linear(dmid, dout, rngs=rngs)

    def __call__(self, x):
        x = self.bn(self.linear1(x))
        x = self.dropout(x, deterministic=True)
        x = nnx.gelu(x)
        return self.linear2(x)


# Defaults that differ on purpose, with what they mean. opset=None is the
# target's default opset: 23 for the default target, jax2onnx's default.
DIFFERENT_DEFAULTS = {"opset": None}


def test_signatures_match_jax2onnx():
    j2o = pytest.importorskip("jax2onnx")
    for ours, theirs in [(jaxonnx.to_onnx, j2o.to_onnx), (jaxonnx.allclose, j2o.allclose)]:
        mine = inspect.signature(ours).parameters
        for name, p in inspect.signature(theirs).parameters.items():
            assert name in mine, name
            default = DIFFERENT_DEFAULTS.get(name, p.default) if ours is jaxonnx.to_onnx else p.default
            assert (mine[name].kind, mine[name].default) == (p.kind, default), name


def test_the_default_opset_is_jax2onnxs():
    model = to_onnx(lambda x: x + 1, [("B", 3)])
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [23]


def test_quick_start_to_file_and_allclose(tmp_path):
    model = MLP(din=30, dmid=20, dout=10, rngs=nnx.Rngs(0))
    path = to_onnx(model, [("B", 30)], return_mode="file", output_path=str(tmp_path / "my_callable.onnx"))
    assert path == str(tmp_path / "my_callable.onnx")
    onnx.checker.check_model(path, full_check=True)
    ok, msg = allclose(model, path, [(5, 30)], atol=1e-5)
    assert ok, msg
    ok, msg = allclose(model, path, [np.random.default_rng(1).standard_normal((3, 30)).astype(np.float32)])
    assert ok, msg


def test_web_export_is_one_self_contained_file(tmp_path):
    class WebMLP(nnx.Module):
        def __init__(self, rngs):
            self.linear1, self.linear2 = nnx.Linear(8, 6, rngs=rngs), nnx.Linear(6, 3, rngs=rngs)

        def __call__(self, x):
            return self.linear2(nnx.gelu(self.linear1(x)))

    model = WebMLP(nnx.Rngs(0))
    path = tmp_path / "web_mlp.onnx"
    to_onnx(model, [("B", 8)], return_mode="file", output_path=path, export_mode="web")
    assert os.listdir(tmp_path) == ["web_mlp.onnx"]
    assert not any(t.external_data for t in onnx.load(path).graph.initializer)
    assert allclose(model, str(path), [(4, 8)])[0]


def test_allclose_reports_a_mismatch(tmp_path):
    path = to_onnx(jnp.sin, [("B", 10)], return_mode="file", output_path=str(tmp_path / "m.onnx"))
    assert allclose(jnp.sin, path, [(5, 10)]) == (True, "Outputs match within tolerance.")
    ok, msg = allclose(jnp.cos, path, [(5, 10)])
    assert not ok and msg.startswith("Output 0 mismatch: max abs diff")


class Net(nnx.Module):
    def __init__(self, rngs):
        self.linear = nnx.Linear(30, 20, rngs=rngs)
        self.bn = nnx.BatchNorm(20, rngs=rngs)
        self.dropout = nnx.Dropout(0.3, rngs=rngs)

    def __call__(self, x, deterministic=False):
        return self.dropout(nnx.relu(self.bn(self.linear(x))), deterministic=deterministic)


def test_nnx_mlp_with_batchnorm_dropout_and_input_params():
    model = Net(nnx.Rngs(0))
    model.eval()
    onnx_model = to_onnx(model, [("B", 30)], input_params={"deterministic": True})
    assert [i.name for i in onnx_model.graph.input] == ["in_0", "deterministic"]
    x = np.random.default_rng(0).standard_normal((6, 30)).astype(np.float32)
    got = _session(onnx_model).run(None, {"in_0": x, "deterministic": np.array(True)})[0]
    np.testing.assert_allclose(got, model(x, deterministic=True), rtol=1e-5, atol=1e-5)


class CNN(nnx.Module):
    def __init__(self, rngs):
        self.conv1 = nnx.Conv(3, 8, (3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(8, 4, (3, 3), rngs=rngs)

    def __call__(self, x):
        return self.conv2(nnx.relu(self.conv1(x)))


def test_nchw_bridges_with_names_cancel_against_the_convs(tmp_path):
    model = CNN(nnx.Rngs(0))
    onnx_model = to_onnx(model, [("B", 16, 16, 3)], inputs_as_nchw=[0], outputs_as_nchw=[0],
                         input_names=["image"], output_names=["features"])
    ops = [n.op_type for n in onnx_model.graph.node]
    assert "Transpose" not in ops and ops.count("Conv") == 2, ops
    (inp,), (out,) = onnx_model.graph.input, onnx_model.graph.output
    assert inp.name == "image" and out.name == "features"
    dims = [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim]
    assert dims == ["B", 3, 16, 16]
    x = np.random.default_rng(0).standard_normal((2, 16, 16, 3)).astype(np.float32)
    got = _session(onnx_model).run(["features"], {"image": x.transpose(0, 3, 1, 2)})[0]
    np.testing.assert_allclose(got, np.asarray(model(x)).transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-5)
    path = str(tmp_path / "cnn.onnx")
    onnx.save(onnx_model, path)
    ok, msg = allclose(model, path, [x], inputs_as_nchw=[0], outputs_as_nchw=[0])
    assert ok, msg


def test_nchw_default_input_name_and_rank_check():
    onnx_model = to_onnx(lambda x: x * 2, [(1, 4, 4, 3)], inputs_as_nchw=[0])
    assert onnx_model.graph.input[0].name == "in_0_nchw"
    with pytest.raises(jaxonnx.ConversionError, match="inputs_as_nchw: input 0 has rank 2"):
        to_onnx(lambda x: x, [(4, 3)], inputs_as_nchw=[0])
    with pytest.raises(jaxonnx.ConversionError, match="outputs_as_nchw: output 0 has rank 1"):
        to_onnx(lambda x: x, [(4,)], outputs_as_nchw=[0])


class Policy(nnx.Module):
    """An RL actor-critic head: named observation in, named logits and value out."""

    def __init__(self, rngs):
        self.torso = nnx.Linear(8, 16, rngs=rngs)
        self.logits = nnx.Linear(16, 4, rngs=rngs)
        self.value = nnx.Linear(16, 1, rngs=rngs)

    def __call__(self, obs):
        h = nnx.tanh(self.torso(obs))
        return self.logits(h), self.value(h)[..., 0]


def test_rl_policy_with_input_and_output_names():
    policy = Policy(nnx.Rngs(0))
    onnx_model = to_onnx(policy, [("B", 8)], input_names=["obs"], output_names=["logits", "value"])
    sess = _session(onnx_model)
    assert [i.name for i in sess.get_inputs()] == ["obs"]
    assert [o.name for o in sess.get_outputs()] == ["logits", "value"]
    obs = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    value, logits = sess.run(["value", "logits"], {"obs": obs})
    want_logits, want_value = policy(obs)
    np.testing.assert_allclose(logits, want_logits, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value, want_value, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("names, kind, text", [
    (["a", "b"], "input_names", "input_names has 2 names for 1 inputs"),
    (["a", "a"], "output_names", "names must be distinct"),
    ("obs", "input_names", "must be a list of strings"),
    ([""], "input_names", "is not a non-empty string"),
    (["x"], "output_names", "output_names has 1 names for 2 outputs"),
])
def test_bad_names(names, kind, text):
    with pytest.raises(jaxonnx.ConversionError, match=text):
        to_onnx(lambda x: (x, x + 1), [(3,)], **{kind: names})


@pytest.mark.parametrize("opset", [13, 16, 18, 21, 23])
def test_opset_choice(opset):
    onnx_model = to_onnx(lambda x: jnp.max(x, axis=0) * 2, [(3, 4)], opset=opset)
    assert [o.version for o in onnx_model.opset_import if o.domain == ""] == [opset]
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(_session(onnx_model).run(None, {"in_0": x})[0], x.max(0) * 2)


@pytest.mark.parametrize("opset", [14, 16])
def test_old_opset_converts_when_every_op_kept_its_form(opset):
    onnx_model = to_onnx(lambda x: jnp.tanh(x) + x, [("B", 3)], opset=opset)
    assert [o.version for o in onnx_model.opset_import if o.domain == ""] == [opset]
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(_session(onnx_model).run(None, {"in_0": x})[0], np.tanh(x) + x,
                               rtol=1e-6)


def test_old_opset_names_the_ops_that_need_a_newer_one():
    with pytest.raises(jaxonnx.ConversionError) as info:
        to_onnx(lambda x: jnp.max(x, axis=0) * 2, [(3, 4)], opset=9)
    msg = str(info.value)
    assert "opset 9" in msg and "ReduceMax (opset 13)" in msg and "Mul (opset 13)" in msg, msg


def test_double_precision():
    fn = lambda x: jnp.sin(x) * jnp.float64(1e-12) + x  # noqa: E731
    onnx_model = to_onnx(fn, [("B", 3)], enable_double_precision=True)
    assert onnx_model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    x = np.array([[1.0, 2.0, 3.0]]) + 1e-13
    got = _session(onnx_model).run(None, {"in_0": x})[0]
    with jax.enable_x64(True):
        np.testing.assert_allclose(got, fn(x), rtol=1e-15)


def test_64_bit_spec_without_the_flag_is_a_conversion_error():
    with pytest.raises(jaxonnx.ConversionError, match="enable_double_precision=True"):
        to_onnx(lambda x: x + 1, [jax.ShapeDtypeStruct((3,), jnp.float64)])
    with pytest.raises(jaxonnx.ConversionError, match=r"input_params\['n'\] is float64"):
        to_onnx(lambda x, n: x + n, [(3,)], input_params={"n": np.ones(3)})


def test_python_scalar_input_params_take_jax_default_dtypes():
    onnx_model = to_onnx(lambda x, n: x * n, [(3,)], input_params={"n": 2})
    assert onnx_model.graph.input[1].type.tensor_type.elem_type == onnx.TensorProto.INT32


@pytest.mark.parametrize("b, t", [(1, 1), (3, 7)])
def test_symbolic_batch_and_time(b, t):
    def fn(x):
        return jnp.cumsum(x, axis=1).mean(axis=-1)

    onnx_model = to_onnx(fn, [("B", "T", 8)])
    dims = [d.dim_param for d in onnx_model.graph.input[0].type.tensor_type.shape.dim[:2]]
    assert dims == ["B", "T"]
    x = np.random.default_rng(b).standard_normal((b, t, 8)).astype(np.float32)
    np.testing.assert_allclose(_session(onnx_model).run(None, {"in_0": x})[0], fn(x), rtol=1e-5,
                               atol=1e-5)


def test_shape_dtype_struct_with_string_dims():
    onnx_model = to_onnx(lambda x: x * 3, [jax.ShapeDtypeStruct(("B", 3), jnp.int32)])
    t = onnx_model.graph.input[0].type.tensor_type
    assert t.elem_type == onnx.TensorProto.INT32 and t.shape.dim[0].dim_param == "B"
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_array_equal(_session(onnx_model).run(None, {"in_0": x})[0], x * 3)


def test_return_mode_ir():
    ir = pytest.importorskip("onnx_ir")
    model = to_onnx(lambda x: x + 1, [("B", 3)], return_mode="ir")
    assert isinstance(model, ir.Model)
    assert [v.name for v in model.graph.inputs] == ["in_0"]


def test_record_primitive_calls_file(tmp_path):
    path = tmp_path / "calls.json"
    to_onnx(lambda x: jnp.sin(x) + 1, [("B", 3)], record_primitive_calls_file=str(path))
    records = json.loads(path.read_text())
    assert [r["primitive_name"] for r in records] == ["sin", "add"]
    assert records[0]["plugin"] == _plugin_of("sin") and records[0]["inputs_aval"] == [[["B", 3], "float32"]]
    assert "test_jax2onnx_api.py" in records[0]["source"]


@pytest.mark.parametrize("mode", ["auto", "prefer_native", "force_decomposed"])
def test_normalization_modes_are_accepted(mode):
    model = nnx.LayerNorm(6, rngs=nnx.Rngs(0))
    onnx_model = to_onnx(model, [("B", 6)], normalization_mode=mode)
    x = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)
    np.testing.assert_allclose(_session(onnx_model).run(None, {"in_0": x})[0], model(x), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("kw", [{"normalization_mode": "native"}, {"export_mode": "browser"},
                                {"return_mode": "onnx"}])
def test_bad_modes(kw):
    (key, value), = kw.items()
    with pytest.raises(jaxonnx.ConversionError, match=f"{key} must be one of .*{value!r}"):
        to_onnx(lambda x: x, [(3,)], **kw)


def _scaled(x):
    return jnp.tanh(x) * 2.0  # provenance points here


def test_provenance_metadata_is_off_by_default():
    onnx_model = to_onnx(_scaled, [(3,)])
    assert all(not n.metadata_props for n in onnx_model.graph.node)


@pytest.mark.parametrize("switch", ["JAXONNX_ENABLE_STACKTRACE_METADATA",
                                    "JAX2ONNX_ENABLE_STACKTRACE_METADATA"])
def test_provenance_metadata(monkeypatch, switch):
    monkeypatch.setenv(switch, "1")
    onnx_model = to_onnx(_scaled, [(3,)])
    line = _scaled.__code__.co_firstlineno + 1
    by_op = {n.op_type: {p.key: p.value for p in n.metadata_props} for n in onnx_model.graph.node}
    assert by_op["Tanh"]["pkg.jaxonnx.primitive"] == "tanh"
    assert by_op["Tanh"]["pkg.jaxonnx.plugin"] == _plugin_of("tanh")
    assert f"test_jax2onnx_api.py:{line}" in by_op["Tanh"]["pkg.jaxonnx.callsite"]
    assert by_op["Mul"]["pkg.jaxonnx.primitive"] == "mul"
    assert "pkg.jaxonnx.stacktrace" not in by_op["Tanh"]
    monkeypatch.setenv("JAXONNX_STACKTRACE_DETAIL", "full")
    full = to_onnx(_scaled, [(3,)])
    stack = {p.key: p.value for p in full.graph.node[0].metadata_props}["pkg.jaxonnx.stacktrace"]
    assert stack.splitlines()[-1].endswith(f"test_jax2onnx_api.py:{line} in _scaled")
    assert "jaxonnx/" not in stack


def test_provenance_reaches_the_nodes_of_loop_bodies(monkeypatch):
    monkeypatch.setenv("JAXONNX_ENABLE_STACKTRACE_METADATA", "1")

    def fn(xs):
        def body(c, x):
            c = jnp.tanh(c + x)
            return c, c * 2.0
        return jax.lax.scan(body, jnp.zeros(3), xs)[1]

    onnx_model = to_onnx(fn, [("T", 3)], optimize=False)
    loop = next(n for n in onnx_model.graph.node if n.op_type == "Loop")
    body = next(a.g for a in loop.attribute if a.name == "body")
    meta = [{p.key: p.value for p in n.metadata_props} for n in body.node]
    assert all("pkg.jaxonnx.primitive" in m for m in meta), meta
    assert {m["pkg.jaxonnx.primitive"] for m in meta} >= {"add", "tanh", "mul"}
    assert any(m.get("pkg.jaxonnx.primitive") == "scan" for m in meta)  # the scan's own plumbing


def test_unwritable_record_file_and_clashing_names_are_conversion_errors(tmp_path):
    with pytest.raises(jaxonnx.ConversionError, match="record_primitive_calls_file: cannot write"):
        to_onnx(lambda x: x + 1, [(3,)], record_primitive_calls_file=str(tmp_path / "no" / "x.json"))
    with pytest.raises(jaxonnx.ConversionError, match=r"output_names \['in_0'\] are input names"):
        to_onnx(lambda x: (x, x + 1), [(3,)], output_names=["in_0", "b"])
    with pytest.raises(jaxonnx.ConversionError, match=r"input_names \['n'\] are input_params keys"):
        to_onnx(lambda x, n: x * n, [(3,)], input_names=["n"], input_params={"n": 2.0})
