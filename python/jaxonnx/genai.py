"""jaxonnx.genai.export: a JAX decoder step -> an onnxruntime-genai model folder.

    jaxonnx.genai.export(step, config, "out/")   # out/model.onnx, out/genai_config.json
    og.Generator(og.Model("out/"), params)        # generates with no edits

`step(input_ids, attention_mask, position_ids, past) -> (logits, present)` is
one call of a decoder language model over S new tokens, written in ordinary JAX:

    input_ids       int32 [B, S]          the new tokens
    attention_mask  int32 [B, P + S]      1 for a real token, 0 for padding, over
                                          the cached tokens and the new ones
    position_ids    int32 [B, S]          the new tokens' positions (RoPE)
    past            [(key, value)] * num_hidden_layers, each [B, kv_heads, P, head_size]
    logits          [B, S, vocab_size]
    present         the same list at length P + S (the past with the new keys and
                    values appended: jnp.concatenate on axis 2, or
                    dynamic_update_slice into a [B, kv_heads, P + S, head_size] array)

The same graph serves the prompt (P = 0) and every decode step (S = 1): batch,
sequence and past lengths are symbolic. onnxruntime-genai's conventions, which
the step must honour (docs/llm.md): with batch > 1 a shorter prompt is padded at
its end with pad_token_id, which gets mask 0; a real token's position is the
number of real tokens before it (cumsum(mask) - 1); each generated token
appends a 1 to the mask. So the keys a query may see are those with mask 1 at
slots up to its own (slot order is causal order), and the cache holds padding
slots the mask hides.

config holds genai_config.json's model keys (CONFIG_KEYS) and optionally
"type" (genai's model type, default "decoder"), "search" (SEARCH_KEYS:
defaults for og.GeneratorParams) and "session_options" (genai_config.json's
decoder session options, over SESSION_DEFAULTS).
"""

from __future__ import annotations

import inspect
import json
import os

import jax
import numpy as np

from jaxonnx._core import ConversionError

# genai_config.json's model keys the caller gives (the rest are derived).
CONFIG_KEYS = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_size",
               "hidden_size", "vocab_size", "context_length", "bos_token_id", "eos_token_id",
               "pad_token_id")
OPTIONAL_KEYS = ("type", "search", "session_options")
# The decoder's session options written unless config["session_options"] says
# otherwise. intra_op_num_threads 0 hands the thread count to onnxruntime (one per
# physical core): genai's own default, hardware_concurrency() / 2, assumes two
# hardware threads per core and so runs on half the cores of a machine without
# them (on 2 cores: decode 13 ms/token on one thread against 8.4 on two).
SESSION_DEFAULTS = {"log_id": "onnxruntime-genai", "intra_op_num_threads": 0}
# genai's search options (onnxruntime-genai 0.18, config.h) and the defaults written.
SEARCH_DEFAULTS = {"diversity_penalty": 0.0, "do_sample": False, "early_stopping": True,
                   "length_penalty": 1.0, "min_length": 0, "no_repeat_ngram_size": 0,
                   "num_beams": 1, "num_return_sequences": 1, "repetition_penalty": 1.0,
                   "temperature": 1.0, "top_k": 50, "top_p": 1.0}
SEARCH_KEYS = tuple(SEARCH_DEFAULTS) + ("max_length",)
# Decoder-only text types genai 0.18 runs through its plain decoder pipeline (each
# checked to load and generate with a folder export writes).
MODEL_TYPES = ("decoder", "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text",
               "phi", "phi3", "granite", "olmo", "smollm3", "nemotron", "chatglm", "ernie4_5")
CACHE_LAYOUTS = ("BKLH", "BLKH")
# The logits' and the cache's dtypes genai 0.18 takes on CPU (checked: it reads
# bfloat16 logits, converting them to float32 for search, and allocates a
# bfloat16 cache; tests/python/test_genai_dtypes.py).
FLOAT_DTYPES = ("float32", "float16", "bfloat16")
TARGETS = ("onnxruntime", "onnxruntime-contrib")

# The names genai uses when genai_config.json gives none (written anyway, to be explicit).
INPUTS = {"input_ids": "input_ids", "attention_mask": "attention_mask",
          "position_ids": "position_ids", "past_key_names": "past_key_values.%d.key",
          "past_value_names": "past_key_values.%d.value"}
OUTPUTS = {"logits": "logits", "present_key_names": "present.%d.key",
           "present_value_names": "present.%d.value"}

# The symbolic dims of the graph (genai sizes every one at run time).
BATCH, SEQUENCE, PAST = "batch_size", "sequence_length", "past_sequence_length"


