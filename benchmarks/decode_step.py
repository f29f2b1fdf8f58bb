"""The LLM decode step of examples/decode.py: onnxruntime's latency per token at
batch 1 and 4 with a KV cache of 256 and 1024 positions, jaxonnx beside
jax2onnx 0.17.1 in the same run (a new model instance per conversion), and
against the memory-bandwidth roofline: the bytes a step must read (every
weight, the embedding rows of its tokens, the filled prefix of each cache)
over the copy bandwidth timed in the same alternating blocks as the graphs.

    python benchmarks/decode_step.py [--caches 256 1024] [--batches 1 4] [--runs 30] [--write-docs]

Beside the plain session run (the caches returned in new buffers), the table
times variants of the same jaxonnx graph:
- "IO binding": onnxruntime's IO binding, every output pre-allocated once.
- "in place": IO binding with each new cache bound to the buffer its old
  cache came in (the caller's choice; the graph stays the same). ScatterND
  then writes one row instead of copying the whole cache.
  Exact only because each cache input feeds nothing but the ScatterND that
  writes it (checked here).
- "prefix": the graph hand-edited (read_prefix below) so that attention reads
  only the filled prefix of each cache, Slice(cache, 0, position + 1), not
  the whole cache under a mask: what a rewrite could emit (JAX's shapes are
  static, so no JAX program says it). Checked against JAX at positions
  inside and outside the cache.
- "weight MatMuls alone": not the step, but its weight products alone
  (weight_matmuls below), against the roofline of their own bytes: how close
  onnxruntime's MatMul kernel comes to the bandwidth, a ceiling for any graph.
Sessions are timed in alternating blocks (timing.block_latency), the
position at the middle of the cache (the mean over a generation that fills
it). --profile prints where the time goes (onnxruntime's profiler, per op).

--write-docs rewrites the generated part of the "LLM decode step" section of
docs/benchmarks/decode_step.md. jax2onnx: benchmarks/requirements.txt.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import jax  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from flax import nnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import doc_section  # noqa: E402
import _common  # noqa: E402
import compare  # noqa: E402
import decode  # noqa: E402
import jaxonnx  # noqa: E402
import roofline  # noqa: E402
import timing  # noqa: E402

DOC = ROOT / "docs" / "benchmarks" / "decode_step.md"
BEGIN, END = "<!-- decode_step.py: begin -->", "<!-- decode_step.py: end -->"
COPY_MIB = 512  # past this machine's 300 MiB L3, where a step's weights and caches cannot stay


def step_bytes(model, batch, length, position):
    """The bytes a decode step cannot avoid moving: every weight read once
    (the embedding table only at the batch's rows), the cache prefix 0..position
    read, one new key and value row per layer written, the logits written."""
    vocab, width, heads, kv_heads, head_dim, layers, _ = decode.sizes(False)
    params = jax.tree.leaves(nnx.state(model, nnx.Param))
    weights = sum(p.size for p in params) - vocab * width + batch * width
    filled = min(position + 1, length)
    cache = 2 * layers * batch * kv_heads * head_dim * (filled + 1)
    return 4 * (weights + cache + batch * vocab)


# ------------------------------------------------------------------ graph variants

def read_prefix(model):
    """A copy of jaxonnx's decode graph in which every MatMul over a cache (a
    ScatterND's result) reads Slice(cache, 0, end) on the cache-length axis,
    and every Where masking by the cache-length mask takes that mask sliced
    alike; end = min(position + 1, L) for position >= 0, else L (no slot is
    visible then: JAX averages the whole cache). Exact at every position."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    position = g.input[1].name
    length = g.input[2].type.tensor_type.shape.dim[2].dim_value
    caches = {o for n in g.node if n.op_type == "ScatterND" for o in n.output}
    masks = {n.output[0] for n in g.node if n.op_type == "LessOrEqual"}
    consts = [onnx.numpy_helper.from_array(np.array(v, np.int64), name) for name, v in
              (("prefix_zero", [0]), ("prefix_one", 1), ("prefix_len", length), ("prefix_szero", 0),
               ("prefix_axis_kv", [2]), ("prefix_axis_mask", [0]))]
    g.initializer.extend(consts)
    head = [helper.make_node("Cast", [position], ["prefix_pos"], to=TensorProto.INT64),
            helper.make_node("Add", ["prefix_pos", "prefix_one"], ["prefix_p1"]),
            helper.make_node("Min", ["prefix_p1", "prefix_len"], ["prefix_min"]),
            helper.make_node("GreaterOrEqual", ["prefix_pos", "prefix_szero"], ["prefix_nonneg"]),
            helper.make_node("Where", ["prefix_nonneg", "prefix_min", "prefix_len"], ["prefix_e"]),
            helper.make_node("Unsqueeze", ["prefix_e", "prefix_zero"], ["prefix_end"])]
    nodes, sliced = [], {}

    def prefix(name, axis):
        if name not in sliced:
            sliced[name] = f"{name}_prefix"
            nodes.append(helper.make_node("Slice", [name, "prefix_zero", "prefix_end", axis], [sliced[name]]))
        return sliced[name]
    # The scores between the two MatMuls have the cache length in their
    # Reshapes' static target shapes: -1 there now.
    inits = {t.name: t for t in g.initializer}
    scores = set()
    for n in g.node:
        if n.op_type == "MatMul":
            for i, x in enumerate(n.input):
                if x in caches:
                    n.input[i] = prefix(x, "prefix_axis_kv")
                    if i == 0:  # cache @ query: the scores
                        scores.add(n.output[0])
        elif any(x in scores for x in n.input):
            scores.update(n.output)
            if n.op_type == "Reshape":
                shape = onnx.numpy_helper.to_array(inits[n.input[1]]).copy()
                shape[shape == length] = -1
                name = f"{n.output[0]}_prefix_shape"
                g.initializer.append(onnx.numpy_helper.from_array(shape, name))
                n.input[1] = name
        if n.op_type == "Where" and n.input[0] in masks:
            n.input[0] = prefix(n.input[0], "prefix_axis_mask")
        nodes.append(n)
    del g.node[:]
    g.node.extend(head + nodes)
    del g.value_info[:]  # the shapes after each Slice are dynamic now
    return m


def weight_matmuls(model):
    """The step's weight products alone: one MatMul per MatMul or Gemm of
    `model` whose second operand is a 2-D initializer, on an input [B, K] of
    its own, nothing else. No graph of the step can read its weights faster
    than onnxruntime's MatMul kernel reads them here. Returns (model, bytes of
    the weights)."""
    inits = {t.name: t for t in model.graph.initializer}
    weights = [inits[n.input[1]] for n in model.graph.node
               if n.op_type in ("MatMul", "Gemm") and n.input[1] in inits and len(inits[n.input[1]].dims) == 2]
    rows = sorted({w.dims[0] for w in weights})
    nodes = [helper.make_node("MatMul", [f"x{w.dims[0]}", w.name], [f"y{i}"]) for i, w in enumerate(weights)]
    graph = helper.make_graph(
        nodes, "weight_matmuls", [helper.make_tensor_value_info(f"x{k}", TensorProto.FLOAT, ["B", k]) for k in rows],
        [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, ["B", w.dims[1]]) for i, w in enumerate(weights)],
        weights)
    m = helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    return m, sum(int(np.prod(w.dims)) * 4 for w in weights)


