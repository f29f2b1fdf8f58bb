"""The programs of benchmarks/corpus.py, generated rather than listed.

A candidate is a name ("jnp.sin", "scipy.stats.norm.logpdf", "nnx.Linear",
"compose.grad.tanh", "examples.gpt"); attempts(name) gives the programs to try
for it, in order. For the public functions of a module those are the function
under canned argument patterns (one float array; two; an array and an axis; an
int array; a matrix; ...), every input with a leading batch dim "B"; the corpus
keeps the first attempt that jax.jit itself runs (that is JAX's program, not
ours to judge). jax.random's functions draw from a key literal (threefry2x32 and
rbg). Layers of flax.nnx, flax.linen and equinox are built with
default-ish constructors; compositions put a few everyday functions under
jax.grad, vmap, scan, while_loop, cond, ...; the repo's examples come as they
are (small sizes). The order of candidates is fixed: sources in SOURCES order,
names sorted within each.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import sys
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import jax.scipy.linalg
import jax.scipy.signal
import jax.scipy.special
import jax.scipy.stats
import numpy as np
from jax import lax

ROOT = Path(__file__).resolve().parents[1]
B = "B"  # the batch dim, symbolic in the symbolic variants


@dataclasses.dataclass(frozen=True)
class Input:
    shape: tuple      # ints and "B"
    kind: str = "f"   # f: normal floats, pos: > 0.5, unit: in (0, 1), spd: SPD matrices,
                      # c: complex, i: int32 in [0, high), s: int32 in [-5, 5], b: bool


@dataclasses.dataclass
class Program:
    name: str               # what the report shows: "jnp.sin(x)"
    source: str             # the per-source row of the summary
    fn: Callable
    inputs: list            # Input, one per positional argument
    high: int = 10          # integer inputs of kind "i" are in [0, high)
    module: bool = False    # fn is an nnx module (to_onnx takes it as it is)
    at_dtype: Callable | None = None  # dtype -> fn with float64 weights (layers), under x64


def cast_floats(tree, dt):
    """`tree` with its float arrays in dtype `dt` (a layer's weights for the float64 variant)."""
    def cast(a):
        if isinstance(a, (jax.Array, np.ndarray)) and np.dtype(a.dtype).kind == "f":
            return jnp.asarray(a, dt)
        return a
    return jax.tree_util.tree_map(cast, tree)


def _nnx_cast(m, dt):
    from flax import nnx
    if isinstance(m, nnx.Module):
        nnx.update(m, cast_floats(nnx.state(m, nnx.Param), dt))
    return m


def make_input(inp: Input, batch: int, float_dtype, rng, high=10):
    """Concrete data for `inp` with "B" = batch."""
    shape = tuple(batch if d == B else d for d in inp.shape)
    if inp.kind == "i":
        return rng.integers(0, high, size=shape).astype(np.int32)
    if inp.kind == "s":
        return rng.integers(-5, 6, size=shape).astype(np.int32)
    if inp.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if inp.kind == "c":
        return (rng.standard_normal(size=shape) + 1j * rng.standard_normal(size=shape)).astype(
            np.complex128 if np.dtype(float_dtype) == np.float64 else np.complex64)
    x = rng.standard_normal(size=shape)
    if inp.kind == "pos":
        x = np.abs(x) + 0.5
    elif inp.kind == "unit":
        x = rng.uniform(0.05, 0.95, size=shape)
    elif inp.kind == "spd":
        x = x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])
    return x.astype(float_dtype)


# ---------------------------------------------------------------- patterns --
# (signature shown in the report, inputs, how the function is called on them)

def _p(sig, inputs, call=None):
    return sig, inputs, call


