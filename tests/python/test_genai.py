"""jaxonnx.genai.export (python/jaxonnx/genai.py): JAX decoder steps exported
as onnxruntime-genai model folders generate, in onnxruntime-genai 0.18, the
tokens JAX's own greedy loop generates, with the logits agreeing at every step
(tests/python/llm_models.py holds the models and the loop)."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest

import jaxonnx
from jaxonnx import genai
from jaxonnx.__main__ import main
from helpers import check

og = pytest.importorskip("onnxruntime_genai")

import llm_models as lm  # noqa: E402

NEW_TOKENS = 64
PROMPTS = {1: [[5, 17, 33, 8, 9, 60, 12]], 2: [[5, 17, 33, 8, 9, 60, 12], [44, 3, 71]]}


def generate(folder, prompts, pad, new_tokens):
    """genai's greedy tokens [B, new_tokens] and the logits it sampled from
    [new_tokens, B, vocab]."""
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    width = max(len(p) for p in prompts)
    params.set_search_options(max_length=width + new_tokens, batch_size=len(prompts))
    gen = og.Generator(model, params)
    gen.append_tokens(lm.pad_prompts(prompts, pad))
    logits = []
    while not gen.is_done():
        logits.append(gen.get_logits()[:, 0].copy())
        gen.generate_next_token()
    tokens = np.stack([gen.get_sequence(i)[width:] for i in range(len(prompts))])
    return tokens, np.stack(logits)


def probe_steps(folder, columns):
    """A probe model's report at each step of genai's generation from two prompts, the
    second padded (max_length 7): the first `columns` logits of each row, and the
    generator."""
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=7, batch_size=2)
    gen = og.Generator(model, params)
    gen.append_tokens(np.array([[5, 6, 7, 8], [9, 10, 0, 0]], np.int32))
    seen = []
    while not gen.is_done():
        seen.append(gen.get_logits()[:, 0, :columns].copy())
        gen.generate_next_token()
    return seen, gen


def unused_token(spec, tokens, prompts):
    """An eos id the greedy run never produces, so both runs go the full length."""
    used = set(np.unique(tokens).tolist()) | {t for p in prompts for t in p} | {spec.pad}
    return next(t for t in range(2, spec.vocab) if t not in used)


# batch 1 for one model, batch 2 (prompts of different lengths) for each; the
# contrib target for both forms of attention (einsum/softmax, and
# jax.nn.dot_product_attention), whose attention over the cache becomes
# GroupQueryAttention and the cache one shared buffer.
CASES = [("llama", 1, "onnxruntime"), ("llama", 2, "onnxruntime"), ("qwen3", 2, "onnxruntime"),
         ("gemma", 2, "onnxruntime"), ("moe", 2, "onnxruntime"), ("llama_sdpa", 2, "onnxruntime"),
         ("llama", 1, "onnxruntime-contrib"), ("llama", 2, "onnxruntime-contrib"),
         ("qwen3", 2, "onnxruntime-contrib"), ("gemma", 2, "onnxruntime-contrib"),
         ("moe", 2, "onnxruntime-contrib"), ("llama_sdpa", 1, "onnxruntime-contrib"),
         ("llama_sdpa", 2, "onnxruntime-contrib"), ("llama16", 1, "onnxruntime-contrib"),
         ("llama16", 2, "onnxruntime-contrib")]
# The Llama with heads of 16: GroupQueryAttention applies the rotary itself
# (do_rotary) only for head sizes in multiples of 16 (onnxruntime's kernel).
MODELS = {**lm.MODELS, "llama16": lm.Spec("llama16", head_dim=16)}
# Under the contrib target: the layers whose attention becomes GroupQueryAttention
# (Gemma's sliding-window layer too, with local_window_size), and those of them
# with the rotary inside.
GQA_LAYERS = {"llama": 2, "qwen3": 3, "gemma": 2, "moe": 2, "llama_sdpa": 2, "llama16": 2}
ROTARY_LAYERS = {"gemma": 2, "llama16": 2}


def op_count(model, op, domain=""):
    return sum(n.op_type == op and n.domain == domain for n in model.graph.node)


def rotary_count(model):
    """GroupQueryAttention nodes that apply the rotary themselves."""
    return sum(n.op_type == "GroupQueryAttention" and any(a.name == "do_rotary" and a.i == 1 for a in n.attribute)
               for n in model.graph.node)


@pytest.mark.parametrize("name,batch,target", CASES, ids=[f"{n}-b{b}-{t}" for n, b, t in CASES])
def test_generate_matches_jax(tmp_path, name, batch, target):
    spec = MODELS[name]
    step = lm.decoder_step(spec, lm.init(spec))
    prompts = PROMPTS[batch]
    want_tokens, want_logits = lm.greedy(step, spec, prompts, NEW_TOKENS)
    genai.export(step, spec.config(unused_token(spec, want_tokens, prompts)), tmp_path, target=target)
    model = onnx.load(tmp_path / "model.onnx")
    gqa = op_count(model, "GroupQueryAttention", "com.microsoft")
    assert gqa == (GQA_LAYERS[name] if target == "onnxruntime-contrib" else 0)
    assert rotary_count(model) == (ROTARY_LAYERS.get(name, 0) if target == "onnxruntime-contrib" else 0)
    # The cache is one buffer updated in place when every layer's attention is GQA.
    config = json.loads((tmp_path / "genai_config.json").read_text())
    assert config["search"]["past_present_share_buffer"] is (gqa == spec.layers)
    if gqa:
        onnx.checker.check_model(model, full_check=True)
    tokens, logits = generate(tmp_path, prompts, spec.pad, NEW_TOKENS)
    assert tokens.shape == (batch, NEW_TOKENS)
    np.testing.assert_array_equal(tokens, want_tokens)
    np.testing.assert_allclose(logits, want_logits, rtol=1e-4, atol=1e-4)
    # The greedy margins are far above the logits' error, so equal tokens are not luck.
    top2 = np.sort(want_logits, axis=-1)[..., -2:]
    assert (top2[..., 1] - top2[..., 0]).min() > 10 * np.abs(logits - want_logits).max()


VISIBLE = lm.visible  # the test models' mask, which the near misses below replace


def off_by_one(attention_mask, position_ids, window):
    """The causal condition one slot late: each token also sees the next one."""
    s, t = position_ids.shape[1], attention_mask.shape[1]
    slot_q = jnp.arange(s)[:, None] + (t - s) + 1
    return (jnp.arange(t)[None, :] <= slot_q)[None] & (attention_mask[:, None, :] == 1)


def no_padding(attention_mask, position_ids, window):
    """Causal only: padding slots stay visible."""
    s, t = position_ids.shape[1], attention_mask.shape[1]
    slot_q = jnp.arange(s)[:, None] + (t - s)
    return jnp.broadcast_to((jnp.arange(t)[None, :] <= slot_q)[None], (attention_mask.shape[0], s, t))


def strict(attention_mask, position_ids, window):
    """Causal with < for <=: a token does not see itself."""
    s, t = position_ids.shape[1], attention_mask.shape[1]
    slot_q = jnp.arange(s)[:, None] + (t - s)
    return (jnp.arange(t)[None, :] < slot_q)[None] & (attention_mask[:, None, :] == 1)


def window_in_slots(attention_mask, position_ids, window):
    """A sliding window counted in cache slots, not positions."""
    s, t = position_ids.shape[1], attention_mask.shape[1]
    slot_q = jnp.arange(s)[:, None] + (t - s)
    ok = VISIBLE(attention_mask, position_ids, None)
    return ok & ((slot_q - jnp.arange(t)[None, :]) < 4)[None]


def window_reversed(attention_mask, position_ids, window):
    """A "window" of keys ahead of the query (key position - query position < 4)."""
    key_pos = jnp.cumsum(attention_mask, axis=1) - 1
    return VISIBLE(attention_mask, position_ids, None) & (
        key_pos[:, None, :] - position_ids[:, :, None] < 4)


def group_major_attention(spec, layer, p, h, attention_mask, position_ids, past):
    """llm_models.attention with q's heads split group-major (q head h uses kv
    head h % kv_heads, not GroupQueryAttention's h // group); with 2 kv heads of
    groups of 2 the shapes are those of the kv-major split."""
    b, s, _ = h.shape
    kv, hd, group = spec.kv_heads, spec.head_dim, spec.heads // spec.kv_heads
    q = lm.rope((h @ p["wq"]).reshape(b, s, spec.heads, hd), position_ids, spec.rope_base)
    k = lm.rope((h @ p["wk"]).reshape(b, s, kv, hd), position_ids, spec.rope_base)
    v = (h @ p["wv"]).reshape(b, s, kv, hd)
    keys = jnp.concatenate([past[0], k.transpose(0, 2, 1, 3)], axis=2)
    values = jnp.concatenate([past[1], v.transpose(0, 2, 1, 3)], axis=2)
    ok = VISIBLE(attention_mask, position_ids, None)
    scores = jnp.einsum("bsgkd,bktd->bkgst", q.reshape(b, s, group, kv, hd), keys) / np.float32(np.sqrt(hd))
    scores = jnp.where(ok[:, None, None], scores, jnp.finfo(jnp.float32).min)
    out = jnp.einsum("bkgst,bktd->bsgkd", jax.nn.softmax(scores, axis=-1), values)
    return out.reshape(b, s, spec.heads * hd) @ p["wo"], (keys, values)


NEAR_MISSES = [off_by_one, no_padding, strict, window_in_slots, window_reversed, "other_present"]


@pytest.mark.parametrize("name,visible", [("llama", v) for v in NEAR_MISSES + ["group_major"]]
                         + [("llama_sdpa", v) for v in NEAR_MISSES],
                         ids=lambda x: getattr(x, "__name__", x))
def test_near_misses_stay_standard(tmp_path, monkeypatch, name, visible):
    """Attention GroupQueryAttention does not compute keeps its standard ops
    under the contrib target, and genai grows the cache (einsum attention, and
    jax.nn.dot_product_attention, whose masked attention over a cache
    nn_attention lowers to the standard form cache_attention reads)."""
    spec = lm.MODELS[name]
    step = lm.decoder_step(spec, lm.init(spec))
    if visible == "other_present":  # the cache returned is not the keys attended to
        inner = step

        def step(input_ids, attention_mask, position_ids, past):
            logits, present = inner(input_ids, attention_mask, position_ids, past)
            return logits, [(k * 2.0, v) for k, v in present]
    elif visible == "group_major":
        monkeypatch.setattr(lm, "attention", group_major_attention)
    else:
        monkeypatch.setattr(lm, "visible", visible)
    genai.export(step, spec.config(2), tmp_path, target="onnxruntime-contrib")
    model = onnx.load(tmp_path / "model.onnx")
    assert op_count(model, "GroupQueryAttention", "com.microsoft") == 0
    assert op_count(model, "Softmax") == spec.layers
    config = json.loads((tmp_path / "genai_config.json").read_text())
    assert config["search"]["past_present_share_buffer"] is False


def test_dot_product_attention_keys_not_returned():
    """Masked jax.nn.dot_product_attention over Concat(past, new) keys (P + S
    of them for S queries) that the program does not return: under the contrib
    target nn_attention lowers it to the standard form cache_attention reads,
    the rule does not fire (no cache to share), and the model agrees with JAX."""
    def f(q, past_k, new_k, past_v, new_v, mask):
        k, v = jnp.concatenate([past_k, new_k], axis=1), jnp.concatenate([past_v, new_v], axis=1)
        return jax.nn.dot_product_attention(q, k, v, mask=mask)

    def inputs(shape, dtype, rng):
        if dtype == np.bool_:
            return rng.random(shape) < 0.7
        return rng.standard_normal(shape).astype(dtype)

    past, new = ("B", "P", 2, 8), ("B", "S", 2, 8)
    sizes = [{"B": 1, "S": 3, "P": 2, "P + S": 5}, {"B": 2, "S": 1, "P": 3, "P + S": 4}]
    model = check(f, [("B", "S", 4, 8), past, new, past, new, ("B", 1, "S", "P + S")],
                  [np.float32] * 5 + [np.bool_], make_inputs=inputs, batches=sizes,
                  target="onnxruntime-contrib")
    assert op_count(model, "GroupQueryAttention", "com.microsoft") == 0
    assert op_count(model, "Softmax") == 1


def interleaved_rope(x, positions, base):
    """The rotary on pairs of neighbours (GPT-J's layout), not halves."""
    half = x.shape[-1] // 2
    freqs = 1.0 / base ** (jnp.arange(half, dtype=jnp.float32) * 2 / x.shape[-1])
    angles = positions.astype(jnp.float32)[:, :, None, None] * freqs
    cos, sin = jnp.cos(angles), jnp.sin(angles)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return jnp.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1).reshape(x.shape)