def caches_feed_only_their_update(model):
    """Whether each cache input is read by one ScatterND and nothing else: then
    binding its new cache to the same buffer (in place) is exact."""
    readers = collections.defaultdict(list)
    for n in model.graph.node:
        for x in n.input:
            readers[x].append(n.op_type)
    return all(readers[i.name] == ["ScatterND"] for i in model.graph.input[2:])


class Plain:
    """A session run with a feed (what timing.block_latency calls)."""

    def __init__(self, sess, feed):
        self.sess, self.feed = sess, feed

    def run(self, _outputs=None, _feed=None):
        return self.sess.run(None, self.feed)


class Bound:
    """The session run through IO binding, the outputs pre-allocated; with
    `in_place`, each new cache bound to its old cache's buffer (onnxruntime's
    ScatterND then skips copying its input to its output: one buffer)."""

    def __init__(self, sess, feed, in_place):
        self.sess, self.binding = sess, sess.io_binding()
        names = [i.name for i in sess.get_inputs()]
        values = {k: ort.OrtValue.ortvalue_from_numpy(np.array(v, copy=True)) for k, v in feed.items()}
        for k, v in values.items():
            self.binding.bind_ortvalue_input(k, v)
        outs = sess.get_outputs()
        batch = feed[names[0]].shape[0]
        self.outputs = [ort.OrtValue.ortvalue_from_shape_and_type(
            [batch] + [d for d in outs[0].shape[1:]], np.float32)]
        for out, cache in zip(outs[1:], names[2:]):
            self.outputs.append(values[cache] if in_place else
                                ort.OrtValue.ortvalue_from_shape_and_type(values[cache].shape(), np.float32))
        for out, value in zip(outs, self.outputs):
            self.binding.bind_ortvalue_output(out.name, value)

    def run(self, _outputs=None, _feed=None):
        self.sess.run_with_iobinding(self.binding)
        return [v.numpy() for v in self.outputs]


