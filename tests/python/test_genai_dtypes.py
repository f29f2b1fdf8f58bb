"""bfloat16 and weight-quantized decoders through jaxonnx.genai.export: the
Llama of tests/python/llm_models.py in bfloat16 (weights, activations, cache
and logits), and with qwix int8 (per channel) and int4 (blocks of 16) weights,
generate in onnxruntime-genai 0.18 what JAX's own greedy loop of the *same*
program generates (the bfloat16 or quantized program, not the float32 one).

How tokens are compared where rounding may flip a greedy choice: at each step
of each row the logits must agree within TOLERANCE; a step whose top-2 margin
in JAX exceeds twice the tolerance must pick the same token (the logits'
error cannot reorder those two); a step with a smaller margin may pick
another token, and the row's comparison ends there (the sequences differ from
then on). Each row must be compared for at least MIN_STEPS steps, so that
the test cannot pass by diverging at once."""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
import onnx
import pytest
import qwix

import jaxonnx
from jaxonnx import genai

og = pytest.importorskip("onnxruntime_genai")

import llm_models as lm  # noqa: E402
from test_genai import PROMPTS, TINY, generate, unused_token  # noqa: E402

NEW_TOKENS = 64
MIN_STEPS = 32
CONTRIB = "onnxruntime-contrib"
INT4_BLOCK = 16


def bf16_ulps(logits, n):
    """n bfloat16 units in the last place of each step's largest |logit|
    ([steps, B, 1]): bfloat16 keeps 8 significant bits."""
    top = np.abs(logits).max(axis=-1, keepdims=True)
    return n * 2.0 ** (np.floor(np.log2(top)) - 7)


# Logit tolerance per kind. bfloat16: onnxruntime widens to float32 the ops
# it has no bfloat16 kernel for and rounds back after each, while XLA keeps
# float32 across fused ops; measured up to 2 ulps of the largest logit (0.125
# at ~12), allowed 4. Quantized: float32 compute over the same dequantized
# weights (MatMulNBits sums in its own order); measured 5e-6.
TOLERANCE = {"bfloat16": lambda want: bf16_ulps(want, 4),
             "int8": lambda want: np.float32(1e-4), "int4": lambda want: np.float32(1e-4)}


@functools.lru_cache(maxsize=None)
def model(kind):
    """(step, spec, kv_dtype, JAX's greedy tokens and logits) for one kind."""
    if kind == "bfloat16":
        spec = lm.LLAMA_BF16
        step = lm.decoder_step(spec, lm.init(spec))
    else:
        spec = lm.LLAMA
        rules = [qwix.QuantizationRule(module_path=".*", weight_qtype=kind,
                                       tile_size=INT4_BLOCK if kind == "int4" else None)]
        empty = np.zeros((1, spec.kv_heads, 0, spec.head_dim), np.float32)
        example = (np.array([[5, 17, 33]], np.int32), np.ones((1, 3), np.int32),
                   np.arange(3, dtype=np.int32)[None], [(empty, empty)] * spec.layers)
        # quantize_model runs the model once on the example: the weights become int8/int4
        step = qwix.quantize_model(lm.Decoder(spec, lm.init(spec)), qwix.PtqProvider(rules), *example)
    tokens, logits = lm.greedy(step, spec, PROMPTS[2], NEW_TOKENS)
    return step, spec, spec.dtype, tokens, logits


def compare(tokens, logits, want_tokens, want_logits, tolerance):
    """The docstring's rule; returns the steps compared per row."""
    top2 = np.sort(want_logits, axis=-1)[..., -2:]
    margin = top2[..., 1] - top2[..., 0]                       # [steps, B]
    tol = np.broadcast_to(tolerance, want_logits.shape[:2] + (1,))[..., 0]
    compared = []
    for row in range(tokens.shape[0]):
        for t in range(tokens.shape[1]):
            err = np.abs(logits[t, row] - want_logits[t, row]).max()
            assert err <= tol[t, row], f"row {row}, step {t}: logits off by {err} > {tol[t, row]}"
            if tokens[row, t] != want_tokens[row, t]:
                assert margin[t, row] <= 2 * tol[t, row], (
                    f"row {row}, step {t}: token {tokens[row, t]} != JAX's {want_tokens[row, t]} "
                    f"with a margin of {margin[t, row]} > 2 x {tol[t, row]}")
                break
        compared.append(t + 1)
    return compared


def initializers(folder):
    m = onnx.load(folder / "model.onnx")
    return m, {t.name: t for t in m.graph.initializer}


