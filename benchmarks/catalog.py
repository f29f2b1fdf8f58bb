"""JAX's own primitive catalog as a benchmark: every harness of
jax._src.internal_test_util.test_harnesses.all_harnesses through jaxonnx (and
jax2onnx, when installed), as a new user would run it (issue 36).

    python benchmarks/catalog.py [--jobs 1] [--filter REGEX] [--limit N] [--tools jaxonnx,jax2onnx]
                                 [--json F] [--write-docs]
    JAX_ENABLE_X64=1 python benchmarks/catalog.py ...     # the x64 catalog (a separate process)

The catalog is what JAX's export and jax2tf tests run: each lax primitive across
dtypes, shapes and parameters. Harnesses JAX marks unimplemented on CPU are left
out. For each harness: its `dyn_fun` on `dyn_args_maker(np.random.RandomState(0))`,
converted with the arrays as example inputs, the model checked by
onnx.checker.check_model(full_check=True), run in onnxruntime (CPU) and compared
with jax.jit: integers and booleans exactly, floats at their dtype's tolerance
(relative to max(1, |JAX|)), NaN where JAX has NaN. Results JAX defines only up to
a choice (svd's, qr's, eig's, eigh's vectors, lu's pivoting, top_k's
and an unstable sort's order among ties) are checked by their
defining properties instead when they differ: reconstruction, orthonormality,
triangularity, eigen-equations.

Outcomes: pass; refused (a jaxonnx.ConversionError; for jax2onnx any exception
of its to_onnx); invalid model; does not load (onnxruntime refuses the model);
does not run (onnxruntime fails while running it); mismatch; raw error (an
exception other than ConversionError escaping jaxonnx.to_onnx: a bug in
itself); crash / hang (the worker process died, or gave no answer within
--timeout). Each (harness, tool) runs in a worker process; a dead or hung worker
is replaced and the run goes on.

--write-docs rewrites the generated part of docs/catalog.md and writes
docs/catalog{,_x64}.json (per-group counts and the failures, not every passing
case), which docs/generate.py turns into docs/coverage.md's catalog table.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import math
import os
import re
import sys
import time
from pathlib import Path

from worker_process import run_pool, serve

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "catalog.md"
MARK = "@@catalog "  # prefixes the worker's protocol lines (anything else on stdout is noise)
TOOLS = ("jaxonnx", "jax2onnx")
OUTCOMES = ("pass", "refused", "invalid model", "does not load", "does not run", "mismatch", "raw error",
            "crash", "hang", "n/a")
# rtol, atol: |got - JAX| <= atol * max(1, max|JAX|) + rtol * |JAX|.
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2), "float32": (1e-4, 1e-5),
             "float64": (1e-9, 1e-9)}
# The groups whose results are defined only up to a choice: checked by property when they differ.
PEER_CAUSES = 25  # the peer's largest failure causes the docs keep (jaxonnx's: all)
BY_PROPERTY = ("svd", "qr", "eig", "eigh", "lu", "top_k", "approx_top_k", "sort")


def x64_enabled():
    return os.environ.get("JAX_ENABLE_X64", "").lower() in ("1", "true", "yes")


def harnesses():
    """The catalog in its order, without what JAX itself does not implement on CPU."""
    from jax._src.internal_test_util import test_harnesses
    return [h for h in test_harnesses.all_harnesses if h.filter("cpu")]


# =============================================================== comparison ==

def _real_dtype(dt):
    import numpy as np
    dt = np.dtype(dt)
    if dt.kind == "c":
        return "float32" if dt.itemsize == 8 else "float64"
    return dt.name


def tolerance(dtype):
    return TOLERANCE.get(_real_dtype(dtype), TOLERANCE["float32"])


def compare(got, want):
    """None when `got` (onnxruntime) matches `want` (JAX), else what differs."""
    import numpy as np
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype}{list(got.shape)} vs JAX {want.dtype}{list(want.shape)}"
    if want.dtype.kind not in "fc" and not want.dtype.name.startswith(("float", "bfloat")):  # ml_dtypes: kind V
        bad = got != want
        return f"{int(bad.sum())} of {want.size} elements differ" if bad.any() else None
    if want.dtype.kind == "c":
        return compare(got.real, want.real) or compare(got.imag, want.imag)
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    if (nan_g != nan_w).any():
        return f"NaN at {int((nan_g != nan_w).sum())} positions where the other has none"
    finite = np.isfinite(w) & np.isfinite(g)
    if (g[~finite & ~nan_w] != w[~finite & ~nan_w]).any():
        return "infinities differ"
    rtol, atol = tolerance(want.dtype)
    w, g = w[finite], g[finite]
    scale = max(1.0, float(np.abs(w).max())) if w.size else 1.0
    if w.size and not np.allclose(g, w, rtol=rtol, atol=atol * scale):
        return f"max |error| {np.abs(g - w).max():.3g} (JAX's scale {scale:.3g})"
    return None


def _near(x, y, a, what, k=1.0):
    """None when x ~ y at `a`'s dtype tolerance (scaled by |a| and its size), else why."""
    import numpy as np
    x, y = np.asarray(x, np.complex128), np.asarray(y, np.complex128)
    if x.shape != y.shape:
        return f"{what}: shape {x.shape} vs {y.shape}"
    if not x.size:
        return None
    rtol, _ = tolerance(a.dtype)
    n = max(a.shape[-2:]) if a.ndim >= 2 else 1
    bound = 10 * k * max(rtol, 1e-12) * n * max(1.0, float(np.abs(a).max()) if a.size else 1.0)
    err = float(np.abs(x - y).max())
    return None if err <= bound else f"{what}: max |error| {err:.3g} > {bound:.3g}"


