"""A JAX decoder exported with jaxonnx.genai.export, generating in
onnxruntime-genai: decode ms/token and prefill tokens/s at batch 1 and 4 for
the default and onnxruntime-contrib targets, in float32, bfloat16 and int4
(qwix), beside a plain onnxruntime session of the same graph feeding its cache
back (examples/decode.py's way), jax2onnx's conversion of the same step, and
jax.jit of the step, against the memory-bandwidth roofline measured in the
same run.

    nice python benchmarks/genai_decode.py [--prompt 128] [--new 32] [--batches 1 4] [--runs 3] [--profile]
    nice python benchmarks/genai_decode.py --quantized   # the weight-quantization choices only

--quantized runs genai alone (and the copy) on: float32 and int4 under both
targets, int8 (qwix per channel) under the contrib target, and int4 and int8
under the contrib target with fusion="approximate" (MatMulNBits with int8
activations; docs/quantization.md).

The model: tests/python/llm_models.py's Llama (grouped-query attention, rotary
embeddings, SwiGLU) at SPEC's sizes: 53M parameters read per token (212 MB in
float32), beyond this machine's 32 MiB last-level cache, plus a 33 MB
embedding table of which a step reads its tokens' rows only.

The runners, timed in alternating rounds (each after timing.IDLE seconds
without a run, the first round dropped, medians over the rest):
- genai: one generation per round: og.Generator's append_tokens of a random
  prompt (prefill), then generate_next_token until `--new` tokens (decode:
  the mean per token, greedy search included; the cache grows by Concat, or
  is one shared buffer where export turned past_present_share_buffer on).
- plain session: the default target's model.onnx in an InferenceSession: the
  prompt in one run, then one run per token feeding each present back as the
  next past (the growing cache genai keeps; argmax in numpy).
- jax2onnx: the same step converted at fixed shapes (a decode step at the mean
  cache length prompt + new / 2, and the prompt with an empty cache; jax2onnx
  0.17.1 fails on genai.export's symbolic specs, whose mask is past + sequence
  long), `--new` decode runs per round.
- jax.jit: the same step compiled at the same fixed shapes, `--new` runs per round.
- plain session and weight MatMuls alone, spinning off: the same with
  session.intra_op.allow_spinning "0".
- weight MatMuls alone: not the step, but one MatMul per weight of the float32
  graph on a [B, K] input of its own (benchmarks/decode_step.py's
  weight_matmuls), against the roofline of those weights' bytes: how fast
  onnxruntime's MatMul kernel reads them here, a ceiling for any graph of the step.
- copy: benchmarks/roofline.py's Copy (512 MiB between buffers allocated up
  front; one thread, and one per core: the better median) in the same
  rotation: the machine's memory bandwidth under the load the runners saw.
The roofline of a decode step: the bytes it must read once per token (every
weight but the embedding table, its tokens' embedding rows, and the cache
prefix of every layer at the mean length) over that bandwidth. int4 weights
count as stored (MatMulNBits reads them so); onnxruntime folds the default
target's int4 weights (Cast + Mul of a constant) and the bfloat16 model's
weights (Cast to float32 of a constant, for the MatMuls it has no bfloat16
kernel for) into float32 initializers at load, so their rooflines count
float32 weights (and the bfloat16 cache at 2 bytes). --profile adds onnxruntime's profile (ms per op type) of the
plain session's decode step for the float32 default and contrib graphs.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import decode_step  # noqa: E402
import llm_models as lm  # noqa: E402
import roofline  # noqa: E402
import timing  # noqa: E402

SPEC = lm.Spec("llama_bench", vocab=8192, width=1024, layers=4, heads=16, kv_heads=4, head_dim=64,
               hidden=2816, context=2048)
INT4_BLOCK = 128
EMBED = "embed"


def flat_step(step, n):
    """step as a function of flat caches (what jax2onnx and jax.jit are given)."""
    def flat(ids, mask, pos, *cache):
        logits, present = step(ids, mask, pos, [(cache[2 * i], cache[2 * i + 1]) for i in range(n)])
        return (logits, *[a for kv in present for a in kv])
    return flat


def fixed_inputs(batch, s, p, dtype, seed=0):
    """(ids, mask, positions, *caches) of a step over s new tokens after p cached."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(2, SPEC.vocab, (batch, s)).astype(np.int32)
    mask = np.ones((batch, p + s), np.int32)
    pos = np.tile(np.arange(p, p + s, dtype=np.int32), (batch, 1))
    kv = [rng.standard_normal((batch, SPEC.kv_heads, p, SPEC.head_dim)).astype(dtype)
          for _ in range(2 * SPEC.layers)]
    return [ids, mask, pos, *kv]


