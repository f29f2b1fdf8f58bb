"""Small decoder language models in plain JAX, written as public JAX LLM code
writes them, for the onnxruntime-genai export tests (random weights, tiny
widths): Llama (grouped-query attention, rotary embeddings; einsum/softmax
attention, or jax.nn.dot_product_attention), Qwen3 (RMSNorm on
the query and key heads), Gemma (embeddings scaled by sqrt(width), (1 + w)
norms, GeGLU, attention and final logit soft-capping, a sliding-window layer)
and a mixture-of-experts feed-forward (top-k routing, every expert computed
densely, as JAX codebases do without a dispatch kernel).

Each model is `decoder_step(spec, params)`: a function of (input_ids,
attention_mask, position_ids, past) -> (logits, present) in the contract of
jaxonnx.genai.export, and `greedy(step, spec, prompts, new_tokens)` runs it as
onnxruntime-genai runs a model (its padding, masks and positions) with a cache
of its own, the reference the tests compare genai with.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


@dataclasses.dataclass(frozen=True)
class Spec:
    name: str
    vocab: int = 96
    width: int = 32
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 8
    hidden: int = 64
    rope_base: float = 10000.0
    qk_norm: bool = False          # Qwen3
    gemma: bool = False            # Gemma's embedding scale, (1 + w) norms, GeGLU
    attn_softcap: float | None = None
    final_softcap: float | None = None
    windows: tuple = ()            # per layer: None (global) or a sliding window
    experts: int = 0               # > 0: a mixture-of-experts feed-forward
    top_k: int = 2
    sdpa: bool = False             # attention through jax.nn.dot_product_attention
    dtype: str = "float32"         # the weights', activations', cache's and logits' dtype
    context: int = 128
    pad: int = 0
    bos: int = 1

    def window(self, layer):
        return self.windows[layer] if layer < len(self.windows) else None

    def config(self, eos):
        """jaxonnx.genai.export's config for this model."""
        return dict(num_hidden_layers=self.layers, num_attention_heads=self.heads,
                    num_key_value_heads=self.kv_heads, head_size=self.head_dim,
                    hidden_size=self.width, vocab_size=self.vocab, context_length=self.context,
                    bos_token_id=self.bos, eos_token_id=eos, pad_token_id=self.pad)


LLAMA = Spec("llama")
QWEN3 = Spec("qwen3", qk_norm=True, layers=3, kv_heads=1)
GEMMA = Spec("gemma", gemma=True, attn_softcap=50.0, final_softcap=30.0, windows=(4, None),
             heads=2, kv_heads=1, head_dim=16)
MOE = Spec("moe", experts=4, top_k=2, hidden=32)
LLAMA_SDPA = Spec("llama_sdpa", sdpa=True)
MODELS = {s.name: s for s in (LLAMA, QWEN3, GEMMA, MOE, LLAMA_SDPA)}
# The Llama in bfloat16 (weights, activations, cache and logits), as
# bfloat16 checkpoints run in JAX (tests/python/test_genai_dtypes.py).
LLAMA_BF16 = Spec("llama_bf16", dtype="bfloat16")