# ------------------------------------------------------------------ measuring

def max_error(got, want):
    return max(float(np.abs(g - w).max()) for g, w in zip(got, want))


def session(model, threads, profile_prefix=None):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = threads
    if profile_prefix:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def measure(length, batches, threads, runs, j2o, profile):
    """One cell per (thread setting, batch) for a cache of `length`: the
    latencies of every graph and variant, their errors, the step's bytes."""
    inputs = decode.inputs(cache=length)
    specs = _common.specs(inputs)
    position = length // 2
    models = {"jaxonnx": jaxonnx.to_onnx(decode.make_model(), specs)}
    failure = None
    if j2o is not None:
        try:
            models["jax2onnx"] = j2o(decode.make_model(), specs)
        except Exception as e:  # the peer's failure is a cell, not a crash
            failure = compare.failure(e)
    models["prefix"] = read_prefix(models["jaxonnx"])
    alone, alone_bytes = weight_matmuls(models["jaxonnx"])
    nodes = {k: _common.count_nodes(m) for k, m in models.items()}
    in_place_ok = caches_feed_only_their_update(models["jaxonnx"])
    reference = decode.make_model()  # the same weights: nnx.Rngs(0)
    jitted = _common.jitted(reference)
    cells = []
    for t in threads:
        sessions = {k: session(m, t) for k, m in models.items()}
        sessions["weights alone"] = session(alone, t)
        copy = roofline.Copy(t or os.cpu_count(), COPY_MIB)
        for b in batches:
            xs = _common.sample(inputs, b, seed=b)
            xs[1] = np.array(position, np.int32)
            want = [np.asarray(w) for w in jax.tree.leaves(jitted(*xs))]
            runners = {k: Plain(s, {i.name: x for i, x in zip(s.get_inputs(), xs)})
                       for k, s in sessions.items() if k != "weights alone"}
            runners["weights alone"] = Plain(sessions["weights alone"], {
                i.name: np.random.default_rng(b).standard_normal((b, i.shape[1])).astype(np.float32)
                for i in sessions["weights alone"].get_inputs()})
            runners["bound"] = Bound(sessions["jaxonnx"], runners["jaxonnx"].feed, in_place=False)
            if in_place_ok:
                runners["in place"] = Bound(sessions["jaxonnx"], runners["jaxonnx"].feed, in_place=True)
            errors = {k: max_error(r.run(), want) for k, r in runners.items() if k != "weights alone"}
            # The prefix graph where its slice is clamped or empty, too.
            for p in (0, length - 1, length + 2, -1):
                ys = list(xs)
                ys[1] = np.array(p, np.int32)
                feed = {i.name: x for i, x in zip(sessions["prefix"].get_inputs(), ys)}
                want_p = [np.asarray(w) for w in jax.tree.leaves(jitted(*ys))]
                errors["prefix"] = max(errors["prefix"], max_error(Plain(sessions["prefix"], feed).run(), want_p))
            names = list(runners)
            # The copy runs in the same alternating blocks: the bandwidth it
            # gives is the machine's under the load the graphs ran under.
            *lat, copy_seconds = timing.block_latency([runners[k] for k in names] + [copy], lambda r: None, runs)
            cell = {"cache": length, "threads": t, "batch": b, "nodes": nodes, "jax2onnx_failure": failure,
                    "latency": dict(zip(names, lat)), "errors": errors,
                    "bytes": step_bytes(reference, b, length, position), "bandwidth": copy.moved / copy_seconds,
                    "weight_bytes": alone_bytes}
            if profile:
                cell["profile"] = {k: op_profile(models[k], runners[k].feed, runs, t)
                                   for k in ("jaxonnx", "jax2onnx") if k in models}
            cells.append(cell)
            print(f"cache {length}, {t or 'default'} thread(s), batch {b}: " +
                  ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in zip(names, lat)) +
                  f", copy {cell['bandwidth'] / 1e9:.1f} GB/s", file=sys.stderr, flush=True)
        del copy  # 1 GiB
    return cells