class Round:
    """A runner's measurements: lists of decode seconds/token and prefill seconds."""

    def __init__(self, name):
        self.name, self.decode, self.prefill = name, [], []


class Genai(Round):
    def __init__(self, name, folder, batch, prompt, new):
        import onnxruntime_genai as og
        super().__init__(name)
        self.og, self.model = og, og.Model(str(folder))
        self.batch, self.prompt, self.new = batch, prompt, new
        self.ids = np.random.default_rng(1).integers(2, SPEC.vocab, (batch, prompt)).astype(np.int32)

    def run(self):
        params = self.og.GeneratorParams(self.model)
        params.set_search_options(max_length=self.prompt + self.new, batch_size=self.batch)
        gen = self.og.Generator(self.model, params)
        start = time.perf_counter()
        gen.append_tokens(self.ids)
        self.prefill.append(time.perf_counter() - start)
        gen.generate_next_token()  # samples from the prompt's logits
        start, steps = time.perf_counter(), 0
        while not gen.is_done():
            gen.generate_next_token()
            steps += 1
        self.decode.append((time.perf_counter() - start) / steps)


class Session(Round):
    """The genai graph in a plain InferenceSession, the cache fed back."""

    def __init__(self, name, path, batch, prompt, new, dtype, spinning=True):
        import onnxruntime as ort
        super().__init__(name)
        options = plain_options(spinning)
        self.sess = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.names = [i.name for i in self.sess.get_inputs()]
        self.batch, self.prompt, self.new, self.dtype = batch, prompt, new, dtype
        self.first = fixed_inputs(batch, prompt, 0, dtype, seed=1)

    def run(self):
        start = time.perf_counter()
        out = self.sess.run(None, dict(zip(self.names, self.first)))
        self.prefill.append(time.perf_counter() - start)
        mask, pos = self.first[1], self.first[2][:, -1:]
        start = time.perf_counter()
        for _ in range(self.new - 1):
            token = out[0][:, -1].argmax(-1).astype(np.int32)[:, None]
            mask = np.concatenate([mask, np.ones((self.batch, 1), np.int32)], axis=1)
            pos = pos + 1
            out = self.sess.run(None, dict(zip(self.names, [token, mask, pos, *out[1:]])))
        self.decode.append((time.perf_counter() - start) / (self.new - 1))


class Fixed(Round):
    """A decode step and a prefill at fixed shapes, run as functions."""

    def __init__(self, name, decode_fn, prefill_fn, decode_args, prefill_args, new):
        super().__init__(name)
        self.decode_fn, self.prefill_fn = decode_fn, prefill_fn
        self.decode_args, self.prefill_args, self.new = decode_args, prefill_args, new
        self.decode_fn(*decode_args), self.prefill_fn(*prefill_args)  # compile / warm up

    def run(self):
        start = time.perf_counter()
        self.prefill_fn(*self.prefill_args)
        self.prefill.append(time.perf_counter() - start)
        start = time.perf_counter()
        for _ in range(self.new - 1):
            self.decode_fn(*self.decode_args)
        self.decode.append((time.perf_counter() - start) / (self.new - 1))


class CopyRound(Round):
    """roofline.Copy with one thread and with one per core: the bandwidth is
    the better of the two medians (on a loaded machine a two-thread copy waits
    for its slower half; a roofline must stay a bound)."""

    def __init__(self):
        super().__init__("copy")
        self.copies = [roofline.Copy(1, 512), roofline.Copy(os.cpu_count(), 512)]
        self.seconds = [[], []]

    def run(self):
        for copy, seconds in zip(self.copies, self.seconds):
            for _ in range(2):
                start = time.perf_counter()
                copy.run()
                seconds.append(time.perf_counter() - start)

    def gbps(self):
        return max(c.moved / statistics.median(s[2:]) / 1e9 for c, s in zip(self.copies, self.seconds))


