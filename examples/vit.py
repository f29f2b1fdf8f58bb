"""A flax nnx Vision Transformer: a patch-embedding convolution, a class token
and position embeddings, a pre-norm transformer encoder, a Linear head.

    python examples/vit.py [output.onnx]
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
from flax import nnx

import _common
from _common import Input

NAME = "ViT"


def sizes(small):
    # (image side, patch, width, heads, layers, classes)
    return (8, 4, 16, 2, 1, 4) if small else (32, 4, 64, 4, 4, 10)


class EncoderBlock(nnx.Module):
    def __init__(self, width, heads, *, rngs: nnx.Rngs):
        self.norm1 = nnx.LayerNorm(width, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(heads, width, decode=False, rngs=rngs)
        self.norm2 = nnx.LayerNorm(width, rngs=rngs)
        self.up = nnx.Linear(width, 2 * width, rngs=rngs)
        self.down = nnx.Linear(2 * width, width, rngs=rngs)

    def __call__(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.down(jax.nn.gelu(self.up(self.norm2(x))))


class ViT(nnx.Module):
    def __init__(self, side, patch, width, heads, layers, classes, *, rngs: nnx.Rngs):
        tokens = (side // patch) ** 2
        self.patch = nnx.Conv(3, width, kernel_size=(patch, patch), strides=(patch, patch),
                              padding="VALID", rngs=rngs)
        self.cls = nnx.Param(jax.random.normal(rngs.params(), (1, 1, width)) * 0.02)
        self.pos = nnx.Param(jax.random.normal(rngs.params(), (1, tokens + 1, width)) * 0.02)
        self.blocks = nnx.List([EncoderBlock(width, heads, rngs=rngs) for _ in range(layers)])
        self.norm = nnx.LayerNorm(width, rngs=rngs)
        self.head = nnx.Linear(width, classes, rngs=rngs)

    def __call__(self, x):  # x: [batch, side, side, 3] (NHWC)
        x = self.patch(x)
        x = x.reshape(x.shape[0], -1, x.shape[-1])
        cls = jnp.broadcast_to(self.cls[...], (x.shape[0], 1, x.shape[-1]))
        x = jnp.concatenate([cls, x], axis=1) + self.pos[...]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))


def make_model(small=False):
    return ViT(*sizes(small), rngs=nnx.Rngs(0))


def inputs(small=False):
    side = sizes(small)[0]
    return [Input(("B", side, side, 3))]


def convert(model=None, path=None, optimize=True, small=False):
    """Returns (onnx model, the JAX callable, its inputs)."""
    return _common.convert(sys.modules[__name__], model, path, optimize, small)


if __name__ == "__main__":
    sys.exit(_common.main(sys.modules[__name__]))
