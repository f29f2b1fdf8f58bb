"""The differential check (benchmarks/differential_check.py) over every case of
benchmarks/differential_cases.py, at one seed: each binding spec and each
rewrite rule of the plugins, converted on and off, run at every onnxruntime
graph optimization level, must agree with the other and with JAX to float
rounding on adversarial finite inputs. benchmarks/differential.py runs the
same cases at more seeds, magnitudes and sizes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import jaxonnx
from jaxonnx import _bindings, _plugins

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import differential_cases  # noqa: E402
import differential_check  # noqa: E402

CASES = differential_cases.CASES


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_agrees(case):
    result = differential_check.run_case(case)
    assert not result.missing, differential_check.describe(result)
    assert result.runs > 0
    if case.known:
        if result.passed:
            pytest.fail(f"{case.name} passes now: drop its `known` ({case.known})")
        pytest.xfail(f"{case.known}\n{differential_check.describe(result)}")
    assert result.passed, differential_check.describe(result)


# Rules no differential case reaches yet, each with the tests that check it against JAX.
NO_CASE_YET = {
    "dequantize_transposed": "tests/python/test_quantization.py (handwritten, weight stored [out, in])",
    "gemm_of_dequantized": "tests/python/test_quantization.py (qwix Linear, 2-D input, portable)",
    "int4_below_opset_21": "tests/python/test_quantization.py (portable, opset 17; the rule-less "
                           "model of an int4 weight does not exist below opset 21)",
    "cache_attention": "tests/python/test_genai.py (contrib target: genai's own generation against "
                       "JAX's loop, and the near misses that must stay standard; the rule's output "
                       "differs from the rule-less model by design outside genai's masks)",
    "matmul_nbits_int8_activations": "tests/python/test_quantization.py (fusion=\"approximate\" only: "
                                     "its output differs from the rule-less model beyond rounding by "
                                     "design; the same nodes at accuracy_level 0 match JAX to 1e-5)",
    "matmul_transposed_result": "tests/python/test_fusion_attention_layout.py (outputs identical with "
                                "and without the rule, symbolic sizes)",
}


def test_every_spec_and_rule_has_a_case():
    specs = differential_check.spec_keys()
    rules = differential_check.rule_names()
    assert specs and rules
    covered = {k for c in CASES for k in c.covers} | set(NO_CASE_YET)
    missing = sorted((set(specs) | set(rules)) - covered)
    assert not missing, f"no differential case covers: {missing}"
    stale = sorted(covered - set(specs) - set(rules))
    assert not stale, f"cases cover what no plugin declares: {stale}"


def test_every_spec_target_exists():
    # flax, equinox and jax.nn are imported (by the cases): a target that
    # still does not resolve can never bind, and the docs would list it.
    dead = sorted(d["target"] for _, d in differential_check.spec_keys().values()
                  if _bindings._resolve(d["target"]) is None)
    assert not dead, f"binding specs whose target does not exist: {dead}"


def test_rule_counters_move_only_when_a_rule_rewrites():
    def counts():
        return {r["name"]: r["applied"] for p in _plugins.registry().plugins for r in p["rules"]}

    x = jax.ShapeDtypeStruct((4, 6), np.float32)
    fn = lambda x: jax.numpy.maximum(x, 0.0)  # noqa: E731
    before = counts()
    jaxonnx.to_onnx(fn, [x], crisp=False, fuse=False)
    assert counts() == before
    jaxonnx.to_onnx(fn, [x], crisp=False)
    after = counts()
    assert {n for n in after if after[n] != before[n]} == {"max0_to_relu"}
    assert after["max0_to_relu"] == before["max0_to_relu"] + 1


def test_error_ratio_measures_against_the_tolerance():
    ratio = differential_check.error_ratio
    want = np.array([[1.0, 2.0], [0.0, 0.0]], np.float32)
    assert ratio(want, want, 1e-5) == 0.0
    assert ratio(np.zeros((0, 3)), np.zeros((0, 3)), 1e-5) == 0.0
    # Normwise along the last axis: an error of 4e-5 on a row of max 2 is one tolerance.
    assert ratio(want + np.array([[4e-5, 0], [0, 0]], np.float32), want, 1e-5) == \
        pytest.approx(4e-5 / (1e-5 * 3), rel=1e-2)
    # A row of zeros has no tolerance to speak of: 0.5 there is a divergence.
    assert ratio(want + np.array([[0, 0], [0.5, 0.5]], np.float32), want, 1e-5) > 1e30
    assert ratio(np.array([np.nan]), np.array([1.0]), 1e-5) == float("inf")
    assert ratio(np.array([np.nan]), np.array([np.nan]), 1e-5) == 0.0
    assert ratio(np.ones(3), np.ones(4), 1e-5) == float("inf")
