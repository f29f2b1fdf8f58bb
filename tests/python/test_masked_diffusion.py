"""A masked-diffusion LM in the style of public JAX model code (issue 36): left-padded
prompts, padded tokens at position id 2**30, rotary embeddings, bidirectional
attention masked with jnp.where(mask, logits, finfo(float32).min) then softmax.

The model differed from jax.jit at the padded tokens only. The cause is not
jaxonnx's: XLA compiling the rotary inverse frequencies 10000 ** (-2k / d) rounds
some of them one ulp away from the correctly rounded value (which eager JAX,
numpy and onnxruntime give). At position 2**30 one ulp of the frequency is tens
of radians of angle, so sin/cos there, hence the padded tokens' queries, have no
stable value; real tokens (small positions) are unaffected. Frequencies computed
as a numpy constant make jax.jit and the model agree everywhere (docs/api.md,
first_divergence).
"""

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import pytest
from flax import nnx

import jaxonnx

VOCAB, DIM, HEADS, LENGTH = 50, 64, 2, 8
PAD_POSITION = 2**30


def inv_freq_jnp(head_dim):
    return 1.0 / (10000.0 ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))


def inv_freq_numpy(head_dim):
    return (1.0 / (10000.0 ** (np.arange(0, head_dim, 2) / head_dim))).astype(np.float32)


class Block(nnx.Module):
    def __init__(self, rngs, inv_freq):
        self.qkv = nnx.Linear(DIM, 3 * DIM, rngs=rngs)
        self.out = nnx.Linear(DIM, DIM, rngs=rngs)
        self.norm = nnx.RMSNorm(DIM, rngs=rngs)
        self.inv_freq = inv_freq

    def rotate(self, x, positions):
        angle = positions[..., None].astype(jnp.float32) * self.inv_freq(x.shape[-1])
        sin, cos = jnp.sin(angle)[:, :, None, :], jnp.cos(angle)[:, :, None, :]
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def __call__(self, x, positions, mask):
        b, t, _ = x.shape
        q, k, v = (y.reshape(b, t, HEADS, DIM // HEADS) for y in jnp.split(self.qkv(self.norm(x)), 3, -1))
        q, k = self.rotate(q, positions), self.rotate(k, positions)
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(DIM // HEADS)
        logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
        weights = jax.nn.softmax(logits, axis=-1)
        return x + self.out(jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, t, DIM))


class MaskedDiffusionLM(nnx.Module):
    def __init__(self, inv_freq, mask_queries=False):
        rngs = nnx.Rngs(0)
        self.embed = nnx.Embed(VOCAB, DIM, rngs=rngs)
        self.blocks = nnx.List([Block(rngs, inv_freq) for _ in range(2)])
        self.head = nnx.Linear(DIM, VOCAB, rngs=rngs)
        self.mask_queries = mask_queries

    def __call__(self, tokens, valid):
        positions = jnp.where(valid, jnp.cumsum(valid, axis=-1) - 1, PAD_POSITION)
        mask = valid[:, None, None, :]  # every query sees the real tokens
        if self.mask_queries:  # padded queries see nothing: rows of finfo.min only
            mask = mask & valid[:, None, :, None]
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, positions, mask)
        return self.head(x)


def _batch():
    tokens = np.random.default_rng(0).integers(0, VOCAB, (2, LENGTH)).astype(np.int32)
    valid = np.ones((2, LENGTH), bool)
    valid[0, :3] = False  # left padding
    valid[1, :1] = False
    return tokens, valid


def _errors(model):
    tokens, valid = _batch()
    data = jaxonnx.to_onnx(model, [tokens, valid], return_mode="bytes")
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    got = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], [tokens, valid])))[0]
    want = np.asarray(jax.jit(lambda t, v: model(t, v))(tokens, valid))
    return np.abs(got - want).max(axis=-1), valid


@pytest.mark.parametrize("mask_queries", [False, True])
def test_real_tokens_agree_and_numpy_frequencies_agree_everywhere(mask_queries):
    err, valid = _errors(MaskedDiffusionLM(inv_freq_jnp, mask_queries))
    assert err[valid].max() < 1e-5
    err, _ = _errors(MaskedDiffusionLM(inv_freq_numpy, mask_queries))
    assert err.max() < 1e-5, err


def test_fully_masked_rows_are_uniform_as_in_jax():
    # finfo.min rows: x - max(x) is 0, softmax is uniform in both (no overflow to -inf).
    def attend(logits, mask):
        return jax.nn.softmax(jnp.where(mask, logits, jnp.finfo(jnp.float32).min), axis=-1)

    logits = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    mask = np.array([[True] * 5, [False] * 5, [True, False, True, False, False]])
    sess = ort.InferenceSession(jaxonnx.to_onnx(attend, [logits, mask], return_mode="bytes"),
                                providers=["CPUExecutionProvider"])
    got = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], [logits, mask])))[0]
    np.testing.assert_allclose(got, np.asarray(jax.jit(attend)(logits, mask)), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got[1], np.full(5, 0.2, np.float32), rtol=1e-6)


def test_padded_tokens_differ_only_through_xla_rounding_the_frequencies():
    model = MaskedDiffusionLM(inv_freq_jnp)
    tokens, valid = _batch()
    with jax.disable_jit():
        eager = np.asarray(model(jnp.asarray(tokens), jnp.asarray(valid)))
    if np.allclose(np.asarray(jax.jit(lambda t, v: model(t, v))(tokens, valid)), eager, atol=1e-5):
        pytest.skip("this XLA computes the frequencies as eager JAX does: nothing differs")
    err, valid = _errors(model)
    assert err[~valid].min() > 1e-3  # the padded tokens differ (the symptom)
    # The model computes what eager JAX computes, op by op with correctly rounded frequencies.
    data = jaxonnx.to_onnx(model, [tokens, valid], return_mode="bytes")
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    got = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], [tokens, valid])))[0]
    np.testing.assert_allclose(got, eager, rtol=1e-4, atol=1e-4)
    # first_divergence (comparing with jax.jit) names the rotary's sin or cos.
    found = jaxonnx.first_divergence(model, [tokens, valid], rtol=1e-5, atol=1e-6)
    assert found is not None and found.primitive in ("sin", "cos"), found
