"""A model past protobuf's 2 GB: conversion time and peak memory against writing
the same weights to disk, then onnxruntime against JAX.

    python benchmarks/big_model.py [--gb 4] [--width 8192] [--folder DIR]

The model is a stack of `width` x `width` float32 matmuls (tanh between them)
whose weights add up to --gb gigabytes, closed over as constants. Steps:

1. the weights, made layer by layer (nothing else holds memory);
2. the floor: writing every weight to one file with numpy (no fsync, as
   conversion does not fsync either);
3. jaxonnx.to_onnx(return_mode="file"): past 2 GB the weights go to
   OUTPUT.data (external data) straight from the arrays' memory. Peak RSS is
   the process's high-water mark over this step alone (reset through
   /proc/self/clear_refs), the bar being 1.5x the weights and time < 2x step 2;
4. return_mode="proto" without external data must refuse with a ConversionError
   (never a protobuf crash);
5. JAX's output on a small batch, then the weights are dropped and a child
   process loads the model in onnxruntime and compares.

Prints one JSON object with the figures. Needs about 2.5x the weights of free
memory (the weights, plus onnxruntime's copy in step 5 after they are freed).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxonnx

BATCH = 2


def rss_peak_reset():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS


def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def make_weights(gb, width):
    layers = max(1, round(gb * 1e9 / (width * width * 4)))
    rng = np.random.default_rng(0)
    weights = []
    for _ in range(layers):
        w = np.empty((width, width), np.float32)
        for r in range(0, width, 512):  # small temporaries only
            w[r:r + 512] = rng.standard_normal((min(512, width - r), width), np.float32)
        w *= 1.0 / np.sqrt(width)
        weights.append(jnp.asarray(w))  # a CPU jax.Array: its own copy; the numpy one goes
        del w
    return weights


def forward(weights, x):
    for w in weights:
        x = jnp.tanh(x @ w)
    return x


ORT_CHILD = r"""
import sys, numpy as np, onnxruntime as ort
path, x_path, ref_path = sys.argv[1:]
sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
(got,) = sess.run(None, {"in_0": np.load(x_path)})
ref = np.load(ref_path)
print(float(np.max(np.abs(got - ref))))
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gb", type=float, default=4.0, help="weights in GB (default 4)")
    ap.add_argument("--width", type=int, default=8192)
    ap.add_argument("--folder", default=None, help="where files go (default: a temporary folder)")
    args = ap.parse_args(argv)
    folder = args.folder or tempfile.mkdtemp(prefix="jaxonnx-big-")
    os.makedirs(folder, exist_ok=True)
    out = {"folder": folder}

    t = time.perf_counter()
    weights = make_weights(args.gb, args.width)
    out["make_weights_s"] = time.perf_counter() - t
    nbytes = sum(w.nbytes for w in weights)
    out["weights_bytes"] = nbytes
    out["layers"] = len(weights)
    out["rss_with_weights"] = status("VmRSS")

    # 2. the floor: the weights to disk
    floor = os.path.join(folder, "weights.bin")
    t = time.perf_counter()
    with open(floor, "wb") as f:
        for w in weights:
            np.asarray(w).tofile(f)
    out["write_weights_s"] = time.perf_counter() - t
    os.unlink(floor)

    # 3. conversion
    fn = lambda x: forward(weights, x)  # noqa: E731
    path = os.path.join(folder, "big.onnx")
    gc.collect()
    base = status("VmRSS")
    rss_peak_reset()
    t = time.perf_counter()
    jaxonnx.to_onnx(fn, [("B", args.width)], return_mode="file", output_path=path)
    out["convert_s"] = time.perf_counter() - t
    out["convert_peak_rss"] = status("VmHWM")
    out["convert_extra_rss"] = out["convert_peak_rss"] - base
    out["peak_rss_over_weights"] = out["convert_peak_rss"] / nbytes
    out["convert_over_write"] = out["convert_s"] / out["write_weights_s"]
    out["files"] = {n: os.path.getsize(os.path.join(folder, n)) for n in sorted(os.listdir(folder))}

    # 4. proto mode without external data refuses
    t = time.perf_counter()
    try:
        jaxonnx.to_onnx(fn, [("B", args.width)], external_data=False)
        out["proto_refusal"] = "NOT REFUSED"
    except jaxonnx.ConversionError as e:
        out["proto_refusal"] = str(e)
    out["proto_refusal_s"] = time.perf_counter() - t

    # 5. onnxruntime against JAX
    x = np.random.default_rng(1).standard_normal((BATCH, args.width)).astype(np.float32)
    ref = np.asarray(jax.jit(forward)(weights, x))
    x_path, ref_path = os.path.join(folder, "x.npy"), os.path.join(folder, "ref.npy")
    np.save(x_path, x)
    np.save(ref_path, ref)
    del weights, fn
    gc.collect()
    t = time.perf_counter()
    child = subprocess.run([sys.executable, "-c", ORT_CHILD, path, x_path, ref_path],
                           capture_output=True, text=True)
    out["ort_s"] = time.perf_counter() - t
    out["ort_max_abs_err"] = float(child.stdout.strip()) if child.returncode == 0 else child.stderr[-2000:]
    for n in os.listdir(folder):
        if not args.folder:
            os.unlink(os.path.join(folder, n))
    if not args.folder:
        os.rmdir(folder)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
