"""Node counts of a few programs: jaxonnx without and with the optimizer, and
jax2onnx beside them when it can be run.

    python benchmarks/node_counts.py [--peer-python /path/to/python]

jax2onnx is not a dependency. Its column is filled when it imports here, or
from another interpreter that has it (--peer-python; e.g. a throwaway venv with
`pip install jax2onnx flax`), which this script runs with --peer to print the
peer's counts as JSON. Without either, the column says "-".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys


def programs():
    """name -> (make the callable, input shapes with "B" symbolic)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    class MLP(nnx.Module):  # examples/mlp.py
        def __init__(self, rngs):
            self.linear1 = nnx.Linear(30, 20, rngs=rngs)
            self.linear2 = nnx.Linear(20, 20, rngs=rngs)
            self.linear3 = nnx.Linear(20, 10, rngs=rngs)

        def __call__(self, x):
            x = jax.nn.relu(self.linear1(x))
            x = jax.nn.relu(self.linear2(x))
            return jax.nn.softmax(self.linear3(x))

    rng = np.random.default_rng(0)
    w = {k: jnp.asarray(rng.standard_normal((16, 16)).astype(np.float32) * 0.1)
         for k in ("q", "k", "v", "up", "down")}

    def layer_norm(x):
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5)

    def transformer_block(x):  # [B, 8, 16]: single-head attention + MLP, jnp ops only
        h = layer_norm(x)
        q, k, v = h @ w["q"], h @ w["k"], h @ w["v"]
        scores = jnp.einsum("bsd,btd->bst", q, k) / 4.0
        x = x + jax.nn.softmax(scores, axis=-1) @ v
        h = layer_norm(x)
        return x + jax.nn.gelu(h @ w["up"], approximate=True) @ w["down"]

    def layout_round_trip(x):  # NHWC -> NCHW, elementwise, back
        y = jnp.transpose(x, (0, 3, 1, 2))
        y = jnp.tanh(y * 2.0 + 1.0)
        return jnp.transpose(y, (0, 2, 3, 1))

    return {
        "nnx MLP (examples/mlp.py)": (lambda: MLP(nnx.Rngs(0)), [("B", 30)]),
        "transformer block (jnp)": (lambda: transformer_block, [("B", 8, 16)]),
        "layout round trip": (lambda: layout_round_trip, [("B", 4, 4, 3)]),
    }


def jax2onnx_counts():
    from jax2onnx import to_onnx
    out = {}
    for name, (make, shapes) in programs().items():
        try:
            out[name] = len(to_onnx(make(), shapes).graph.node)
        except Exception as e:  # a peer failure is a cell, not a crash
            out[name] = f"error: {type(e).__name__}"
    return out


def peer_counts(peer_python):
    try:
        import jax2onnx  # noqa: F401
        return jax2onnx_counts()
    except ImportError:
        pass
    if not peer_python:
        return {}
    run = subprocess.run([peer_python, __file__, "--peer"], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"peer run failed:\n{run.stderr[-2000:]}", file=sys.stderr)
        return {}
    return json.loads(run.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-python", help="an interpreter that can import jax2onnx")
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        print(json.dumps(jax2onnx_counts()))
        return
    import jaxonnx

    peer = peer_counts(args.peer_python)
    print(f"{'program':<28}{'raw':>6}{'optimized':>11}{'jax2onnx':>10}")
    for name, (make, shapes) in programs().items():
        try:
            raw = len(jaxonnx.to_onnx(make(), shapes, optimize=False).graph.node)
            opt = len(jaxonnx.to_onnx(make(), shapes).graph.node)
        except jaxonnx.ConversionError as e:  # a primitive no bundled plugin lowers yet
            raw = opt = "n/a"
            print(f"{name}: {str(e).splitlines()[0]}", file=sys.stderr)
        print(f"{name:<28}{raw:>6}{opt:>11}{str(peer.get(name, '-')):>10}")


if __name__ == "__main__":
    main()
