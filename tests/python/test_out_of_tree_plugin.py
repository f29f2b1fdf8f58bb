"""The out-of-tree example: built against the installed SDK only, then used."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from jax import export

import jaxonnx
from helpers import example_plugin_build_dir

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "out_of_tree_plugin"))
import demo  # noqa: E402


@pytest.fixture(scope="module")
def plugin_dir():
    return demo.build(example_plugin_build_dir(ROOT))


def test_cmakedir_holds_the_package_config():
    out = subprocess.run([sys.executable, "-m", "jaxonnx", "--cmakedir"], check=True,
                         capture_output=True, text=True).stdout.strip()
    assert (Path(out) / "jaxonnxConfig.cmake").is_file()
    assert (Path(out) / "jaxonnxPluginFunctions.cmake").is_file()


def test_plugin_exports_exactly_the_entry_symbol(plugin_dir):
    so = next(plugin_dir.glob("example_hard_swish*.so"))
    out = subprocess.run(["nm", "-D", "--defined-only", str(so)], check=True, capture_output=True,
                         text=True).stdout.split()
    assert [s for s in out if s.startswith("jaxonnx")] == ["jaxonnx_plugin_init_v1"]
    assert len([line for line in out if line in ("T", "D", "B", "W", "V", "u")]) == 1


def test_primitive_abstract_eval_runs_the_plugin_callback(plugin_dir):
    hs = jaxonnx.primitive("example.hard_swish", plugin_dirs=[plugin_dir])
    b, = export.symbolic_shape("B")
    closed = jax.make_jaxpr(lambda x: hs.bind(x))(jax.ShapeDtypeStruct((b, 8), np.float32))
    out = closed.jaxpr.outvars[0].aval
    assert str(out.shape[0]) == "B" and out.shape[1] == 8 and out.dtype == np.float32
    with pytest.raises(jaxonnx.ConversionError, match="needs a floating operand"):
        jax.make_jaxpr(lambda x: hs.bind(x))(jax.ShapeDtypeStruct((3,), np.int32))


def test_conversion_with_the_out_of_tree_plugin(plugin_dir):
    model, reference = demo.convert(plugin_dir)
    onnx.checker.check_model(model, full_check=True)
    assert "HardSwish" in [n.op_type for n in model.graph.node]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (1, 7):
        x = np.linspace(-5, 5, batch * 8, dtype=np.float32).reshape(batch, 8)
        np.testing.assert_allclose(sess.run(None, {"in_0": x})[0], reference(x), rtol=1e-6,
                                   atol=1e-6)
