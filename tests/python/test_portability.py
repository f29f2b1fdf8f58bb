"""The fast subset of the portability matrix (benchmarks/portability.py has all of it;
docs/portability.md its latest table and the diagnosed causes): small models through
every installed runtime and tool, compared with JAX at a symbolic batch of 1 and 3.

A regression gate: what passes today must keep passing. Each known failure is
xfail(strict=True) naming its cause, so that a fix (in a lowering or in the runtime)
shows up as XPASS and the mark is removed. A runtime that is not installed skips
its cells (scripts/requirements.txt installs them all).
"""

import sys
from pathlib import Path

import jax
import numpy as np
import onnx
import pytest

import jaxonnx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "examples"))

import _common  # noqa: E402
import mlp  # noqa: E402
import portability_models as pm  # noqa: E402
import portability_targets as pt  # noqa: E402

BATCHES = (1, 3)

# The causes, in the words of docs/portability.md (one line each).
SYMSHAPE_REDUCE = ("symbolic shape inference infers no shape for ReduceMax with axes as an input "
                   "(opset >= 18), then fails at the next elementwise op")
LOOP = "tract does not implement Loop"
REF_SCAN = "ReferenceEvaluator concatenates Loop scan outputs of rank >= 2 (np.vstack) instead of stacking"
QUANT_LOOP = ("quantize_dynamic renames a quantized Transpose's output and loses the value a Loop "
              "body reads from the outer scope")
BOOL_REDUCE = "tract cannot ReduceMax a bool tensor (the NaN test of jnp.max; valid from opset 20)"
PAD_NEG = "negative Pad pads (allowed by the spec): tract panics, ReferenceEvaluator refuses them"
ALL = tuple(pt.TARGETS)

# name -> (the callable, its Inputs, the targets it runs on, {target: known failure}).
# The MLP and the BERT encoder run everywhere; each probe (the smallest program
# showing one failure pattern) runs where it fails, and in onnxruntime.
CASES = {
    "mlp": (lambda: mlp.make_model(small=True), mlp.inputs(small=True), ALL, {}),
    "bert": (pm.bert(small=True).make, pm.bert(small=True).inputs(), ALL, {}),
    # Attention over a symbolic batch, once and twice: the default target decomposes it
    # (symbolic shape inference misreads the standard Attention op, quantize_dynamic
    # hides weights behind its empty-size If, tract stops at a second If).
    "attn_guard": (None, None, ("ort", "tract", "symshape", "openvino"), {}),
    "attn_2x": (None, None, ("ort", "tract", "openvino", "reference", "quantize", "symshape"), {}),
    "attn_matmul3": (None, None, ("ort", "openvino"), {}),
    "scan_stack": (None, None, ("ort", "reference", "tract", "openvino"),
                   {"reference": REF_SCAN, "tract": LOOP}),
    "embed_scan": (None, None, ("ort", "quantize"), {"quantize": QUANT_LOOP}),
    "max_nan": (None, None, ("ort", "tract", "symshape"), {"tract": BOOL_REDUCE, "symshape": SYMSHAPE_REDUCE}),
    "top_k": (None, None, ("ort", "tract"), {}),
    "slice_T": (None, None, ("ort", "tract"), {}),
    "pad_negative": (None, None, ("ort", "tract", "reference"), {"tract": PAD_NEG, "reference": PAD_NEG}),
}


def _model(name):
    make, inputs, _, _ = CASES[name]
    if make is None:
        probe = pm.PROBES[name]()
        make, inputs = probe.make, probe.inputs()
    return make, inputs


