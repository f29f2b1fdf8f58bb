"""call plugin: jit, closed_call, call, custom_jvp_call, custom_vjp_call, remat2 are inlined."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import core as jax_core

from helpers import check, op_types

FLOATS = [(np.float32, False), (np.float64, True)]
SHAPES = [(3, 4), ("B", 4)]


def body(x):
    return jnp.exp(x) * 2.0 + x


def nested_jit(x):
    return jax.jit(lambda y: jax.jit(body)(y) - 1.0)(x)


def closed_call(x):
    cj = jax.make_jaxpr(body)(x)
    (out,) = jax_core.closed_call_p.bind(
        x, **jax_core.closed_call_p.get_bind_params({"call_jaxpr": cj}))
    return out


def open_call(x):
    cj = jax.make_jaxpr(body)(x)
    (out,) = jax_core.call_p.bind(x, **jax_core.call_p.get_bind_params({"call_jaxpr": cj.jaxpr}))
    return out


@jax.custom_jvp
def custom_jvp_fn(x):
    return body(x)


custom_jvp_fn.defjvp(lambda primals, tangents: (custom_jvp_fn(primals[0]), tangents[0]))


@jax.custom_vjp
def custom_vjp_fn(x):
    return body(x)


custom_vjp_fn.defvjp(lambda x: (custom_vjp_fn(x), x), lambda res, g: (g,))


def remat(x):
    return jax.checkpoint(body)(x)


CALLS = {
    "jit": (nested_jit, "jit"),
    "closed_call": (closed_call, "closed_call"),
    "call": (open_call, "call"),
    "custom_jvp_call": (custom_jvp_fn, "custom_jvp_call"),
    "custom_vjp_call": (custom_vjp_fn, "custom_vjp_call"),
    "remat2": (remat, "remat2"),
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_call_is_inlined(name, dtype, x64, shape):
    fn, primitive = CALLS[name]
    with jax.enable_x64(x64):
        spec = jax.ShapeDtypeStruct((3, 4), dtype)
        assert primitive in str(jax.make_jaxpr(fn)(spec)), "the test no longer exercises it"
    model = check(fn, [shape], [dtype], x64=x64)
    # Inlined: only the body's ops, no wrapper nodes, no functions.
    assert set(op_types(model)) <= {"Exp", "Mul", "Add", "Sub"}
    assert not model.functions


def test_custom_jvp_with_closed_over_consts():
    # A custom_jvp closing over a traced value: num_consts=1, passed as the leading input.
    def fn(x, w):
        @jax.custom_jvp
        def f(y):
            return jnp.exp(y) * w
        f.defjvp(lambda p, t: (f(p[0]), t[0]))
        return f(x)
    jaxpr = jax.make_jaxpr(fn)(jnp.ones((2,)), jnp.ones((2,)))
    assert "num_consts=1" in str(jaxpr)
    check(fn, [("B", 4), ("B", 4)])


def test_custom_vjp_with_closed_over_consts():
    def fn(x, w):
        @jax.custom_vjp
        def f(y):
            return jnp.exp(y) * w
        f.defvjp(lambda y: (f(y), y), lambda r, g: (g,))
        return f(x)
    check(fn, [("B", 4), ("B", 4)])


def test_jit_multiple_outputs_and_unused_input():
    @jax.jit
    def inner(a, b, unused):
        return a + b, a * b

    check(lambda x, y, z: inner(x, y, z), [("B", 3), ("B", 3), ("B", 3)])


def test_jax_nn_relu_custom_jvp():
    # jax.nn.relu is a custom_jvp around a jit around max(x, 0), which the
    # onnx_fusion plugin's rule turns into Relu once the calls are inlined.
    model = check(jax.nn.relu, [("B", 4)])
    assert op_types(model) == ["Relu"]


@pytest.mark.parametrize("opset", [18, 23])
def test_calls_every_opset(opset):
    check(lambda x: remat(custom_vjp_fn(custom_jvp_fn(nested_jit(x)))), [("B", 4)], opset=opset)


# ------------------------------------------------------------ passthroughs --
# Value-preserving markers: each result is its operand, no node.

from jax import lax  # noqa: E402
from jax._src.lax import lax as lax_internal  # noqa: E402
from jax.ad_checkpoint import checkpoint_name  # noqa: E402

PASSTHROUGHS = {
    "optimization_barrier": lambda x, y: lax.optimization_barrier((x, y)),
    "device_put": lambda x, y: jax.device_put((x, y)),
    "device_put_device": lambda x, y: (jax.device_put(x, jax.devices()[0]), y),
    "sharding_constraint": lambda x, y: (
        lax.with_sharding_constraint(x, jax.sharding.SingleDeviceSharding(jax.devices()[0])), y),
    "sharding_constraint_mesh": lambda x, y: (lax.with_sharding_constraint(
        x, jax.sharding.NamedSharding(
            jax.make_mesh((1,), ("d",), axis_types=(jax.sharding.AxisType.Auto,)),
            jax.sharding.PartitionSpec("d"))), y),
    "tie": lambda x, y: (lax_internal.tie_p.bind(y, x), y),
    "name": lambda x, y: (checkpoint_name(x, "tag"), y),
    # jnp.array(..., device=) is copy + sharding_constraint.
    "sharding_constraint_jnp_array": lambda x, y: (jnp.array(x, device=jax.devices()[0]), y),
}


# f32 on a static shape, f64 on a symbolic batch (keeps the suite fast).
CASES = [(np.float32, False, (3, 4)), (np.float64, True, ("B", 4))]


@pytest.mark.parametrize("dtype,x64,shape", CASES, ids=["f32-static", "f64-B"])
@pytest.mark.parametrize("name", sorted(PASSTHROUGHS))
def test_passthrough_emits_no_node(name, dtype, x64, shape):
    inner = PASSTHROUGHS[name]
    primitive = name.split("_device")[0].split("_mesh")[0].split("_jnp")[0]
    with jax.enable_x64(x64):
        spec = jax.ShapeDtypeStruct((3, 4), dtype)
        assert primitive in str(jax.make_jaxpr(inner)(spec, spec)), "the test no longer exercises it"

    def fn(x, y):
        a, b = inner(x, y)
        return a * b
    model = check(fn, [shape, shape], [dtype, dtype], x64=x64)
    assert op_types(model) == ["Mul"] or name.endswith("jnp_array") and op_types(model) == ["Identity", "Mul"]


def test_optimization_barrier_mixed_dtypes_as_outputs():
    # Results that are graph inputs go through the core's Identity, nothing else.
    model = check(lambda x, i: lax.optimization_barrier((x, i)), [("B", 3), ("B",)],
                  [np.float32, np.int32])
    assert op_types(model) == ["Identity", "Identity"]


@pytest.mark.parametrize("dtype,x64,shape", CASES + [(np.int32, False, ("B", 4)),
                                                     (np.bool_, False, ("B", 4))],
                         ids=["f32-static", "f64-B", "i32-B", "bool-B"])
def test_empty_is_zeros(dtype, x64, shape):
    def fn(x):
        e = lax.empty(x.shape, dtype)
        return e, e.astype(x.dtype) + x
    with jax.enable_x64(x64):
        assert "empty" in str(jax.make_jaxpr(fn)(jax.ShapeDtypeStruct((3, 4), np.float32)))
    model = check(fn, [shape], [np.float32], x64=x64)
    assert "ConstantOfShape" in op_types(model)


def test_empty_bfloat16_and_empty2():
    def fn(x):
        e = lax.empty(x.shape, jnp.bfloat16).astype(jnp.float32)
        z = lax_internal.empty2(np.dtype(np.float32), memory_space=jax_core.MemorySpace.Device)
        return e + x + z
    check(fn, [("B", 4)])


@pytest.mark.parametrize("opset", [18, 23])
def test_passthroughs_every_opset(opset):
    def fn(x):
        a, = lax.optimization_barrier((x,))
        return jax.device_put(a) * 2.0 + lax.empty(x.shape, x.dtype)
    check(fn, [("B", 4)], opset=opset)
