"""A flax nnx MLP (Linear, relu, softmax) converted with a symbolic batch.

    python examples/mlp.py [output.onnx]
"""

from __future__ import annotations

import sys

import jax
import numpy as np
from flax import nnx

import jaxonnx


class MLP(nnx.Module):
    def __init__(self, din: int, dmid: int, dout: int, *, rngs: nnx.Rngs):
        self.linear1 = nnx.Linear(din, dmid, rngs=rngs)
        self.linear2 = nnx.Linear(dmid, dmid, rngs=rngs)
        self.linear3 = nnx.Linear(dmid, dout, rngs=rngs)

    def __call__(self, x):
        x = jax.nn.relu(self.linear1(x))
        x = jax.nn.relu(self.linear2(x))
        return jax.nn.softmax(self.linear3(x))


def make_model():
    return MLP(30, 20, 10, rngs=nnx.Rngs(0))


def convert(model=None, path=None, optimize=True):
    """Returns (onnx model, the JAX callable, input shape with a symbolic batch)."""
    model = model or make_model()
    spec = ("B", 30)
    onnx_model = jaxonnx.to_onnx(model, [spec], model_name="mlp", optimize=optimize)
    if path:
        jaxonnx.to_onnx(model, [spec], model_name="mlp", return_mode="file", output_path=path)
    return onnx_model, model, spec


if __name__ == "__main__":
    import onnx
    import onnxruntime as ort

    onnx_model, model, _ = convert(path=sys.argv[1] if len(sys.argv) > 1 else None)
    onnx.checker.check_model(onnx_model, full_check=True)
    sess = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (1, 7):
        x = np.random.default_rng(batch).standard_normal((batch, 30)).astype(np.float32)
        err = np.abs(sess.run(None, {"in_0": x})[0] - np.asarray(model(x))).max()
        print(f"batch {batch}: max |onnx - jax| = {err:.2e}")
