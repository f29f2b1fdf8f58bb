"""What a graph change would save in onnxruntime before anyone builds it: jaxonnx's
graph of an example, rewritten at the ONNX level into variants, each timed against
the graph as converted and against jax2onnx's (alternating blocks,
benchmarks/timing.py), at batch 1 and 8, one intra-op thread and the default.

Variants (experiments on the proto; the converter is not changed):
- no_guard: every top-level If replaced by the branch it takes at this batch (for
  attention: the Attention without its empty-size guard). Only valid for the sizes
  it was made for; it measures what the guard costs.
- qkv: MatMuls that read the same value with constant 2-D weights (q, k and v
  projections), each with its constant bias Add, as one MatMul of the concatenated
  weights, one Add and a Split.
- no_guard+qkv: both.
- zero_bias: bias Adds of all-zero constants dropped (the examples' biases are
  their zero initial values): what folding every bias Add away could save at most.
- gemm: MatMul + bias Add on 3-D values as Reshape + Gemm + Reshape, the shapes of
  this batch as constants (jax2onnx's form without its Shape/Concat plumbing).
- flat: the token rows kept 2-D between the ops that need 3-D (attention), so that
  onnxruntime fuses every MatMul + bias Add into a Gemm; shapes of this batch as
  constants. flat+no_guard: both.

    python tools/graph_variants.py [vit gpt ...] [--runs 30] [--batches 1 8] [--threads 1 0] [--rounds 3]

Each line: a variant's median latency, its ratio to the converted graph (the median
of --rounds rounds of alternating blocks; the rounds' range in parentheses), its nodes.

Every variant's outputs are checked against the converted graph's (rtol 1e-4).
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))  # compare, latency, roofline, timing

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import _common  # noqa: E402
import compare  # noqa: E402
import latency  # noqa: E402
import roofline  # noqa: E402
import timing  # noqa: E402


def _copy(model):
    return onnx.ModelProto.FromString(model.SerializeToString())


def prune(model):
    """Drops nodes whose outputs nothing reads (in place)."""
    g = model.graph
    needed = {o.name for o in g.output}
    keep = []
    for node in reversed(g.node):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(node.input)
            for a in node.attribute:  # outer-scope values read by bodies
                for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    needed.update(i for n in sub.node for i in n.input)
    del g.node[:]
    g.node.extend(reversed(keep))
    used = needed
    inits = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(inits)
    return model


def no_guard(model, feed):
    """Every top-level If replaced by the branch it takes on `feed`."""
    values = roofline._runtime_values(model, feed)
    m = _copy(model)
    nodes = []
    for node in m.graph.node:
        if node.op_type != "If" or node.input[0] not in values:
            nodes.append(node)
            continue
        taken = "then_branch" if bool(np.asarray(values[node.input[0]]).reshape(-1)[0]) else "else_branch"
        branch = next(a.g for a in node.attribute if a.name == taken)
        rename = {b.name: o for b, o in zip(branch.output, node.output)}
        produced = set()
        for n in branch.node:
            n = onnx.NodeProto.FromString(n.SerializeToString())
            n.output[:] = [rename.get(o, o) for o in n.output]
            n.input[:] = [rename.get(i, i) for i in n.input]
            produced.update(n.output)
            nodes.append(n)
        for b, o in zip(branch.output, node.output):
            if o not in produced:  # the branch returns an outer value as it is
                nodes.append(helper.make_node("Identity", [b.name], [o]))
        m.graph.initializer.extend(branch.initializer)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return prune(m)


def qkv(model):
    """MatMuls of one input by constant 2-D weights of the same K (each with a
    constant bias Add) merged into MatMul + Add + Split."""
    m = _copy(model)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    readers = collections.defaultdict(list)
    for n in g.node:
        for i in n.input:
            readers[i].append(n)
    groups = collections.defaultdict(list)
    for n in g.node:
        if n.op_type == "MatMul" and n.input[1] in inits and len(inits[n.input[1]].dims) == 2:
            groups[(n.input[0], inits[n.input[1]].dims[0])].append(n)
    # nodes are keyed by their first output: protobuf wrappers have no stable identity
    drop, add_before = set(), {}
    for (a, _), mms in groups.items():
        if len(mms) < 2:
            continue
        biases = []
        for mm in mms:
            r = readers[mm.output[0]]
            ok = (len(r) == 1 and r[0].op_type == "Add" and mm.output[0] in r[0].input
                  and next(i for i in r[0].input if i != mm.output[0]) in inits)
            biases.append(r[0] if ok else None)
        if any(b is None for b in biases) and not all(b is None for b in biases):
            continue
        ws = [numpy_helper.to_array(inits[mm.input[1]]) for mm in mms]
        sizes = [w.shape[1] for w in ws]
        base = mms[0].output[0] + ".qkv"
        new_inits = [numpy_helper.from_array(np.concatenate(ws, axis=1), base + ".w"),
                     numpy_helper.from_array(np.array(sizes, np.int64), base + ".split")]
        new = [helper.make_node("MatMul", [a, base + ".w"], [base + ".mm"])]
        outs = [mm.output[0] for mm in mms]
        last = base + ".mm"
        if biases[0] is not None:
            bs = [numpy_helper.to_array(inits[next(i for i in b.input if i != mm.output[0])]).reshape(-1)
                  for b, mm in zip(biases, mms)]
            bs = [np.broadcast_to(b, (s,)) for b, s in zip(bs, sizes)]
            new_inits.append(numpy_helper.from_array(np.concatenate(bs).astype(ws[0].dtype), base + ".b"))
            new.append(helper.make_node("Add", [last, base + ".b"], [base + ".add"]))
            last = base + ".add"
            outs = [b.output[0] for b in biases]
            drop.update(b.output[0] for b in biases)
        new.append(helper.make_node("Split", [last, base + ".split"], outs, axis=-1))
        drop.update(mm.output[0] for mm in mms)
        add_before[mms[0].output[0]] = new
        g.initializer.extend(new_inits)
    nodes = []
    for n in g.node:
        nodes.extend(add_before.get(n.output[0], []))
        if n.output[0] not in drop:
            nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)
    return prune(m)


def _bias_adds(g, inits):
    """(MatMul, its only reader: an Add of a constant) pairs, MatMul weights constant 2-D."""
    readers = collections.defaultdict(list)
    for n in g.node:
        for i in n.input:
            readers[i].append(n)
    pairs = []
    for n in g.node:
        if n.op_type == "MatMul" and n.input[1] in inits and len(inits[n.input[1]].dims) == 2:
            r = readers[n.output[0]]
            if len(r) == 1 and r[0].op_type == "Add":
                other = next((i for i in r[0].input if i != n.output[0]), None)
                if other in inits:
                    pairs.append((n, r[0], other))
    return pairs


def zero_bias(model):
    """Bias Adds of an all-zero constant after a MatMul removed (the examples' nnx
    Linears keep their zero initial biases): an upper bound on what folding every
    bias Add into its MatMul could save."""
    m = _copy(model)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    rename, drop = {}, set()
    for mm, add, bias in _bias_adds(g, inits):
        if not numpy_helper.to_array(inits[bias]).any():
            rename[add.output[0]] = mm.output[0]
            drop.add(add.output[0])
    nodes = [n for n in g.node if n.output[0] not in drop]

    def reads(ns):  # bodies read outer values too
        for n in ns:
            n.input[:] = [rename.get(i, i) for i in n.input]
            for a in n.attribute:
                for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    reads(sub.node)
    reads(nodes)
    for o in g.output:
        if o.name in rename:  # keep the graph output's name
            nodes.append(helper.make_node("Identity", [rename[o.name]], [o.name]))
    del g.node[:]
    g.node.extend(nodes)
    return prune(m)


def gemm(model, feed):
    """MatMul of a 3-D value by a constant 2-D weight plus its constant bias Add, as
    Reshape to 2-D + Gemm (bias included) + Reshape back, with the shapes of this
    batch as constants (the best case: no Shape/Concat to compute them)."""
    values = roofline._runtime_values(model, feed)
    shapes = {k: v.shape for k, v in values.items()}
    shapes.update({i.name: x.shape for i, x in zip(model.graph.input, feed.values())})
    m = _copy(model)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    swap = {}
    for mm, add, bias in _bias_adds(g, inits):
        a = shapes.get(mm.input[0])
        b = numpy_helper.to_array(inits[bias])
        n_out = inits[mm.input[1]].dims[1]
        if a is None or len(a) != 3 or b.size != n_out:
            continue
        base = mm.output[0] + ".gemm"
        g.initializer.extend([
            numpy_helper.from_array(np.array([-1, a[-1]], np.int64), base + ".in"),
            numpy_helper.from_array(np.array([a[0], a[1], n_out], np.int64), base + ".out"),
            numpy_helper.from_array(b.reshape(-1), base + ".b")])
        swap[mm.output[0]] = [helper.make_node("Reshape", [mm.input[0], base + ".in"], [base + ".x"]),
                        helper.make_node("Gemm", [base + ".x", mm.input[1], base + ".b"], [base + ".y"]),
                        helper.make_node("Reshape", [base + ".y", base + ".out"], [add.output[0]])]
        swap[add.output[0]] = []
    nodes = []
    for n in g.node:
        nodes.extend(swap.get(n.output[0], [n]))
    del g.node[:]
    g.node.extend(nodes)
    return prune(m)


# Ops that work on (rows, features) as they do on (batch, tokens, features).
_ROWWISE = {"Add", "Sub", "Mul", "Div", "Gelu", "Relu", "Sigmoid", "Tanh", "Erf",
            "LayerNormalization", "MatMul"}


def _outer_reads(node):
    """Names a node's bodies read from the enclosing graph."""
    out = set()
    for a in node.attribute:
        for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
            inner = {o for n in sub.node for o in n.output} | {i.name for i in sub.input}
            for n in sub.node:
                out.update(i for i in n.input if i and i not in inner)
                out |= _outer_reads(n) - inner
    return out


