"""The differential check's cases: one or more for every binding spec and every
rewrite rule of the bundled plugins (differential_check.py says what is
compared). Each case names what it must exercise in `covers`; the test suite
fails when a spec or rule of the plugins' metadata is covered by no case.

Inputs are adversarial but finite: rows of one value (zero variance, all-equal
logits, exactly representable so that every formulation of a mean is exact),
large and tiny magnitudes, fully and partially masked attention rows, sizes of
0 and 1, float32 and float64.
"""

from __future__ import annotations

import math

import equinox as eqx
import flax.linen as linen
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from differential_check import F32, F64, Case

SCALES = (1.0, 1e4, 1e-30)
# Not between ~1e-22 and 1e-19: squares there are float32 subnormals, which XLA
# flushes to 0 and onnxruntime keeps (both finite; JAX's the less accurate).
LONG_SCALES = (1e-3, 1e2, 1e8, 1e-25)
NAMESPACES = (("jax.nn", jax.nn), ("flax.nnx", nnx), ("flax.linen", linen))
RULE = {"crisp": False, "fuse": True}  # the rule sees JAX's own decompositions


# ------------------------------------------------------------------ input families

def _pow2(scale):
    return 2.0 ** round(math.log2(scale))


def normal(rng, shapes, dtype, scale):
    return [(rng.standard_normal(s) * scale).astype(dtype) for s in shapes]


def equal_rows(rng, shapes, dtype, scale):
    """normal, but about half the rows (last axis) hold one value each: a small
    integer (0 included) times a power of two near `scale`, exact in every sum."""
    out = []
    for s in shapes:
        x = rng.standard_normal(s) * scale
        if s:
            lead = tuple(s[:-1]) + (1,)
            c = rng.integers(-4, 5, size=lead) * _pow2(scale)
            x = np.where(rng.random(lead) < 0.5, c, x)
        out.append(x.astype(dtype))
    return out


def equal_examples(rng, shapes, dtype, scale):
    """normal, but about half the examples (axis 0) one value throughout."""
    out = []
    for s in shapes:
        x = rng.standard_normal(s) * scale
        if s and s[0]:
            lead = (s[0],) + (1,) * (len(s) - 1)
            c = rng.integers(-4, 5, size=lead) * _pow2(scale)
            x = np.where(rng.random(lead) < 0.5, c, x)
        out.append(x.astype(dtype))
    return out


def zeros(rng, shapes, dtype, scale):
    return [np.zeros(s, dtype) for s in shapes]


def negative(rng, shapes, dtype, scale):
    """Every value below zero (a pad of 0 would win a max)."""
    return [(-(np.abs(rng.standard_normal(s)) + 1) * scale).astype(dtype) for s in shapes]


def offset_rows(rng, shapes, dtype, scale):
    """Rows of mean 10 * scale and deviation `scale`: a two-pass variance stays
    accurate (JAX's fast form would not), so a fused op must too."""
    return [((10 + rng.standard_normal(s)) * scale).astype(dtype) for s in shapes]


ROWS = {"normal": normal, "equal rows": equal_rows}


# ------------------------------------------------------------------ parameters

def _random_params(tree, seed, around_one=()):
    """tree with every float leaf (an array or an abstract one) drawn at random
    (the defaults are ones and zeros, which hide a swapped scale and bias);
    leaves whose path names one of `around_one` are drawn near 1. Other
    abstract leaves become zeros."""
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        if not hasattr(leaf, "dtype"):
            return leaf
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            abstract = isinstance(leaf, jax.ShapeDtypeStruct)
            return jnp.zeros(leaf.shape, leaf.dtype) if abstract else leaf
        x = rng.standard_normal(leaf.shape)
        if any(n in jax.tree_util.keystr(path) for n in around_one):
            x = 1 + 0.5 * x
        return jnp.asarray(x.astype(leaf.dtype))

    return jax.tree_util.tree_map_with_path(draw, tree)


# Modules are built abstractly (eval_shape) and given random weights from
# numpy: running their initializers would compile a dozen XLA programs each
# (an LSTM's orthogonal init alone takes seconds), for weights thrown away.

def nnx_random(factory, seed=1, around_one=("scale",)):
    """The nnx module factory() makes, with random weights."""
    module = nnx.eval_shape(factory)
    nnx.update(module, _random_params(nnx.state(module), seed, around_one))
    return module


def linen_bound(module, x_shape, dtype, seed=1, around_one=("scale",)):
    """fn(x) = module.apply(random params, x)."""
    variables = jax.eval_shape(module.init, jax.random.key(0), jax.ShapeDtypeStruct(x_shape, dtype))
    variables = _random_params(variables, seed, around_one)
    return lambda x: module.apply(variables, x)


def eqx_random(factory, seed=1):
    """The equinox module factory() makes, weights and biases near 1."""
    module = eqx.filter_eval_shape(factory)
    leaves, tree = jax.tree_util.tree_flatten(module)
    rng = np.random.default_rng(seed)
    new = [jnp.asarray((1 + 0.5 * rng.standard_normal(l.shape)).astype(l.dtype))
           if isinstance(l, jax.ShapeDtypeStruct) else l for l in leaves]
    return jax.tree_util.tree_unflatten(tree, new)


def rngs():
    return nnx.Rngs(0)


CASES: list[Case] = []


def case(**kw):
    CASES.append(Case(**kw))


# ------------------------------------------------------------------ activations

