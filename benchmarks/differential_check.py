"""The differential check: a program converted with the crisp ops and fusion
rules on (crisp=True / fuse=True) and with both off (crisp=False, fuse=False),
each run in onnxruntime at every graph optimization level, compared with the
other and with JAX on adversarial but finite inputs.

A crisp op or a fused op is right when it agrees with JAX to float rounding on
finite inputs (docs/crisp_ops.md, docs/optimizer.md); onnxruntime's own graph
optimizer must not change that either. The cases are in differential_cases.py;
tests/python/test_differential.py runs them at one seed and
benchmarks/differential.py at more seeds, magnitudes and sizes.

An error is measured against the tolerance: for each element,
|got - want| / (rtol * (|want| + max |want| over its last axis) + tiny), where
the second term makes the tolerance normwise along a row (a softmax or norm
row, a Linear's output features) and `tiny` is the smallest normal number;
the reported number is the largest of these (<= 1 passes). rtol is 1e-5 in
float32 and 1e-11 in float64. A case whose ops are accurate in the absolute
sense only near 0 (documented: Sigmoid, Elu in docs/crisp_ops.md) sets a
`floor` for those outputs, an absolute term rtol * floor. Where a row can cancel
to far below the values summed into it (a Conv of SiLU's output: half its inputs
near 0), the rounding of a sum is bounded by the inputs' magnitude, not the row's:
`floor_per_scale` adds rtol * f * scale, the scale the inputs were drawn at. A
non-finite output
where the reference is finite, or the other way round, is an infinite error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Callable

import jax
import numpy as np
import onnx
import onnxruntime as ort
from jax import export

import jaxonnx
from jaxonnx import _bindings, _plugins

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
RTOL = {F32: 1e-5, F64: 1e-11}

LEVELS = {
    "disable_all": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}

# An input family: gen(rng, shapes, float dtype, scale) -> one array per input.
Family = Callable[[np.random.Generator, list, np.dtype, float], list]


@dataclasses.dataclass(frozen=True)
class Case:
    """One program of the differential check.

    covers: the binding-spec keys (spec_keys) and rule names this program must
        exercise: a spec must bind, a rule must rewrite, in the converted model
        of at least one dtype.
    make(dtype) -> the function to convert (modules built in that dtype).
    inputs: per input (shape, dtype); ints and symbol strings ("B") as dims;
        dtype None is the case's float dtype.
    families: name -> input generator (Family). `scales` are the magnitudes the
        suite runs each family at, `long_scales` what the benchmark adds.
    batches: the values the symbols take (0 and 1 among them where JAX defines them).
    fused: the to_onnx switches of the model under test (the reference model is
        crisp=False, fuse=False).
    independent: the symbols index independent examples, so JAX runs once per
        dtype at the largest size (_input_sets).
    identical: the rules covered only restructure (fold constants, drop an
        Expand): the model under test must give the reference model's bits.
    floor: output label prefix -> absolute tolerance term (the module's doc).
    floor_per_scale: output label prefix -> a tolerance term in units of the
        inputs' scale (the module's doc).
    known: a divergence found and owned elsewhere (the suite expects the failure).
    """
    name: str
    covers: tuple
    make: Callable
    inputs: tuple
    families: dict
    dtypes: tuple = (F32, F64)
    scales: tuple = (1.0,)
    long_scales: tuple = ()
    batches: tuple = (0, 1, 3)
    long_batches: tuple = (2, 5, 17)
    fused: dict = dataclasses.field(default_factory=lambda: {"crisp": True, "fuse": True})
    opset: int = 23
    independent: bool = True
    identical: bool = False
    floor: dict = dataclasses.field(default_factory=dict)
    floor_per_scale: dict = dataclasses.field(default_factory=dict)
    known: str = ""

    def floor_of(self, label, scale=1.0):
        def most(table):
            return max([f for prefix, f in table.items() if label.startswith(prefix)], default=0.0)
        return most(self.floor) + most(self.floor_per_scale) * scale


# ------------------------------------------------------------ what was exercised

def _spec_tag(d, group):
    """What tells binding spec `d` apart from the others of its target: the
    `when` clauses, else params, else operands, that not all of them share."""
    for field in ("when", "params", "operands"):
        common = set.intersection(*(set(g[field]) for g in group))
        own = [x for x in d[field] if x not in common]
        if own:
            return "; ".join(own)
    return "leading" if d["leading_dims_operands"] else "no leading dims"


def spec_keys(registry=None):
    """{key: (primitive, binding dict)} for every binding spec of the loaded
    plugins; the key is the spec's target, with what tells it apart from the
    target's other specs in brackets ("jax.nn.softmax[axis=axis]")."""
    registry = registry or _plugins.registry()
    by_target: dict = {}
    for plugin in registry.plugins:
        for p in plugin["primitives"]:
            for d in p["bindings"]:
                by_target.setdefault(d["target"], []).append((p["name"], d))
    out = {}
    for target, specs in by_target.items():
        group = [d for _, d in specs]
        for prim, d in specs:
            key = target if len(specs) == 1 else f"{target}[{_spec_tag(d, group)}]"
            if key in out:
                raise AssertionError(f"two binding specs share the key {key!r}")
            out[key] = (prim, d)
    return out


