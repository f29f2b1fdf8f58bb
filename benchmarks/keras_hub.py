"""keras-hub text backbones exported with a symbolic sequence length through
jaxonnx.keras.export: how many trace, run in onnxruntime and match Keras.

Every keras_hub.models.*Backbone whose inputs hold token ids is built from its
constructor with a small random configuration (no download), exported with the
model's own input specs (batch and sequence length symbolic), run in
onnxruntime at two sequence lengths and compared with model.predict. Each
backbone is tried twice: "keras" is Keras's own semantics (every None dim its
own symbol, no constraint; what model.export(format="onnx") asks of its
converter), "jaxonnx" is jaxonnx.keras.export (tied dims shared, the sequence
length bounded by the model's position tables).

    KERAS_BACKEND=jax .venv/bin/python benchmarks/keras_hub.py [--only Bert,GPT2] [--json out.json]

Needs keras-hub 0.32 (a benchmark dependency: pip install --no-deps keras-hub==0.32.0
regex tokenizers, with -c scripts/requirements.txt).
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import argparse
import inspect
import json
import re
import sys
import tempfile
import time
import traceback

import numpy as np

# Small values for the constructor arguments the backbones share; a backbone
# takes those its signature names.
SMALL = dict(
    vocabulary_size=64, vocab_size=64, text_vocab_size=64, text_hidden_size=16, num_layers=2,
    num_hidden_layers=2,
    num_heads=2, num_query_heads=2, num_key_value_heads=1, num_attention_heads=2,
    hidden_dim=16, hidden_size=16, embedding_dim=16, intermediate_dim=32, intermediate_size=32,
    head_dim=8, head_size=8, max_sequence_length=32, max_position_embeddings=32, num_experts=4,
    top_k=2, moe_intermediate_dim=16, shared_expert_intermediate_dim=16,
    shared_expert_intermediate_size=16, filter_dim=16, encoder_num_layers=1,
    decoder_num_layers=1, encoder_num_heads=2, decoder_num_heads=2, num_layers_enc=1,
    num_layers_dec=1, encoder_hidden_dim=16, decoder_hidden_dim=16,
    encoder_intermediate_dim=32, decoder_intermediate_dim=32, encoder_num_attention_heads=2,
    decoder_num_attention_heads=2, encoder_num_key_value_heads=1,
    decoder_num_key_value_heads=1, encoder_head_dim=8, decoder_head_dim=8,
    encoder_layer_types=["full_attention"], decoder_layer_types=["full_attention"],
    image_size=16, pad_token_id=0, hidden_activation="gelu_approximate",
    sliding_window=8, rope_theta=10000.0, attention_bias=False, attention_dropout=0.0,
    mlp_bias=False, layer_norm_epsilon=1e-6, partial_rotary_factor=1.0,
    rope_layer_enabled_list=[True, True], layer_types=["full_attention", "full_attention"],
    vocab_size_per_layer_input=64, hidden_size_per_layer_input=8, altup_num_inputs=2,
    laurel_rank=4, num_kv_shared_layers=0,
)
# Per-backbone overrides where a shared value does not fit its structure.
OVERRIDES = {
    "Gemma3nBackbone": dict(num_hidden_layers=2, layer_types=["full_attention"] * 2),
}
TEXT_KEYS = ("token_ids", "decoder_token_ids", "encoder_token_ids", "input_ids")


def _config(cls):
    params = inspect.signature(cls.__init__).parameters
    kwargs = {k: v for k, v in SMALL.items() if k in params}
    kwargs.update(OVERRIDES.get(cls.__name__, {}))
    return kwargs


def _is_text(model):
    names = [getattr(t, "name", "") for t in model.inputs]
    return any(n in TEXT_KEYS for n in names) and all(len(t.shape) == 2 for t in model.inputs)


def _feeds(model, length, rng):
    """Inputs of one batch of 2 at `length`: ids below the vocabulary, masks of ones."""
    out = {}
    for t in model.inputs:
        name, dtype = t.name, np.dtype(t.dtype)
        if "mask" in name:
            out[name] = np.ones((2, length), dtype)
        elif "segment" in name or "type" in name:
            out[name] = np.zeros((2, length), dtype)
        else:
            out[name] = rng.integers(1, 60, (2, length)).astype(dtype)
    return out


def _keras_semantics(model, path):
    """Keras's own ONNX export on JAX, with jaxonnx as the converter: every None dim
    its own symbol, nothing bounded, nothing shared."""
    import jax
    import keras

    import jaxonnx
    from jaxonnx import keras as jk
    signature = jk._model_signature(keras, model)
    flat = keras.tree.flatten(signature)
    specs = [jax.ShapeDtypeStruct(tuple("batch" if a == 0 and d is None else
                                        f"dim_{i}_{a}" if d is None else d
                                        for a, d in enumerate(s.shape)), np.dtype(s.dtype))
             for i, s in enumerate(flat)]

    def fn(*args):
        packed = keras.tree.pack_sequence_as(signature, list(args))
        return model(*packed, training=False)
    with jk._raw_tracebacks(keras):  # JAX's own message, not Keras's wrapper of it
        jaxonnx.to_onnx(fn, specs, input_names=[s.name or f"input_{i}" for i, s in enumerate(flat)],
                        return_mode="file", output_path=path)


def _category(message):
    for key, pattern in (("inconclusive comparison", "InconclusiveDimension|inconclusive"),
                         ("incompatible symbolic shapes", "ncompatible shapes|must have the same"),
                         ("size as an array", "concrete values|static integers|Shapes must be"),
                         ("unsupported primitive", "no plugin|not supported|unsupported")):
        if re.search(pattern, message):
            return key
    return "other"


def _try(model, export, rng):
    import onnxruntime as ort
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        try:
            export(model, path)
        except Exception as e:  # noqa: BLE001 - every failure is a result here
            text = f"{type(e).__name__}: {e}"
            return {"status": "export error", "category": _category(text),
                    "error": text.splitlines()[0][:300]}
        try:
            session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            worst = 0.0
            for length in (7, 16):
                feeds = _feeds(model, length, rng)
                want = [np.asarray(v) for v in
                        __import__("jax").tree_util.tree_leaves(model.predict(feeds, verbose=0))]
                names = [i.name for i in session.get_inputs()]
                got = session.run(None, {n: feeds[n] for n in names})
                for g, w in zip(got, want):
                    if g.shape != w.shape:
                        return {"status": "mismatch", "error": f"shape {g.shape} vs {w.shape}"}
                    worst = max(worst, float(np.max(np.abs(g - w)) / (1 + np.max(np.abs(w)))))
        except Exception as e:  # noqa: BLE001
            return {"status": "onnxruntime error", "error": f"{type(e).__name__}: {e}"[:300]}
        if worst > 1e-3:
            return {"status": "mismatch", "error": f"relative error {worst:.2e}"}
        return {"status": "ok", "error": f"{worst:.1e}"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated backbone name prefixes")
    parser.add_argument("--json", default="", help="write the results there too")
    args = parser.parse_args(argv)

    here = os.path.dirname(os.path.abspath(__file__))  # this file is keras_hub.py too
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    import keras_hub

    import jaxonnx.keras
    names = sorted(n for n in dir(keras_hub.models) if n.endswith("Backbone") and n != "Backbone")
    if args.only:
        names = [n for n in names if any(n.startswith(p) for p in args.only.split(","))]
    rng = np.random.default_rng(0)
    results = {}
    for name in names:
        cls = getattr(keras_hub.models, name)
        start = time.time()
        try:
            model = cls(**_config(cls))
        except Exception as e:  # noqa: BLE001 - not a text backbone, or one we cannot size
            results[name] = {"built": False, "error": f"{type(e).__name__}: {e}".splitlines()[0][:200]}
            print(f"{name}: not built ({results[name]['error'][:100]})", flush=True)
            continue
        if not _is_text(model):
            results[name] = {"built": True, "text": False}
            continue
        row = {"built": True, "text": True}
        row["keras"] = _try(model, _keras_semantics, rng)
        row["jaxonnx"] = _try(model, jaxonnx.keras.export, rng)
        row["seconds"] = round(time.time() - start, 1)
        results[name] = row
        print(f"{name}: keras {row['keras']['status']}, jaxonnx {row['jaxonnx']['status']} "
              f"{row['jaxonnx'].get('error', '')[:160]}", flush=True)
    text = {n: r for n, r in results.items() if r.get("text")}
    print(f"\n{len(text)} text backbones built of {len(names)} backbones tried")
    print("| backbone | Keras's semantics | jaxonnx.keras.export |\n| --- | --- | --- |")
    for n, r in text.items():
        def cell(x):
            return x["status"] + (f" ({x['category']})" if "category" in x else "")
        print(f"| {n} | {cell(r['keras'])} | {cell(r['jaxonnx'])} |")
    for side in ("keras", "jaxonnx"):
        ok = sum(r[side]["status"] == "ok" for r in text.values())
        print(f"{side}: {ok} of {len(text)} export with a symbolic sequence length and match Keras")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        traceback.print_exc()
        sys.exit(1)
