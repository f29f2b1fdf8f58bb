"""A flax nnx decoder language model exported for onnxruntime-genai
(docs/llm.md): jaxonnx.genai.export writes a model folder, og.Generator
generates from it, and the tokens are compared with JAX's own greedy loop.

The model (Llama-style: RMSNorm, rotary embeddings, grouped-query attention,
a SwiGLU MLP) is written as a genai step: it takes the new tokens, the
attention mask over the cached and new tokens, the new tokens' positions and
the cache, and returns the logits and the cache grown by the new keys and
values (jnp.concatenate). Random weights; token ids only (no tokenizer).

    python examples/genai_llm.py [folder]
"""

from __future__ import annotations

import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

VOCAB, WIDTH, HEADS, KV_HEADS, HEAD, LAYERS, HIDDEN = 256, 64, 4, 2, 16, 2, 128


def rotary(x, positions, base=10000.0):
    """x [B, S, heads, head] rotated by positions [B, S] (rotate-half)."""
    half = x.shape[-1] // 2
    freqs = 1.0 / base ** (jnp.arange(half, dtype=jnp.float32) / half)
    angles = positions.astype(jnp.float32)[:, :, None, None] * freqs
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * jnp.cos(angles) - x2 * jnp.sin(angles),
                            x2 * jnp.cos(angles) + x1 * jnp.sin(angles)], axis=-1)


class Block(nnx.Module):
    def __init__(self, *, rngs):
        linear = lambda i, o: nnx.Linear(i, o, use_bias=False, rngs=rngs)  # noqa: E731
        self.attn_norm, self.mlp_norm = nnx.RMSNorm(WIDTH, rngs=rngs), nnx.RMSNorm(WIDTH, rngs=rngs)
        self.q, self.k = linear(WIDTH, HEADS * HEAD), linear(WIDTH, KV_HEADS * HEAD)
        self.v, self.o = linear(WIDTH, KV_HEADS * HEAD), linear(HEADS * HEAD, WIDTH)
        self.gate, self.up, self.down = linear(WIDTH, HIDDEN), linear(WIDTH, HIDDEN), linear(HIDDEN, WIDTH)

    def __call__(self, x, visible, positions, past_k, past_v):
        b, s, _ = x.shape
        h = self.attn_norm(x)
        q = rotary(self.q(h).reshape(b, s, HEADS, HEAD), positions)
        k = rotary(self.k(h).reshape(b, s, KV_HEADS, HEAD), positions)
        v = self.v(h).reshape(b, s, KV_HEADS, HEAD)
        # genai's cache layout: [B, kv_heads, length, head]
        keys = jnp.concatenate([past_k, k.transpose(0, 2, 1, 3)], axis=2)
        values = jnp.concatenate([past_v, v.transpose(0, 2, 1, 3)], axis=2)
        q = q.reshape(b, s, KV_HEADS, HEADS // KV_HEADS, HEAD)
        scores = jnp.einsum("bskgd,bktd->bkgst", q, keys) / np.float32(np.sqrt(HEAD))
        scores = jnp.where(visible[:, None, None], scores, jnp.finfo(jnp.float32).min)
        a = jnp.einsum("bkgst,bktd->bskgd", jax.nn.softmax(scores, axis=-1), values)
        x = x + self.o(a.reshape(b, s, HEADS * HEAD))
        h = self.mlp_norm(x)
        return x + self.down(jax.nn.silu(self.gate(h)) * self.up(h)), keys, values


class Decoder(nnx.Module):
    def __init__(self, *, rngs):
        self.embed = nnx.Embed(VOCAB, WIDTH, rngs=rngs)
        self.blocks = nnx.List([Block(rngs=rngs) for _ in range(LAYERS)])
        self.norm = nnx.RMSNorm(WIDTH, rngs=rngs)
        self.head = nnx.Linear(WIDTH, VOCAB, use_bias=False, rngs=rngs)

    def __call__(self, input_ids, attention_mask, position_ids, past):
        """The genai step: (logits [B, S, vocab], present [(key, value)] * layers)."""
        s, t = input_ids.shape[1], attention_mask.shape[1]
        # A new token at slot t - s + i sees the real (mask 1) slots up to its own.
        slot = jnp.arange(s)[:, None] + (t - s)
        visible = (jnp.arange(t)[None, :] <= slot)[None] & (attention_mask[:, None, :] == 1)
        x, present = self.embed(input_ids), []
        for block, (k, v) in zip(self.blocks, past):
            x, k, v = block(x, visible, position_ids, k, v)
            present.append((k, v))
        return self.head(self.norm(x)), present


CONFIG = dict(num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
              head_size=HEAD, hidden_size=WIDTH, vocab_size=VOCAB, context_length=128,
              bos_token_id=1, eos_token_id=2, pad_token_id=0)


def jax_greedy(model, prompt, new_tokens):
    """JAX's own greedy loop (batch 1, no padding), growing its cache."""
    step = jax.jit(lambda *a: model(*a))
    ids = np.array([prompt], np.int32)
    empty = np.zeros((1, KV_HEADS, 0, HEAD), np.float32)
    positions = np.arange(len(prompt), dtype=np.int32)[None]
    logits, past = step(ids, np.ones_like(ids), positions, [(empty, empty)] * LAYERS)
    out = []
    for i in range(new_tokens):
        token = int(np.argmax(logits[0, -1]))
        out.append(token)
        if token == CONFIG["eos_token_id"] or i + 1 == new_tokens:
            break
        t = len(prompt) + i
        logits, past = step(np.array([[token]], np.int32), np.ones((1, t + 1), np.int32),
                            np.array([[t]], np.int32), past)
    return out


def main(folder):
    import onnxruntime_genai as og

    import jaxonnx

    model = Decoder(rngs=nnx.Rngs(0))
    jaxonnx.genai.export(model, CONFIG, folder)
    prompt, new_tokens = [1, 17, 42, 99, 7], 16
    og_model = og.Model(folder)
    params = og.GeneratorParams(og_model)
    params.set_search_options(max_length=len(prompt) + new_tokens)
    gen = og.Generator(og_model, params)
    gen.append_tokens(np.array([prompt], np.int32))
    while not gen.is_done():
        gen.generate_next_token()
    tokens = gen.get_sequence(0)[len(prompt):].tolist()
    want = jax_greedy(model, prompt, new_tokens)
    print(f"{folder}: onnxruntime-genai {tokens}")
    print(f"{' ' * len(folder)}  JAX               {want}")
    return 0 if tokens == want else 1


if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.exit(main(sys.argv[1]))
    with tempfile.TemporaryDirectory() as tmp:
        sys.exit(main(tmp))