# One program for every activation spec (one compile per dtype and size):
# each output is labelled by the spec it exercises.
ACTIVATIONS = [
    ("relu", {}), ("sigmoid", {}), ("gelu", {"approximate": True}), ("elu", {"alpha": 0.7}),
    ("celu", {"alpha": 1.3}), ("selu", {}), ("leaky_relu", {"negative_slope": 0.05}),
    ("hard_sigmoid", {}), ("hard_swish", {}), ("softplus", {}), ("mish", {}),
]
# Absolute, not relative, accuracy near 0 (docs/crisp_ops.md): onnxruntime's
# Sigmoid, ONNX's alpha (exp(x) - 1).
ABSOLUTE_NEAR_0 = ("sigmoid", "elu", "celu", "selu")


def _activations(dtype):
    def fn(x):
        out = {}
        for name, kw in ACTIVATIONS:
            for p, m in NAMESPACES:
                if hasattr(m, name):
                    out[f"{p}.{name}"] = getattr(m, name)(x, **kw)
        for p, m in NAMESPACES:
            out[f"{p}.gelu exact"] = m.gelu(x, approximate=False)
        return out
    return fn


case(name="activations",
     covers=tuple(f"{p}.{n}" for n, _ in ACTIVATIONS for p, m in NAMESPACES if hasattr(m, n)),
     make=_activations, inputs=((("B", 6), None),), families={"normal": normal, "zeros": zeros},
     scales=SCALES, long_scales=LONG_SCALES,
     floor={f"{p}.{n}": 0.05 for n in ABSOLUTE_NEAR_0 for p, _ in NAMESPACES})


def _softmaxes_crisp(dtype):
    def fn(x, one):
        out = {}
        for name in ("softmax", "log_softmax"):
            for p, m in NAMESPACES:
                f = getattr(m, name)
                out[f"{p}.{name} axis=-1"] = f(x, axis=-1)
                out[f"{p}.{name} axis=0"] = f(x.T, axis=0)  # over a static axis: B independent
                out[f"{p}.{name} axis=(1,)"] = f(x, axis=(1,))
                out[f"{p}.{name} size 1"] = f(one, axis=-1)
        return out
    return fn


case(name="softmax, log_softmax",
     covers=tuple(f"{p}.{name}[{tag}]" for name in ("softmax", "log_softmax") for p, _ in NAMESPACES
                  for tag in ("axis=axis - x.ndim * (axis >= 0)", "axis=axis")),
     make=_softmaxes_crisp, inputs=((("B", 7), None), (("B", 1), None)),
     families={"normal": normal, "all-equal logits": equal_rows}, scales=SCALES,
     long_scales=LONG_SCALES)


# ------------------------------------------------------------------ linear layers

def _nnx_linears(dtype):
    bias = (("self.bias is not None", True), ("self.bias is None", False))
    ms = {f"flax.nnx.Linear.__call__[{t}]": nnx_random(
        lambda: nnx.Linear(6, 4, use_bias=b, param_dtype=dtype, rngs=rngs())) for t, b in bias}
    gs = {f"flax.nnx.LinearGeneral.__call__[{t}]": nnx_random(
        lambda: nnx.LinearGeneral(6, (2, 3), use_bias=b, param_dtype=dtype, rngs=rngs()))
        for t, b in bias}

    def fn(x, x3):
        out = {}
        for k, m in {**ms, **gs}.items():
            out[k + " 2-D"] = m(x)
            out[k + " 3-D"] = m(x3)
        return out
    return fn


LINEAR_INPUTS = ((("B", 6), None), ((2, "B", 6), None))

case(name="nnx Linear, LinearGeneral",
     covers=("flax.nnx.Linear.__call__[self.bias is not None]",
             "flax.nnx.Linear.__call__[self.bias is None]",
             "flax.nnx.LinearGeneral.__call__[self.bias is not None]",
             "flax.nnx.LinearGeneral.__call__[self.bias is None]"),
     make=_nnx_linears, inputs=LINEAR_INPUTS, families={"normal": normal}, scales=SCALES,
     long_scales=LONG_SCALES)


def _linen_dense(dtype):
    fs = {}
    for tag, bias in (("self.use_bias", True), ("not self.use_bias", False)):
        fs[f"flax.linen.Dense.__call__[{tag}]"] = linen_bound(
            linen.Dense(4, use_bias=bias, param_dtype=dtype), (1, 6), dtype)

    def fn(x, x3):
        return {f"{k} {r}": f(v) for k, f in fs.items() for r, v in (("2-D", x), ("3-D", x3))}
    return fn


case(name="linen Dense", covers=("flax.linen.Dense.__call__[self.use_bias]",
                                 "flax.linen.Dense.__call__[not self.use_bias]"),
     make=_linen_dense, inputs=LINEAR_INPUTS, families={"normal": normal}, scales=SCALES,
     long_scales=LONG_SCALES)


def _eqx_linear(dtype):
    ms = {f"equinox.nn.Linear.__call__[{t}]": eqx_random(
        lambda: eqx.nn.Linear(6, 4, use_bias=b, dtype=dtype, key=jax.random.key(0)))
        for t, b in (("self.bias is not None", True), ("self.bias is None", False))}

    def fn(x, x3):
        out = {}
        for k, m in ms.items():
            out[k + " vmap"] = jax.vmap(m)(x)
            out[k + " vmap vmap"] = jax.vmap(jax.vmap(m))(x3)
        return out
    return fn


case(name="equinox Linear", covers=("equinox.nn.Linear.__call__[self.bias is not None]",
                                    "equinox.nn.Linear.__call__[self.bias is None]"),
     make=_eqx_linear, inputs=LINEAR_INPUTS, families={"normal": normal}, scales=SCALES,
     long_scales=LONG_SCALES)


# ------------------------------------------------------------------ norms

NORM_FAMILIES = {"normal": normal, "equal rows": equal_rows}


