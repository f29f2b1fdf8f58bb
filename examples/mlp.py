"""A flax nnx MLP (Linear, relu, softmax) converted with a symbolic batch.

    python examples/mlp.py [output.onnx]
"""

from __future__ import annotations

import sys

import jax
from flax import nnx

import _common
from _common import Input

NAME = "MLP"


class MLP(nnx.Module):
    def __init__(self, din: int, dmid: int, dout: int, *, rngs: nnx.Rngs):
        self.linear1 = nnx.Linear(din, dmid, rngs=rngs)
        self.linear2 = nnx.Linear(dmid, dmid, rngs=rngs)
        self.linear3 = nnx.Linear(dmid, dout, rngs=rngs)

    def __call__(self, x):
        x = jax.nn.relu(self.linear1(x))
        x = jax.nn.relu(self.linear2(x))
        return jax.nn.softmax(self.linear3(x))


def make_model(small=False):
    return MLP(30, 20, 10, rngs=nnx.Rngs(0))


def inputs(small=False):
    return [Input(("B", 30))]


def convert(model=None, path=None, optimize=True, small=False):
    """Returns (onnx model, the JAX callable, its inputs)."""
    return _common.convert(sys.modules[__name__], model, path, optimize, small)


if __name__ == "__main__":
    sys.exit(_common.main(sys.modules[__name__]))