def shifted_rope(x, positions, base):
    """Positions one on from position_ids (not what GroupQueryAttention derives)."""
    return LM_ROPE(x, positions + 1, base)


def sign_swapped_rope(x, positions, base):
    """The rotation the other way round: x1 * cos + x2 * sin, x2 * cos - x1 * sin."""
    half = x.shape[-1] // 2
    freqs = 1.0 / base ** (jnp.arange(half, dtype=jnp.float32) * 2 / x.shape[-1])
    angles = positions.astype(jnp.float32)[:, :, None, None] * freqs
    cos, sin = jnp.cos(angles), jnp.sin(angles)
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos + x2 * sin, x2 * cos - x1 * sin], axis=-1)


def partial_rope(x, positions, base):
    """The rotary on the first half of each head only (rotary_dim < head size)."""
    half = x.shape[-1] // 2
    return jnp.concatenate([LM_ROPE(x[..., :half], positions, base), x[..., half:]], axis=-1)


def keys_other_base(x, positions, base):
    """The keys (2 heads; q has 4) rotated with another base than q: other tables."""
    return LM_ROPE(x, positions, base * 2 if x.shape[2] == 2 else base)


LM_ROPE = lm.rope


@pytest.mark.parametrize("rope", [interleaved_rope, shifted_rope, sign_swapped_rope, partial_rope,
                                  keys_other_base])
