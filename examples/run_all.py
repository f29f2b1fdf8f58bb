"""Converts every bundled example, verifies it in onnxruntime, prints one table.

    python examples/run_all.py
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "out_of_tree_plugin"))

import _common  # noqa: E402
from _common import BATCHES, Input  # noqa: E402

# The flax nnx examples, in the order the table shows them.
EXAMPLES = ("mlp", "cnn", "vit", "gpt", "lstm", "decode")


def run_example(module):
    start = time.perf_counter()
    onnx_model, reference, inputs = module.convert()
    seconds = time.perf_counter() - start
    return {"name": module.NAME, "seconds": seconds, **_common.verify(onnx_model, reference, inputs)}


def run_out_of_tree():
    """The hard_swish primitive from examples/out_of_tree_plugin, built with CMake."""
    import demo as oot

    start = time.perf_counter()
    onnx_model, reference = oot.convert(oot.build(HERE.parent / "build" / "example-plugin"))
    seconds = time.perf_counter() - start
    return {"name": "out-of-tree hard_swish", "seconds": seconds,
            **_common.verify(onnx_model, reference, [Input(("B", 8))])}


def main() -> int:
    runs = [(name, lambda name=name: run_example(importlib.import_module(name)))
            for name in EXAMPLES] + [("out-of-tree hard_swish", run_out_of_tree)]
    rows = []
    for name, run in runs:
        try:
            rows.append(run())
        except Exception as e:  # report every example, then fail
            rows.append({"name": name, "failure": f"{type(e).__name__}: {str(e).splitlines()[0]}"})
    batches = ", ".join(f"B={b}" for b in BATCHES)
    print(f"\n{'example':<24}{'nodes':>6}{'size':>11}{'first run':>11}   max |onnx - jax| at {batches}")
    for r in rows:
        if "failure" in r:
            print(f"{r['name']:<24}FAILED: {r['failure']}")
            continue
        errs = ", ".join(f"{e:.1e}" for e in r["errors"])
        print(f"{r['name']:<24}{r['nodes']:>6}{r['bytes'] / 1024:>8.1f} KiB{r['seconds'] * 1e3:>9.0f}ms"
              f"   {errs}{'' if r['ok'] else '   MISMATCH'}")
    print("(first run: building the model, or compiling the plugin, and converting once; "
          "every model is checked with onnx.checker full_check, and run at each of "
          "onnxruntime's graph optimization levels)")
    ok = all(r.get("ok") for r in rows)
    print("\nall examples match JAX in onnxruntime" if ok else "\nsome examples FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
