"""One decode step of a flax nnx decoder-only language model, as an LLM serves
tokens one at a time: token embedding, pre-norm blocks (RMSNorm, rotary
position embeddings, grouped-query attention over a fixed-size KV cache, a
SwiGLU MLP), a final RMSNorm and the LM head.

The step is the exported function: (tokens [B, 1] int32, position int32 scalar,
k and v caches [B, kv_heads, L, head_dim] per layer) -> (logits [B, 1, vocab],
the updated caches). The new token's key and value are written into the caches
at `position` with jax.lax.dynamic_update_slice. Attention is written out as
decoders in JAX usually write grouped-query attention: the query heads grouped
by the key/value head they share, einsum, softmax, einsum (no key/value head is
repeated, no cache transposed), masking every cache slot after `position`:
those hold whatever an earlier sequence left there. The cache length L is
static; the batch B is symbolic.

    python examples/decode.py [output.onnx]
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import _common
from _common import Input

NAME = "LLM decode step"

# The cache length of inputs() when none is given (benchmarks/decode.py takes 256 and 1024).
CACHE = 512


def sizes(small):
    # (vocab, width, heads, kv_heads, head_dim, layers, mlp width)
    return (64, 32, 4, 2, 8, 2, 64) if small else (8192, 512, 8, 2, 64, 4, 1408)


def rotary(x, position, base=10000.0):
    """Rotates x [B, 1, heads, head_dim] by the angles of `position` (the
    rotate-half form: the first half of each head pairs with the second)."""
    half = x.shape[-1] // 2
    freqs = base ** (-jnp.arange(half, dtype=jnp.float32) / half)
    angles = position.astype(jnp.float32) * freqs
    cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


class Block(nnx.Module):
    def __init__(self, width, heads, kv_heads, head_dim, hidden, *, rngs: nnx.Rngs):
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        linear = lambda i, o: nnx.Linear(i, o, use_bias=False, rngs=rngs)  # noqa: E731
        self.attn_norm = nnx.RMSNorm(width, rngs=rngs)
        self.q = linear(width, heads * head_dim)
        self.k = linear(width, kv_heads * head_dim)
        self.v = linear(width, kv_heads * head_dim)
        self.o = linear(heads * head_dim, width)
        self.mlp_norm = nnx.RMSNorm(width, rngs=rngs)
        self.gate = linear(width, hidden)
        self.up = linear(width, hidden)
        self.down = linear(hidden, width)

    def __call__(self, x, position, k_cache, v_cache):
        b, t = x.shape[:2]
        kv, group, hd = self.kv_heads, self.heads // self.kv_heads, self.head_dim
        h = self.attn_norm(x)
        q = rotary(self.q(h).reshape(b, t, self.heads, hd), position)
        k = rotary(self.k(h).reshape(b, t, kv, hd), position)
        v = self.v(h).reshape(b, t, kv, hd)
        k_cache = jax.lax.dynamic_update_slice(k_cache, k.transpose(0, 2, 1, 3), (0, 0, position, 0))
        v_cache = jax.lax.dynamic_update_slice(v_cache, v.transpose(0, 2, 1, 3), (0, 0, position, 0))
        # Query head i uses key/value head i // group.
        q = q.reshape(b, t, kv, group, hd)
        scores = jnp.einsum("btkgd,bksd->bkgts", q, k_cache) / np.sqrt(hd).astype(q.dtype)
        # Slots 0..position hold this sequence; the rest is stale.
        visible = jnp.arange(k_cache.shape[2]) <= position
        scores = jnp.where(visible, scores, jnp.finfo(scores.dtype).min)
        a = jnp.einsum("bkgts,bksd->btkgd", jax.nn.softmax(scores, axis=-1), v_cache)
        x = x + self.o(a.reshape(b, t, self.heads * hd))
        h = self.mlp_norm(x)
        return x + self.down(jax.nn.silu(self.gate(h)) * self.up(h)), k_cache, v_cache


class Decoder(nnx.Module):
    def __init__(self, vocab, width, heads, kv_heads, head_dim, layers, hidden, *, rngs: nnx.Rngs):
        self.embed = nnx.Embed(vocab, width, rngs=rngs)
        self.blocks = nnx.List([Block(width, heads, kv_heads, head_dim, hidden, rngs=rngs)
                                for _ in range(layers)])
        self.norm = nnx.RMSNorm(width, rngs=rngs)
        self.head = nnx.Linear(width, vocab, use_bias=False, rngs=rngs)

    def __call__(self, tokens, position, *caches):
        """tokens int32 [B, 1], position int32 [], caches k0, v0, k1, v1, ...
        -> (logits [B, 1, vocab], k0, v0, k1, v1, ... updated)."""
        x = self.embed(tokens)
        new = []
        for i, block in enumerate(self.blocks):
            x, k, v = block(x, position, caches[2 * i], caches[2 * i + 1])
            new += [k, v]
        return (self.head(self.norm(x)), *new)


def make_model(small=False):
    return Decoder(*sizes(small), rngs=nnx.Rngs(0))


def inputs(small=False, cache=None):
    """tokens, position (drawn in [0, L)), then k and v caches per layer."""
    vocab, _, _, kv_heads, head_dim, layers, _ = sizes(small)
    length = cache or (16 if small else CACHE)
    kv = Input(("B", kv_heads, length, head_dim), np.float32)
    return [Input(("B", 1), np.int32, high=vocab), Input((), np.int32, high=length)] + [kv] * (2 * layers)


def convert(model=None, path=None, optimize=True, small=False):
    """Returns (onnx model, the JAX callable, its inputs)."""
    return _common.convert(sys.modules[__name__], model, path, optimize, small)


if __name__ == "__main__":
    sys.exit(_common.main(sys.modules[__name__]))
