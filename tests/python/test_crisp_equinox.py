"""Crisp ops for equinox layers: the nn_layers plugin's binding specs route
equinox.nn.Linear, LayerNorm and RMSNorm to Gemm / MatMul + Add,
LayerNormalization and RMSNormalization (+ Add for equinox's bias).

Equinox layers are called per example, usually under jax.vmap: the spec binds
the primitive on the 1-D example and the primitive's batching rule binds it
again with the batch dim leading, so a vmapped layer is one op. Each: numbers
against JAX through onnxruntime (f32, f64, static and symbolic batch), the op in
the graph, under vmap and jit, crisp on and off give the same numbers, and the
call modes the specs leave out (a `state` argument, "scalar" features, a
multi-axis shape, no weight) run the original.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import pytest

import jaxonnx
from helpers import check, op_types, symbolic_specs
from jaxonnx.testing import expect_graph

SHAPES = [[(3, 6)], [("B", 6)]]
SHAPE_IDS = ["static", "symbolic"]


def wide_inputs(shape, dtype, rng):
    return (rng.standard_normal(size=shape) * 4).astype(dtype)


def randomized(m, seed=1):
    """m with every floating array leaf drawn at random (the defaults are ones
    and zeros, which would hide a swapped weight and bias)."""
    leaves, tree = jax.tree_util.tree_flatten(m)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    new = [jax.random.normal(k, l.shape, l.dtype) if eqx.is_inexact_array(l) else l
           for k, l in zip(keys, leaves)]
    return jax.tree_util.tree_unflatten(tree, new)


def run(model, args):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, dict(zip(names, args)))


def assert_crisp_off_agrees(fn, shape, x64=False):
    dtype = np.float64 if x64 else np.float32
    with jax.enable_x64(x64):
        specs = symbolic_specs([shape], [dtype])
        on = jaxonnx.to_onnx(fn, specs, enable_double_precision=x64)
        off = jaxonnx.to_onnx(fn, specs, enable_double_precision=x64, crisp=False)
    x = wide_inputs(tuple(5 if isinstance(d, str) else d for d in shape), dtype,
                    np.random.default_rng(3))
    tol = 1e-12 if x64 else 1e-5
    for a, b in zip(run(on, [x]), run(off, [x])):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    return on, off


def linear(din=6, dout=4, use_bias=True, dtype=None):
    return eqx.nn.Linear(din, dout, use_bias=use_bias, dtype=dtype, key=jax.random.key(0))


# ------------------------------------------------------------------ Linear

@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("use_bias", [True, False])
def test_vmapped_linear_is_one_gemm(shape, use_bias):
    m = linear(use_bias=use_bias)
    model = check(jax.vmap(m), shape)
    expect_graph(model, ["Gemm"], match="exact", counts={"Gemm": 1})
    bias_inputs = [len(n.input) for n in model.graph.node if n.op_type == "Gemm"]
    assert bias_inputs == [3 if use_bias else 2]


def test_linear_float64():
    with jax.enable_x64(True):
        m = linear(dtype=jnp.float64)
    model = check(jax.vmap(m), [("B", 6)], x64=True)
    expect_graph(model, ["Gemm"], match="exact")


def test_linear_under_jit_and_nested_vmap():
    m = linear()
    model = check(jax.jit(jax.vmap(m)), [("B", 6)])
    expect_graph(model, ["Gemm"], match="exact")
    model = check(jax.vmap(jax.jit(lambda x: m(x))), [("B", 6)])
    expect_graph(model, ["Gemm"], match="exact")
    # Two batch dims: on [B*3, 6] rows (the rows pass), one Gemm.
    model = check(jax.vmap(jax.vmap(m)), [("B", 3, 6)])
    expect_graph(model, ["Reshape -> Gemm -> Reshape"], match="exact")


def test_unbatched_linear_is_matmul_add():
    model = check(linear(), [(6,)])
    expect_graph(model, ["MatMul -> Add"], match="exact")


def test_linear_scalar_features_run_the_original():
    m_in = eqx.nn.Linear("scalar", 3, key=jax.random.key(0))
    check(jax.vmap(m_in), [("B",)])
    m_out = eqx.nn.Linear(4, "scalar", key=jax.random.key(0))
    check(jax.vmap(m_out), [("B", 4)])
    # Without a bias, a 2-D x is weight @ x (a product over x's first axis),
    # not a batch: no spec applies.
    check(linear(6, 4, use_bias=False), [(6, 3)])


def test_mlp_is_gemms():
    m = eqx.nn.MLP(6, 3, width_size=8, depth=2, key=jax.random.key(0))
    model = check(jax.vmap(m), [("B", 6)])
    expect_graph(model, counts={"Gemm": 3}, absent=["MatMul"])


# ------------------------------------------------------------------ norms

@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("use_bias", [True, False])
def test_vmapped_layer_norm_is_layer_normalization(shape, use_bias):
    m = randomized(eqx.nn.LayerNorm(6, use_bias=use_bias, eps=1e-3))
    model = check(jax.vmap(m), shape, make_inputs=wide_inputs)
    expect_graph(model, ["LayerNormalization"], match="exact")
    (node,) = model.graph.node
    assert len(node.input) == (3 if use_bias else 2)
    eps = [a.f for a in node.attribute if a.name == "epsilon"]
    assert np.isclose(eps, [1e-3]).all()


def test_layer_norm_float64_jit_and_opset_18():
    with jax.enable_x64(True):
        m = randomized(eqx.nn.LayerNorm(6, dtype=jnp.float64))
    model = check(jax.jit(jax.vmap(m)), [("B", 6)], x64=True, make_inputs=wide_inputs)
    # float64: of x times a constant, ONNX's epsilon being a float32 (docs/crisp_ops.md).
    expect_graph(model, ["Mul -> LayerNormalization"], match="exact")
    m = randomized(eqx.nn.LayerNorm(6))
    model = check(jax.vmap(jax.jit(lambda x: m(x))), [("B", 6)], make_inputs=wide_inputs, opset=18)
    expect_graph(model, ["LayerNormalization"], match="exact")


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("use_bias", [True, False])
def test_vmapped_rms_norm_is_rms_normalization(shape, use_bias):
    m = randomized(eqx.nn.RMSNorm(6, eps=1e-4, use_bias=use_bias))
    path = ["RMSNormalization -> Add" if use_bias else "RMSNormalization"]
    model = check(jax.vmap(m), shape, make_inputs=wide_inputs)
    expect_graph(model, path, match="exact")
    (rms,) = [n for n in model.graph.node if n.op_type == "RMSNormalization"]
    assert np.isclose([a.f for a in rms.attribute if a.name == "epsilon"], [1e-4]).all()
    model = check(jax.jit(jax.vmap(m)), shape, make_inputs=wide_inputs)
    expect_graph(model, path, match="exact")


def test_rms_norm_float64_and_opset_18():
    with jax.enable_x64(True):
        m = randomized(eqx.nn.RMSNorm(6, dtype=jnp.float64))
    model = check(jax.vmap(m), [("B", 6)], x64=True, make_inputs=wide_inputs)
    expect_graph(model, ["Mul -> RMSNormalization -> Add"], match="exact")  # as LayerNorm
    m = randomized(eqx.nn.RMSNorm(6))
    model = check(jax.vmap(m), [("B", 6)], make_inputs=wide_inputs, opset=18)
    expect_graph(model, absent=["RMSNormalization"])


@pytest.mark.parametrize("make", [
    lambda: eqx.nn.LayerNorm((3, 6)),                # two axes
    lambda: eqx.nn.LayerNorm(6, use_weight=False),   # LayerNormalization needs a scale
    lambda: eqx.nn.RMSNorm(6, use_weight=False),     # RMSNormalization needs a scale
    lambda: eqx.nn.RMSNorm((3, 6)),
], ids=["ln-2d", "ln-no-weight", "rms-no-weight", "rms-2d"])
def test_norm_configurations_no_spec_handles_run_the_original(make):
    m = randomized(make())
    shape = ("B", *m.shape)
    check(jax.vmap(m), [shape], make_inputs=wide_inputs)
    model = jaxonnx.to_onnx(jax.vmap(m), symbolic_specs([shape], [np.float32]), fuse=False)
    expect_graph(model, absent=["LayerNormalization", "RMSNormalization"])


def test_norm_with_state_runs_the_original():
    m = randomized(eqx.nn.LayerNorm(6))
    state = eqx.nn.State(m)

    def fn(x):
        out, s = jax.vmap(m, in_axes=(0, None), out_axes=(0, None))(x, state)
        assert isinstance(s, eqx.nn.State)
        return out

    model = check(fn, [("B", 6)], make_inputs=wide_inputs)
    assert "LayerNormalization" not in op_types(jaxonnx.to_onnx(
        fn, symbolic_specs([("B", 6)], [np.float32]), fuse=False))


# ------------------------------------------------------------------ crisp off

@pytest.mark.parametrize("make,shape", [
    (lambda: linear(), ("B", 6)),
    (lambda: randomized(eqx.nn.LayerNorm(6)), ("B", 6)),
    (lambda: randomized(eqx.nn.RMSNorm(6)), ("B", 6)),
    (lambda: eqx.nn.MLP(6, 3, width_size=8, depth=2, key=jax.random.key(0)), ("B", 6)),
], ids=["linear", "layer_norm", "rms_norm", "mlp"])
@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
def test_crisp_off_gives_the_same_numbers(make, shape, x64):
    with jax.enable_x64(x64):
        m = make()
        if x64:
            m = jax.tree_util.tree_map(
                lambda l: l.astype(jnp.float64) if eqx.is_inexact_array(l) else l, m)
    on, off = assert_crisp_off_agrees(jax.vmap(m), shape, x64)
    crisp = {"Gemm", "LayerNormalization", "RMSNormalization"}
    assert crisp & set(op_types(on))


# ------------------------------------------------------------------ GroupNorm

def group_norm(groups=3, channels=6, **kw):
    return randomized(eqx.nn.GroupNorm(groups, channels, eps=1e-3, **kw))


@pytest.mark.parametrize("shape", [(2, 6, 4, 5), ("B", 6, 4, 5), ("B", 6, 7)],
                         ids=["static", "symbolic", "1-d"])
def test_vmapped_group_norm_is_group_normalization(shape):
    m = group_norm()
    symbolic = isinstance(shape[0], str)
    batches = (0, 1, 7) if symbolic else (1,)  # a batch of 0: see test_crisp.test_group_norm
    for fn in (jax.vmap(m), jax.jit(jax.vmap(m))):
        model = check(fn, [shape], make_inputs=wide_inputs, rtol=1e-4, atol=1e-4,
                      batches=batches)
        nodes = [n for n in all_nodes(model.graph) if n.op_type == "GroupNormalization"]
        (node,) = nodes
        attrs = {a.name: (a.i if a.name == "num_groups" else a.f) for a in node.attribute}
        assert attrs["num_groups"] == 3 and np.isclose(attrs["epsilon"], 1e-3)
        if symbolic:
            assert "If" in op_types(model)
        else:
            expect_graph(model, ["GroupNormalization"], match="exact")


def all_nodes(graph):
    """The nodes of `graph` and of its subgraphs (If branches), depth first."""
    out = []
    for n in graph.node:
        out.append(n)
        for a in n.attribute:
            if a.HasField("g"):
                out += all_nodes(a.g)
    return out


def as_f64(m):
    with jax.enable_x64(True):
        return jax.tree_util.tree_map(
            lambda l: l.astype(jnp.float64) if eqx.is_inexact_array(l) else l, m)


@pytest.mark.parametrize("case", ["opset-18", "f64", "unbatched", "two-batch-dims",
                                  "no-affine"])
def test_group_norm_fallbacks(case):
    # Below opset 21, float64 (no onnxruntime kernel), unbatched, two batch
    # dims: the plugin lowers the reference; without affine parameters no spec
    # applies.
    m, shape, kw = group_norm(), ("B", 6, 4, 5), {}
    fn = jax.vmap(m)
    if case == "opset-18":
        kw = {"opset": 18}
    elif case == "f64":
        fn, kw = jax.vmap(as_f64(m)), {"x64": True}
    elif case == "unbatched":
        fn, shape = m, (6, 4, 5)
    elif case == "two-batch-dims":
        fn, shape = jax.vmap(jax.vmap(m)), ("B", 2, 6, 4, 5)
    else:
        fn = jax.vmap(eqx.nn.GroupNorm(3, 6, channelwise_affine=False))
    model = check(fn, [shape], make_inputs=wide_inputs, rtol=1e-4, atol=1e-4, **kw)
    expect_graph(model, absent=["GroupNormalization"])


def test_group_norm_crisp_off_gives_the_same_numbers():
    on, _ = assert_crisp_off_agrees(jax.vmap(group_norm()), ("B", 6, 4, 5))
    assert "GroupNormalization" in [n.op_type for n in all_nodes(on.graph)]


def test_multihead_attention_projections_are_one_matmul_each():
    # MultiheadAttention itself is not bound (docs/crisp_ops.md says why); its
    # four Linears (no biases by default) are, so each projection is one MatMul
    # on the (B, seq, dim) input (crisp=False: a Transpose/Reshape pair around each).
    m = eqx.nn.MultiheadAttention(2, 8, key=jax.random.key(0))
    fn = jax.vmap(lambda x: m(x, x, x))
    model = check(fn, [("B", 5, 8)], rtol=1e-4, atol=1e-4)
    # the query's 1/sqrt(d) at its projection (onnx_fusion's scale_before_reshape), which
    # onnxruntime folds into the MatMul
    expect_graph(model, ["MatMul -> Div -> Reshape", "Softmax"], counts={"MatMul": 4 + 2},
                 absent=["Attention"])
    on, off = assert_crisp_off_agrees(fn, ("B", 5, 8))
    assert len(on.graph.node) < len(off.graph.node)


def test_conversion_is_deterministic():
    mlp = eqx.nn.MLP(6, 3, width_size=8, depth=2, key=jax.random.key(0))
    norms = [randomized(eqx.nn.LayerNorm(3)), randomized(eqx.nn.RMSNorm(3))]
    fn = jax.vmap(lambda x: norms[1](norms[0](mlp(x))))
    specs = symbolic_specs([("B", 6)], [np.float32])
    first = jaxonnx.to_onnx(fn, specs).SerializeToString()
    assert jaxonnx.to_onnx(fn, specs).SerializeToString() == first
    expect_graph(jaxonnx.to_onnx(fn, specs),
                 ["Gemm -> Relu -> Gemm -> Relu -> Gemm -> LayerNormalization -> "
                  "RMSNormalization -> Add"], match="exact")