def plain_options(spinning=True):
    """onnxruntime's default session options; spinning=False: the intra-op
    threads block instead of spinning between kernels (on an oversubscribed
    machine a spinning thread spends the slices its partner needs)."""
    options = roofline.session_options()
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def ort_fn(model, spinning=True):
    import onnxruntime as ort
    sess = ort.InferenceSession(model.SerializeToString(), plain_options(spinning),
                                providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return lambda *xs: sess.run(None, dict(zip(names, xs)))


def jit_fn(flat):
    f = jax.jit(flat)
    return lambda *xs: jax.block_until_ready(f(*xs))


def read_bytes(model, batch, prefix, cache_itemsize):
    """Bytes a decode step reads once: every initializer but the embedding
    table, the batch's embedding rows, the cache prefix of every layer."""
    from onnx import numpy_helper
    total = embed = 0
    for t in model.graph.initializer:
        n = numpy_helper.to_array(t).nbytes if t.data_type != 22 else int(np.prod(t.dims)) // 2
        total += n
        if tuple(t.dims) == (SPEC.vocab, SPEC.width):
            embed = n
    rows = batch * embed // SPEC.vocab
    cache = 2 * SPEC.layers * batch * SPEC.kv_heads * prefix * SPEC.head_dim * cache_itemsize
    return total - embed + rows + cache


def quantized(step_spec, params, kind, tile_size=INT4_BLOCK):
    import qwix
    rules = [qwix.QuantizationRule(module_path=".*", weight_qtype=kind, tile_size=tile_size)]
    empty = np.zeros((1, SPEC.kv_heads, 0, SPEC.head_dim), np.float32)
    example = (np.array([[5, 17, 33]], np.int32), np.ones((1, 3), np.int32),
               np.arange(3, dtype=np.int32)[None], [(empty, empty)] * SPEC.layers)
    return qwix.quantize_model(lm.Decoder(step_spec, params), qwix.PtqProvider(rules), *example)


def op_profile(path, feed, runs=10):
    """ms per decode step by op type (onnxruntime's profiler)."""
    import onnxruntime as ort
    with tempfile.TemporaryDirectory() as tmp:
        options = roofline.session_options()
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tmp, "p")
        sess = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        for _ in range(runs + 3):
            sess.run(None, feed)
        events = json.load(open(sess.end_profiling()))
    runs_done = sum(1 for e in events if e.get("name") == "model_run")
    per_op = collections.Counter()
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per_op[e["args"]["op_name"]] += e["dur"] / runs_done / 1e3
    return per_op


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--no-jax2onnx", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="a tiny model, to check the script runs")
    ap.add_argument("--quantized", action="store_true",
                    help="genai only, on the weight-quantization choices (module docstring)")
    args = ap.parse_args(argv)
    global SPEC
    if args.smoke:
        SPEC = dataclasses.replace(SPEC, vocab=512, width=128, layers=2, heads=4, kv_heads=2,
                                   head_dim=32, hidden=256)
    logging.getLogger("jax2onnx").setLevel(logging.ERROR)
    import onnx

    from jaxonnx import genai
    load = os.getloadavg()
    print(f"start {time.strftime('%H:%M', time.gmtime())} UTC, load average {load[0]:.1f} {load[1]:.1f} "
          f"{load[2]:.1f}", flush=True)
    params = lm.init(SPEC)
    step = lm.decoder_step(SPEC, params)
    bf16 = dataclasses.replace(SPEC, name="llama_bench_bf16", dtype="bfloat16")
    bf16_step = lm.decoder_step(bf16, jax.tree.map(lambda a: a.astype(jax.numpy.bfloat16), params))
    int4_step = quantized(SPEC, params, "int4")
    config = SPEC.config(eos=0)
    exports = {"float32, onnxruntime": (step, "onnxruntime", "float32"),
               "float32, onnxruntime-contrib": (step, "onnxruntime-contrib", "float32"),
               "bfloat16, onnxruntime": (bf16_step, "onnxruntime", "bfloat16"),
               "int4, onnxruntime": (int4_step, "onnxruntime", "float32"),
               "int4, onnxruntime-contrib": (int4_step, "onnxruntime-contrib", "float32")}
    if args.quantized:
        int8_step = quantized(SPEC, params, "int8", tile_size=None)
        del exports["bfloat16, onnxruntime"]
        exports.update({
            "int4, onnxruntime-contrib, fusion approximate": (int4_step, "onnxruntime-contrib", "float32"),
            "int8, onnxruntime-contrib": (int8_step, "onnxruntime-contrib", "float32"),
            "int8, onnxruntime-contrib, fusion approximate": (int8_step, "onnxruntime-contrib", "float32")})
    tmp = tempfile.TemporaryDirectory()
    folders, models, sizes, shared = {}, {}, {}, {}
    for name, (fn, target, kv) in exports.items():
        folder = Path(tmp.name) / name.replace(", ", "_")
        start = time.perf_counter()
        genai.export(fn, config, folder, target=target, kv_dtype=kv, external_data=True,
                     fusion="approximate" if name.endswith("fusion approximate") else None)
        folders[name] = folder
        models[name] = onnx.load(folder / "model.onnx")
        sizes[name] = sum(f.stat().st_size for f in folder.iterdir())
        shared[name] = json.loads((folder / "genai_config.json").read_text())["search"][
            "past_present_share_buffer"]
        print(f"exported {name}: {sizes[name] / 1e6:.0f} MB in {time.perf_counter() - start:.0f} s; "
              f"past_present_share_buffer {shared[name]}", flush=True)
    flat = flat_step(step, SPEC.layers)
    prefix = args.prompt + args.new // 2
    j2o = None
    if not args.no_jax2onnx:
        try:
            from jax2onnx import to_onnx as j2o
        except ImportError:
            pass

    results = []
    for batch in args.batches:
        dec_args = fixed_inputs(batch, 1, prefix, np.float32)
        pre_args = fixed_inputs(batch, args.prompt, 0, np.float32)
        runners = [Genai(f"genai, {n}", folders[n], batch, args.prompt, args.new) for n in exports]
        if args.quantized:
            runners.append(CopyRound())
            run_rounds(runners, args.runs, batch)
            results.append(dict(batch=batch, gbps=runners[-1].gbps(), jax2onnx=None,
                                rows=rows_of(runners[:-1], exports, models, sizes, shared, batch, prefix, runners[-1].gbps(),
                                             None, args.prompt)))
            del runners
            print_batch(results[-1])
            continue
        runners.append(Session("plain session, float32, onnxruntime",
                               folders["float32, onnxruntime"] / "model.onnx", batch, args.prompt,
                               args.new, np.float32))
        runners.append(Session("plain session, float32, onnxruntime, spinning off",
                               folders["float32, onnxruntime"] / "model.onnx", batch, args.prompt,
                               args.new, np.float32, spinning=False))
        j2o_note = "not run (--no-jax2onnx)" if args.no_jax2onnx else "not installed"
        if j2o is not None:
            try:
                specs = lambda xs: [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in xs]  # noqa: E731
                runners.append(Fixed("jax2onnx, float32 (fixed shapes)", ort_fn(j2o(flat, specs(dec_args))),
                                     ort_fn(j2o(flat, specs(pre_args))), dec_args, pre_args, args.new))
                j2o_note = None
            except Exception as e:  # the peer's failure is a row, not a crash
                j2o_note = f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
        runners.append(Fixed("jax.jit, float32", jit_fn(flat), jit_fn(flat), dec_args, pre_args, args.new))
        alone, alone_bytes = decode_step.weight_matmuls(models["float32, onnxruntime"])
        alone_feed = [np.random.default_rng(0).standard_normal((batch, i.type.tensor_type.shape.dim[1].dim_value))
                      .astype(np.float32) for i in alone.graph.input]
        for spinning in (True, False):
            alone_fn = ort_fn(alone, spinning)
            runners.append(Fixed("weight MatMuls alone, float32" + ("" if spinning else ", spinning off"),
                                 alone_fn, alone_fn, alone_feed, alone_feed, args.new))
        copy = CopyRound()
        runners.append(copy)
        run_rounds(runners, args.runs, batch)
        gbps = copy.gbps()
        rows = rows_of(runners[:-1], exports, models, sizes, shared, batch, prefix, gbps, alone_bytes, args.prompt)
        results.append(dict(batch=batch, gbps=gbps, rows=rows, jax2onnx=j2o_note))
        del runners, copy
        print_batch(results[-1])
        if args.profile:
            feed_names = [i.name for i in models["float32, onnxruntime"].graph.input]
            feed = dict(zip(feed_names, dec_args))
            for name in ("float32, onnxruntime", "float32, onnxruntime-contrib"):
                ops = op_profile(folders[name] / "model.onnx", feed)
                total = sum(ops.values())
                parts = ", ".join(f"{op} {ms:.2f}" for op, ms in ops.most_common(8))
                print(f"- profile, batch {batch}, {name} decode step at cache {prefix} "
                      f"({total:.2f} ms in kernels): {parts}", flush=True)
    load = os.getloadavg()
    print(f"end {time.strftime('%H:%M', time.gmtime())} UTC, load average {load[0]:.1f} {load[1]:.1f} "
          f"{load[2]:.1f}")