def flat(model, feed):
    """Token rows kept 2-D: every 3-D value (b, T, X) that only row-wise ops touch
    (elementwise ops, LayerNormalization over the last axis, MatMul by a constant 2-D
    weight) is computed as (b*T, X), and reshaped to 3-D only where another op (an
    If around Attention, a Concat, a graph output) reads it. onnxruntime then fuses
    each MatMul + bias Add into a Gemm. Constants are reshaped or tiled to match; the
    shapes of this batch are constants, so the variant is only valid at this batch."""
    values = roofline._runtime_values(model, feed)
    shapes = {k: v.shape for k, v in values.items()}
    shapes.update({i.name: x.shape for i, x in zip(model.graph.input, feed.values())})
    m = _copy(model)
    g = m.graph
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    is3 = lambda n: n in shapes and len(shapes[n]) == 3  # noqa: E731
    flat_of, have3 = {}, {i.name for i in g.input} | set(inits)
    nodes, new_inits = [], []

    def const(name, array):
        new_inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def to2(name):
        if name not in flat_of:
            b, t, x = shapes[name]
            flat_of[name] = name + ".2d"
            nodes.append(helper.make_node("Reshape", [name, const(name + ".2d.shape", np.array([b * t, x], np.int64))],
                                          [name + ".2d"]))
        return flat_of[name]

    def to3(name):
        if name not in have3:
            have3.add(name)
            nodes.append(helper.make_node("Reshape", [flat_of[name], const(name + ".3d.shape", np.array(shapes[name], np.int64))],
                                          [name]))
        return name

    def operand(name, rows):
        """`name` as an operand of a row-wise op over `rows` rows, or None."""
        if is3(name) and name not in inits:
            return to2(name)
        if name in inits:
            a = inits[name]
            if a.ndim <= 1:
                return name
            if a.ndim == 3 and a.shape[0] == 1:
                if a.shape[1] == 1:
                    return const(name + ".row", a.reshape(-1))
                return const(name + ".rows", np.tile(a[0], (rows // a.shape[1], 1)))
            return None
        return name if name in shapes and len(shapes[name]) <= 1 else None

    for node in g.node:
        out = node.output[0] if node.output else ""
        ok = node.op_type in _ROWWISE and is3(out) and len(node.output) == 1
        if ok and node.op_type == "LayerNormalization":
            ok = helper.get_attribute_value(next(a for a in node.attribute if a.name == "axis")) in (-1, 2) \
                if any(a.name == "axis" for a in node.attribute) else False
        if ok and node.op_type == "MatMul":
            ok = is3(node.input[0]) and node.input[1] in inits and inits[node.input[1]].ndim == 2
        if ok and node.op_type != "MatMul":
            # no broadcasting between computed operands: each is a row-wise operand or 3-D like the output
            ok = all(shapes.get(i) == shapes[out] or i in inits or len(shapes.get(i, (0, 0))) <= 1
                     for i in node.input if i)
        if ok:
            rows = shapes[out][0] * shapes[out][1]
            ins = [operand(node.input[0], rows)] + \
                ([node.input[1]] if node.op_type == "MatMul" else [operand(i, rows) if i else i for i in node.input[1:]])
            if all(i is not None for i in ins):
                n = onnx.NodeProto.FromString(node.SerializeToString())
                n.input[:] = ins
                n.output[:] = [out + ".2d"]
                flat_of[out] = out + ".2d"
                nodes.append(n)
                continue
        for i in list(node.input) + sorted(_outer_reads(node)):
            if i in flat_of:
                to3(i)
        nodes.append(node)
        have3.update(node.output)
    for o in g.output:
        if o.name in flat_of:
            to3(o.name)
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(new_inits)
    return prune(m)


def variants(model, feed):
    ng = no_guard(model, feed)
    return {"converted": model, "no_guard": ng, "qkv": qkv(model), "no_guard+qkv": qkv(ng),
            "zero_bias": zero_bias(model), "gemm": gemm(model, feed), "flat": flat(model, feed),
            "flat+no_guard": flat(ng, feed)}


def run(name, runs, j2o, batches=(1, 8), thread_settings=(1, None), rounds=3):
    title, inputs, models = latency.convert(name, j2o)
    print(f"## {title}")
    for b in batches:
        xs = _common.sample(inputs, b, seed=b)
        base = models["jaxonnx"]
        probe = roofline.session(base)
        feed = {v.name: x for v, x in zip(probe.get_inputs(), xs)}
        want = probe.run(None, feed)
        vs = variants(base, feed)
        if not isinstance(models.get("jax2onnx", "x"), str):
            vs["jax2onnx"] = models["jax2onnx"]
        for threads in thread_settings:
            sessions = {k: roofline.session(m, threads) for k, m in vs.items()}
            feeds = {}
            for k, s in sessions.items():
                feeds[s] = {v.name: x for v, x in zip(s.get_inputs(), xs)}
                if k != "jax2onnx":
                    got = s.run(None, feeds[s])
                    assert all(np.allclose(g, w, rtol=1e-4, atol=1e-5) for g, w in zip(got, want)), k
            # rounds of alternating blocks; a variant's figure is the median of its
            # per-round ratios to the converted graph, the range beside it
            ratios = {k: [] for k in sessions}
            times = {k: [] for k in sessions}
            for _ in range(rounds):
                lat = dict(zip(sessions, timing.block_latency(list(sessions.values()),
                                                              feeds.__getitem__, runs)))
                for k, v in lat.items():
                    ratios[k].append(v / lat["converted"])
                    times[k].append(v)
            setting = "default threads" if threads is None else f"{threads} thread"
            print(f"B={b}, {setting}: " + ", ".join(
                f"{k} {statistics.median(times[k]) * 1e6:.0f} µs {statistics.median(ratios[k]):.2f}x"
                + (f" ({min(ratios[k]):.2f}-{max(ratios[k]):.2f})" if k != "converted" else "")
                + f" {len(vs[k].graph.node)} nodes" for k in sessions), flush=True)
    print()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["vit", "gpt", "gpt24"], choices=compare.MODELS)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 0],
                        help="intra-op thread settings; 0 = onnxruntime's default")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    j2o = compare.peer()
    for name in args.models:
        run(name, args.runs, j2o, args.batches, [t or None for t in args.threads], args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