X, Y, Z = Input((B, 5)), Input((B, 5)), Input((B, 5))
POS, UNIT = Input((B, 5), "pos"), Input((B, 5), "unit")
I, J = Input((B, 5), "i"), Input((B, 5), "s")
BOOL = Input((B, 5), "b")
MAT, MAT2, RHS, VEC = Input((B, 4, 4)), Input((B, 4, 4)), Input((B, 4, 2)), Input((B, 4))
SPD = Input((B, 4, 4), "spd")
W = Input((5, 3))  # a weight: no batch dim
CPLX = Input((B, 5), "c")
NCHW, OIHW = Input((B, 3, 8, 8)), Input((4, 3, 3, 3))

ARRAY = [
    _p("x", [X]),
    _p("x, y", [X, Y]),
    _p("x, axis=-1", [X], lambda f: lambda x: f(x, axis=-1)),
    _p("i", [I]),
    _p("i, j", [I, J]),
    _p("b", [BOOL]),
    _p("b, c", [BOOL, BOOL]),
    _p("x, y, z", [X, Y, Z]),
    _p("x, 2", [X], lambda f: lambda x: f(x, 2)),
    _p("i, 2", [I], lambda f: lambda x: f(x, 2)),
    _p("a", [MAT]),
    _p("x, w", [X, W]),
    _p("x, size=3", [X], lambda f: lambda x: f(x, size=3)),
    _p("i, length=10", [I], lambda f: lambda x: f(x, length=10)),
    _p("x, (1,)", [X], lambda f: lambda x: f(x, (1,))),
    _p("x, (1, 0)", [X], lambda f: lambda x: f(x, (1, 0))),
    _p("x, (1, 2)", [X], lambda f: lambda x: f(x, (1, 2))),
    _p("x, 1, 0", [X], lambda f: lambda x: f(x, 1, 0)),
    _p("x, (-1,)", [X], lambda f: lambda x: f(x, (-1,))),
    _p("x, 5, axis=-1", [X], lambda f: lambda x: f(x, 5, axis=-1)),
    _p("x, int32", [X], lambda f: lambda x: f(x, jnp.int32)),
    _p("x, 1, int32", [X], lambda f: lambda x: f(x, 1, jnp.int32)),
    _p("x, 1, 2, axis=1", [X], lambda f: lambda x: f(x, 1, 2, axis=1)),
    _p("x, y, (0, 1)", [X, Input((B, 3))], lambda f: lambda x, y: f(x, y, (0, 1))),
    _p("x, 0, [(0, 0, 0), (1, 2, 1)]", [X], lambda f: lambda x: f(x, jnp.zeros((), x.dtype), [(0, 0, 0), (1, 2, 1)])),
    _p("x, 5, 10", [X], lambda f: lambda x: f(x, 5, 10)),
    _p("b, x, y", [BOOL, X, Y]),
    _p("u, v", [Input((B, 3)), Input((B, 3))]),
    _p("'...i,...i->...', x, y", [X, Y], lambda f: lambda x, y: f("...i,...i->...", x, y)),
    _p("jnp.add, x", [X], lambda f: lambda x: f(jnp.add, x, axis=1)),
    _p("jnp.sin, x", [X], lambda f: lambda x: f(jnp.sin, x)),
    _p("nchw, oihw, (1, 1), SAME", [NCHW, OIHW], lambda f: lambda x, w: f(x, w, (1, 1), "SAME")),
    _p("c", [CPLX]),
    _p("vmap(v)", [Input((B, 8))], lambda f: jax.vmap(f)),
    _p("vmap(v, w)", [Input((B, 8)), Input((B, 3))], lambda f: jax.vmap(f)),
]
MATRIX = [
    _p("a", [MAT]),
    _p("spd", [SPD]),
    _p("a, b", [MAT, RHS]),
    _p("a, v", [MAT, VEC]),
    _p("a, c", [MAT, MAT2]),
    _p("vmap(a)", [MAT], lambda f: jax.vmap(f)),
    _p("vmap(a, b)", [MAT, RHS], lambda f: jax.vmap(f)),
] + ARRAY
SPECIAL = [
    _p("x", [X]),
    _p("p", [POS]),
    _p("x, y", [X, Y]),
    _p("p, q", [POS, Input((B, 5), "pos")]),
    _p("p, q, r", [POS, Input((B, 5), "pos"), Input((B, 5), "unit")]),
    _p("i, x", [I, X]),
] + ARRAY
STATS = [
    _p("x", [X]),
    _p("x, a", [X, POS]),
    _p("x, u", [X, UNIT]),
    _p("x, a, b", [X, POS, Input((B, 5), "pos")]),
    _p("x, a, u", [X, POS, UNIT]),
    _p("k, u", [I, UNIT]),
    _p("k, a", [I, POS]),
    _p("k, n, u", [I, Input((B, 5), "i"), UNIT]),
    _p("u", [UNIT]),
] + ARRAY