def _nnx_layer_norms(dtype):
    ms = {f"flax.nnx.LayerNorm.__call__[{t}]": nnx_random(
        lambda: nnx.LayerNorm(8, use_bias=b, param_dtype=dtype, epsilon=1e-5, rngs=rngs()))
        for t, b in (("self.bias is not None", True), ("self.bias is None", False))}
    one = nnx_random(lambda: nnx.LayerNorm(1, param_dtype=dtype, rngs=rngs()))

    def fn(x, x1):
        out = {k: m(x) for k, m in ms.items()}
        out["flax.nnx.LayerNorm one feature"] = one(x1)
        return out
    return fn


NORM_INPUTS = ((("B", 8), None), (("B", 1), None))

case(name="nnx LayerNorm", covers=("flax.nnx.LayerNorm.__call__[self.bias is not None]",
                                   "flax.nnx.LayerNorm.__call__[self.bias is None]"),
     make=_nnx_layer_norms, inputs=NORM_INPUTS, families=NORM_FAMILIES, scales=SCALES,
     long_scales=LONG_SCALES)


def _linen_layer_norms(dtype):
    fs = {f"flax.linen.LayerNorm.__call__[{t}]": linen_bound(
        linen.LayerNorm(use_bias=b, param_dtype=dtype, epsilon=1e-5), (1, 8), dtype)
        for t, b in (("self.use_bias", True), ("not self.use_bias", False))}
    return lambda x: {k: f(x) for k, f in fs.items()}


case(name="linen LayerNorm", covers=("flax.linen.LayerNorm.__call__[self.use_bias]",
                                     "flax.linen.LayerNorm.__call__[not self.use_bias]"),
     make=_linen_layer_norms, inputs=((("B", 8), None),), families=NORM_FAMILIES,
     scales=SCALES, long_scales=LONG_SCALES)


def _eqx_norms(cls):
    def make(dtype):
        ms = {f"equinox.nn.{cls}.__call__[{t}]": eqx_random(
            lambda: getattr(eqx.nn, cls)(8, use_bias=b, dtype=dtype))
            for t, b in (("self.use_bias", True), ("not self.use_bias", False))}
        one = eqx_random(lambda: getattr(eqx.nn, cls)(1, dtype=dtype))

        def fn(x, x1):
            out = {k: jax.vmap(m)(x) for k, m in ms.items()}
            out[f"equinox.nn.{cls} one feature"] = jax.vmap(one)(x1)
            return out
        return fn
    return make


for _cls in ("LayerNorm", "RMSNorm"):
    case(name=f"equinox {_cls}", covers=(f"equinox.nn.{_cls}.__call__[self.use_bias]",
                                         f"equinox.nn.{_cls}.__call__[not self.use_bias]"),
         make=_eqx_norms(_cls), inputs=NORM_INPUTS, families=NORM_FAMILIES, scales=SCALES,
         long_scales=LONG_SCALES)


def _nnx_rms_norm(dtype):
    m = nnx_random(lambda: nnx.RMSNorm(8, param_dtype=dtype, epsilon=1e-5, rngs=rngs()))
    one = nnx_random(lambda: nnx.RMSNorm(1, param_dtype=dtype, rngs=rngs()))
    return lambda x, x1: {"flax.nnx.RMSNorm.__call__": m(x),
                          "flax.nnx.RMSNorm one feature": one(x1)}


case(name="nnx RMSNorm", covers=("flax.nnx.RMSNorm.__call__",), make=_nnx_rms_norm,
     inputs=NORM_INPUTS, families={**NORM_FAMILIES, "zeros": zeros}, scales=SCALES,
     long_scales=LONG_SCALES)


def _nnx_batch_norm(dtype):
    m = nnx_random(lambda: nnx.BatchNorm(4, use_running_average=True, param_dtype=dtype,
                                         rngs=rngs()))
    rng = np.random.default_rng(2)
    m.mean.value = jnp.asarray(rng.standard_normal(4).astype(dtype))
    # A channel of zero running variance: (x - mean) / sqrt(eps).
    m.var.value = jnp.asarray(np.array([0.0, 0.5, 2.0, 1e-3], dtype))
    return lambda x, x4: {"flax.nnx.BatchNorm.__call__ 2-D": m(x),
                          "flax.nnx.BatchNorm.__call__ 4-D": m(x4)}


case(name="nnx BatchNorm", covers=("flax.nnx.BatchNorm.__call__",), make=_nnx_batch_norm,
     inputs=((("B", 4), None), (("B", 3, 2, 4), None)),
     families={"normal": normal, "equal examples": equal_examples}, scales=SCALES,
     long_scales=LONG_SCALES)


def _linen_batch_norm(dtype):
    # force_float32_reductions=False: statistics of the params' dtype, as the op
    # needs (linen's default keeps them float32, and a float64 x then runs the
    # original, whose float32 rsqrt XLA and onnxruntime round apart).
    bn = linen.BatchNorm(use_running_average=True, param_dtype=dtype, epsilon=1e-5,
                         force_float32_reductions=False)
    f2 = linen_bound(bn, (1, 4), dtype, seed=2, around_one=("scale", "var"))
    f4 = linen_bound(bn, (1, 3, 2, 4), dtype, seed=3, around_one=("scale", "var"))
    return lambda x, x4: {"flax.linen.BatchNorm.__call__ 2-D": f2(x),
                          "flax.linen.BatchNorm.__call__ 4-D": f4(x4)}


case(name="linen BatchNorm", covers=("flax.linen.BatchNorm.__call__",), make=_linen_batch_norm,
     inputs=((("B", 4), None), (("B", 3, 2, 4), None)),
     families={"normal": normal, "equal examples": equal_examples}, scales=SCALES,
     long_scales=LONG_SCALES)