def _fail(msg):
    raise ConversionError(f"jaxonnx.genai.export: {msg}")


def _where(fn):
    """' (step at file:line)' for a message, or '' when Python cannot tell."""
    fn = inspect.unwrap(fn)  # through functools.wraps (jax.jit keeps __wrapped__)
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        fn = getattr(fn, "__call__", fn)  # an nnx module or another callable object
    try:
        return f" (step at {inspect.getsourcefile(fn)}:{inspect.getsourcelines(fn)[1]})"
    except (TypeError, OSError):
        return ""


def _int(config, key, minimum):
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        _fail(f"config[{key!r}] must be an int >= {minimum}; got {value!r}")
    return int(value)


def check_config(config):
    """config validated and normalized (ints as ints, search merged over the defaults)."""
    if not isinstance(config, dict):
        _fail(f"config must be a dict of genai_config.json's model keys; got {type(config).__name__}")
    missing = [k for k in CONFIG_KEYS if k not in config]
    if missing:
        _fail(f"config lacks {missing} (it needs {list(CONFIG_KEYS)})")
    unknown = sorted(set(config) - set(CONFIG_KEYS) - set(OPTIONAL_KEYS))
    if unknown:
        _fail(f"config has unknown keys {unknown}: it takes {list(CONFIG_KEYS)} and optionally "
              f"{list(OPTIONAL_KEYS)}")
    out = {k: _int(config, k, 1) for k in CONFIG_KEYS[:7]}
    for k in ("bos_token_id", "pad_token_id"):
        out[k] = _int(config, k, 0)
    eos = config["eos_token_id"]
    eos_list = list(eos) if isinstance(eos, (list, tuple)) else [eos]
    if not eos_list:
        _fail("config['eos_token_id'] is an empty list")
    for e in eos_list:
        _int({"eos_token_id": e}, "eos_token_id", 0)
    out["eos_token_id"] = [int(e) for e in eos_list] if isinstance(eos, (list, tuple)) else int(eos)
    for k in ("bos_token_id", "pad_token_id"):
        if out[k] >= out["vocab_size"]:
            _fail(f"config[{k!r}] = {out[k]} is not below vocab_size {out['vocab_size']}")
    heads, kv = out["num_attention_heads"], out["num_key_value_heads"]
    if heads % kv:
        _fail(f"num_attention_heads ({heads}) must be a multiple of num_key_value_heads ({kv})")
    out["type"] = config.get("type", "decoder")
    if out["type"] not in MODEL_TYPES:
        _fail(f"config['type'] must be one of genai's decoder types {MODEL_TYPES}; "
              f"got {out['type']!r}")
    search = config.get("search") or {}
    if not isinstance(search, dict):
        _fail(f"config['search'] must be a dict; got {type(search).__name__}")
    if bad := sorted(set(search) - set(SEARCH_KEYS)):
        _fail(f"config['search'] has unknown keys {bad}; genai's search options are {list(SEARCH_KEYS)}")
    out["search"] = {**SEARCH_DEFAULTS, "max_length": out["context_length"], **search}
    options = config.get("session_options") or {}
    if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
        _fail("config['session_options'] must be a dict of genai's decoder session options "
              "(e.g. {\"intra_op_num_threads\": 4})")
    if "provider_options" in options:
        _fail("config['session_options'] cannot set provider_options: export targets onnxruntime's "
              "CPU provider")
    out["session_options"] = {**SESSION_DEFAULTS, **options}
    if out["search"]["max_length"] > out["context_length"]:
        _fail(f"search max_length {out['search']['max_length']} exceeds context_length "
              f"{out['context_length']}")
    return out


def _check_signature(step):
    if not callable(step):
        _fail(f"step must be callable; got {type(step).__name__}")
    try:
        sig = inspect.signature(step)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(0, 0, 0, 0)
    except TypeError as e:
        _fail(f"step{sig} must take four positional arguments (input_ids, attention_mask, "
              f"position_ids, past): {e}")


def _specs(cfg, kv_dtype):
    """(input specs, their names, output names) in genai's layout."""
    scope = jax.export.SymbolicScope()
    b, s, p = jax.export.symbolic_shape(f"{BATCH}, {SEQUENCE}, {PAST}", scope=scope)
    kv, hd, n = cfg["num_key_value_heads"], cfg["head_size"], cfg["num_hidden_layers"]
    ids = jax.ShapeDtypeStruct((b, s), np.int32)
    specs = [ids, jax.ShapeDtypeStruct((b, p + s), np.int32), ids]
    specs += [jax.ShapeDtypeStruct((b, kv, p, hd), kv_dtype)] * (2 * n)
    names = ["input_ids", "attention_mask", "position_ids"]
    outs = ["logits"]
    for i in range(n):
        names += [INPUTS["past_key_names"] % i, INPUTS["past_value_names"] % i]
        outs += [OUTPUTS["present_key_names"] % i, OUTPUTS["present_value_names"] % i]
    return specs, names, outs, (b, s, p)