def op_profile(model, feed, runs, threads):
    """Microseconds per run each op type takes (onnxruntime's profiler; an If
    counts the nodes it runs)."""
    with tempfile.TemporaryDirectory() as tmp:
        sess = session(model, threads, str(Path(tmp) / "decode"))
        for _ in range(runs):
            sess.run(None, feed)
        events = json.loads(Path(sess.end_profiling()).read_text())
    count = sum(1 for e in events if e.get("name") == "model_run")
    per_op = collections.Counter()
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per_op[e["args"]["op_name"]] += e["dur"] / count
    return dict(per_op.most_common())


# ------------------------------------------------------------------ reporting

def table(cells):
    lines = ["| threads | cache | batch | jaxonnx ms/token | jax2onnx ms/token | jaxonnx / jax2onnx | "
             "MB a step must move | copy GB/s | roofline ms | jaxonnx % of roofline | IO binding ms, % | "
             "in place ms, % | prefix (hand-edited) ms, % | weight MatMuls alone ms, % of their roofline |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        lat, roof = c["latency"], c["bytes"] / c["bandwidth"]
        j2o = lat.get("jax2onnx")
        ratio = f"{lat['jaxonnx'] / j2o:.2f}" if j2o else "-"
        w = lat["weights alone"]
        alone = f"{w * 1e3:.2f}, {100 * c['weight_bytes'] / c['bandwidth'] / w:.0f}%"

        def cell(k):
            return f"{lat[k] * 1e3:.2f}, {100 * roof / lat[k]:.0f}%" if k in lat else "-"
        lines.append(
            f"| {c['threads'] or 'default'} | {c['cache']} | {c['batch']} | {lat['jaxonnx'] * 1e3:.2f} | "
            f"{f'{j2o * 1e3:.2f}' if j2o else c['jax2onnx_failure'] or 'not installed'} | "
            f"{ratio} | {c['bytes'] / 1e6:.1f} | {c['bandwidth'] / 1e9:.1f} | {roof * 1e3:.2f} | "
            f"**{100 * roof / lat['jaxonnx']:.0f}%** | "
            f"{cell('bound')} | {cell('in place')} | {cell('prefix')} | {alone} |")
    return "\n".join(lines)


def errors_line(cells):
    worst = collections.defaultdict(float)
    for c in cells:
        for k, e in c["errors"].items():
            worst[k] = max(worst[k], e)
    return ", ".join(f"{k} {e:.1e}" for k, e in worst.items())


def profile_table(cells, top=8):
    out = []
    for c in cells:
        for name, ops in c.get("profile", {}).items():
            total = sum(ops.values())
            parts = ", ".join(f"{op} {us / 1e3:.2f}" for op, us in list(ops.items())[:top])
            out.append(f"- {c['threads'] or 'default'} thread(s), cache {c['cache']}, batch {c['batch']}, {name} "
                       f"({total / 1e3:.2f} ms in kernels): {parts}")
    return "\n".join(out)


def write_docs(text):
    doc_section.write_section(DOC, BEGIN, END, text, "# LLM decode step (benchmarks/decode_step.py)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caches", nargs="+", type=int, default=[256, 1024])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 4])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 0],
                        help="onnxruntime intra-op threads, each setting in turn (0: its default, one per core)")
    parser.add_argument("--runs", type=int, default=30, help="kept onnxruntime runs per median")
    parser.add_argument("--profile", action="store_true", help="also profile jaxonnx's and jax2onnx's graphs")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    j2o = compare.peer()
    cells = [c for length in args.caches for c in measure(length, args.batches, args.threads, args.runs, j2o,
                                                          args.profile)]
    vocab, width, heads, kv_heads, head_dim, layers, hidden = decode.sizes(False)
    text = (compare.machine(load) + "\n"
            f"- model: {layers} layers, width {width}, {heads} query heads and {kv_heads} key/value heads of "
            f"{head_dim}, SwiGLU {hidden}, vocabulary {vocab}; float32; position = cache length / 2; "
            f"onnxruntime CPU\n"
            f"- copy GB/s: the memory bandwidth (benchmarks/roofline.py's Copy: {COPY_MIB} MiB copied between "
            f"buffers allocated up front, split over as many threads as onnxruntime runs; read + written bytes "
            f"per second), its median timed in the same alternating blocks as the graphs of its row\n"
            f"- max |onnxruntime - JAX| over all cells: {errors_line(cells)}\n\n"
            + table(cells))
    prof = profile_table(cells)
    if prof:
        text += ("\n\nWhere the time goes (onnxruntime's profiler, ms per step by op type; the profiler "
                 "adds several µs to every node it times, so the sums exceed the latency and small ops "
                 "look costlier than they are):\n\n" + prof)
    print(text)
    if args.write_docs:
        write_docs(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