def _group_norms(dtype):
    m = nnx_random(lambda: nnx.GroupNorm(8, num_groups=4, param_dtype=dtype, epsilon=1e-5,
                                         rngs=rngs()))
    e = eqx_random(lambda: eqx.nn.GroupNorm(4, 8, dtype=dtype))
    return lambda x, xc: {"flax.nnx.GroupNorm.__call__": m(x),
                          "equinox.nn.GroupNorm.__call__": jax.vmap(e)(xc)}


# GroupNormalization is float32 only in onnxruntime: float64 lowers the reference.
case(name="GroupNorm", covers=("flax.nnx.GroupNorm.__call__", "equinox.nn.GroupNorm.__call__"),
     make=_group_norms, inputs=((("B", 3, 2, 8), None), (("B", 8, 3, 2), None)),
     families={"normal": normal, "equal examples": equal_examples}, scales=SCALES,
     long_scales=LONG_SCALES)


# ------------------------------------------------------------------ pools

POOLS = [("VALID", (2, 2), None), ("SAME", (3, 3), (2, 2)), (((1, 1), (0, 2)), (2, 3), (1, 2))]


def _pools(kind):
    def make(dtype):
        def fn(x):
            out = {}
            for p, m in (("flax.nnx", nnx), ("flax.linen", linen)):
                f = getattr(m, kind)
                for i, (padding, window, strides) in enumerate(POOLS):
                    out[f"{p}.{kind} {i}"] = f(x, window, strides=strides, padding=padding)
                    if kind == "avg_pool" and padding != "VALID":
                        out[f"{p}.{kind} {i} no pad count"] = f(
                            x, window, strides=strides, padding=padding, count_include_pad=False)
            return out
        return fn
    return make


for _kind in ("max_pool", "avg_pool"):
    case(name=_kind, covers=(f"flax.nnx.{_kind}", f"flax.linen.{_kind}"), make=_pools(_kind),
         inputs=((("B", 5, 6, 3), None),),
         families={"normal": normal, "negative": negative}, scales=SCALES,
         long_scales=LONG_SCALES)


# flax's generic pool with a max window: what max_pool reached through a
# reference stored before the conversion (not the patched attribute) calls.
def _pool_max(dtype):
    from flax.linen import pooling

    def fn(x):
        return {f"flax.linen.pooling.pool max {i}": pooling.pool(x, -jnp.inf, jax.lax.max, w, s, p)
                for i, (p, w, s) in enumerate(POOLS)}
    return fn


case(name="pool (max)", covers=("flax.linen.pooling.pool",), make=_pool_max,
     inputs=((("B", 5, 6, 3), None),), families={"normal": normal, "negative": negative},
     scales=SCALES, long_scales=LONG_SCALES)


# ------------------------------------------------------------------ embed, LSTM

def _embed(dtype):
    m = nnx_random(lambda: nnx.Embed(10, 4, dtype=dtype, param_dtype=dtype, rngs=rngs()))
    return lambda i: {"flax.nnx.Embed.__call__": m(i)}


def in_range(rng, shapes, dtype, scale):
    """Indices in [-10, 10): both ends and negative ones (read from the end)."""
    (s,) = shapes
    i = rng.integers(-10, 10, size=s)
    if i.size >= 2:
        i.flat[0], i.flat[-1] = -10, 9
    return [i.astype(np.int32)]


case(name="nnx Embed", covers=("flax.nnx.Embed.__call__",), make=_embed,
     inputs=((("B", 5), np.int32),), families={"in range": in_range})


def _lstm(dtype):
    cells = {"flax.nnx.LSTMCell.__call__": nnx_random(
                 lambda: nnx.LSTMCell(3, 4, param_dtype=dtype, rngs=rngs()), around_one=()),
             "flax.nnx.OptimizedLSTMCell.__call__": nnx_random(
                 lambda: nnx.OptimizedLSTMCell(3, 4, param_dtype=dtype, rngs=rngs()),
                 around_one=())}
    return lambda c, h, x: {k: m((c, h), x) for k, m in cells.items()}


# The gates are Sigmoids: onnxruntime's float32 one is accurate in the absolute
# sense near 0 (docs/crisp_ops.md); h = o * tanh(c) of a closed gate is ~1e-8.
case(name="nnx LSTM cells", covers=("flax.nnx.LSTMCell.__call__",
                                    "flax.nnx.OptimizedLSTMCell.__call__"),
     make=_lstm, inputs=((("B", 4), None), (("B", 4), None), (("B", 3), None)),
     families={"normal": normal}, scales=(1.0, 1e2, 1e-30), long_scales=LONG_SCALES,
     floor={"flax.nnx": 0.05})


# ------------------------------------------------------------------ attention

def _attention(**kwargs):
    def make(dtype):
        def fn(q, k, v):
            return {"jax.nn.dot_product_attention": jax.nn.dot_product_attention(q, k, v, **kwargs)}
        return fn
    return make


def qkv(rng, shapes, dtype, scale):
    return normal(rng, shapes, dtype, scale)


def equal_logits(rng, shapes, dtype, scale):
    """q = 0: every logit of a row the same, the output the mean of the values."""
    q, k, v = normal(rng, shapes, dtype, scale)
    return [np.zeros_like(q), k, v]


ATT_INPUTS = ((("B", 5, 2, 4), None), (("B", 6, 2, 4), None), (("B", 6, 2, 4), None))
ATT_FAMILIES = {"normal": qkv, "all-equal logits": equal_logits}
ATT_SCALES = (1.0, 10.0, 1e-30)  # logits up to ~1e3

