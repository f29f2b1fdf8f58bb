"""The coverage gate: real jnp / jax.nn programs convert with no missing primitive.

Two checks. Every primitive that issue "lax coverage I" lists is claimed by a bundled plugin.
And a corpus of everyday jnp / jax.nn programs is traced; every primitive appearing in their
jaxprs (sub-jaxprs included) must have a plugin, and each program must convert and match JAX.
When JAX starts emitting a new primitive for one of these programs, this file says which.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxonnx._core as core
from jaxonnx import _plugins

from helpers import check, symbolic_specs

# The lax primitives of "coverage I" (JAX 0.10.2 has no expand_dims primitive:
# jnp.expand_dims emits broadcast_in_dim).
LAX_COVERAGE_I = """
abs acos acosh asin asinh atan atanh cbrt ceil cos cosh erf erfc erf_inv exp exp2 expm1
floor is_finite lgamma digamma log log1p logistic neg round rsqrt sign sin sinh sqrt square
tan tanh not population_count clz real imag conj
add sub mul div rem pow max min atan2 nextafter and or xor shift_left shift_right_arithmetic
shift_right_logical eq ne lt le gt ge integer_pow clamp select_n
convert_element_type bitcast_convert_type reduce_precision
broadcast_in_dim reshape squeeze transpose rev concatenate copy pad slice split iota
reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or reduce_xor argmax argmin
reduce
cumsum cumprod cummax cummin cumlogsumexp
sort top_k approx_top_k
optimization_barrier device_put sharding_constraint empty
""".split()


def bundled():
    return core.Registry([str(_plugins.BUNDLED_PLUGINS)])


def test_every_coverage_i_primitive_has_a_bundled_plugin():
    reg = bundled()
    missing = [p for p in LAX_COVERAGE_I if not reg.has(p)]
    assert missing == [], f"no bundled plugin claims: {missing}"


# ---------------------------------------------------------------- corpus --

def layer_norm(x):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.var(x, axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5)


def attention(x):
    q, k, v = jnp.split(x, 3, axis=-1)
    scores = q @ jnp.swapaxes(k, -1, -2) / jnp.sqrt(q.shape[-1]).astype(x.dtype)
    n = x.shape[-2]
    mask = jnp.tril(jnp.ones((n, n), dtype=bool))
    scores = jnp.where(mask, scores, -jnp.inf)
    return jax.nn.softmax(scores, axis=-1) @ v


def stats(x):
    return (jnp.mean(x, axis=0), jnp.std(x, axis=0), jnp.var(x, axis=-1), jnp.ptp(x, axis=-1),
            jnp.average(x, axis=-1, weights=jnp.arange(1.0, 7.0)))


_rng = np.random.default_rng(0)
_W1, _W2, _W3, _W4 = (_rng.standard_normal(s).astype(np.float32) * 0.5
                      for s in [(6, 4), (4, 3), (3,), (4, 4)])
_K = _rng.standard_normal((3, 3, 2, 3)).astype(np.float32) * 0.5
_EDGES = np.array([-1.5, -0.5, 0.0, 0.5, 2.0], np.float32)


def _conv(x):
    return lax.conv_general_dilated(x, _K, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _max_pool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")


def pca(x):
    """A batch of datasets [B, samples, features]: the top 2 principal axes
    (signs fixed as sklearn's svd_flip does), the projections and the explained variance."""
    xc = x - jnp.mean(x, axis=-2, keepdims=True)
    _, s, vt = jnp.linalg.svd(xc, full_matrices=False)
    big = jnp.take_along_axis(vt, jnp.argmax(jnp.abs(vt), axis=-1, keepdims=True), axis=-1)
    comps = (vt * jnp.sign(big))[..., :2, :]
    return comps, xc @ jnp.swapaxes(comps, -1, -2), s**2 / (x.shape[-2] - 1)


def spectral_filter(x):
    """A low-pass filter (issue 16): rfft, keep the lower half of the band, irfft."""
    spec = jnp.fft.rfft(x, axis=-1)
    mask = (jnp.arange(spec.shape[-1]) < spec.shape[-1] // 2).astype(x.dtype)
    return jnp.fft.irfft(spec * mask, n=x.shape[-1], axis=-1)


def linalg(x):
    gram = x @ jnp.swapaxes(x, -1, -2)
    return (jnp.linalg.norm(x, ord=2, axis=(-2, -1)), jnp.linalg.pinv(x), jnp.linalg.matrix_rank(x),
            jnp.linalg.eigvalsh(gram + 5 * jnp.eye(5)), jnp.linalg.qr(x)[1], jnp.linalg.svd(x, compute_uv=False))


_EXPERTS = _rng.standard_normal((4, 6, 5)).astype(np.float32) * 0.5
_ROUTER = _rng.standard_normal((6, 4)).astype(np.float32)


def moe_layer(x):
    """A top-1 mixture-of-experts layer: route each token, sort tokens by expert,
    one grouped matmul (jax.lax.ragged_dot), then back to token order."""
    tokens = x.reshape(-1, x.shape[-1])
    expert = jnp.argmax(tokens @ _ROUTER, axis=-1)
    order = jnp.argsort(expert, stable=True)
    sizes = jnp.bincount(expert, length=_EXPERTS.shape[0]).astype(jnp.int32)
    out = lax.ragged_dot(tokens[order], _EXPERTS, sizes)
    return jnp.zeros_like(out).at[order].set(out).reshape(*x.shape[:-1], -1)


@jax.jit  # XLA compiles gamma's loops once per shape, not per eager op
def gamma_sampler(x):
    """Gamma draws, one per data element with its own shape parameter, from a fixed key."""
    return jax.random.gamma(jax.random.key(42), jnp.abs(x) + 0.5)


def spline_second_derivatives(y):
    """Natural cubic spline on a unit grid: M'' from the tridiagonal system
    M[i-1] + 4 M[i] + M[i+1] = 6 (y[i-1] - 2 y[i] + y[i+1])."""
    rhs = 6 * (y[..., :-2] - 2 * y[..., 1:-1] + y[..., 2:])
    n = rhs.shape[-1]
    off = jnp.ones_like(rhs)
    m = lax.linalg.tridiagonal_solve(off.at[..., 0].set(0), 4 * off, off.at[..., n - 1].set(0), rhs[..., None])
    return m[..., 0]


# name -> (fn, shapes); shapes use "B" for a symbolic batch; float inputs.
CORPUS = {
    "activations": (lambda x: (jax.nn.relu(x), jax.nn.gelu(x), jax.nn.gelu(x, approximate=False),
                               jax.nn.silu(x), jax.nn.elu(x), jax.nn.selu(x), jax.nn.celu(x),
                               jax.nn.leaky_relu(x), jax.nn.softplus(x), jax.nn.hard_tanh(x),
                               jax.nn.sigmoid(x), jax.nn.log_sigmoid(x), jax.nn.mish(x),
                               jax.nn.hard_swish(x), jax.nn.relu6(x), jax.nn.squareplus(x)),
                    [("B", 6)]),
    "softmaxes": (lambda x: (jax.nn.softmax(x), jax.nn.log_softmax(x, axis=0),
                             jax.nn.logsumexp(x, axis=-1), jax.nn.standardize(x, axis=-1)),
                  [("B", 6)]),
    "layer_norm": (layer_norm, [("B", 4, 8)]),
    "attention": (attention, [("B", 5, 12)]),
    "stats": (stats, [("B", 6)]),
    "rounding": (lambda x: (jnp.round(x), jnp.round(x, 2), jnp.floor(x), jnp.ceil(x),
                            jnp.trunc(x), jnp.rint(x)), [("B", 6)]),
    "arithmetic": (lambda x, y: (jnp.mod(x, y), jnp.remainder(x, y), jnp.fmod(x, y),
                                 jnp.floor_divide(x, y), jnp.power(jnp.abs(x), y),
                                 jnp.hypot(x, y), jnp.arctan2(x, y), jnp.copysign(x, y),
                                 jnp.logaddexp(x, y), jnp.maximum(x, y), jnp.fmin(x, y)),
                   [("B", 6), ("B", 6)]),
    "math": (lambda x: (jnp.sin(x), jnp.cos(x), jnp.tan(x), jnp.arcsinh(x), jnp.cbrt(x),
                        jnp.exp2(x), jnp.expm1(x), jnp.log1p(jnp.abs(x)), jnp.square(x),
                        jnp.sinc(x), jnp.deg2rad(x), jnp.sign(x), jnp.heaviside(x, 0.5),
                        jax.scipy.special.erfc(x), jax.scipy.special.gammaln(jnp.abs(x) + 1)),
             [("B", 6)]),
    "predicates": (lambda x: (jnp.isnan(x), jnp.isfinite(x), jnp.isinf(x), jnp.signbit(x),
                              jnp.nan_to_num(x), jnp.any(x > 1, axis=-1),
                              jnp.all(x > -3, axis=0), jnp.count_nonzero(x > 0, axis=-1)),
                   [("B", 6)]),
    "reductions": (lambda x: (jnp.prod(x, axis=-1), jnp.min(x, axis=0), jnp.argmin(x, axis=-1),
                              jnp.argmax(x, axis=0), jnp.linalg.norm(x, axis=-1),
                              jnp.nanmax(x, axis=-1), jnp.nansum(x, axis=0)), [("B", 6)]),
    "cumulative": (lambda x: (jnp.cumsum(x, axis=-1), jnp.cumprod(x, axis=0),
                              lax.cummax(x, axis=1), jnp.flip(jnp.cumsum(x, axis=-1), -1),
                              lax.cumlogsumexp(x, axis=1, reverse=True)), [("B", 6)]),
    "sorting": (lambda x: (jnp.sort(x, axis=-1), jnp.argsort(x, axis=-1), jnp.sort(x, axis=0),
                           lax.top_k(x, 3)[0], jnp.flip(jnp.sort(x), axis=-1)), [("B", 6)]),
    "shapes": (lambda x: (jnp.concatenate([x, 2 * x], axis=-1), jnp.stack([x, x], axis=1),
                          jnp.pad(x, ((0, 0), (1, 2))), lax.slice_in_dim(x, 1, 5, 2, axis=1), jnp.flip(x, 0),
                          jnp.tile(x, (1, 2)), jnp.roll(x, 2, axis=-1), jnp.triu(x),
                          jnp.expand_dims(x, 1), jnp.moveaxis(x[:, :, None], 0, -1),
                          jnp.repeat(x, 2, axis=-1), jnp.hstack(jnp.split(x, 2, axis=-1)),
                          jnp.ravel(x)), [("B", 6)]),
    "creation": (lambda x: (jnp.arange(6) * x, jnp.linspace(0.0, 1.0, 6) + x,
                            jnp.zeros_like(x), jnp.ones_like(x) * 2, jnp.full_like(x, 3.0),
                            jnp.eye(6) @ x.T, jnp.arange(x.shape[0]),
                            jax.nn.one_hot(jnp.arange(x.shape[0]) % 6, 6) * x), [("B", 6)]),
    "clipping": (lambda x: (jnp.clip(x, -0.5, 0.5), jnp.clip(x, jnp.min(x, 0), 1.0),
                            jnp.where(x > 0, x, 0.1 * x), jnp.select([x < 0, x > 1], [-x, x], 0.0)),
                 [("B", 6)]),
    "pca": (pca, [("B", 20, 5)]),
    "linalg": (linalg, [("B", 5, 4)]),
    "bitwise": (lambda x: ((x.astype(jnp.int32) & 3) | (x.astype(jnp.int32) << 1),
                           jnp.invert(x > 0), lax.population_count(x.astype(jnp.int32)),
                           jnp.logical_xor(x > 0, x < 1)), [("B", 6)]),
    # Gradients (issue 17 section 4): add_any, select_and_scatter_add, scan transposes.
    "grad_mlp": (jax.grad(lambda x: jnp.sum(jax.nn.softmax(jnp.tanh(x @ _W1) @ _W2) * _W3)),
                 [("B", 6)]),
    "grad_cnn_max_pool": (jax.grad(lambda x: jnp.sum(_max_pool(jax.nn.relu(_conv(x))) ** 2)),
                          [("B", 8, 8, 2)]),
    "grad_scan_rnn": (jax.grad(lambda xs: jnp.sum(lax.scan(
        lambda h, x: (jnp.tanh(x @ _W1 + h @ _W4), None), jnp.zeros((xs.shape[1], 4)), xs)[0])),
        [(5, "B", 6)]),
    "jvp_max_pool": (lambda x: jax.jvp(_max_pool, (x,), (jnp.sin(x),)), [("B", 6, 6, 2)]),
    "grad_sort_cumsum_gather": (jax.grad(lambda x: jnp.sum(jnp.sort(x) * jnp.cumsum(x, axis=-1))
                                         + jnp.sum(x[:, jnp.array([0, 3, 3])] ** 2)), [("B", 6)]),
    # Bucketing (issue 16): lt_to / le_to via searchsorted, digitize, interp.
    "bucketize": (lambda x: (jnp.searchsorted(_EDGES, x), jnp.digitize(x, _EDGES),
                             jnp.interp(x, _EDGES, jnp.cumsum(_EDGES))), [("B", 6)]),
    # Issue 16: a MoE layer, a gamma sampler, a spline solve.
    "moe_ragged_dot": (moe_layer, [("B", 3, 6)]),
    "gamma_sampler": (gamma_sampler, [("B", 4)]),
    "spline_tridiagonal_solve": (spline_second_derivatives, [("B", 9)]),
    # Complex numbers and FFTs (issue 16), carried as float[..., 2] inside the model.
    "spectral_filter": (spectral_filter, [("B", 32)]),
    "complex_arithmetic": (lambda x: (jnp.abs(jnp.exp(1j * x) * (x + 2j)), jnp.angle(x - 1j),
                                      jnp.real(jnp.fft.ifft(jnp.fft.fft(x) * jnp.conj(jnp.fft.fft(x))))),
                           [("B", 8)]),
    # Stability of x' = (A - 3 I) x and of x[k+1] = A x[k] (issue: eig): eigvals.
    "stability_eigvals": (lambda a: (jnp.max(jnp.linalg.eigvals(a - 3 * jnp.eye(4)).real, axis=-1),
                                     jnp.max(jnp.abs(jnp.linalg.eigvals(a)), axis=-1)), [("B", 4, 4)]),
    "unstack_platform": (lambda x: (*jnp.unstack(x, axis=-1),
                                    lax.platform_dependent(x, cpu=jnp.sin, default=jnp.cos)),
                         [("B", 3)]),
}


def _subjaxprs(params):
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, jax.extend.core.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, jax.extend.core.Jaxpr):
                yield item


def primitives_of(jaxpr, found=None):
    """Every primitive name in `jaxpr` and its sub-jaxprs."""
    found = set() if found is None else found
    for eqn in jaxpr.eqns:
        found.add(eqn.primitive.name)
        for sub in _subjaxprs(eqn.params):
            primitives_of(sub, found)
    return found


def traced_primitives(fn, shapes):
    specs = symbolic_specs(shapes, [np.float32] * len(shapes))
    return primitives_of(jax.make_jaxpr(fn)(*specs).jaxpr)


def test_corpus_primitives_all_have_a_plugin():
    reg = bundled()
    missing = {}
    for name, (fn, shapes) in sorted(CORPUS.items()):
        for prim in sorted(traced_primitives(fn, shapes)):
            if not reg.has(prim):
                missing.setdefault(prim, []).append(name)
    assert missing == {}, "primitives with no plugin (-> the corpus programs using them): " + \
        ", ".join(f"{p} -> {progs}" for p, progs in sorted(missing.items()))


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_program_converts_and_matches_jax(name):
    fn, shapes = CORPUS[name]
    check(fn, shapes, rtol=1e-4, atol=1e-5)


# Every primitive issue 16 names ("coverage: every JAX primitive ONNX can
# express"): lowered, or claimed to refuse with a reason (pure/io callbacks).
ISSUE_16 = """
add_any zeros_like select_and_scatter_add select_and_gather_add
lt_to le_to eq_to platform_index
complex real imag conj fft
eig schur hessenberg tridiagonal tridiagonal_solve symmetric_product ormqr unstack
unvmap_any unvmap_all unvmap_max select_if_vmap nonbatchable
svd eigh qr geqrf householder_product
igamma igammac polygamma zeta bessel_i0e bessel_i1e regularized_incomplete_beta random_gamma
rng_bit_generator rng_uniform mulhi ragged_dot_general cholesky_update
debug_print debug_callback pure_callback io_callback
cumprod cummax cummin cumlogsumexp conv_general_dilated
""".split()


def test_every_issue_16_primitive_has_a_bundled_plugin():
    reg = bundled()
    missing = [p for p in ISSUE_16 if not reg.has(p)]
    assert missing == [], f"no bundled plugin claims: {missing}"
