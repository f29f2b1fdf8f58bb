"""Builds the out-of-tree plugin against the installed SDK and converts a
function that binds its primitive.

    python examples/out_of_tree_plugin/demo.py [build-folder]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jax
import numpy as np

import jaxonnx

HERE = Path(__file__).resolve().parent


def build(build_dir: Path) -> Path:
    """Configures and builds the plugin with CMake; returns the folder holding it."""
    cmakedir = subprocess.run([sys.executable, "-m", "jaxonnx", "--cmakedir"], check=True,
                              capture_output=True, text=True).stdout.strip()
    subprocess.run(["cmake", "-S", str(HERE), "-B", str(build_dir), "-G", "Ninja",
                    f"-Djaxonnx_DIR={cmakedir}", "-DCMAKE_BUILD_TYPE=Release"],
                   check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build_dir)], check=True, capture_output=True)
    return build_dir


def convert(plugin_dir: Path, optimize: bool = True):
    hard_swish = jaxonnx.primitive("example.hard_swish", plugin_dirs=[plugin_dir])

    def fn(x):
        return hard_swish.bind(x * 2.0) + 1.0

    def reference(x):
        return jax.nn.hard_swish(x * 2.0) + 1.0

    model = jaxonnx.to_onnx(fn, [("B", 8)], plugin_dirs=[plugin_dir], optimize=optimize)
    return model, reference


if __name__ == "__main__":
    import onnxruntime as ort

    folder = build(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "build")
    model, reference = convert(folder)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.linspace(-5, 5, 24, dtype=np.float32).reshape(3, 8)
    err = np.abs(sess.run(None, {"in_0": x})[0] - np.asarray(reference(x))).max()
    print("ops:", [n.op_type for n in model.graph.node], f"max |onnx - jax| = {err:.2e}")
