"""The "zoo-style" models of benchmarks/zoo.py: small programs written the way public
model collections write them (flax nnx, flax linen, equinox), each exercising a
graph-quality case of issue 23 (NHWC pooling through a stored reference, linen
BatchNorm, multi-operand einsum, 3-D Dense layers, ...).

Each entry of MODELS is name -> Model(title, make, inputs) (portability_models'
types): make() gives a new callable (an nnx module or a function closing over its
weights), inputs() its Input list with the symbolic batch "B". Weights are random,
configs small. Written for this project; no third-party model code.
"""

from __future__ import annotations

import functools
import math
import re

import jax
import jax.numpy as jnp
import numpy as np

from portability_models import Input, Model


# Modules are built abstractly and given random weights from numpy: running
# their initializers eagerly compiles an XLA program per parameter shape (most
# of a second each on a shared machine), for weights thrown away.

def _random(tree, fan_in_axes, seed=0):
    """`tree` with every abstract float leaf drawn at random: statistics and
    scales (named "var", "scale") in [0.5, 1.5], matrices scaled by
    1/sqrt(fan-in) (over `fan_in_axes` of their shape: flax kernels put the
    outputs last, equinox weights first), the rest small."""
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        if not isinstance(leaf, jax.ShapeDtypeStruct):
            return leaf
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            return jnp.zeros(leaf.shape, leaf.dtype)
        name = jax.tree_util.keystr(path)
        shape = leaf.shape
        if re.search(r"\b(var|scale)\b", name):
            x = rng.uniform(0.5, 1.5, shape)
        elif len(shape) >= 2:
            fan_in = np.prod(shape[:-1] if fan_in_axes == "leading" else shape[1:])
            x = rng.standard_normal(shape) / np.sqrt(fan_in)
        else:
            x = 0.1 * rng.standard_normal(shape)
        return jnp.asarray(x, leaf.dtype)
    return jax.tree_util.tree_map_with_path(draw, tree)


def _nnx(factory):
    """The nnx module factory() makes, with random weights."""
    from flax import nnx
    module = nnx.eval_shape(factory)
    nnx.update(module, _random(nnx.state(module), "leading"))
    return module


def _linen(module, *example):
    """module.apply with random variables for `example` (batch 1), as a function."""
    variables = _random(jax.eval_shape(module.init, jax.random.key(0), *example), "leading")
    return lambda *xs: module.apply(variables, *xs)


def _eqx(factory):
    """The equinox module factory() makes, with random weights."""
    import equinox as eqx
    return _random(eqx.filter_eval_shape(factory), "trailing")


# ---------------------------------------------------- diffusion U-Net (nnx)

