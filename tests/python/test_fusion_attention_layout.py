"""The attention logits of a grouped-query decoder are made where they are
used: onnx_fusion's matmul_transposed_result takes jnp.einsum's
dot_general(k, q) + Transpose as MatMul(q', k^T), and nn_attention's GQA form
of jax.nn.dot_product_attention merges the group into the rows; no Transpose
copies the [.., T, S] logits on the way to the Softmax. Parity with JAX on the
prefill of tests/python/llm_models.py's Llama (both spellings)."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

import jaxonnx
import llm_models as lm
from helpers import all_op_types, check, check_padded_prefill, prefill_model, symbolic_specs


def _softmax_inputs_from(model):
    """For each Softmax, the op that made its input's data, past the
    elementwise steps of the mask and the scale (Where, Div, Mul, Add) and
    Reshapes (which move no data)."""
    producer = {o: n for n in model.graph.node for o in n.output}
    found = []
    for n in model.graph.node:
        if n.op_type != "Softmax":
            continue
        v = n.input[0]
        while v in producer and producer[v].op_type in ("Where", "Div", "Mul", "Add", "Reshape"):
            p = producer[v]
            v = p.input[1] if p.op_type == "Where" else p.input[0]
        found.append(producer[v].op_type if v in producer else "input")
    return found


def _logits(q, k):
    return jnp.einsum("bskgd,bktd->bkgst", q, k)


def test_einsum_logits_are_one_matmul_without_a_transpose_of_the_product():
    model = check(_logits, [("B", "S", 2, 4, 16), ("B", 2, "S", 16)],
                  batches=[{"B": 1, "S": 5}, {"B": 2, "S": 3}])
    ops = all_op_types(model.graph)
    assert ops.count("MatMul") == 1, ops
    out = model.graph.output[0].name
    last = next(n for n in model.graph.node if out in n.output)
    assert last.op_type == "Reshape", ops  # the product in the result's order, reshaped


@pytest.mark.parametrize("x64", [False, True])
def test_einsum_logits_rewrite_matches_jax_static(x64):
    check(_logits, [(2, 9, 2, 3, 8), (2, 2, 9, 8)], x64=x64)


def test_no_rewrite_where_the_operands_are_larger_than_the_product():
    # K = 64 against M = 2, N = 4: moving q and k would copy more than the product.
    model = check(_logits, [(2, 2, 2, 2, 64), (2, 2, 2, 64)])
    producer = {o: n for n in model.graph.node for o in n.output}
    assert producer[model.graph.output[0].name].op_type == "Transpose"


def test_fuse_false_keeps_the_transpose():
    """The rewrite is a rule of the fuse stage: fuse=False leaves JAX's Transpose."""
    f = lambda q, k: _logits(q, k)  # noqa: E731
    specs = symbolic_specs([("B", "S", 2, 4, 16), ("B", 2, "S", 16)], [np.float32] * 2)
    unfused = jaxonnx.to_onnx(f, specs, fuse=False)
    producer = {o: n for n in unfused.graph.node for o in n.output}
    assert producer[unfused.graph.output[0].name].op_type == "Transpose"


SMALL = lm.Spec("llama_tiny", vocab=64, width=32, layers=2, heads=4, kv_heads=2, head_dim=8, hidden=48)


@pytest.mark.parametrize("sdpa", [False, True])
def test_prefill_logits_are_not_transposed_and_match_jax(sdpa):
    spec = dataclasses.replace(SMALL, sdpa=sdpa)
    f, model = prefill_model(spec)
    assert _softmax_inputs_from(model) == ["MatMul"] * spec.layers, _softmax_inputs_from(model)
    check_padded_prefill(model, f, spec.vocab)
