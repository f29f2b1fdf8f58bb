"""fusion="approximate" for a quantized decoder in onnxruntime-genai 0.18: the
qwix int8 (per channel) and int4 (blocks of 16) Llama of test_genai_dtypes,
exported with target="onnxruntime-contrib", fusion="approximate", has every
projection and the LM head as MatMulNBits with int8 activations
(accuracy_level 4), and generates JAX's tokens where the margins allow.

Tokens are compared by test_genai_dtypes' rule (logits within the tolerance at
every step; a step whose top-2 margin in JAX exceeds twice the tolerance must
pick JAX's token; a smaller margin may pick another, and the row's comparison
ends there), with the tolerance of int8 activations: APPROXIMATE of the step's
largest |logit| (measured up to 2.3e-2 on int4, 1.8e-2 on int8). In the run
recorded, int4 matched all 64 tokens of both rows; int8 matched 25 and 45
tokens, each row then taking the other of two tokens JAX scored within 7e-5
and 1.6e-3 of the largest logit. Each row must be compared for MIN_STEPS."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from jaxonnx import genai

pytest.importorskip("onnxruntime_genai")

from test_genai import PROMPTS, generate, unused_token  # noqa: E402
from test_genai_dtypes import CONTRIB, NEW_TOKENS, compare, model  # noqa: E402

APPROXIMATE = 3e-2
MIN_STEPS = 16


@pytest.mark.parametrize("kind", ["int8", "int4"])
def test_generate_with_int8_activations(tmp_path, kind):
    step, spec, kv_dtype, want_tokens, want_logits = model(kind)
    genai.export(step, spec.config(unused_token(spec, want_tokens, PROMPTS[2])), tmp_path,
                 target=CONTRIB, kv_dtype=kv_dtype, fusion="approximate")
    m = onnx.load(tmp_path / "model.onnx")
    onnx.checker.check_model(m, full_check=True)
    nbits = [{a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
             for n in m.graph.node if n.op_type == "MatMulNBits"]
    bits = 8 if kind == "int8" else 4
    # q, k, v, o, gate, up, down per layer and the LM head.
    assert [(a["bits"], a["accuracy_level"]) for a in nbits] == [(bits, 4)] * (7 * spec.layers + 1)
    tokens, logits = generate(tmp_path, PROMPTS[2], spec.pad, NEW_TOKENS)
    tolerance = APPROXIMATE * np.abs(want_logits).max(axis=-1, keepdims=True)
    assert min(compare(tokens, logits, want_tokens, want_logits, tolerance)) >= MIN_STEPS
