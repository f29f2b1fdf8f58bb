"""Progress lines (python/jaxonnx/_progress.py): on when asked, off when told, quiet off a terminal."""

from __future__ import annotations

import numpy as np

import jaxonnx

W = np.ones((64, 64), np.float32)


def _convert(tmp_path, **kw):
    return jaxonnx.to_onnx(lambda x: x @ W, [("B", 64)], **kw)


def test_forced_on(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JAXONNX_PROGRESS", "1")
    out = tmp_path / "m.onnx"
    _convert(tmp_path, return_mode="file", output_path=str(out), external_data=True)
    err = capsys.readouterr().err
    assert "traced: 1 equations" in err
    assert "external data" in err and f"done: {out}" in err
    _convert(tmp_path)
    err = capsys.readouterr().err
    assert "weights to copy in" in err and "done: ModelProto" in err


def test_off_and_quiet_off_a_terminal(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JAXONNX_PROGRESS", "0")
    _convert(tmp_path)
    assert capsys.readouterr().err == ""
    monkeypatch.delenv("JAXONNX_PROGRESS")  # pytest's captured stderr is not a terminal
    _convert(tmp_path)
    assert capsys.readouterr().err == ""