ATT_PLAIN = "jax.nn.dot_product_attention[bias is None; mask is None]"
ATT_BIAS = "jax.nn.dot_product_attention[bias is not None; mask is None]"
ATT_MASK = "jax.nn.dot_product_attention[bias is None; mask is not None; not is_causal]"
ATT_BOTH = "jax.nn.dot_product_attention[bias is not None; mask is not None; not is_causal]"

case(name="attention", covers=(ATT_PLAIN,),
     make=_attention(), inputs=ATT_INPUTS, families=ATT_FAMILIES, dtypes=(F32,),
     scales=ATT_SCALES, long_scales=(1e-3, 3.0, 30.0))
case(name="attention causal, scale", covers=(ATT_PLAIN,),
     make=_attention(is_causal=True, scale=0.3), inputs=ATT_INPUTS, families=ATT_FAMILIES,
     dtypes=(F32,), scales=ATT_SCALES)
case(name="attention causal, more queries than keys",
     covers=(ATT_PLAIN,), make=_attention(is_causal=True),
     inputs=((("B", 6, 2, 4), None), (("B", 4, 2, 4), None), (("B", 4, 2, 4), None)),
     families=ATT_FAMILIES, dtypes=(F32,), scales=ATT_SCALES)
case(name="attention of length 1", covers=(ATT_PLAIN,),
     make=_attention(), inputs=((("B", 1, 2, 4), None), (("B", 1, 2, 4), None),
                                (("B", 1, 2, 4), None)),
     families=ATT_FAMILIES, dtypes=(F32,), scales=ATT_SCALES)
case(name="attention, symbolic lengths", covers=(ATT_PLAIN,),
     make=_attention(), inputs=(((2, "T", 2, 4), None), ((2, "T", 2, 4), None),
                                ((2, "T", 2, 4), None)),
     families=ATT_FAMILIES, dtypes=(F32,), scales=ATT_SCALES, independent=False)


def _masked(is_causal=False):
    def make(dtype):
        def fn(q, k, v, mask):
            return {"jax.nn.dot_product_attention": jax.nn.dot_product_attention(
                q, k, v, mask=mask, is_causal=is_causal)}
        return fn
    return make


def masks(rows):
    """q, k, v and a boolean mask (B, 1, 5, 6): `rows` says which query rows
    are fully masked (all False), partly masked, or open."""
    def gen(rng, shapes, dtype, scale):
        q, k, v = normal(rng, shapes[:3], dtype, scale)
        m = rng.random(shapes[3]) < 0.5
        if m.size:
            m[..., 0, :] = False            # fully masked
            m[..., 1, :] = True             # open
            m[..., 2, :] = False
            m[..., 2, -1] = True            # one key: the last (padding after it)
            if rows == "padding":           # key padding: the last two keys masked everywhere
                m[..., 3:, :] = True
                m[..., -2:] = False
        return [q, k, v, m]
    return gen


MASK_INPUTS = ATT_INPUTS + ((("B", 1, 5, 6), np.bool_),)

case(name="attention, boolean mask", covers=(ATT_MASK,),
     make=_masked(), inputs=MASK_INPUTS,
     families={"masked rows": masks("rows"), "key padding": masks("padding")},
     dtypes=(F32,), scales=ATT_SCALES)
# Causal + padding: the spec leaves is_causal with a mask to the reference lowering.
case(name="attention, causal and padding mask", covers=(), make=_masked(is_causal=True),
     inputs=MASK_INPUTS, families={"key padding": masks("padding")}, dtypes=(F32,),
     scales=ATT_SCALES)


def _additive(dtype):
    def fn(q, k, v, mask):
        bias = jnp.where(mask, 0.0, jnp.finfo(q.dtype).min).astype(q.dtype)
        return {"additive mask": jax.nn.dot_product_attention(q, k, v, bias=bias)}
    return fn


def _bias_and_mask(dtype):
    def fn(q, k, v, mask):
        bias = jnp.where(mask, 0.5, -2.0).astype(q.dtype)  # a relative-position-like bias
        return {"bias and mask": jax.nn.dot_product_attention(q, k, v, bias=bias, mask=mask)}
    return fn


# An additive mask (bias, finfo.min where masked) and a bias beside a boolean mask.
case(name="attention, additive mask", covers=(ATT_BIAS,), make=_additive, inputs=MASK_INPUTS,
     families={"masked rows": masks("rows")}, dtypes=(F32,), scales=ATT_SCALES)
case(name="attention, bias and mask", covers=(ATT_BOTH,), make=_bias_and_mask, inputs=MASK_INPUTS,
     families={"masked rows": masks("rows")}, dtypes=(F32,), scales=ATT_SCALES)


# ------------------------------------------------------------------ rewrite rules
# Programs in jnp (or jax.nn with crisp=False) whose lowering the rules fuse.

def _rule(name, covers, make, inputs, families=None, **kw):
    kw.setdefault("scales", SCALES)
    kw.setdefault("long_scales", LONG_SCALES)
    case(name=f"rule {name}", covers=tuple(covers), make=make, inputs=inputs,
         families=families or ROWS, fused=RULE, **kw)


def _gemm(dtype):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((6, 4)).astype(dtype)
    biases = {"(4,)": rng.standard_normal(4), "(1, 4)": rng.standard_normal((1, 4)),
              "()": np.float64(0.7), "(8, 1)": rng.standard_normal((8, 1)),
              "(8, 4)": rng.standard_normal((8, 4))}
    biases = {k: np.asarray(b, dtype) for k, b in biases.items()}

    def fn(x, x8):
        # A product per sum (one read by several Adds does not fuse).
        out = {f"bias {k}": x8 @ (w * (i + 1)) + b for i, (k, b) in enumerate(biases.items())}
        out["symbolic batch"] = x @ w + biases["(4,)"]
        out["bias first"] = biases["(1, 4)"] + x @ (w * 0.5)
        return out
    return fn