def _random_patterns(impl):
    """jax.random's draws from a key literal of the program (`impl`: threefry2x32 or rbg)."""
    k = lambda: jax.random.key(7, impl=impl)  # noqa: E731
    pos2 = Input((B, 5), "pos")
    return [
        _p("key, x.shape", [X], lambda f: lambda x: f(k(), x.shape)),
        _p("key, x.shape, 0, 10", [X], lambda f: lambda x: f(k(), x.shape, 0, 10)),
        _p("key, u, x.shape", [UNIT], lambda f: lambda p: f(k(), p, p.shape)),
        _p("key, x", [X], lambda f: lambda x: f(k(), x)),
        _p("key, a", [POS], lambda f: lambda a: f(k(), a)),
        _p("key, a, b", [POS, pos2], lambda f: lambda a, b: f(k(), a, b)),
    ]


# Not programs to compare: JAX's own results differ between calls.
EXCLUDE = {"lax.rng_uniform"}


def _public_functions(mod):
    """Public callables of `mod` that are functions (not classes, modules or dtypes),
    aliases (one object under two names) once, by name."""
    seen, out = set(), []
    for name in sorted(dir(mod)):
        if name.startswith("_"):
            continue
        obj = getattr(mod, name, None)
        if obj is None or inspect.isclass(obj) or inspect.ismodule(obj) or not callable(obj):
            continue
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        out.append((name, obj))
    return out


def _stats_modules():
    mods = [("scipy.stats", jax.scipy.stats)]
    for name in sorted(dir(jax.scipy.stats)):
        obj = getattr(jax.scipy.stats, name)
        if not name.startswith("_") and inspect.ismodule(obj):
            mods.append((f"scipy.stats.{name}", obj))
    return mods


# prefix -> (module, patterns, per-source row)
def _function_sources():
    out = [("jnp", jnp, ARRAY, "jnp"), ("jnp.linalg", jnp.linalg, MATRIX, "jnp.linalg"),
           ("jnp.fft", jnp.fft, ARRAY, "jnp.fft"), ("nn", jax.nn, ARRAY, "jax.nn"),
           ("scipy.special", jax.scipy.special, SPECIAL, "scipy.special"),
           ("scipy.linalg", jax.scipy.linalg, MATRIX, "scipy.linalg"),
           ("scipy.signal", jax.scipy.signal, ARRAY, "scipy.signal")]
    out += [(p, m, STATS, "scipy.stats") for p, m in _stats_modules()]
    out.append(("lax", lax, ARRAY, "lax"))
    out.append(("random", jax.random, _random_patterns("threefry2x32"), "jax.random"))
    out.append(("random_rbg", jax.random, _random_patterns("rbg"), "jax.random (rbg keys)"))
    return out


# ---------------------------------------------------------------- layers --

