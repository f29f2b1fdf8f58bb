"""The self-contained wheel (scripts/build_wheel) installs into a fresh venv and
converts a model there, with none of this checkout on the path."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.wheel

SMOKE = r"""
import sys, jax, jax.numpy as jnp, numpy as np, onnx, onnxruntime as ort
import warnings
import jaxonnx
assert "site-packages" in jaxonnx.__file__, jaxonnx.__file__
# Every bundled plugin matches the manifest the build wrote (auditwheel left them alone).
warnings.simplefilter("error", jaxonnx._plugins.PluginWarning)
w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
fn = lambda x: jax.nn.relu(x @ w) + 1.0
model = jaxonnx.to_onnx(fn, [("B", 3)])
onnx.checker.check_model(model, full_check=True)
x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
    None, {"in_0": x})[0]
np.testing.assert_allclose(got, fn(x), rtol=1e-6, atol=1e-6)
print("ok", len(jaxonnx._plugins.registry(None).plugins), "plugins")
"""


def _run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert p.returncode == 0, f"{cmd[:3]} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def test_wheel_installs_into_a_fresh_venv_and_converts(tmp_path):
    dist = tmp_path / "dist"
    env = dict(os.environ, DIST=str(dist), WHEEL_BUILD_DIR=str(ROOT / "build" / "pip"))
    shown = " ".join(_run([str(ROOT / "scripts" / "build_wheel")], env=env, cwd=ROOT).split())
    (wheel,) = dist.glob("jaxonnx-*.whl")
    assert "manylinux" in wheel.name
    assert "manylinux_" in shown and "is consistent with the following platform tag" in shown
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("jaxonnx.libs/libprotobuf") for n in names), names
    assert "jaxonnx/plugins/SHA256SUMS" in names
    assert "jaxonnx-0.1.0.dist-info/licenses/LICENSE" in names or any(
        n.endswith("LICENSE") for n in names)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    # The suite's pinned versions (scripts/requirements.txt) as constraints, from the pip cache.
    _run([py, "-m", "pip", "install", "-q", "-c", str(ROOT / "scripts" / "requirements.txt"),
          str(wheel), "onnxruntime"])
    out = _run([py, "-c", SMOKE], cwd=tmp_path, env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    assert out.startswith("ok") and int(out.split()[1]) > 5