_rule("matmul_add_to_gemm", ["matmul_add_to_gemm"], _gemm,
      ((("B", 6), None), ((8, 6), None)), {"normal": normal})


def _zero_state(dtype):
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((4, 5)) / 2).astype(dtype)
    cell = nnx_random(lambda: nnx.LSTMCell(3, 4, param_dtype=dtype, rngs=rngs()), around_one=())

    def fn(x):  # x: [B, 3]; a recurrent first step from zeros, as a scan's unrolled one
        h0 = jnp.zeros((x.shape[0], 4), x.dtype)
        (c, h), y = cell((h0, h0), x)
        return {"MatMul": h0 @ w, "LSTM cell (Gemm)": y, "carry": c}
    return fn


# With the binding specs on: the LSTM cell's lowering emits the Gemm itself.
# The cell's gates are Sigmoids: accurate near 0 in the absolute sense only
# (docs/crisp_ops.md; float64 at scale 1e4, onnxruntime 0 where JAX 1e-202).
case(name="rule a product of broadcast zeros", covers=("matmul_of_zeros_MatMul", "matmul_of_zeros_Gemm"),
     make=_zero_state, inputs=((("B", 3), None),), families={"normal": normal}, scales=SCALES,
     long_scales=LONG_SCALES, floor={"LSTM cell": 0.05, "carry": 0.05})


def _relu(dtype):
    return lambda x: {"maximum(x, 0)": jnp.maximum(x, 0.0), "maximum(0, x)": jnp.maximum(0.0, x),
                      "jax.nn.relu": jax.nn.relu(x)}


def _conv_bias(dtype):
    rng = np.random.default_rng(7)
    w = jnp.asarray(rng.standard_normal((3, 3, 2, 4)), dtype)
    b = jnp.asarray(rng.standard_normal(4), dtype)

    wc = jnp.asarray(rng.standard_normal((4, 2, 3, 3)), dtype)

    def fn(x):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        # Channels first (equinox's Conv2d): the (C, 1, 1) bias right after the Conv.
        yc = jax.lax.conv_general_dilated(x.transpose(0, 3, 1, 2), wc, (1, 1), "SAME")
        return {"conv + per-channel bias": y + b,
                "NCHW conv + (C, 1, 1) bias": yc + b[:, None, None]}
    return fn


_rule("conv_bias", ["conv_bias"], _conv_bias, ((("B", 5, 4, 2), None),), {"normal": normal},
      dtypes=(F32,))


def _batch_norm_affine(dtype):
    rng = np.random.default_rng(9)
    w = jnp.asarray(rng.standard_normal((3, 3, 2, 4)), dtype)
    mean, scale, bias = (jnp.asarray(rng.standard_normal(4), dtype) for _ in range(3))
    var = jnp.asarray(np.array([0.0, 0.5, 2.0, 1e-3]), dtype)  # a channel of zero variance

    def bn(x):
        return (x - mean) * (jax.lax.rsqrt(var + 1e-5) * scale) + bias

    def fn(x, x2):
        out = {"2-D hand-written batch norm": bn(x2), "bias first": bias + (x2 - mean) * scale}
        # float64 Convs are not ONNX Convs (onnxruntime has float32 only): nothing to fuse.
        if dtype == np.float32:
            y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"))
            out["conv, hand-written batch norm"] = bn(y)
        return out
    return fn


_rule("batch_norm_affine", ["batch_norm_affine"], _batch_norm_affine,
      ((("B", 5, 4, 2), None), (("B", 4), None)), {"normal": normal})


def _transposed_elementwise(dtype):
    rng = np.random.default_rng(8)
    w1 = jnp.asarray(rng.standard_normal((3, 3, 2, 4)), dtype)
    w2 = jnp.asarray(rng.standard_normal((1, 1, 4, 3)), dtype)

    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def fn(x):
        # SiLU reads the transposed value twice; tanh(h) * h + 0.5 likewise.
        h, g = conv(x, w1), conv(x, 2 * w1)
        return {"conv, silu, conv": conv(jax.nn.silu(h), w2),
                "conv, tanh(h) * h + 0.5, conv": conv(jnp.tanh(g) * g + 0.5, w2)}
    return fn


# The rule is exact: the fused model gives the plain one's bits. Against JAX,
# SiLU's Sigmoid is 0 below -18 (docs/crisp_ops.md), which the second Conv
# sums into rows of SiLU's near-0 outputs, and such rows cancel: the Conv's
# rounding is bounded by the inputs' scale (0.02-0.04 of it at 1e2-1e8), not
# by the row's own magnitude. Both models alike, every seed.
_rule("transpose_through_elementwise", ["transpose_through_elementwise"], _transposed_elementwise,
      ((("B", 5, 4, 2), None),), {"normal": normal}, dtypes=(F32,), identical=True,
      floor={"": 1.0}, floor_per_scale={"": 0.1})


_rule("max0_to_relu", ["max0_to_relu"], _relu, ((("B", 6), None),),
      {"normal": normal, "zeros": zeros})


