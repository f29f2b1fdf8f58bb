"""Two onnx_fusion rules that take the elementwise work around attention's
logits to where onnxruntime runs it fastest:

- scale_before_reshape: einsum attention's `/ sqrt(d)` after the Reshape that
  matmul_transposed_result leaves moves to the product, where onnxruntime
  fuses it into the MatMul (as jax.nn.dot_product_attention's scale).
- where_fill_to_add: `where(mask, s, finfo.min)` with the mask broadcast over
  the heads becomes `s + where(mask, 0, finfo.min)`, the additive mask over
  the mask's shape, shared by the layers.

And core's rows pass leaves the LM head's MatMul in the logits' shape. Parity with JAX (a fully masked row included), what the rules leave alone,
and the prefill of tests/python/llm_models.py's Llama."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import llm_models as lm
from helpers import check, check_padded_prefill, prefill_model


def _producers(model):
    return {o: n for n in model.graph.node for o in n.output}


def _softmax_input(model):
    """The node each Softmax reads (in node order)."""
    producer = _producers(model)
    return [producer[n.input[0]] for n in model.graph.node if n.op_type == "Softmax"]


# ------------------------------------------------------------- the scale --

def _scaled_logits(q, k):
    return jnp.einsum("bskgd,bktd->bkgst", q, k) / np.sqrt(16).astype(q.dtype)


def test_einsum_scale_is_at_the_product():
    model = check(_scaled_logits, [("B", "S", 2, 4, 16), ("B", 2, "S", 16)],
                  batches=[{"B": 1, "S": 5}, {"B": 2, "S": 3}])
    producer = _producers(model)
    last = producer[model.graph.output[0].name]
    assert last.op_type == "Reshape", [n.op_type for n in model.graph.node]
    div = producer[last.input[0]]
    assert div.op_type == "Div" and producer[div.input[0]].op_type == "MatMul"


def test_scale_as_a_product_moves_too():
    model = check(lambda q, k: 0.125 * jnp.einsum("bskgd,bktd->bkgst", q, k),
                  [("B", "S", 2, 4, 16), ("B", 2, "S", 16)])
    producer = _producers(model)
    mul = producer[producer[model.graph.output[0].name].input[0]]
    assert mul.op_type == "Mul" and any(producer.get(i) is not None and producer[i].op_type == "MatMul"
                                        for i in mul.input)


@pytest.mark.parametrize("x64", [False, True])
def test_einsum_scale_matches_jax(x64):
    # sqrt(3) is not a power of two: the division stays a division.
    check(lambda q, k: jnp.einsum("bskgd,bktd->bkgst", q, k) / jnp.sqrt(jnp.asarray(3.0, q.dtype)),
          [(2, 9, 2, 3, 8), (2, 2, 9, 8)], x64=x64)


def test_reshaped_product_scale_moves_and_matches_jax():
    """Any Reshape of a MatMul: the scale moves before it."""
    f = lambda a, b: jnp.matmul(a, b).reshape(a.shape[0], 2, 4, 3, 9) / 4.0  # noqa: E731
    model = check(f, [(2, 2, 12, 8), (2, 2, 8, 9)])
    producer = _producers(model)
    div = producer[producer[model.graph.output[0].name].input[0]]
    assert div.op_type == "Div" and producer[div.input[0]].op_type == "MatMul"


def test_no_move_where_the_product_has_another_reader():
    """A product read twice keeps its scale after the Reshape (onnxruntime
    fuses no scale into a MatMul read by anything else)."""
    def f(a, b):
        p = jnp.matmul(a, b)
        return p.reshape(a.shape[0], 2, 4, 3, 9) / 4.0, p
    model = check(f, [(2, 2, 12, 8), (2, 2, 8, 9)])
    producer = _producers(model)
    div = producer[model.graph.output[0].name]
    assert div.op_type == "Div" and producer[div.input[0]].op_type == "Reshape"


# -------------------------------------------------------------- the mask --

def _visible(keep):
    """A [B, 1, S, S] mask from `keep`'s signs, its first row masked whole."""
    rows = jnp.arange(keep.shape[-2])[:, None] > 0
    return (keep > 0) & rows


def _masked_softmax(fill):
    def f(s, keep):
        return jax.nn.softmax(jnp.where(_visible(keep), s, fill(s.dtype)), axis=-1)
    return f