def init(spec, seed=0):
    """Random weights: normal, scaled so that the logits spread (greedy margins
    well above float rounding)."""
    keys = iter(jax.random.split(jax.random.key(seed), 16 + 16 * spec.layers))

    def w(*shape, scale=None):
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[-2] if len(shape) > 1 else 1)
        return jax.random.normal(next(keys), shape, jnp.float32) * scale

    q, kv = spec.heads * spec.head_dim, spec.kv_heads * spec.head_dim
    layers = []
    for _ in range(spec.layers):
        layer = dict(attn_norm=w(spec.width, scale=0.1), wq=w(spec.width, q), wk=w(spec.width, kv),
                     wv=w(spec.width, kv), wo=w(q, spec.width),
                     mlp_norm=w(spec.width, scale=0.1))
        if spec.qk_norm:
            layer.update(q_norm=1.0 + w(spec.head_dim, scale=0.1), k_norm=1.0 + w(spec.head_dim, scale=0.1))
        if spec.experts:
            e = spec.experts
            layer.update(router=w(spec.width, e), gate=w(e, spec.width, spec.hidden),
                         up=w(e, spec.width, spec.hidden), down=w(e, spec.hidden, spec.width))
        else:
            layer.update(gate=w(spec.width, spec.hidden), up=w(spec.width, spec.hidden),
                         down=w(spec.hidden, spec.width))
        if not spec.gemma:  # Llama-style norms multiply by w (initialized near 1)
            layer["attn_norm"] = layer["attn_norm"] + 1.0
            layer["mlp_norm"] = layer["mlp_norm"] + 1.0
        layers.append(layer)
    # Gemma multiplies the embedding by sqrt(width): a smaller one keeps the
    # layers' share of the residual.
    embed = w(spec.vocab, spec.width, scale=1.0 / np.sqrt(spec.width) if spec.gemma else 1.0)
    params = dict(embed=embed, layers=layers,
                  norm=w(spec.width, scale=0.1) + (0.0 if spec.gemma else 1.0))
    # Gemma ties the LM head to the embedding; with random weights a tied head
    # makes each token predict itself, so every model here has its own.
    params["head"] = w(spec.width, spec.vocab, scale=3.0 / np.sqrt(spec.width))
    if spec.dtype != "float32":
        params = jax.tree.map(lambda a: a.astype(spec.dtype), params)
    return params


def rms_norm(x, w, eps=1e-6):
    x = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * w


def rope(x, positions, base):
    """x [B, S, heads, head_dim] rotated by positions [B, S] (rotate-half)."""
    half = x.shape[-1] // 2
    freqs = 1.0 / base ** (jnp.arange(half, dtype=jnp.float32) * 2 / x.shape[-1])
    angles = positions.astype(jnp.float32)[:, :, None, None] * freqs
    cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def visible(attention_mask, position_ids, window):
    """[B, S, P + S]: which cache slots each new token attends to. Slot order
    is causal order (genai appends), padding slots have mask 0, and a sliding
    window counts positions, not slots (a padding gap is not a distance)."""
    s, t = position_ids.shape[1], attention_mask.shape[1]
    slot_q = jnp.arange(s)[:, None] + (t - s)
    ok = (jnp.arange(t)[None, :] <= slot_q)[None] & (attention_mask[:, None, :] == 1)
    if window is not None:
        key_pos = jnp.cumsum(attention_mask, axis=1) - 1
        ok = ok & (position_ids[:, :, None] - key_pos[:, None, :] < window)
    return ok


def dense(w, h):
    """h @ w, or w(h) for a weight that is a module (Llama's nnx.Linear, which
    qwix quantizes)."""
    return w(h) if callable(w) else h @ w


def attention(spec, layer, p, h, attention_mask, position_ids, past):
    b, s, _ = h.shape
    kv, hd, group = spec.kv_heads, spec.head_dim, spec.heads // spec.kv_heads
    q = dense(p["wq"], h).reshape(b, s, spec.heads, hd)
    k = dense(p["wk"], h).reshape(b, s, kv, hd)
    v = dense(p["wv"], h).reshape(b, s, kv, hd)
    if spec.qk_norm:
        q, k = rms_norm(q, p["q_norm"]), rms_norm(k, p["k_norm"])
    q, k = rope(q, position_ids, spec.rope_base), rope(k, position_ids, spec.rope_base)
    keys, values = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)        # [B, kv, S, hd]
    if past is not None:  # None: a prompt with no cache (prefill)
        keys = jnp.concatenate([past[0], keys], axis=2)                    # [B, kv, P + S, hd]
        values = jnp.concatenate([past[1], values], axis=2)
    ok = visible(attention_mask, position_ids, spec.window(layer))
    if spec.sdpa:
        out = jax.nn.dot_product_attention(q, keys.transpose(0, 2, 1, 3), values.transpose(0, 2, 1, 3),
                                           mask=ok[:, None])
        return dense(p["wo"], out.reshape(b, s, spec.heads * hd)), (keys, values)
    q = q.reshape(b, s, kv, group, hd)
    scores = jnp.einsum("bskgd,bktd->bkgst", q, keys) / np.sqrt(hd).astype(jnp.dtype(spec.dtype))
    if spec.attn_softcap:
        scores = spec.attn_softcap * jnp.tanh(scores / spec.attn_softcap)
    scores = jnp.where(ok[:, None, None], scores, jnp.finfo(scores.dtype).min)
    out = jnp.einsum("bkgst,bktd->bskgd", jax.nn.softmax(scores, axis=-1), values)
    return dense(p["wo"], out.reshape(b, s, spec.heads * hd)), (keys, values)


