"""Converts every bundled example, verifies it in onnxruntime, prints a report.

    python examples/run_all.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "out_of_tree_plugin"))

BATCHES = (1, 7)


def verify(name, convert):
    """convert() -> (onnx model, JAX reference callable, input shape with "B")."""
    start = time.perf_counter()
    model, reference, shape = convert()
    seconds = time.perf_counter() - start
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    errors = []
    for batch in BATCHES:
        dims = tuple(batch if d == "B" else d for d in shape)
        x = np.random.default_rng(batch).standard_normal(dims).astype(np.float32)
        got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
        errors.append(float(np.abs(got - np.asarray(reference(x))).max()))
    return {"name": name, "nodes": len(model.graph.node), "bytes": model.ByteSize(),
            "seconds": seconds, "errors": errors,
            "ok": all(e < 1e-4 for e in errors)}


def examples():
    import demo as oot
    import mlp

    def oot_convert():
        model, reference = oot.convert(oot.build(HERE.parent / "build" / "example-plugin"))
        return model, reference, ("B", 8)

    return [("nnx MLP", mlp.convert), ("out-of-tree hard_swish", oot_convert)]


def main() -> int:
    rows = []
    for name, convert in examples():
        try:
            rows.append(verify(name, convert))
        except Exception as e:  # report every example, then fail
            rows.append({"name": name, "failure": f"{type(e).__name__}: {e}"})
    print(f"\n{'example':<26}{'nodes':>6}{'bytes':>9}{'first run':>11}   max |onnx - jax| at B=1, B=7")
    for r in rows:
        if "failure" in r:
            print(f"{r['name']:<26}FAILED: {r['failure']}")
            continue
        errs = ", ".join(f"{e:.1e}" for e in r["errors"])
        print(f"{r['name']:<26}{r['nodes']:>6}{r['bytes']:>9}{r['seconds'] * 1e3:>9.0f}ms   {errs}"
              f"{'' if r['ok'] else '   MISMATCH'}")
    print("(first run: building the model, or compiling the plugin, and converting once)")
    ok = all(r.get("ok") for r in rows)
    print("\nall examples match JAX in onnxruntime" if ok else "\nsome examples FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