def _h(x):
    import numpy as np
    return np.conj(np.swapaxes(x, -1, -2))


def _eye_like(x, n):
    import numpy as np
    return np.broadcast_to(np.eye(n), x.shape[:-2] + (n, n))


def _match_eigenvalues(got, want):
    """`got` reordered to `want`'s order (nearest unused value, per batch): eig's
    eigenvalues come in no defined order."""
    import numpy as np
    got, want = np.asarray(got), np.asarray(want)
    out = np.empty_like(got)
    order = np.empty(got.shape, dtype=np.int64)
    for idx in np.ndindex(*want.shape[:-1]):
        free = list(range(want.shape[-1]))
        for j, w in enumerate(want[idx]):
            k = min(free, key=lambda i: abs(got[idx][i] - w))
            free.remove(k)
            out[idx + (j,)] = got[idx + (k,)]
            order[idx + (j,)] = k
    return out, order


def by_property(h, args, got, want):
    """None when the decomposition `got` satisfies what defines `h`'s result, else why."""
    import numpy as np
    a = np.asarray(args[0])
    p, g = h.params, [np.asarray(x) for x in got]
    if h.group_name == "qr":
        q, r = g
        return (_near(q @ r, a, a, "q @ r vs a") or _near(_h(q) @ q, _eye_like(q, q.shape[-1]), a, "q^H q vs I")
                or _near(np.tril(r, -1), 0 * r, a, "r below its diagonal"))
    if h.group_name == "svd":
        why = compare(g[0], np.asarray(want[0]))
        if why or not p["compute_uv"]:
            return why and f"singular values: {why}"
        s, u, vt = g
        k = s.shape[-1]
        rebuilt = (u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :]
        return (_near(rebuilt, a, a, "u s vt vs a") or _near(_h(u) @ u, _eye_like(u, u.shape[-1]), a, "u^H u vs I")
                or _near(vt @ _h(vt), _eye_like(vt, vt.shape[-2]), a, "vt vt^H vs I"))
    if h.group_name == "eigh":
        v, w = g
        why = compare(w, np.asarray(want[1]))
        if why:
            return f"eigenvalues: {why}"
        full = np.tril(a) + _h(np.tril(a, -1)) if p["lower"] else np.triu(a) + _h(np.triu(a, 1))
        return _near(full @ v, v * w[..., None, :], a, "a v vs v w") or _near(
            _h(v) @ v, _eye_like(v, v.shape[-1]), a, "v^H v vs I")
    if h.group_name == "eig":
        w, order = _match_eigenvalues(g[0], np.asarray(want[0]))
        why = _near(w, want[0], a, "eigenvalues", k=100)
        if why:
            return why
        w, vectors = g[0], list(g[1:])  # [w] + [left vectors] + [right vectors], as asked
        checks = [side for side, on in (("left", p["compute_left_eigenvectors"]),
                                        ("right", p["compute_right_eigenvectors"])) if on]
        checks = list(zip(checks, vectors))
        for side, v in checks:
            lhs = (_h(v) @ a) if side == "left" else (a @ v)
            rhs = (w[..., :, None] * _h(v)) if side == "left" else (v * w[..., None, :])
            why = (_near(lhs, rhs, a, f"{side} eigen-equation", k=100)
                   or _near(np.linalg.norm(v, axis=-2), np.ones(v.shape[:-2] + v.shape[-1:]), a,
                            f"{side} eigenvector norms"))
            if why:
                return why
        return None
    if h.group_name == "lu":
        lu, pivots, perm = g
        m, n = lu.shape[-2:]
        k = min(m, n)
        lower = np.tril(lu[..., :, :k], -1) + np.eye(m, k)
        upper = np.triu(lu[..., :k, :])
        permuted = np.take_along_axis(a, perm[..., :, None].astype(np.int64), axis=-2)
        expect = np.broadcast_to(np.arange(m), perm.shape).copy()
        for idx in np.ndindex(*perm.shape[:-1]):
            for i, piv in enumerate(pivots[idx]):
                expect[idx][[i, piv]] = expect[idx][[piv, i]]
        if (expect != perm).any():
            return "the permutation does not follow the pivots"
        return _near(lower @ upper, permuted, a, "l @ u vs a[perm]") or (
            "|l| > 1: not partial pivoting" if (np.abs(lower) > 1 + 1e-3).any() else None)
    if h.group_name in ("top_k", "approx_top_k"):  # among equal values, any index is right
        values, indices = g
        why = compare(values, np.asarray(want[0]))
        if why:
            return f"values: {why}"
        axis = p.get("reduction_dimension", -1) if h.group_name == "approx_top_k" else -1
        picked = np.take_along_axis(a, indices.astype(np.int64), axis=axis)
        return None if (picked == values).all() else "the indices do not pick the values"
    if h.group_name == "sort" and not p["is_stable"]:  # the order of equal keys is free
        k = p["num_keys"]
        why = next((f"keys: {w}" for w in (compare(x, np.asarray(y)) for x, y in zip(g[:k], want[:k])) if w), None)
        return why or _same_rows(g, [np.asarray(w) for w in want], p["dimension"])
    return "no property check"


