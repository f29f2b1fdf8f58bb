"""Weight-quantized models (plugins/quantization, docs/quantization.md).

A model whose weights are int8/int4 constants dequantized in the program
(qwix's weight-only PTQ, or the hand-written `w_q.astype(f32) * scale`) keeps
them quantized in the file: the integer weight stays an initializer everywhere;
DequantizeLinear + MatMul where the target runs it well (portable: int8 per channel
at its opset 17, int4 widened to int8 there), MatMulNBits for int4 under
onnxruntime-contrib, and Cast + Mul for the onnxruntime targets otherwise, which
onnxruntime folds into a float32 weight at load (targets.hpp, dequantize_weights).
Every model matches JAX's quantized program through onnxruntime (symbolic
batch; sessions with and without onnxruntime's optimizer), passes the full
checker, holds no float copy of a weight, and is a fraction of the float32
model's size. Under fusion="approximate" (opt-in) onnxruntime-contrib makes
int4 and int8 weight products MatMulNBits with int8 activations
(accuracy_level 4): within APPROXIMATE of JAX's output scale, and exact codes
and scales (at accuracy_level 0 the same nodes match JAX to rounding). The raw lowering (optimize=False) is not run: an int4 weight
reshaped or transposed before its Cast (the hand-written blocked form) is
moved by the constant folding, and onnxruntime has no 4-bit Reshape kernel.
"""

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
import qwix
from flax import nnx
from onnx import numpy_helper

import jaxonnx
from helpers import symbolic_specs
from jaxonnx.testing import ort_session

CONTRIB = "onnxruntime-contrib"
IN, HIDDEN, OUT = 128, 256, 64  # weights 128x256 + 256x64: 48k parameters
WEIGHT_SIZES = {IN * HIDDEN, HIDDEN * OUT}


class MLP(nnx.Module):
    def __init__(self, *, rngs):
        self.up = nnx.Linear(IN, HIDDEN, rngs=rngs)
        self.down = nnx.Linear(HIDDEN, OUT, use_bias=False, rngs=rngs)

    def __call__(self, x):
        return self.down(jax.nn.relu(self.up(x)))


def _qwix(weight_qtype, tile_size=None):
    model = MLP(rngs=nnx.Rngs(0))
    rules = [qwix.QuantizationRule(module_path=".*", weight_qtype=weight_qtype, tile_size=tile_size)]
    return model, qwix.quantize_model(model, qwix.PtqProvider(rules), jnp.ones((1, IN), jnp.float32))


def _quantize(w, bits, block=None):
    """w [K, N] float -> (w_q int8/int4 [K, N], scale [1, N] or [K / block, 1, N]), symmetric."""
    qmax = 2 ** (bits - 1) - 1
    kn = w.reshape(-1, block, w.shape[1]) if block else w[None]
    scale = np.abs(kn).max(axis=1, keepdims=True) / qmax
    q = np.clip(np.round(kn / scale), -qmax, qmax).reshape(w.shape)
    dt = jnp.int8 if bits == 8 else jnp.int4
    return jnp.asarray(q, dt), jnp.asarray(scale if block else scale[0], jnp.float32)


