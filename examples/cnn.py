"""A flax nnx CNN with MNIST shapes: two 3x3 convolutions with relu and 2x2 max
pooling, then two Linear layers and a softmax over 10 classes.

    python examples/cnn.py [output.onnx]
"""

from __future__ import annotations

import sys

import jax
from flax import nnx

import _common
from _common import Input

NAME = "CNN"


def sizes(small):
    # (image side, channels of the two convolutions, hidden)
    return (12, (4, 8), 16) if small else (28, (32, 64), 128)


class CNN(nnx.Module):
    def __init__(self, side, channels, hidden, *, rngs: nnx.Rngs):
        c1, c2 = channels
        self.conv1 = nnx.Conv(1, c1, kernel_size=(3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(c1, c2, kernel_size=(3, 3), rngs=rngs)
        self.linear1 = nnx.Linear((side // 4) ** 2 * c2, hidden, rngs=rngs)
        self.linear2 = nnx.Linear(hidden, 10, rngs=rngs)

    def __call__(self, x):  # x: [batch, 28, 28, 1] (NHWC, as flax has it)
        # window_shape by keyword: jax2onnx 0.17.1 patches max_pool with a
        # signature that refuses it positionally.
        x = nnx.max_pool(jax.nn.relu(self.conv1(x)), window_shape=(2, 2), strides=(2, 2))
        x = nnx.max_pool(jax.nn.relu(self.conv2(x)), window_shape=(2, 2), strides=(2, 2))
        x = x.reshape(x.shape[0], -1)
        x = jax.nn.relu(self.linear1(x))
        return jax.nn.softmax(self.linear2(x))


def make_model(small=False):
    return CNN(*sizes(small), rngs=nnx.Rngs(0))


def inputs(small=False):
    side = sizes(small)[0]
    return [Input(("B", side, side, 1))]


def convert(model=None, path=None, optimize=True, small=False):
    """Returns (onnx model, the JAX callable, its inputs)."""
    return _common.convert(sys.modules[__name__], model, path, optimize, small)


if __name__ == "__main__":
    sys.exit(_common.main(sys.modules[__name__]))
