"""A bound call's reference (the original callable as a jaxpr) is traced only
when something needs it: a conversion whose plugin lowers the fused op never
runs the original once the avals of the call are known; a lowering that falls
back to the decomposition, eager/jit execution, grad and vmap do trace it.

The original is replaced by a counting one before the window opens, so the
window wraps it, and every trace of it is counted. The bound call is
jax.nn.mish: below opset 18 (no Mish op) its plugin has no other form and
falls back to the reference (gelu, in float32, has a form of its own there).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxonnx
from jaxonnx import _bindings, _plugins
from helpers import check, op_types

SHAPE = ("B", 3, 17)


@pytest.fixture
def calls(monkeypatch):
    """Traces of jax.nn.mish's original (calls with a traced x; the eager runs
    of the tests' JAX side are not counted), with no output avals known yet."""
    monkeypatch.setattr(_bindings, "_outputs", {})
    made = []
    real = jax.nn.mish

    @functools.wraps(real)
    def mish(x):
        if isinstance(x, jax.core.Tracer):
            made.append(x)
        return real(x)

    monkeypatch.setattr(jax.nn, "mish", mish)
    return made


def fn(x):
    return jax.nn.mish(x) * 2.0


def test_a_conversion_traces_the_original_only_for_avals_not_yet_known(calls):
    model = jaxonnx.to_onnx(fn, [SHAPE])
    assert len(calls) == 1  # the first call of these avals: traced once (and kept)
    assert "Mish" in op_types(model)
    calls.clear()
    again = jaxonnx.to_onnx(fn, [SHAPE])
    assert calls == []  # the same avals: never traced
    assert again.SerializeToString() == model.SerializeToString()


def test_a_lowering_that_falls_back_gets_the_reference(calls):
    jaxonnx.to_onnx(fn, [SHAPE])
    calls.clear()
    model = check(fn, [SHAPE], opset=17)  # no Mish at 17: the plugin inlines the reference
    assert "Mish" not in op_types(model)
    assert len(calls) == 2  # check converts twice (optimized and raw), each asks once


def test_eager_jit_grad_and_vmap_trace_it(calls):
    jaxonnx.to_onnx(fn, [(5,)])
    calls.clear()
    x = np.linspace(-3, 3, 5, dtype=np.float32)
    real = jax.nn.mish.__wrapped__
    with _bindings.window(_plugins.registry(None)):
        jitted = jax.jit(jax.nn.mish)(x)
        assert len(calls) == 1  # bound with known avals; XLA's lowering traced it
        grad = jax.grad(lambda v: jnp.sum(jax.nn.mish(v)))(x)
        batched = jax.vmap(jax.nn.mish)(np.stack([x, -x]))
    assert len(calls) >= 3
    np.testing.assert_allclose(jitted, real(x), rtol=1e-6)
    np.testing.assert_allclose(grad, jax.grad(lambda v: jnp.sum(real(v)))(x), rtol=1e-6)
    np.testing.assert_allclose(batched, real(np.stack([x, -x])), rtol=1e-6)


def test_a_reference_reading_a_value_no_operand_carries_is_an_error_when_needed(monkeypatch):
    monkeypatch.setattr(_bindings, "_outputs", {})
    extra = {}
    real = jax.nn.mish

    @functools.wraps(real)
    def mish(x):  # an original reading more than its spec's operands
        return real(x) + extra.get("v", 0.0)

    monkeypatch.setattr(jax.nn, "mish", mish)
    jaxonnx.to_onnx(fn, [SHAPE])  # the avals become known

    def reads_more(x):
        extra["v"] = jnp.sin(x)
        return fn(x)

    with pytest.raises(jaxonnx.ConversionError, match="not an operand of its binding spec"):
        jaxonnx.to_onnx(reads_more, [SHAPE], opset=17)


def test_a_reference_traced_late_names_the_users_line(calls, monkeypatch):
    monkeypatch.setenv("JAXONNX_ENABLE_STACKTRACE_METADATA", "1")
    first = jaxonnx.to_onnx(fn, [SHAPE], opset=17)  # traced while binding
    again = jaxonnx.to_onnx(fn, [SHAPE], opset=17)  # traced when the lowering asks
    assert len(calls) == 2
    assert again.SerializeToString() == first.SerializeToString()
    sites = {p.value for n in again.graph.node for p in n.metadata_props
             if p.key == "pkg.jaxonnx.callsite"}
    # fn's line, not the line in the original (the counting mish above) nor ours
    assert sites and all("test_lazy_reference.py" in s and s.endswith("(fn)") for s in sites)
