"""Every model of the zoo-style benchmark set (benchmarks/zoo_models.py) converts and
matches JAX in onnxruntime at a small batch (one of the symbolic batch's values).
About 25 s for the twelve on the shared two-core machine with other builds running
(weights are drawn from numpy; each conversion takes a few hundred ms, the rest is
JAX's compile of the reference and onnxruntime's session). benchmarks/zoo.py
measures the same models against jax2onnx."""

import sys
from pathlib import Path

import jax
import numpy as np
import onnx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import zoo  # noqa: E402
from portability_models import sample  # noqa: E402
from zoo_models import MODELS  # noqa: E402

import jaxonnx  # noqa: E402


@pytest.mark.parametrize("name", sorted(MODELS))
def test_zoo_model_matches_jax(name):
    m = MODELS[name]
    model = jaxonnx.to_onnx(m.make(), zoo.specs(m.inputs()))
    onnx.checker.check_model(model, full_check=True)
    sess = zoo.session(model)
    fn = m.make()
    xs = sample(m.inputs(), 2, seed=2)
    got = sess.run(None, {v.name: x for v, x in zip(sess.get_inputs(), xs)})
    want = [np.asarray(w) for w in jax.tree.leaves(jax.jit(fn)(*xs))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(w).max())))