CASES = [(kind, target) for kind in ("bfloat16", "int8", "int4") for target in ("onnxruntime", CONTRIB)]


@pytest.mark.parametrize("kind,target", CASES, ids=[f"{k}-{t}" for k, t in CASES])
def test_generate_matches_jax(tmp_path, kind, target):
    step, spec, kv_dtype, want_tokens, want_logits = model(kind)
    genai.export(step, spec.config(unused_token(spec, want_tokens, PROMPTS[2])), tmp_path,
                 target=target, kv_dtype=kv_dtype)
    m, inits = initializers(tmp_path)
    onnx.checker.check_model(m, full_check=True)
    elem = {v.name: v.type.tensor_type.elem_type for v in list(m.graph.input) + list(m.graph.output)}
    matrices = [t for t in inits.values() if len(t.dims) == 2 and min(t.dims) >= spec.width // 2]
    if kind == "bfloat16":
        # The cache and the logits stay bfloat16 (genai takes both), and so
        # do the weights: no float32 copy of any matrix.
        assert elem["past_key_values.0.key"] == elem["present.1.value"] == onnx.TensorProto.BFLOAT16
        assert elem["logits"] == onnx.TensorProto.BFLOAT16
        assert {t.data_type for t in matrices} == {onnx.TensorProto.BFLOAT16}
    else:
        # Every projection (q, k, v, o, gate, up, down) and the LM head keep
        # their integer weights.
        quantized = 7 * spec.layers + 1
        ops = [n.op_type for n in m.graph.node]
        if kind == "int4" and target == CONTRIB:
            assert ops.count("MatMulNBits") == quantized
        else:
            want_type = onnx.TensorProto.INT8 if kind == "int8" else onnx.TensorProto.INT4
            assert sum(t.data_type == want_type for t in inits.values()) == quantized
        assert not [t.name for t in matrices if t.data_type == onnx.TensorProto.FLOAT
                    and tuple(t.dims) != (spec.vocab, spec.width)], "a float copy of a quantized weight"
    tokens, logits = generate(tmp_path, PROMPTS[2], spec.pad, NEW_TOKENS)
    assert min(compare(tokens, logits, want_tokens, want_logits, TOLERANCE[kind](want_logits))) >= MIN_STEPS


def test_weight_bytes(tmp_path):
    """The constants' bytes against the float32 model's: bfloat16 half; int8
    and int4 less than half (the embedding table, gathered, not a dot, stays
    float32: the tiny model's ratios are above the weights' own 1/4 and 1/8).
    (The graph's nodes weigh as much as the tiny model's weights, so the
    files' sizes would say little; benchmarks/genai_decode.py gives a large
    model's.)"""
    def weight_bytes(folder):
        return sum(len(t.raw_data) for t in onnx.load(folder / "model.onnx").graph.initializer)

    spec = lm.LLAMA
    config = spec.config(2)
    genai.export(lm.decoder_step(spec, lm.init(spec)), config, tmp_path / "float32")
    size = {"float32": weight_bytes(tmp_path / "float32")}
    for kind in ("bfloat16", "int8", "int4"):
        step, _, kv_dtype, _, _ = model(kind)
        genai.export(step, config, tmp_path / kind, kv_dtype=kv_dtype)
        size[kind] = weight_bytes(tmp_path / kind)
    assert size["bfloat16"] < 0.51 * size["float32"]
    assert size["int4"] < size["int8"] < 0.45 * size["float32"]


def bf16_cache_step(input_ids, attention_mask, position_ids, past):
    """Appends bfloat16 keys and values whatever the past's dtype."""
    b, s = input_ids.shape
    new = jnp.zeros((b, 1, s, 4), jnp.bfloat16)
    return (jnp.zeros((b, s, 32), jnp.float32),
            [(jnp.concatenate([k.astype(jnp.bfloat16), new], 2),) * 2 for k, _ in past])


def test_kv_dtype_errors(tmp_path):
    """A step returning a bfloat16 cache exported with the default float32
    one: a ConversionError that names kv_dtype; an integer kv_dtype is refused."""
    with pytest.raises(jaxonnx.ConversionError, match=r"present\[0\]\[0\].*kv_dtype='bfloat16'"):
        genai.export(bf16_cache_step, TINY, tmp_path / "a")
    genai.export(bf16_cache_step, TINY, tmp_path / "b", kv_dtype="bfloat16")
    with pytest.raises(jaxonnx.ConversionError, match="kv_dtype must be one of"):
        genai.export(bf16_cache_step, TINY, tmp_path / "c", kv_dtype=np.int8)