def _sample(inputs, batch):
    if all(isinstance(i, pm.Input) for i in inputs):
        return pm.sample(inputs, batch, seed=batch)
    return _common.sample(inputs, batch, seed=batch)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """name -> (model path, data path): each model converted once per module."""
    cache, work = {}, tmp_path_factory.mktemp("portability")

    def get(name):
        if name not in cache:
            make, inputs = _model(name)
            fn = make()
            data = {}
            for b in BATCHES:
                xs = _sample(inputs, b)
                data.update({f"b{b}_in{i}": x for i, x in enumerate(xs)})
                data.update({f"b{b}_out{i}": np.asarray(w)
                             for i, w in enumerate(jax.tree.leaves(jax.jit(fn)(*xs)))})
            np.savez(work / f"{name}.npz", **data)
            # The same instance: building an nnx module costs more than converting it.
            onnx.save(jaxonnx.to_onnx(fn, _common.specs(inputs)), work / f"{name}.onnx")
            cache[name] = (work / f"{name}.onnx", work / f"{name}.npz")
        return cache[name]
    return get


@pytest.fixture(scope="module")
def worker():
    # Cells run in a subprocess: tract aborts the process on a negative Pad.
    w = pt.Worker(timeout=120)
    yield w
    w.close()


def _params():
    return list(_param_iter())


def _param_iter():
    for name, (_, _, targets, known) in CASES.items():
        for t in targets:
            marks = [pytest.mark.xfail(strict=True, reason=known[t])] if t in known else []
            yield pytest.param(name, t, id=f"{name}-{t}", marks=marks)


@pytest.mark.parametrize("name, target", _params())
def test_runs_and_matches_jax(name, target, converted, worker):
    if not pt.installed(target):
        pytest.skip(f"{pt.NEEDS[target]} is not installed (pip install -r scripts/requirements.txt)")
    model, data = converted(name)
    cell = worker.run(target, model, data)
    detail = f"max error {cell['err']:.2e} ({cell['detail']})" if cell["status"] == "mismatch" else cell["detail"]
    assert cell["status"] == "pass", f"{name} on {target}: {cell['status']}: {detail}"


def test_a_crash_costs_one_cell(converted, worker):
    """The worker survives a runtime that aborts: the crash is a cell, the next cell runs."""
    if not pt.installed("tract"):
        pytest.skip("tract is not installed (pip install -r scripts/requirements.txt)")
    model, data = converted("pad_negative")
    crash = worker.run("tract", model, data)
    if crash["status"] == "pass":
        pytest.skip("tract runs a negative Pad now: no crash to test with")
    assert crash["status"] == "fail"
    model, data = converted("mlp")
    assert worker.run("ort", model, data)["status"] == "pass"


def test_a_wrong_output_is_a_mismatch(tmp_path):
    """check() compares with JAX: a model computing something else is a mismatch."""
    x = np.ones((2, 3), np.float32)
    model = jaxonnx.to_onnx(lambda v: v * 2.0, [jax.ShapeDtypeStruct((2, 3), np.float32)])
    path = tmp_path / "double.onnx"
    onnx.save(model, path)
    assert pt.check("ort", path, [(2, [x], [x * 2.0])]).status == "pass"
    cell = pt.check("ort", path, [(2, [x], [x * 3.0])])
    assert cell.status == "mismatch" and cell.err == pytest.approx(1.0 / 3.0)
    assert pt.check("ort", path, [(2, [x], [x[:1] * 2.0])]).status == "fail"


def test_the_benchmark_runs_end_to_end(tmp_path, capsys):
    """benchmarks/portability.py on one model: a table, a JSON record, the same report from it."""
    import json

    import portability
    out = tmp_path / "run.json"
    assert portability.main(["--models", "mlp", "--targets", "ort,reference", "--converters", "jaxonnx",
                             "--markdown", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| mlp | pass | pass |" in printed and "| jaxonnx | 1/1 | 1/1 | 2/2 |" in printed
    run = json.loads(out.read_text())
    assert run["results"]["mlp"]["cells"]["jaxonnx"]["ort"]["status"] == "pass"
    assert portability.main(["--report", str(out), "--markdown"]) == 0
    assert capsys.readouterr().out == printed
