"""python -m jaxonnx convert / inspect (python/jaxonnx/_cli_convert.py, _cli_inspect.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from jaxonnx.__main__ import main

ROOT = Path(__file__).resolve().parents[2]

FACTORIES = """
import jax, jax.numpy as jnp, numpy as np

W = np.linspace(-1, 1, 3 * 128, dtype=np.float32).reshape(3, 128)

def scaled():
    return lambda x: jnp.tanh(x @ W) * 2.0

def two_inputs():
    return lambda x, i: x * i.astype(x.dtype)[:, None]

class Holder:
    @staticmethod
    def make():
        return lambda x: x + 1

NOT_CALLABLE = 3
"""


@pytest.fixture
def models(tmp_path, monkeypatch, request):
    """A module of factories importable from the current folder, under a name unique to the test."""
    name = "cli_models_" + re.sub(r"\W", "_", request.node.name)
    (tmp_path / f"{name}.py").write_text(FACTORIES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_convert_symbolic_batch(models, tmp_path, capsys):
    out = tmp_path / "m.onnx"
    code, stdout, _ = _run(["convert", f"{models}:scaled", "--input", "B,3", "-o", str(out)], capsys)
    assert code == 0 and stdout.strip() == str(out)
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "B" and dims[1].dim_value == 3
    assert model.opset_import[0].version == 23
    w = np.linspace(-1, 1, 3 * 128, dtype=np.float32).reshape(3, 128)
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    for b in (1, 6):
        x = np.random.default_rng(b).standard_normal((b, 3)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"in_0": x})[0], np.tanh(x @ w) * 2.0,
                                   rtol=1e-5, atol=1e-5)


def test_convert_dtypes_opset_and_attribute_path(models, tmp_path, capsys):
    out = tmp_path / "m.onnx"
    code, _, err = _run(["convert", f"{models}:two_inputs", "--input", "N,4", "--input", "N",
                         "--dtype", "float64", "--dtype", "int32", "--opset", "18",
                         "-o", str(out)], capsys)
    assert code == 0, err
    model = onnx.load(str(out))
    assert model.opset_import[0].version == 18
    types = [i.type.tensor_type.elem_type for i in model.graph.input]
    assert types == [onnx.TensorProto.DOUBLE, onnx.TensorProto.INT32]
    x = np.ones((2, 4)), np.array([3, -1], np.int32)
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(
        None, {"in_0": x[0], "in_1": x[1]})[0]
    np.testing.assert_array_equal(got, x[0] * x[1][:, None])
    code, _, err = _run(["convert", f"{models}:Holder.make", "--input", "2", "-o", str(out)], capsys)
    assert code == 0, err


@pytest.mark.parametrize("argv, message, code", [
    (["nocolon", "--input", "3"], "expected MODULE:FACTORY", 2),
    (["no_such_module_xyz:f", "--input", "3"], "cannot load no_such_module_xyz:f", 2),
    (["{m}:missing", "--input", "3"], "cannot load", 2),
    (["{m}:NOT_CALLABLE", "--input", "3"], "is not callable", 2),
    (["{m}:scaled", "--input", "3,,2"], "empty dimension", 2),
    (["{m}:two_inputs", "--input", "3,4", "--input", "3", "--dtype", "float32", "--dtype",
      "int32", "--dtype", "int8"], "3 --dtype for 2 --input", 2),
    (["{m}:scaled", "--input", "B,3", "--opset", "5"], "opset must be an int from 7", 1),
    (["{m}:scaled", "--input", "B,4"], "TypeError: dot_general", 1),  # the model's own error
])
def test_convert_errors(models, tmp_path, capsys, argv, message, code):
    out = tmp_path / "m.onnx"
    argv = [a.replace("{m}", models) for a in argv]
    got, stdout, err = _run(["convert", *argv, "-o", str(out)], capsys)
    assert got == code and message in err and "Traceback" not in err
    assert not out.exists()


def test_convert_a_flax_example(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT / "examples")
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    out = tmp_path / "mlp.onnx"
    import mlp

    shape = ",".join(str(d) for d in mlp.inputs(small=True)[0].shape)
    code, _, err = _run(["convert", "mlp:make_model", "--input", shape, "-o", str(out)], capsys)
    assert code == 0, err
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)
    x = np.random.default_rng(0).standard_normal((2, *mlp.inputs()[0].shape[1:])).astype(np.float32)
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"in_0": x})[0]
    np.testing.assert_allclose(got, np.asarray(mlp.make_model()(x)), rtol=1e-4, atol=1e-5)


def test_inspect(models, tmp_path, capsys):
    out = tmp_path / "m.onnx"
    assert _run(["convert", f"{models}:scaled", "--input", "B,3", "-o", str(out)], capsys)[0] == 0
    code, text, _ = _run(["inspect", str(out)], capsys)
    assert code == 0
    model = onnx.load(str(out))
    assert "in_0: float32[B, 3]" in text
    assert "opsets: ai.onnx 23" in text
    for op in {n.op_type for n in model.graph.node}:
        assert op in text
    assert f"nodes: {len(model.graph.node)}" in text
    code, text, _ = _run(["inspect", str(out), "--json"], capsys)
    info = json.loads(text)
    assert info["inputs"] == [{"name": "in_0", "dtype": "float32", "shape": ["B", 3]}]
    assert info["size"] == out.stat().st_size
    assert sum(info["ops"].values()) == info["nodes"] == len(model.graph.node)
    assert info["initializers"]["bytes_external"] == 0 and info["external_data"] == []


def test_inspect_external_data_and_functions(models, tmp_path, capsys):
    out = tmp_path / "m.onnx"
    code, _, err = _run(["convert", f"{models}:scaled", "--input", "B,3", "--external-data",
                         "-o", str(out)], capsys)
    assert code == 0, err
    assert (tmp_path / "m.onnx.data").exists()
    info = json.loads(_run(["inspect", str(out), "--json"], capsys)[1])
    assert info["external_data"] == [{"location": "m.onnx.data", "bytes": 3 * 128 * 4,
                                      "exists": True, "file_size": 3 * 128 * 4}]
    (tmp_path / "m.onnx.data").unlink()
    text = _run(["inspect", str(out)], capsys)[1]
    assert "m.onnx.data: 1.5 KB referenced (MISSING)" in text

    # A model with a local function, made with onnx's helpers.
    from onnx import TensorProto, helper

    fn = helper.make_function("my.domain", "Double", ["x"], ["y"],
                              [helper.make_node("Add", ["x", "x"], ["y"])],
                              [helper.make_opsetid("", 18)])
    graph = helper.make_graph([helper.make_node("Double", ["a"], ["b"], domain="my.domain")], "g",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N"])],
                              [helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N"])])
    m = helper.make_model(graph, functions=[fn], opset_imports=[
        helper.make_opsetid("", 18), helper.make_opsetid("my.domain", 1)])
    onnx.save(m, str(tmp_path / "f.onnx"))
    code, text, _ = _run(["inspect", str(tmp_path / "f.onnx")], capsys)
    assert code == 0
    assert "my.domain::Double (1 nodes)" in text and "my.domain::Double" in text
    assert "Add" in text and "my.domain 1" in text


def test_inspect_bad_file(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\xff\x00not a model")
    code, _, err = _run(["inspect", str(bad)], capsys)
    assert code == 1 and "cannot read" in err
    code, _, err = _run(["inspect", str(tmp_path / "missing.onnx")], capsys)
    assert code == 1 and "cannot read" in err


def test_help_documents_both():
    top = subprocess.run([sys.executable, "-m", "jaxonnx", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "convert" in top and "inspect" in top and "plugins" in top
    conv = subprocess.run([sys.executable, "-m", "jaxonnx", "convert", "--help"],
                          capture_output=True, text=True, check=True).stdout
    for flag in ("--input", "--dtype", "--opset", "-o", "--external-data", "MODULE:FACTORY"):
        assert flag in conv
    insp = subprocess.run([sys.executable, "-m", "jaxonnx", "inspect", "--help"],
                          capture_output=True, text=True, check=True).stdout
    assert "--json" in insp and "external data" in insp


def test_convert_target_and_fusion(models, tmp_path, capsys):
    """--target picks the profile (and its opset unless --opset says); --fusion none
    leaves JAX's decompositions; the choices are the core's profiles."""
    import jaxonnx
    from jaxonnx import _cli_convert
    out = tmp_path / "m.onnx"
    code, _, err = _run(["convert", f"{models}:scaled", "--input", "B,3", "--target", "portable",
                         "--opset", "18", "--fusion", "none", "-o", str(out)], capsys)
    assert code == 0, err
    model = onnx.load(str(out))
    assert model.opset_import[0].version == 18
    assert {n.op_type for n in model.graph.node} == {"MatMul", "Tanh", "Mul"}
    import argparse
    parser = argparse.ArgumentParser()
    _cli_convert.add_parser(parser.add_subparsers())
    choices = next(a for a in parser._subparsers._group_actions[0].choices["convert"]._actions
                   if a.dest == "target").choices
    assert tuple(choices) == tuple(jaxonnx._targets.profiles())