def rule_names(registry=None):
    """Every rewrite rule of the loaded plugins, in registry order."""
    registry = registry or _plugins.registry()
    return [r["name"] for plugin in registry.plugins for r in plugin["rules"]]


def _rule_counts():
    return {r["name"]: r["applied"] for plugin in _plugins.registry().plugins
            for r in plugin["rules"]}


@contextlib.contextmanager
def exercised():
    """Collects the spec keys that bound and the rules that rewrote while the
    block converts: yields a set, filled on exit."""
    registry = _plugins.registry()
    compiled = _bindings._specs(registry)
    keys = spec_keys(registry)
    # _specs lists a target's specs in registry order, as spec_keys meets them.
    key_of = {}
    for key, (_, d) in keys.items():
        key_of.setdefault(d["target"], []).append(key)
    names = {id(s): key_of[t][i] for t, specs in compiled.items() for i, s in enumerate(specs)}
    seen: set = set()
    original = _bindings._bind

    def spy(spec, *args, **kwargs):
        out = original(spec, *args, **kwargs)
        if out is not None:
            seen.add(names[id(spec)])
        return out

    before = _rule_counts()
    _bindings._bind = spy
    try:
        yield seen
    finally:
        _bindings._bind = original
        seen.update(n for n, c in _rule_counts().items() if c > before.get(n, 0))


# ------------------------------------------------------------ conversion and runs

def _specs(case, dtype):
    scope = export.SymbolicScope()
    out = []
    for shape, dt in case.inputs:
        text = ", ".join(str(d) for d in shape)
        dims = export.symbolic_shape(text, scope=scope) if shape else ()
        out.append(jax.ShapeDtypeStruct(dims, np.dtype(dt) if dt is not None else dtype))
    return out


def _concrete(case, batch):
    return [tuple(batch if isinstance(d, str) else d for d in shape) for shape, _ in case.inputs]


def _symbolic(case):
    return any(isinstance(d, str) for shape, _ in case.inputs for d in shape)


def _session(model_bytes, level):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = LEVELS[level]
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 4  # a failed run is reported as an error: no log line too
    # onnxruntime fuses DequantizeLinear + MatMul into its MatMulNBits with int8
    # activations unless told (docs/quantization.md); the model's own numerics are checked.
    opts.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", "0")
    return ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])


