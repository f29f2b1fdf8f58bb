"""Regression tests for issue 14 ("Reliability") that concern plugin folders and
what crosses from plugins: each failed before its fix (a hang, a crash, a
silent load of an untrusted file, an invalid model, a misleading message)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import onnx
import pytest

import jaxonnx
from jaxonnx import _core, _plugins
from test_plugin_host import test_plugins  # noqa: F401  (the fixture building tests/plugins)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="POSIX file modes and ELF")


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv(_plugins.ENV_VAR, raising=False)


def _skipped(dirs):
    """{file name: reason} of what a registry over `dirs` skipped."""
    return {Path(p).name: r for p, r in _core.Registry([str(d) for d in dirs]).diagnostics}


def _good_copy(test_plugins, folder, name="good.so", mode=0o755):
    folder.mkdir(exist_ok=True)
    target = folder / name
    shutil.copyfile(test_plugins / "good" / "good.so", target)
    os.chmod(target, mode)
    return target


# -- bug 4: a FIFO named like a plugin must not hang the scan

def test_fifo_in_a_plugin_folder_is_skipped_without_blocking(test_plugins, tmp_path):
    folder = tmp_path / "plugins"
    folder.mkdir()
    os.mkfifo(folder / "x.so")
    os.symlink(folder / "x.so", folder / "link.so")
    _good_copy(test_plugins, folder)
    # Before the fix this blocked forever opening the FIFO: run it in a child
    # with a generous bound so a regression fails instead of hanging the suite.
    code = ("import sys, json; from jaxonnx import _core; r = _core.Registry([sys.argv[1]]); "
            "print(json.dumps([[p, m] for p, m in r.diagnostics])); "
            "print(json.dumps([p['name'] for p in r.plugins]))")
    run = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    import json
    diagnostics, plugins = (json.loads(line) for line in run.stdout.splitlines())
    reasons = {Path(p).name: m for p, m in diagnostics}
    assert "not a regular file (a FIFO)" in reasons["x.so"]
    assert "not a regular file (a FIFO)" in reasons["link.so"]
    assert plugins == ["test_good"]


# -- bug 5: bad names, NULL plugin names and throwing inits are skipped

def test_non_utf8_file_name_is_skipped_with_a_warning(test_plugins, tmp_path):
    folder = tmp_path / "plugins"
    folder.mkdir()
    bad = os.fsencode(folder) + b"/caf\xe9.so"
    shutil.copyfile(test_plugins / "good" / "good.so", bad)
    with pytest.warns(_plugins.PluginWarning, match=r"caf\\xe9\.so: its name is not UTF-8"):
        reg = _plugins.registry([folder])
    assert [p["name"] for p in reg.plugins if p["name"] == "test_good"] == []
    # and conversions still work
    model = jaxonnx.to_onnx(lambda x: x + 1.0, [(2,)], plugin_dirs=[folder])
    onnx.checker.check_model(model, full_check=True)


def test_cli_lists_plugins_despite_a_non_utf8_file(test_plugins, tmp_path):
    folder = tmp_path / "plugins"
    folder.mkdir()
    shutil.copyfile(test_plugins / "good" / "good.so", os.fsencode(folder) + b"/\xff.so")
    run = subprocess.run([sys.executable, "-m", "jaxonnx", "plugins", "--plugin-dir", str(folder)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_null_plugin_name_and_throwing_init_are_skipped(test_plugins):
    reasons = _skipped([test_plugins / "null_name", test_plugins / "throwing_init"])
    assert "its name is a NULL pointer with size 7" in reasons["null_name.so"]
    assert "threw: throwing_init: init throws on purpose" in reasons["throwing_init.so"]
    model = jaxonnx.to_onnx(lambda x: x * 2.0, [(2,)], plugin_dirs=[
        test_plugins / "null_name", test_plugins / "throwing_init"])
    onnx.checker.check_model(model, full_check=True)


# -- bug 6: the host validates what a plugin hands over, naming the plugin

@pytest.mark.parametrize("prim, message", [
    ("hostile.unknown_op", "'NotAnOnnxOp' is not an operator of the default ONNX domain"),
    ("hostile.wrong_shape", "declared float32[7], but JAX's output is float32[2,3]"),
    ("hostile.tensor_bytes", "tensor attribute 'value': 3 bytes do not fit a float32 tensor of 2"),
    ("hostile.negative_dim", "constant has a negative dim -1"),
    ("hostile.overflow_dim", "constant's dims overflow"),
    ("hostile.null_node", "emit_node: no node (NULL)"),
])
def test_plugin_mistakes_are_refused_naming_the_plugin(test_plugins, prim, message):
    folder = [test_plugins / "hostile"]
    p = jaxonnx.primitive(prim, plugin_dirs=folder)
    with pytest.raises(jaxonnx.ConversionError) as info:
        jaxonnx.to_onnx(lambda x: p.bind(x), [(2, 3)], plugin_dirs=folder)
    msg = str(info.value)
    assert "plugin 'test_hostile' failed to lower '" + prim + "'" in msg
    assert message in msg


# -- bug 13: plugin search trust

def test_world_writable_plugin_file_is_refused(test_plugins, tmp_path):
    f = _good_copy(test_plugins, tmp_path / "p", mode=0o777)
    reasons = _skipped([tmp_path / "p"])
    assert "world-writable (mode 0777)" in reasons[f.name]


def test_world_writable_folder_is_refused(test_plugins, tmp_path):
    folder = tmp_path / "p"
    _good_copy(test_plugins, folder)
    os.chmod(folder, 0o777)
    reasons = _skipped([folder])
    assert "folder is world-writable" in reasons["p"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")
def test_plugin_owned_by_another_user_is_refused(test_plugins, tmp_path):
    f = _good_copy(test_plugins, tmp_path / "p")
    os.chown(f, 12345, 12345)
    reasons = _skipped([tmp_path / "p"])
    assert "owned by user id 12345" in reasons[f.name]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder")
def test_unreadable_folder_is_reported(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    os.chmod(folder, 0o300)
    try:
        reasons = _skipped([folder])
    finally:
        os.chmod(folder, 0o700)
    assert "cannot be read" in reasons["p"]


def test_relative_folder_is_resolved_once(test_plugins, tmp_path, monkeypatch):
    _good_copy(test_plugins, tmp_path / "rel")
    monkeypatch.chdir(tmp_path)
    reg = _core.Registry(["rel"])
    assert reg.dirs == [str(tmp_path / "rel")]
    assert any(p["name"] == "test_good" for p in reg.plugins)


# -- bug 14: messages

def test_dlopen_error_has_no_unrelated_errno_text(test_plugins):
    reasons = _skipped([test_plugins / "garbage"])
    assert "Bad file descriptor" not in reasons["garbage.so"]
    assert "invalid ELF header" in reasons["garbage.so"] or "too short" in reasons["garbage.so"]


def test_wrong_architecture_plugin_is_named_as_such(test_plugins, tmp_path):
    folder = tmp_path / "p"
    f = _good_copy(test_plugins, folder)
    data = bytearray(f.read_bytes())
    data[18:20] = (183 if data[18] != 183 else 62).to_bytes(2, "little")  # e_machine
    f.write_bytes(bytes(data))
    reason = _skipped([folder])[f.name]
    assert "No such file or directory" not in reason
    assert "it is built for" in reason and "rebuild the plugin for this platform" in reason


def test_conv_with_symbolic_padding_converts():
    # SAME padding of a symbolic spatial dim with stride 2 depends on H: one Pad
    # computed at run time (test_lax_conv.py checks the numbers).
    def fn(x, w):
        return jax.lax.conv_general_dilated(x, w, (2, 1), "SAME")
    specs = [jax.ShapeDtypeStruct(jax.export.symbolic_shape("1, 2, H, 5"), np.float32),
             jax.ShapeDtypeStruct((3, 2, 3, 3), np.float32)]
    model = jaxonnx.to_onnx(fn, specs)
    assert "Pad" in [n.op_type for n in model.graph.node]