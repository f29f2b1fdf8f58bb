"""The targets of benchmarks/portability.py: run one ONNX model on one runtime or
tool and compare what it computes with JAX's outputs. No JAX here (the matrix
runs these in a worker process, so that a runtime that crashes costs one cell).

A target is a name in TARGETS; check(target, path, cases) loads the model at
`path` there and runs every case (batch, inputs, JAX's outputs), all through one
loaded model (the batch dim is symbolic). It returns a Cell:
  pass                 every output agrees with JAX within the target's tolerance
  mismatch (err)       it runs but an output differs: err is the largest |got - JAX|
                       relative to max(1, max |JAX|)
  fail (reason)        loading, transforming or running raised: the reason is the
                       message's first lines, shortened
  n/a                  the runtime is not installed

Run as a script, this file is the worker that benchmarks/portability.py and
tests/python/test_portability.py send cells to (Worker, below).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import numpy as np

# name -> what it is (the column's meaning in docs/portability.md).
TARGETS = {
    "ort": "onnxruntime, a default InferenceSession (CPU)",
    "openvino": "OpenVINO, CPU plugin, f32 inference precision, the batch left dynamic",
    "tract": "tract (PyPI `tract`): load, into_model, into_runnable, the batch left symbolic",
    "reference": "onnx.reference.ReferenceEvaluator",
    "symshape": "onnxruntime's SymbolicShapeInference.infer_shapes(auto_merge=True), "
                "then the inferred model in onnxruntime",
    "quantize": "onnxruntime.quantization.quantize_dynamic (int8 weights), then onnxruntime",
    "onnxsim": "onnxsim.simplify, then the simplified model in onnxruntime",
    "onnxslim": "onnxslim.slim, then the slimmed model in onnxruntime",
}
# The module each target needs (a target whose module is missing is n/a).
NEEDS = {"ort": "onnxruntime", "openvino": "openvino", "tract": "tract", "reference": "onnx",
         "symshape": "onnxruntime", "quantize": "onnxruntime", "onnxsim": "onnxsim",
         "onnxslim": "onnxslim"}
# Largest |got - JAX| / max(1, max |JAX|) that passes: float rounding, except for
# int8 weights (quantize), where "runs and stays near JAX" is the bar.
RTOL = 1e-4
TOLERANCE = {"quantize": 0.1}


@dataclasses.dataclass
class Cell:
    status: str            # pass | mismatch | fail | n/a
    detail: str = ""       # fail: the shortened message; mismatch: at which batch
    err: float | None = None

    def text(self):
        if self.status == "mismatch":
            return f"mismatch {self.err:.1e}"
        return self.status


def installed(target):
    return importlib.util.find_spec(NEEDS[target]) is not None


# ----------------------------------------------------------------- messages

_NOISE = [
    (re.compile(r"\[ONNXRuntimeError\] : \d+ : \w+ : "), ""),
    # onnxruntime's C++ location and full signature before the condition that failed
    (re.compile(r"/onnxruntime_src/\S+:\d+ [^\n]*?\)\s+(?=\S)"), ""),
    (re.compile(r"Exception from src/\S+:\d+:\s*"), ""),
    (re.compile(r"Check '([^']*)' failed at src/\S+:\d+:\s*"), r"Check '\1' failed: "),
    (re.compile(r"\s+"), " "),
]


def short(e, limit=300):
    """An exception as one line: type, message (noise removed) and, for a bare
    assert, where it failed."""
    msg = str(e)
    # onnxruntime nests a failure inside If/Loop in "Status Message:"s: keep the innermost
    nodes = re.findall(r"running (\w+) node", msg)
    if "Status Message: " in msg and nodes:
        msg = f"{nodes[-1]} node: " + msg.rsplit("Status Message: ", 1)[1]
    # tract: the cause chain, without its backtrace
    msg = re.sub(r"\s*Stack backtrace:.*", "", msg, flags=re.S)
    msg = re.sub(r"\n\s*Caused by:\s*\n", " | ", msg)
    msg = re.sub(r"\n\s*\d+: ", " | ", msg)
    for pattern, repl in _NOISE:
        msg = pattern.sub(repl, msg)
    msg = msg.strip()
    if not msg:  # a bare assert: say where
        tb = traceback.extract_tb(e.__traceback__)
        if tb:
            f = tb[-1]
            msg = f"in {f.name} ({os.path.basename(f.filename)}:{f.lineno})"
    text = f"{type(e).__name__}: {msg}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ------------------------------------------------------------------ runners

def _ort_session(path):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 4  # the exception carries the message; no log lines
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _ort_runner(path):
    sess = _ort_session(path)
    names = [i.name for i in sess.get_inputs()]
    return lambda xs: sess.run(None, dict(zip(names, xs)))


def _openvino_runner(path):
    import openvino as ov
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(path)), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()

    def run(xs):
        result = request.infer(list(xs))
        return [np.asarray(result[o]) for o in compiled.outputs]
    return run


def _tract_runner(path):
    import tract
    model = tract.onnx().load(str(path)).into_model().into_runnable()

    def run(xs):
        return [t.to_numpy() for t in model.run([np.ascontiguousarray(x) for x in xs])]
    return run


def _reference_runner(path):
    import onnx
    from onnx.reference import ReferenceEvaluator
    ref = ReferenceEvaluator(onnx.load(str(path)))
    names = ref.input_names
    return lambda xs: ref.run(None, dict(zip(names, xs)))


def _symshape_runner(path, tmp):
    import onnx
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
    inferred = SymbolicShapeInference.infer_shapes(onnx.load(str(path)), auto_merge=True)
    if inferred is None:
        raise RuntimeError("infer_shapes returned None (incomplete inference)")
    out = os.path.join(tmp, "inferred.onnx")
    onnx.save(inferred, out)
    shapes = [[d.dim_value if d.HasField("dim_value") else None
               for d in o.type.tensor_type.shape.dim] for o in inferred.graph.output]
    run = _ort_runner(out)

    def checked(xs):
        got = run(xs)
        for i, (g, dims) in enumerate(zip(got, shapes)):  # what it inferred must hold
            if len(dims) != g.ndim or any(d not in (None, n) for d, n in zip(dims, g.shape)):
                raise AssertionError(f"inferred shape {dims} of output {i}, runs as {list(g.shape)}")
        return got
    return checked


def _float_weight_depths(model):
    """The subgraph depth (0: the main graph) of every MatMul and Conv whose weight
    is a float32 initializer, over the model and its If/Loop bodies: what
    quantize_dynamic turns into integer ops at depth 0 only."""
    import onnx
    floats, depths = set(), []

    def visit(graph, depth):
        floats.update(t.name for t in graph.initializer if t.data_type == onnx.TensorProto.FLOAT)
        for node in graph.node:
            if node.op_type in ("MatMul", "Conv") and len(node.input) > 1 and node.input[1] in floats:
                depths.append(depth)
            for a in node.attribute:
                for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    visit(g, depth + 1)
    visit(model.graph, 0)
    return depths


def _quantize_runner(path, tmp):
    import onnx
    from onnxruntime.quantization import quantize_dynamic
    out = os.path.join(tmp, "quantized.onnx")
    quantize_dynamic(str(path), out)
    # A model that runs is not enough: weights quantize_dynamic cannot reach (it skips
    # If and Loop bodies) stay float, and the user gets a float model back.
    nested = sum(1 for d in _float_weight_depths(onnx.load(out)) if d > 0)
    if nested:
        total = len(_float_weight_depths(onnx.load(str(path))))
        raise AssertionError(f"{nested} of {total} MatMul/Conv weights left float inside If/Loop bodies")
    return _ort_runner(out)


def _onnxsim_runner(path, tmp):
    import onnx
    import onnxsim
    simplified, _ = onnxsim.simplify(onnx.load(str(path)))
    out = os.path.join(tmp, "simplified.onnx")
    onnx.save(simplified, out)
    return _ort_runner(out)


def _onnxslim_runner(path, tmp):
    import onnx
    import onnxslim
    slimmed = onnxslim.slim(onnx.load(str(path)))
    out = os.path.join(tmp, "slimmed.onnx")
    onnx.save(slimmed, out)
    return _ort_runner(out)


_RUNNERS = {"ort": lambda p, t: _ort_runner(p), "openvino": lambda p, t: _openvino_runner(p),
            "tract": lambda p, t: _tract_runner(p), "reference": lambda p, t: _reference_runner(p),
            "symshape": _symshape_runner, "quantize": _quantize_runner,
            "onnxsim": _onnxsim_runner, "onnxslim": _onnxslim_runner}


# ------------------------------------------------------------------ checking

def error(got, want):
    """Largest |got - want| relative to max(1, max |want|) over the outputs
    (inf where a shape differs or NaNs don't line up)."""
    worst = 0.0
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return float("inf")
        if g.size == 0:
            continue
        if w.dtype.kind in "biu":
            worst = max(worst, 0.0 if np.array_equal(g, w) else float("inf"))
            continue
        g, w = g.astype(np.float64), w.astype(np.float64)
        if not np.array_equal(np.isnan(g), np.isnan(w)):
            return float("inf")
        ok = ~np.isnan(w)
        scale = max(1.0, float(np.abs(w[ok]).max(initial=0.0)))
        worst = max(worst, float(np.abs(g[ok] - w[ok]).max(initial=0.0)) / scale)
    return worst


def check(target, path, cases):
    """Runs the model at `path` on `target` for each (batch, inputs, JAX outputs) in
    `cases`; a Cell."""
    if not installed(target):
        return Cell("n/a", f"{NEEDS[target]} is not installed")
    with tempfile.TemporaryDirectory(prefix="portability-") as tmp:
        try:
            run = _RUNNERS[target](path, tmp)
        except Exception as e:
            return Cell("fail", short(e))
        worst, where = 0.0, ""
        for batch, xs, want in cases:
            try:
                got = run(xs)
            except Exception as e:
                return Cell("fail", f"at B={batch}: {short(e)}")
            if len(got) != len(want):
                return Cell("fail", f"at B={batch}: {len(got)} outputs, JAX has {len(want)}")
            for i, (g, w) in enumerate(zip(got, want)):
                if np.shape(g) != np.shape(w):
                    return Cell("fail", f"at B={batch}: output {i} has shape {list(np.shape(g))}, "
                                        f"JAX's {list(np.shape(w))}")
            err = error(got, want)
            if err > worst:
                worst, where = err, f"largest at B={batch}"
        if worst > TOLERANCE.get(target, RTOL):
            return Cell("mismatch", where, worst)
        return Cell("pass", err=worst)


# ------------------------------------------------------------------ the worker

MARK = "@@cell "  # prefixes the worker's answer (anything else on its stdout is noise)


def load_cases(data_path):
    """(batch, inputs, outputs) per batch from the .npz benchmarks/portability.py writes."""
    data = np.load(data_path)
    batches = sorted({int(k.split("_")[0][1:]) for k in data.files})

    def arrays(b, kind):
        n = sum(1 for k in data.files if k.startswith(f"b{b}_{kind}"))
        return [data[f"b{b}_{kind}{i}"] for i in range(n)]
    return [(b, arrays(b, "in"), arrays(b, "out")) for b in batches]


def serve():
    """One JSON job per stdin line ({target, model, data}); one answer per job on
    stdout, prefixed by @@cell (runtimes may print lines of their own)."""
    for line in sys.stdin:
        job = json.loads(line)
        try:
            cell = check(job["target"], job["model"], load_cases(job["data"]))
        except Exception as e:  # a bug here must not look like a runtime's failure
            cell = Cell("fail", f"harness: {short(e)}")
        print(MARK + json.dumps(dataclasses.asdict(cell)), flush=True)


class Worker:
    """This file run as a subprocess (serve), answering one cell per job: a runtime
    that crashes or hangs costs that cell only. Restarted after a crash or a
    timeout; a crash's cell says why (a Rust panic's message where there is one)."""

    def __init__(self, timeout):
        self.timeout = timeout
        self.proc = None

    def _start(self):
        self.log = tempfile.NamedTemporaryFile("w+", prefix="portability-worker-", suffix=".log")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc, self.lines), daemon=True).start()

    @staticmethod
    def _read(proc, lines):
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    def _stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def run(self, target, model, data):
        if self.proc is None:
            self._start()
        self.proc.stdin.write(json.dumps({"target": target, "model": str(model), "data": str(data)}) + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self._stop()
                return {"status": "fail", "detail": f"timeout: no answer in {self.timeout:.0f} s"}
            if line is None:  # the worker died
                code = self.proc.wait()
                self.log.seek(0)
                log = self.log.read()
                self.proc = None
                how = f"signal {-code}" if code < 0 else f"exit {code}"
                # A Rust panic says where and why on the line after "panicked at".
                panic = re.search(r"panicked at ([^\n]*)\n([^\n]*)", log)
                why = f"panicked at {panic[1]} {panic[2]}" if panic else " ".join(log.split()[-30:])
                return {"status": "fail", "detail": f"crash ({how}): {why[-300:]}"}
            if line.startswith(MARK):
                return json.loads(line[len(MARK):])

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        self.proc = None


if __name__ == "__main__":
    serve()
