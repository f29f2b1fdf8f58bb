"""Weight-quantized models: file size and onnxruntime latency, float32 vs int8 vs int4,
per target (docs/quantization.md has a run's tables).

The model: a stack of feed-forward blocks (x + W2 relu(W1 x)), width 512, hidden
2048, 2 blocks: 4.2M weights, 16.8 MB in float32. Quantized with qwix's weight-only
PTQ: int8 per channel, int4 per channel, int4 in blocks of 32 and of 128 along the
input axis. Each is converted for the default target ("onnxruntime": DequantizeLinear
+ MatMul), "onnxruntime-contrib" (com.microsoft.MatMulNBits) and "portable" (opset
17: int8 per channel as DequantizeLinear; int4 widened to int8; blocked scales as
Cast + Mul). Latency: one intra-op thread, batch 1 (a decode step: the weights are
read once per run) and batch 64, median of alternating blocks (benchmarks/timing.py),
in a default session and in one with session.qdq_matmulnbits_accuracy_level = 0 (at
load onnxruntime fuses DequantizeLinear + MatMul into MatMulNBits, by default at
accuracy level 4: activations rounded to int8); also the largest output difference
from JAX's quantized program.

    python benchmarks/quantized.py [--runs 40] [--width 512] [--hidden 2048] [--blocks 2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import qwix
from flax import nnx

import jaxonnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import timing  # noqa: E402

TARGETS = ("onnxruntime", "onnxruntime-contrib", "portable")
SCHEMES = {  # name: (weight_qtype, tile_size)
    "float32": None,
    "int8 per channel": ("int8", None),
    "int4 per channel": ("int4", None),
    "int4 blocks of 32": ("int4", 32),
    "int4 blocks of 128": ("int4", 128),
}


class FeedForward(nnx.Module):
    def __init__(self, width, hidden, blocks, *, rngs):
        self.ups = nnx.List([nnx.Linear(width, hidden, rngs=rngs) for _ in range(blocks)])
        self.downs = nnx.List([nnx.Linear(hidden, width, rngs=rngs) for _ in range(blocks)])

    def __call__(self, x):
        for up, down in zip(self.ups, self.downs):
            x = x + down(jax.nn.relu(up(x)))
        return x


def _session(model, accuracy_level=None):
    """One intra-op thread; accuracy_level: onnxruntime's for the MatMulNBits it
    fuses DequantizeLinear + MatMul into at load (None: its default, 4)."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    if accuracy_level is not None:
        opts.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", str(accuracy_level))
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--blocks", type=int, default=2)
    args = ap.parse_args()

    base = FeedForward(args.width, args.hidden, args.blocks, rngs=nnx.Rngs(0))
    example = jnp.ones((1, args.width), jnp.float32)
    spec = [jax.ShapeDtypeStruct((jax.export.symbolic_shape("B")[0], args.width), np.float32)]
    rng = np.random.default_rng(0)
    feeds = {b: rng.standard_normal((b, args.width)).astype(np.float32) for b in (1, 64)}
    print(f"model: {args.blocks} x (Linear {args.width}->{args.hidden}, relu, Linear "
          f"{args.hidden}->{args.width}); onnxruntime {ort.__version__}, one intra-op thread\n")
    print("| weights | target | file MB | vs float32 | batch 1 ms | batch 64 ms | max abs diff "
          "vs JAX | batch 1 ms, level 0 | batch 64 ms, level 0 | max abs diff, level 0 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    float_size = {}
    for scheme, how in SCHEMES.items():
        if how is None:
            model = base
        else:
            rules = [qwix.QuantizationRule(module_path=".*", weight_qtype=how[0], tile_size=how[1])]
            model = qwix.quantize_model(base, qwix.PtqProvider(rules), example)
        fn = jax.jit(lambda x, m=model: m(x))
        want = {b: np.asarray(fn(x)) for b, x in feeds.items()}
        for target in TARGETS:
            onnx_model = jaxonnx.to_onnx(lambda x, m=model: m(x), spec, target=target)
            size = len(onnx_model.SerializeToString())
            float_size.setdefault(target, size)
            cells = []
            for level in (None, 0):  # onnxruntime's default session, then accuracy_level 0
                sess = _session(onnx_model, level)
                name = sess.get_inputs()[0].name
                diff = max(float(np.abs(sess.run(None, {name: x})[0] - want[b]).max())
                           for b, x in feeds.items())
                ms = [timing.block_latency([sess], lambda s, x=x: {name: x}, args.runs)[0] * 1e3
                      for x in feeds.values()]
                cells += [f"{ms[0]:.3f}", f"{ms[1]:.2f}", f"{diff:.1e}"]
            print(f"| {scheme} | {target} | {size / 1e6:.2f} | {size / float_size[target]:.3f} | "
                  + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