def _flat(step, n, layout):
    """step as a function of flat cache arrays in genai's [B, kv, L, H] layout."""
    to_user = (lambda a: a) if layout == "BKLH" else (lambda a: a.transpose(0, 2, 1, 3))

    def flat(input_ids, attention_mask, position_ids, *cache):
        past = [(to_user(cache[2 * i]), to_user(cache[2 * i + 1])) for i in range(n)]
        out = step(input_ids, attention_mask, position_ids, past)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            _fail(f"step must return (logits, present); it returned {_describe(out)}{_where(step)}")
        logits, present = out
        if not isinstance(present, (tuple, list)) or len(present) != n or not all(
                isinstance(kv, (tuple, list)) and len(kv) == 2 for kv in present):
            _fail(f"step's present must be a list of {n} (key, value) pairs (num_hidden_layers); "
                  f"it returned {_describe(present)}{_where(step)}")
        return (logits, *[to_user(a) for kv in present for a in kv])

    return flat


def _describe(x):
    leaves, tree = jax.tree_util.tree_flatten(x)
    shapes = [getattr(a, "shape", type(a).__name__) for a in leaves[:6]]
    return f"{tree} with leaves {shapes}{' ...' if len(leaves) > 6 else ''}"


def _shape_text(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _check_outputs(step, flat, specs, cfg, dims, layout):
    """Traces flat abstractly and checks logits and present against genai's contract."""
    b, s, p = dims
    where = _where(step)
    try:
        outs = jax.eval_shape(flat, *specs)
    except ConversionError:
        raise
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        _fail(f"step failed on symbolic inputs (input_ids [{BATCH}, {SEQUENCE}], attention_mask "
              f"[{BATCH}, {PAST} + {SEQUENCE}], position_ids [{BATCH}, {SEQUENCE}], past "
              f"{cfg['num_hidden_layers']} x (key, value) in layout {layout}){where}: "
              f"{type(e).__name__}: {first}" + (
                  " (a step whose cache is [B, L, kv_heads, head_size] needs cache_layout=\"BLKH\")"
                  if layout == "BKLH" else ""))
    logits = outs[0]
    want = (b, s, cfg["vocab_size"])
    if tuple(logits.shape) != want:
        _fail(f"logits must be [{BATCH}, {SEQUENCE}, vocab_size={cfg['vocab_size']}]; the step "
              f"returned {_shape_text(logits.shape)}{where}")
    if logits.dtype.name not in FLOAT_DTYPES:
        _fail(f"logits must be one of genai's types {FLOAT_DTYPES}; the step returned "
              f"{logits.dtype}{where}")
    kv, hd = cfg["num_key_value_heads"], cfg["head_size"]
    want = (b, kv, p + s, hd)
    for i, a in enumerate(outs[1:]):
        layer, which = divmod(i, 2)
        shape = tuple(a.shape)
        if shape == want and a.dtype == specs[3].dtype:
            continue
        name = f"present[{layer}][{which}] ({'key' if which == 0 else 'value'})"
        hint = ""
        if len(shape) == 4 and layout == "BKLH" and shape == (b, p + s, kv, hd):
            hint = " It looks like [B, L, kv_heads, head_size]: pass cache_layout=\"BLKH\"."
        elif len(shape) == 4 and shape[2] != p + s:
            hint = (" The cache does not grow: genai passes the past at its length P and expects "
                    "P + S back; return jnp.concatenate([past_key, new_key], axis=2) (not a "
                    "dynamic_update_slice into a fixed-size cache).")
        elif a.dtype != specs[3].dtype:
            hint = f" Cast it, or pass kv_dtype={a.dtype.name!r}."
        _fail(f"{name} must be {_shape_text(want)} {specs[3].dtype} (genai's [B, kv_heads, "
              f"P + S, head_size], after cache_layout {layout}); the step returned "
              f"{_shape_text(shape)} {a.dtype}{where}.{hint}")


def genai_config(cfg, filename, share_buffer):
    """The genai_config.json dict for a validated config."""
    model = {k: cfg[k] for k in ("bos_token_id", "context_length", "eos_token_id", "pad_token_id",
                                 "type", "vocab_size")}
    model["decoder"] = {
        "session_options": dict(sorted({**cfg["session_options"], "provider_options": []}.items())),
        "filename": filename,
        **{k: cfg[k] for k in ("head_size", "hidden_size", "num_attention_heads",
                               "num_hidden_layers", "num_key_value_heads")},
        "inputs": dict(INPUTS), "outputs": dict(OUTPUTS)}
    search = dict(sorted({**cfg["search"], "past_present_share_buffer": share_buffer}.items()))
    return {"model": dict(sorted(model.items())), "search": search}


def _shares_buffer(model, n):
    """True when every layer's past key and value feed only GroupQueryAttention
    nodes and every present is a GroupQueryAttention output: the graph then
    reads and writes one [B, kv, max_length, H] buffer in place."""
    gqa = ("com.microsoft", "GroupQueryAttention")
    past = {INPUTS[f"past_{w}_names"] % i for i in range(n) for w in ("key", "value")}
    present = {OUTPUTS[f"present_{w}_names"] % i for i in range(n) for w in ("key", "value")}
    users = {name: set() for name in past}
    made_by_gqa = set()
    for node in model.graph.node:
        for x in node.input:
            if x in users:
                users[x].add((node.domain, node.op_type))
        if (node.domain, node.op_type) == gqa:
            made_by_gqa.update(node.output)
    return all(u == {gqa} for u in users.values()) and present <= made_by_gqa


def export(step, config, folder, *, target="onnxruntime", cache_layout="BKLH",
           kv_dtype=np.float32, filename="model.onnx", model_name="jax_decoder", opset=None,
           external_data=None, plugin_dirs=None, optimize=True, fusion=None, verify=False):
    """Writes an onnxruntime-genai model folder for the decoder step `step`
    (the module docstring gives its contract): folder/filename (+ external
    data) and folder/genai_config.json. Returns the folder.

    config: genai_config.json's model keys (CONFIG_KEYS), optionally "type"
        (one of MODEL_TYPES; default "decoder"), "search" (defaults for
        og.GeneratorParams; SEARCH_KEYS) and "session_options" (the decoder's
        session options in genai_config.json, over SESSION_DEFAULTS).
    target: "onnxruntime" (standard ops; genai grows the cache: each step
        gets the past at length P and returns the present at P + S) or
        "onnxruntime-contrib" (onnxruntime's com.microsoft ops where they fit;
        when every layer's attention over the cache became GroupQueryAttention,
        genai_config.json turns on past_present_share_buffer: the cache is one
        [B, kv, max_length, H] buffer updated in place).
    cache_layout: "BKLH" (genai's [B, kv_heads, L, head_size]) or "BLKH" (a
        step whose past and present are [B, L, kv_heads, head_size]: the graph
        transposes at its inputs and outputs).
    kv_dtype: the cache's dtype: float32, float16 or bfloat16 (the step
        takes and returns keys and values of this dtype).
    opset, external_data, plugin_dirs, optimize, fusion, verify: as to_onnx's.
    """
    from jaxonnx._convert import to_onnx

    cfg = check_config(config)
    if target not in TARGETS:
        _fail(f"target must be one of {TARGETS}; got {target!r}")
    if cache_layout not in CACHE_LAYOUTS:
        _fail(f"cache_layout must be one of {CACHE_LAYOUTS}; got {cache_layout!r}")
    try:
        kv_dtype = jax.numpy.dtype(kv_dtype)
    except TypeError:
        _fail(f"kv_dtype must be one of {FLOAT_DTYPES}; got {kv_dtype!r}")
    if kv_dtype.name not in FLOAT_DTYPES:
        _fail(f"kv_dtype must be one of {FLOAT_DTYPES}; got {kv_dtype}")
    if not isinstance(filename, str) or os.path.basename(filename) != filename or not filename:
        _fail(f"filename must be a file name (no folder); got {filename!r}")
    _check_signature(step)
    n = cfg["num_hidden_layers"]
    specs, in_names, out_names, dims = _specs(cfg, kv_dtype)
    flat = _flat(step, n, cache_layout)
    _check_outputs(step, flat, specs, cfg, dims, cache_layout)

    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, filename)
    to_onnx(flat, specs, model_name=model_name, opset=opset, return_mode="file", output_path=path,
            input_names=in_names, output_names=out_names, external_data=external_data,
            plugin_dirs=plugin_dirs, optimize=optimize, fusion=fusion, verify=verify,
            target=target)
    import onnx
    share = target == "onnxruntime-contrib" and _shares_buffer(
        onnx.load(path, load_external_data=False), n)
    with open(os.path.join(folder, "genai_config.json"), "w") as f:
        json.dump(genai_config(cfg, filename, share), f, indent=4)
        f.write("\n")
    return folder
