"""A second conversion of the same callable sees its current weights and shapes
(JAX's trace cache, keyed on the callable, must never answer for to_onnx)."""

import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
from flax import nnx

import jaxonnx


def _run(model, *xs):
    sess = ort.InferenceSession(model.SerializeToString())
    return sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs)})[0]


X = np.array([[1.0, 2.0, 3.0]], np.float32)


def test_weights_changed_in_place_reach_the_second_model():
    lin = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    first = jaxonnx.to_onnx(lin, [(1, 3)])
    before = np.asarray(lin(X))
    lin.kernel[...] = jnp.ones((3, 2))
    lin.bias[...] = jnp.ones((2,))
    second = jaxonnx.to_onnx(lin, [(1, 3)])
    np.testing.assert_allclose(_run(first, X), before, rtol=1e-6)
    np.testing.assert_allclose(_run(second, X), [[7.0, 7.0]], rtol=1e-6)


def test_a_second_instance_of_equal_structure_gets_its_own_weights():
    a = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    b = nnx.Linear(3, 2, rngs=nnx.Rngs(1))
    ma, mb = jaxonnx.to_onnx(a, [(1, 3)]), jaxonnx.to_onnx(b, [(1, 3)])
    np.testing.assert_allclose(_run(ma, X), a(X), rtol=1e-6)
    np.testing.assert_allclose(_run(mb, X), b(X), rtol=1e-6)
    assert not np.allclose(a(X), b(X))


def test_a_function_closing_over_a_mutated_numpy_array():
    w = np.ones(3, np.float32)

    def f(x):
        return x * w

    first = jaxonnx.to_onnx(f, [(3,)])
    w[:] = 5.0
    second = jaxonnx.to_onnx(f, [(3,)])
    x = np.ones(3, np.float32)
    np.testing.assert_allclose(_run(first, x), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(_run(second, x), [5.0, 5.0, 5.0])


def test_a_function_closing_over_a_rebound_jax_array():
    state = {"w": jnp.ones(3)}

    def f(x):
        return x * state["w"]

    jaxonnx.to_onnx(f, [(3,)])
    state["w"] = jnp.full(3, 2.0)
    second = jaxonnx.to_onnx(f, [(3,)])
    np.testing.assert_allclose(_run(second, np.ones(3, np.float32)), [2.0, 2.0, 2.0])


def test_the_same_module_with_other_input_shapes():
    lin = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    for shape in [(1, 3), (4, 3), ("B", 3), (2, 5, 3)]:
        model = jaxonnx.to_onnx(lin, [shape])
        x = np.random.default_rng(0).standard_normal(
            tuple(6 if d == "B" else d for d in shape)).astype(np.float32)
        np.testing.assert_allclose(_run(model, x), lin(x), rtol=1e-5, atol=1e-6)
