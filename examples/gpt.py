"""A flax nnx GPT in the nanoGPT style: token and position embeddings, pre-norm
blocks of causal self-attention and an MLP, a final LayerNorm and a Linear head
giving next-token logits.

    python examples/gpt.py [output.onnx]
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import _common
from _common import Input

NAME = "GPT"


def sizes(small):
    # (vocab, context, width, heads, blocks)
    return (32, 8, 16, 2, 1) if small else (256, 32, 64, 4, 4)


class Block(nnx.Module):
    def __init__(self, width, heads, *, rngs: nnx.Rngs):
        self.norm1 = nnx.LayerNorm(width, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(heads, width, decode=False, rngs=rngs)
        self.norm2 = nnx.LayerNorm(width, rngs=rngs)
        self.up = nnx.Linear(width, 4 * width, rngs=rngs)
        self.down = nnx.Linear(4 * width, width, rngs=rngs)

    def __call__(self, x, mask):
        x = x + self.attn(self.norm1(x), mask=mask)
        return x + self.down(jax.nn.gelu(self.up(self.norm2(x))))


class GPT(nnx.Module):
    def __init__(self, vocab, context, width, heads, blocks, *, rngs: nnx.Rngs):
        self.context = context
        self.wte = nnx.Embed(vocab, width, rngs=rngs)
        self.wpe = nnx.Embed(context, width, rngs=rngs)
        self.blocks = nnx.List([Block(width, heads, rngs=rngs) for _ in range(blocks)])
        self.norm = nnx.LayerNorm(width, rngs=rngs)
        self.head = nnx.Linear(width, vocab, use_bias=False, rngs=rngs)

    def __call__(self, tokens):  # tokens: int32 [batch, context]
        t = tokens.shape[1]
        # A token attends to itself and the tokens before it.
        causal = jnp.asarray(np.tril(np.ones((1, 1, t, t), np.bool_)))
        x = self.wte(tokens) + self.wpe.embedding[:t]
        for block in self.blocks:
            x = block(x, causal)
        return self.head(self.norm(x))


def make_model(small=False):
    return GPT(*sizes(small), rngs=nnx.Rngs(0))


def inputs(small=False):
    vocab, context = sizes(small)[:2]
    return [Input(("B", context), np.int32, high=vocab)]


def convert(model=None, path=None, optimize=True, small=False):
    """Returns (onnx model, the JAX callable, its inputs)."""
    return _common.convert(sys.modules[__name__], model, path, optimize, small)


if __name__ == "__main__":
    sys.exit(_common.main(sys.modules[__name__]))