def _softmaxes(dtype):
    def jnp_softmax(x, axis):
        e = jnp.exp(x - x.max(axis, keepdims=True))
        return e / e.sum(axis, keepdims=True)

    def jnp_log_softmax(x, axis):
        s = x - x.max(axis, keepdims=True)
        return s - jnp.log(jnp.exp(s).sum(axis, keepdims=True))

    def fn(x, one):
        # Each on its own input (exactly scaled): ones sharing x - max(x) do not fuse.
        return {"jax.nn.softmax": jax.nn.softmax(x),
                "jax.nn.softmax axis 0": jax.nn.softmax(4 * x.T, 0),
                "jnp softmax": jnp_softmax(2 * x, -1), "softmax size 1": jax.nn.softmax(one),
                "jax.nn.log_softmax": jax.nn.log_softmax(-x),
                "jnp log_softmax": jnp_log_softmax(0.5 * x, -1),
                "log_softmax size 1": jax.nn.log_softmax(-one)}
    return fn


_rule("softmax, log_softmax", ["softmax", "log_softmax"], _softmaxes,
      ((("B", 7), None), (("B", 1), None)), {"normal": normal, "all-equal logits": equal_rows})


def _einsum_attention(dtype):
    def fn(q, k, v):
        s = jnp.einsum("bqhd,bkhd->bqkh", q, k) * 0.5
        out = {"softmax": jnp.einsum("bqkh,bkhd->bqhd", jax.nn.softmax(s, axis=2), v)}
        # Its own scores (shared ones do not fuse), scaled by a power of two: see
        # "float64 MatMul times a constant" below for other scales.
        s = jnp.einsum("bqhd,bkhd->bqkh", -q, k) / 4.0
        out["log_softmax"] = jnp.einsum("bqkh,bkhd->bqhd", jax.nn.log_softmax(s, axis=2), v)
        return out
    return fn


_rule("transposes below softmax", ["transpose_below_Softmax", "transpose_below_LogSoftmax"],
      _einsum_attention, ATT_INPUTS, {"normal": qkv, "all-equal logits": equal_logits},
      scales=ATT_SCALES, long_scales=(1e-3, 3.0, 30.0))


def _layer_norms(dtype):
    scale = np.random.default_rng(4).standard_normal(8).astype(dtype)
    bias = np.random.default_rng(5).standard_normal(8).astype(dtype)

    def two_pass(x):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5)

    def fn(x, x1):
        return {
            "divide, times constants": two_pass(x) * 2.0 + 0.5,
            "times a scale vector plus a bias vector": two_pass(-x) * scale + bias,
            "rsqrt": (x - x.mean(-1, keepdims=True))
                     * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-5),
            "one feature": two_pass(x1) * 3.0,
            "rms": x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-5) * scale,
        }
    return fn


_rule("jnp normalizations", ["normalization_Mul", "normalization_Div", "normalization_bias",
                             "normalization_scale"],
      _layer_norms, ((("B", 8), None), (("B", 1), None)),
      {**ROWS, "zeros": zeros, "offset rows": offset_rows})


def _flax_norms_decomposed(dtype):
    # dtype set: the binding specs step aside, JAX's decomposition is lowered and fused.
    ln = nnx_random(lambda: nnx.LayerNorm(8, dtype=dtype, param_dtype=dtype, rngs=rngs()))
    rms = nnx_random(lambda: nnx.RMSNorm(8, dtype=dtype, param_dtype=dtype, rngs=rngs()))
    lin = linen_bound(linen.LayerNorm(dtype=dtype, param_dtype=dtype), (1, 8), dtype)
    eln = eqx_random(lambda: eqx.nn.LayerNorm(8, dtype=dtype))
    return lambda x: {"nnx LayerNorm": ln(x), "nnx RMSNorm": rms(x), "linen LayerNorm": lin(x),
                      "equinox LayerNorm": jax.vmap(eln)(x)}


_rule("flax, equinox normalizations", ["normalization_Mul", "normalization_bias"],
      _flax_norms_decomposed, ((("B", 8), None),), {**ROWS, "zeros": zeros})


def _gelus(dtype):
    return lambda x: {"jax.nn.gelu tanh": jax.nn.gelu(x, approximate=True),
                      "erf form": 0.5 * x * (1 + jax.lax.erf(x / np.sqrt(2).astype(dtype)))}


_rule("gelu", ["gelu"], _gelus, ((("B", 6), None),), {"normal": normal, "zeros": zeros})


def _swish(dtype):
    return lambda x: {"x * sigmoid(x)": x * jax.nn.sigmoid(x), "jax.nn.silu": jax.nn.silu(-x)}


_rule("swish", ["swish"], _swish, ((("B", 6), None),), {"normal": normal, "zeros": zeros},
      opset=24, floor={"": 0.5})  # Swish: x * Sigmoid(x), absolute accuracy near 0 (|x| 5e-8)


def _scalar_helpers(dtype):
    @jax.jit
    def helper(x, k, n):
        out = {"add": x * (k + 1.0), "sub": x * (k - 0.5), "mul": x * (k * 3.0),
               "div": x * (k / 4.0), "cast": x * n.astype(x.dtype)}
        for name, cond in (("greater", k > 1.0), ("less", k < 1.0), ("greater_equal", k >= 2.0),
                           ("less_equal", k <= 1.0)):
            out[name] = jnp.where(cond, x, -x) * 2  # a Where writing an output stays
        return out
    return lambda x: helper(x, 2.0, 3)


# (The one-element constants fold in the core's constant folding; the rule
# left is the Where they make constant.)
_rule("constants of a jitted helper", ["where_constant_condition"],
      _scalar_helpers, ((("B", 6), None),), {"normal": normal}, identical=True)


def _variance(dtype):
    return lambda x: {"var ddof 1": jnp.var(x, axis=-1, ddof=1), "std": jnp.std(x, axis=-1)}


_rule("jnp.var", [], _variance, ((("B", 8), None),))


def _expands(dtype):
    mask = np.tril(np.ones((5, 5), bool))

    def fn(s, y):
        b = jnp.broadcast_to(y, s.shape)
        d = jnp.broadcast_to(jnp.abs(y) + 1, s.shape)
        return {"where": jnp.where(mask, s, -1e9), "add": s + b, "sub": s - b, "mul": s * b,
                "div": s / d}
    return fn


