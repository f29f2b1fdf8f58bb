"""A JAX decoder exported with jaxonnx.genai.export, run by onnxruntime-genai:
decode ms/token and prefill tokens/s at batch 1 and 4 for the default and the
onnxruntime-contrib targets, against the memory-bandwidth roofline of a decode
step (every weight plus the filled cache prefix read once per token, over
onnxruntime's copy bandwidth) and against jax.jit of the same step.

    python benchmarks/genai_decode.py [--prompt 128] [--new 64] [--batches 1 4] [--runs 3]

The model is tests/python/llm_models.py's Llama at examples/decode.py's large
sizes (vocab 8192, width 512, 4 layers, 8 heads, 2 key/value heads of 64,
MLP 1408; float32, 79 MB of weights, 17 MB of them the embedding table, of
which a step reads its tokens' rows only). genai decode: the mean time of
generate_next_token over `--new` tokens after a prompt of `--prompt` tokens
(sampling included; greedy), the median of `--runs` generations. Prefill: the
prompt's append_tokens. jax.jit: the same step at the same shapes (a cache of
prompt + new / 2 positions for decode, the mean prefix genai's steps read),
compiled once beforehand. Each measurement follows an idle pause
(timing.IDLE) so that no configuration is timed in another's threads' wake.
"""

from __future__ import annotations

import argparse
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

import llm_models as lm  # noqa: E402
import roofline  # noqa: E402
import timing  # noqa: E402

SPEC = lm.Spec("llama_bench", vocab=8192, width=512, layers=4, heads=8, kv_heads=2, head_dim=64,
               hidden=1408, context=2048)
TARGETS = ("onnxruntime", "onnxruntime-contrib")


def genai_times(folder, batch, prompt, new, runs):
    """(decode seconds per token, prefill seconds) in onnxruntime-genai, medians."""
    import onnxruntime_genai as og
    model = og.Model(str(folder))
    ids = np.random.default_rng(0).integers(2, SPEC.vocab, (batch, prompt)).astype(np.int32)
    decode, prefill = [], []
    for _ in range(runs + 1):  # the first generation warms up
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=prompt + new, batch_size=batch)
        gen = og.Generator(model, params)
        time.sleep(timing.IDLE)
        start = time.perf_counter()
        gen.append_tokens(ids)
        prefill.append(time.perf_counter() - start)
        gen.generate_next_token()  # samples from the prompt's logits
        start = time.perf_counter()
        steps = 0
        while not gen.is_done():
            gen.generate_next_token()
            steps += 1
        decode.append((time.perf_counter() - start) / steps)
    return statistics.median(decode[1:]), statistics.median(prefill[1:])


def jit_times(step, batch, prompt, new, runs):
    """(decode seconds per token, prefill seconds) of jax.jit(step)."""
    f = jax.jit(step)
    rng = np.random.default_rng(0)
    kv = lambda n: np.asarray(rng.standard_normal((batch, SPEC.kv_heads, n, SPEC.head_dim)),  # noqa: E731
                              np.float32)
    p = prompt + new // 2
    dec = (rng.integers(2, SPEC.vocab, (batch, 1)).astype(np.int32), np.ones((batch, p + 1), np.int32),
           np.full((batch, 1), p, np.int32), [(kv(p), kv(p)) for _ in range(SPEC.layers)])
    pre = (rng.integers(2, SPEC.vocab, (batch, prompt)).astype(np.int32),
           np.ones((batch, prompt), np.int32), np.tile(np.arange(prompt, dtype=np.int32), (batch, 1)),
           [(kv(0), kv(0)) for _ in range(SPEC.layers)])
    out = []
    for args, reps in ((dec, 20), (pre, 3)):
        jax.block_until_ready(f(*args))
        t = []
        for _ in range(runs):
            time.sleep(timing.IDLE)
            start = time.perf_counter()
            for _ in range(reps):
                jax.block_until_ready(f(*args))
            t.append((time.perf_counter() - start) / reps)
        out.append(statistics.median(t))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)

    import onnx

    from jaxonnx import genai
    step = lm.decoder_step(SPEC, lm.init(SPEC))
    gbps = roofline.copy_bandwidth(runs=5)
    with tempfile.TemporaryDirectory() as tmp:
        folders = {}
        for target in TARGETS:
            folders[target] = Path(tmp) / target
            genai.export(step, SPEC.config(eos=0), folders[target], target=target)
        weights = roofline.weight_bytes(onnx.load(folders[TARGETS[0]] / "model.onnx"))
        print(f"model: {SPEC.layers} layers, width {SPEC.width}, vocab {SPEC.vocab}; weights "
              f"{weights / 1e6:.1f} MB; copy bandwidth {gbps:.1f} GB/s; prompt {args.prompt}, "
              f"{args.new} new tokens; {os.cpu_count()} cores")
        print("| batch | runner | decode ms/token | % of bandwidth roofline | prefill tokens/s |")
        print("|---|---|---|---|---|")
        for batch in args.batches:
            # A decode step reads every weight but the embedding table, its
            # tokens' embedding rows and each row's cache prefix (keys and values,
            # every layer) once: at the mean prefix of the generation.
            prefix = args.prompt + args.new // 2
            cache = 2 * SPEC.layers * batch * SPEC.kv_heads * prefix * SPEC.head_dim * 4
            read = weights - (SPEC.vocab - batch) * SPEC.width * 4 + cache
            floor = roofline.bandwidth_seconds(read, gbps)
            rows = [(f"genai, target {t}", *genai_times(folders[t], batch, args.prompt, args.new,
                                                        args.runs)) for t in TARGETS]
            rows.append(("jax.jit", *jit_times(step, batch, args.prompt, args.new, args.runs)))
            for name, dec, pre in rows:
                print(f"| {batch} | {name} | {dec * 1e3:.2f} | {100 * floor / dec:.0f}% | "
                      f"{batch * args.prompt / pre:.0f} |")
            print(f"| {batch} | roofline | {floor * 1e3:.2f} | 100% | |")


if __name__ == "__main__":
    main()