def error_ratio(got, want, rtol, floor=0.0):
    """The largest |got - want| / tolerance (see the module's doc); 0 for empty."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return math.inf
    if want.size == 0:
        return 0.0
    if not np.issubdtype(want.dtype, np.inexact):
        return 0.0 if np.array_equal(got, want) else math.inf
    g, w = got.astype(np.float64), want.astype(np.float64)
    fg, fw = np.isfinite(g), np.isfinite(w)
    if np.any(fg != fw) or np.any(~fw & ~((np.isnan(g) & np.isnan(w)) | (g == w))):
        return math.inf
    g, w = np.where(fw, g, 0.0), np.where(fw, w, 0.0)
    row = np.max(np.abs(w), axis=-1, keepdims=True) if w.ndim else np.abs(w)
    tiny = np.finfo(want.dtype).tiny
    return float(np.max(np.abs(g - w) / (rtol * (np.abs(w) + row + floor) + tiny)))


@dataclasses.dataclass
class Result:
    """The largest error of one case, and where it was."""
    case: str
    ratio: float = 0.0           # largest error / tolerance over every run
    worst: str = ""              # the run that gave it
    runs: int = 0                # (dtype, family, scale, batch) input sets compared
    per_output: dict = dataclasses.field(default_factory=dict)  # output label -> ratio
    needed: tuple = ()           # what the case covers: must be among `exercised`
    exercised: set = dataclasses.field(default_factory=set)
    errors: list = dataclasses.field(default_factory=list)     # conversions or runs that failed

    def note(self, ratio, where, label):
        if ratio > self.ratio or (math.isnan(ratio) and not math.isnan(self.ratio)):
            self.ratio, self.worst = ratio, where
        self.per_output[label] = max(self.per_output.get(label, 0.0), ratio)

    @property
    def passed(self):
        return not self.errors and self.ratio <= 1.0 and not self.missing

    @property
    def missing(self):
        return sorted(set(self.needed) - self.exercised)


def _labels(tree):
    """One label per leaf of a function's output: its dict key path, or its index."""
    paths, _ = jax.tree_util.tree_flatten_with_path(tree)
    out = []
    for i, (path, _) in enumerate(paths):
        keys = [getattr(k, "key", getattr(k, "idx", None)) for k in path]
        out.append("/".join(str(k) for k in keys) if keys else str(i))
    return out


def _symbolic_axes(model):
    """Per output of `model`, the axes whose dim is a bare symbol ("B"), or None
    for an output with a symbolic expression ("2*B"): it cannot be sliced."""
    out = []
    for o in model.graph.output:
        params = [d.dim_param for d in o.type.tensor_type.shape.dim]
        if any(p and not p.isidentifier() for p in params):
            out.append(None)
        else:
            out.append([i for i, p in enumerate(params) if p])
    return out


def _first(x, axes, n):
    """x restricted to its first n entries along `axes`."""
    index = tuple(slice(0, n) if i in axes else slice(None) for i in range(np.ndim(x)))
    return np.asarray(x)[index]


def _reference(fn, args):
    """fn(*args), or its empty outputs without running it when every output is
    empty (a symbolic size of 0: compiling for it costs more than the rest)."""
    shapes = fn.eval_shape(*args)  # fn is jitted: its trace is cached, not redone
    if all(math.prod(s.shape) == 0 for s in jax.tree_util.tree_leaves(shapes)):
        return jax.tree_util.tree_map(lambda s: np.zeros(s.shape, s.dtype), shapes)
    return fn(*args)


def _input_sets(case, dtype, reference, out_axes, seeds, scales, batches):
    """(where, scale, inputs, JAX's outputs as leaves, labels) of every input set. JAX
    compiles once per shape, the costliest part of the check: when the symbols
    index independent examples (case.independent) and every output shows them
    as bare dims, JAX runs once at the largest size and the smaller sizes take
    the first rows of its inputs and outputs."""
    in_axes = [[i for i, d in enumerate(shape) if isinstance(d, str)] for shape, _ in case.inputs]
    slicing = case.independent and batches != (None,) and None not in out_axes
    for seed in seeds:
        for family, gen in case.families.items():
            for scale in scales:
                big = None
                for batch in sorted(batches, key=lambda b: 0 if b is None else -b):
                    where = (f"{dtype.name} {family} scale={scale:g}"
                             + ("" if batch is None else f" B={batch}") + f" seed={seed}")
                    if slicing and big is not None:
                        args = [_first(a, ax, batch) for a, ax in zip(big[0], in_axes)]
                        want = [_first(w, ax, batch) for w, ax in zip(big[1], out_axes)]
                        yield where, scale, args, want, big[2]
                        continue
                    args = gen(np.random.default_rng(seed), _concrete(case, batch), dtype, scale)
                    try:
                        with jax.enable_x64(dtype == F64):
                            tree = _reference(reference, args)
                    except Exception:  # noqa: BLE001  (JAX does not define it: skipped)
                        continue
                    want = [np.asarray(w) for w in jax.tree_util.tree_leaves(tree)]
                    big = (args, want, _labels(tree))
                    yield where, scale, args, want, big[2]


