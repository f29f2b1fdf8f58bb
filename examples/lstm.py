"""A flax nnx LSTM classifier: nnx.RNN(nnx.LSTMCell) over a sequence, the last
hidden state through a Linear head and a softmax. The scan becomes an ONNX Loop.

    python examples/lstm.py [output.onnx]
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
from flax import nnx

import _common
from _common import Input

NAME = "LSTM"


def sizes(small):
    # (sequence length, features, hidden, classes)
    return (6, 4, 8, 3) if small else (16, 8, 32, 5)


class LSTMClassifier(nnx.Module):
    def __init__(self, features, hidden, classes, *, rngs: nnx.Rngs):
        self.hidden = hidden
        self.rnn = nnx.RNN(nnx.LSTMCell(features, hidden, rngs=rngs), return_carry=True,
                           rngs=False)
        self.head = nnx.Linear(hidden, classes, rngs=rngs)

    def __call__(self, x):  # x: [batch, time, features]
        zeros = jnp.zeros((x.shape[0], self.hidden), x.dtype)
        (_, h), _ = self.rnn(x, initial_carry=(zeros, zeros))
        return jax.nn.softmax(self.head(h))


def make_model(small=False):
    _, features, hidden, classes = sizes(small)
    # Tracing the module itself meets its typed PRNG key state; split it once
    # and merge a copy inside the traced function instead.
    graphdef, state = nnx.split(LSTMClassifier(features, hidden, classes, rngs=nnx.Rngs(0)))

    def classify(x):
        return nnx.merge(graphdef, state, copy=True)(x)
    return classify


def inputs(small=False):
    time, features, _, _ = sizes(small)
    return [Input(("B", time, features))]


def convert(model=None, path=None, optimize=True, small=False):
    """Returns (onnx model, the JAX callable, its inputs)."""
    return _common.convert(sys.modules[__name__], model, path, optimize, small)


if __name__ == "__main__":
    sys.exit(_common.main(sys.modules[__name__]))
