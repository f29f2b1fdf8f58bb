"""End to end: the nnx MLP, input kinds, return modes, determinism."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from flax import nnx

import jaxonnx
from helpers import check, op_types

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import mlp  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return mlp.make_model()


def _dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def test_mlp_keeps_batch_symbolic_and_matches_jax(model):
    onnx_model = jaxonnx.to_onnx(model, [("B", 30)])
    onnx.checker.check_model(onnx_model, full_check=True)
    assert _dims(onnx_model.graph.input[0]) == ["B", 30]
    assert _dims(onnx_model.graph.output[0]) == ["B", 10]
    sess = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (1, 7):
        x = np.random.default_rng(batch).standard_normal((batch, 30)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"in_0": x})[0], model(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
@pytest.mark.parametrize("batch", ["B", 4], ids=["symbolic", "static"])
def test_mlp_parity(x64, batch):
    with jax.enable_x64(x64):
        dtype = jnp.float64 if x64 else jnp.float32
        model = mlp.MLP(30, 20, 10, rngs=nnx.Rngs(0))
        if x64:
            params = nnx.state(model)
            nnx.update(model, jax.tree.map(lambda p: p.astype(dtype), params))
        onnx_model = check(model, [(batch, 30)], x64=x64)
    # Linear lowers to a single MatMul each (no Transpose, no Einsum), and with its
    # bias on a 2-D input the fuse pass makes it one Gemm.
    assert op_types(onnx_model).count("Gemm") == 3
    assert "Transpose" not in op_types(onnx_model)


def test_same_program_gives_identical_bytes(model):
    first = jaxonnx.to_onnx(model, [("B", 30)], return_mode="bytes")
    second = jaxonnx.to_onnx(model, [("B", 30)], return_mode="bytes")
    assert isinstance(first, bytes) and first == second


def test_identical_bytes_across_processes(tmp_path):
    script = (f"import sys; sys.path.insert(0, {str(ROOT / 'examples')!r}); import mlp, jaxonnx; "
              f"sys.stdout.buffer.write(jaxonnx.to_onnx(mlp.make_model(), [('B', 30)], "
              f"return_mode='bytes'))")
    runs = [subprocess.run([sys.executable, "-c", script], check=True, capture_output=True).stdout
            for _ in range(2)]
    assert runs[0] == runs[1] and len(runs[0]) > 1000


def test_input_kinds_shape_tuple_struct_and_array():
    def fn(x, y, z):
        return x * 2.0 + y, z - 1.0

    b, = jax.export.symbolic_shape("B")
    onnx_model = jaxonnx.to_onnx(
        fn, [("B", 3), jax.ShapeDtypeStruct((b, 3), jnp.float32), np.zeros((2, 2), np.float32)])
    onnx.checker.check_model(onnx_model, full_check=True)
    assert [_dims(i) for i in onnx_model.graph.input] == [["B", 3], ["B", 3], [2, 2]]
    assert [o.name for o in onnx_model.graph.output] == ["out_0", "out_1"]


def test_int_inputs_through_shape_dtype_struct():
    onnx_model = check(lambda a, b: a * b + 3, [("B", 4), ("B", 4)], [np.int32, np.int32])
    assert onnx_model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT32


def test_input_params_become_named_runtime_inputs():
    def fn(x, *, scale):
        return x * scale

    onnx_model = jaxonnx.to_onnx(fn, [("B", 3)], input_params={"scale": np.float32(2.0)})
    assert [i.name for i in onnx_model.graph.input] == ["in_0", "scale"]
    sess = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.ones((5, 3), np.float32)
    out = sess.run(None, {"in_0": x, "scale": np.array(3.0, np.float32)})[0]
    np.testing.assert_array_equal(out, x * 3.0)


def test_return_modes(tmp_path, model):
    proto = jaxonnx.to_onnx(model, [("B", 30)], model_name="mlp")
    assert isinstance(proto, onnx.ModelProto) and proto.graph.name == "mlp"
    assert proto.ir_version == 10 and proto.opset_import[0].version == 23
    path = tmp_path / "mlp.onnx"
    assert jaxonnx.to_onnx(model, [("B", 30)], return_mode="file", output_path=str(path)) == str(path)
    assert onnx.load(str(path)) == jaxonnx.to_onnx(model, [("B", 30)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp.onnx"]


@pytest.mark.parametrize("opset", [18, 21, 23])
def test_selectable_opset(opset, model):
    onnx_model = jaxonnx.to_onnx(model, [("B", 30)], opset=opset)
    assert onnx_model.opset_import[0].version == opset
    onnx.checker.check_model(onnx_model, full_check=True)
    ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_output_that_is_an_input_or_a_literal():
    onnx_model = check(lambda x: (x, x, jnp.float32(3.0) + 0 * x), [("B", 3)])
    assert len({o.name for o in onnx_model.graph.output}) == 3