def _same_rows(got, want, axis):
    """None when every slice along `axis` holds the same tuples (one element of each
    operand) in `got` as in `want`, in any order, else why."""
    import numpy as np

    def rows(outs):
        stacked = [np.moveaxis(o, axis, -1) for o in outs]
        lead = stacked[0].shape[:-1]
        return {idx: sorted((tuple(repr(o[idx][i].item()) for o in stacked) for i in range(stacked[0].shape[-1])))
                for idx in np.ndindex(*lead)}
    return None if rows(got) == rows(want) else "the rows are not a reordering of JAX's"


# =============================================================== the worker ==

def _first_line(msg):
    return (str(msg).strip().splitlines() or [""])[0]


class Worker:
    """Runs (harness, tool) pairs in this process."""

    def __init__(self):
        import jax
        import numpy as np
        import onnx
        import onnxruntime as ort
        self.jax, self.np, self.onnx, self.ort = jax, np, onnx, ort
        self.harnesses = {h.fullname: h for h in harnesses()}
        self.x64 = x64_enabled()
        self.opts = ort.SessionOptions()
        self.opts.intra_op_num_threads = 1
        self.opts.inter_op_num_threads = 1
        self._cache = (None, None)

    def reference(self, name):
        """(args, JAX's output leaves) of a harness; the last one is kept."""
        if self._cache[0] != name:
            h = self.harnesses[name]
            args = self.canonical(h.dyn_args_maker(self.np.random.RandomState(0)))
            out = self.jax.jit(h.dyn_fun)(*args)
            self._cache = (name, (args, [self.np.asarray(x) for x in self.jax.tree_util.tree_leaves(out)]))
        return self._cache[1]

    def canonical(self, args):
        """The arguments as JAX takes them: numpy's 64-bit defaults narrowed to 32
        bits when x64 is off (what jax.jit does to them), keys as they are."""
        jax, np = self.jax, self.np
        out = []
        for a in args:
            if hasattr(a, "dtype") and not jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
                a = np.asarray(a).astype(jax.dtypes.canonicalize_dtype(a.dtype))
            out.append(a)
        return out

    def convert(self, tool, h, args):
        jax = self.jax
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) if hasattr(a, "shape") else a for a in args]
        if tool == "jaxonnx":
            import jaxonnx
            return jaxonnx.to_onnx(h.dyn_fun, specs, enable_double_precision=self.x64, return_mode="bytes")
        import jax2onnx
        return jax2onnx.to_onnx(h.dyn_fun, specs, enable_double_precision=self.x64).SerializeToString()

    def _feed(self, sess, args):
        """The inputs as the model takes them: a complex array as float[..., 2]
        where the model's input is real, a typed PRNG key as its key data."""
        np, feed = self.np, {}
        for inp, a in zip(sess.get_inputs(), args):
            if hasattr(a, "dtype") and self.jax.dtypes.issubdtype(a.dtype, self.jax.dtypes.prng_key):
                a = self.jax.random.key_data(a)
            a = np.asarray(a)
            if a.dtype.kind == "c" and "complex" not in inp.type:
                a = np.stack([a.real, a.imag], axis=-1)
            if a.dtype.name == "bfloat16":  # onnxruntime's numpy bridge knows no bfloat16: its bits
                import onnx
                a = self.ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
                    np.array(a, order="C").view(np.uint16), onnx.TensorProto.BFLOAT16)
            else:
                a = self.ort.OrtValue.ortvalue_from_numpy(np.array(a, order="C"))  # 0-d stays 0-d
            feed[inp.name] = a
        return feed

    def _fetch(self, value):
        """An output OrtValue as numpy (bfloat16 through its bits: the numpy bridge knows no bfloat16)."""
        np = self.np
        if value.data_type() != "tensor(bfloat16)":
            return value.numpy()
        import ctypes
        count = int(np.prod(value.shape()))
        raw = (ctypes.c_uint16 * count).from_address(value.data_ptr()) if count else []
        return np.array(raw, dtype=np.uint16).reshape(value.shape())

    def _unpacked(self, got, want):
        """A model's output as JAX's: float[..., 2] back to complex, uint16 bits back to bfloat16."""
        np = self.np
        got = np.asarray(got)
        if want.dtype.kind == "c" and got.dtype.kind == "f" and got.shape == want.shape + (2,):
            got = (got[..., 0] + 1j * got[..., 1]).astype(want.dtype)
        if want.dtype.name == "bfloat16" and got.dtype == np.uint16:
            got = got.view(want.dtype)
        return got

    def run(self, name, tool):
        h = self.harnesses[name]
        try:
            args, want = self.reference(name)
        except Exception as e:
            return "n/a", f"JAX: {type(e).__name__}: {_first_line(e)[:200]}"
        try:
            data = self.convert(tool, h, args)
        except Exception as e:
            import jaxonnx
            if tool == "jax2onnx" or isinstance(e, jaxonnx.ConversionError):
                return "refused", f"{type(e).__name__}: {e}" if tool == "jax2onnx" else str(e)
            return "raw error", f"{type(e).__name__}: {e}"
        try:
            self.onnx.checker.check_model(self.onnx.load_from_string(data), full_check=True)
        except Exception as e:
            return "invalid model", f"{type(e).__name__}: {e}"
        try:
            sess = self.ort.InferenceSession(data, self.opts, providers=["CPUExecutionProvider"])
        except Exception as e:
            return "does not load", f"{type(e).__name__}: {e}"
        try:
            got = [self._fetch(v) for v in sess.run_with_ort_values(None, self._feed(sess, args))]
        except Exception as e:
            return "does not run", f"{type(e).__name__}: {e}"
        if len(got) != len(want):
            return "mismatch", f"{len(got)} outputs, JAX gives {len(want)}"
        got = [self._unpacked(g, w) for g, w in zip(got, want)]
        whys = [compare(g, w) for g, w in zip(got, want)]
        if not any(whys):
            return "pass", ""
        if h.group_name in BY_PROPERTY:
            why = by_property(h, args, got, want)
            return ("pass", "by property") if why is None else ("mismatch", why)
        k = next(i for i, w in enumerate(whys) if w)
        return "mismatch", f"output {k}: {whys[k]}"


