"""jaxonnx.testing: the checks jaxonnx's own tests make, for plugin authors.

    from jaxonnx import testing
    testing.check(fn, [("B", 8)], plugin_dirs=[...])      # parity, validity, determinism
    testing.expect_graph(model, ["Transpose -> Conv -> Relu"], match="exact")
    testing.check_plugin("build/my_plugin.so")           # descriptor, test equations

Testcases as data, expanded into float32/float64 x static/symbolic variants:

    TESTCASES = [testing.Testcase("softsign", fn, [("B", 8)], expected_ops=["Softsign"])]
    def test_generated(jaxonnx_case):        # run with `pytest -p jaxonnx.testing`
        jaxonnx_case.run()

The pytest plugin (`-p jaxonnx.testing`, or `pytest_plugins = ["jaxonnx.testing"]`
in a conftest.py) parametrizes every test taking `jaxonnx_case` over the
variants of its module's TESTCASES, and runs them in a child process per test
module (_case_server.py), so a plugin that crashes fails the test with the
signal and the primitive instead of killing pytest ($JAXONNX_TESTING_ISOLATE=0
runs them in the pytest process).

Needs onnxruntime (the `test` extra).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import re
import select
import struct
import subprocess
import sys
import tempfile
import warnings
import zlib
from typing import Any, Callable, Sequence

import jax
import numpy as np
import onnx
from jax import export

import jaxonnx
from jaxonnx import _core, _plugins, _preflight

__all__ = ["check", "expect_graph", "check_plugin", "ort_levels", "ort_session", "ORT_LEVELS",
           "Testcase", "Variant", "Case", "expand", "VARIANTS", "BATCHES", "STATIC_BATCH"]

# Concrete sizes a symbolic dim takes when the model runs, and the size it takes
# in a static variant.
BATCHES = (1, 7)
STATIC_BATCH = 3


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way of converting a testcase: float dtype, and symbolic dims kept or fixed."""
    dtype: str = "float32"
    symbolic: bool = True

    def __str__(self):
        return f"{'f64' if self.dtype == 'float64' else 'f32'}-" \
               f"{'symbolic' if self.symbolic else 'static'}"


VARIANTS = tuple(Variant(d, s) for d in ("float32", "float64") for s in (False, True))


# ---------------------------------------------------------------- input specs

def _split_spec(spec):
    """An input spec is a shape tuple (float, in the variant's dtype) or
    (shape, dtype) for a fixed dtype, e.g. (("B", 4), "int32")."""
    if isinstance(spec, (tuple, list)) and len(spec) == 2 and isinstance(spec[0], (tuple, list)):
        return tuple(spec[0]), np.dtype(spec[1])
    if isinstance(spec, (tuple, list)):
        return tuple(spec), None
    raise TypeError(f"an input spec is a shape tuple such as ('B', 8) or (shape, dtype); "
                    f"got {spec!r}")


def _has_symbol(specs):
    return any(isinstance(d, str) for s in specs for d in _split_spec(s)[0])


def _concrete(shape, batch):
    return tuple(batch if isinstance(d, str) else d for d in shape)


def _resolve(specs, variant):
    """(shapes, dtypes) of the inputs in `variant`: symbols stay or become STATIC_BATCH."""
    shapes, dtypes = [], []
    for spec in specs:
        shape, dtype = _split_spec(spec)
        shapes.append(shape if variant.symbolic else _concrete(shape, STATIC_BATCH))
        dtypes.append(dtype if dtype is not None else np.dtype(variant.dtype))
    return shapes, dtypes


def _shape_dtype_structs(shapes, dtypes):
    scope = export.SymbolicScope()
    out = []
    for shape, dtype in zip(shapes, dtypes):
        if any(isinstance(d, str) for d in shape):
            dims = export.symbolic_shape(", ".join(str(d) for d in shape), scope=scope)
        else:
            dims = tuple(int(d) for d in shape)
        out.append(jax.ShapeDtypeStruct(dims, dtype))
    return out


