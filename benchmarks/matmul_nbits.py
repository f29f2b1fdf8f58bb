"""One weight product [M, K] x [K, N] in onnxruntime, per form of the weight: float32
MatMul, com.microsoft.MatMulNBits per attribute choice (bits, block size,
accuracy_level, zero points), DequantizeLinear + MatMul, Cast + Mul + MatMul (folded
to a float32 weight at load). What the quantization plugin emits is chosen from these
figures (docs/quantization.md, "Speed of the weight product").

Each model is one node (or the few of a dequantization) over constant weights, in a
plain session at onnxruntime's default optimization level with `--threads` intra-op
threads; sessions timed in alternating blocks (benchmarks/timing.py), median ms per
run. Also the bandwidth a run reaches: the bytes the session holds for the weight
(what it must read per run) over the time. And the largest difference from the
float32 product of the dequantized weight (float64 reference), relative to the largest
output, which shows what accuracy_level 4 (int8 activations) costs.

    python benchmarks/matmul_nbits.py [--m 1 4 128] [--k 1024] [--n 2816] [--threads 2] [--runs 20]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import timing  # noqa: E402


def quantized(k, n, bits, block, rng):
    """Signed codes [K, N] in [-2^(bits-1), 2^(bits-1)) and float32 scales [K / block, N]
    (block None: one per column, [1, N])."""
    half = 1 << (bits - 1)
    q = rng.integers(-half, half, size=(k, n)).astype(np.int8)
    rows = 1 if block is None else k // block
    s = (rng.random((rows, n)) * 0.02 + 0.005).astype(np.float32)
    return q, s


def dequantized(q, s):
    k = q.shape[0]
    return q.astype(np.float32) * np.repeat(s, k // s.shape[0], axis=0)


def _model(nodes, inits, k, n, domains=()):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", k])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", n])
    g = helper.make_graph(nodes, "g", [x], [y], inits)
    opsets = [helper.make_opsetid("", 21)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(g, opset_imports=opsets, ir_version=10)


def float_matmul(q, s):
    w = dequantized(q, s)
    return _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [numpy_helper.from_array(w, "w")], *w.shape)


def matmul_nbits(q, s, bits, block, accuracy_level, zero_points):
    """MatMulNBits of the codes: B [N, blocks, block * bits / 8] unsigned (q + 2^(bits-1)),
    scales [N, blocks]; zero_points: an explicit uint8 zero point input (2^(bits-1))."""
    k, n = q.shape
    block = block or 128
    nb = k // block
    codes = (q.astype(np.int16) + (1 << (bits - 1))).astype(np.uint8).T.reshape(n, nb, block)
    if bits == 4:
        codes = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    scales = np.repeat(s, k // s.shape[0], axis=0)[::block].T.copy()  # [N, blocks]
    inits = [numpy_helper.from_array(codes, "b"), numpy_helper.from_array(scales, "s")]
    inputs = ["x", "b", "s"]
    if zero_points:
        zp = np.full((n, nb), 1 << (bits - 1), np.uint8)
        if bits == 4:  # two per byte, each column's row padded to whole bytes
            zp = np.full((n, (nb + 1) // 2), 0x88, np.uint8)
        inits.append(numpy_helper.from_array(zp, "zp"))
        inputs.append("zp")
    attrs = dict(K=k, N=n, bits=bits, block_size=block)
    if accuracy_level is not None:
        attrs["accuracy_level"] = accuracy_level
    node = helper.make_node("MatMulNBits", inputs, ["y"], domain="com.microsoft", **attrs)
    return _model([node], inits, k, n, ["com.microsoft"])


def dequantize_linear(q, s, bits, block):
    """DequantizeLinear(w_q int8/int4, scale) + MatMul (blocked along K or per column)."""
    k, n = q.shape
    dtype = TensorProto.INT4 if bits == 4 else TensorProto.INT8
    w = helper.make_tensor("w", dtype, [k, n], q.flatten().tolist())
    if block is None:
        scale = numpy_helper.from_array(s[0], "s")
        dq = helper.make_node("DequantizeLinear", ["w", "s"], ["wf"], axis=1)
    else:
        scale = numpy_helper.from_array(s, "s")
        dq = helper.make_node("DequantizeLinear", ["w", "s"], ["wf"], axis=0, block_size=block)
    return _model([dq, helper.make_node("MatMul", ["x", "wf"], ["y"])], [w, scale], k, n)


def cast_mul(q, s, bits, block):
    """Cast(w_q) * scale + MatMul: the onnxruntime targets' form, folded at load."""
    k, n = q.shape
    dtype = TensorProto.INT4 if bits == 4 else TensorProto.INT8
    w = helper.make_tensor("w", dtype, [k, n], q.flatten().tolist())
    scale = numpy_helper.from_array(np.repeat(s, k // s.shape[0], axis=0) if block else s, "s")
    nodes = [
        helper.make_node("Cast", ["w"], ["wc"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["wc", "s"], ["wf"]),
        helper.make_node("MatMul", ["x", "wf"], ["y"]),
    ]
    return _model(nodes, [w, scale], k, n)


def held_bytes(model):
    """Bytes of the weight as the session holds it: float32 where onnxruntime folds it."""
    ops = {nd.op_type for nd in model.graph.node}
    if ops <= {"Cast", "Mul", "MatMul"}:
        w = next(i for i in model.graph.initializer if i.name == "w")
        return 4 * int(np.prod(w.dims))
    return sum(numpy_helper.to_array(i).nbytes if i.data_type != TensorProto.INT4 else (int(np.prod(i.dims)) + 1) // 2
               for i in model.graph.initializer)


def session(model, threads, qdq_level=None):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    if qdq_level is not None:
        opts.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", str(qdq_level))
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def cases(k, n, rng):
    """(name, model, reference weight) per form."""
    out = []
    for bits, block in ((4, 32), (4, 128), (8, 128), (8, None)):
        q, s = quantized(k, n, bits, block, rng)
        w = dequantized(q, s)
        b = "per column" if block is None else f"blocks of {block}"
        tag = f"int{bits} {b}"
        out.append((f"{tag}: float32 MatMul (the dequantized weight)", float_matmul(q, s), w))
        for level in (None, 1, 4):
            nb_block = block or 128
            for zp in (False, True) if level in (None, 4) else (False,):
                name = f"{tag}: MatMulNBits bits {bits} block {nb_block} accuracy_level {level or 0}"
                out.append((name + (" zero points" if zp else ""), matmul_nbits(q, s, bits, block, level, zp), w))
        for level in (0, 4):  # onnxruntime fuses it into MatMulNBits at load, at this accuracy_level
            out.append((f"{tag}: DequantizeLinear + MatMul, session level {level}", dequantize_linear(q, s, bits, block), w))
        out.append((f"{tag}: Cast + Mul + MatMul (folded at load)", cast_mul(q, s, bits, block), w))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, nargs="+", default=[1, 4, 128])
    ap.add_argument("--k", type=int, default=1024)
    ap.add_argument("--n", type=int, default=2816)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--only", default="", help="run only the cases whose name contains this")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    all_cases = [c for c in cases(args.k, args.n, rng) if args.only in c[0]]
    print(f"onnxruntime {ort.__version__}, [M, {args.k}] x [{args.k}, {args.n}], "
          f"{args.threads} intra-op threads, median of {args.runs} runs\n")
    print("| form | weight MB held | " + " | ".join(f"M={m} ms | M={m} GB/s" for m in args.m) + " | max rel. diff |")
    print("|---|---:|" + "---:|---:|" * len(args.m) + "---:|")
    for name, model, w in all_cases:
        sess = session(model, args.threads, qdq_level=int(name[-1]) if "session level" in name else None)
        held = held_bytes(model)
        cells, diff = [], 0.0
        for m in args.m:
            x = rng.standard_normal((m, args.k)).astype(np.float32)
            (sec,) = timing.block_latency([sess], lambda s: {"x": x}, args.runs)
            y = sess.run(None, {"x": x})[0]
            ref = x.astype(np.float64) @ w.astype(np.float64)
            diff = max(diff, float(np.abs(y - ref).max() / np.abs(ref).max()))
            cells += [f"{sec * 1e3:.3f}", f"{held / sec / 1e9:.1f}"]
        print(f"| {name} | {held / 1e6:.2f} | " + " | ".join(cells) + f" | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