def test_rotary_near_misses_stay_outside(monkeypatch, rope):
    """A rotary GroupQueryAttention's do_rotary does not compute keeps the
    program's ops before the op (which the attention still becomes)."""
    monkeypatch.setattr(lm, "rope", rope)
    spec = MODELS["llama16"]
    step = lm.decoder_step(spec, lm.init(spec))
    model = contrib_model(step, spec, target="onnxruntime-contrib")
    assert op_count(model, "GroupQueryAttention", "com.microsoft") == spec.layers
    assert rotary_count(model) == 0


def test_window_spellings(monkeypatch):
    """A window written with <= is the window one larger: local_window_size counts
    the keys a query sees, its own included."""
    def inclusive(attention_mask, position_ids, window):
        key_pos = jnp.cumsum(attention_mask, axis=1) - 1
        return VISIBLE(attention_mask, position_ids, None) & (
            position_ids[:, :, None] - key_pos[:, None, :] <= 4)

    monkeypatch.setattr(lm, "visible", inclusive)
    spec = lm.LLAMA
    step = lm.decoder_step(spec, lm.init(spec))
    model = contrib_model(step, spec, target="onnxruntime-contrib")
    windows = [a.i for n in model.graph.node if n.op_type == "GroupQueryAttention"
               for a in n.attribute if a.name == "local_window_size"]
    assert windows == [5] * spec.layers


