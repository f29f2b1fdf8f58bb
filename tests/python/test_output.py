"""return_mode="file" (python/jaxonnx/_output.py): what is at output_path survives as
the user would expect, and no temporary file is ever left behind."""

from __future__ import annotations

import os
import stat
import threading

import onnx
import pytest

import jaxonnx
from jaxonnx import _output


def _fn(x):
    return x * 2.0 + 1.0


def _convert(path, **kw):
    return jaxonnx.to_onnx(_fn, [(3,)], return_mode="file", output_path=str(path), **kw)


def _expected():
    return jaxonnx.to_onnx(_fn, [(3,)], return_mode="bytes")


def _names(folder):
    return sorted(p.name for p in folder.iterdir())


def test_new_file_gets_the_default_mode(tmp_path):
    out = tmp_path / "m.onnx"
    _convert(out)
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask
    assert out.read_bytes() == _expected()
    assert _names(tmp_path) == ["m.onnx"]


def test_existing_file_keeps_its_mode(tmp_path):
    out = tmp_path / "m.onnx"
    out.write_bytes(b"old")
    out.chmod(0o640)
    _convert(out)
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert out.read_bytes() == _expected()
    assert _names(tmp_path) == ["m.onnx"]


def test_symlink_is_followed_and_kept(tmp_path):
    target = tmp_path / "real.onnx"
    target.write_bytes(b"old")
    target.chmod(0o600)
    link = tmp_path / "link.onnx"
    link.symlink_to(target.name)
    _convert(link)
    assert link.is_symlink() and os.readlink(link) == "real.onnx"
    assert target.read_bytes() == _expected()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert _names(tmp_path) == ["link.onnx", "real.onnx"]


def test_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.onnx"
    link.symlink_to("missing.onnx")
    _convert(link)
    assert link.is_symlink()
    assert (tmp_path / "missing.onnx").read_bytes() == _expected()


def test_dev_null_is_written_through():
    before = os.stat("/dev/null")
    _convert("/dev/null")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)


def test_fifo_is_written_through(tmp_path):
    fifo = tmp_path / "pipe.onnx"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    _convert(fifo)
    reader.join(timeout=60)
    assert not reader.is_alive()
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert received == [_expected()]
    assert _names(tmp_path) == ["pipe.onnx"]


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    out = tmp_path / "m.onnx"
    out.write_bytes(b"old")

    def fail(*a):
        raise OSError("disk full")
    monkeypatch.setattr(_output, "_write_all", fail)
    with pytest.raises(OSError, match="disk full"):
        _convert(out)
    assert out.read_bytes() == b"old"
    assert _names(tmp_path) == ["m.onnx"]


def test_interrupted_write_leaves_no_temporary(tmp_path, monkeypatch):
    def interrupt(*a):
        raise KeyboardInterrupt
    monkeypatch.setattr(_output, "_write_all", interrupt)
    with pytest.raises(KeyboardInterrupt):
        _convert(tmp_path / "m.onnx")
    assert _names(tmp_path) == []


def test_failed_rename_leaves_no_temporary(tmp_path, monkeypatch):
    def fail(src, dst):
        raise OSError("rename failed")
    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="rename failed"):
        _convert(tmp_path / "m.onnx")
    assert _names(tmp_path) == []


def test_output_is_a_folder(tmp_path):
    with pytest.raises(jaxonnx.ConversionError, match="is a folder"):
        _convert(tmp_path)
    assert _names(tmp_path) == []


def test_written_model_loads(tmp_path):
    out = tmp_path / "m.onnx"
    _convert(out)
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)