def _handwritten(bits, block=None):
    """A pure-JAX quantized MLP as many codebases write it: the second weight
    stored [out, in] (contracted on its last axis), dequantized just before the dot."""
    rng = np.random.default_rng(1)
    w1 = rng.standard_normal((IN, HIDDEN)).astype(np.float32) / np.sqrt(IN)
    w2 = rng.standard_normal((HIDDEN, OUT)).astype(np.float32) / np.sqrt(HIDDEN)
    q1, s1 = _quantize(w1, bits, block)
    q2, s2 = _quantize(w2, bits, block)
    q2t, s2t = q2.T, (s2[..., 0, :] if block else s2[0])  # [OUT, HIDDEN]; [HIDDEN/block, OUT] or [OUT]

    def dequantize(q, s):
        if block is None:
            return q.astype(jnp.float32) * s
        k, n = q.shape
        return (q.reshape(k // block, block, n).astype(jnp.float32) * s).reshape(k, n)

    def fn(x):
        h = jax.nn.relu(x @ dequantize(q1, s1))
        if block is None:
            w2_out_in = q2t.astype(jnp.float32) * s2t[:, None]
        else:
            w2_out_in = dequantize(q2t.T, s2t[:, None, :]).T
        return jnp.einsum("bk,nk->bn", h, w2_out_in)

    def float_fn(x):
        return jax.nn.relu(x @ w1) @ w2

    return fn, float_fn


def _check(fn, shape, target="onnxruntime", opset=None, batches=(1, 7), fusion=None):
    """The model of `fn` for `target`: checked, and run against JAX's program at each batch."""
    model = jaxonnx.to_onnx(fn, symbolic_specs([shape], [np.float32]), target=target, opset=opset,
                            fusion=fusion)
    onnx.checker.check_model(model, full_check=True)
    rng = np.random.default_rng(0)
    for level in ("all", "disabled"):
        sess = ort_session(model, level)
        for b in batches:
            x = rng.standard_normal(tuple(b if d == "B" else d for d in shape)).astype(np.float32)
            got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
            np.testing.assert_allclose(got, np.asarray(fn(x)), rtol=1e-5, atol=1e-5,
                                       err_msg=f"level {level}, batch {b}")
    return model


def _nbits(model):
    """{attribute: value} of each MatMulNBits node."""
    return [{a.name: onnx.helper.get_attribute_value(a) for a in n.attribute} for n in model.graph.node
            if (n.domain, n.op_type) == ("com.microsoft", "MatMulNBits")]


def _initializers(model):
    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


def _ops(model):
    return [(n.domain, n.op_type) for n in model.graph.node]


def _assert_quantized(model, *, nbits_ops=0, dq_ops=0, int_dtype=None):
    ops = _ops(model)
    assert ops.count(("com.microsoft", "MatMulNBits")) == nbits_ops, ops
    assert ops.count(("", "DequantizeLinear")) == dq_ops, ops
    for name, a in _initializers(model).items():
        # No float copy of a weight: float initializers are biases and scales.
        assert not (np.issubdtype(a.dtype, np.floating) and a.size in WEIGHT_SIZES), name
    if int_dtype is not None:
        weights = [i for i in model.graph.initializer if np.prod(i.dims) in WEIGHT_SIZES]
        assert {i.data_type for i in weights} == {int_dtype}, weights


def _size_ratio(fn, float_fn, target, opset=None):
    specs = symbolic_specs([("B", IN)], [np.float32])
    q = jaxonnx.to_onnx(fn, specs, target=target, opset=opset).SerializeToString()
    f = jaxonnx.to_onnx(float_fn, specs, target=target, opset=opset).SerializeToString()
    return len(q) / len(f)


CASES = {
    # name: (make (fn, float fn), storage in the file at opset 23, size ratio bound)
    "qwix_int8_per_channel": (lambda: _qwix("int8"), onnx.TensorProto.INT8, 0.27),
    "qwix_int4_blocked": (lambda: _qwix("int4", 32), onnx.TensorProto.INT4, 0.17),
    "qwix_int4_per_channel": (lambda: _qwix("int4"), onnx.TensorProto.INT4, 0.14),
    "handwritten_int8": (lambda: _handwritten(8), onnx.TensorProto.INT8, 0.27),
    "handwritten_int4_blocked": (lambda: _handwritten(4, 32), onnx.TensorProto.INT4, 0.17),
}
# qwix int8 in blocks (the model builder's default form, at int8) under fusion="approximate".
APPROXIMATE_CASES = dict(CASES, qwix_int8_blocked=(lambda: _qwix("int8", 32), onnx.TensorProto.INT8, 0.3))
# int8 activations (onnxruntime rounds x to int8 per block of K): the largest
# output error over the largest |output|; measured 6e-3 to 1e-2 on these models.
APPROXIMATE = 3e-2


def _functions(case):
    made = APPROXIMATE_CASES[case][0]()
    if isinstance(made[0], nnx.Module):
        float_model, q_model = made
        return (lambda x: q_model(x)), (lambda x: float_model(x))
    return made


@pytest.mark.parametrize("case", sorted(CASES))
def test_default_target_keeps_the_integer_weight_under_cast_and_mul(case):
    # onnxruntime runs DequantizeLinear + MatMul 20-90x slower than the float32
    # weight it folds Cast + Mul into at load (targets.hpp, dequantize_weights).
    fn, float_fn = _functions(case)
    model = _check(fn, ("B", IN))
    _assert_quantized(model, dq_ops=0, int_dtype=CASES[case][1])
    assert {"Cast", "Mul"} <= {op for _, op in _ops(model)}
    assert _size_ratio(fn, float_fn, "onnxruntime") < CASES[case][2]


@pytest.mark.parametrize("case", sorted(CASES))
def test_contrib_target_matmul_nbits(case):
    fn, float_fn = _functions(case)
    model = _check(fn, ("B", IN), target=CONTRIB)
    if CASES[case][1] == onnx.TensorProto.INT8:
        # int8: MatMulNBits(bits=8) measured no faster than the standard form, which
        # is slower than Cast + Mul folded at load: Cast + Mul stays.
        _assert_quantized(model, dq_ops=0, int_dtype=onnx.TensorProto.INT8)
    else:
        _assert_quantized(model, nbits_ops=2)
    # float32 compute: JAX's products summed in another order (not int8 activations).
    assert all(a.get("accuracy_level", 0) == 0 for a in _nbits(model)), _nbits(model)
    # uint8 codes: int4 two per byte, plus the scales of each block.
    assert _size_ratio(fn, float_fn, CONTRIB) < CASES[case][2] + 0.02


def test_contrib_target_rank3_activations():
    _, q_model = _qwix("int4", 32)
    model = _check(lambda x: q_model(x), ("B", 5, IN), target=CONTRIB)
    _assert_quantized(model, nbits_ops=2)


@pytest.mark.parametrize("case", ["qwix_int8_per_channel", "handwritten_int8"])
def test_portable_int8_per_channel(case):
    fn, float_fn = _functions(case)
    model = _check(fn, ("B", IN), target="portable", opset=17)
    _assert_quantized(model, dq_ops=2, int_dtype=onnx.TensorProto.INT8)
    assert _size_ratio(fn, float_fn, "portable") < 0.27


@pytest.mark.parametrize("case", ["qwix_int4_blocked", "handwritten_int4_blocked"])
def test_portable_int4_is_widened_to_int8(case):
    # Opset 17 has no int4 and no blocked DequantizeLinear: the weight is int8
    # in the file and the blocked scale stays a Mul after its Cast.
    fn, float_fn = _functions(case)
    model = _check(fn, ("B", IN), target="portable", opset=17)
    _assert_quantized(model, int_dtype=onnx.TensorProto.INT8)
    assert _size_ratio(fn, float_fn, "portable") < 0.3


def test_matches_the_quantized_program_not_the_float_one():
    fn, float_fn = _functions("qwix_int4_blocked")
    x = np.random.default_rng(2).standard_normal((4, IN)).astype(np.float32)
    for target in ("onnxruntime", CONTRIB):
        model = jaxonnx.to_onnx(fn, [jax.ShapeDtypeStruct((4, IN), np.float32)], target=target)
        got = ort_session(model, "all").run(None, {model.graph.input[0].name: x})[0]
        np.testing.assert_allclose(got, fn(x), rtol=1e-5, atol=1e-5)
        assert np.abs(got - np.asarray(float_fn(x))).max() > 1e-2  # int4 differs from float


def test_int4_constant_round_trips_through_the_file():
    # Odd element count: the last byte holds one nibble.
    w = jnp.asarray(np.arange(-8, 7).reshape(3, 5), jnp.int4)
    model = _check(lambda x: x * w.astype(jnp.float32), ("B", 3, 5), batches=(2,))
    (init,) = [i for i in model.graph.initializer if i.data_type == onnx.TensorProto.INT4]
    assert len(init.raw_data) == 8
    np.testing.assert_array_equal(numpy_helper.to_array(init).astype(np.int8), np.asarray(w, np.int8))


def test_fusion_none_keeps_the_jax_form():
    fn, _ = _functions("qwix_int8_per_channel")
    model = jaxonnx.to_onnx(fn, symbolic_specs([("B", IN)], [np.float32]), fusion="none")
    ops = {op for _, op in _ops(model)}
    assert "DequantizeLinear" not in ops and {"Cast", "Mul"} <= ops
    _assert_quantized(model, int_dtype=onnx.TensorProto.INT8)


def test_int4_below_opset_21_without_the_optimizer_is_refused_clearly():
    fn, _ = _functions("qwix_int4_blocked")
    with pytest.raises(jaxonnx.ConversionError, match="opset=21 or newer"):
        jaxonnx.to_onnx(fn, symbolic_specs([("B", IN)], [np.float32]), target="portable",
                        opset=17, optimize=False)


class EinsumBlock(nnx.Module):
    """Attention-style projections as nnx.Einsum kernels [in, heads, head] and [heads, head, out]."""

    def __init__(self, *, rngs):
        self.proj = nnx.Einsum("btd,dhk->bthk", (64, 4, 32), rngs=rngs)
        self.out = nnx.Einsum("bthk,hkd->btd", (4, 32, 64), rngs=rngs)

    def __call__(self, x):
        return self.out(jax.nn.relu(self.proj(x)))


@pytest.mark.parametrize("target", ["onnxruntime", CONTRIB, "portable"])
def test_qwix_einsum_int8_per_channel(target):
    # The kernels' per-(heads, head) or per-out scales reach the MatMul through
    # the Reshape that flattens the kernel: DequantizeLinear per axis of it.
    rules = [qwix.QuantizationRule(module_path=".*", weight_qtype="int8")]
    q_model = qwix.quantize_model(EinsumBlock(rngs=nnx.Rngs(0)), qwix.PtqProvider(rules),
                                  jnp.ones((1, 3, 64), jnp.float32))
    fn = jax.jit(lambda x: q_model(x))
    model = _check(fn, ("B", 3, 64), target=target)
    ops = _ops(model)
    if target == "portable":
        assert ops.count(("", "DequantizeLinear")) == 2 and ("", "Cast") not in ops, ops
    else:  # Cast + Mul, folded by onnxruntime at load (targets.hpp, dequantize_weights)
        assert ("", "DequantizeLinear") not in ops and ("", "Cast") in ops, ops
    assert all(i.data_type != onnx.TensorProto.FLOAT or np.prod(i.dims) <= 128
               for i in model.graph.initializer)


def _run(model, x):
    sess = ort_session(model, "all")
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize("shape", [("B", IN), ("B", 5, IN)], ids=["rank2", "rank3"])
@pytest.mark.parametrize("case", sorted(APPROXIMATE_CASES))
def test_fusion_approximate_makes_int8_activation_matmul_nbits(case, shape):
    if len(shape) == 3 and case.startswith("handwritten"):
        pytest.skip("the hand-written models contract a rank-2 input")
    fn, float_fn = _functions(case)
    storage = APPROXIMATE_CASES[case][1]
    model = jaxonnx.to_onnx(fn, symbolic_specs([shape], [np.float32]), target=CONTRIB, fusion="approximate")
    onnx.checker.check_model(model, full_check=True)
    # Every weight product, int8 ones too (read from the program's Cast + Mul).
    _assert_quantized(model, nbits_ops=2)
    bits = 8 if storage == onnx.TensorProto.INT8 else 4
    assert [(a["bits"], a["accuracy_level"]) for a in _nbits(model)] == [(bits, 4)] * 2
    x = np.random.default_rng(0).standard_normal(tuple(7 if d == "B" else d for d in shape)).astype(np.float32)
    want = np.asarray(fn(x))
    err = np.abs(_run(model, x) - want).max() / np.abs(want).max()
    assert err < APPROXIMATE, err
    # The codes and scales are JAX's: at float32 compute the same nodes give its products.
    for node in model.graph.node:
        if node.op_type == "MatMulNBits":
            for a in node.attribute:
                if a.name == "accuracy_level":
                    a.i = 0
    np.testing.assert_allclose(_run(model, x), want, rtol=1e-5, atol=1e-5)
    assert _size_ratio(fn, float_fn, CONTRIB) < APPROXIMATE_CASES[case][2] + 0.02


@pytest.mark.parametrize("case", ["qwix_int8_per_channel", "qwix_int4_blocked"])
def test_fusion_approximate_changes_nothing_without_the_contrib_domain(case):
    # The default target runs no com.microsoft op: no rule beyond rounding applies.
    fn, _ = _functions(case)
    model = _check(fn, ("B", IN), fusion="approximate")
    _assert_quantized(model, int_dtype=CASES[case][1])


@pytest.mark.parametrize("fusion", [None, "approximate"])
def test_contrib_target_block_past_256(fusion):
    # onnxruntime's MatMulNBits refuses blocks over 256: a block of 512 is two of
    # 256 with its scale repeated (the same products).
    rng = np.random.default_rng(2)
    w_q = jnp.asarray(rng.integers(-8, 8, (1024, 8)), jnp.int4)
    scale = jnp.asarray((rng.random((2, 1, 8)) + 0.5) / 64, jnp.float32)
    fn = lambda x: x @ (w_q.reshape(2, 512, 8).astype(jnp.float32) * scale).reshape(1024, 8)  # noqa: E731
    if fusion is None:
        model = _check(fn, ("B", 1024), target=CONTRIB)
    else:
        model = jaxonnx.to_onnx(fn, symbolic_specs([("B", 1024)], [np.float32]), target=CONTRIB, fusion=fusion)
        x = np.random.default_rng(0).standard_normal((3, 1024)).astype(np.float32)
        want = np.asarray(fn(x))
        assert np.abs(_run(model, x) - want).max() / np.abs(want).max() < APPROXIMATE
    level = 4 if fusion else 0
    assert [(a["block_size"], a.get("accuracy_level", 0)) for a in _nbits(model)] == [(256, level)]