def packed(x):
    """`x` as the model carries it: a complex array as float[..., 2] (real,
    imaginary), anything else as it is."""
    x = np.asarray(x)
    if not np.iscomplexobj(x):
        return x
    return np.stack([x.real, x.imag], axis=-1)


def random_input(shape, dtype, rng):
    """Standard-normal floats (complex: both parts), small integers, random booleans."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(size=shape) + 1j * rng.standard_normal(size=shape)).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -20), min(info.max, 20) + 1, size=shape).astype(dtype)
    return rng.standard_normal(size=shape).astype(dtype)


def _tolerance(dtype):
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        return 1e-9, 1e-9
    if dtype == np.float16 or dtype.name == "bfloat16":
        return 1e-2, 1e-2
    return 1e-5, 1e-5


def _x64(on):
    return jax.enable_x64(True) if on else contextlib.nullcontext()


def _assert_close(got, expected, what, rtol=None, atol=None):
    expected = np.asarray(expected)
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != {expected.dtype}"
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    if np.issubdtype(expected.dtype, np.inexact):
        r, a = _tolerance(expected.dtype)
        np.testing.assert_allclose(got, expected, rtol=rtol or r, atol=atol or a, equal_nan=True,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(got, expected, err_msg=what)


# ------------------------------------------------------- onnxruntime levels

# onnxruntime's graph optimization levels, by the names $JAXONNX_TEST_ORT_LEVELS takes.
ORT_LEVELS = ("disabled", "basic", "extended", "all")
ORT_LEVELS_ENV_VAR = "JAXONNX_TEST_ORT_LEVELS"


def ort_levels(key: str = "") -> tuple[list[str], str]:
    """The onnxruntime optimization levels a check runs at: (the levels of the
    optimized model, the level of the raw lowering).

    $JAXONNX_TEST_ORT_LEVELS: "every" (the default: the optimized model at all
    four levels, the raw one with none), "fast" (the optimized model at "all",
    the default session's level; the raw one at "disabled" or "basic", picked
    by `key`, at no extra cost), or a comma-separated list of ORT_LEVELS for
    the optimized model. The raw lowering never runs at "extended": there
    onnxruntime 1.31/1.32 fuses float64 scales into a float32 alpha, which
    only the optimizer's rules guard against (onnx_fusion's f64_scale_*).
    """
    value = os.environ.get(ORT_LEVELS_ENV_VAR, "every").strip()
    if value == "every":
        return list(ORT_LEVELS), "disabled"
    if value == "fast":
        return ["all"], ORT_LEVELS[zlib.crc32(key.encode()) % 2]
    levels = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in levels if v not in ORT_LEVELS]
    if unknown or not levels:
        raise ValueError(f"${ORT_LEVELS_ENV_VAR}={value!r}: use 'every', 'fast' or a comma list "
                         f"of {ORT_LEVELS}")
    return levels, "disabled"


def ort_session(model, level: str = "all"):
    """An onnxruntime CPU session of `model` (bytes or ModelProto) at `level` (ORT_LEVELS)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = {
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[level]
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def _test_key():
    """The running pytest test's id (pytest sets it), else ""."""
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]


# ---------------------------------------------------------------- check