def run_case(case: Case, *, seeds=(0,), long=False, levels=tuple(LEVELS)) -> Result:
    """Converts the case in each dtype two ways and compares every run."""
    result = Result(case.name, needed=tuple(case.covers))
    scales = case.scales + (case.long_scales if long else ())
    batches = case.batches + (case.long_batches if long else ()) if _symbolic(case) else (None,)
    for dtype in case.dtypes:
        x64 = dtype == F64
        rtol = RTOL[dtype]
        try:
            with jax.enable_x64(x64):
                fn = case.make(dtype)
                reference = jax.jit(fn)  # one compile per shape: eager op-by-op is slower cold
                specs = _specs(case, dtype)
                with exercised() as seen:
                    fused = jaxonnx.to_onnx(fn, specs, opset=case.opset,
                                            enable_double_precision=x64, **case.fused)
                plain = jaxonnx.to_onnx(fn, specs, opset=case.opset, enable_double_precision=x64,
                                        crisp=False, fuse=False)
            result.exercised |= seen
            for m in (fused, plain):
                onnx.checker.check_model(m, full_check=True)
        except Exception as e:  # noqa: BLE001  (a failed conversion is a finding)
            result.errors.append(f"{dtype.name}: conversion: {type(e).__name__}: {e}")
            continue
        sessions = {}
        for name, m in (("fused", fused), ("plain", plain)):
            data = m.SerializeToString()
            for level in levels:
                try:
                    sessions[name, level] = _session(data, level)
                except Exception as e:  # noqa: BLE001
                    result.errors.append(f"{dtype.name}: {name} model at {level}: session: {e}")
        names = {k: [i.name for i in s.get_inputs()] for k, s in sessions.items()}
        sets = _input_sets(case, dtype, reference, _symbolic_axes(fused), seeds, scales, batches)
        for where, scale, args, want, labels in sets:
            result.runs += 1
            outs = {}
            for key, sess in sessions.items():
                try:
                    outs[key] = sess.run(None, dict(zip(names[key], args)))
                except Exception as e:  # noqa: BLE001
                    result.errors.append(
                        f"{where}: {key[0]} model at {key[1]}: run: {str(e)[:300]}")
            for (name, level), got in outs.items():
                for label, g, w in zip(labels, got, want):
                    if g.dtype != w.dtype:
                        result.errors.append(
                            f"{where}: {name} {label}: dtype {g.dtype} != JAX {w.dtype}")
                        continue
                    result.note(error_ratio(g, w, rtol, case.floor_of(label, scale)),
                                f"{where}: {name} model at {level} vs JAX, {label}", label)
                plain_out = outs.get(("plain", level))
                if name == "fused" and plain_out is not None:
                    for label, g, p in zip(labels, got, plain_out):
                        ratio = error_ratio(g, p, rtol, case.floor_of(label, scale))
                        if case.identical and not np.array_equal(g, p, equal_nan=True):
                            ratio = math.inf
                        result.note(ratio, f"{where}: fused vs plain at {level}, {label}", label)
    return result


def describe(result: Result) -> str:
    """A one-paragraph account of a result that did not pass."""
    lines = [f"{result.case}: max error {result.ratio:.3g} x tolerance at {result.worst}"]
    if result.missing:
        lines.append(f"  never exercised: {', '.join(result.missing)} "
                     f"(exercised: {', '.join(sorted(result.exercised)) or 'nothing'})")
    lines += [f"  {e}" for e in result.errors[:8]]
    if len(result.errors) > 8:
        lines.append(f"  ... {len(result.errors) - 8} more errors")
    return "\n".join(lines)
