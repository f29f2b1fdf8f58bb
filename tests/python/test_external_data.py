"""External data (jaxonnx.ExternalData): large weights in files beside the model,
written from the arrays' memory; the model loads in onnxruntime and matches JAX."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest

import jaxonnx

RNG = np.random.default_rng(0)
W1 = RNG.standard_normal((16, 64)).astype(np.float32)   # 4 KiB
W2 = RNG.standard_normal((64, 8)).astype(np.float32)    # 2 KiB
B = RNG.standard_normal((8,)).astype(np.float32)         # 32 bytes: stays inside


def _mlp(x):
    return jnp.tanh(x @ jnp.asarray(W1)) @ jnp.asarray(W2) + jnp.asarray(B)


def _check_runs(path):
    onnx.checker.check_model(str(path), full_check=True)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch in (1, 5):
        x = RNG.standard_normal((batch, 16)).astype(np.float32)
        (got,) = sess.run(None, {"in_0": x})
        np.testing.assert_allclose(got, np.asarray(jax.jit(_mlp)(x)), rtol=1e-5, atol=1e-5)


def _external(model):
    return {t.name: {e.key: e.value for e in t.external_data}
            for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}


def test_file_mode_writes_one_data_file(tmp_path):
    out = tmp_path / "m.onnx"
    jaxonnx.to_onnx(_mlp, [("B", 16)], return_mode="file", output_path=str(out),
                    external_data=jaxonnx.ExternalData(threshold=1024))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "m.onnx.data"]
    model = onnx.load(str(out), load_external_data=False)
    ext = _external(model)
    assert len(ext) == 2 and {e["location"] for e in ext.values()} == {"m.onnx.data"}
    assert sorted(int(e["length"]) for e in ext.values()) == [W2.nbytes, W1.nbytes]
    assert all(int(e["offset"]) % 64 == 0 for e in ext.values())
    assert len(model.graph.initializer) == 3  # the bias stays in the model
    assert (tmp_path / "m.onnx.data").stat().st_size >= W1.nbytes + W2.nbytes
    _check_runs(out)


def test_per_tensor_layout_and_location(tmp_path):
    out = tmp_path / "m.onnx"
    jaxonnx.to_onnx(_mlp, [("B", 16)], return_mode="file", output_path=str(out),
                    external_data=jaxonnx.ExternalData(threshold=1024, layout="per_tensor",
                                                       location="w"))
    model = onnx.load(str(out), load_external_data=False)
    locations = sorted(e["location"] for e in _external(model).values())
    assert len(locations) == 2 and all(loc.startswith("w.") for loc in locations)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["m.onnx", *locations])
    _check_runs(out)


def test_output_is_deterministic(tmp_path):
    paths = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        paths.append(tmp_path / name / "m.onnx")
        jaxonnx.to_onnx(_mlp, [("B", 16)], return_mode="file", output_path=str(paths[-1]),
                        external_data=True)
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert (tmp_path / "a/m.onnx.data").read_bytes() == (tmp_path / "b/m.onnx.data").read_bytes()


def test_proto_mode_references_data_in_a_folder(tmp_path):
    model = jaxonnx.to_onnx(_mlp, [("B", 16)], model_name="mlp",
                            external_data=jaxonnx.ExternalData(folder=tmp_path))
    assert {e["location"] for e in _external(model).values()} == {"mlp.data"}
    assert [p.name for p in tmp_path.iterdir()] == ["mlp.data"]
    onnx.save(model, str(tmp_path / "mlp.onnx"))
    _check_runs(tmp_path / "mlp.onnx")


def test_bytes_mode_with_external_data(tmp_path):
    data = jaxonnx.to_onnx(_mlp, [("B", 16)], return_mode="bytes",
                           external_data=jaxonnx.ExternalData(folder=str(tmp_path), location="w.bin"))
    (tmp_path / "m.onnx").write_bytes(data)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "w.bin"]
    _check_runs(tmp_path / "m.onnx")


def test_small_models_stay_in_one_file_by_default(tmp_path):
    out = tmp_path / "m.onnx"
    jaxonnx.to_onnx(_mlp, [("B", 16)], return_mode="file", output_path=str(out))
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]
    assert out.read_bytes() == jaxonnx.to_onnx(_mlp, [("B", 16)], return_mode="bytes")


@pytest.mark.parametrize("bad, match", [
    (jaxonnx.ExternalData, "needs jaxonnx.ExternalData\\(folder=...\\)"),
    (lambda: "yes", "external_data must be None, True, False or a jaxonnx.ExternalData"),
])
def test_proto_mode_needs_a_folder(bad, match):
    with pytest.raises(jaxonnx.ConversionError, match=match):
        jaxonnx.to_onnx(_mlp, [("B", 16)], external_data=bad())


@pytest.mark.parametrize("kw, match", [
    ({"threshold": 0}, "threshold must be an int >= 1"),
    ({"layout": "folder"}, "layout must be one of"),
    ({"location": "sub/w.bin"}, "location must be a file name"),
])
def test_bad_options_are_refused(kw, match):
    with pytest.raises(jaxonnx.ConversionError, match=match):
        jaxonnx.ExternalData(**kw)


def test_failure_leaves_no_model_and_no_temporary(tmp_path):
    (tmp_path / "m.onnx.data").mkdir()  # the data file's name is taken by a folder
    with pytest.raises(jaxonnx.ConversionError, match="not a regular file"):
        jaxonnx.to_onnx(_mlp, [("B", 16)], return_mode="file", output_path=str(tmp_path / "m.onnx"),
                        external_data=True)
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx.data"]


def test_external_data_needs_a_regular_output_file():
    with pytest.raises(jaxonnx.ConversionError, match="not a regular file"):
        jaxonnx.to_onnx(_mlp, [("B", 16)], return_mode="file", output_path=os.devnull,
                        external_data=True)


def test_proto_mode_fills_weights_in_and_matches_bytes_mode(tmp_path):
    # "proto" takes the weights as views from the core and copies them once into
    # the ModelProto: nothing may stay external, and it must serialize to exactly
    # what "bytes" gives.
    model = jaxonnx.to_onnx(_mlp, [("B", 16)])
    assert _external(model) == {}
    assert all(not t.external_data for t in model.graph.initializer)
    assert model.SerializeToString() == jaxonnx.to_onnx(_mlp, [("B", 16)], return_mode="bytes")
    weights = {onnx.numpy_helper.to_array(t).tobytes() for t in model.graph.initializer}
    assert W1.tobytes() in weights and W2.tobytes() in weights
    onnx.save(model, str(tmp_path / "m.onnx"))
    _check_runs(tmp_path / "m.onnx")
