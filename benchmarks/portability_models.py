"""The realistic test models of benchmarks/portability.py: small programs written
the way public model code writes them, in flax nnx, flax linen and equinox.

Each entry of MODELS is name -> Model(title, make, inputs): make() gives a new
callable (an nnx module or a function closing over its weights), inputs() its
Input list with the symbolic batch "B". Sizes are small: the matrix runs every
model through eight targets twice, on a shared machine.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class Input:
    shape: tuple          # ints and "B" (the symbolic batch)
    dtype: type = np.float32
    high: int = 0         # integer inputs: values drawn from [0, high)
    kind: str = "normal"  # normal | int | mask (rows of 1s then 0s, at least one 1)


@dataclasses.dataclass(frozen=True)
class Model:
    title: str
    make: Callable[[], Callable]
    inputs: Callable[[], list]


def sample(inputs, batch, seed=0):
    """Concrete arrays for `inputs` with "B" = batch (another symbolic dim, such as
    "T", is 4 + batch: it varies with the batch, unlike a static dim)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in inputs:
        shape = tuple(batch if d == "B" else 4 + batch if isinstance(d, str) else d for d in i.shape)
        if i.kind == "mask":  # a padding mask: each row keeps a prefix of length >= 1
            lengths = rng.integers(1, shape[-1] + 1, size=shape[:-1])
            out.append((np.arange(shape[-1]) < lengths[..., None]).astype(i.dtype))
        elif np.issubdtype(i.dtype, np.integer):
            out.append(rng.integers(0, i.high, size=shape).astype(i.dtype))
        else:
            out.append(rng.standard_normal(shape).astype(i.dtype))
    return out


# ----------------------------------------------------------- BERT (flax nnx)

def bert(small=False):
    """A BERT-style encoder: word + position + segment embeddings, post-LN blocks
    (LayerNorm after each residual add), a padding mask from `attention_mask`,
    a tanh pooler and a classifier on [CLS]. `small`: one block, for the tests."""
    from flax import nnx

    vocab, seq, width, heads, layers = (32, 8, 16, 2, 1) if small else (64, 8, 32, 4, 2)

    class Layer(nnx.Module):
        def __init__(self, rngs):
            self.attn = nnx.MultiHeadAttention(heads, width, decode=False, rngs=rngs)
            self.ln1 = nnx.LayerNorm(width, epsilon=1e-12, rngs=rngs)
            self.up = nnx.Linear(width, 4 * width, rngs=rngs)
            self.down = nnx.Linear(4 * width, width, rngs=rngs)
            self.ln2 = nnx.LayerNorm(width, epsilon=1e-12, rngs=rngs)

        def __call__(self, x, mask):
            x = self.ln1(x + self.attn(x, mask=mask))
            return self.ln2(x + self.down(jax.nn.gelu(self.up(x), approximate=False)))

    class Bert(nnx.Module):
        def __init__(self, rngs):
            self.words = nnx.Embed(vocab, width, rngs=rngs)
            self.positions = nnx.Embed(seq, width, rngs=rngs)
            self.segments = nnx.Embed(2, width, rngs=rngs)
            self.ln = nnx.LayerNorm(width, epsilon=1e-12, rngs=rngs)
            self.layers = nnx.List([Layer(rngs) for _ in range(layers)])
            self.pooler = nnx.Linear(width, width, rngs=rngs)
            self.classifier = nnx.Linear(width, 3, rngs=rngs)

        def __call__(self, input_ids, attention_mask):
            t = input_ids.shape[1]
            x = self.words(input_ids) + self.positions(jnp.arange(t)[None, :]) \
                + self.segments(jnp.zeros_like(input_ids))
            x = self.ln(x)
            mask = attention_mask[:, None, None, :] > 0   # [B, 1, 1, T]: keys that are not padding
            for layer in self.layers:
                x = layer(x, mask)
            pooled = jnp.tanh(self.pooler(x[:, 0]))
            return self.classifier(pooled)

    return Model("BERT post-LN, padding mask (nnx)", lambda: Bert(nnx.Rngs(0)),
                 lambda: [Input(("B", seq), np.int32, high=vocab),
                          Input(("B", seq), np.int32, kind="mask")])


# --------------------------------------------------------- ResNet (flax linen)

