"""Model-style programs for gaps that public JAX model code ran into (issue #23).

Dropout's train / eval flag as a runtime input (input_params) in flax linen and equinox,
as flax nnx already has it: model.apply(vars, x, deterministic=flag) and
model(x, inference=flag) take the flag at run time, and a Python branch on such a flag
elsewhere is refused with advice naming it.
"""

import contextlib
import functools

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest

import jaxonnx

from helpers import symbolic_specs

FLOATS = [(np.float32, False), (np.float64, True)]


def run_with_flag(fn, flag_name, shape, dtype, x64, reference, batches=(1, 5)):
    """Converts fn(x, **{flag_name: ...}) with the flag as input_params and checks both
    flag values against reference(x, flag) at each batch size."""
    ctx = jax.enable_x64(True) if x64 else contextlib.nullcontext()
    with ctx:
        spec, = symbolic_specs([shape], [dtype])
        model = jaxonnx.to_onnx(fn, [spec], input_params={flag_name: True},
                                enable_double_precision=x64)
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ["in_0", flag_name]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    tol = 1e-9 if x64 else 1e-5
    for b in batches:
        x = rng.standard_normal([b if isinstance(d, str) else d for d in shape]).astype(dtype)
        for flag in (True, False):
            got = sess.run(None, {"in_0": x, flag_name: np.array(flag)})[0]
            with ctx:
                want = np.asarray(reference(x, flag))
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    return sess


class LinenBlock(nn.Module):
    """Dropout given the flag as a call argument and as an attribute, as linen code does."""

    @nn.compact
    def __call__(self, x, deterministic: bool = True):
        x = nn.relu(nn.Dense(16)(x))
        x = nn.Dropout(0.3)(x, deterministic=deterministic)
        x = nn.Dense(4)(x)
        return nn.Dropout(0.2, deterministic=deterministic)(x)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_linen_dropout_deterministic_at_run_time(dtype, x64):
    with jax.enable_x64(x64):
        block = LinenBlock()
        variables = block.init(jax.random.key(0), jnp.ones((1, 6), dtype))
        rngs = {"dropout": jax.random.key(3)}

        def fn(x, deterministic):
            return block.apply(variables, x, deterministic=deterministic, rngs=rngs)
    sess = run_with_flag(fn, "deterministic", ("B", 6), dtype, x64,
                         lambda x, flag: fn(x, flag))
    # The dropout branch really drops: some outputs of the dropped run are 0.
    x = np.ones((5, 6), dtype)
    dropped = sess.run(None, {"in_0": x, "deterministic": np.array(False)})[0]
    kept = sess.run(None, {"in_0": x, "deterministic": np.array(True)})[0]
    assert not np.allclose(dropped, kept)


def test_linen_dropout_without_an_rng_stream_uses_key_0():
    block = LinenBlock()
    variables = block.init(jax.random.key(0), jnp.ones((1, 6)))
    model = jaxonnx.to_onnx(lambda x, deterministic: block.apply(
        variables, x, deterministic=deterministic), [("B", 6)],
        input_params={"deterministic": True})
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((3, 6)).astype(np.float32)
    np.testing.assert_allclose(sess.run(None, {"in_0": x, "deterministic": np.array(True)})[0],
                               block.apply(variables, x, deterministic=True), rtol=1e-5, atol=1e-5)
    assert sess.run(None, {"in_0": x, "deterministic": np.array(False)})[0].shape == (3, 4)


class EqxMLP(eqx.Module):
    l1: eqx.nn.Linear
    drop: eqx.nn.Dropout
    l2: eqx.nn.Linear

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.l1 = eqx.nn.Linear(6, 16, key=k1)
        self.drop = eqx.nn.Dropout(0.3)
        self.l2 = eqx.nn.Linear(16, 4, key=k2)

    def __call__(self, x, *, inference=False, key=None):
        return self.l2(self.drop(jax.nn.relu(self.l1(x)), inference=inference, key=key))


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_equinox_dropout_inference_at_run_time(dtype, x64):
    with jax.enable_x64(x64):
        mlp = jax.tree_util.tree_map(lambda a: a.astype(dtype) if eqx.is_inexact_array(a) else a,
                                     EqxMLP(jax.random.key(0)))

        def fn(x, inference):
            return jax.vmap(lambda row: mlp(row, inference=inference, key=jax.random.key(7)))(x)
    run_with_flag(fn, "inference", ("B", 6), dtype, x64, fn)


def test_python_branch_on_a_runtime_flag_names_it():
    class TrainFlag(nn.Module):
        @nn.compact
        def __call__(self, x, train):
            return nn.Dropout(0.5, deterministic=not train)(nn.Dense(3)(x))
    block = TrainFlag()
    variables = block.init(jax.random.key(0), jnp.ones((1, 4)), train=False)
    with pytest.raises(jaxonnx.ConversionError,
                       match=r"TracerBoolConversionError.*input_params 'train'.*functools.partial"):
        jaxonnx.to_onnx(lambda x, train: block.apply(variables, x, train=train), [("B", 4)],
                        input_params={"train": False})
    # The fix the message gives converts.
    fixed = functools.partial(lambda x, train: block.apply(variables, x, train=train), train=False)
    jaxonnx.to_onnx(fixed, [("B", 4)])
