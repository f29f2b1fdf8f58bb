"""What the plugin checks before loading cost (docs/benchmarks/preflight.md).

    python tools/preflight.py [--runs 11] [--plugin-dir DIR]

Each figure is the median over --runs new processes, configurations interleaved
run by run (a machine's load hits all alike). Measured inside each process:

- registry: building the plugin registry of the bundled folder (+ --plugin-dir),
  the first thing a process's first conversion does; "no checks" skips the
  gate entirely (what the host did before the manifest and the preflight);
  and the checks alone, warm: a scan of the loaded plugins with the gate minus
  one without;
- first and second conversion: to_onnx of a one-op function, after the
  registry (cached in-process from then on);
- the preflight of the whole bundled set, as if its files were third-party
  (one child process per file, up to 4 at once), and one child on its own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

PROBE = r"""
import json, os, sys, time
t0 = time.perf_counter()
import jax.numpy as jnp
import jaxonnx
from jaxonnx import _plugins, _preflight
if os.environ.get("BENCH_NO_CHECKS"):
    _preflight.gate = lambda folder: None
dirs = json.loads(os.environ["BENCH_DIRS"])
t = time.perf_counter()
_plugins.registry(dirs)
registry = time.perf_counter() - t
t = time.perf_counter()
jaxonnx.to_onnx(jnp.sin, [(3,)], plugin_dirs=dirs)
first = time.perf_counter() - t
t = time.perf_counter()
jaxonnx.to_onnx(jnp.sin, [(3,)], plugin_dirs=dirs)
second = time.perf_counter() - t
# The checks alone, warm: a scan of the already loaded folders with and without the gate.
from jaxonnx import _core
folders = _plugins.plugin_folders(dirs)
def scan(gate):
    t = time.perf_counter()
    _core.Registry(folders, {}, False, gate)
    return time.perf_counter() - t
with_gate = sorted(scan(_preflight.gate(_plugins.BUNDLED_PLUGINS)) for _ in range(15))[7]
without = sorted(scan(None) for _ in range(15))[7]
print(json.dumps({"registry": registry, "first": first, "second": second,
                  "gate": with_gate - without}))
"""

BUNDLED_PREFLIGHT = r"""
import json, time
from jaxonnx import _plugins, _preflight
files = sorted(str(p) for p in _plugins.BUNDLED_PLUGINS.glob("*.so"))
t = time.perf_counter()
out = _preflight.check_files(files, fresh=True)
total = time.perf_counter() - t
t = time.perf_counter()
one = _preflight.run_child(files[0])
single = time.perf_counter() - t
assert all(o["status"] == "ok" for o in out.values()), out
print(json.dumps({"bundled_set": total, "files": len(files), "one_child": single,
                  "child_seconds": sorted(o["seconds"] for o in out.values())}))
"""


def _run(code, env):
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--plugin-dir", action="append", default=[])
    args = ap.parse_args()
    base = {k: v for k, v in os.environ.items() if not k.startswith("JAXONNX_")}
    base["BENCH_DIRS"] = json.dumps(args.plugin_dir)
    warm_dir = tempfile.mkdtemp(prefix="jaxonnx-bench-warm-")
    configs = {
        "no checks": dict(BENCH_NO_CHECKS="1"),
        "cold cache": None,  # a new empty cache folder each run
        "warm cache": dict(JAXONNX_CACHE_DIR=warm_dir),
        "preflight off, warm": dict(JAXONNX_CACHE_DIR=warm_dir, JAXONNX_PLUGIN_PREFLIGHT="0"),
    }
    _run(PROBE, dict(base, JAXONNX_CACHE_DIR=warm_dir))  # fills the warm cache
    results = {name: [] for name in configs}
    for _ in range(args.runs):
        for name, extra in configs.items():
            env = dict(base, **(extra or {"JAXONNX_CACHE_DIR": tempfile.mkdtemp(
                prefix="jaxonnx-bench-cold-")}))
            results[name].append(_run(PROBE, env))
    print(f"load average: {os.getloadavg()}; {args.runs} processes per configuration; "
          f"extra plugin folders: {args.plugin_dir or 'none'}\n")
    print("| configuration | registry ms | first conversion ms | second conversion ms |")
    print("|---|---|---|---|")
    for name, runs in results.items():
        med = {k: 1000 * statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"| {name} | {med['registry']:.1f} | {med['first']:.1f} | {med['second']:.1f} |")
    gate = 1000 * statistics.median(r["gate"] for r in results["warm cache"])
    print(f"\nthe checks alone on a warm cache (a scan of loaded plugins with the gate minus "
          f"without, median): {gate:.2f} ms per registry build")
    pre = [_run(BUNDLED_PREFLIGHT, dict(base, JAXONNX_CACHE_DIR=tempfile.mkdtemp()))
           for _ in range(3)]
    total = statistics.median(p["bundled_set"] for p in pre)
    one = statistics.median(p["one_child"] for p in pre)
    child = statistics.median(s for p in pre for s in p["child_seconds"])
    print(f"\npreflight of the {pre[0]['files']} bundled files as third-party files: "
          f"{1000 * total:.0f} ms (median of 3); one child alone {1000 * one:.0f} ms; "
          f"median child {1000 * child:.0f} ms")


if __name__ == "__main__":
    main()