def resnet():
    """A ResNet-style CNN: conv stem, BatchNorm (inference statistics), max_pool,
    two basic residual blocks (the second with a strided 1x1 projection),
    global average pooling, a Dense head."""
    import flax.linen as nn

    class Block(nn.Module):
        channels: int
        strides: int = 1

        @nn.compact
        def __call__(self, x):
            norm = lambda: nn.BatchNorm(use_running_average=True, momentum=0.9)  # noqa: E731
            y = nn.Conv(self.channels, (3, 3), self.strides, use_bias=False)(x)
            y = nn.relu(norm()(y))
            y = nn.Conv(self.channels, (3, 3), use_bias=False)(y)
            y = norm()(y)
            if x.shape[-1] != self.channels or self.strides != 1:
                x = norm()(nn.Conv(self.channels, (1, 1), self.strides, use_bias=False)(x))
            return nn.relu(x + y)

    class ResNet(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Conv(8, (3, 3), use_bias=False)(x)
            x = nn.relu(nn.BatchNorm(use_running_average=True)(x))
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            x = Block(8)(x)
            x = Block(16, strides=2)(x)
            x = jnp.mean(x, axis=(1, 2))
            return nn.Dense(10)(x)

    def make():
        net = ResNet()
        variables = net.init(jax.random.key(0), jnp.zeros((1, 16, 16, 3)))
        # Trained-looking running statistics, so that BatchNorm is not the identity.
        leaves, tree = jax.tree.flatten(variables["batch_stats"])
        keys = jax.random.split(jax.random.key(1), len(leaves))
        stats = [0.1 * jax.random.normal(k, v.shape) if i % 2 == 0  # means, then variances
                 else 1.0 + 0.5 * jnp.abs(jax.random.normal(k, v.shape))
                 for i, (k, v) in enumerate(zip(keys, leaves))]
        variables = {**variables, "batch_stats": jax.tree.unflatten(tree, stats)}
        return lambda x: net.apply(variables, x)

    return Model("ResNet, BatchNorm + max_pool (linen)", make,
                 lambda: [Input(("B", 16, 16, 3))])


# ------------------------------------------------------------ UNet (equinox)

def unet():
    """A UNet-ish conv net in equinox (NCHW, one example; vmapped over the batch):
    two down levels with GroupNorm and max pooling, a bottleneck, transposed-conv
    upsampling with skip concatenation, a 1x1 output conv."""
    import equinox as eqx

    class ConvBlock(eqx.Module):
        conv1: eqx.nn.Conv2d
        norm: eqx.nn.GroupNorm
        conv2: eqx.nn.Conv2d

        def __init__(self, cin, cout, key):
            k1, k2 = jax.random.split(key)
            self.conv1 = eqx.nn.Conv2d(cin, cout, 3, padding=1, key=k1)
            self.norm = eqx.nn.GroupNorm(2, cout)
            self.conv2 = eqx.nn.Conv2d(cout, cout, 3, padding=1, key=k2)

        def __call__(self, x):
            x = jax.nn.silu(self.norm(self.conv1(x)))
            return jax.nn.silu(self.conv2(x))

    class UNet(eqx.Module):
        down1: ConvBlock
        down2: ConvBlock
        middle: ConvBlock
        pool: eqx.nn.MaxPool2d
        up2: eqx.nn.ConvTranspose2d
        dec2: ConvBlock
        up1: eqx.nn.ConvTranspose2d
        dec1: ConvBlock
        out: eqx.nn.Conv2d

        def __init__(self, key):
            ks = jax.random.split(key, 8)
            self.down1 = ConvBlock(3, 8, ks[0])
            self.down2 = ConvBlock(8, 16, ks[1])
            self.middle = ConvBlock(16, 16, ks[2])
            self.pool = eqx.nn.MaxPool2d(2, 2)
            self.up2 = eqx.nn.ConvTranspose2d(16, 16, 2, stride=2, key=ks[3])
            self.dec2 = ConvBlock(32, 8, ks[4])
            self.up1 = eqx.nn.ConvTranspose2d(8, 8, 2, stride=2, key=ks[5])
            self.dec1 = ConvBlock(16, 8, ks[6])
            self.out = eqx.nn.Conv2d(8, 2, 1, key=ks[7])

        def __call__(self, x):  # x: [3, H, W]
            s1 = self.down1(x)
            s2 = self.down2(self.pool(s1))
            m = self.middle(self.pool(s2))
            y = self.dec2(jnp.concatenate([self.up2(m), s2], axis=0))
            y = self.dec1(jnp.concatenate([self.up1(y), s1], axis=0))
            return self.out(y)

    def make():
        net = UNet(jax.random.key(0))
        return jax.vmap(net)

    return Model("UNet-ish, GroupNorm + ConvTranspose (equinox)", make,
                 lambda: [Input(("B", 3, 16, 16))])


# ------------------------------------------------- LSTM tagger (nnx.RNN)

def lstm_tagger():
    """A sequence tagger: token embedding, nnx.RNN(nnx.LSTMCell) over the whole
    sequence (every step's output, so the scan stacks [B, H] per step), a Linear
    per step and log_softmax."""
    from flax import nnx

    vocab, seq, width, hidden, tags = 40, 6, 16, 16, 5

    class Tagger(nnx.Module):
        def __init__(self, rngs):
            self.embed = nnx.Embed(vocab, width, rngs=rngs)
            self.rnn = nnx.RNN(nnx.LSTMCell(width, hidden, rngs=rngs), rngs=False)
            self.out = nnx.Linear(hidden, tags, rngs=rngs)

        def __call__(self, tokens):
            x = self.embed(tokens)
            zeros = jnp.zeros((x.shape[0], hidden), x.dtype)
            h = self.rnn(x, initial_carry=(zeros, zeros))   # [B, T, hidden]
            return jax.nn.log_softmax(self.out(h))

    def make():
        # nnx.RNN carries PRNG key state; trace a merged copy, as examples/lstm.py does.
        graphdef, state = nnx.split(Tagger(nnx.Rngs(0)))
        return lambda tokens: nnx.merge(graphdef, state, copy=True)(tokens)

    return Model("LSTM tagger, nnx.RNN (nnx)", make,
                 lambda: [Input(("B", seq), np.int32, high=vocab)])


# ------------------------------------------------------ MLP-Mixer (flax linen)

def mixer():
    """An MLP-Mixer: patch embedding, blocks of token mixing (an MLP across
    patches, on the transposed activations) and channel mixing, each pre-LN with a
    residual, global average pooling, a Dense head."""
    import flax.linen as nn

    class Mlp(nn.Module):
        hidden: int

        @nn.compact
        def __call__(self, x):
            y = nn.gelu(nn.Dense(self.hidden)(x))
            return nn.Dense(x.shape[-1])(y)

    class MixerBlock(nn.Module):
        @nn.compact
        def __call__(self, x):  # [B, patches, channels]
            y = jnp.swapaxes(nn.LayerNorm()(x), 1, 2)
            x = x + jnp.swapaxes(Mlp(32)(y), 1, 2)
            return x + Mlp(64)(nn.LayerNorm()(x))

    class Mixer(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Conv(32, (4, 4), strides=(4, 4), padding="VALID")(x)
            x = x.reshape(x.shape[0], -1, x.shape[-1])
            for _ in range(2):
                x = MixerBlock()(x)
            x = nn.LayerNorm()(x)
            return nn.Dense(10)(jnp.mean(x, axis=1))

    def make():
        net = Mixer()
        variables = net.init(jax.random.key(0), jnp.zeros((1, 16, 16, 3)))
        return lambda x: net.apply(variables, x)

    return Model("MLP-Mixer (linen)", make, lambda: [Input(("B", 16, 16, 3))])


# ------------------------------------------------ GPT, causal mask (equinox)

def gpt_causal():
    """A nanoGPT-style decoder in equinox (one sequence; vmapped over the batch):
    token + learned position embeddings, pre-LN blocks of eqx.nn.MultiheadAttention
    with a lower-triangular boolean mask, a GELU MLP, tied output embedding."""
    import equinox as eqx

    vocab, seq, width, heads, layers = 48, 8, 32, 4, 2

    class Block(eqx.Module):
        ln1: eqx.nn.LayerNorm
        attn: eqx.nn.MultiheadAttention
        ln2: eqx.nn.LayerNorm
        up: eqx.nn.Linear
        down: eqx.nn.Linear

        def __init__(self, key):
            k1, k2, k3 = jax.random.split(key, 3)
            self.ln1 = eqx.nn.LayerNorm(width)
            self.attn = eqx.nn.MultiheadAttention(heads, width, key=k1)
            self.ln2 = eqx.nn.LayerNorm(width)
            self.up = eqx.nn.Linear(width, 4 * width, key=k2)
            self.down = eqx.nn.Linear(4 * width, width, key=k3)

        def __call__(self, x, mask):  # x: [T, width]
            y = jax.vmap(self.ln1)(x)
            x = x + self.attn(y, y, y, mask=mask)
            y = jax.vmap(self.ln2)(x)
            return x + jax.vmap(lambda v: self.down(jax.nn.gelu(self.up(v))))(y)

    class GPT(eqx.Module):
        wte: eqx.nn.Embedding
        wpe: eqx.nn.Embedding
        blocks: list
        ln: eqx.nn.LayerNorm

        def __init__(self, key):
            ks = jax.random.split(key, layers + 2)
            self.wte = eqx.nn.Embedding(vocab, width, key=ks[0])
            self.wpe = eqx.nn.Embedding(seq, width, key=ks[1])
            self.blocks = [Block(k) for k in ks[2:]]
            self.ln = eqx.nn.LayerNorm(width)

        def __call__(self, tokens):  # [T] int32
            t = tokens.shape[0]
            x = jax.vmap(self.wte)(tokens) + jax.vmap(self.wpe)(jnp.arange(t))
            mask = jnp.tril(jnp.ones((t, t), dtype=bool))
            for block in self.blocks:
                x = block(x, mask)
            x = jax.vmap(self.ln)(x)
            return x @ self.wte.weight.T   # tied head: logits [T, vocab]

    def make():
        return jax.vmap(GPT(jax.random.key(0)))

    return Model("GPT, causal mask (equinox)", make,
                 lambda: [Input(("B", seq), np.int32, high=vocab)])


MODELS = {"bert": bert, "resnet": resnet, "unet": unet, "lstm_tagger": lstm_tagger,
          "mixer": mixer, "gpt_causal": gpt_causal}


# ------------------------------------------------------------------ probes
# The smallest programs that show each failure pattern the matrix found (see
# docs/portability.md): one graph pattern each, so a cell names its cause.

def _probe(title, fn, inputs):
    return lambda: Model(title, lambda: fn, lambda: inputs)


def _attention(q, k, v, **kw):
    return jax.nn.dot_product_attention(q, k, v, **kw)


_QKV = [Input(("B", 8, 2, 4))] * 3
_RNG = np.random.default_rng(0)
_W = [(_RNG.standard_normal(s) * 0.3).astype(np.float32) for s in ((16, 16), (16, 32), (32, 16))]


def _attn_matmul3(q, k, v):  # q, k, v: [B, 8, 4, 4]; three MatMuls after the attention
    y = _attention(q, k, v).reshape(q.shape[0], q.shape[1], 16)
    return y @ _W[0] @ _W[1] @ _W[2]


def _scan_stack(x):  # x: [B, T, H]; every step's carry, stacked: [T, B, H] per-step outputs
    def step(c, xt):
        c = jnp.tanh(c + xt)
        return c, c
    return jax.lax.scan(step, jnp.zeros_like(x[:, 0]), jnp.swapaxes(x, 0, 1))[1]


_TABLE = np.random.default_rng(1).standard_normal((10, 4)).astype(np.float32)


def _embed_scan(ids):  # an embedding lookup scanned over time
    xs = jnp.swapaxes(jnp.asarray(_TABLE)[ids], 0, 1)
    return jax.lax.scan(lambda c, xt: (c + xt, None), jnp.zeros_like(xs[0]), xs)[0]


PROBES = {
    "attn_guard": _probe("dot_product_attention, symbolic batch (If guard around Attention)",
                         _attention, _QKV),
    "attn_2x": _probe("two dot_product_attention calls (two Ifs)",
                      lambda q, k, v: _attention(_attention(q, k, v), k, v), _QKV),
    "attn_pad_mask": _probe("dot_product_attention, padding mask [B,1,1,T]",
                            lambda q, k, v, m: _attention(q, k, v, mask=m[:, None, None, :] > 0),
                            _QKV + [Input(("B", 8), np.int32, kind="mask")]),
    "attn_causal": _probe("dot_product_attention(is_causal=True)",
                          lambda q, k, v: _attention(q, k, v, is_causal=True), _QKV),
    "attn_matmul3": _probe("dot_product_attention, then three MatMuls", _attn_matmul3,
                           [Input(("B", 8, 4, 4))] * 3),
    "scan_stack": _probe("lax.scan stacking [B, H] per step (Loop scan output)", _scan_stack,
                         [Input(("B", 5, 3))]),
    "embed_scan": _probe("embedding lookup, transposed, scanned (Loop reads it from outside)",
                         _embed_scan, [Input(("B", 5), np.int32, high=10)]),
    "max_nan": _probe("jnp.max over an axis (NaN-propagating max)",
                      lambda x: jnp.max(x, axis=-1) + 1.0, [Input(("B", 6))]),
    "top_k": _probe("lax.top_k", lambda x: jax.lax.top_k(x, 3)[0], [Input(("B", 10))]),
    "slice_T": _probe("slice along a symbolic T (x[:, 1:] - x[:, :-1])",
                      lambda x: x[:, 1:] - x[:, :-1], [Input(("B", "T", 3))]),
    "pad_negative": _probe("lax.pad with a negative low pad",
                           lambda x: jax.lax.pad(x, 0.0, [(0, 0, 0), (-1, 2, 0)]), [Input(("B", 6))]),
}
