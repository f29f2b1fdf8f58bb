"""examples/decode.py, an LLM decode step, beyond the check every example gets
(test_examples.py): consecutive steps in onnxruntime, each fed the caches the
previous step returned, agree with the same steps in JAX; and positions
outside the cache agree too (dynamic_update_slice wraps a negative start once
and clamps the update into the cache; the attention mask follows the raw
position)."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import numpy as np
import onnx
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import _common  # noqa: E402
import decode  # noqa: E402
from test_examples import quick_model  # noqa: E402


@pytest.fixture(scope="module")
def converted():
    onnx_model, model, inputs = decode.convert(quick_model(decode), small=True)
    onnx.checker.check_model(onnx_model, full_check=True)
    return _common.session(onnx_model), _common.jitted(model), inputs


def step_inputs(inputs, batch, position, seed):
    """Random tokens and caches (stale values everywhere: the mask must hide
    them), and `position`."""
    xs = _common.sample(inputs, batch, seed=seed)
    xs[1] = np.array(position, np.int32)
    return xs


def run_ort(sess, xs):
    return sess.run(None, {v.name: x for v, x in zip(sess.get_inputs(), xs)})


def run_jax(reference, xs):
    return [np.asarray(w) for w in jax.tree.leaves(reference(*xs))]


def assert_close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batch", [1, 4])
def test_three_steps_feeding_the_caches_back(converted, batch):
    sess, reference, inputs = converted
    xs = step_inputs(inputs, batch, 5, seed=batch)
    ort_caches = jax_caches = xs[2:]
    rng = np.random.default_rng(batch)
    for position in (5, 6, 7):
        tokens = rng.integers(0, inputs[0].high, size=(batch, 1)).astype(np.int32)
        pos = np.array(position, np.int32)
        got = run_ort(sess, [tokens, pos, *ort_caches])
        want = run_jax(reference, [tokens, pos, *jax_caches])
        assert_close(got, want)
        # The step wrote this token's key and value at `position` and nothing else.
        for new, old in zip(got[1:], ort_caches):
            assert list(np.nonzero(np.any(new != old, axis=(0, 1, 3)))[0]) == [position]
        ort_caches, jax_caches = got[1:], want[1:]


def test_positions_outside_the_cache(converted):
    sess, reference, inputs = converted
    length = inputs[2].shape[2]
    for position in (0, length - 1, length, length + 3, -1, -length, -length - 3):
        xs = step_inputs(inputs, 2, position, seed=position % 7)
        assert_close(run_ort(sess, xs), run_jax(reference, xs))