def check(fn: Callable, input_specs: Sequence, *, plugin_dirs=None, plugin_overrides=None,
          variants: Sequence[Variant] | None = None, batches=BATCHES, make_inputs=None,
          rtol=None, atol=None, opset: int = 23, expect: Sequence[str] | None = None,
          expect_options: dict | None = None) -> dict:
    """Converts `fn` in each variant and asserts what jaxonnx's own tests assert:

    - onnx.checker.check_model(full_check=True) passes;
    - onnxruntime's outputs match JAX's (dtype, shape, values within float rounding;
      integers exact), at each of `batches` for a symbolic dim, at each graph
      optimization level of onnxruntime (ort_levels: $JAXONNX_TEST_ORT_LEVELS);
    - the optimized model gives the raw lowering's (optimize=False) results;
    - converting twice gives byte-identical models.

    input_specs: one per positional argument of fn: a shape tuple of ints and
        symbol strings ("B"), float in the variant's dtype; or (shape, dtype) for
        a fixed dtype.
    variants: default every float32/float64 x static/symbolic combination (the
        symbolic ones only when a spec has a symbol).
    make_inputs(shape, dtype, rng): custom input data (default random_input).
    expect: expect_graph paths every optimized model must match
        (expect_options: its keyword arguments).
    Returns {Variant: the optimized onnx.ModelProto}.
    """
    if variants is None:
        variants = [v for v in VARIANTS if not v.symbolic or _has_symbol(input_specs)]
    _assert_preflight_passed(plugin_dirs, plugin_overrides)

    models = {}
    for variant in variants:
        shapes, dtypes = _resolve(input_specs, variant)
        x64 = variant.dtype == "float64" or any(
            np.dtype(d).itemsize == 8 and np.dtype(d).kind != "c" or np.dtype(d) == np.complex128
            for d in dtypes)
        opts = dict(enable_double_precision=x64, opset=opset, plugin_dirs=plugin_dirs,
                    plugin_overrides=plugin_overrides)
        with _x64(x64):
            specs = _shape_dtype_structs(shapes, dtypes)
            data = jaxonnx.to_onnx(fn, specs, return_mode="bytes", **opts)
            again = jaxonnx.to_onnx(fn, specs, return_mode="bytes", **opts)
            raw = jaxonnx.to_onnx(fn, specs, return_mode="bytes", optimize=False, **opts)
        assert data == again, f"{variant}: two conversions gave different bytes"
        model = onnx.load_from_string(data)
        onnx.checker.check_model(model, full_check=True)
        onnx.checker.check_model(onnx.load_from_string(raw), full_check=True)
        levels, raw_level = ort_levels(f"{_test_key()} {variant}")
        sessions = {level: ort_session(data, level) for level in levels}
        raw_sess = ort_session(raw, raw_level)
        names = [i.name for i in raw_sess.get_inputs()]
        rng = np.random.default_rng(0)
        gen = make_inputs or random_input
        for batch in (batches if variant.symbolic else (STATIC_BATCH,)):
            args = [gen(_concrete(s, batch), d, rng) for s, d in zip(shapes, dtypes)]
            with _x64(x64):
                expected = jax.tree_util.tree_leaves(fn(*args))
            feed = dict(zip(names, map(packed, args)))  # complex inputs go in packed
            unoptimized = raw_sess.run(None, feed)
            expected = [packed(e) for e in expected]
            for level, sess in sessions.items():
                got = sess.run(None, feed)
                assert len(got) == len(expected), \
                    f"{variant}: the model has {len(got)} outputs, JAX gives {len(expected)}"
                where = f"{variant} batch {batch} onnxruntime level {level!r}"
                for k, (g, u, e) in enumerate(zip(got, unoptimized, expected)):
                    _assert_close(g, e, f"{where} output {k} vs JAX", rtol, atol)
                    _assert_close(g, u, f"{where} output {k} optimized vs raw", rtol, atol)
        if expect:
            expect_graph(model, expect, **(expect_options or {}))
        models[variant] = model
    return models


