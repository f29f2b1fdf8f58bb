"""Graph-quality items 5, 7, 8 and 9 of issue 23 (model-zoo code), each at B = 1 and a
larger B, float32 and float64 where onnxruntime has the kernels, with the structure
that is the point:

- max_pool reached through a reference stored before the conversion is one MaxPool
  (lax.reduce_window itself keeps the exact Slice + Max form: MaxPool skips NaN);
- linen BatchNorm in inference mode is one BatchNormalization;
- a multi-operand einsum's mask product (a dot_general contracting nothing) is a Mul;
- a 3-D Dense layer is one Gemm on [B*T, X] rows between two Reshapes (the rows pass);
- SiLU between two NHWC convs leaves no Transpose between them; an NCHW Conv's
  (C, 1, 1) bias goes into the Conv.
"""

import functools

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import pytest
from flax import nnx

import jaxonnx

from helpers import check, op_types, symbolic_specs

FLOATS = [(np.float32, False), (np.float64, True)]
IDS = ["f32", "f64"]


# Weights from numpy, modules built abstractly: eager initializers compile an
# XLA program per parameter shape, seconds per test for weights thrown away.

def _conv(x, w):
    return jax.lax.conv_general_dilated(x, jnp.asarray(w, x.dtype), (1, 1), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _weights(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape) / np.sqrt(np.prod(shape[:-1]))


def _filled(tree, seed=0):
    """`tree` (abstract) with its float leaves drawn: statistics and scales in [0.5, 1.5]."""
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        name = jax.tree_util.keystr(path)
        if "var" in name or "scale" in name:
            return jnp.asarray(rng.uniform(0.5, 1.5, leaf.shape), leaf.dtype)
        return jnp.asarray(rng.standard_normal(leaf.shape) * 0.5, leaf.dtype)
    return jax.tree_util.tree_map_with_path(draw, tree)


# A max_pool through a functools.partial made before the conversion (a model zoo
# stores it in the module): not the attribute the binding window patches.
_POOL = functools.partial(nnx.max_pool, window_shape=(2, 2), strides=(2, 2))


def _pool_net(x):
    return _POOL(_conv(x, _weights((3, 3, 3, 4))))


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_max_pool_through_a_stored_partial_is_maxpool(dtype, x64):
    model = check(_pool_net, [("B", 8, 6, 3)], x64=x64, batches=(1, 3))
    ops = op_types(model)  # (a float64 Conv is lowered without ONNX Conv: Slices)
    assert ops.count("MaxPool") == 1 and "Max" not in ops, ops


def test_max_pool_through_a_stored_partial_exact_keeps_slices():
    model = jaxonnx.to_onnx(_pool_net, symbolic_specs([("B", 8, 6, 3)], [np.float32]),
                            crisp="exact")
    assert "MaxPool" not in op_types(model)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_reduce_window_max_keeps_nan(dtype, x64):
    """lax.reduce_window itself: Slices + Max, which propagate NaN as JAX does
    (onnxruntime's MaxPool returns 0 for a window [0, NaN, 0, 0] in float32)."""
    def fn(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    model = check(fn, [("B", 4, 4, 2)], x64=x64, batches=(1, 3))
    assert "MaxPool" not in op_types(model)
    x = np.zeros((2, 4, 4, 2), dtype)
    x[0, 0, 1, 0] = x[1, 3, 3, 1] = np.nan
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"in_0": x})[0]
    with jax.enable_x64(x64):
        want = np.asarray(fn(x))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got).sum() == 2


class _LinenConvBN(nn.Module):
    @nn.compact
    def __call__(self, x):
        # force_float32_reductions (linen's default) keeps float32 statistics, which
        # a float64 x does not share: the original then runs.
        bn = functools.partial(nn.BatchNorm, param_dtype=x.dtype,
                               force_float32_reductions=x.dtype == jnp.float32)
        y = nn.Conv(4, (3, 3), use_bias=False, param_dtype=x.dtype)(x)
        y = nn.relu(bn(use_running_average=True)(y))
        return bn()(y, use_running_average=True)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_linen_batch_norm_is_batch_normalization(dtype, x64):
    with jax.enable_x64(x64):
        m = _LinenConvBN()
        variables = _filled(jax.eval_shape(m.init, jax.random.key(0),
                                           jax.ShapeDtypeStruct((1, 5, 5, 2), dtype)))

    def fn(x):
        return m.apply(variables, x)
    model = check(fn, [("B", 5, 5, 2)], x64=x64, batches=(1, 4))
    ops = op_types(model)
    assert ops.count("BatchNormalization") == 2, ops
    assert not {"Sub", "Sqrt", "Reciprocal"} & set(ops), ops