_rule("broadcasts", ["expand_into_broadcast_" + op for op in ("Where", "Add", "Sub", "Mul", "Div")],
      _expands, ((("B", 5, 5), None), ((1, 5), None)), {"normal": normal}, identical=True)



def _scaled_matmul(dtype):
    w = np.random.default_rng(6).standard_normal((6, 4)).astype(dtype)
    return lambda x: {"x @ w / 3": (x @ w) / 3.0, "x @ -w * 0.1": (x @ -w) * 0.1,
                      "(x * 0.1) @ w": (x * 0.1) @ w}


# Not a spec nor a rule: onnxruntime's own optimizer, which the check runs at
# every level, found here. The plain model (MatMul, Div) is exact until
# ORT_ENABLE_EXTENDED folds the constant into FusedMatMul's alpha, a float32.
case(name="float64 MatMul times a constant",
     covers=("f64_scale_after_matmul_Div", "f64_scale_after_matmul_Mul", "f64_scale_before_matmul"),
     make=_scaled_matmul,
     inputs=((("B", 6), None),), families={"normal": normal}, dtypes=(F64,),
     known="onnxruntime (ORT_ENABLE_EXTENDED and up) fuses a float64 MatMul and a constant "
           "scale into FusedMatMul, whose alpha is a float32: 1/3 and 0.1 lose 3e-8 relative; "
           "onnx_fusion's f64_scale_* rules guard the fused model, not the fuse=False one")


def _einsum_scales(dtype):
    def fn(q, k):
        # matmul_transposed_result makes these Reshape(MatMul) (the product larger than q and k)
        s = jnp.einsum("bskgd,bktd->bkgst", q, k)
        return {"/ sqrt(3)": s / np.sqrt(3.0).astype(dtype),
                "0.125 *": 0.125 * jnp.einsum("bskgd,bktd->bkgst", q, 2.0 * k)}
    return fn


_rule("scale before a reshape", ["scale_before_reshape_Div", "scale_before_reshape_Mul"], _einsum_scales,
      ((("B", 16, 2, 3, 4), None), (("B", 2, 16, 4), None)), {"normal": normal})


def _masked_softmax(dtype):
    def fn(s, keep):  # a [B, 1, 5, 5] mask over [B, 4, 5, 5] logits; row 0 masked whole
        mask = (keep > 0) & (jnp.arange(5)[:, None] > 0)
        return {"finfo.min": jax.nn.softmax(jnp.where(mask, s, jnp.finfo(s.dtype).min), axis=-1),
                "fill first": jnp.where(~mask, jnp.finfo(s.dtype).min, s)}
    return fn


_rule("additive mask", ["where_fill_to_add"], _masked_softmax,
      ((("B", 4, 5, 5), None), (("B", 1, 5, 5), None)), {"normal": normal})


# ------------------------------------------------------------------ quantized weights
# plugins/quantization: int8/int4 weights dequantized in the program (`w_q.astype(f32) *
# scale`, then a dot). DequantizeLinear is made where the target runs it well
# (portable); onnxruntime-contrib takes int4 into MatMulNBits.

def _quantized(w, bits, block=None):
    """w [K, N] -> (w_q int8/int4 [K, N], scale [1, N] or [K / block, 1, N]), symmetric."""
    qmax = 2 ** (bits - 1) - 1
    kn = w.reshape(-1, block, w.shape[1]) if block else w[None]
    scale = np.abs(kn).max(axis=1, keepdims=True) / qmax
    q = np.clip(np.round(kn / scale), -qmax, qmax).reshape(w.shape)
    return jnp.asarray(q, jnp.int8 if bits == 8 else jnp.int4), jnp.asarray(scale if block else scale[0], jnp.float32)


_W = np.random.default_rng(3).standard_normal((32, 16)).astype(np.float32)


def _dequantized_dots(dtype):
    q8, s8 = _quantized(_W, 8)
    q4, s4 = _quantized(_W, 4, 16)
    kernel, kscale = q8.reshape(32, 4, 4), s8.reshape(1, 4, 4)  # an einsum kernel [in, heads, head]

    def fn(x):
        x = x.astype(jnp.float32)
        f = jnp.float32
        out = {
            "per axis": x @ (q8.astype(f) * s8),
            "blocked": x @ (q4.reshape(2, 16, 16).astype(f) * s4).reshape(32, 16),
            "stored [out, in]": x @ (q8.T.astype(f) * s8.T).T,
            "reshaped kernel": x @ (kernel.astype(f) * kscale).reshape(32, 16),
        }
        return {k: v.astype(dtype) for k, v in out.items()}
    return fn


case(name="dequantized weights (portable, opset 21)",
     covers=("dequantize_per_axis", "dequantize_blocked", "dequantize_reshaped"),
     make=_dequantized_dots, inputs=((("B", 32), None),), families={"normal": normal},
     dtypes=(F32,), scales=SCALES, fused={"crisp": True, "fuse": True, "target": "portable"}, opset=21)


def _int4_dot(dtype):
    q4, s4 = _quantized(_W, 4)
    return lambda x: (x.astype(jnp.float32) @ (q4.astype(jnp.float32) * s4)).astype(dtype)


case(name="int4 weight as MatMulNBits (onnxruntime-contrib)", covers=("matmul_nbits",),
     make=_int4_dot, inputs=((("B", 32), None),), families={"normal": normal},
     dtypes=(F32,), scales=SCALES, fused={"crisp": True, "fuse": True, "target": "onnxruntime-contrib"})
