"""The hardware's limits for an onnxruntime model on this machine, and how close a
model's latency comes to them (issue 26).

- count_flops(model, batch): the matrix-product FLOPs of an ONNX graph once its
  symbolic batch is fixed (MatMul, Gemm, Conv, ConvTranspose, Attention, Einsum;
  Loop and Scan bodies once per iteration, the If branch that runs).
- matmul_peak(threads), conv_peak(threads): the best GFLOP/s onnxruntime's MatMul /
  Conv reaches on a few large shapes, measured now.
- copy_bandwidth(threads, mbytes): bytes moved per second by an elementwise Add
  in onnxruntime; numpy_copy_bandwidth(mbytes, threads): by np.copyto between
  buffers allocated up front (Copy, a runner to time beside sessions). A
  memory-bound step can hope for the better of them.
- roofline_seconds(flops, peaks) and percent_of_roofline(...): the time the FLOPs
  take at the measured peaks, and that time as a share of a measured latency.
- weight_bytes(model), bandwidth_seconds(nbytes, gbps): the memory side (a decode
  step's bytes over copy_bandwidth).

    python benchmarks/roofline.py [--models mlp gpt] [--batch 1] [--threads 1]

prints the machine's peaks and each example's FLOPs, latency and % of roofline.
benchmarks/latency.py builds its tables on these functions.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import math
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import timing  # noqa: E402

# ------------------------------------------------------------------ sessions


def session_options(threads=None):
    """onnxruntime SessionOptions: threads=None keeps onnxruntime's default
    intra-op pool (one thread per physical core), an int pins intra_op_num_threads
    (and one inter-op thread)."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    return options


def session(model, threads=None, options=None):
    """A CPU InferenceSession of `model` (ModelProto) with `threads` (see session_options)."""
    options = options or session_options(threads)
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def kernels(model, threads=None):
    """What onnxruntime runs for `model`: the op type and domain of each node of
    the graph after its optimizations (at the level a session uses by default).
    Attributes are left out: the same op in equivalent forms (explicit pads or
    SAME_UPPER, axis -1 or 1 on a matrix) runs the same kernel. Two graphs with
    equal kernels() run the same kernels in the same order: their latency
    differs by timing noise."""
    with tempfile.TemporaryDirectory() as tmp:
        options = session_options(threads)
        options.optimized_model_filepath = os.path.join(tmp, "optimized.onnx")
        session(model, options=options)
        graph = onnx.load(options.optimized_model_filepath, load_external_data=False).graph
    return [(n.op_type, n.domain) for n in graph.node]


def seconds_per_run(sess, feed, runs):
    """Median seconds per run of one session (timing.block_latency)."""
    return timing.block_latency([sess], lambda s: feed, runs)[0]


# ------------------------------------------------------------------ FLOPs


@dataclasses.dataclass
class Flops:
    """Matrix-product FLOPs (a multiply-add counts 2) of one run of a graph."""
    matmul: int = 0   # MatMul, Gemm, Attention, Einsum
    conv: int = 0     # Conv, ConvTranspose
    by_op: dict = dataclasses.field(default_factory=dict)
    notes: list = dataclasses.field(default_factory=list)  # what could not be counted exactly

    @property
    def total(self):
        return self.matmul + self.conv

    def add(self, op, kind, n, times=1):
        n = int(n) * times
        setattr(self, kind, getattr(self, kind) + n)
        self.by_op[op] = self.by_op.get(op, 0) + n


def _attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _shape_of(vi):
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims = []
    for d in t.shape.dim:
        if not d.HasField("dim_value"):
            return None
        dims.append(d.dim_value)
    return tuple(dims)