def _nnx_layers():
    from flax import nnx
    r = lambda: nnx.Rngs(0)  # noqa: E731
    return {
        "Linear": (lambda: nnx.Linear(5, 4, rngs=r()), [X]),
        "LinearGeneral": (lambda: nnx.LinearGeneral(5, (2, 3), rngs=r()), [X]),
        "Einsum": (lambda: nnx.Einsum("bi,io->bo", (5, 3), (3,), rngs=r()), [X]),
        "Conv2d": (lambda: nnx.Conv(3, 4, (3, 3), rngs=r()), [Input((B, 8, 8, 3))]),
        "Conv1d_strided": (lambda: nnx.Conv(3, 4, (3,), strides=2, padding="VALID", rngs=r()),
                           [Input((B, 10, 3))]),
        "Conv2d_dilated_grouped": (lambda: nnx.Conv(4, 4, (3, 3), kernel_dilation=2, feature_group_count=2,
                                                    rngs=r()), [Input((B, 9, 9, 4))]),
        "ConvTranspose": (lambda: nnx.ConvTranspose(3, 4, (3, 3), strides=(2, 2), rngs=r()),
                          [Input((B, 5, 5, 3))]),
        "LayerNorm": (lambda: nnx.LayerNorm(5, rngs=r()), [X]),
        "RMSNorm": (lambda: nnx.RMSNorm(5, rngs=r()), [X]),
        "GroupNorm": (lambda: nnx.GroupNorm(6, num_groups=2, rngs=r()), [Input((B, 4, 6))]),
        "InstanceNorm": (lambda: nnx.InstanceNorm(6, rngs=r()), [Input((B, 4, 6))]),
        "BatchNorm": (lambda: nnx.BatchNorm(5, use_running_average=True, rngs=r()), [X]),
        "Dropout": (lambda: nnx.Dropout(0.5, deterministic=True, rngs=r()), [X]),
        "Embed": (lambda: nnx.Embed(10, 4, rngs=r()), [I]),
        "MultiHeadAttention": (lambda: nnx.MultiHeadAttention(num_heads=2, in_features=8, decode=False,
                                                              rngs=r()), [Input((B, 4, 8))]),
        "PReLU": (lambda: nnx.PReLU(), [X]),
        "RNN_LSTMCell": (lambda: nnx.RNN(nnx.LSTMCell(4, 6, rngs=r())), [Input((B, 5, 4))]),
        "RNN_GRUCell": (lambda: nnx.RNN(nnx.GRUCell(4, 6, rngs=r())), [Input((B, 5, 4))]),
        "RNN_SimpleCell": (lambda: nnx.RNN(nnx.SimpleCell(4, 6, rngs=r())), [Input((B, 5, 4))]),
        "RNN_OptimizedLSTMCell": (lambda: nnx.RNN(nnx.OptimizedLSTMCell(4, 6, rngs=r())),
                                  [Input((B, 5, 4))]),
        "Bidirectional": (lambda: nnx.Bidirectional(nnx.RNN(nnx.GRUCell(4, 3, rngs=r())),
                                                    nnx.RNN(nnx.GRUCell(4, 3, rngs=r()))),
                          [Input((B, 5, 4))]),
        "Sequential": (lambda: nnx.Sequential(nnx.Linear(5, 8, rngs=r()), nnx.relu,
                                              nnx.Linear(8, 2, rngs=r())), [X]),
        "LoRALinear": (lambda: nnx.LoRALinear(5, 4, lora_rank=2, rngs=r()), [X]),
        "avg_pool": (lambda: (lambda x: nnx.avg_pool(x, (2, 2), strides=(2, 2))), [Input((B, 6, 6, 3))]),
        "max_pool": (lambda: (lambda x: nnx.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")),
                     [Input((B, 6, 6, 3))]),
    }


def _linen_layers(dt=np.float32):
    import flax.linen as nn

    def bound(module, *shapes):
        def make():
            xs = [jnp.zeros(tuple(3 if d == B else d for d in s.shape),
                            jnp.int32 if s.kind == "i" else jnp.float32) for s in shapes]
            params = cast_floats(module.init(jax.random.key(0), *xs), dt)
            return lambda *a: module.apply(params, *a)
        return make, list(shapes)

    return {
        "Dense": bound(nn.Dense(4), X),
        "DenseGeneral": bound(nn.DenseGeneral((2, 3)), X),
        "Conv": bound(nn.Conv(4, (3, 3)), Input((B, 8, 8, 3))),
        "Conv_strided_valid": bound(nn.Conv(4, (3,), strides=2, padding="VALID"), Input((B, 10, 3))),
        "ConvTranspose": bound(nn.ConvTranspose(4, (3, 3), strides=(2, 2)), Input((B, 5, 5, 3))),
        "LayerNorm": bound(nn.LayerNorm(), X),
        "RMSNorm": bound(nn.RMSNorm(), X),
        "GroupNorm": bound(nn.GroupNorm(num_groups=2), Input((B, 4, 6))),
        "BatchNorm": bound(nn.BatchNorm(use_running_average=True), X),
        "Dropout": bound(nn.Dropout(0.5, deterministic=True), X),
        "Embed": bound(nn.Embed(10, 4), I),
        "MultiHeadDotProductAttention": bound(nn.MultiHeadDotProductAttention(num_heads=2),
                                              Input((B, 4, 8))),
        "SelfAttention_causal": (lambda: _linen_causal(nn, dt), [Input((B, 4, 8))]),
        "RNN_LSTMCell": bound(nn.RNN(nn.LSTMCell(6)), Input((B, 5, 4))),
        "RNN_GRUCell": bound(nn.RNN(nn.GRUCell(6)), Input((B, 5, 4))),
        "avg_pool": (lambda: (lambda x: nn.avg_pool(x, (2, 2), strides=(2, 2))), [Input((B, 6, 6, 3))]),
        "max_pool": (lambda: (lambda x: nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")),
                     [Input((B, 6, 6, 3))]),
    }


def _linen_causal(nn, dt):
    m = nn.MultiHeadDotProductAttention(num_heads=2)
    x = jnp.zeros((3, 4, 8))
    params = cast_floats(m.init(jax.random.key(0), x, x), dt)
    return lambda x: m.apply(params, x, x, mask=nn.make_causal_mask(x[..., 0]))


def _eqx_layers(dt=np.float32):
    import equinox as eqx
    k = jax.random.key(0)

    def v(layer):  # equinox layers take one example: vmap over the batch
        return jax.vmap(cast_floats(layer, dt))

    def lstm():
        cell = cast_floats(eqx.nn.LSTMCell(4, 6, key=k), dt)

        def run(xs):
            def step(carry, x):
                carry = cell(x, carry)
                return carry, carry[0]
            return lax.scan(step, (jnp.zeros(6, xs.dtype), jnp.zeros(6, xs.dtype)), xs)[1]
        return v(run)

    def gru():
        cell = cast_floats(eqx.nn.GRUCell(4, 6, key=k), dt)
        return v(lambda xs: lax.scan(lambda h, x: (cell(x, h), cell(x, h)), jnp.zeros(6, xs.dtype), xs)[1])

    return {
        "Linear": (lambda: v(eqx.nn.Linear(5, 4, key=k)), [X]),
        "MLP": (lambda: v(eqx.nn.MLP(5, 2, 8, 2, key=k)), [X]),
        "Conv2d": (lambda: v(eqx.nn.Conv2d(3, 4, 3, padding=1, key=k)), [Input((B, 3, 8, 8))]),
        "Conv1d_strided": (lambda: v(eqx.nn.Conv1d(3, 4, 3, stride=2, key=k)), [Input((B, 3, 10))]),
        "ConvTranspose2d": (lambda: v(eqx.nn.ConvTranspose2d(3, 4, 3, stride=2, key=k)), [Input((B, 3, 5, 5))]),
        "LayerNorm": (lambda: v(eqx.nn.LayerNorm(5)), [X]),
        "RMSNorm": (lambda: v(eqx.nn.RMSNorm(5)), [X]),
        "GroupNorm": (lambda: v(eqx.nn.GroupNorm(2, 6)), [Input((B, 6, 4))]),
        "Embedding": (lambda: v(eqx.nn.Embedding(10, 4, key=k)), [Input((B,), "i")]),
        "MultiheadAttention": (lambda: jax.vmap(lambda x, m=cast_floats(eqx.nn.MultiheadAttention(2, 8, key=k), dt):
                                                m(x, x, x)), [Input((B, 4, 8))]),
        "Dropout_inference": (lambda: v(eqx.nn.Dropout(0.5, inference=True)), [X]),
        "PReLU": (lambda: v(eqx.nn.PReLU()), [X]),
        "MaxPool2d": (lambda: v(eqx.nn.MaxPool2d(2, 2)), [Input((B, 3, 6, 6))]),
        "AvgPool2d": (lambda: v(eqx.nn.AvgPool2d(2, 2)), [Input((B, 3, 6, 6))]),
        "AdaptiveAvgPool2d": (lambda: v(eqx.nn.AdaptiveAvgPool2d(3)), [Input((B, 3, 6, 6))]),
        "LSTMCell_scan": (lstm, [Input((B, 5, 4))]),
        "GRUCell_scan": (gru, [Input((B, 5, 4))]),
        "RotaryPositionalEmbedding": (lambda: v(eqx.nn.RotaryPositionalEmbedding(8)), [Input((B, 4, 8))]),
    }


# ---------------------------------------------------------------- compositions --

_W = np.random.default_rng(7).standard_normal((5, 5)) * 0.4

UNARY = {  # everyday functions the transformations wrap
    "sin": jnp.sin, "tanh": jnp.tanh, "exp": lambda x: jnp.exp(x / 4), "square": jnp.square,
    "relu": jax.nn.relu, "gelu": jax.nn.gelu, "softplus": jax.nn.softplus, "sigmoid": jax.nn.sigmoid,
    "softmax": jax.nn.softmax, "log_softmax": jax.nn.log_softmax, "logsumexp": lambda x: jax.nn.logsumexp(x, -1, keepdims=True) + x,
    "cumsum": lambda x: jnp.cumsum(x, axis=-1), "sort": jnp.sort, "abs": jnp.abs,
    "matmul": lambda x: jnp.tanh(x @ _W.astype(x.dtype)), "layer_norm": jax.nn.standardize,
}


def _compose(t, f):
    """Transformation t of the elementwise-shaped function f: x [B, 5] -> ..."""
    if t == "grad":
        return jax.grad(lambda x: jnp.sum(f(x) ** 2))
    if t == "value_and_grad":
        return jax.value_and_grad(lambda x: jnp.sum(f(x) * jnp.arange(5, dtype=x.dtype)))
    if t == "jvp":
        return lambda x: jax.jvp(f, (x,), (jnp.ones_like(x),))
    if t == "vjp":
        return lambda x: jax.vjp(f, x)[1](x)[0]
    if t == "vmap":
        return jax.vmap(f)  # per row
    if t == "scan":
        return lambda x: lax.scan(lambda c, r: (f(c + r), f(c) * r), jnp.zeros_like(x[0]), x)
    if t == "fori_loop":
        return lambda x: lax.fori_loop(0, 3, lambda i, c: f(c) + i, x)
    if t == "while_loop":  # a data-dependent trip count
        return lambda x: lax.while_loop(lambda c: (c[1] < 4) & (jnp.sum(c[0]) < 1e3),
                                        lambda c: (f(c[0]) + 1, c[1] + 1), (x, 0))
    if t == "cond":
        return lambda x: lax.cond(jnp.sum(x) > 0, f, lambda y: -y, x)
    if t == "switch":
        return lambda x: lax.switch(jnp.clip(jnp.sum(x > 0), 0, 2), [f, jnp.negative, lambda y: f(y) * 2], x)
    if t == "checkpoint":
        return jax.grad(lambda x: jnp.sum(jax.checkpoint(f)(x)))
    if t == "jit":
        return jax.jit(lambda x: f(jax.jit(f)(x)))
    if t == "custom_jvp":
        g = jax.custom_jvp(f)
        g.defjvp(lambda p, t: (f(p[0]), t[0]))
        return jax.grad(lambda x: jnp.sum(g(x)))
    if t == "mlp_loss_grad":  # a training step's gradient w.r.t. the weights
        return lambda x: jax.grad(lambda w: jnp.mean((f(x @ w) - 1.0) ** 2))(jnp.asarray(_W, x.dtype))
    raise KeyError(t)


TRANSFORMS = ("grad", "value_and_grad", "jvp", "vjp", "vmap", "scan", "fori_loop", "while_loop", "cond",
              "switch", "checkpoint", "jit", "custom_jvp", "mlp_loss_grad")


# ---------------------------------------------------------------- examples --

EXAMPLES = ("cnn", "gpt", "lstm", "mlp", "vit")


def _example(name):
    sys.path.insert(0, str(ROOT / "examples"))
    mod = importlib.import_module(name)
    inputs = [Input(i.shape, "i" if np.issubdtype(i.dtype, np.integer) else "f") for i in mod.inputs(small=True)]
    high = max([i.high for i in mod.inputs(small=True)] + [1])
    from flax import nnx
    model = mod.make_model(small=True)
    return Program(f"examples.{name}", "examples", model, inputs, high=high, module=isinstance(model, nnx.Module))


# ---------------------------------------------------------------- candidates --

SOURCES = ("jnp", "jnp.linalg", "jnp.fft", "jax.nn", "scipy.special", "scipy.linalg", "scipy.signal",
           "scipy.stats", "lax", "jax.random", "jax.random (rbg keys)", "nnx", "linen", "equinox", "compose",
           "examples")


def candidates():
    """Every candidate name, in the corpus's fixed order."""
    out = []
    for prefix, mod, _, _ in _function_sources():
        out += [f"{prefix}.{n}" for n, _ in _public_functions(mod) if f"{prefix}.{n}" not in EXCLUDE]
    out += [f"nnx.{n}" for n in _nnx_layers()]
    out += [f"linen.{n}" for n in _linen_layers()]
    out += [f"equinox.{n}" for n in _eqx_layers()]
    out += [f"compose.{t}.{u}" for t in TRANSFORMS for u in UNARY]
    out += [f"examples.{n}" for n in EXAMPLES]
    return out


def attempts(name):
    """The programs to try for candidate `name`, in order (a generator: building
    a layer or an example happens only when it is reached)."""
    head, _, rest = name.partition(".")
    if head in ("nnx", "linen", "equinox"):
        from flax import nnx
        if head == "nnx":
            layers = lambda dt: {n: (lambda mk=mk: _nnx_cast(mk(), dt), i)  # noqa: E731
                                 for n, (mk, i) in _nnx_layers().items()}
        else:
            layers = {"linen": _linen_layers, "equinox": _eqx_layers}[head]
        make, inputs = layers(np.float32)[rest]
        fn = make()
        yield Program(name, head, fn, inputs, module=isinstance(fn, nnx.Module),
                      at_dtype=lambda dt: layers(dt)[rest][0]())
        return
    if head == "compose":
        t, u = rest.split(".")
        yield Program(name, "compose", _compose(t, UNARY[u]), [X])
        return
    if head == "examples":
        yield _example(rest)
        return
    prefix, fname = name.rsplit(".", 1)
    for p, mod, patterns, source in _function_sources():
        if p == prefix:
            fn = getattr(mod, fname)
            for sig, inputs, call in patterns:
                yield Program(f"{name}({sig})", source, call(fn) if call else fn, inputs)
            return
    raise KeyError(name)
