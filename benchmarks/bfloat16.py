"""A bfloat16 language model on onnxruntime's CPU provider: file size and latency
of the decode step of examples/decode.py with its weights and caches in bfloat16,
beside the same step in float32, and the bfloat16 model's error against JAX's own
bfloat16 program.

onnxruntime's CPU provider has no bfloat16 MatMul, Add, Mul, ReduceSum, ... kernel;
jaxonnx computes those nodes in float32 and rounds back (plugin_sdk/include/jaxonnx/
kernels.hpp), keeping the weights bfloat16 in the file. onnxruntime folds each
weight's Cast to float32 once, when the session is made, so the bfloat16 file runs
float32 products: the file halves, the memory a session holds and the time per
token do not (measured here). Errors are max |difference| of the logits over the
float32 program's max |logit|: the bfloat16 model against JAX's bfloat16 program,
beside that program's own distance from float32.

    python benchmarks/bfloat16.py [--batches 1 4] [--runs 30] [--cache 512]

Sessions are timed in alternating blocks (timing.block_latency); bfloat16 arrays
enter onnxruntime as OrtValues (its Python API takes no bfloat16 numpy arrays).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from flax import nnx  # noqa: E402
from onnx import TensorProto  # noqa: E402

import _common  # noqa: E402
import decode  # noqa: E402
import jaxonnx  # noqa: E402
from timing import block_latency  # noqa: E402


def in_bfloat16(model):
    """`model` with every float parameter rounded to bfloat16 and every layer
    computing in bfloat16 (as if built with dtype=param_dtype=bfloat16)."""
    graph, state = nnx.split(model)
    state = jax.tree.map(lambda p: p.astype(jnp.bfloat16) if jnp.issubdtype(p.dtype, jnp.floating) else p,
                         state)
    model = nnx.merge(graph, state)
    for _, module in nnx.iter_modules(model):
        if hasattr(module, "dtype"):
            module.dtype = jnp.bfloat16
    return model


def specs(dtype, cache):
    inputs = decode.inputs(cache=cache)
    return _common.specs([_common.Input(i.shape, dtype if i.dtype == np.float32 else i.dtype, i.high)
                          for i in inputs])


def feed(session, arrays):
    out = {}
    for meta, a in zip(session.get_inputs(), arrays):
        if a.dtype == ml_dtypes.bfloat16:
            out[meta.name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(a.view(np.uint16),
                                                                           TensorProto.BFLOAT16)
        else:
            out[meta.name] = ort.OrtValue.ortvalue_from_numpy(a)
    return out


class Session:
    """An InferenceSession whose run takes OrtValues (block_latency calls run)."""

    def __init__(self, model, threads):
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.sess = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def run(self, names, feed):
        return self.sess.run_with_ort_values(names, feed)


def logits(session, arrays):
    """The first output as float32; a bfloat16 one is copied out of its buffer
    (OrtValue.numpy has no bfloat16)."""
    out = session.run(None, feed(session.sess, arrays))[0]
    if out.data_type() != "tensor(bfloat16)":
        return out.numpy().astype(np.float32)
    n = int(np.prod(out.shape()))
    raw = np.ctypeslib.as_array((ctypes.c_uint16 * n).from_address(out.data_ptr()))
    return raw.copy().view(ml_dtypes.bfloat16).reshape(out.shape()).astype(np.float32)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--cache", type=int, default=512)
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: onnxruntime's default)")
    args = parser.parse_args(argv)

    f32 = decode.make_model()
    bf16 = in_bfloat16(decode.make_model())
    models = {
        "float32": jaxonnx.to_onnx(f32, specs(np.float32, args.cache)),
        "bfloat16": jaxonnx.to_onnx(bf16, specs(ml_dtypes.bfloat16, args.cache)),
    }
    sizes = {k: len(m.SerializeToString()) for k, m in models.items()}
    sessions = {k: Session(m, args.threads) for k, m in models.items()}
    print(f"onnxruntime {ort.__version__}, cache {args.cache}, threads {args.threads or 'default'}")
    print(f"file: float32 {sizes['float32'] / 1e6:.1f} MB, bfloat16 {sizes['bfloat16'] / 1e6:.1f} MB "
          f"({sizes['bfloat16'] / sizes['float32']:.2f}x)")
    print("| batch | float32 ms | bfloat16 ms | ratio | bfloat16 model vs JAX bfloat16 | JAX bfloat16 vs JAX float32 |")
    print("|---|---|---|---|---|---|")
    for batch in args.batches:
        arrays32 = _common.sample(decode.inputs(cache=args.cache), batch)
        arrays32[1] = np.array(args.cache // 2, np.int32)
        arrays16 = [a.astype(ml_dtypes.bfloat16) if a.dtype == np.float32 else a for a in arrays32]
        feeds = {k: feed(s.sess, arrays32 if k == "float32" else arrays16) for k, s in sessions.items()}
        order = list(sessions)
        secs = block_latency([sessions[k] for k in order], lambda s: feeds[order[[sessions[k] for k in order].index(s)]],
                             args.runs)
        want = np.asarray(jax.jit(lambda *a: bf16(*a)[0])(*arrays16)).astype(np.float32)
        got = logits(sessions["bfloat16"], arrays16)
        exact = np.asarray(jax.jit(lambda *a: f32(*a)[0])(*arrays32))
        scale = np.max(np.abs(exact))
        err = float(np.max(np.abs(got - want)) / scale)
        own = float(np.max(np.abs(want - exact)) / scale)
        ms = dict(zip(order, (s * 1e3 for s in secs)))
        print(f"| {batch} | {ms['float32']:.2f} | {ms['bfloat16']:.2f} | {ms['bfloat16'] / ms['float32']:.2f}x "
              f"| {err:.1e} | {own:.1e} |")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    sys.exit(main())