def contrib_model(step, spec, **kw):
    specs, names, outs, _ = genai._specs(genai.check_config(spec.config(2)), np.dtype(np.float32))
    flat = genai._flat(step, spec.layers, "BKLH")
    return jaxonnx.to_onnx(flat, specs, input_names=names, output_names=outs, **kw)


def test_to_onnx_contrib_alone_makes_gqa():
    """The rewrite belongs to to_onnx's contrib target, not to genai.export."""
    spec = lm.LLAMA
    step = lm.decoder_step(spec, lm.init(spec))
    model = contrib_model(step, spec, target="onnxruntime-contrib")
    assert op_count(model, "GroupQueryAttention", "com.microsoft") == spec.layers
    assert genai._shares_buffer(model, spec.layers)
    assert op_count(contrib_model(step, spec), "GroupQueryAttention", "com.microsoft") == 0


def test_folder_is_what_genai_reads(tmp_path):
    spec = lm.LLAMA
    genai.export(lm.decoder_step(spec, lm.init(spec)), spec.config(eos=[2, 3]), tmp_path)
    model = onnx.load(tmp_path / "model.onnx")
    onnx.checker.check_model(model, full_check=True)
    names = lambda vs: [v.name for v in vs]  # noqa: E731
    assert names(model.graph.input) == ["input_ids", "attention_mask", "position_ids"] + [
        f"past_key_values.{i}.{w}" for i in range(spec.layers) for w in ("key", "value")]
    assert names(model.graph.output) == ["logits"] + [
        f"present.{i}.{w}" for i in range(spec.layers) for w in ("key", "value")]
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in list(model.graph.input) + list(model.graph.output)}
    assert dims["input_ids"] == ["batch_size", "sequence_length"]
    assert dims["past_key_values.1.value"] == ["batch_size", spec.kv_heads, "past_sequence_length",
                                               spec.head_dim]
    assert dims["logits"] == ["batch_size", "sequence_length", spec.vocab]
    config = json.loads((tmp_path / "genai_config.json").read_text())
    m = config["model"]
    assert m["type"] == "decoder" and m["eos_token_id"] == [2, 3]
    assert m["decoder"]["filename"] == "model.onnx"
    assert m["decoder"]["num_key_value_heads"] == spec.kv_heads
    # onnxruntime picks the threads (one per physical core), not genai's half of the
    # hardware threads.
    assert m["decoder"]["session_options"] == {"intra_op_num_threads": 0, "log_id": "onnxruntime-genai",
                                               "provider_options": []}
    assert config["search"]["max_length"] == spec.context
    assert config["search"]["past_present_share_buffer"] is False
    # Deterministic: the same step exports to the same bytes.
    genai.export(lm.decoder_step(spec, lm.init(spec)), spec.config(eos=[2, 3]), tmp_path / "again")
    assert (tmp_path / "again" / "model.onnx").read_bytes() == (tmp_path / "model.onnx").read_bytes()


