"""host_callbacks plugin: jax.debug.print / callback are dropped with a warning naming
the user's line; pure_callback / io_callback are refused with a reason."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxonnx
from helpers import check


def with_prints(x):
    jax.debug.print("x = {}", x)
    y = jnp.sin(x)
    jax.debug.callback(lambda v: None, y)
    return lax.fori_loop(0, 2, lambda i, c: (jax.debug.print("c {}", c), c * 2)[1], y)


def test_debug_print_dropped_with_warning_naming_the_line():
    with pytest.warns(UserWarning) as record:
        model = check(with_prints, [("B", 3)])
    messages = [str(w.message) for w in record if "jaxonnx" in str(w.message)]
    assert any("jax.debug.print" in m and "test_host_callbacks.py:17" in m for m in messages), messages
    assert any("jax.debug.callback" in m and "test_host_callbacks.py:19" in m for m in messages)
    assert any("test_host_callbacks.py:20" in m for m in messages), messages  # inside the loop body
    assert len(model.graph.output) == 1


def test_no_warning_without_prints():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jaxonnx.to_onnx(lambda x: x * 2, [(3,)])


@pytest.mark.parametrize("kind", ["pure", "io"])
def test_callbacks_refused_with_reason(kind):
    def f(x):
        spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
        if kind == "pure":
            return jax.pure_callback(np.sin, spec, x)
        return jax.experimental.io_callback(np.sin, spec, x)
    import jax.experimental  # noqa: F401
    with pytest.raises(jaxonnx.ConversionError) as e:
        jaxonnx.to_onnx(f, [(3,)])
    msg = str(e.value)
    assert f"{kind}_callback" in msg and "cannot call Python" in msg
    assert "test_host_callbacks.py" in msg