def worker_main():
    """--worker: "name<TAB>tool" lines on stdin; MARK + JSON lines on stdout."""
    sys.path.insert(0, str(Path(__file__).parent))
    w = Worker()

    def handle(fields, emit):
        name, tool = fields
        try:
            status, detail = w.run(name, tool)
        except Exception as e:  # the benchmark's own failure: recorded, not fatal
            status, detail = "n/a", f"benchmark: {type(e).__name__}: {_first_line(e)}"
        emit({"status": status, "detail": detail[:2000]})
    return serve(MARK, handle)


# =============================================================== the parent ==

def run_all(tasks, jobs, timeout, progress):
    """{(name, tool): (status, detail)} for every task, run by `jobs` worker processes
    (a harness's tools go to the same worker, which keeps JAX's result)."""
    by_name = collections.OrderedDict()
    for name, tool in tasks:
        by_name.setdefault(name, []).append(tool)
    results = {}

    def handle(slot, item):
        name, tools = item
        for tool in tools:
            proc = slot.get()
            proc.send(name, tool)
            rec = proc.read(timeout)
            if rec is None:  # died or hung: this task is the culprit
                status, detail = slot.drop()
                rec = {"status": status, "detail": detail or f"no answer within {timeout:.0f} s"}
            results[name, tool] = (rec["status"], rec["detail"])
        progress(name, {t: results[name, t] for t in tools})

    run_pool(by_name.items(), jobs, Path(__file__).resolve(), MARK, handle)
    return results