def test_linen_batch_norm_in_training_mode_runs_the_original():
    m = nn.BatchNorm(use_running_average=False)
    variables = _filled(jax.eval_shape(m.init, jax.random.key(0),
                                       jax.ShapeDtypeStruct((2, 4), np.float32)))
    model = jaxonnx.to_onnx(lambda x: m.apply(variables, x, mutable=["batch_stats"])[0],
                            symbolic_specs([("B", 4)], [np.float32]))
    assert "BatchNormalization" not in op_types(model)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_ssd_einsum_mask_product_is_a_mul(dtype, x64):
    """Mamba2's four-operand einsum: jnp's path multiplies the decay mask into the
    C.B product with a dot_general that contracts nothing: a Mul, not a MatMul of
    (1, 1) matrices (23x faster at B=8; ONNX Einsum is 10x slower still)."""
    eq = "bclhn,bcshn,bhcls,bcshp->bclhp"
    shapes = [("B", 2, 4, 3, 5), ("B", 2, 4, 3, 5), ("B", 3, 2, 4, 4), ("B", 2, 4, 3, 6)]
    model = check(lambda *xs: jnp.einsum(eq, *xs), shapes, x64=x64, batches=(1, 3))
    ops = op_types(model)
    assert ops.count("MatMul") == 2 and ops.count("Mul") == 1 and "Einsum" not in ops, ops
    assert "Unsqueeze" not in ops and "Squeeze" not in ops, ops


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_dense_3d_is_gemm_on_rows(dtype, x64):
    with jax.enable_x64(x64):
        lin = nnx.eval_shape(lambda: nnx.Linear(16, 8, param_dtype=dtype, rngs=nnx.Rngs(0)))
        nnx.update(lin, _filled(nnx.state(lin)))
    model = check(lin, [("B", 5, 16)], x64=x64, batches=(1, 4))
    assert op_types(model) == ["Reshape", "Gemm", "Reshape"]


def test_silu_between_nhwc_convs_leaves_no_transpose_between():
    def fn(x):
        return _conv(nnx.silu(_conv(x, _weights((3, 3, 3, 4)))), _weights((3, 3, 4, 2), 1))
    model = check(fn, [("B", 6, 6, 3)], batches=(1, 3))
    assert op_types(model) == ["Transpose", "Conv", "Sigmoid", "Mul", "Conv", "Transpose"]


def test_equinox_conv_bias_goes_into_the_conv():
    conv = _filled(eqx.filter_eval_shape(
        lambda: eqx.nn.Conv2d(2, 4, 3, padding=1, key=jax.random.key(0))))
    model = check(jax.vmap(conv), [("B", 2, 5, 5)], batches=(1, 3))
    assert op_types(model) == ["Conv"]


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_hand_written_batch_norm_is_batch_normalization(dtype, x64):
    """(x - mean) * rsqrt(var + eps) * scale + bias of constants over the channels:
    after an NHWC conv (float32: onnxruntime's Conv) and on a 2-D x."""
    rng = np.random.default_rng(0)
    mean, scale, bias = (rng.standard_normal(4).astype(dtype) for _ in range(3))
    var = rng.uniform(0.5, 1.5, 4).astype(dtype)

    def bn(x):
        return (x - mean) * (jax.lax.rsqrt(var + 1e-5) * scale) + bias

    model = check(bn, [("B", 4)], x64=x64, batches=(1, 4))
    assert "BatchNormalization" in op_types(model) and "Sub" not in op_types(model)
    if not x64:
        model = check(lambda x: bn(_conv(x, _weights((3, 3, 2, 4)))), [("B", 5, 5, 2)],
                      batches=(1, 4))
        ops = op_types(model)
        # The op reads the Conv's (channels-first) result: onnxruntime folds it into the
        # Conv (its scale, rsqrt(var + eps) * scale, is computed from constants).
        producer = {o: n.op_type for n in model.graph.node for o in n.output}
        bn_node, = [n for n in model.graph.node if n.op_type == "BatchNormalization"]
        assert producer[bn_node.input[0]] == "Conv" and "Sub" not in ops, ops
