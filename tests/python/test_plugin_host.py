"""The plugin host seen from Python: test plugins built standalone against the
installed SDK, folder order, skipped-file warnings, duplicates, the CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import onnx
import onnxruntime as ort
import pytest

import jaxonnx
from jaxonnx import _plugins

ROOT = Path(__file__).resolve().parents[2]
TEST_PLUGINS_SRC = ROOT / "tests" / "plugins"
# One folder per pytest-xdist worker: two workers configuring one CMake tree race.
TEST_PLUGINS_BUILD = ROOT / "build" / f"pytest-test-plugins-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"


def build_test_plugins() -> Path:
    """Builds tests/plugins against the installed SDK (incrementally) and returns
    the folder holding one sub-folder per case."""
    cmakedir = subprocess.run([sys.executable, "-m", "jaxonnx", "--cmakedir"], check=True,
                              capture_output=True, text=True).stdout.strip()
    configure = ["cmake", "-S", str(TEST_PLUGINS_SRC), "-B", str(TEST_PLUGINS_BUILD),
                 f"-Djaxonnx_DIR={cmakedir}", "-DCMAKE_BUILD_TYPE=Release"]
    if not (TEST_PLUGINS_BUILD / "CMakeCache.txt").exists() and shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    for cmd in (configure, ["cmake", "--build", str(TEST_PLUGINS_BUILD)]):
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            pytest.fail(f"building the test plugins failed: {' '.join(cmd)}\n{run.stdout}\n"
                        f"{run.stderr}")
    return TEST_PLUGINS_BUILD / "out"


@pytest.fixture(scope="session")
def test_plugins() -> Path:
    return build_test_plugins()


def _without_env(monkeypatch):
    monkeypatch.delenv(_plugins.ENV_VAR, raising=False)


def _run_model(model, x):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"in_0": x})[0]


def test_every_case_folder_is_built(test_plugins):
    expected = {
        "good": {"good.so"}, "wrong_major": {"wrong_major.so"},
        "newer_minor": {"newer_minor.so"}, "missing_entry": {"missing_entry.so"},
        "garbage": {"garbage.so", "truncated.so"}, "duplicate": {"dup_a.so", "dup_b.so"},
        "failing": {"failing.so"}, "throwing": {"throwing.so"}, "unbound": {"unbound.so"},
        "failing_init": {"failing_init.so"}, "crashing": {"crash_init.so", "abort_lower.so"},
        "hanging": {"hang_init.so"}, "declining": {"declining.so"},
    }
    for case, files in expected.items():
        assert {p.name for p in (test_plugins / case).iterdir()} == files, case


def test_good_plugin_converts_and_runs(test_plugins, monkeypatch):
    _without_env(monkeypatch)
    good = [test_plugins / "good"]
    ident = jaxonnx.primitive("test.identity", plugin_dirs=good)
    scale = jaxonnx.primitive("test.scale", plugin_dirs=good)
    fn = lambda x: scale.bind(ident.bind(x), factor=3.0)  # noqa: E731
    # The plugin's own lowering is the raw model; the optimizer drops the Identity.
    model = jaxonnx.to_onnx(fn, [("B", 4)], plugin_dirs=good, optimize=False)
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == ["Identity", "Mul"]
    optimized = jaxonnx.to_onnx(fn, [("B", 4)], plugin_dirs=good)
    assert [n.op_type for n in optimized.graph.node] == ["Mul"]
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "B"
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(_run_model(model, x), 3 * x)


def test_skipped_files_warn_and_good_plugins_still_work(test_plugins, monkeypatch):
    _without_env(monkeypatch)
    dirs = [test_plugins / c for c in ("garbage", "missing_entry", "wrong_major", "newer_minor",
                                       "failing_init", "good")]
    ident = jaxonnx.primitive("test.identity", plugin_dirs=[test_plugins / "good"])
    with pytest.warns(_plugins.PluginWarning) as record:
        model = jaxonnx.to_onnx(lambda x: ident.bind(x), [(2, 3)], plugin_dirs=dirs)
    messages = [str(w.message) for w in record if issubclass(w.category, _plugins.PluginWarning)]

    def warning_for(file_name):
        found = [m for m in messages if f"{os.sep}{file_name}: " in m]
        assert len(found) == 1, (file_name, messages)
        return found[0]

    garbage = warning_for("garbage.so")
    assert "dlerror" in garbage  # dlopen's own text reaches the user
    assert "invalid ELF header" in garbage or "file too short" in garbage
    assert "(truncated?)" in warning_for("truncated.so")
    assert "jaxonnx_plugin_init_v1" in warning_for("missing_entry.so")
    assert "ABI major 2" in warning_for("wrong_major.so")
    assert f"ABI 1.{jaxonnx._core.ABI_MINOR + 1}" in warning_for("newer_minor.so")
    assert re.search(r"needs jaxonnx ABI 1\.\d+; this host serves ABI 1\.0 to 1\.\d+",
                     warning_for("newer_minor.so"))
    assert "failing_init: cannot start on purpose" in warning_for("failing_init.so")
    assert all(m.startswith("jaxonnx skipped ") for m in messages)
    assert not any("good.so" in m for m in messages)
    assert [n.op_type for n in model.graph.node] == ["Identity"]
    x = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(_run_model(model, x), x)


def test_duplicate_primitive_names_both_plugins(test_plugins, monkeypatch):
    _without_env(monkeypatch)
    with pytest.raises(jaxonnx.ConversionError) as info:
        jaxonnx.to_onnx(lambda x: x * 2.0, [(3,)], plugin_dirs=[test_plugins / "duplicate"])
    msg = str(info.value)
    assert "'test.identity' is claimed by two plugins" in msg
    assert "'dup_a'" in msg and "'dup_b'" in msg
    assert "dup_a.so" in msg and "dup_b.so" in msg


def test_env_path_is_searched_after_bundled_and_before_plugin_dirs(test_plugins, monkeypatch):
    failing, throwing, good = (str(test_plugins / c) for c in ("failing", "throwing", "good"))
    monkeypatch.setenv("JAXONNX_PLUGIN_PATH", os.pathsep.join([failing, "", throwing]))
    folders = jaxonnx.plugin_folders([good])
    assert folders == [str(_plugins.BUNDLED_PLUGINS), failing, throwing, good]
    reg = _plugins.registry([good])
    assert list(reg.dirs) == folders
    names = [p["name"] for p in reg.plugins]
    assert names.index("test_failing") < names.index("test_throwing") < names.index("test_good")
    # A primitive only the env folder provides is found during conversion.
    fail = jaxonnx.primitive("test.fail")
    with pytest.raises(jaxonnx.ConversionError, match="test.fail: refusing on purpose"):
        jaxonnx.to_onnx(lambda x: fail.bind(x), [(3,)], plugin_dirs=[good])
    monkeypatch.delenv("JAXONNX_PLUGIN_PATH")
    assert jaxonnx.plugin_folders([good]) == [str(_plugins.BUNDLED_PLUGINS), good]


def test_cli_plugins_json_lists_a_plugin_dir(test_plugins):
    env = {k: v for k, v in os.environ.items() if k != _plugins.ENV_VAR}
    good, garbage = str(test_plugins / "good"), str(test_plugins / "garbage")
    out = subprocess.run(
        [sys.executable, "-m", "jaxonnx", "plugins", "--json", "--plugin-dir", good,
         "--plugin-dir", garbage],
        check=True, capture_output=True, text=True, env=env).stdout
    info = json.loads(out)
    assert info["folders"][-2:] == [good, garbage]
    ours = [p for p in info["plugins"] if p["name"] == "test_good"]
    assert len(ours) == 1
    p = ours[0]
    assert Path(p["file"]).name == "good.so" and Path(p["file"]).parent == Path(good).resolve()
    assert p["version"] == "1.2.3"
    assert p["abi"] == f"{jaxonnx._core.ABI_MAJOR}.{jaxonnx._core.ABI_MINOR}"
    assert [q["name"] for q in p["primitives"]] == ["test.identity", "test.scale", "test.target"]
    assert p["primitives"][0]["onnx_ops"] == ["Identity"]
    assert p["primitives"][0]["abstract_eval"] is True
    skipped = {Path(s["file"]).name: s["reason"] for s in info["skipped"]}
    assert set(skipped) >= {"garbage.so", "truncated.so"}


def test_cli_plugins_text_output(test_plugins):
    env = {k: v for k, v in os.environ.items() if k != _plugins.ENV_VAR}
    out = subprocess.run(
        [sys.executable, "-m", "jaxonnx", "plugins", "--plugin-dir", str(test_plugins / "good")],
        check=True, capture_output=True, text=True, env=env).stdout
    assert "test_good 1.2.3" in out
    assert "test.identity, test.scale, test.target" in out


def test_primitive_on_unknown_name(test_plugins, monkeypatch):
    _without_env(monkeypatch)
    good = str(test_plugins / "good")
    with pytest.raises(jaxonnx.ConversionError) as info:
        jaxonnx.primitive("test.does_not_exist", plugin_dirs=[good])
    msg = str(info.value)
    assert "'test.does_not_exist'" in msg
    assert good in msg


def test_primitive_abstract_eval_keeps_the_symbolic_dim(test_plugins, monkeypatch):
    _without_env(monkeypatch)
    ident = jaxonnx.primitive("test.identity", plugin_dirs=[test_plugins / "good"])
    b, = jax.export.symbolic_shape("B")
    closed = jax.make_jaxpr(ident.bind)(jax.ShapeDtypeStruct((b, 5), np.float32))
    out = closed.jaxpr.outvars[0].aval
    assert str(out.shape[0]) == "B" and out.shape[1] == 5 and out.dtype == np.float32
    assert closed.jaxpr.eqns[0].primitive.name == "test.identity"
