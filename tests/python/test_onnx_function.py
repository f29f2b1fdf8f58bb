"""@jaxonnx.onnx_function: blocks kept as FunctionProtos in model.functions."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from flax import nnx

import jaxonnx
from jaxonnx import onnx_function
from helpers import check, symbolic_specs

PRECISIONS = [pytest.param(False, id="f32"), pytest.param(True, id="f64")]
BATCH = [pytest.param(4, id="static"), pytest.param("B", id="symbolic")]


def functions(model):
    return sorted(f.name for f in model.functions)


def calls(graph_or_function, name):
    return [n for n in graph_or_function.node if n.op_type == name and n.domain]


def function(model, name):
    return next(f for f in model.functions if f.name == name)


def run(model, *args):
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), args)})


@onnx_function
class MLPBlock(nnx.Module):
    def __init__(self, din, dout, *, rngs, dtype=jnp.float32):
        self.linear1 = nnx.Linear(din, 2 * dout, rngs=rngs, param_dtype=dtype)
        self.linear2 = nnx.Linear(2 * dout, dout, rngs=rngs, param_dtype=dtype)

    def __call__(self, x):
        return self.linear2(nnx.gelu(self.linear1(x)))


class Twice(nnx.Module):
    def __init__(self, d, *, rngs, dtype=jnp.float32):
        self.block = MLPBlock(d, d, rngs=rngs, dtype=dtype)

    def __call__(self, x):
        return self.block(self.block(x))


@pytest.mark.parametrize("x64", PRECISIONS)
@pytest.mark.parametrize("batch", BATCH)
def test_two_calls_of_one_block_share_one_definition(x64, batch):
    with jax.enable_x64(x64):
        m = Twice(8, rngs=nnx.Rngs(0), dtype=jnp.float64 if x64 else jnp.float32)
        model = check(m, [(batch, 8)], x64=x64)
    assert functions(model) == ["MLPBlock"]
    assert len(calls(model.graph, "MLPBlock")) == 2
    f = model.functions[0]
    assert f.domain == "custom"
    assert {o.domain for o in model.opset_import} == {"", "custom"}
    # The weights live in the body, as Constant nodes (a FunctionProto has no initializers).
    assert any(n.op_type == "Constant" for n in f.node)
    assert not model.graph.initializer


@pytest.mark.parametrize("batch", BATCH)
def test_symbolic_dims_cross_the_boundary(batch):
    model = check(Twice(8, rngs=nnx.Rngs(0)), [(batch, 8)])
    call = calls(model.graph, "MLPBlock")[0]
    info = {v.name: v for v in [*model.graph.value_info, *model.graph.output]}
    dims = info[call.output[0]].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == [batch, 8]
    f = model.functions[0]
    inputs = {v.name: v for v in f.value_info}
    first = inputs[f.input[0]].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in first] == [batch, 8]


@onnx_function
def halves(y):
    # Needs B, but its input's dim is 2*B: B's source tensor becomes an extra input.
    return jnp.zeros((y.shape[0] // 2, 4), y.dtype) + y[::2] * y[1::2]


@onnx_function
def calls_halves(y):
    return halves(y) + 1


@pytest.mark.parametrize("x64", PRECISIONS)
def test_a_symbol_the_body_needs_comes_from_the_caller(x64):
    def fn(x):
        y = jnp.concatenate([x, x * 2])
        return halves(y), calls_halves(y)

    model = check(fn, [("B", 4)], x64=x64)
    assert functions(model) == ["calls_halves", "halves"]
    for f in model.functions:
        assert len(f.input) == 2  # y, and the graph input that carries B
    assert all(len(c.input) == 2 for c in calls(model.graph, "halves"))


def test_different_shapes_give_two_definitions():
    w = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)

    @onnx_function
    def block(x):
        return jnp.tanh(x @ w[: x.shape[-1], : x.shape[-1]])

    def fn(a, b):
        return block(a), block(b), block(a * 2)

    model = check(fn, [("B", 8), ("B", 4)])
    assert functions(model) == ["block", "block_2"]
    assert len(calls(model.graph, "block")) == 2
    assert len(calls(model.graph, "block_2")) == 1


def _pair(unique, same_weights):
    cls = onnx_function(unique=unique, name="UBlock")(
        type("UBlock" + ("U" if unique else "") + ("S" if same_weights else "D"),
             (nnx.Module,), {"__init__": MLPBlock.__init__,
                             "__call__": MLPBlock.__call__.__wrapped__,
                             "__module__": __name__}))

    class Pair(nnx.Module):
        def __init__(self):
            self.a = cls(8, 8, rngs=nnx.Rngs(0))
            self.b = cls(8, 8, rngs=nnx.Rngs(0 if same_weights else 1))

        def __call__(self, x):
            return self.b(self.a(x))

    return Pair()


@pytest.mark.parametrize("unique,same,expected", [
    (True, True, 1), (True, False, 2), (False, True, 2), (False, False, 2)])
def test_unique_shares_equal_weights_only(unique, same, expected):
    model = check(_pair(unique, same), [("B", 8)])
    assert len(model.functions) == expected
    assert [f.name for f in model.functions] == ["UBlock", "UBlock_2"][:expected]


@onnx_function
class Inner(nnx.Module):
    def __init__(self, d, *, rngs):
        self.linear = nnx.Linear(d, d, rngs=rngs)

    def __call__(self, x):
        return nnx.relu(self.linear(x))


@onnx_function
class Outer(nnx.Module):
    def __init__(self, inner, *, rngs):
        self.inner = inner
        self.norm = nnx.LayerNorm(8, rngs=rngs)

    def __call__(self, x):
        return self.inner(self.norm(x)) + x


class Nested(nnx.Module):
    def __init__(self):
        rngs = nnx.Rngs(0)
        self.inner = Inner(8, rngs=rngs)
        self.outer = Outer(self.inner, rngs=rngs)

    def __call__(self, x):
        return self.inner(self.outer(self.outer(x)))


@pytest.mark.parametrize("x64", PRECISIONS)
def test_nested_functions_one_definition_each(x64):
    with jax.enable_x64(x64):
        model = check(Nested(), [("B", 8)], x64=x64)
    assert functions(model) == ["Inner", "Outer"]
    # Callees come before callers; the main graph calls Outer twice and Inner once.
    assert [f.name for f in model.functions] == ["Inner", "Outer"]
    assert len(calls(model.graph, "Outer")) == 2
    assert len(calls(model.graph, "Inner")) == 1
    assert len(calls(function(model, "Outer"), "Inner")) == 1
    assert {o.domain for o in function(model, "Outer").opset_import} == {"", "custom"}


W = np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)


@onnx_function
def cell(x):
    return jnp.tanh(x @ W.astype(x.dtype))


def _subgraph_calls(model, name):
    found = []

    def walk(graph):
        for n in graph.node:
            if n.op_type == name and n.domain:
                found.append(n)
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
    for n in model.graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                walk(a.g)
    return found


@pytest.mark.parametrize("x64", PRECISIONS)
@pytest.mark.parametrize("batch", BATCH)
def test_function_inside_scan_body(x64, batch):
    def fn(x, xs):
        def step(c, v):
            c = cell(c) + v
            return c, cell(v)
        return jax.lax.scan(step, x, xs)

    model = check(fn, [(batch, 4), (3, batch, 4)], x64=x64)
    assert functions(model) == ["cell"]
    assert len(_subgraph_calls(model, "cell")) == 2


@pytest.mark.parametrize("x64", PRECISIONS)
@pytest.mark.parametrize("batch", BATCH)
def test_function_inside_cond_branch(x64, batch):
    def fn(x):
        return jax.lax.cond(x.sum() > 0, cell, lambda v: cell(v * 2) - 1, x)

    model = check(fn, [(batch, 4)], x64=x64)
    assert functions(model) == ["cell"]
    assert len(_subgraph_calls(model, "cell")) == 2


@pytest.mark.parametrize("x64", PRECISIONS)
@pytest.mark.parametrize("batch", BATCH)
def test_inlined_model_matches(x64, batch):
    with jax.enable_x64(x64):
        m = Nested()
        dtype = np.float64 if x64 else np.float32
        specs = symbolic_specs([(batch, 8)], [dtype])
        kept = jaxonnx.to_onnx(m, specs, enable_double_precision=x64)
        flat = jaxonnx.to_onnx(m, specs, enable_double_precision=x64, inline_functions=True)
        x = np.random.default_rng(0).standard_normal((4, 8)).astype(dtype)
        expected = np.asarray(m(x))
    assert len(kept.functions) == 2 and not flat.functions
    assert all(not n.domain for n in flat.graph.node)
    assert {o.domain for o in flat.opset_import} == {""}
    a, b = run(kept, x)[0], run(flat, x)[0]
    tol = 1e-9 if x64 else 1e-5
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    np.testing.assert_allclose(a, expected, rtol=tol, atol=tol)


def test_inlining_works_inside_subgraphs():
    def fn(x):
        return jax.lax.cond(x.sum() > 0, cell, lambda v: v, x)

    model = jaxonnx.to_onnx(fn, [("B", 4)], inline_functions=True)
    assert not model.functions and not _subgraph_calls(model, "cell")
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(run(model, x)[0], fn(x), rtol=1e-5, atol=1e-6)


def test_same_program_same_bytes():
    a = jaxonnx.to_onnx(Nested(), [("B", 8)], return_mode="bytes")
    b = jaxonnx.to_onnx(Nested(), [("B", 8)], return_mode="bytes")
    assert a == b


def test_unused_call_leaves_no_definition():
    def fn(x):
        cell(x * 3)  # dead
        return x + 1

    model = jaxonnx.to_onnx(fn, [(2, 4)])
    assert not model.functions
    assert {o.domain for o in model.opset_import} == {""}
    raw = jaxonnx.to_onnx(fn, [(2, 4)], optimize=False)
    assert not raw.functions


def test_passes_run_inside_bodies():
    @onnx_function
    def roundtrip(x):
        return jnp.transpose(jnp.transpose(x) * 2.0)

    model = jaxonnx.to_onnx(lambda x: roundtrip(x), [(3, 4)])
    body = function(model, "roundtrip")
    assert "Transpose" not in [n.op_type for n in body.node]
    raw = jaxonnx.to_onnx(lambda x: roundtrip(x), [(3, 4)], optimize=False)
    assert [n.op_type for n in function(raw, "roundtrip").node].count("Transpose") == 2


# -- the decorator


def test_outside_a_conversion_the_callable_is_unchanged():
    def plain(x, scale=2.0):
        return jnp.sin(x) * scale

    decorated = onnx_function(plain)
    x = jnp.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(decorated(x), plain(x))
    np.testing.assert_array_equal(jax.jit(decorated)(x), plain(x))
    np.testing.assert_array_equal(jax.vmap(decorated)(x), jax.vmap(plain)(x))
    np.testing.assert_array_equal(jax.grad(lambda v: decorated(v).sum())(x),
                                  jax.grad(lambda v: plain(v).sum())(x))
    assert decorated.__name__ == "plain"
    assert "onnx_fn" not in str(jax.make_jaxpr(decorated)(x))
    m = Twice(8, rngs=nnx.Rngs(0))
    y = jnp.ones((2, 8))
    np.testing.assert_array_equal(m(y), nnx.jit(lambda mod, v: mod(v))(m, y))


def test_transformations_inside_a_conversion():
    @onnx_function
    def sine(x):
        return jnp.sin(x) * 3.0

    def fn(x):
        ys = jax.vmap(cell)(x)  # still a function, over the batched body
        g = jax.grad(lambda v: sine(v).sum())(x)  # differentiated inline
        return ys, g

    model = check(fn, [(3, 4)])
    assert functions(model) == ["cell"]


def test_decorator_forms_and_names():
    @onnx_function(namespace="my.ns", type="Block")
    def block(x, w):
        return x @ w

    @onnx_function(name="Named")
    def other(x):
        return x + 1

    w = np.eye(4, dtype=np.float32)
    model = check(lambda x: other(block(x, w)), [("B", 4)])
    assert sorted((f.domain, f.name) for f in model.functions) == [("custom", "Named"),
                                                                  ("my.ns", "Block")]
    # The weight is an operand: fed from an initializer at the call site.
    call = calls(model.graph, "Block")[0]
    assert call.input[1] in {i.name for i in model.graph.initializer}


def test_static_keyword_arguments_key_the_body():
    @onnx_function(unique=True)
    def square_shift(x, *, shift):
        return jnp.square(x + shift)

    def fn(x):
        return square_shift(square_shift(x, shift=0.5), shift=0.5), square_shift(x, shift=1.0)

    model = check(fn, [("N", 4)])
    assert functions(model) == ["square_shift", "square_shift_2"]


def test_redecoration_with_another_namespace_is_an_error():
    @onnx_function(namespace="a")
    def f(x):
        return x

    assert onnx_function(f) is f
    with pytest.raises(jaxonnx.ConversionError, match="namespace mismatch"):
        onnx_function(namespace="b")(f)


def test_bad_target():
    with pytest.raises(jaxonnx.ConversionError, match="class or a callable"):
        onnx_function(3)


def test_a_class_inheriting_its_call_is_its_own_function():
    @onnx_function
    class Dense(nnx.Linear):
        pass

    @onnx_function(type="Wider")
    class Wider(Dense):
        pass

    rngs = nnx.Rngs(0)
    a, b = Dense(4, 4, rngs=rngs), Wider(4, 4, rngs=rngs)
    model = check(lambda x: b(a(x)), [("B", 4)])
    assert functions(model) == ["Dense", "Wider"]
    np.testing.assert_array_equal(a(jnp.ones((1, 4))), nnx.Linear.__call__(a, jnp.ones((1, 4))))


def test_the_user_page_example_runs_as_written():
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "functions.md").read_text()
    code = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    scope: dict = {}
    exec(compile(code, "docs/functions.md", "exec"), scope)
    model = scope["model"]
    assert [f.name for f in model.functions] == ["MLPBlock", "Shift"]
    assert [n.op_type for n in model.graph.node] == ["MLPBlock", "MLPBlock", "Shift"]
    assert function(model, "Shift").domain == "my.ns"
    onnx.checker.check_model(model, full_check=True)


def test_an_error_in_a_body_names_the_function_and_its_call():
    # A primitive JAX can trace but no plugin lowers.
    unknown = jax.extend.core.Primitive("test_only.no_plugin_lowers_this")
    unknown.def_abstract_eval(lambda aval: aval)

    @onnx_function
    def needs_unknown(x):
        return unknown.bind(x) + 1

    with pytest.raises(jaxonnx.ConversionError) as info:
        jaxonnx.to_onnx(lambda x: needs_unknown(x), [(2, 4)])
    message = str(info.value)
    assert "inside the body of function 'needs_unknown'" in message
    assert "test_onnx_function.py" in message


def test_a_numbered_name_never_takes_a_given_one():
    @onnx_function
    def blk(x):
        return x * 2

    @onnx_function(name="blk_2")
    def other(x):
        return x + 1

    model = check(lambda a, b: (other(a), blk(a), blk(b)), [(2, 4), (3, 4)])
    assert functions(model) == ["blk", "blk_2", "blk_3"]
    assert [n.op_type for n in model.graph.node] == ["blk_2", "blk", "blk_3"]


def test_a_module_passed_as_an_argument_feeds_its_weights_as_inputs():
    @onnx_function
    def apply(layer, x):
        return nnx.relu(layer(x))

    layer = nnx.Linear(4, 4, rngs=nnx.Rngs(0))
    model = check(lambda x: apply(layer, x), [("B", 4)])
    assert functions(model) == ["apply"]
    f = function(model, "apply")
    assert len(f.input) == 3  # x, kernel, bias
    kept = [list(a.t.dims) for n in f.node if n.op_type == "Constant" for a in n.attribute]
    assert [4, 4] not in kept and [4] not in kept
    call = calls(model.graph, "apply")[0]
    assert set(call.input) - {"in_0"} <= {i.name for i in model.graph.initializer}


def test_a_jitted_function_converted_first_still_runs_eagerly():
    g = jax.jit(lambda x: cell(x) + 2)
    model = jaxonnx.to_onnx(g, [(2, 4)])
    assert functions(model) == ["cell"]
    x = np.ones((2, 4), np.float32)
    # The jit cache now holds the trace with the function primitive: XLA runs its body.
    np.testing.assert_allclose(g(x), np.tanh(x @ W) + 2, rtol=1e-6)