def _assert_preflight_passed(plugin_dirs, plugin_overrides):
    """A plugin of `plugin_dirs` that crashed or hung its preflight (so jaxonnx
    skipped it) fails the test with the reason, signal and primitive, instead of
    a confusing "no plugin lowers" later."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _plugins.PluginWarning)
        reg = _plugins.registry(plugin_dirs, plugin_overrides)
    ours = {os.path.realpath(os.fspath(d)) for d in (plugin_dirs or [])}
    failed = [f"{path}: {reason}" for path, reason in reg.diagnostics
              if os.path.dirname(os.path.realpath(path)) in ours
              and os.path.realpath(path) in _preflight.refused]
    assert not failed, "a plugin failed jaxonnx's preflight:\n  " + "\n  ".join(failed)


# ---------------------------------------------------------------- expect_graph

_ARROW = re.compile(r"\s*->\s*")


def _graph_of(model):
    return model.graph if isinstance(model, onnx.ModelProto) else model


def _used_names(graph):
    """Every value name a node of `graph` (or of its subgraphs) reads."""
    used = set()
    for node in graph.node:
        used.update(node.input)
        for attr in node.attribute:
            for g in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                used |= _used_names(g)
    return used


def _dims(value_info):
    shape = value_info.type.tensor_type.shape
    return tuple(d.dim_param if d.HasField("dim_param") else
                 d.dim_value if d.HasField("dim_value") else None for d in shape.dim)


def _find_paths(graph, ops):
    """Every chain of nodes with op types `ops` where each node reads an output of the
    one before; as lists of node indices."""
    consumers: dict[str, list[int]] = {}
    for i, node in enumerate(graph.node):
        for name in node.input:
            if name:
                consumers.setdefault(name, []).append(i)
    found = []

    def walk(path):
        if len(path) == len(ops):
            found.append(list(path))
            return
        nexts = sorted({j for out in graph.node[path[-1]].output for j in consumers.get(out, [])})
        for j in nexts:
            if graph.node[j].op_type == ops[len(path)] and j not in path:
                walk(path + [j])

    for i, node in enumerate(graph.node):
        if node.op_type == ops[0]:
            walk([i])
    return found


def expect_graph(model, paths: Sequence[str] = (), *, match: str = "contains",
                 counts: dict[str, int] | None = None, absent: Sequence[str] = (),
                 inputs: Sequence[Sequence[Any]] | None = None,
                 outputs: Sequence[Sequence[Any]] | None = None,
                 no_unused_inputs: bool = False) -> None:
    """Asserts the structure of a model's main graph.

    paths: "A -> B -> C" strings: a chain of nodes, each reading an output of the
        one before (other inputs may come from anywhere).
    match: "contains": each path occurs somewhere (distinct paths for repeated
        strings); "exact": moreover each runs from a node reading a graph input
        to one writing a graph output, and together they cover every node (paths
        may share nodes: ["Slice -> Add", "Slice -> Add"] is two Slices into one Add).
    counts: {op_type: exact number of nodes}.
    absent: op types that must not occur.
    inputs / outputs: per graph input/output, its dims: ints, symbol names ("B"),
        or None for "any".
    no_unused_inputs: every graph input is read by a node (or is an output).
    Raises AssertionError describing the graph when something does not hold.
    """
    if match not in ("contains", "exact"):
        raise ValueError(f'match must be "contains" or "exact"; got {match!r}')
    graph = _graph_of(model)
    ops = [n.op_type for n in graph.node]
    where = f"graph ops: {' -> '.join(ops) if ops else '(none)'}"
    covered: set[int] = set()
    chosen: list[list[int]] = []
    graph_inputs = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    graph_outputs = {o.name for o in graph.output}
    for text in paths:
        want = [p for p in _ARROW.split(text.strip()) if p]
        assert want, f"empty path {text!r}"
        candidates = [c for c in _find_paths(graph, want) if c not in chosen]
        if match == "exact":
            candidates = [
                c for c in candidates
                if any(n in graph_inputs for n in graph.node[c[0]].input)
                and any(n in graph_outputs for n in graph.node[c[-1]].output)]
        assert candidates, f"no path {text!r} ({match}); {where}"
        best = max(candidates, key=lambda c: len(set(c) - covered))  # first of the widest
        chosen.append(best)
        covered |= set(best)
    if match == "exact":
        missing = [f"{i}:{ops[i]}" for i in range(len(ops)) if i not in covered]
        assert not missing, f"nodes on no expected path: {missing}; {where}"
    for op, n in (counts or {}).items():
        assert ops.count(op) == n, f"{op}: {ops.count(op)} nodes, expected {n}; {where}"
    for op in absent:
        assert op not in ops, f"{op} should not occur; {where}"
    for kind, want, got in (("input", inputs, graph.input), ("output", outputs, graph.output)):
        if want is None:
            continue
        assert len(got) == len(want), f"{len(got)} graph {kind}s, expected {len(want)}"
        for k, (dims, vi) in enumerate(zip(want, got)):
            have = _dims(vi)
            assert len(have) == len(dims) and all(
                w is None or w == h for w, h in zip(dims, have)), \
                f"graph {kind} {k} ({vi.name}) has dims {have}, expected {tuple(dims)}"
    if no_unused_inputs:
        used = _used_names(graph) | graph_outputs
        unused = [i.name for i in graph.input if i.name not in used]
        assert not unused, f"graph inputs read by no node: {unused}"


# ---------------------------------------------------------------- check_plugin

def _jax_primitive_names():
    """The primitives JAX defines: every Primitive object its modules created,
    plus names older JAX versions used (pjit, core_call)."""
    import gc

    import jax.lax  # noqa: F401  (importing creates the primitives)
    import jax.numpy  # noqa: F401
    import jax.random  # noqa: F401
    import jax.scipy.linalg  # noqa: F401
    from jax.extend.core import Primitive
    return {o.name for o in gc.get_objects() if isinstance(o, Primitive)} | {"pjit", "core_call"}


def _elf_exports(path):
    """Names of the defined global/weak dynamic symbols of an ELF file (Linux);
    None when the file is not ELF."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF":
        return None
    is64, little = data[4] == 2, data[5] == 1
    e = "<" if little else ">"
    if is64:
        shoff, = struct.unpack_from(e + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(e + "HH", data, 0x3A)
    else:
        shoff, = struct.unpack_from(e + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(e + "HH", data, 0x2E)

    def section(i):
        base = shoff + i * shentsize
        if is64:
            _, typ, _, _, off, size, link, _, _, entsize = struct.unpack_from(e + "IIQQQQIIQQ",
                                                                              data, base)
        else:
            _, typ, _, _, off, size, link, _, _, entsize = struct.unpack_from(e + "IIIIIIIIII",
                                                                              data, base)
        return typ, off, size, link, entsize

    names = []
    for i in range(shnum):
        typ, off, size, link, entsize = section(i)
        if typ != 11:  # SHT_DYNSYM
            continue
        _, str_off, _, _, _ = section(link)
        for k in range(1, size // entsize):
            base = off + k * entsize
            if is64:
                name, info, other, shndx = struct.unpack_from(e + "IBBH", data, base)
            else:
                name, _, _, info, other, shndx = struct.unpack_from(e + "IIIBBH", data, base)
            binding, visibility = info >> 4, other & 3
            if shndx != 0 and binding in (1, 2) and visibility in (0, 3):  # defined, GLOBAL/WEAK
                end = data.index(b"\0", str_off + name)
                names.append(data[str_off + name:end].decode())
    return sorted(names)


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def check_plugin(path, *, opset: int = 23, allow_empty_emits: bool = False,
                 defined_elsewhere=()) -> dict:
    """Checks one plugin file, first in a child process, then loads it and
    asserts its descriptor is sound:

    - the preflight passes in a child process (jaxonnx's own check before it
      loads a plugin it has not seen): loading, init and descriptor validation,
      then per primitive with a test equation (.test(...) in the SDK) its
      abstract eval, lowering and the plugin's rewrite rules. A crash or hang
      there fails with the signal, the step and the primitive, and this process
      never loads the file; an error status of a test equation is a problem;
    - it loads in this jaxonnx (ABI major equal, minor not newer than the host's);
    - plugin and primitive names are non-empty, well formed and unique;
    - every primitive declares .emits(...) ops (unless allow_empty_emits), each
      one ONNX knows at `opset`;
    - a primitive JAX does not define has an abstract eval or a binding spec
      (jaxonnx.primitive needs one to trace), unless `defined_elsewhere` names
      it (a primitive another library defines, such as equinox's);
    - its dynamic symbol table exports exactly jaxonnx_plugin_init_v1 (ELF files).
    Returns the plugin's description (as `python -m jaxonnx plugins --json`
    gives it) plus "abi_range" and "preflight" (the child's outcome: per
    primitive its test equation and error); raises AssertionError listing every
    problem.
    """
    path = os.fspath(path)
    preflight = _preflight.check_files([path], fresh=True)[path]
    crashed = _preflight.failure(preflight)
    assert not crashed, f"plugin {path}: {crashed}"
    info = _core.load_plugin(path)  # a load error raises here, as it did in the child
    info["preflight"] = preflight
    problems = [f"{p['name']}: its test equation {t['eqn']} failed: {t['error']}"
                for p in preflight.get("primitives", []) for t in p["tests"] if t["error"]]
    major, minor = (int(x) for x in info["abi"].split("."))
    if major != _core.ABI_MAJOR or minor > _core.ABI_MINOR:
        problems.append(f"ABI {info['abi']} is outside this host's "
                        f"{_core.ABI_MAJOR}.0-{_core.ABI_MAJOR}.{_core.ABI_MINOR}")
    info["abi_range"] = f">={major}.{minor},<{major + 1}"
    if not _NAME.match(info["name"]):
        problems.append(f"plugin name {info['name']!r} is not [A-Za-z_][A-Za-z0-9_.-]*")
    if not info["version"]:
        problems.append("the plugin declares no version")
    jax_names = _jax_primitive_names()
    seen = set()
    for prim in info["primitives"]:
        name = prim["name"]
        if not _NAME.match(name):
            problems.append(f"primitive name {name!r} is not [A-Za-z_][A-Za-z0-9_.-]*")
        if name in seen:
            problems.append(f"primitive {name!r} is declared twice")
        seen.add(name)
        if not prim["onnx_ops"] and not allow_empty_emits:
            problems.append(f"{name}: declares no .emits(...) ops")
        for op in prim["onnx_ops"]:
            domain, _, op_type = op.rpartition("::") if "::" in op else ("", "", op)
            try:
                onnx.defs.get_schema(op_type, opset, domain)
            except onnx.defs.SchemaError:
                problems.append(f"{name}: .emits({op!r}): ONNX has no such op at opset {opset}")
        # A primitive bound by a binding spec takes its abstract eval from the
        # original callable (jax.eval_shape of its reference) when it gives none.
        if name not in jax_names and name not in defined_elsewhere \
                and not prim["abstract_eval"] and not prim.get("bindings"):
            problems.append(f"{name}: JAX does not define this primitive and the plugin gives no "
                            f"abstract eval or binding spec, so it cannot be traced")
    exports = _elf_exports(path)
    if exports is not None and exports != ["jaxonnx_plugin_init_v1"]:
        problems.append(f"the dynamic symbol table exports {exports}, not exactly "
                        f"['jaxonnx_plugin_init_v1'] (build with jaxonnx_add_plugin)")
    assert not problems, f"plugin {path}:\n  " + "\n  ".join(problems)
    return info


# ---------------------------------------------------------------- testcases as data

@dataclasses.dataclass
class Testcase:
    """A program using the plugin, declared as data.

    callable: the function to convert (positional inputs).
    input_specs: as for check(): shapes with symbols, or (shape, dtype).
    expected_ops: expect_graph paths (e.g. ["Softsign"] or ["Mul -> Softsign"]) the
        optimized model must contain; expect_options passes match=, counts=, ...
    variants: restrict the expansion (default: every applicable Variant).
    """
    __test__ = False  # not a pytest class

    name: str
    callable: Callable
    input_specs: Sequence
    expected_ops: Sequence[str] = ()
    expect_options: dict = dataclasses.field(default_factory=dict)
    plugin_dirs: Sequence | None = None
    variants: Sequence[Variant] | None = None
    rtol: float | None = None
    atol: float | None = None
    make_inputs: Callable | None = None


@dataclasses.dataclass
class Case:
    """One testcase in one variant: what a generated test runs. `module`: the
    test module whose TESTCASES it comes from (set by the pytest plugin), so
    that a child process can run it."""
    testcase: Testcase
    variant: Variant
    module: str | None = None

    @property
    def id(self):
        return f"{self.testcase.name}-{self.variant}"

    def run(self, plugin_dirs=None, *, isolate=None):
        """check() in this case's variant; returns the optimized model. With
        `isolate` (default: when `module` is known and $JAXONNX_TESTING_ISOLATE is
        not 0) the conversions run in a child process, and a crash there raises
        AssertionError naming the signal, the plugin call and the case."""
        if isolate is None:
            isolate = self.module is not None and os.environ.get(ISOLATE_ENV_VAR, "1") != "0"
        if isolate and self.module is not None:
            server = _CaseServer.of(self.module)
            if server is not None:
                return server.run(self, plugin_dirs)
        t = self.testcase
        return check(t.callable, t.input_specs, plugin_dirs=t.plugin_dirs or plugin_dirs,
                     variants=[self.variant], rtol=t.rtol, atol=t.atol,
                     make_inputs=t.make_inputs, expect=list(t.expected_ops),
                     expect_options=t.expect_options)[self.variant]


ISOLATE_ENV_VAR = "JAXONNX_TESTING_ISOLATE"
CASE_TIMEOUT_ENV_VAR = "JAXONNX_TESTING_CASE_TIMEOUT"

_STEP_WORDS = {"lower": "while lowering '{n}' (plugin '{p}')",
               "abstract_eval": "in the abstract eval of '{n}' (plugin '{p}')",
               "rule": "in the rewrite rule '{n}' of plugin '{p}'"}


class _CaseServer:
    """A child process running the testcases of one test module (_case_server.py)."""
    _servers: dict[str, _CaseServer | None] = {}

    @classmethod
    def of(cls, module):
        """The module's live server, started when needed; None when the child
        cannot import the module (its cases then run in this process)."""
        server = cls._servers.get(module, False)
        if server is None:
            return None
        if server is False or server.proc.poll() is not None:
            server = cls(module)
            cls._servers[module] = server if server.ready else None
            if not server.ready:
                warnings.warn(f"jaxonnx.testing could not import {module} in a child process "
                              f"({server.why}); its testcases run in this process", stacklevel=3)
                return None
        return server

    def __init__(self, module):
        self.module = module
        fd, self.steps = tempfile.mkstemp(prefix="jaxonnx-cases-", suffix=".log")
        os.close(fd)
        self.err = tempfile.TemporaryFile()
        r, w = os.pipe()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        env.pop("PYTEST_XDIST_WORKER", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jaxonnx._case_server", module, str(w), self.steps],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self.err, pass_fds=(w,),
            env=env, text=True)
        os.close(w)
        self.reply, self.buffer = r, b""
        atexit.register(self.close)
        hello = self._read(float(os.environ.get(CASE_TIMEOUT_ENV_VAR, 900)))
        if hello is self._TIMEOUT:
            self.proc.kill()
            hello = {"error": "it did not start in time"}
        self.ready = bool(hello and hello.get("ready"))
        self.why = (hello or {}).get("error") or self._stderr() or "it exited"

    _TIMEOUT = {"timeout": True}

    def _read(self, timeout):
        """The child's next answer; None when it died, _TIMEOUT when the time is up."""
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.reply], [], [], timeout)
            if not ready:
                return self._TIMEOUT
            chunk = os.read(self.reply, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def _stderr(self):
        self.err.seek(0)
        return self.err.read()[-1500:].decode("utf-8", "replace").strip()

    def _where(self):
        """The plugin call the child was in, from its step log."""
        with open(self.steps, encoding="utf-8", errors="replace") as f:
            lines = [line.rstrip("\n").split("\t") for line in f if line.strip()]
        what, plugin, name = (lines[-1] + ["", ""])[:3] if lines else ("", "", "")
        if what in _STEP_WORDS:
            return _STEP_WORDS[what].format(n=name, p=plugin)
        return "outside any plugin call (in JAX, onnxruntime or jaxonnx itself)"

    def run(self, case, plugin_dirs):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.onnx")
            request = {"id": case.id, "model": path,
                       "plugin_dirs": [os.fspath(d) for d in plugin_dirs or []] or None}
            timeout = float(os.environ.get(CASE_TIMEOUT_ENV_VAR, 900))
            try:
                self.proc.stdin.write(json.dumps(request) + "\n")
                self.proc.stdin.flush()
            except OSError:
                pass  # it died: _read says so
            answer = self._read(timeout)
            if answer is None or answer is self._TIMEOUT:
                hung = answer is self._TIMEOUT
                if hung:
                    self.proc.kill()
                rc = self.proc.wait()
                where = self._where()
                if hung:
                    what = f"did not finish within {timeout:g} s (${CASE_TIMEOUT_ENV_VAR})"
                elif rc < 0:
                    from jaxonnx._preflight import _signal_name
                    name, text = _signal_name(-rc)
                    what = f"crashed its test process with {name} ({text})"
                else:
                    what = f"ended its test process (exit status {rc})"
                tail = self._stderr()
                raise AssertionError(
                    f"{case.id}: the conversion {what} {where}. jaxonnx.testing runs testcases "
                    f"in a child process, so only this test fails"
                    + (f"\n  its stderr ends with:\n{tail}" if tail else ""))
            if answer.get("error") == "AssertionError":
                raise AssertionError(answer["message"])
            if answer.get("error") == "ConversionError":
                raise _core.ConversionError(answer["message"])
            if answer.get("error"):
                raise RuntimeError(f"{case.id} failed in jaxonnx.testing's child process:\n"
                                   f"{answer['message']}")
            return onnx.load(path)

    def close(self):
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        with contextlib.suppress(OSError):
            os.close(self.reply)
        with contextlib.suppress(OSError):
            os.unlink(self.steps)
        self.err.close()


def expand(testcases: Sequence[Testcase]) -> list[Case]:
    """Every testcase in every variant it applies to (symbolic ones need a symbol)."""
    cases = []
    for t in testcases:
        for v in (t.variants or VARIANTS):
            if v.symbolic and not _has_symbol(t.input_specs):
                continue
            cases.append(Case(t, v))
    return cases


# ---------------------------------------------------------------- pytest plugin

def pytest_addoption(parser):
    parser.addoption("--jaxonnx-plugin-dir", action="append", default=[], metavar="DIR",
                     help="an extra plugin folder for jaxonnx testcases (repeatable)")


def pytest_generate_tests(metafunc):
    if "jaxonnx_case" in metafunc.fixturenames:
        testcases = getattr(metafunc.module, "TESTCASES", None)
        if testcases is None:
            raise ValueError(f"{metafunc.module.__name__}: a test taking jaxonnx_case needs a "
                             f"module-level TESTCASES list of jaxonnx.testing.Testcase")
        cases = expand(testcases)
        for c in cases:
            c.module = metafunc.module.__name__
        metafunc.parametrize("jaxonnx_case", cases, ids=[c.id for c in cases])


def _fixtures():
    import pytest

    @pytest.fixture
    def jaxonnx_plugin_dirs(request):
        """The --jaxonnx-plugin-dir folders given on the command line."""
        return list(request.config.getoption("--jaxonnx-plugin-dir"))

    return jaxonnx_plugin_dirs


try:  # fixtures only when pytest is around; the checks above need no pytest
    jaxonnx_plugin_dirs = _fixtures()
except ImportError:  # pragma: no cover
    pass