LOWEST = lambda dt: jnp.finfo(dt).min  # noqa: E731
MINUS_INF = lambda dt: -jnp.inf  # noqa: E731


def _mask_ops(model):
    """(Where nodes, whether the Softmax reads an Add)."""
    wheres = [n for n in model.graph.node if n.op_type == "Where"]
    return wheres, [n.op_type for n in _softmax_input(model)]


@pytest.mark.parametrize("x64", [False, True])
def test_lowest_fill_becomes_an_additive_mask(x64):
    model = check(_masked_softmax(LOWEST), [("B", 4, "S", "S"), ("B", 1, "S", "S")], x64=x64,
                  batches=[{"B": 1, "S": 5}, {"B": 3, "S": 2}])
    wheres, reads = _mask_ops(model)
    assert reads == ["Add"], reads
    (where,) = wheres
    shapes = {v.name: v for v in list(model.graph.value_info) + list(model.graph.output)}
    # the Where runs over the mask's [B, 1, S, S], not the logits' [B, 4, S, S]
    if where.output[0] in shapes:
        dims = shapes[where.output[0]].type.tensor_type.shape.dim
        assert dims[1].dim_value == 1


def test_minus_inf_fill_becomes_an_additive_mask():
    # Every row sees a key here: a fully masked row of -inf is NaN in JAX and in the model alike.
    f = lambda s, keep: jax.nn.softmax(jnp.where(keep > -3.0, s, -jnp.inf), axis=-1)  # noqa: E731
    model = check(f, [("B", 4, "S", "S"), ("B", 1, "S", "S")])
    assert [n.op_type for n in _softmax_input(model)] == ["Add"]


def test_fill_the_logits_can_move_stays_a_where():
    """-1e9 is not absorbing: s - 1e9 rounds to another value than -1e9 for a
    fully masked row, so the rule leaves it."""
    model = check(_masked_softmax(lambda dt: -1e9), [("B", 4, "S", "S"), ("B", 1, "S", "S")])
    assert [n.op_type for n in _softmax_input(model)] == ["Where"]


def test_mask_of_the_logits_shape_stays_a_where():
    """A mask over every element of the logits: an additive mask would cost a
    pass of its own."""
    f = lambda s, keep: jax.nn.softmax(jnp.where(keep > 0, s, jnp.finfo(s.dtype).min), axis=-1)  # noqa: E731
    model = check(f, [("B", 4, "S", "S"), ("B", 4, "S", "S")])
    assert [n.op_type for n in _softmax_input(model)] == ["Where"]


def test_fill_first_is_taken_too():
    f = lambda s, keep: jax.nn.softmax(jnp.where(~_visible(keep), jnp.finfo(s.dtype).min, s), axis=-1)  # noqa: E731
    model = check(f, [("B", 4, "S", "S"), ("B", 1, "S", "S")])
    assert [n.op_type for n in _softmax_input(model)] == ["Add"]


# ----------------------------------------------------------- the prefill --

SMALL = lm.Spec("llama_tiny", vocab=64, width=32, layers=3, heads=4, kv_heads=2, head_dim=8, hidden=48)


@pytest.mark.parametrize("sdpa", [False, True])
def test_prefill_shares_one_additive_mask_and_matches_jax(sdpa):
    spec = dataclasses.replace(SMALL, sdpa=sdpa)
    f, model = prefill_model(spec)
    producer = _producers(model)
    adds = _softmax_input(model)
    assert [n.op_type for n in adds] == ["Add"] * spec.layers
    biases = {a.input[1] for a in adds}
    assert len(biases) == 1 and producer[biases.pop()].op_type == "Where"  # one mask for all layers
    if not sdpa:  # the scale sits at the product, as in the sdpa form
        for a in adds:
            scale = producer[producer[a.input[0]].input[0]]
            assert scale.op_type == "Div" and producer[scale.input[0]].op_type == "MatMul"
    # the LM head writes the logits in their own shape (core's rows pass): no Reshape copies them
    assert producer[model.graph.output[0].name].op_type == "MatMul"
    check_padded_prefill(model, f, spec.vocab)


def test_fuse_false_keeps_the_where():
    spec = SMALL
    _, model = prefill_model(spec, fuse=False)
    assert [n.op_type for n in _softmax_input(model)] == ["Where"] * spec.layers