def unet():
    """A diffusion U-Net level in flax nnx: conv blocks with GroupNorm and SiLU, a
    timestep embedding added per channel, max_pool down (a functools.partial stored in
    the module, as model zoos write it), nearest upsampling, a skip concatenation."""
    from flax import nnx

    class Block(nnx.Module):
        def __init__(self, cin, cout, temb, rngs):
            self.norm = nnx.GroupNorm(cin, num_groups=4, rngs=rngs)
            self.conv = nnx.Conv(cin, cout, (3, 3), rngs=rngs)
            self.t = nnx.Linear(temb, cout, rngs=rngs)
            self.conv2 = nnx.Conv(cout, cout, (3, 3), rngs=rngs)
            self.skip = nnx.Conv(cin, cout, (1, 1), rngs=rngs) if cin != cout else None

        def __call__(self, x, t):
            h = self.conv(nnx.silu(self.norm(x)))
            h = h + self.t(t)[:, None, None, :]
            h = self.conv2(nnx.silu(h))
            return h + (self.skip(x) if self.skip is not None else x)

    class UNet(nnx.Module):
        def __init__(self, rngs):
            temb = 32
            self.temb = nnx.Linear(16, temb, rngs=rngs)
            self.stem = nnx.Conv(3, 16, (3, 3), rngs=rngs)
            self.down1 = Block(16, 16, temb, rngs)
            self.down2 = Block(16, 32, temb, rngs)
            self.mid = Block(32, 32, temb, rngs)
            self.up2 = Block(64, 16, temb, rngs)
            self.up1 = Block(32, 16, temb, rngs)
            self.out = nnx.Conv(16, 3, (3, 3), rngs=rngs)
            self.pool = functools.partial(nnx.max_pool, window_shape=(2, 2), strides=(2, 2))

        def __call__(self, x, t):
            half = 8
            freqs = jnp.exp(-math.log(10000.0) * jnp.arange(half) / half)
            e = t[:, None] * freqs[None, :]
            e = nnx.silu(self.temb(jnp.concatenate([jnp.sin(e), jnp.cos(e)], axis=-1)))
            h0 = self.stem(x)
            h1 = self.down1(h0, e)
            h2 = self.down2(self.pool(h1), e)
            m = self.mid(self.pool(h2), e)
            u = jnp.repeat(jnp.repeat(m, 2, axis=1), 2, axis=2)
            u = self.up2(jnp.concatenate([u, h2], axis=-1), e)
            u = jnp.repeat(jnp.repeat(u, 2, axis=1), 2, axis=2)
            u = self.up1(jnp.concatenate([u, h1], axis=-1), e)
            return self.out(u)

    return _nnx(lambda: UNet(nnx.Rngs(0)))


# ---------------------------------------------------- ResNet18-ish (linen)

