"""lax_autodiff plugin: what jax.grad / jax.jvp emit -- add_any, zeros_like,
select_and_scatter_add (VJP of max pooling), select_and_gather_add (its JVP) --
and gradients of whole programs (MLP, CNN with max_pool, scan RNN, sort, cumulative
ops, gathers, loops), each converted and compared with JAX in onnxruntime."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax._src import ad_util
from jax._src.lax import windowed_reductions

from helpers import check, check_harness, op_types
from jaxonnx.testing import Variant
from jaxonnx.testing import check as check_variants

FLOATS = [(np.float32, False), (np.float64, True)]
IDS = ["f32", "f64"]


def weights(shape, seed, dtype):
    return (np.random.default_rng(seed).standard_normal(shape) * 0.5).astype(dtype)


def primitives(fn, *specs):
    jaxpr = jax.make_jaxpr(fn)(*specs)
    found = set()

    def walk(j):
        for e in j.eqns:
            found.add(e.primitive.name)
            for sub in jax.extend.core.jaxprs_in_params(e.params):
                walk(sub)
    walk(jaxpr.jaxpr)
    return found


# ------------------------------------------------------------------- MLP --

def mlp_loss(dtype):
    w1, b1, w2 = weights((6, 16), 0, dtype), weights((16,), 1, dtype), weights((16, 3), 2, dtype)

    def loss(x):
        h = jax.nn.gelu(x @ w1 + b1)
        return jnp.sum(jax.nn.log_softmax(h @ w2) * jnp.arange(3, dtype=dtype))
    return loss


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_grad_mlp(dtype, x64):
    grad = jax.grad(mlp_loss(dtype))
    with jax.enable_x64(x64):
        assert "add_any" in primitives(grad, jax.ShapeDtypeStruct((2, 6), dtype))
    check(grad, [("B", 6)], x64=x64, rtol=1e-4 if not x64 else None)
    check(grad, [(3, 6)], x64=x64, rtol=1e-4 if not x64 else None)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_grad_wrt_params_and_value_and_grad(dtype, x64):
    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2)
    check(jax.value_and_grad(loss, argnums=(0, 1)), [(4, 3), ("B", 4)], x64=x64)


def test_add_any_is_one_add():
    def f(x):
        return jax.grad(lambda y: jnp.sum(y * y + jnp.sin(y)))(x)
    model = check(f, [("B", 5)])
    assert "Add" in op_types(model)


def test_add_any_integer_direct():
    # add_any is bound on ints only by JAX internals; the lowering wraps like add.
    check(lambda x, y: ad_util.add_jaxvals_p.bind(x, y), [("B", 4), ("B", 4)], [np.int32, np.int32])
    check(lambda x, y: ad_util.add_jaxvals_p.bind(x, y), [("B", 4), ("B", 4)], [np.int8, np.int8])


@pytest.mark.parametrize("cdtype,real", [("complex64", "float32"), ("complex128", "float64")], ids=["c64", "c128"])
def test_add_any_complex(cdtype, real):
    # The packed [..., 2] forms add part by part.
    check_variants(lambda x, y: ad_util.add_jaxvals_p.bind(x, y), [(("B", 4), cdtype), (("B", 4), cdtype)],
                   variants=[Variant(real, False), Variant(real, True)])
    # ... and as jax.grad of a complex function sums its cotangents.
    f = jax.grad(lambda z: jnp.real(jnp.sum(z * z + jnp.sin(z))), holomorphic=False)
    check_variants(f, [((3, 4), cdtype)], variants=[Variant(real, False)])


def test_add_any_complex_catalog():
    check_harness("add_any", "dtypes_lhs_complex64_2_rhs_complex64_2_")


# JAX 0.10 keeps zeros_like_p without an abstract eval (it no longer emits it); older
# JAX and third-party code bind a primitive of that name. One with the same name:
zeros_like_p = jax.extend.core.Primitive("zeros_like")
zeros_like_p.def_abstract_eval(lambda x: x)
zeros_like_p.def_impl(lambda x: np.zeros_like(x))


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_zeros_like(dtype, x64):
    check(lambda x: (zeros_like_p.bind(x), x + 1), [("B", 3, 2)], x64=x64)
    check(lambda x: zeros_like_p.bind(x), [(2, 3)], [np.int32])


# ------------------------------------------------------- CNN with max_pool --

def max_pool(x, window, strides, padding):
    if not isinstance(padding, str):
        padding = ((0, 0), *padding, (0, 0))
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, *window, 1), (1, *strides, 1), padding)


def cnn_loss(dtype, window=(2, 2), strides=(2, 2), padding="VALID"):
    k1, k2 = weights((3, 3, 2, 4), 3, dtype), weights((4, 3), 4, dtype)

    def loss(x):
        y = lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = max_pool(jax.nn.relu(y), window, strides, padding)
        return jnp.sum(jnp.mean(y, axis=(1, 2)) @ k2)
    return loss


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_grad_cnn_max_pool(dtype, x64):
    grad = jax.grad(cnn_loss(dtype))
    with jax.enable_x64(x64):
        assert "select_and_scatter_add" in primitives(grad, jax.ShapeDtypeStruct((1, 8, 8, 2), dtype))
    check(grad, [("B", 8, 8, 2)], x64=x64, rtol=1e-4 if not x64 else None, atol=1e-5)


@pytest.mark.parametrize("window,strides,padding", [((3, 3), (2, 2), "SAME"), ((3, 2), (1, 2), "VALID"),
                                                    ((2, 2), (1, 1), ((1, 0), (0, 1)))], ids=str)
def test_grad_max_pool_overlapping_and_padded(window, strides, padding):
    check(jax.grad(cnn_loss(np.float32, window, strides, padding)), [("B", 7, 9, 2)], rtol=1e-4,
          atol=1e-5)


def ties(shape, dtype, rng):
    """Small integers: windows hold equal maxima, the first must get the gradient."""
    return rng.integers(0, 3, size=shape).astype(dtype)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_select_and_scatter_add_ties_pick_the_first(dtype, x64):
    def f(x, s):
        _, vjp = jax.vjp(lambda y: max_pool(y, (3, 3), (2, 2), "SAME"), x)
        return vjp(s)[0]
    check(f, [("B", 6, 7, 2), ("B", 3, 4, 2)], x64=x64, make_inputs=ties)


def _scatter_add_window(select, window, strides, padding):
    return lambda s, x: windowed_reductions._select_and_scatter_add(s, x, select, window, strides, padding)


def _full_range(s, d, rng):
    if d == np.bool_:
        return rng.random(s) < 0.5
    info = np.iinfo(d)
    # A third of the values at the type's extremes, so windows tie on them.
    v = rng.integers(info.min, info.max, size=s, endpoint=True, dtype=np.int64 if info.min < 0 else np.uint64)
    pick = rng.integers(0, 3, size=s)
    return np.where(pick == 0, info.min, np.where(pick == 1, info.max, v)).astype(d)


INT_SCATTER = [  # (select, window, strides, padding) over [B, 6, 5] operands
    (lax.ge_p, (1, 2, 2), (1, 2, 1), ((0, 0), (0, 0), (0, 0))),
    (lax.le_p, (1, 3, 2), (1, 2, 2), ((0, 0), (1, 1), (0, 1))),  # overlapping, padded
    (lax.ge_p, (2, 1, 3), (1, 1, 1), ((0, 0), (1, 0), (1, 1))),
]


def _source_shape(window, strides, padding, operand=("B", 6, 5)):
    out = []
    for n, k, s, (lo, hi) in zip(operand, window, strides, padding):
        out.append(n if isinstance(n, str) and k == 1 and s == 1 else (n + lo + hi - k) // s + 1)
    return tuple(out)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.bool_],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("form", range(len(INT_SCATTER)))
def test_select_and_scatter_add_integers_and_bool(dtype, form):
    # The select compares the operand, ties (at the type's extremes too) pick
    # the first, the source adds in its own type (wrapping; bool: OR).
    select, window, strides, padding = INT_SCATTER[form]
    operand = ("B", 6, 5) if window[0] == 1 and strides[0] == 1 else (3, 6, 5)
    check(_scatter_add_window(select, window, strides, padding),
          [_source_shape(window, strides, padding, operand), operand], [dtype, dtype], make_inputs=_full_range)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64], ids=["int64", "uint64"])
def test_select_and_scatter_add_64bit(dtype):
    # uint64 compares as int64 with its sign bit flipped.
    for select, window, strides, padding in INT_SCATTER[:2]:
        check(_scatter_add_window(select, window, strides, padding),
              [_source_shape(window, strides, padding), ("B", 6, 5)], [dtype, dtype], x64=True,
              make_inputs=_full_range)


@pytest.mark.parametrize("name", [
    "dtypes_shape_uint16_2_4_6_selectprim_ge_windowdimensions_2_2_2_windowstrides_1_1_1_padding_0_0_0_0_0_0_",
    "dtypes_shape_uint32_2_4_6_selectprim_ge_windowdimensions_2_2_2_windowstrides_1_1_1_padding_0_0_0_0_0_0_",
    "dtypes_shape_bool_2_4_6_selectprim_ge_windowdimensions_2_2_2_windowstrides_1_1_1_padding_0_0_0_0_0_0_",
], ids=["uint16", "uint32", "bool"])
def test_select_and_scatter_add_catalog(name):
    check_harness("select_and_scatter_add", name)


def test_grad_min_pool_and_1d():
    def f(x):
        y = lax.reduce_window(x, jnp.inf, lax.min, (1, 3), (1, 2), "SAME")
        return jnp.sum(y * jnp.arange(y.shape[-1], dtype=x.dtype))
    check(jax.grad(f), [("B", 9)], make_inputs=ties)
    check(jax.grad(f), [("B", 9)])


def test_grad_flax_max_pool():
    nn = pytest.importorskip("flax.linen")
    f = jax.grad(lambda x: jnp.sum(nn.max_pool(x, (2, 2), strides=(2, 2), padding="SAME") ** 2))
    check(f, [("B", 5, 5, 3)])


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_jvp_max_pool_select_and_gather_add(dtype, x64):
    def f(x, t):
        return jax.jvp(lambda y: max_pool(y, (3, 3), (2, 2), "SAME"), (x,), (t,))
    with jax.enable_x64(x64):
        spec = jax.ShapeDtypeStruct((1, 6, 7, 2), dtype)
        assert "select_and_gather_add" in primitives(f, spec, spec)
    check(f, [("B", 6, 7, 2), ("B", 6, 7, 2)], x64=x64)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
@pytest.mark.parametrize("select", [lax.ge_p, lax.le_p], ids=["ge", "le"])
def test_select_and_gather_add_base_dilation(dtype, x64, select):
    # Holes between the operand's elements hold -inf/+inf (tangent 0), like padding.
    def f(t, x):
        return windowed_reductions._select_and_gather_add(t, x, select, (2, 3, 2), (1, 2, 1),
                                                          ((0, 0), (1, 0), (0, 2)), (1, 2, 3), (1, 1, 2))
    check(f, [("B", 5, 4), ("B", 5, 4)], [dtype, dtype], x64=x64, make_inputs=ties)
    check(f, [("B", 5, 4), ("B", 5, 4)], [dtype, dtype], x64=x64)


@pytest.mark.parametrize("name", [
    "dilations_shape_float32_4_6_selectprim_le_windowdimensions_2_2_windowstrides_1_1_padding_0_0_0_0_"
    "basedilation_2_3_windowdilation_1_1_",
    "dilations_shape_float32_4_6_selectprim_le_windowdimensions_2_2_windowstrides_1_1_padding_0_0_0_0_"
    "basedilation_2_3_windowdilation_3_2_",
], ids=["base", "base_and_window"])
def test_select_and_gather_add_dilations_catalog(name):
    check_harness("select_and_gather_add", name)


def test_jacfwd_max_pool_1d():
    f = jax.jacfwd(lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (2,), (1,), "VALID"))
    check(f, [(6,)], make_inputs=lambda s, d, rng: rng.permutation(np.arange(6)).astype(d))


# ----------------------------------------------------------- scan RNN --

def rnn_loss(dtype):
    wx, wh = weights((4, 8), 5, dtype), weights((8, 8), 6, dtype)

    def loss(xs):  # xs: [T, B, 4]
        def step(h, x):
            h = jnp.tanh(x @ wx + h @ wh)
            return h, jnp.sum(h, axis=-1)
        h, ys = lax.scan(step, jnp.zeros((xs.shape[1], 8), dtype), xs)
        return jnp.sum(h ** 2) + jnp.sum(ys)
    return loss


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_grad_scan_rnn(dtype, x64):
    check(jax.grad(rnn_loss(dtype)), [(5, "B", 4)], x64=x64, rtol=1e-4 if not x64 else None,
          atol=1e-5)


def test_grad_scan_rnn_wrt_weights():
    def loss(wh, xs):
        def step(h, x):
            return jnp.tanh(x + h @ wh), None
        h, _ = lax.scan(step, jnp.zeros_like(xs[0]), xs)
        return jnp.sum(h)
    check(jax.grad(loss), [(3, 3), (6, "B", 3)], rtol=1e-4, atol=1e-5)


# ------------------------------------------------- grads of other primitives --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_grad_sort_cumulative_gather(dtype, x64):
    def loss(x):
        r = jnp.arange(x.shape[-1], dtype=x.dtype)
        return (jnp.sum(jnp.sort(x, axis=-1) * r) + jnp.sum(jnp.cumsum(x, axis=1) ** 2)
                + jnp.sum(lax.cummax(x, axis=1) * r) + jnp.sum(jnp.cumprod(x, axis=1))
                + jnp.sum(x[:, jnp.array([0, 2, 2, 4])] ** 3) + jnp.sum(jnp.take(x, 1, axis=1)))
    check(jax.grad(loss), [("B", 5)], x64=x64, rtol=1e-4 if not x64 else None, atol=1e-5)


def test_grad_checkpoint_and_custom_vjp():
    @jax.custom_vjp
    def clip_grad(x):
        return x

    clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -0.1, 0.1),))

    def loss(x):
        y = jax.checkpoint(lambda z: jnp.sin(z) * z)(x)
        return jnp.sum(clip_grad(y) ** 2) + jnp.sum(jax.nn.softmax(x) * x)
    check(jax.grad(loss), [("B", 5)])


def test_forward_mode_through_while():
    def f(x):
        return lax.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, jnp.sin(c[1]) * 1.5),
                              (0, x))[1]
    check(jax.jacfwd(f), [(3,)])
    check(lambda x, t: jax.jvp(f, (x,), (t,)), [("B", 3), ("B", 3)])


def test_hessian_vector_product():
    def loss(x):
        return jnp.sum(jnp.tanh(x) ** 2 * jnp.arange(x.shape[-1], dtype=x.dtype))
    hvp = lambda x, v: jax.jvp(jax.grad(loss), (x,), (v,))[1]
    check(hvp, [("B", 4), ("B", 4)])
