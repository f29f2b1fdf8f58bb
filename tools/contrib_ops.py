"""Which of onnxruntime's com.microsoft ops earn a place in target="onnxruntime-contrib".

Each candidate is timed against the standard graph it would replace, as onnxruntime
runs it: a session at the default optimization level, whose optimizer already fuses
some standard patterns into contrib ops at load (printed first, for the example
models). Each graph chains the pattern a few times at transformer sizes; batch 1 and 8,
default and one intra-op thread, timed in alternating blocks (benchmarks/timing.py).
Ratios are contrib / standard (below 1: the contrib op is faster). Then the emitted
form end to end: a causal pre-norm decoder converted for the default target and for
"onnxruntime-contrib".

    python tools/contrib_ops.py [--runs 40] [--only gqa rms ...]

docs/benchmarks/contrib_ops.md has a run's tables.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))  # timing

import timing  # noqa: E402

F = TensorProto.FLOAT
REPS = 6  # the pattern, chained: per-run overhead shared by enough work


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, ir_version=10, opset_imports=[
        helper.make_opsetid("", 23), helper.make_opsetid("com.microsoft", 1)])


def _vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def _weights(name, shape, seed):
    return numpy_helper.from_array(
        (np.random.default_rng(seed).standard_normal(shape) * 0.1).astype(np.float32), name)


def _floats(*shape):
    return lambda b, rng: rng.standard_normal((b, *shape)).astype(np.float32)


# ---------------------------------------------------------------- candidates
# Each returns (standard model, contrib model, {input: maker(batch, rng)}).

def skip_layer_norm(t, d, simplified=False):
    """Pre-norm residual stream: s' = s + f(norm(s)); the sum is read twice, so the
    contrib op returns it (output 3). Standard: Add + (RMS|Layer)Normalization."""
    def build(contrib):
        inits = [_weights("g", (d,), 1), _weights("b", (d,), 2),
                 numpy_helper.from_array(np.array([0.5], np.float32), "c")]
        nodes, s, delta = [], "x", "d"
        for i in range(REPS):
            if contrib:
                op = "SkipSimplifiedLayerNormalization" if simplified else "SkipLayerNormalization"
                ins = [s, delta, "g"] + ([] if simplified else ["b"])
                nodes.append(helper.make_node(op, ins, [f"n{i}", "", "", f"s{i}"],
                                              domain="com.microsoft", epsilon=1e-5))
            else:
                nodes.append(helper.make_node("Add", [s, delta], [f"s{i}"]))
                if simplified:
                    nodes.append(helper.make_node("RMSNormalization", [f"s{i}", "g"], [f"n{i}"], epsilon=1e-5))
                else:
                    nodes.append(helper.make_node("LayerNormalization", [f"s{i}", "g", "b"], [f"n{i}"],
                                                  epsilon=1e-5))
            nodes.append(helper.make_node("Mul", [f"n{i}", "c"], [f"d{i}"]))
            s, delta = f"s{i}", f"d{i}"
        nodes.append(helper.make_node("Add", [s, delta], ["out"]))
        return _model(nodes, [_vi("x", ["B", t, d]), _vi("d", ["B", t, d])], [_vi("out", ["B", t, d])], inits)
    return build(False), build(True), {"x": _floats(t, d), "d": _floats(t, d)}


def rms_norm(t, d):
    """RMSNormalization (opset 23) vs SimplifiedLayerNormalization."""
    def build(contrib):
        nodes, x = [], "x"
        for i in range(REPS):
            op = "SimplifiedLayerNormalization" if contrib else "RMSNormalization"
            nodes.append(helper.make_node(op, [x, "g"], [f"y{i}"], epsilon=1e-5, axis=-1))
            x = f"y{i}"
        return _model(nodes, [_vi("x", ["B", t, d])], [_vi(x, ["B", t, d])], [_weights("g", (d,), 1)])
    return build(False), build(True), {"x": _floats(t, d)}


def bias_gelu(t, d, approximate):
    """MatMul + bias Add + Gelu vs MatMul + FastGelu (tanh) / BiasGelu (erf)."""
    def build(contrib):
        inits = [_weights("w1", (d, 4 * d), 1), _weights("bias", (4 * d,), 2), _weights("w2", (4 * d, d), 3)]
        nodes, x = [], "x"
        for i in range(REPS):
            nodes.append(helper.make_node("MatMul", [x, "w1"], [f"m{i}"]))
            if contrib:
                nodes.append(helper.make_node("FastGelu" if approximate else "BiasGelu", [f"m{i}", "bias"],
                                              [f"g{i}"], domain="com.microsoft"))
            else:
                nodes += [helper.make_node("Add", [f"m{i}", "bias"], [f"a{i}"]),
                          helper.make_node("Gelu", [f"a{i}"], [f"g{i}"],
                                           approximate="tanh" if approximate else "none")]
            nodes.append(helper.make_node("MatMul", [f"g{i}", "w2"], [f"y{i}"]))
            x = f"y{i}"
        return _model(nodes, [_vi("x", ["B", t, d])], [_vi(x, ["B", t, d])], inits)
    return build(False), build(True), {"x": _floats(t, d)}


def attention(t, heads, kv_heads, head, kind):
    """Attention (opset 23) vs com.microsoft MultiHeadAttention (non-causal) or
    GroupQueryAttention (causal; seqlens_k and the total length made from the
    shape in the graph, as the exporter emits them)."""
    d, dk = heads * head, kv_heads * head
    causal = kind == "gqa"

    def build(contrib):
        nodes, inits, x = [], [], "q"
        if contrib and causal:
            inits = [numpy_helper.from_array(np.array([0], np.int64), "i0"),
                     numpy_helper.from_array(np.array([1], np.int64), "i1")]
            nodes += [helper.make_node("Shape", ["q"], ["qs"], start=0, end=2),
                      helper.make_node("Gather", ["qs", "i0"], ["b"]),
                      helper.make_node("Gather", ["qs", "i1"], ["t"]),
                      helper.make_node("Sub", ["t", "i1"], ["t1"]),
                      helper.make_node("Cast", ["t1"], ["t1i"], to=TensorProto.INT32),
                      helper.make_node("Expand", ["t1i", "b"], ["seqlens"]),
                      helper.make_node("Squeeze", ["t"], ["t0"]),
                      helper.make_node("Cast", ["t0"], ["total"], to=TensorProto.INT32)]
        for i in range(REPS):
            if not contrib:
                nodes.append(helper.make_node("Attention", [x, "k", "v"], [f"y{i}"], q_num_heads=heads,
                                              kv_num_heads=kv_heads, is_causal=int(causal)))
            elif causal:
                nodes.append(helper.make_node("GroupQueryAttention", [x, "k", "v", "", "", "seqlens", "total"],
                                              [f"y{i}"], domain="com.microsoft", num_heads=heads,
                                              kv_num_heads=kv_heads))
            else:
                nodes.append(helper.make_node("MultiHeadAttention", [x, "k", "v"], [f"y{i}"],
                                              domain="com.microsoft", num_heads=heads))
            x = f"y{i}"
        ins = [_vi("q", ["B", t, d]), _vi("k", ["B", t, dk]), _vi("v", ["B", t, dk])]
        return _model(nodes, ins, [_vi(x, ["B", t, d])], inits)
    return build(False), build(True), {"q": _floats(t, d), "k": _floats(t, dk), "v": _floats(t, dk)}


def rotary(t, heads, head):
    """Rotary embedding (rotate-half) decomposed as JAX writes it vs the standard
    RotaryEmbedding (opset 23), then the same against com.microsoft RotaryEmbedding."""
    half = head // 2
    angles = np.arange(t)[:, None] / (10000 ** (np.arange(half) / half))[None, :]
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)

    def build(kind):
        nodes, x = [], "x"
        if kind == "decomposed":
            inits = [numpy_helper.from_array(cos[:, None, :], "cos"), numpy_helper.from_array(sin[:, None, :], "sin"),
                     numpy_helper.from_array(np.array([0, 0, heads, head], np.int64), "s4"),
                     numpy_helper.from_array(np.array([0, 0, heads * head], np.int64), "s3")]
            for i in range(REPS):
                nodes += [helper.make_node("Reshape", [x, "s4"], [f"r{i}"]),
                          helper.make_node("Split", [f"r{i}"], [f"a{i}", f"b{i}"], axis=-1, num_outputs=2),
                          helper.make_node("Mul", [f"a{i}", "cos"], [f"ac{i}"]),
                          helper.make_node("Mul", [f"b{i}", "sin"], [f"bs{i}"]),
                          helper.make_node("Sub", [f"ac{i}", f"bs{i}"], [f"o{i}"]),
                          helper.make_node("Mul", [f"b{i}", "cos"], [f"bc{i}"]),
                          helper.make_node("Mul", [f"a{i}", "sin"], [f"as{i}"]),
                          helper.make_node("Add", [f"bc{i}", f"as{i}"], [f"p{i}"]),
                          helper.make_node("Concat", [f"o{i}", f"p{i}"], [f"c{i}"], axis=-1),
                          helper.make_node("Reshape", [f"c{i}", "s3"], [f"y{i}"])]
                x = f"y{i}"
        else:
            inits = [numpy_helper.from_array(cos, "cosc"), numpy_helper.from_array(sin, "sinc")]
            for i in range(REPS):
                if kind == "contrib":
                    nodes.append(helper.make_node("RotaryEmbedding", [x, "pos", "cosc", "sinc"], [f"y{i}"],
                                                  domain="com.microsoft", num_heads=heads))
                else:
                    nodes.append(helper.make_node("RotaryEmbedding", [x, "cosc", "sinc", "pos"], [f"y{i}"],
                                                  num_heads=heads))
                x = f"y{i}"
        ins = [_vi("x", ["B", t, heads * head])]
        if kind != "decomposed":
            ins.append(_vi("pos", ["B", t], TensorProto.INT64))
        return _model(nodes, ins, [_vi(x, ["B", t, heads * head])], inits)
    feeds = {"x": _floats(t, heads * head),
             "pos": lambda b, rng: np.broadcast_to(np.arange(t, dtype=np.int64), (b, t)).copy()}
    return build("decomposed"), build("standard"), build("contrib"), feeds


CANDIDATES = {
    "skip_layer_norm": lambda: [("T=32 D=64", skip_layer_norm(32, 64)), ("T=32 D=512", skip_layer_norm(32, 512))],
    "skip_rms": lambda: [("T=32 D=64", skip_layer_norm(32, 64, True)), ("T=32 D=512", skip_layer_norm(32, 512, True))],
    "rms": lambda: [("T=32 D=64", rms_norm(32, 64)), ("T=32 D=512", rms_norm(32, 512))],
    "fast_gelu": lambda: [("T=32 D=64", bias_gelu(32, 64, True)), ("T=32 D=256", bias_gelu(32, 256, True))],
    "bias_gelu": lambda: [("T=32 D=64", bias_gelu(32, 64, False)), ("T=32 D=256", bias_gelu(32, 256, False))],
    "mha": lambda: [("T=32 H=4x16", attention(32, 4, 4, 16, "mha")),
                    ("T=32 H=8x64", attention(32, 8, 8, 64, "mha"))],
    "gqa": lambda: [("T=32 H=4x16", attention(32, 4, 4, 16, "gqa")),
                    ("T=65 H=4x16", attention(65, 4, 4, 16, "gqa")),
                    ("T=32 H=8x64", attention(32, 8, 8, 64, "gqa")),
                    ("T=32 H=8x64 kv=2", attention(32, 8, 2, 64, "gqa")),
                    ("T=128 H=8x64 kv=2", attention(128, 8, 2, 64, "gqa"))],
    "rotary": lambda: [("T=32 H=4x16", rotary(32, 4, 16)), ("T=32 H=8x64", rotary(32, 8, 64)),
                       ("T=1 H=8x64", rotary(1, 8, 64))],
}
NAMES = {"skip_layer_norm": "Add + LayerNormalization -> SkipLayerNormalization",
         "skip_rms": "Add + RMSNormalization -> SkipSimplifiedLayerNormalization",
         "rms": "RMSNormalization -> SimplifiedLayerNormalization",
         "fast_gelu": "bias Add + Gelu(tanh) -> FastGelu",
         "bias_gelu": "bias Add + Gelu -> BiasGelu",
         "mha": "Attention -> MultiHeadAttention",
         "gqa": "Attention(is_causal) -> GroupQueryAttention",
         "rotary": "decomposed rotary -> RotaryEmbedding (standard, opset 23) / (com.microsoft)"}
SETTINGS = [(b, threads) for threads in (0, 1) for b in (1, 8)]


def _time(models, feeds, runs):
    """{(batch, threads): [seconds per model]} and the largest output difference."""
    out, diff = {}, 0.0
    for threads in (0, 1):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        sessions = [ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
                    for m in models]
        for b in (1, 8):
            rng = np.random.default_rng(b)
            feed = {k: make(b, rng) for k, make in feeds.items()}

            def feed_of(s, feed=feed):
                return {i.name: feed[i.name] for i in s.get_inputs()}
            results = [s.run(None, feed_of(s))[0] for s in sessions]
            diff = max([diff] + [float(np.abs(r - results[0]).max()) for r in results[1:]])
            out[b, threads] = timing.block_latency(sessions, feed_of, runs)
    return out, diff


def candidates(names, runs):
    header = ("| candidate | shape | " + " | ".join(f"B={b}, {'1 thread' if t else 'default threads'}"
                                                   for b, t in SETTINGS) + " | max diff |")
    lines = [header, "|---|---|" + "---|" * (len(SETTINGS) + 1)]
    for name in names:
        for shape, case in CANDIDATES[name]():
            *models, feeds = case
            times, diff = _time(models, feeds, runs)
            cells = [" / ".join(f"{x / times[s][0]:.2f}x" for x in times[s][1:]) for s in SETTINGS]
            lines.append(f"| {NAMES[name]} | {shape} | " + " | ".join(cells) + f" | {diff:.1e} |")
            print(lines[-1], flush=True)
    return "\n".join(lines)


def what_onnxruntime_makes(names=("gpt", "vit")):
    """The contrib ops onnxruntime's own optimizer puts into the default target's graph."""
    import importlib

    import _common
    import jaxonnx
    lines = []
    for name in names:
        module = importlib.import_module(name)
        model = jaxonnx.to_onnx(module.make_model(), _common.specs(module.inputs()))
        with tempfile.TemporaryDirectory() as tmp:
            options = ort.SessionOptions()
            options.optimized_model_filepath = os.path.join(tmp, "opt.onnx")
            options.log_severity_level = 3
            ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
            optimized = onnx.load(options.optimized_model_filepath)
        ops = collections.Counter(f"{n.domain}.{n.op_type}" for n in optimized.graph.node
                                  if n.domain == "com.microsoft")
        lines.append(f"- {name}: " + (", ".join(f"{op} x{k}" for op, k in sorted(ops.items())) or "none"))
    return "\n".join(lines)


class Decoder:
    """A causal pre-norm decoder (LayerNorm, self-attention with is_causal, gelu MLP),
    as a flax nnx stack; built lazily so the candidates run without flax."""

    @staticmethod
    def make(width, heads, kv_heads, layers):
        import jax
        import jax.numpy as jnp
        from flax import nnx

        class Block(nnx.Module):
            def __init__(self, rngs):
                self.head = width // heads
                self.norm1, self.norm2 = nnx.LayerNorm(width, rngs=rngs), nnx.LayerNorm(width, rngs=rngs)
                self.q = nnx.Linear(width, width, rngs=rngs)
                self.kv = nnx.Linear(width, 2 * kv_heads * self.head, rngs=rngs)
                self.out = nnx.Linear(width, width, rngs=rngs)
                self.up, self.down = nnx.Linear(width, 4 * width, rngs=rngs), nnx.Linear(4 * width, width, rngs=rngs)

            def __call__(self, x):
                b, t, _ = x.shape
                h = self.norm1(x)
                q = self.q(h).reshape(b, t, heads, self.head)
                k, v = jnp.split(self.kv(h).reshape(b, t, 2 * kv_heads, self.head), 2, axis=2)
                a = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(b, t, width)
                x = x + self.out(a)
                return x + self.down(jax.nn.gelu(self.up(self.norm2(x))))

        class Stack(nnx.Module):
            def __init__(self, rngs):
                self.blocks = nnx.List([Block(rngs) for _ in range(layers)])

            def __call__(self, x):
                for block in self.blocks:
                    x = block(x)
                return x

        return Stack(nnx.Rngs(0))


DECODERS = [("d=64, 4 heads, 4 layers, T=32", 64, 4, 4, 4, 32),
            ("d=256, 8 heads (2 kv), 4 layers, T=64", 256, 8, 2, 4, 64)]


def decoders(runs):
    import jax
    from jax import export

    import jaxonnx
    lines = ["| decoder | " + " | ".join(f"B={b}, {'1 thread' if t else 'default threads'}: default, contrib / default"
                                         for b, t in SETTINGS) + " | max diff |",
             "|---|" + "---|" * (len(SETTINGS) + 1)]
    logs = {s: [] for s in SETTINGS}
    for title, width, heads, kv, layers, t in DECODERS:
        stack = Decoder.make(width, heads, kv, layers)
        spec = [jax.ShapeDtypeStruct(export.symbolic_shape(f"B, {t}, {width}"), np.float32)]
        models = [jaxonnx.to_onnx(stack, spec), jaxonnx.to_onnx(stack, spec, target="onnxruntime-contrib")]
        times, diff = _time(models, {"in_0": _floats(t, width)}, runs)
        cells = []
        for s in SETTINGS:
            base, contrib = times[s]
            logs[s].append(math.log(contrib / base))
            cells.append(f"{base * 1e3:.2f} ms, {contrib / base:.2f}x")
        lines.append(f"| {title} | " + " | ".join(cells) + f" | {diff:.1e} |")
        print(lines[-1], flush=True)
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="kept onnxruntime runs per median")
    parser.add_argument("--only", nargs="+", choices=list(CANDIDATES) + ["decoders"],
                        default=list(CANDIDATES) + ["decoders"])
    args = parser.parse_args(argv)
    import compare
    print(compare.machine(os.getloadavg()) + "\n")
    print("What onnxruntime's optimizer makes of the default target's graphs (com.microsoft ops):")
    print(what_onnxruntime_makes() + "\n")
    names = [n for n in args.only if n in CANDIDATES]
    if names:
        print(candidates(names, args.runs) + "\n")
    if "decoders" in args.only:
        print(decoders(args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