def resnet_linen():
    """A ResNet in flax linen (the flax examples' style): conv stem, basic blocks of
    conv + BatchNorm(use_running_average=True) + relu with projection shortcuts,
    global average pooling, a Dense head. Random running statistics."""
    import flax.linen as nn

    class BasicBlock(nn.Module):
        filters: int
        strides: int = 1

        @nn.compact
        def __call__(self, x):
            norm = functools.partial(nn.BatchNorm, use_running_average=True, momentum=0.9,
                                     epsilon=1e-5)
            y = nn.Conv(self.filters, (3, 3), self.strides, use_bias=False)(x)
            y = nn.relu(norm()(y))
            y = nn.Conv(self.filters, (3, 3), use_bias=False)(y)
            y = norm(scale_init=nn.initializers.ones)(y)
            if x.shape[-1] != self.filters or self.strides != 1:
                x = nn.Conv(self.filters, (1, 1), self.strides, use_bias=False)(x)
                x = norm()(x)
            return nn.relu(x + y)

    class ResNet(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Conv(16, (3, 3), use_bias=False)(x)
            x = nn.relu(nn.BatchNorm(use_running_average=True)(x))
            for i, f in enumerate((16, 32, 64, 64)):
                x = BasicBlock(f, 1 if i == 0 else 2)(x)
                x = BasicBlock(f)(x)
            x = jnp.mean(x, axis=(1, 2))
            return nn.Dense(10)(x)

    return _linen(ResNet(), jax.ShapeDtypeStruct((1, 32, 32, 3), jnp.float32))


# ------------------------------------------------- actor-critic CNN (nnx)

def actor_critic():
    """An Atari-style actor-critic in flax nnx (the RL zoo shape): three convs with
    biases (8x8/4, 4x4/2, 3x3/1), a Dense torso, policy logits (log_softmax) and a
    value head."""
    from flax import nnx

    class ActorCritic(nnx.Module):
        def __init__(self, rngs):
            self.c1 = nnx.Conv(4, 32, (8, 8), strides=(4, 4), padding="VALID", rngs=rngs)
            self.c2 = nnx.Conv(32, 64, (4, 4), strides=(2, 2), padding="VALID", rngs=rngs)
            self.c3 = nnx.Conv(64, 64, (3, 3), strides=(1, 1), padding="VALID", rngs=rngs)
            self.torso = nnx.Linear(64 * 4 * 4, 256, rngs=rngs)
            self.pi = nnx.Linear(256, 6, rngs=rngs)
            self.v = nnx.Linear(256, 1, rngs=rngs)

        def __call__(self, obs):
            x = obs.astype(jnp.float32) / 255.0
            x = nnx.relu(self.c1(x))
            x = nnx.relu(self.c2(x))
            x = nnx.relu(self.c3(x))
            x = nnx.relu(self.torso(x.reshape(x.shape[0], -1)))
            return jax.nn.log_softmax(self.pi(x)), self.v(x)[:, 0]

    return _nnx(lambda: ActorCritic(nnx.Rngs(0)))


# ---------------------------------------------------- Mamba2 SSD (nnx + jnp)

def _segsum(a):
    """Stable segment sums: out[..., i, j] = sum(a[..., j+1:i+1]) for j <= i, else -inf."""
    t = a.shape[-1]
    c = jnp.cumsum(a, axis=-1)
    seg = c[..., :, None] - c[..., None, :]
    return jnp.where(jnp.tril(jnp.ones((t, t), bool)), seg, -jnp.inf)


def _ssd(x, a, b, c, chunk):
    """The chunked state-space-duality scan: x (n, l, h, p), a (n, l, h), b and c
    (n, l, h, s). Intra-chunk outputs from a masked quadratic form (a four-operand
    einsum), inter-chunk states carried by a decay matrix."""
    n, length, h, p = x.shape
    k = length // chunk
    x, b, c = (v.reshape(v.shape[0], k, chunk, *v.shape[2:]) for v in (x, b, c))
    a = a.reshape(a.shape[0], k, chunk, h).transpose(0, 3, 1, 2)  # (n, h, k, l)
    a_cum = jnp.cumsum(a, axis=-1)
    decay = jnp.exp(_segsum(a))                                   # (n, h, k, l, l)
    y_diag = jnp.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", c, b, decay, x)
    decay_states = jnp.exp(a_cum[..., -1:] - a_cum)
    states = jnp.einsum("bclhn,bhcl,bclhp->bchpn", b, decay_states, x)
    states = jnp.concatenate([jnp.zeros_like(states[:, :1]), states], axis=1)
    chunk_decay = jnp.exp(_segsum(jnp.pad(a_cum[..., -1], ((0, 0), (0, 0), (1, 0)))))
    states = jnp.einsum("bhzc,bchpn->bzhpn", chunk_decay, states)[:, :-1]
    y_off = jnp.einsum("bclhn,bchpn,bhcl->bclhp", c, states, jnp.exp(a_cum))
    return (y_diag + y_off).reshape(n, length, h, p)


def mamba2():
    """A Mamba2-style block in flax nnx: input projection into x, B, C and dt, a
    softplus step size, the chunked SSD scan (multi-operand einsums), a gated RMSNorm
    and the output projection, pre-norm residual."""
    from flax import nnx

    d, heads, hd, state, chunk = 32, 4, 16, 8, 4

    class Mamba2(nnx.Module):
        def __init__(self, rngs):
            self.norm = nnx.RMSNorm(d, rngs=rngs)
            self.in_proj = nnx.Linear(d, 2 * heads * hd + 2 * heads * state + heads, rngs=rngs)
            self.a_log = nnx.Param(jnp.log(jnp.linspace(1.0, 4.0, heads)))
            self.dt_bias = nnx.Param(jnp.full((heads,), -1.0))
            self.gnorm = nnx.RMSNorm(heads * hd, rngs=rngs)
            self.out_proj = nnx.Linear(heads * hd, d, rngs=rngs)

        def __call__(self, u):
            n, length, _ = u.shape
            zxbcdt = self.in_proj(self.norm(u))
            z, x, b, c, dt = jnp.split(
                zxbcdt, np.cumsum([heads * hd, heads * hd, heads * state, heads * state]), axis=-1)
            dt = jax.nn.softplus(dt + self.dt_bias[...])                     # (n, l, h)
            a = -jnp.exp(self.a_log[...])
            x = x.reshape(n, length, heads, hd)
            b = b.reshape(n, length, heads, state)
            c = c.reshape(n, length, heads, state)
            y = _ssd(x * dt[..., None], a * dt, b, c, chunk)
            y = y.reshape(n, length, heads * hd)
            y = self.gnorm(y * nnx.silu(z))
            return u + self.out_proj(y)

    return _nnx(lambda: Mamba2(nnx.Rngs(0)))


# ---------------------------------------------------------- ConvNeXt (nnx)

def convnext():
    """ConvNeXt blocks in flax nnx: depthwise 7x7 conv, LayerNorm, an inverted MLP
    (4x, gelu), layer scale, residual; a patchify stem and a mean-pooled head."""
    from flax import nnx

    class Block(nnx.Module):
        def __init__(self, dim, rngs):
            self.dw = nnx.Conv(dim, dim, (7, 7), feature_group_count=dim, rngs=rngs)
            self.norm = nnx.LayerNorm(dim, epsilon=1e-6, rngs=rngs)
            self.fc1 = nnx.Linear(dim, 4 * dim, rngs=rngs)
            self.fc2 = nnx.Linear(4 * dim, dim, rngs=rngs)
            self.gamma = nnx.Param(jnp.full((dim,), 0.1))

        def __call__(self, x):
            y = self.fc2(nnx.gelu(self.fc1(self.norm(self.dw(x)))))
            return x + self.gamma[...] * y

    class ConvNeXt(nnx.Module):
        def __init__(self, rngs):
            self.stem = nnx.Conv(3, 32, (4, 4), strides=(4, 4), padding="VALID", rngs=rngs)
            self.stem_norm = nnx.LayerNorm(32, epsilon=1e-6, rngs=rngs)
            self.blocks = nnx.List([Block(32, rngs) for _ in range(2)])
            self.head_norm = nnx.LayerNorm(32, epsilon=1e-6, rngs=rngs)
            self.head = nnx.Linear(32, 10, rngs=rngs)

        def __call__(self, x):
            x = self.stem_norm(self.stem(x))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.head_norm(x.mean(axis=(1, 2))))

    return _nnx(lambda: ConvNeXt(nnx.Rngs(0)))


