"""nnx modules that hold state (Rngs, Dropout, BatchNorm, recurrent cells):
converted from a private copy, the user's module untouched."""

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from flax import nnx

import jaxonnx


def _run(model, feeds):
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString())
    return sess.run(None, feeds)


def _state_leaves(module):
    return [np.asarray(jax.random.key_data(v) if jax.dtypes.issubdtype(v.dtype, jax.dtypes.prng_key)
                       else v) for v in jax.tree.leaves(nnx.state(module))]


@pytest.mark.parametrize("batch", [1, 3])
def test_rnn_of_lstm_cell_with_symbolic_batch(batch):
    rnn = nnx.RNN(nnx.LSTMCell(6, 10, rngs=nnx.Rngs(0)))
    before = _state_leaves(rnn)
    model = jaxonnx.to_onnx(rnn, [("B", 5, 6)])
    x = np.random.default_rng(batch).standard_normal((batch, 5, 6)).astype(np.float32)
    (got,) = _run(model, {"in_0": x})
    np.testing.assert_allclose(got, rnn(jnp.asarray(x)), rtol=1e-5, atol=1e-5)
    for a, b in zip(before, _state_leaves(nnx.RNN(nnx.LSTMCell(6, 10, rngs=nnx.Rngs(0))))):
        np.testing.assert_array_equal(a, b)


def test_rnn_of_gru_cell_after_split_and_merge():
    graphdef, state = nnx.split(nnx.RNN(nnx.GRUCell(6, 8, rngs=nnx.Rngs(1))))
    rnn = nnx.merge(graphdef, state)
    model = jaxonnx.to_onnx(rnn, [("B", 4, 6)])
    x = np.random.default_rng(0).standard_normal((2, 4, 6)).astype(np.float32)
    np.testing.assert_allclose(_run(model, {"in_0": x})[0], rnn(jnp.asarray(x)),
                               rtol=1e-5, atol=1e-5)


class Noisy(nnx.Module):
    """Holds an nnx.Rngs and draws from it on every call."""

    def __init__(self):
        self.rngs = nnx.Rngs(noise=3)

    def __call__(self, x):
        return x + jax.random.normal(self.rngs.noise(), x.shape)


def test_module_holding_rngs_converts_without_advancing_them():
    m = Noisy()
    before = _state_leaves(m)
    model = jaxonnx.to_onnx(m, [(2, 3)])
    for a, b in zip(before, _state_leaves(m)):
        np.testing.assert_array_equal(a, b)
    x = np.zeros((2, 3), np.float32)
    # The model carries the draw the module would make next.
    np.testing.assert_allclose(_run(model, {"in_0": x})[0], m(x), rtol=1e-5, atol=1e-6)


class Net(nnx.Module):
    def __init__(self, rngs):
        self.linear = nnx.Linear(6, 6, rngs=rngs)
        self.bn = nnx.BatchNorm(6, rngs=rngs)
        self.dropout = nnx.Dropout(0.5, rngs=rngs)

    def __call__(self, x, deterministic=None):
        return self.dropout(nnx.relu(self.bn(self.linear(x))), deterministic=deterministic)


def _net():
    net = Net(nnx.Rngs(0))
    net.bn.mean[...] = jnp.linspace(-1.0, 1.0, 6)
    net.bn.var[...] = jnp.linspace(0.5, 2.0, 6)
    return net


X = np.random.default_rng(7).standard_normal((4, 6)).astype(np.float32)


def test_eval_mode_batchnorm_and_dropout():
    net = _net()
    net.eval()
    model = jaxonnx.to_onnx(net, [("B", 6)])
    np.testing.assert_allclose(_run(model, {"in_0": X})[0], net(X), rtol=1e-5, atol=1e-6)
    assert "RandomUniform" not in {n.op_type for n in model.graph.node}


