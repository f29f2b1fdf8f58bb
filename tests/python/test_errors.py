"""Error reporting: every failure is a jaxonnx.ConversionError saying what and
where, never a crash, and a failed conversion leaves no file behind."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import numpy as np
import onnx
import pytest
from jax.extend import core as jex_core

import jaxonnx
from jaxonnx import _plugins
from test_plugin_host import test_plugins  # noqa: F401  (the fixture building tests/plugins)

THIS_FILE = Path(__file__).resolve()

# A primitive with an abstract eval that no plugin claims.
UNCLAIMED = jex_core.Primitive("test_unclaimed_primitive")
UNCLAIMED.def_abstract_eval(lambda x: x)


def _line_of(marker: str) -> int:
    lines = THIS_FILE.read_text().splitlines()
    hits = [i + 1 for i, line in enumerate(lines) if line.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]


def _uses_unclaimed(x):
    return UNCLAIMED.bind(x * 2.0)  # MARK:unclaimed


@pytest.fixture(autouse=True)
def _no_env_plugin_path(monkeypatch):
    monkeypatch.delenv(_plugins.ENV_VAR, raising=False)


def _error(fn, inputs, **kwargs) -> str:
    with pytest.raises(jaxonnx.ConversionError) as info:
        jaxonnx.to_onnx(fn, inputs, **kwargs)
    return str(info.value)


def test_conversion_error_is_a_value_error():
    assert issubclass(jaxonnx.ConversionError, ValueError)


def test_unsupported_primitive_names_primitive_avals_source_and_folders(test_plugins):
    good = str(test_plugins / "good")
    msg = _error(_uses_unclaimed, [("B", 3)], plugin_dirs=[good])
    assert "no plugin lowers the JAX primitive 'test_unclaimed_primitive'" in msg
    assert "float32[B,3]" in msg
    assert re.search(rf"{re.escape(str(THIS_FILE))}:{_line_of('MARK:unclaimed')}\b", msg), msg
    assert "(_uses_unclaimed)" in msg
    assert str(_plugins.BUNDLED_PLUGINS) in msg
    assert good in msg


@pytest.mark.parametrize("wrap", ["scan", "cond"])
def test_failure_inside_a_nested_body_is_reported_as_the_inner_failure(test_plugins, wrap):
    # The control-flow plugin lowers the body through the host (lower_jaxpr);
    # the inner failure comes back as JXO_NESTED_FAILURE and reaches the user
    # unchanged, not wrapped in "plugin 'control_flow' failed to lower ...".
    def body(x):
        if wrap == "scan":
            return jax.lax.scan(lambda c, _: (_uses_unclaimed(c), None), x, None, length=2)[0]
        return jax.lax.cond(x[0, 0] > 0, _uses_unclaimed, lambda y: y, x)

    msg = _error(body, [("B", 3)], plugin_dirs=[str(test_plugins / "good")])
    assert msg.startswith("no plugin lowers the JAX primitive 'test_unclaimed_primitive'"), msg
    assert "failed to lower" not in msg


def test_unsupported_primitive_int_input_names_dtype(test_plugins):
    msg = _error(lambda x: UNCLAIMED.bind(x), [jax.ShapeDtypeStruct((2, 5), np.int32)],
                 plugin_dirs=[str(test_plugins / "good")])
    assert "'test_unclaimed_primitive'" in msg and "int32[2,5]" in msg


def _bind_in_fn(name, folder):
    prim = jaxonnx.primitive(name, plugin_dirs=[folder])
    return lambda x: prim.bind(x)


def test_error_inside_a_plugin_is_prefixed_with_plugin_and_primitive(test_plugins):
    failing = str(test_plugins / "failing")
    msg = _error(_bind_in_fn("test.fail", failing), [("B", 3)], plugin_dirs=[failing])
    assert msg.startswith("plugin 'test_failing' failed to lower 'test.fail'"), msg
    assert msg.endswith(": test.fail: refusing on purpose"), msg
    assert "float32[B,3]" in msg
    assert THIS_FILE.name in msg


@pytest.mark.parametrize("name, text", [
    ("test.throw", "test.throw: std::runtime_error from the plugin"),
    ("test.throw_other", "unknown C++ exception"),
])
def test_throwing_plugin_becomes_conversion_error(test_plugins, name, text):
    throwing = str(test_plugins / "throwing")
    msg = _error(_bind_in_fn(name, throwing), [(4,)], plugin_dirs=[throwing])
    assert msg.startswith(f"plugin 'test_throwing' failed to lower '{name}'"), msg
    assert text in msg
    # The process survived; the next conversion works.
    model = jaxonnx.to_onnx(lambda x: x * 2.0, [(4,)])
    assert len(model.graph.node) >= 1


def test_unbound_output_is_reported(test_plugins):
    unbound = str(test_plugins / "unbound")
    msg = _error(_bind_in_fn("test.unbound", unbound), [(4,)], plugin_dirs=[unbound])
    assert "plugin 'test_unbound'" in msg and "'test.unbound'" in msg
    assert "left output 0 (float32[4]) unbound" in msg


@pytest.mark.parametrize("inputs, text", [
    ((2, 3), "input 0: expected"),  # a bare shape where a list of shapes belongs
    ("B", "inputs must be a list"),
    (7, "inputs must be a list"),
    ([(3,), (2.5, 3)], "input 1: dim 2.5 of (2.5, 3) must be an int or a symbol string"),
    ([(-1, 2)], "input 0: dim -1 of (-1, 2) is negative"),
    ([(3,), {"shape": (3,)}], "input 1: expected a shape tuple"),
    ([jax.ShapeDtypeStruct((3,), np.float64)], "input 0 is float64"),
    ([(3,), ("B +* 2", 3)], "input 1: cannot read the shape ('B +* 2', 3)"),
    ([("",)], "input 0: an empty string is not a symbolic dim"),
])
def test_bad_input_specs(inputs, text):
    msg = _error(lambda *args: args[0] * 2.0, inputs)
    assert text in msg, msg


def test_float64_hint_names_the_flag():
    msg = _error(lambda x: x, [jax.ShapeDtypeStruct((3,), np.float64)])
    assert "enable_double_precision=True" in msg


@pytest.mark.parametrize("opset", [6, 99, "23", 23.0, True])
def test_bad_opset(opset):
    msg = _error(lambda x: x * 2.0, [(3,)], opset=opset)
    assert msg.startswith("opset must be an int from 7 to"), msg
    assert repr(opset) in msg


@pytest.mark.parametrize("mode", ["json", "Proto", None, ""])
def test_bad_return_mode(mode):
    msg = _error(lambda x: x * 2.0, [(3,)], return_mode=mode)
    assert "return_mode must be one of ('proto', 'ir', 'bytes', 'file')" in msg
    assert repr(mode) in msg


def test_return_mode_file_needs_output_path():
    assert 'needs output_path' in _error(lambda x: x * 2.0, [(3,)], return_mode="file")


def test_failed_file_conversion_leaves_no_file(tmp_path, test_plugins):
    out = tmp_path / "model.onnx"
    _error(_uses_unclaimed, [(3,)], return_mode="file", output_path=str(out),
           plugin_dirs=[str(test_plugins / "good")])
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # no temporary file either
    failing = str(test_plugins / "failing")
    _error(_bind_in_fn("test.fail", failing), [(3,)], return_mode="file", output_path=str(out),
           plugin_dirs=[failing])
    assert list(tmp_path.iterdir()) == []


def test_failed_conversion_keeps_an_existing_file(tmp_path, test_plugins):
    out = tmp_path / "model.onnx"
    out.write_bytes(b"previous")
    failing = str(test_plugins / "failing")
    _error(_bind_in_fn("test.fail", failing), [(3,)], return_mode="file", output_path=str(out),
           plugin_dirs=[failing])
    assert out.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]


def test_file_mode_success_writes_a_loadable_model(tmp_path, test_plugins):
    good = str(test_plugins / "good")
    scale = jaxonnx.primitive("test.scale", plugin_dirs=[good])
    out = tmp_path / "sub.onnx"
    result = jaxonnx.to_onnx(lambda x: scale.bind(x, factor=0.5), [("B", 3)], return_mode="file",
                             output_path=str(out), plugin_dirs=[good])
    assert result == str(out)
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == ["Mul"]
    assert [p.name for p in tmp_path.iterdir()] == ["sub.onnx"]
    # Bytes mode gives the same model.
    data = jaxonnx.to_onnx(lambda x: scale.bind(x, factor=0.5), [("B", 3)], return_mode="bytes",
                           plugin_dirs=[good])
    assert data == out.read_bytes()


def test_plugin_dirs_must_be_a_list(test_plugins):
    msg = _error(lambda x: x * 2.0, [(3,)], plugin_dirs=str(test_plugins / "good"))
    assert "plugin_dirs must be a list of folders" in msg


def test_primitive_unknown_name_is_a_conversion_error():
    with pytest.raises(jaxonnx.ConversionError, match="'test.no_such_primitive'"):
        jaxonnx.primitive("test.no_such_primitive")


def test_primitive_has_no_eager_implementation(test_plugins):
    ident = jaxonnx.primitive("test.identity", plugin_dirs=[str(test_plugins / "good")])
    with pytest.raises(jaxonnx.ConversionError, match="has no JAX implementation"):
        ident.bind(np.ones(3, np.float32))


def test_duplicate_primitive_is_a_conversion_error(test_plugins):
    with pytest.raises(jaxonnx.ConversionError, match="claimed by two plugins.*'dup_a'.*'dup_b'"):
        jaxonnx.to_onnx(lambda x: x * 2.0, [(3,)],
                        plugin_dirs=[str(test_plugins / "duplicate")])