def test_nnx_module_example(tmp_path, monkeypatch):
    """examples/genai_llm.py's flax nnx Decoder, exported as the module itself,
    at batch 2 with padding."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "examples"))
    import genai_llm as ex
    from flax import nnx

    model = ex.Decoder(rngs=nnx.Rngs(0))
    spec = lm.Spec("nnx", vocab=ex.VOCAB, layers=ex.LAYERS, kv_heads=ex.KV_HEADS, head_dim=ex.HEAD)
    prompts = [[1, 17, 42, 99, 7], [1, 5]]
    want, _ = lm.greedy(model, spec, prompts, 16)
    genai.export(model, {**ex.CONFIG, "eos_token_id": unused_token(spec, want, prompts)}, tmp_path)
    tokens, _ = generate(tmp_path, prompts, spec.pad, 16)
    np.testing.assert_array_equal(tokens, want)


def probe_step(vocab):
    """A step whose logits show what genai feeds it: per token, its position,
    the mask's sum and width, its id and the past length (logits 0-4), and a
    large logit at token 20 so that greedy picks 20."""
    def step(input_ids, attention_mask, position_ids, past):
        b, s = input_ids.shape
        t = attention_mask.shape[1]
        f32 = lambda x: jnp.broadcast_to(x, (b, s)).astype(jnp.float32)  # noqa: E731
        seen = jnp.stack([f32(position_ids), f32(attention_mask.sum(1, keepdims=True)), f32(t),
                          f32(input_ids), f32(t - s)], axis=-1)
        logits = jnp.concatenate([seen, jnp.zeros((b, s, vocab - 5), jnp.float32)], axis=-1)
        logits = logits.at[:, :, 20].set(1000.0)
        new = jnp.zeros((b, 1, s, 4), jnp.float32)
        return logits, [(jnp.concatenate([k, new], 2), jnp.concatenate([v, new], 2)) for k, v in past]
    return step


def test_genai_conventions(tmp_path):
    """What lm.greedy assumes of genai: trailing pad ids get mask 0; the first
    token comes from each row's last real token; positions are cumsum(mask) - 1;
    each step appends 1 to the mask."""
    config = dict(num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1, head_size=4,
                  hidden_size=4, vocab_size=32, context_length=16, bos_token_id=1,
                  eos_token_id=2, pad_token_id=0)
    genai.export(probe_step(32), config, tmp_path)
    seen, gen = probe_steps(tmp_path, 5)
    # (position, mask sum, mask width, id, past length) of the token sampled from
    np.testing.assert_array_equal(seen[0], [[3, 4, 4, 8, 0], [1, 2, 4, 10, 0]])
    np.testing.assert_array_equal(seen[1], [[4, 5, 5, 20, 4], [2, 3, 5, 20, 4]])
    np.testing.assert_array_equal(seen[2], [[5, 6, 6, 20, 5], [3, 4, 6, 20, 5]])
    np.testing.assert_array_equal(gen.get_sequence(1), [9, 10, 0, 0, 20, 20, 20])


def test_genai_shared_buffer_conventions(tmp_path):
    """What cache_attention's GroupQueryAttention inputs assume of genai with
    past_present_share_buffer on: the mask is as wide as the tokens so far (not
    the buffer's max_length), keeps the prompt's padding zeros and appends a 1
    per step, and positions are cumsum(mask) - 1. A hand-built probe (genai.export
    makes no such graph): its logits show (position, mask sum, mask width, id)."""
    from onnx import TensorProto as T
    from onnx import helper as h

    hd, vocab = 8, 32
    info = h.make_tensor_value_info
    past = [info(f"past_key_values.0.{w}", T.FLOAT, ["B", 1, "P", hd]) for w in ("key", "value")]
    ins = [info("input_ids", T.INT32, ["B", "S"]), info("attention_mask", T.INT32, ["B", "T"]),
           info("position_ids", T.INT32, ["B", "S"])] + past
    outs = [info("logits", T.FLOAT, ["B", "S", vocab])] + [
        info(f"present.0.{w}", T.FLOAT, ["B", 1, "T", hd]) for w in ("key", "value")]
    i64 = lambda name, v: h.make_tensor(name, T.INT64, [len(v)], v)  # noqa: E731
    node = h.make_node
    nodes = [
        node("Cast", ["input_ids"], ["idf"], to=T.FLOAT),
        node("Unsqueeze", ["idf", "ax2"], ["id3"]),
        node("Expand", ["id3", "qshape"], ["q"]),
        node("ReduceSum", ["attention_mask", "ax1"], ["msum"], keepdims=0),
        node("Sub", ["msum", "one"], ["seqlens"]),
        node("Shape", ["attention_mask"], ["width"], start=1, end=2),
        node("Squeeze", ["width"], ["w0"]),
        node("Cast", ["w0"], ["total"], to=T.INT32),
        node("GroupQueryAttention", ["q", "q", "q", "past_key_values.0.key", "past_key_values.0.value",
                                     "seqlens", "total"], ["o", "present.0.key", "present.0.value"],
             domain="com.microsoft", num_heads=1, kv_num_heads=1),
        node("Cast", ["position_ids"], ["pos"], to=T.FLOAT),
        node("Mul", ["pos", "zero"], ["zeros"]),
        node("Cast", ["msum"], ["msf"], to=T.FLOAT),
        node("Unsqueeze", ["msf", "ax1"], ["ms2"]),
        node("Add", ["zeros", "ms2"], ["f1"]),
        node("Cast", ["width"], ["wf"], to=T.FLOAT),
        node("Add", ["zeros", "wf"], ["f2"]),
        *[node("Unsqueeze", [x, "ax2"], [x + "3"]) for x in ("pos", "f1", "f2", "idf")],
        node("Concat", ["pos3", "f13", "f23", "idf3"], ["seen"], axis=2),
        node("Pad", ["seen", "pads", "zero"], ["padded"]),
        node("Add", ["padded", "pick20"], ["logits"]),
    ]
    inits = [i64("ax1", [1]), i64("ax2", [2]), i64("qshape", [1, 1, hd]), i64("pads", [0, 0, 0, 0, 0, vocab - 4]),
             h.make_tensor("one", T.INT32, [], [1]), h.make_tensor("zero", T.FLOAT, [], [0.0]),
             h.make_tensor("pick20", T.FLOAT, [vocab], [1000.0 if i == 20 else 0.0 for i in range(vocab)])]
    model = h.make_model(h.make_graph(nodes, "probe", ins, outs, inits), ir_version=10,
                         opset_imports=[h.make_opsetid("", 21), h.make_opsetid("com.microsoft", 1)])
    onnx.save(model, tmp_path / "model.onnx")
    config = genai.genai_config(genai.check_config({**TINY, "head_size": hd, "hidden_size": hd,
                                                    "num_attention_heads": 1, "vocab_size": vocab}),
                                "model.onnx", True)
    (tmp_path / "genai_config.json").write_text(json.dumps(config))
    seen, gen = probe_steps(tmp_path, 4)
    # (position, mask sum, mask width, id) of the token sampled from
    np.testing.assert_array_equal(seen[0], [[3, 4, 4, 8], [1, 2, 4, 10]])
    np.testing.assert_array_equal(seen[1], [[4, 5, 5, 20], [2, 3, 5, 20]])
    np.testing.assert_array_equal(seen[2], [[5, 6, 6, 20], [3, 4, 6, 20]])


def test_cache_layout_blkh(tmp_path):
    """A step whose cache is [B, L, kv_heads, head_size]: the graph transposes."""
    spec = lm.LLAMA
    inner = lm.decoder_step(spec, lm.init(spec))
    t = lambda a: a.transpose(0, 2, 1, 3)  # noqa: E731

    def step(input_ids, attention_mask, position_ids, past):
        logits, present = inner(input_ids, attention_mask, position_ids,
                                [(t(k), t(v)) for k, v in past])
        return logits, [(t(k), t(v)) for k, v in present]

    prompts = PROMPTS[2]
    want, _ = lm.greedy(inner, spec, prompts, 8)
    with pytest.raises(jaxonnx.ConversionError, match='cache_layout="BLKH"'):
        genai.export(step, spec.config(2), tmp_path / "wrong")
    genai.export(step, spec.config(unused_token(spec, want, prompts)), tmp_path, cache_layout="BLKH")
    tokens, _ = generate(tmp_path, prompts, spec.pad, 8)
    np.testing.assert_array_equal(tokens, want)


def test_float16_cache(tmp_path):
    """kv_dtype=float16: genai allocates a float16 cache the step reads and writes."""
    spec = lm.LLAMA
    inner = lm.decoder_step(spec, lm.init(spec))

    def step(input_ids, attention_mask, position_ids, past):
        logits, present = inner(input_ids, attention_mask, position_ids,
                                [(k.astype(jnp.float32), v.astype(jnp.float32)) for k, v in past])
        return logits, [(k.astype(jnp.float16), v.astype(jnp.float16)) for k, v in present]

    prompts = PROMPTS[2]
    want, want_logits = lm.greedy(inner, spec, prompts, 16)
    genai.export(step, spec.config(unused_token(spec, want, prompts)), tmp_path, kv_dtype=np.float16)
    model = onnx.load(tmp_path / "model.onnx")
    assert model.graph.input[3].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    tokens, logits = generate(tmp_path, prompts, spec.pad, 16)
    np.testing.assert_array_equal(tokens, want)
    # float16 rounding of the cached keys and values, against the float32 loop
    np.testing.assert_allclose(logits, want_logits, atol=1e-2)


def fixed_cache_step(input_ids, attention_mask, position_ids, past):
    """Writes into a cache of a fixed size (examples/decode.py's way), which
    genai's growing cache cannot take."""
    b, s = input_ids.shape
    logits = jnp.zeros((b, s, 32), jnp.float32)
    return logits, [(k.at[:, :, :s].set(1.0), v) for k, v in past]


TINY = dict(num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, head_size=4,
            hidden_size=8, vocab_size=32, context_length=16, bos_token_id=1, eos_token_id=2,
            pad_token_id=0)


@pytest.mark.parametrize("step,config,message", [
    (fixed_cache_step, TINY, r"present\[0\]\[0\] \(key\) must be \[batch_size, 1, "
                             r"sequence_length \+ past_sequence_length, 4\].*"
                             r"\(step at .*test_genai.py:\d+\).*does not grow"),
    (fixed_cache_step, {**TINY, "num_key_value_heads": 3}, "multiple of num_key_value_heads"),
    (fixed_cache_step, {k: v for k, v in TINY.items() if k != "vocab_size"},
     r"config lacks \['vocab_size'\]"),
    (fixed_cache_step, {**TINY, "heads": 2}, r"unknown keys \['heads'\]"),
    (fixed_cache_step, {**TINY, "type": "llama4"}, "genai's decoder types"),
    (fixed_cache_step, {**TINY, "search": {"max_length": 99}}, "exceeds context_length"),
    (fixed_cache_step, {**TINY, "session_options": 4}, r"session_options'\] must be a dict"),
    (fixed_cache_step, {**TINY, "session_options": {"provider_options": [{"cuda": {}}]}},
     "cannot set provider_options"),
    (lambda ids, mask: None, TINY, "four positional arguments"),
    (lambda ids, mask, pos, past: jnp.zeros((1, 1, 32)), TINY, r"must return \(logits, present\)"),
    (lambda ids, mask, pos, past: (jnp.zeros(ids.shape + (31,)), past), TINY,
     r"logits must be \[batch_size, sequence_length, vocab_size=32\]"),
])
def test_errors(tmp_path, step, config, message):
    with pytest.raises(jaxonnx.ConversionError, match=message):
        genai.export(step, config, tmp_path)
    assert not (tmp_path / "genai_config.json").exists()


FACTORY = """
import llm_models as lm

def make():
    spec = lm.MODELS["moe"]
    return lm.decoder_step(spec, lm.init(spec)), spec.config(eos=2)
"""


def test_cli(tmp_path, monkeypatch, capsys):
    (tmp_path / "cli_llm.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["genai", "cli_llm:make", "-o", "out"]) == 0
    config = json.loads((tmp_path / "out" / "genai_config.json").read_text())
    assert config["model"]["eos_token_id"] == 2
    (tmp_path / "over.json").write_text(json.dumps({"eos_token_id": 7, "session_options": {
        "intra_op_num_threads": 1, "session.intra_op.allow_spinning": "0"}}))
    assert main(["genai", "cli_llm:make", "--config", "over.json", "--external-data", "-o", "out2"]) == 0
    over = json.loads((tmp_path / "out2" / "genai_config.json").read_text())["model"]
    assert over["eos_token_id"] == 7
    assert over["decoder"]["session_options"] == {
        "intra_op_num_threads": 1, "log_id": "onnxruntime-genai", "provider_options": [],
        "session.intra_op.allow_spinning": "0"}
    assert (tmp_path / "out2" / "model.onnx.data").exists()
    og.Model(str(tmp_path / "out2"))  # genai reads the external data beside the model
    capsys.readouterr()
    (tmp_path / "bad.json").write_text(json.dumps({"num_key_value_heads": 3}))
    assert main(["genai", "cli_llm:make", "--config", "bad.json", "-o", "out3"]) == 1
    assert "multiple of num_key_value_heads" in capsys.readouterr().err