def feed_forward(spec, p, h):
    act = (lambda x: jax.nn.gelu(x, approximate=True)) if spec.gemma else jax.nn.silu
    if not spec.experts:
        return dense(p["down"], act(dense(p["gate"], h)) * dense(p["up"], h))
    # Top-k routing, softmax over the chosen experts' router logits; every
    # expert runs on every token and the unchosen ones are weighted 0.
    logits = h @ p["router"]                                            # [B, S, E]
    top, idx = jax.lax.top_k(logits, spec.top_k)
    weights = jnp.sum(jax.nn.one_hot(idx, spec.experts) * jax.nn.softmax(top, axis=-1)[..., None], axis=-2)
    g = jnp.einsum("bsw,ewh->bseh", h, p["gate"])
    u = jnp.einsum("bsw,ewh->bseh", h, p["up"])
    y = jnp.einsum("bseh,ehw->bsew", act(g) * u, p["down"])
    return jnp.einsum("bsew,bse->bsw", y, weights)


def decoder_step(spec, params):
    """The model as jaxonnx.genai.export's step."""
    norm = (lambda x, w: rms_norm(x, 1.0 + w)) if spec.gemma else rms_norm

    def step(input_ids, attention_mask, position_ids, past):
        x = params["embed"][input_ids]
        if spec.gemma:
            x = x * np.sqrt(spec.width).astype(jnp.dtype(spec.dtype))
        present = []
        for i, p in enumerate(params["layers"]):
            a, kv = attention(spec, i, p, norm(x, p["attn_norm"]), attention_mask, position_ids, past[i])
            x = x + a
            x = x + feed_forward(spec, p, norm(x, p["mlp_norm"]))
            present.append(kv)
        x = norm(x, params["norm"])
        logits = dense(params["head"], x)
        if spec.final_softcap:
            logits = spec.final_softcap * jnp.tanh(logits / spec.final_softcap)
        return logits, present

    return step


class _Weights(nnx.Module):
    """A dict of weights as an nnx module: matrices as bias-free nnx.Linear
    (what qwix quantizes), the rest as nnx.Param; `m[name]` gives what
    decoder_step reads (a Linear, which dense() calls, or an array)."""

    def __init__(self, weights, linear):
        for name, w in weights.items():
            if name == "layers":
                setattr(self, name, nnx.List([_Weights(layer, linear) for layer in w]))
            elif name in linear:
                m = nnx.Linear(*w.shape, use_bias=False, dtype=w.dtype, param_dtype=w.dtype,
                               rngs=nnx.Rngs(0))
                m.kernel = nnx.Param(w)
                setattr(self, name, m)
            else:
                setattr(self, name, nnx.Param(w))

    def __getitem__(self, name):
        value = getattr(self, name)
        return value[...] if isinstance(value, nnx.Param) else value


