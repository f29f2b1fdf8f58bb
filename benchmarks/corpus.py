"""What fraction of real JAX programs jaxonnx converts and matches: a corpus
benchmark (issue 16's goal is >= 98%).

    python benchmarks/corpus.py [--jobs 2] [--filter REGEX] [--limit N] [--json F] [--write-docs]

The programs are generated (benchmarks/corpus_programs.py): the public functions
of jax.numpy (and .linalg, .fft), jax.nn, jax.scipy.{special, linalg, signal,
stats.*}, jax.lax and jax.random (threefry and rbg keys) under canned argument
patterns, kept when jax.jit runs them; flax.nnx / flax.linen / equinox layers; compositions (grad, vmap, scan,
while_loop, cond, ...); the repo's examples. Each program is converted in four
variants, float32 and float64 (jax_enable_x64 on while tracing), with a static
batch (3) and a symbolic one ("B", run at 3 and 2), run in onnxruntime and
compared with jax.jit: allclose at a dtype's tolerance, NaN where JAX has NaN,
integers and booleans exact. Outcomes: pass; conversion error (a
jaxonnx.ConversionError, grouped by primitive and the message's first line);
invalid model (the ONNX checker); onnxruntime error; mismatch; exception (any
other exception escaping to_onnx: a bug in itself); crash / timeout (the worker
process died or hung). A variant JAX itself cannot run (no 64-bit version, no
symbolic batch) is not counted.

Candidates run in worker processes (--jobs of them), so a crash costs one
variant; the report is in candidate order whatever the scheduling.
--write-docs rewrites the generated part of docs/benchmarks/corpus.md.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import re
import sys
import time
import zlib
from pathlib import Path

import doc_section
from worker_process import run_pool, serve

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks" / "corpus.md"
BEGIN, END = "<!-- corpus.py: begin -->", "<!-- corpus.py: end -->"
MARK = "@@corpus "  # prefixes the worker's protocol lines (anything else on stdout is noise)
VARIANTS = ("f32-static", "f32-symbolic", "f64-static", "f64-symbolic")
STATIC_BATCH, SYMBOLIC_BATCHES = 3, (3, 2)
TOLERANCE = {"float32": (1e-4, 1e-5), "float64": (1e-9, 1e-9)}  # rtol, atol (times max(1, |JAX|))
FAILURES = ("conversion error", "invalid model", "onnxruntime error", "mismatch", "exception", "crash",
            "timeout")


# =============================================================== the worker ==

def _first_line(msg):
    return (str(msg).strip().splitlines() or [""])[0]


def group_of(message):
    """A failure message without what varies between programs and variants
    (source lines, shapes, node names): the key failures are grouped by."""
    s = _first_line(message)
    s = re.sub(r" ?\(inputs: [^)]*\)", "", s)
    s = re.sub(r" at \S+:\d+(:\d+)? \([^)]*\)(, via \S+:\d+(:\d+)? \([^)]*\))?", "", s)
    s = re.sub(r"\[[^\]]*\]", "[...]", s)
    s = re.sub(r"Name:'[^']*'", "Name:'...'", s)
    s = re.sub(r"0x[0-9a-f]+", "0x...", s)
    return s[:200]


def primitive_of(message):
    m = re.search(r"(?:primitive|lower|eval of) '([^']+)'", str(message)) or re.search(r"'([^']+)'", str(message))
    return m.group(1) if m else "-"


def _compare(got, want, dtype_name):
    """None when `got` (onnxruntime) matches `want` (JAX), else what differs."""
    import numpy as np
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype}{list(got.shape)} vs JAX {want.dtype}{list(want.shape)}"
    if want.dtype.kind not in "fc":
        bad = got != want
        return f"{int(bad.sum())} of {want.size} elements differ" if bad.any() else None
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    if (nan_g != nan_w).any():
        return f"NaN at {int((nan_g != nan_w).sum())} positions where the other has none"
    finite = np.isfinite(want) & np.isfinite(got)
    if (got[~finite & ~nan_w] != want[~finite & ~nan_w]).any():
        return "infinities differ"
    rtol, atol = TOLERANCE[dtype_name]
    w, g = want[finite], got[finite]
    scale = max(1.0, float(np.abs(w).max())) if w.size else 1.0
    if w.size and not np.allclose(g, w, rtol=rtol, atol=atol * scale):
        err = np.abs(g.astype(np.float64) - w.astype(np.float64))
        return f"max |error| {err.max():.3g} (JAX's scale {scale:.3g})"
    return None


# Decompositions whose vectors JAX defines only up to sign (eigenvectors, singular
# vectors, QR's factors): their outputs are compared up to the sign of each vector.
UP_TO_SIGN = re.compile(r"\.(eigh?|svd|qr|schur|polar)\b")


def _matches_up_to_sign(got, want, dtype_name):
    """Whether got == want once each column (or each row) of both has its
    largest-magnitude entry made positive."""
    import numpy as np
    if want.ndim < 2 or want.dtype.kind != "f" or got.shape != want.shape:
        return False

    def canon(x, axis):
        idx = np.expand_dims(np.argmax(np.abs(want), axis=axis), axis)
        return x * np.sign(np.take_along_axis(x, idx, axis=axis) + 0.0)
    return any(_compare(canon(got, a), canon(want, a), dtype_name) is None for a in (-2, -1))


class Worker:
    """Runs candidates in this process: the JAX program, then each variant."""

    def __init__(self):
        import jax
        import numpy as np
        import onnx
        import onnxruntime as ort

        import corpus_programs
        import jaxonnx
        from jaxonnx import testing
        self.jax, self.np, self.onnx, self.ort = jax, np, onnx, ort
        self.programs, self.jaxonnx, self.testing = corpus_programs, jaxonnx, testing
        self.opts = ort.SessionOptions()
        self.opts.intra_op_num_threads = 1
        self.opts.inter_op_num_threads = 1

    def _leaves(self, out):
        np = self.np
        leaves = [np.asarray(x) for x in self.jax.tree_util.tree_leaves(out)]
        if not leaves or any(x.dtype.kind not in "biufc" for x in leaves):
            raise TypeError("not an array program")
        return [self.testing.packed(x) for x in leaves]  # complex as float[..., 2], as the model

    def _inputs(self, prog, batch, dtype, seed):
        rng = self.np.random.default_rng(seed + batch)
        return [self.programs.make_input(i, batch, dtype, rng, prog.high) for i in prog.inputs]

    def _reference(self, prog, fn, args, x64):
        with self.jax.enable_x64(x64):
            return self._leaves(self.jax.jit(self._traceable(prog, fn))(*args))

    def _traceable(self, prog, fn):
        """`fn` as a function JAX can trace: an nnx module is merged afresh from its
        state in each trace (it may update its own state: an RNN's RngCount)."""
        if not prog.module:
            return fn
        from flax import nnx
        graphdef, state = nnx.split(fn)
        return lambda *a: nnx.merge(graphdef, state, copy=True)(*a)

    def _fn(self, prog, dtype, fns):
        """The program's callable in `dtype`: layers get float64 weights in float64."""
        if dtype not in fns:
            fns[dtype] = prog.fn
            if dtype == "float64" and prog.at_dtype is not None:
                with self.jax.enable_x64(True):
                    fns[dtype] = prog.at_dtype(self.np.float64)
        return fns[dtype]

    def _narrowest_float(self, fn, specs, dtype):
        """The least precise float a program computes with (its tolerance): a float64
        program may compute parts in float32 (nnx attention's softmax, say)."""
        np = self.np
        seen = set()

        def walk(jaxpr):
            for e in jaxpr.eqns:
                for v in e.outvars:
                    dt = getattr(v.aval, "dtype", None)
                    if isinstance(dt, np.dtype) and dt.kind in "fc":  # not a PRNG key type
                        seen.add(dt.name)
                for p in e.params.values():
                    for sub in p if isinstance(p, (tuple, list)) else (p,):
                        inner = getattr(sub, "jaxpr", sub)
                        if hasattr(inner, "eqns"):
                            walk(inner)
        walk(self.jax.make_jaxpr(fn)(*specs).jaxpr)
        for name in ("float16", "bfloat16", "float32", "complex64"):
            if name in seen:
                return "float32"
        return dtype

    def run(self, name, emit):
        seed = zlib.crc32(name.encode())
        prog = None
        try:
            for attempt in self.programs.attempts(name):
                try:
                    ref = self._reference(attempt, attempt.fn, self._inputs(attempt, STATIC_BATCH, "float32", seed),
                                          False)
                except Exception:
                    continue
                prog = attempt
                break
        except Exception as e:  # building the layer / example failed
            emit({"name": name, "program": None, "why": f"{type(e).__name__}: {_first_line(e)}"})
            return
        if prog is None:
            emit({"name": name, "program": None, "why": "JAX runs none of its patterns"})
            return
        refs, fns = {("float32", STATIC_BATCH): ref}, {}
        for variant in VARIANTS:
            emit({"name": name, "program": prog.name, "source": prog.source, "variant": variant, "start": True})
            status, detail = self._variant(prog, variant, refs, fns, seed)
            emit({"name": name, "program": prog.name, "source": prog.source, "variant": variant,
                  "status": status, "detail": detail})

    def _variant(self, prog, variant, refs, fns, seed):
        jax, np = self.jax, self.np
        dtype = "float64" if variant.startswith("f64") else "float32"
        x64, symbolic = dtype == "float64", variant.endswith("symbolic")
        batches = SYMBOLIC_BATCHES if symbolic else (STATIC_BATCH,)
        int_dtype = "int32"
        shapes = [i.shape if symbolic else tuple(STATIC_BATCH if d == "B" else d for d in i.shape)
                  for i in prog.inputs]
        cplx = "complex128" if x64 else "complex64"
        dtypes = [int_dtype if i.kind in ("i", "s") else "bool" if i.kind == "b" else cplx if i.kind == "c"
                  else dtype for i in prog.inputs]
        try:  # JAX's own program in this variant (not counted when JAX cannot run it)
            fn = self._fn(prog, dtype, fns)
            for b in batches:
                if (dtype, b) not in refs:
                    refs[dtype, b] = self._reference(prog, fn, self._inputs(prog, b, dtype, seed), x64)
            with jax.enable_x64(x64):
                specs = self.testing._shape_dtype_structs(shapes, dtypes)
                if symbolic:
                    jax.eval_shape(self._traceable(prog, fn), *specs)
                tol_dtype = self._narrowest_float(self._traceable(prog, fn), specs, dtype) if x64 else dtype
        except Exception as e:
            return "n/a", f"JAX: {type(e).__name__}: {_first_line(e)[:150]}"
        try:
            with jax.enable_x64(x64):
                data = self.jaxonnx.to_onnx(fn, specs, enable_double_precision=x64, return_mode="bytes")
        except self.jaxonnx.ConversionError as e:
            return "conversion error", str(e)
        except Exception as e:
            return "exception", f"{type(e).__name__}: {e}"
        try:
            self.onnx.checker.check_model(self.onnx.load_from_string(data), full_check=True)
        except Exception as e:
            return "invalid model", f"{type(e).__name__}: {e}"
        try:
            sess = self.ort.InferenceSession(data, self.opts, providers=["CPUExecutionProvider"])
            names = [i.name for i in sess.get_inputs()]
            results = {b: sess.run(None, dict(zip(names, map(self.testing.packed, self._inputs(prog, b, dtype, seed)))))
                       for b in batches}
        except Exception as e:
            return "onnxruntime error", f"{type(e).__name__}: {e}"
        for b in batches:
            got, want = results[b], refs[dtype, b]
            if len(got) != len(want):
                return "mismatch", f"{len(got)} outputs, JAX gives {len(want)}"
            for k, (g, w) in enumerate(zip(got, want)):
                why = _compare(np.asarray(g), w, tol_dtype)
                if why is not None and UP_TO_SIGN.search(prog.name) and _matches_up_to_sign(np.asarray(g), w, tol_dtype):
                    why = None
                if why is not None:
                    return "mismatch", f"B={b} output {k}: {why}"
        return "pass", ""


def worker_main():
    """--worker: candidate names on stdin, one a line; MARK + JSON lines on stdout."""
    sys.path.insert(0, str(Path(__file__).parent))
    w = Worker()

    def handle(fields, emit):
        name = fields[0].strip()
        try:
            w.run(name, emit)
        except Exception as e:  # the harness's own failure on a candidate: recorded, not fatal
            emit({"name": name, "program": None, "why": f"harness: {type(e).__name__}: {_first_line(e)}"})
        emit({"done": name})
    return serve(MARK, handle)


# =============================================================== the parent ==

def run_all(names, jobs, timeout, progress):
    """{name: [records]} for every candidate, run by `jobs` worker processes."""
    results = {n: [] for n in names}

    def handle(slot, name):
        proc = slot.get()
        proc.send(name)
        current = None
        while True:
            rec = proc.read(timeout)
            if rec is None:  # died or hung: the variant under way is the culprit
                status, detail = slot.drop()
                status, detail = ("timeout", f"no answer within {timeout:.0f} s") if status == "hang" else (status, detail)
                if current:
                    results[name].append(dict(current, start=False, status=status, detail=detail))
                else:
                    results[name].append({"name": name, "program": None, "why": f"{status}: {detail}"})
                break
            if "done" in rec:
                break
            if rec.get("start"):
                current = rec
                continue
            results[name].append(rec)
        progress(name, results[name])

    run_pool(names, jobs, Path(__file__).resolve(), MARK, handle)
    return results


# =============================================================== the report ==

def summarize(names, results):
    rows = [r for n in names for r in results[n] if r.get("program")]
    no_program = [r for n in names for r in results[n] if not r.get("program")]
    counted = [r for r in rows if r["status"] != "n/a"]
    passed = [r for r in counted if r["status"] == "pass"]
    programs = collections.OrderedDict()
    for r in rows:
        programs.setdefault(r["name"], []).append(r)
    prog_pass = sum(all(r["status"] in ("pass", "n/a") for r in rs) and any(r["status"] == "pass" for r in rs)
                    for rs in programs.values())
    groups = collections.OrderedDict()
    for r in counted:
        if r["status"] == "pass":
            continue
        if r["status"] == "conversion error":
            key = (r["status"], f"{primitive_of(r['detail'])}: {group_of(r['detail'])}")
        elif r["status"] == "mismatch":
            key = (r["status"], r["name"])
        else:
            key = (r["status"], group_of(r["detail"]))
        g = groups.setdefault(key, {"kind": key[0], "group": key[1], "count": 0, "example": r})
        g["count"] += 1
    return {
        "candidates": len(names), "programs": len(programs), "no_program": len(no_program),
        "conversions": len(counted), "not_counted": len(rows) - len(counted), "passed": len(passed),
        "programs_passed": prog_pass,
        "by_source": _rate_by(counted, lambda r: r["source"]),
        "by_variant": _rate_by(counted, lambda r: r["variant"]),
        "by_outcome": dict(collections.Counter(r["status"] for r in counted)),
        "groups": sorted(groups.values(), key=lambda g: -g["count"]),
    }


def _rate_by(rows, key):
    out = collections.OrderedDict()
    for r in rows:
        n, p = out.get(key(r), (0, 0))
        out[key(r)] = (n + 1, p + (r["status"] == "pass"))
    return out


def _pct(p, n):
    return f"{100.0 * p / n:.1f}%" if n else "-"


def report(s, top, elapsed, jobs):
    import corpus_programs
    order = {src: i for i, src in enumerate(corpus_programs.SOURCES)}
    lines = [
        f"{s['candidates']} candidates gave {s['programs']} programs ({s['no_program']} gave none: JAX runs "
        f"none of their argument patterns); {s['conversions']} conversions counted ({s['not_counted']} "
        f"variants JAX itself cannot run are not).",
        "",
        f"**Pass rate: {_pct(s['passed'], s['conversions'])}** of conversions ({s['passed']} / "
        f"{s['conversions']}); {_pct(s['programs_passed'], s['programs'])} of programs pass in every "
        f"variant JAX runs ({s['programs_passed']} / {s['programs']}). "
        f"{elapsed:.0f} s with {jobs} worker(s).",
        "",
        "| source | conversions | pass |", "|---|---:|---:|",
    ]
    for src, (n, p) in sorted(s["by_source"].items(), key=lambda kv: order.get(kv[0], 99)):
        lines.append(f"| {src} | {n} | {_pct(p, n)} |")
    lines += ["", "| variant | conversions | pass |", "|---|---:|---:|"]
    for v in VARIANTS:
        n, p = s["by_variant"].get(v, (0, 0))
        lines.append(f"| {v} | {n} | {_pct(p, n)} |")
    lines += ["", "| outcome | conversions |", "|---|---:|"]
    for k in ("pass",) + FAILURES:
        if s["by_outcome"].get(k):
            lines.append(f"| {k} | {s['by_outcome'][k]} |")
    lines += ["", f"Top failure groups ({min(top, len(s['groups']))} of {len(s['groups'])}):", "",
              "| # | kind | group | example (variant) |", "|---:|---|---|---|"]
    for g in s["groups"][:top]:
        ex = g["example"]
        text = g["group"]
        if g["kind"] == "mismatch":
            text = f"{text}: {group_of(ex['detail'])}"
        # Escaped for the table and for the docs site, which reads [x][y] as a link.
        text = text.replace("|", "\\|").replace("[", "\\[").replace("]", "\\]")
        lines.append(f"| {g['count']} | {g['kind']} | {text} | `{ex['program']}` ({ex['variant']}) |")
    return "\n".join(lines)


def write_docs(text):
    doc_section.write_section(DOC, BEGIN, END, text, "# Corpus benchmark")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--filter", help="only candidates whose name matches this regular expression")
    parser.add_argument("--limit", type=int, help="only the first N candidates (after --filter)")
    parser.add_argument("--top", type=int, default=25, help="failure groups shown (default 25)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a variant may take")
    parser.add_argument("--json", type=Path, help="also write every record and the summary here")
    parser.add_argument("--write-docs", action="store_true", help="rewrite the generated block of docs/benchmarks/corpus.md")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main()
    sys.path.insert(0, str(Path(__file__).parent))
    import corpus_programs

    names = corpus_programs.candidates()
    if args.filter:
        names = [n for n in names if re.search(args.filter, n)]
    if args.limit is not None:
        names = names[:args.limit]
    done = [0]

    def progress(name, recs):
        done[0] += 1
        if not args.quiet:
            bad = [f"{r['variant']}: {r['status']}" for r in recs if r.get("status") not in (None, "pass", "n/a")]
            print(f"[{done[0]}/{len(names)}] {name}" + (f"  ({'; '.join(bad)})" if bad else ""),
                  file=sys.stderr, flush=True)

    start = time.monotonic()
    results = run_all(names, args.jobs, args.timeout, progress)
    elapsed = time.monotonic() - start
    s = summarize(names, results)
    text = report(s, args.top, elapsed, args.jobs)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"summary": {k: v for k, v in s.items() if k != "groups"},
                                         "groups": s["groups"],
                                         "records": [r for n in names for r in results[n]]}, indent=1))
    if args.write_docs:
        stamp = f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, all candidates" \
            if not (args.filter or args.limit) else "Measured on a subset (--filter / --limit)"
        write_docs(f"{stamp}.\n\n{text}")
        print(f"updated {DOC}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