def _fix_dims(model, batch):
    """A copy of `model` whose symbolic dims (those named on the graph inputs, in
    every graph and subgraph) are `batch`; intermediate value_info of the main graph is
    dropped (it is re-derived), subgraph value_info is dropped too."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    names = {d.dim_param for i in model.graph.input
             for d in i.type.tensor_type.shape.dim if d.HasField("dim_param")}

    def fix(vi):
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in names:
                d.dim_value = batch

    def walk(graph):
        for vi in list(graph.input) + list(graph.output):
            fix(vi)
        del graph.value_info[:]
        for n in graph.node:
            for a in n.attribute:
                for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    walk(g)
    walk(model.graph)
    return model


def _runtime_values(model, feed):
    """Every top-level value's array after one onnxruntime run of `model` (no graph
    optimization, so that node output names survive)."""
    m = onnx.ModelProto.FromString(model.SerializeToString())
    have = {o.name for o in m.graph.output}
    skip = have | {i.name for i in m.graph.input} | {i.name for i in m.graph.initializer}
    names = []
    for n in m.graph.node:
        for o in n.output:
            if o and o not in skip:
                names.append(o)
                skip.add(o)
    m.graph.output.extend(helper.ValueInfoProto(name=o) for o in names)
    options = session_options()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = session(m, options=options)
    outs = sess.run(None, feed)
    return {o.name: v for o, v in zip(sess.get_outputs(), outs)}


def _dtype_enum(array):
    return helper.np_dtype_to_tensor_dtype(array.dtype)


class _Scope:
    """Static shapes and known small values of a graph, chained to the enclosing one."""

    def __init__(self, graph, parent=None, shapes=None, values=None):
        self.parent = parent
        self.shapes = dict(shapes or {})
        self.values = dict(values or {})
        for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
            s = _shape_of(vi)
            if s is not None:
                self.shapes.setdefault(vi.name, s)
        for t in graph.initializer:
            self.shapes[t.name] = tuple(t.dims)
            if np.prod(t.dims, dtype=np.int64) <= 16:
                self.values[t.name] = numpy_helper.to_array(t)
        for n in graph.node:
            if n.op_type == "Constant" and n.output:
                t = _attr(n, "value")
                if isinstance(t, TensorProto):
                    self.shapes[n.output[0]] = tuple(t.dims)
                    self.values[n.output[0]] = numpy_helper.to_array(t)

    def _find(self, table, name):
        s = self
        while s is not None:  # this scope, then the enclosing ones
            if name in getattr(s, table):
                return getattr(s, table)[name]
            s = s.parent
        return None

    def shape(self, name):
        return self._find("shapes", name)

    def value(self, name):
        return self._find("values", name)


def _einsum_flops(node, scope):
    """2 x the product of every index's size (a pairwise product's multiply-adds);
    for more than two operands that is one contraction of everything, an upper bound."""
    eq = _attr(node, "equation").decode() if isinstance(_attr(node, "equation"), bytes) \
        else _attr(node, "equation")
    lhs = eq.replace(" ", "").split("->")[0].split(",")
    if len(lhs) < 2:
        return 0, None
    sizes = {}
    for term, name in zip(lhs, node.input):
        shape = scope.shape(name)
        if shape is None or "." in term:
            return None, f"Einsum {node.name}: shapes or ellipsis not static"
        for c, d in zip(term, shape):
            sizes[c] = max(sizes.get(c, 1), d)
    note = f"Einsum {node.name}: {len(lhs)} operands counted as one contraction" \
        if len(lhs) > 2 else None
    return 2 * math.prod(sizes.values()), note


def _node_flops(node, scope):
    """(kind, FLOPs, note) of one node outside control flow, or (None, 0, None)."""
    op = node.op_type
    shp = [scope.shape(i) if i else None for i in node.input]
    out = scope.shape(node.output[0]) if node.output else None
    missing = f"{op} {node.name}: shapes not static, not counted"
    if op == "MatMul":
        a = shp[0]
        if a is None or out is None:
            return "matmul", None, missing
        return "matmul", 2 * math.prod(out) * a[-1], None
    if op == "Gemm":
        a = shp[0]
        if a is None or out is None:
            return "matmul", None, missing
        k = a[0] if _attr(node, "transA", 0) else a[1]
        return "matmul", 2 * math.prod(out) * k, None
    if op == "Conv":
        w = shp[1]
        if w is None or out is None:
            return "conv", None, missing
        # every output element: (C_in / group) x kernel multiply-adds
        return "conv", 2 * math.prod(out) * math.prod(w[1:]), None
    if op == "ConvTranspose":
        x, w = shp[0], shp[1]
        if x is None or w is None:
            return "conv", None, missing
        # every input element is scattered to (C_out / group) x kernel outputs
        return "conv", 2 * math.prod(x) * math.prod(w[1:]), None
    if op == "Attention":
        q, k, v = shp[0], shp[1], shp[2]
        past = shp[4] if len(shp) > 4 else None
        if q is None or k is None or v is None:
            return "matmul", None, missing
        if len(q) == 4:
            b, h, s, d = q
            t, dv = k[2], v[3]
            if past is not None:
                t += past[2]
        else:
            h, kvh = _attr(node, "q_num_heads"), _attr(node, "kv_num_heads")
            b, s, d = q[0], q[1], q[2] // h
            t, dv = k[1], v[2] // kvh
            if past is not None:
                t += past[2]
        # q k^T and the weights times v
        return "matmul", 2 * b * h * s * t * (d + dv), None
    if op == "Einsum":
        n, note = _einsum_flops(node, scope)
        return "matmul", n, note
    return None, 0, None


def _graph_flops(graph, scope, acc, times, where):
    for node in graph.node:
        op = node.op_type
        if op == "If":
            cond = scope.value(node.input[0])
            branches = {a.name: a.g for a in node.attribute if a.HasField("g")}
            if cond is not None:
                taken = ["then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else "else_branch"]
            else:
                taken = list(branches)
                acc.notes.append(f"If {node.name}{where}: condition unknown, the larger branch counted")
            counts = []
            for name in taken:
                sub = Flops()
                _graph_flops(branches[name], _Scope(branches[name], scope), sub, 1, where)
                counts.append(sub)
            best = max(counts, key=lambda f: f.total)
            for k, v in best.by_op.items():
                acc.add(k, "conv" if k.startswith("Conv") else "matmul", v, times)
            acc.notes.extend(best.notes)
            continue
        if op in ("Loop", "Scan"):
            body = _attr(node, "body")
            if op == "Loop":
                m = scope.value(node.input[0]) if node.input[0] else None
                n = int(np.asarray(m).reshape(-1)[0]) if m is not None else None
            else:
                k = _attr(node, "num_scan_inputs")
                first = node.input[len(node.input) - k]
                axes = _attr(node, "scan_input_axes") or [0] * k
                s = scope.shape(first)
                n = s[axes[0] % len(s)] if s is not None else None
            if n is None:
                acc.notes.append(f"{op} {node.name}{where}: trip count unknown, body counted once")
                n = 1
            _graph_flops(body, _Scope(body, scope), acc, times * n, f"{where} in {op} {node.name}")
            continue
        kind, n, note = _node_flops(node, scope)
        if note:
            acc.notes.append(note + where)
        if kind and n:
            acc.add(op, kind, n, times)


# Loop/Scan bodies nested this deep get static shapes (each level one more inference).
_LOOP_NESTING = 3


def _set_shape(vi, shape):
    dims = vi.type.tensor_type.shape.dim
    del dims[:]
    for d in shape:
        dims.add().dim_value = d


def _seed_bodies(graph, scope):
    """Gives Loop/Scan body inputs whose shapes are unknown the shapes of the
    values the node passes in (a carried value keeps its shape from step to step;
    a Scan slice loses its scan axis), in `graph` and every body below it. ONNX
    shape inference does not do this when a body declares its inputs without dims.
    Returns whether anything changed."""
    changed = False
    for node in graph.node:
        if node.op_type not in ("Loop", "Scan"):
            continue
        body = _attr(node, "body")
        if node.op_type == "Loop":
            pairs = [(vi, scope.shape(name)) for vi, name in zip(body.input[2:], node.input[2:])]
        else:
            k = _attr(node, "num_scan_inputs")
            states = len(node.input) - k
            axes = _attr(node, "scan_input_axes") or [0] * k
            pairs = [(vi, scope.shape(name)) for vi, name in zip(body.input[:states], node.input[:states])]
            for vi, name, axis in zip(body.input[states:], node.input[states:], axes):
                s = scope.shape(name)
                pairs.append((vi, None if s is None else s[:axis % len(s)] + s[axis % len(s) + 1:]))
        for vi, shape in pairs:
            if shape is not None and _shape_of(vi) is None:
                _set_shape(vi, shape)
                changed = True
        changed |= _seed_bodies(body, _Scope(body, scope))
    return changed


def count_flops(model, batch, feed=None):
    """Matrix-product FLOPs of one run of `model` (ModelProto) with its symbolic dims
    (those named on graph inputs) set to `batch`.

    Shapes come from one onnxruntime run with every top-level value as an output
    (so any shape plumbing resolves, and If conditions and Loop trip counts are
    known), then ONNX shape inference into subgraphs. `feed` gives that run's
    inputs (default: zeros, int inputs 0). If the run fails, shape inference
    alone. Where a shape, condition or trip count stays unknown, Flops.notes says
    what was assumed."""
    fixed = _fix_dims(model, batch)
    values = {}
    try:
        if feed is None:
            feed = {}
            for i in fixed.graph.input:
                s = _shape_of(i)
                dt = helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
                feed[i.name] = np.zeros(s, dt)
        values = _runtime_values(fixed, feed)
    except Exception as e:  # shapes then come from inference alone
        values = {}
        note = f"onnxruntime run failed ({type(e).__name__}), shapes from inference only"
    else:
        note = None
    shaped = onnx.ModelProto.FromString(fixed.SerializeToString())
    for name, v in values.items():
        shaped.graph.value_info.append(helper.make_tensor_value_info(name, _dtype_enum(v), v.shape))
    runtime = {k: v.shape for k, v in values.items()}
    for _ in range(_LOOP_NESTING):
        shaped = onnx.shape_inference.infer_shapes(shaped, strict_mode=False, data_prop=True)
        if not _seed_bodies(shaped.graph, _Scope(shaped.graph, None, runtime)):
            break
    small = {k: v for k, v in values.items() if v.size <= 16}
    scope = _Scope(shaped.graph, None, runtime, small)
    acc = Flops()
    if note:
        acc.notes.append(note)
    _graph_flops(shaped.graph, scope, acc, 1, "")
    return acc


# ------------------------------------------------------------------ peaks

MATMUL_SIZES = ((512, 512, 512), (1024, 1024, 1024), (256, 1024, 4096))
# (N, C_in, H, W, C_out), 3x3 kernel, stride 1, pad 1
CONV_SIZES = ((1, 64, 56, 56, 64), (8, 128, 28, 28, 128), (4, 256, 14, 14, 256))


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "roofline", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


def _rng():
    return np.random.default_rng(0)


def matmul_peak(threads=None, sizes=MATMUL_SIZES, runs=10):
    """Best GFLOP/s of onnxruntime's MatMul on this machine: (M, K) x (K, N) float32
    with the right operand a constant (as a model's weight is), over `sizes`
    (M, K, N), median of `runs` per size. Returns (best GFLOP/s, {size: GFLOP/s})."""
    per = {}
    for m, k, n in sizes:
        w = numpy_helper.from_array(_rng().standard_normal((k, n)).astype(np.float32), "w")
        model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, (m, k))],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, (m, n))], [w])
        x = _rng().standard_normal((m, k)).astype(np.float32)
        t = seconds_per_run(session(model, threads), {"x": x}, runs)
        per[(m, k, n)] = 2 * m * k * n / t / 1e9
    return max(per.values()), per


def conv_peak(threads=None, sizes=CONV_SIZES, runs=10):
    """Best GFLOP/s of onnxruntime's Conv on this machine: NCHW float32, 3x3 kernel,
    stride 1, pad 1, constant weights, over `sizes` (N, C_in, H, W, C_out).
    Returns (best GFLOP/s, {size: GFLOP/s})."""
    per = {}
    for n, c, h, w_, co in sizes:
        w = numpy_helper.from_array(_rng().standard_normal((co, c, 3, 3)).astype(np.float32), "w")
        model = _model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, (n, c, h, w_))],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, (n, co, h, w_))], [w])
        x = _rng().standard_normal((n, c, h, w_)).astype(np.float32)
        t = seconds_per_run(session(model, threads), {"x": x}, runs)
        per[(n, c, h, w_, co)] = 2 * n * co * h * w_ * c * 9 / t / 1e9
    return max(per.values()), per


def copy_bandwidth(threads=None, mbytes=512, runs=10):
    """Memory bandwidth in GB/s (1e9 bytes per second) that onnxruntime reaches
    streaming a float32 tensor of `mbytes` MiB through an elementwise Add with a
    scalar: each run reads the tensor once and writes a new one of the same size,
    so bytes moved = 2 x the tensor's size. The default 512 MiB (1 GiB read plus
    written) is past this machine's 300 MiB L3; a few MiB measure the cache instead.
    A memory-bound step (an LLM decode step reading its weights and caches) cannot
    run faster than its bytes over this figure."""
    n = mbytes * 2 ** 20 // 4
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    model = _model([helper.make_node("Add", ["x", "one"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, (n,))],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, (n,))], [one])
    x = np.ones(n, np.float32)
    t = seconds_per_run(session(model, threads), {"x": x}, runs)
    return 2 * x.nbytes / t / 1e9


class Copy:
    """A copy of `mbytes` MiB between two float32 buffers allocated up front,
    split over `threads` threads (numpy releases the GIL while it copies), with
    a session's run(): timed in alternating blocks beside sessions
    (timing.block_latency), its median is the memory bandwidth under the same
    load as theirs. `moved` bytes per run: read + written."""

    def __init__(self, threads=1, mbytes=512):
        n = mbytes * 2 ** 20 // 4
        self.src, self.dst = np.ones(n, np.float32), np.zeros(n, np.float32)
        self.moved = 2 * self.src.nbytes
        bounds = np.linspace(0, n, threads + 1).astype(int)
        self.parts = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None

    def _copy(self, part):
        np.copyto(self.dst[part], self.src[part])

    def run(self, _outputs=None, _feed=None):
        if self.pool is None:
            self._copy(self.parts[0])
        else:
            list(self.pool.map(self._copy, self.parts))


def numpy_copy_bandwidth(mbytes=512, runs=10, threads=1):
    """Memory bandwidth in GB/s of `threads` threads copying `mbytes` MiB between
    two buffers allocated up front (Copy; read + written bytes, the best run).
    onnxruntime's Add (copy_bandwidth) allocates its output every run and reads
    lower; a memory roofline takes the better of the two, so that it stays a bound."""
    import time
    copy = Copy(threads, mbytes)
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        copy.run()
        best = min(best, time.perf_counter() - start)
    return copy.moved / best / 1e9


@dataclasses.dataclass
class Peaks:
    """What onnxruntime reaches on this machine with one thread setting."""
    threads: object   # None = onnxruntime's default, or the intra-op thread count
    matmul: float     # GFLOP/s
    conv: float       # GFLOP/s
    copy: float       # GB/s
    matmul_sizes: dict = dataclasses.field(default_factory=dict)
    conv_sizes: dict = dataclasses.field(default_factory=dict)

    def describe(self):
        label = "default threads" if self.threads is None else f"{self.threads} intra-op thread(s)"
        return (f"{label}: MatMul {self.matmul:.1f} GFLOP/s, Conv {self.conv:.1f} GFLOP/s, "
                f"copy {self.copy:.1f} GB/s")


def measure_peaks(threads=None, runs=10, copy_mbytes=512):
    """matmul_peak, conv_peak and copy_bandwidth with one thread setting, as Peaks."""
    mm, mm_sizes = matmul_peak(threads, runs=runs)
    cv, cv_sizes = conv_peak(threads, runs=runs)
    return Peaks(threads, mm, cv, copy_bandwidth(threads, copy_mbytes, runs=max(3, runs // 2)),
                 mm_sizes, cv_sizes)


def weight_bytes(model):
    """Bytes of a model's constants: its initializers and Constant nodes, in every
    graph and subgraph (what a step reads at least once, if nothing is cached)."""
    def walk(graph):
        n = sum(numpy_helper.to_array(t).nbytes for t in graph.initializer)
        for node in graph.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    n += numpy_helper.to_array(a.t).nbytes
                for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    n += walk(g)
        return n
    return walk(model.graph)


def bandwidth_seconds(nbytes, gbps):
    """Seconds to move `nbytes` at `gbps` GB/s (e.g. copy_bandwidth's): the memory
    roofline of a step that must read `nbytes`."""
    return nbytes / (gbps * 1e9)


def roofline_seconds(flops, peaks):
    """Seconds the FLOPs take at the measured peaks: matrix products at the MatMul
    peak, convolutions at the Conv peak (the compute roofline; memory traffic and
    every other op are left out, so a real model stays above it)."""
    return flops.matmul / (peaks.matmul * 1e9) + flops.conv / (peaks.conv * 1e9)


def percent_of_roofline(flops, seconds, peaks):
    """The compute roofline's time as a percentage of a measured latency."""
    return 100.0 * roofline_seconds(flops, peaks) / seconds


# ------------------------------------------------------------------ command line


def _report(names, batch, threads, runs):
    import _common
    import jaxonnx
    peaks = measure_peaks(threads, runs=runs)
    print(peaks.describe())
    for name in names:
        module = importlib.import_module(name)
        inputs = module.inputs()
        model = jaxonnx.to_onnx(module.make_model(), _common.specs(inputs))
        xs = _common.sample(inputs, batch, seed=batch)
        sess = session(model, threads)
        feed = {v.name: x for v, x in zip(sess.get_inputs(), xs)}
        f = count_flops(model, batch, feed)
        t = seconds_per_run(sess, feed, runs * 3)
        print(f"{name}: {f.total / 1e6:.2f} MFLOP ({', '.join(f'{k} {v / 1e6:.2f}' for k, v in f.by_op.items())}), "
              f"{t * 1e6:.0f} µs, {percent_of_roofline(f, t, peaks):.0f}% of roofline"
              + "".join(f"\n  note: {n}" for n in f.notes))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["mlp", "cnn", "vit", "gpt", "lstm"])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None,
                        help="intra-op threads (default: onnxruntime's default)")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    _report(args.models, args.batch, args.threads, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