class Decoder(nnx.Module):
    """decoder_step(spec, params) as a flax nnx module (the module is the
    step), its projections and LM head nnx.Linear: the form qwix's
    quantize_model takes (it quantizes the weights of the dots inside nnx
    modules). Llama-style specs only (no mixture of experts)."""

    LINEAR = ("wq", "wk", "wv", "wo", "gate", "up", "down", "head")

    def __init__(self, spec, params):
        if spec.experts:
            raise ValueError("Decoder: the experts' einsums are not nnx.Linear")
        self.spec = spec
        self.weights = _Weights(params, self.LINEAR)

    def __call__(self, input_ids, attention_mask, position_ids, past):
        return decoder_step(self.spec, self.weights)(input_ids, attention_mask, position_ids, past)


def prefill(spec, params):
    """The model's prompt pass with no cache: (input_ids [B, T], attention_mask
    [B, T], position_ids [B, T]) -> logits [B, T, vocab], in genai's mask and
    position convention (benchmarks/prefill.py times it)."""
    step = decoder_step(spec, params)

    def run(input_ids, attention_mask, position_ids):
        return step(input_ids, attention_mask, position_ids, [None] * spec.layers)[0]

    return run


def pad_prompts(prompts, pad):
    """[B, S] ids, prompts of different lengths padded at their end with pad,
    as onnxruntime-genai takes a batch (its mask: 0 where the id is pad)."""
    width = max(len(p) for p in prompts)
    return np.array([list(p) + [pad] * (width - len(p)) for p in prompts], np.int32)


def greedy(step, spec, prompts, new_tokens):
    """(tokens [B, new_tokens], logits [new_tokens, B, vocab]): greedy decoding
    with onnxruntime-genai's conventions (tests/python/test_genai.py checks
    them): the prompt is padded at its end with pad ids, which get mask 0;
    positions are cumsum(mask) - 1; the first token comes from each row's last
    real token; each step feeds one token per row, appends 1 to the mask and
    takes the next position.

    The cache is this loop's own and of fixed size, so that jax.jit compiles
    the step twice (prompt, decode) rather than once per length: the past is
    always L slots, the step appends the new token's at slot L, and the oldest
    slot, still empty, is dropped. Empty slots are on the left with mask 0, so
    the step sees the same tokens, positions and visible keys as in genai."""
    step = jax.jit(step)
    b = len(prompts)
    ids = pad_prompts(prompts, spec.pad)
    mask = (ids != spec.pad).astype(np.int32)
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0).astype(np.int32)
    empty = np.zeros((b, spec.kv_heads, 0, spec.head_dim), jnp.dtype(spec.dtype))
    logits, present = step(ids, mask, positions, [(empty, empty)] * spec.layers)
    last = mask.sum(axis=1) - 1
    # float32 logits (exact from bfloat16), so that callers compare in float32
    step_logits = np.asarray(logits, np.float32)[np.arange(b), last]
    # The fixed-size cache: the prompt's slots right-aligned, empty ones before.
    slots = ids.shape[1] + new_tokens
    free = slots - ids.shape[1]
    widen = lambda a: jnp.pad(a, ((0, 0), (0, 0), (free, 0), (0, 0)))  # noqa: E731
    past = [(widen(k), widen(v)) for k, v in present]
    mask = np.concatenate([np.zeros((b, free), np.int32), mask], axis=1)
    position = last
    tokens, all_logits = [], []
    for _ in range(new_tokens):
        all_logits.append(step_logits)
        token = step_logits.argmax(axis=-1).astype(np.int32)
        tokens.append(token)
        if len(tokens) == new_tokens:
            break
        mask = np.concatenate([mask, np.ones((b, 1), np.int32)], axis=1)
        position = position + 1
        logits, present = step(token[:, None], mask, position[:, None].astype(np.int32), past)
        step_logits = np.asarray(logits, np.float32)[:, 0]
        past = [(k[:, :, 1:], v[:, :, 1:]) for k, v in present]
        mask = mask[:, 1:]
    return np.stack(tokens, axis=1), np.stack(all_logits)