# ---------------------------------------------------------- DenseNet (linen)

def densenet():
    """A DenseNet block and transition in flax linen: BN-relu-conv1x1-BN-relu-conv3x3
    layers, each concatenating its growth onto the features, then a BN-relu-conv1x1
    transition and 2x2 average pooling (nn.avg_pool)."""
    import flax.linen as nn

    class DenseLayer(nn.Module):
        growth: int

        @nn.compact
        def __call__(self, x):
            y = nn.Conv(4 * self.growth, (1, 1), use_bias=False)(
                nn.relu(nn.BatchNorm(use_running_average=True)(x)))
            y = nn.Conv(self.growth, (3, 3), use_bias=False)(
                nn.relu(nn.BatchNorm(use_running_average=True)(y)))
            return jnp.concatenate([x, y], axis=-1)

    class DenseNet(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Conv(16, (3, 3), use_bias=False)(x)
            for _ in range(3):
                x = DenseLayer(8)(x)
            x = nn.Conv(20, (1, 1), use_bias=False)(
                nn.relu(nn.BatchNorm(use_running_average=True)(x)))
            x = nn.avg_pool(x, (2, 2), strides=(2, 2))
            for _ in range(2):
                x = DenseLayer(8)(x)
            x = nn.relu(nn.BatchNorm(use_running_average=True)(x))
            return nn.Dense(10)(x.mean(axis=(1, 2)))

    return _linen(DenseNet(), jax.ShapeDtypeStruct((1, 32, 32, 3), jnp.float32))


# ------------------------------------------------- EfficientNet MBConv (nnx)

def mbconv():
    """EfficientNet MBConv blocks in flax nnx: 1x1 expansion, BatchNorm, SiLU, a
    depthwise 3x3 conv, squeeze-and-excitation (mean, two Linears, sigmoid gate), 1x1
    projection, BatchNorm, residual."""
    from flax import nnx

    class MBConv(nnx.Module):
        def __init__(self, cin, cout, expand, stride, rngs):
            mid = cin * expand
            self.expand = nnx.Conv(cin, mid, (1, 1), use_bias=False, rngs=rngs)
            self.bn0 = nnx.BatchNorm(mid, use_running_average=True, rngs=rngs)
            self.dw = nnx.Conv(mid, mid, (3, 3), strides=(stride, stride), feature_group_count=mid,
                               use_bias=False, rngs=rngs)
            self.bn1 = nnx.BatchNorm(mid, use_running_average=True, rngs=rngs)
            self.se1 = nnx.Linear(mid, max(1, cin // 4), rngs=rngs)
            self.se2 = nnx.Linear(max(1, cin // 4), mid, rngs=rngs)
            self.project = nnx.Conv(mid, cout, (1, 1), use_bias=False, rngs=rngs)
            self.bn2 = nnx.BatchNorm(cout, use_running_average=True, rngs=rngs)
            self.residual = cin == cout and stride == 1

        def __call__(self, x):
            y = nnx.silu(self.bn0(self.expand(x)))
            y = nnx.silu(self.bn1(self.dw(y)))
            s = nnx.sigmoid(self.se2(nnx.silu(self.se1(y.mean(axis=(1, 2))))))
            y = self.bn2(self.project(y * s[:, None, None, :]))
            return x + y if self.residual else y

    class Net(nnx.Module):
        def __init__(self, rngs):
            self.stem = nnx.Conv(3, 16, (3, 3), strides=(2, 2), use_bias=False, rngs=rngs)
            self.bn = nnx.BatchNorm(16, use_running_average=True, rngs=rngs)
            self.blocks = nnx.List([MBConv(16, 16, 1, 1, rngs), MBConv(16, 24, 6, 2, rngs),
                                    MBConv(24, 24, 6, 1, rngs)])
            self.head = nnx.Linear(24, 10, rngs=rngs)

        def __call__(self, x):
            x = nnx.silu(self.bn(self.stem(x)))
            for b in self.blocks:
                x = b(x)
            return self.head(x.mean(axis=(1, 2)))

    return _nnx(lambda: Net(nnx.Rngs(0)))


# ---------------------------------------------------- T5 encoder layer (nnx)

def t5_encoder():
    """T5-style encoder layers in flax nnx: T5's scale-only RMS norm written by hand,
    attention without biases and without 1/sqrt(d) scaling, a relative position bias
    from a bucket table, a ReLU feed-forward, pre-norm residuals."""
    from flax import nnx

    d, heads, ff, seq, buckets = 64, 4, 128, 16, 8
    # Relative position buckets (bidirectional, a small fixed table).
    rel = np.arange(seq)[None, :] - np.arange(seq)[:, None]
    bucket = np.clip(np.abs(rel), 0, buckets // 2 - 1) + (rel > 0) * (buckets // 2)

    def t5_norm(x, w):
        var = jnp.mean(jnp.square(x), axis=-1, keepdims=True)
        return w * (x * jax.lax.rsqrt(var + 1e-6))

    class Layer(nnx.Module):
        def __init__(self, rngs):
            self.ln1 = nnx.Param(jnp.ones((d,)))
            self.q = nnx.Linear(d, d, use_bias=False, rngs=rngs)
            self.k = nnx.Linear(d, d, use_bias=False, rngs=rngs)
            self.v = nnx.Linear(d, d, use_bias=False, rngs=rngs)
            self.o = nnx.Linear(d, d, use_bias=False, rngs=rngs)
            self.ln2 = nnx.Param(jnp.ones((d,)))
            self.wi = nnx.Linear(d, ff, use_bias=False, rngs=rngs)
            self.wo = nnx.Linear(ff, d, use_bias=False, rngs=rngs)

        def __call__(self, x, bias):
            n, t, _ = x.shape
            h = t5_norm(x, self.ln1[...])
            split = lambda y: y.reshape(n, t, heads, d // heads)  # noqa: E731
            q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
            s = jnp.einsum("bqhd,bkhd->bhqk", q, k) + bias
            a = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v)
            x = x + self.o(a.reshape(n, t, d))
            return x + self.wo(nnx.relu(self.wi(t5_norm(x, self.ln2[...]))))

    class Encoder(nnx.Module):
        def __init__(self, rngs):
            self.rel_bias = nnx.Embed(buckets, heads, rngs=rngs)
            self.layers = nnx.List([Layer(rngs) for _ in range(2)])
            self.final = nnx.Param(jnp.ones((d,)))

        def __call__(self, x):
            bias = self.rel_bias.embedding[...][bucket].transpose(2, 0, 1)[None]
            for layer in self.layers:
                x = layer(x, bias)
            return t5_norm(x, self.final[...])

    return _nnx(lambda: Encoder(nnx.Rngs(0)))


# ------------------------------------------- Whisper front end + layer (nnx)

def whisper():
    """A Whisper-style audio encoder in flax nnx: two 1-D convs over a log-mel
    spectrogram (the second with stride 2) with gelu, sinusoidal positions, then a
    pre-LN encoder layer (nnx.MultiHeadAttention, a gelu MLP) and a final LayerNorm."""
    from flax import nnx

    mels, frames, d, heads = 16, 32, 64, 4
    t = frames // 2
    inv = np.exp(-math.log(10000.0) * np.arange(d // 2) / (d // 2 - 1))
    pos = np.arange(t)[:, None] * inv[None, :]
    positions = jnp.asarray(np.concatenate([np.sin(pos), np.cos(pos)], axis=1), jnp.float32)

    class Encoder(nnx.Module):
        def __init__(self, rngs):
            self.conv1 = nnx.Conv(mels, d, (3,), rngs=rngs)
            self.conv2 = nnx.Conv(d, d, (3,), strides=(2,), rngs=rngs)
            self.ln1 = nnx.LayerNorm(d, rngs=rngs)
            self.attn = nnx.MultiHeadAttention(heads, d, decode=False, rngs=rngs)
            self.ln2 = nnx.LayerNorm(d, rngs=rngs)
            self.fc1 = nnx.Linear(d, 4 * d, rngs=rngs)
            self.fc2 = nnx.Linear(4 * d, d, rngs=rngs)
            self.ln_post = nnx.LayerNorm(d, rngs=rngs)

        def __call__(self, mel):
            x = mel.transpose(0, 2, 1)  # (B, mels, frames) -> channels last
            x = nnx.gelu(self.conv1(x), approximate=False)
            x = nnx.gelu(self.conv2(x), approximate=False)
            x = x + positions
            x = x + self.attn(self.ln1(x))
            x = x + self.fc2(nnx.gelu(self.fc1(self.ln2(x)), approximate=False))
            return self.ln_post(x)

    return _nnx(lambda: Encoder(nnx.Rngs(0)))


# ------------------------------------------------ GRU over time (equinox)

def gru():
    """A GRU sequence encoder in equinox: eqx.nn.GRUCell scanned over time with
    lax.scan (per example, vmapped over the batch), a Linear on the last state."""
    import equinox as eqx

    d_in, hidden = 16, 32
    cell = _eqx(lambda: eqx.nn.GRUCell(d_in, hidden, key=jax.random.key(0)))
    head = _eqx(lambda: eqx.nn.Linear(hidden, 4, key=jax.random.key(1)))

    def encode(xs):  # xs: (T, d_in)
        def step(h, x):
            h = cell(x, h)
            return h, None
        h, _ = jax.lax.scan(step, jnp.zeros((hidden,)), xs)
        return head(h)

    return jax.vmap(encode)


# ---------------------------------------------------- LSTM tagger (linen)

def lstm_linen():
    """A sequence tagger in flax linen: nn.RNN(nn.OptimizedLSTMCell) over the time
    axis, a Dense per step."""
    import flax.linen as nn

    class Tagger(nn.Module):
        @nn.compact
        def __call__(self, x):
            y = nn.RNN(nn.OptimizedLSTMCell(32))(x)
            return nn.Dense(5)(y)

    return _linen(Tagger(), jax.ShapeDtypeStruct((1, 12, 16), jnp.float32))


# ---------------------------------------------------- VAE encoder (equinox)

def vae_encoder():
    """A convolutional VAE encoder in equinox (channels first, one example, vmapped):
    strided Conv2d + relu, flatten, Linear to the mean and log-variance, and the
    reparameterized sample from a given noise input."""
    import equinox as eqx

    keys = jax.random.split(jax.random.key(0), 4)

    class Encoder(eqx.Module):
        c1: eqx.nn.Conv2d
        c2: eqx.nn.Conv2d
        mu: eqx.nn.Linear
        logvar: eqx.nn.Linear

        def __init__(self):
            self.c1 = eqx.nn.Conv2d(1, 16, 3, stride=2, padding=1, key=keys[0])
            self.c2 = eqx.nn.Conv2d(16, 32, 3, stride=2, padding=1, key=keys[1])
            self.mu = eqx.nn.Linear(32 * 7 * 7, 8, key=keys[2])
            self.logvar = eqx.nn.Linear(32 * 7 * 7, 8, key=keys[3])

        def __call__(self, x, eps):
            h = jax.nn.relu(self.c2(jax.nn.relu(self.c1(x)))).reshape(-1)
            mu, logvar = self.mu(h), self.logvar(h)
            return mu + jnp.exp(0.5 * logvar) * eps, mu, logvar

    return jax.vmap(_eqx(Encoder))


MODELS = {
    "unet": Model("diffusion U-Net level (nnx, NHWC max_pool by a stored partial)", unet,
                  lambda: [Input(("B", 16, 16, 3)), Input(("B",))]),
    "resnet_linen": Model("ResNet18-ish (linen, BatchNorm)", resnet_linen,
                          lambda: [Input(("B", 32, 32, 3))]),
    "actor_critic": Model("actor-critic CNN (nnx, Atari-style)", actor_critic,
                          lambda: [Input(("B", 60, 60, 4))]),
    "mamba2": Model("Mamba2-style SSD block (nnx, multi-operand einsum)", mamba2,
                    lambda: [Input(("B", 16, 32))]),
    "convnext": Model("ConvNeXt blocks (nnx)", convnext, lambda: [Input(("B", 32, 32, 3))]),
    "densenet": Model("DenseNet block + transition (linen, BatchNorm, avg_pool)", densenet,
                      lambda: [Input(("B", 32, 32, 3))]),
    "mbconv": Model("EfficientNet MBConv blocks (nnx, BatchNorm, SE)", mbconv,
                    lambda: [Input(("B", 32, 32, 3))]),
    "t5": Model("T5-style encoder, 2 layers (nnx, hand-written RMS norm, rel. bias)", t5_encoder,
                lambda: [Input(("B", 16, 64))]),
    "whisper": Model("Whisper-style conv front end + encoder layer (nnx)", whisper,
                     lambda: [Input(("B", 16, 32))]),
    "gru": Model("GRU over time (equinox GRUCell, lax.scan, vmap)", gru,
                 lambda: [Input(("B", 12, 16))]),
    "lstm_linen": Model("LSTM tagger (linen nn.RNN, OptimizedLSTMCell)", lstm_linen,
                        lambda: [Input(("B", 12, 16))]),
    "vae": Model("VAE encoder (equinox Conv2d, reparameterized sample)", vae_encoder,
                 lambda: [Input(("B", 1, 28, 28)), Input(("B", 8))]),
}