def test_training_mode_converts_as_traced_and_leaves_the_module_alone():
    net = _net()  # BatchNorm on batch statistics, Dropout active
    before = _state_leaves(net)
    model = jaxonnx.to_onnx(net, [(4, 6)])
    for a, b in zip(before, _state_leaves(net)):
        np.testing.assert_array_equal(a, b)
    # Batch statistics and the mask the module's Rngs give next: what JAX computes now.
    np.testing.assert_allclose(_run(model, {"in_0": X})[0], net(X), rtol=1e-5, atol=1e-5)


def test_deterministic_as_a_runtime_input():
    net = _net()
    model = jaxonnx.to_onnx(net, [("B", 6)], input_params={"deterministic": True})
    assert [i.name for i in model.graph.input] == ["in_0", "deterministic"]
    sess_feeds = {"in_0": X, "deterministic": np.array(True)}
    np.testing.assert_allclose(_run(model, sess_feeds)[0], net(X, deterministic=True),
                               rtol=1e-5, atol=1e-6)
    dropped = _run(model, {"in_0": X, "deterministic": np.array(False)})[0]
    kept = np.asarray(net(X, deterministic=True))
    # Dropout: each value is 0 or the kept value over keep_prob.
    assert np.all(np.isclose(dropped, 0) | np.isclose(dropped, kept / 0.5, rtol=1e-5, atol=1e-6))
    assert np.any(np.isclose(dropped, 0) & ~np.isclose(kept, 0))


def _reshape_wrongly(x):
    return jnp.reshape(x, (7,))  # the line the error must name


def test_a_jax_error_while_tracing_names_the_users_line():
    with pytest.raises(jaxonnx.ConversionError) as info:
        jaxonnx.to_onnx(_reshape_wrongly, [(3,)])
    msg = str(info.value)
    line = _reshape_wrongly.__code__.co_firstlineno + 1
    assert f"test_nnx_state.py:{line} (_reshape_wrongly)" in msg
    assert "TypeError" in msg and "reshape" in msg
    assert info.value.__cause__ is None and info.value.__suppress_context__


class NeedsRngsToDrop(nnx.Module):
    def __init__(self):
        self.dropout = nnx.Dropout(0.5)  # no rngs: cannot run in training mode

    def __call__(self, x):
        return self.dropout(x)


def test_training_mode_that_cannot_trace_names_the_module_and_model_eval():
    with pytest.raises(jaxonnx.ConversionError, match=r"dropout \(Dropout\).*model\.eval\(\)"):
        jaxonnx.to_onnx(NeedsRngsToDrop(), [(2, 3)])
    m = NeedsRngsToDrop()
    m.eval()
    model = jaxonnx.to_onnx(m, [(2, 3)])
    x = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(_run(model, {"in_0": x})[0], x)


def test_attention_with_a_decode_cache_leaves_the_cache_alone():
    mha = nnx.MultiHeadAttention(2, 8, decode=True, rngs=nnx.Rngs(0))
    mha.init_cache((1, 4, 8))
    before = _state_leaves(mha)
    model = jaxonnx.to_onnx(mha, [(1, 1, 8)])
    for a, b in zip(before, _state_leaves(mha)):
        np.testing.assert_array_equal(a, b)
    x = np.random.default_rng(0).standard_normal((1, 1, 8)).astype(np.float32)
    np.testing.assert_allclose(_run(model, {"in_0": x})[0], mha(x), rtol=1e-5, atol=1e-6)


def test_a_closure_over_a_stateful_module_names_the_fix():
    rnn = nnx.RNN(nnx.LSTMCell(6, 10, rngs=nnx.Rngs(0)))
    with pytest.raises(jaxonnx.ConversionError,
                       match=r"TraceContextError.*pass the module itself, or its bound method"):
        jaxonnx.to_onnx(lambda x: rnn(x), [("B", 5, 6)])
    model = jaxonnx.to_onnx(rnn.__call__, [("B", 5, 6)])  # a bound method: a private copy
    x = np.random.default_rng(0).standard_normal((2, 5, 6)).astype(np.float32)
    np.testing.assert_allclose(_run(model, {"in_0": x})[0], rnn(x), rtol=1e-5, atol=1e-5)