# =============================================================== the report ==

def cause_of(status, detail):
    """The key a failure is grouped by: the outcome and the message without
    what varies between cases (shapes, names, source lines, addresses)."""
    if status in ("pass", "n/a"):
        return None
    s = _first_line(detail)
    s = re.sub(r" ?\(inputs: [^)]*\)", "", s)
    s = re.sub(r" at \S+:\d+(:\d+)? \([^)]*\)(, via \S+:\d+(:\d+)? \([^)]*\))?", "", s)
    s = re.sub(r"\[[^\]]*\]", "[...]", s)
    s = re.sub(r"\{[^}]*\}", "{...}", s)
    s = re.sub(r"Name:'[^']*'", "Name:'...'", s)
    s = re.sub(r"0x[0-9a-f]+", "0x...", s)
    s = re.sub(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b", "N", s)
    s = re.sub(r"(float|int|uint|complex|bfloat)N", lambda m: m.group(0), s)
    return f"{status}: {s[:160]}"


def summarize(names, groups, results, tools):
    """Per-tool outcome counts, per-group pass counts and failures by cause."""
    out = {"harnesses": len(names), "tools": list(tools), "outcomes": {}, "groups": {}, "causes": {},
           "failures": {}}
    for tool in tools:
        counts = collections.Counter(results[n, tool][0] for n in names)
        out["outcomes"][tool] = {k: counts[k] for k in OUTCOMES if counts[k]}
        causes = collections.defaultdict(list)
        for n in names:
            key = cause_of(*results[n, tool])
            if key:
                causes[key].append(n)
        out["causes"][tool] = [{"cause": k, "count": len(v), "examples": v[:3]}
                               for k, v in sorted(causes.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
        out["failures"][tool] = {n: list(results[n, tool]) for n in names
                                 if results[n, tool][0] not in ("pass", "n/a")}
    for n in names:
        g = out["groups"].setdefault(groups[n], {"cases": 0, **{t: 0 for t in tools}})
        if any(results[n, t][0] == "n/a" for t in tools):
            continue  # JAX itself does not run it here
        g["cases"] += 1
        for t in tools:
            g[t] += results[n, t][0] == "pass"
    return out


def _pct(p, n):
    """p of n as a percentage rounded down (one failure in 5,000 is 99.9%, not 100.0%)."""
    return f"{math.floor(1000 * p / n) / 10:.1f}%" if n else "-"


def group_table(s):
    """The per-group markdown table (also what docs/generate.py renders into coverage.md)."""
    tools = s["tools"]
    lines = ["| group | cases | " + " | ".join(f"{t} pass" for t in tools) + " |",
             "|---|---:|" + "---:|" * len(tools)]
    for g, row in sorted(s["groups"].items()):
        lines.append(f"| {g} | {row['cases']} | " + " | ".join(str(row[t]) for t in tools) + " |")
    total = {k: sum(r[k] for r in s["groups"].values()) for k in ["cases", *tools]}
    lines.append(f"| **all** | **{total['cases']}** | "
                 + " | ".join(f"**{total[t]}** ({_pct(total[t], total['cases'])})" for t in tools) + " |")
    return "\n".join(lines)


def report(s, elapsed, jobs, x64):
    tools = s["tools"]
    total = {k: sum(r[k] for r in s["groups"].values()) for k in ["cases", *tools]}
    lines = [f"{s['harnesses']} harnesses in {len(s['groups'])} groups (x64 {'on' if x64 else 'off'}); "
             f"{total['cases']} counted (JAX itself runs them). "
             + "; ".join(f"**{t}: {total[t]} pass ({_pct(total[t], total['cases'])})**" for t in tools)
             + (f". {elapsed:.0f} s with {jobs} worker(s)." if elapsed else "."), "",
             "| outcome | " + " | ".join(tools) + " |", "|---|" + "---:|" * len(tools)]
    for k in OUTCOMES:
        if any(s["outcomes"][t].get(k) for t in tools):
            lines.append(f"| {k} | " + " | ".join(str(s["outcomes"][t].get(k, 0)) for t in tools) + " |")
    for t in tools:
        lines += ["", f"{t}'s failures by cause:", "", "| cases | cause | examples |", "|---:|---|---|"]
        causes = s["causes"][t][:None if t == "jaxonnx" else PEER_CAUSES]
        if len(causes) < len(s["causes"][t]):
            lines[-4] = f"{t}'s failures by cause (the {len(causes)} largest of {len(s['causes'][t])}):"
        for c in causes:
            text = c["cause"].replace("|", "\\|")
            lines.append(f"| {c['count']} | {text} | " + ", ".join(f"`{e}`" for e in c["examples"]) + " |")
    return "\n".join(lines)


def compact(s, stamp, versions):
    """What docs/catalog*.json keeps: per-group counts, causes and jaxonnx's failure list."""
    return {"measured": stamp, "versions": versions, "harnesses": s["harnesses"], "tools": s["tools"],
            "outcomes": s["outcomes"], "groups": s["groups"],
            "causes": {t: [{"cause": c["cause"], "count": c["count"], "example": c["examples"][0]}
                           for c in s["causes"][t][:None if t == "jaxonnx" else PEER_CAUSES]]
                       for t in s["tools"]},
            "failures": {"jaxonnx": {n: [st, reason_of(d)]
                                     for n, (st, d) in s["failures"]["jaxonnx"].items()}}}


def reason_of(detail):
    """A failure's first line without the source location a ConversionError names (a path
    on the machine that ran the catalog): the plugin, the primitive, the shapes and why."""
    s = re.sub(r" at \S+:\d+(:\d+)? \([^)]*\)(, via \S+:\d+(:\d+)? \([^)]*\))?", "", _first_line(detail))
    return s[:300]


def versions(tools):
    from importlib import metadata
    names = ["jax", "jaxonnx", "onnx", "onnxruntime"] + [t for t in tools if t != "jaxonnx"]
    return {n: metadata.version(n) for n in names}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--filter", help="only harnesses whose full name matches this regular expression")
    parser.add_argument("--limit", type=int, help="only the first N harnesses (after --filter)")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated (default: both)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one conversion and run may take")
    parser.add_argument("--results", type=Path,
                        help="a JSON-lines file each result is appended to as it comes; a run given one "
                             "it already holds results in resumes (the x64 catalog needs its own)")
    parser.add_argument("--no-run", action="store_true",
                        help="run nothing: report the harnesses --results holds (a partial run)")
    parser.add_argument("--json", type=Path, help="write every harness's results and the summary here")
    parser.add_argument("--write-docs", action="store_true",
                        help="rewrite docs/catalog.md's generated section and docs/catalog[_x64].json")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main()
    tools = [t for t in args.tools.split(",") if t]
    if "jax2onnx" in tools:
        try:
            import jax2onnx  # noqa: F401
        except ImportError:
            print("jax2onnx is not installed (benchmarks/requirements.txt): running jaxonnx alone",
                  file=sys.stderr)
            tools.remove("jax2onnx")
    x64 = x64_enabled()
    hs = harnesses()
    names = [h.fullname for h in hs]
    groups = {h.fullname: h.group_name for h in hs}
    if args.filter:
        names = [n for n in names if re.search(args.filter, n)]
    if args.limit is not None:
        names = names[:args.limit]
    group_order, rank, seen = {}, {}, collections.Counter()
    for n in names:
        group_order.setdefault(groups[n], len(group_order))
        rank[n] = seen[groups[n]]
        seen[groups[n]] += 1
    done = [0]

    def progress(name, recs):
        done[0] += 1
        if not args.quiet:
            bad = [f"{t}: {st}" for t, (st, _) in recs.items() if st != "pass"]
            print(f"[{done[0]}/{len(names)}] {name}" + (f"  ({'; '.join(bad)})" if bad else ""),
                  file=sys.stderr, flush=True)

    results = {}
    if args.results and args.results.exists():  # resume: what an earlier run of these settings measured
        for line in args.results.read_text().splitlines():
            r = json.loads(line)
            if r["name"] in groups and r["tool"] in tools:
                results[r["name"], r["tool"]] = (r["status"], r["detail"])
    sink = args.results.open("a") if args.results else None

    def record(name, recs):
        if sink:
            for t, (st, d) in recs.items():
                sink.write(json.dumps({"name": name, "tool": t, "status": st, "detail": d}) + "\n")
            sink.flush()
        progress(name, recs)

    start = time.monotonic()
    # Group by group in turn (the first case of each group, then the second, ...), so
    # that a partial run already covers every group.
    order = sorted(names, key=lambda n: (rank[n], group_order[groups[n]]))
    todo = [] if args.no_run else [(n, t) for n in order for t in tools if (n, t) not in results]
    if args.no_run:  # report what --results holds
        names = [n for n in names if all((n, t) in results for t in tools)]
    done[0] = len(names) - len({n for n, _ in todo})
    results.update(run_all(todo, args.jobs, args.timeout, record))
    elapsed = 0 if args.no_run else time.monotonic() - start
    s = summarize(names, groups, results, tools)
    text = report(s, elapsed, args.jobs, x64)
    print(text)
    print()
    print(group_table(s))
    stamp = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
    if len(names) < len(hs):
        stamp += f"; a partial run: {len(names)} of the {len(hs)} harnesses, every group's first ones"
    if args.json:
        args.json.write_text(json.dumps({"measured": stamp, "x64": x64, "versions": versions(tools),
                                         "summary": s,
                                         "results": {n: {t: results[n, t] for t in tools} for n in names}},
                                        indent=1))
    if args.write_docs:
        if args.filter or args.limit is not None:
            parser.error("--write-docs needs the whole catalog (no --filter / --limit)")
        import doc_section
        suffix = "_x64" if x64 else ""
        (ROOT / "docs" / f"catalog{suffix}.json").write_text(
            json.dumps(compact(s, stamp, versions(tools)), indent=1, sort_keys=True) + "\n")
        begin, end = f"<!-- catalog.py{suffix}: begin -->", f"<!-- catalog.py{suffix}: end -->"
        vs = ", ".join(f"{k} {v}" for k, v in versions(tools).items())
        doc_section.write_section(DOC, begin, end,
                                  f"Measured {stamp} ({vs}).\n\n{text}\n\n{group_table(s)}",
                                  f"## The x64 {'on' if x64 else 'off'} catalog")
        print(f"updated {DOC}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