def run_rounds(runners, runs, batch):
    for r in range(runs + 1):
        for runner in runners:
            time.sleep(timing.IDLE)
            runner.run()
        print(f"batch {batch}: round {r} done", flush=True)


def rows_of(runners, exports, models, sizes, shared, batch, prefix, gbps, alone_bytes, prompt):
    rows = []
    for runner in runners:
        kind = runner.name.split(", ")[1]
        model_name = next((n for n in exports if runner.name.endswith(n)), "float32, onnxruntime")
        itemsize = 2 if kind == "bfloat16" else 4
        # onnxruntime folds the Cast of a bfloat16 weight, and the Cast + Mul
        # of an int4 or int8 one, into a float32 initializer at load: those
        # models read float32 weights at run time.
        folded = model_name in ("int4, onnxruntime", "bfloat16, onnxruntime", "int8, onnxruntime-contrib")
        roof_model = models["float32, onnxruntime"] if folded else models[model_name]
        nbytes = read_bytes(roof_model, batch, prefix, itemsize)
        if runner.name.startswith("weight MatMuls alone"):
            nbytes = alone_bytes
        dec = statistics.median(runner.decode[1:])
        pre = statistics.median(runner.prefill[1:])
        alone_row = runner.name.startswith("weight MatMuls alone")
        rows.append(dict(batch=batch, runner=runner.name, decode_ms=dec * 1e3,
                         roofline_ms=nbytes / gbps / 1e6, bytes_mb=nbytes / 1e6,
                         prefill_tps=None if alone_row else batch * prompt / pre,
                         size_mb=sizes[model_name] / 1e6 if runner.name.startswith("genai") else None,
                         shared=shared.get(model_name) if runner.name.startswith("genai") else None))
    return rows


def print_batch(res):
    print(f"\nbatch {res['batch']}: copy bandwidth {res['gbps']:.1f} GB/s" +
          (f"; jax2onnx: {res['jax2onnx']}" if res["jax2onnx"] else ""))
    print("| batch | runner | file MB | shared cache | MB read per token | decode ms/token | roofline ms "
          "| % of roofline | prefill tokens/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in res["rows"]:
        size = f"{r['size_mb']:.0f}" if r["size_mb"] else ""
        shared = {True: "yes", False: "no", None: ""}[r["shared"]]
        prefill = "" if r["prefill_tps"] is None else f"{r['prefill_tps']:.0f}"
        print(f"| {r['batch']} | {r['runner']} | {size} | {shared} | {r['bytes_mb']:.0f} | "
              f"{r['decode_ms']:.2f} | {r['roofline_ms']:.2f} | {100 * r['roofline_ms'] / r['decode_ms']:.0f}% "
              f"| {prefill} |", flush=True)


if __name__ == "__main__":
    main()
