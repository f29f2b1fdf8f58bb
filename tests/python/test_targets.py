"""Target profiles (to_onnx target=) and the one fusion option (fusion=).

target="portable" must give graphs that every runtime and tool of the
portability matrix runs (tests/python/test_portability.py runs the default
target's; benchmarks/portability.py both); fusion picks fused ops in both
stages by their declared numerics.
"""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from flax import nnx

import jaxonnx
from helpers import FUSED_ATTENTION, all_op_types, symbolic_specs
from helpers import FUSED_TARGET as FUSED
from jaxonnx.testing import ort_session

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import portability_targets as pt  # noqa: E402


def _attention(q, k, v, mask=None, causal=False):
    return jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=causal)


def _run(model, xs):
    sess = ort_session(model, "all")
    return sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs)})


QKV = [("B", "T", 4, 8)] * 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
def test_portable_attention_has_no_guard_and_matches_at_every_size(dtype, causal):
    x64 = dtype == np.float64
    with jax.enable_x64(x64):
        model = jaxonnx.to_onnx(lambda q, k, v: _attention(q, k, v, causal=causal),
                                symbolic_specs(QKV, [dtype] * 3), target="portable", opset=18,
                                enable_double_precision=x64)
        onnx.checker.check_model(model, full_check=True)
        ops = set(all_op_types(model.graph))
        assert not ops & {"If", "Attention"}, ops
        assert "Softmax" in ops  # JAX's computation in few ops, not the traced reference
        rng = np.random.default_rng(0)
        for b, t in [(1, 5), (3, 2), (0, 4), (2, 0)]:
            xs = [rng.standard_normal((b, t, 4, 8)).astype(dtype) for _ in range(3)]
            want = np.asarray(_attention(*xs, causal=causal))
            got = _run(model, xs)[0]
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5 if not x64 else 1e-12, atol=1e-6)


def test_portable_attention_masks_like_jax():
    """A boolean mask as JAX applies it (Where with -0.7 max), fully masked rows included."""
    spec = [jax.ShapeDtypeStruct((2, 6, 2, 4), np.float32)] * 3
    mask_spec = jax.ShapeDtypeStruct((2, 1, 6, 6), np.bool_)
    model = jaxonnx.to_onnx(lambda q, k, v, m: _attention(q, k, v, mask=m), spec + [mask_spec],
                            target="portable", opset=18)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((2, 6, 2, 4)).astype(np.float32) for _ in range(3)]
    m = rng.random((2, 1, 6, 6)) > 0.5
    m[0, 0, 2] = False  # a fully masked query row: the mean of the values, as in JAX
    got = _run(model, xs + [m])[0]
    np.testing.assert_allclose(got, np.asarray(_attention(*xs, mask=m)), rtol=1e-5, atol=1e-6)


def _matches_at_every_size(model, causal):
    """`model` of QKV attention matches JAX with a batch and a length of 0 among them."""
    rng = np.random.default_rng(5)
    for b, t in [(1, 5), (3, 2), (0, 4), (2, 0), (0, 0)]:
        xs = [rng.standard_normal((b, t, 4, 8)).astype(np.float32) for _ in range(3)]
        want = np.asarray(_attention(*xs, causal=causal))
        got = _run(model, xs)[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_the_default_target_decomposes_attention_without_a_guard(causal):
    """Symbolic shape inference and quantize_dynamic misread the standard Attention op, so
    the default target emits MatMul/Softmax/MatMul, which needs no empty-size guard."""
    model = jaxonnx.to_onnx(lambda q, k, v: _attention(q, k, v, causal=causal), QKV)
    ops = set(all_op_types(model.graph))
    assert not ops & (FUSED_ATTENTION | {"If"}) and "Softmax" in ops, ops
    _matches_at_every_size(model, causal)


@pytest.mark.parametrize("causal", [False, True])
def test_fused_attention_keeps_its_guard(causal):
    """onnxruntime's fused attention refuses a dim of 0: an If skips it when a symbolic one
    is 0, and an exact barrier (adding -0.0) follows it for OpenVINO."""
    model = jaxonnx.to_onnx(lambda q, k, v: _attention(q, k, v, causal=causal), QKV, target=FUSED)
    ops = set(all_op_types(model.graph))
    assert "If" in ops and ops & FUSED_ATTENTION, ops
    (barrier,) = [n for n in model.graph.node if n.op_type == "Add"]
    (neg_zeros,) = [onnx.numpy_helper.to_array(i) for i in model.graph.initializer if i.name == barrier.input[1]]
    assert neg_zeros.shape == (32,) and (neg_zeros == 0).all() and np.signbit(neg_zeros).all()
    _matches_at_every_size(model, causal)


@pytest.mark.parametrize("target", ["onnxruntime", FUSED])
def test_masks_over_empty_sizes(target):
    """A padding mask (B, 1, 1, S) over a query length T and a key length S, each maybe 0
    (with no key, JAX gives zeros), in the default's decomposed form and in Attention."""
    specs = symbolic_specs([("B", "T", 2, 4), ("B", "S", 2, 4), ("B", "S", 2, 4), ("B", "S")],
                           [np.float32] * 3 + [np.bool_])
    fn = lambda q, k, v, m: _attention(q, k, v, mask=m[:, None, None, :])  # noqa: E731
    model = jaxonnx.to_onnx(fn, specs, target=target)
    assert ("Attention" in all_op_types(model.graph)) == (target == FUSED)
    rng = np.random.default_rng(6)
    for b, t, s_ in [(2, 3, 4), (0, 3, 4), (2, 0, 4), (2, 3, 0), (1, 1, 1)]:
        xs = [rng.standard_normal((b, n, 2, 4)).astype(np.float32) for n in (t, s_, s_)]
        m = rng.random((b, s_)) > 0.3
        if b and s_:
            m[0] = False  # a fully masked row: the mean of the values, as in JAX
        want = np.asarray(fn(*xs, m))
        got = _run(model, xs + [m])[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target, runtime", [
    (FUSED, "openvino"), ("onnxruntime", "openvino"), ("onnxruntime", "tract"), ("onnxruntime", "reference"),
    ("onnxruntime", "symshape"), ("portable", "openvino"), ("portable", "tract"), ("portable", "reference"),
    ("portable", "symshape")])
def test_attention_then_matmuls_runs_on_every_runtime(target, runtime, tmp_path):
    """The probe the fused Attention's If guard broke on OpenVINO before its barrier (a
    wrong answer, different on every run). The default and portable targets decompose
    attention, so tract and symbolic shape inference read them too."""
    if not pt.installed(runtime):
        pytest.skip(f"{pt.NEEDS[runtime]} is not installed (pip install -r scripts/requirements.txt)")
    w = [np.random.default_rng(2).standard_normal((16, 16)).astype(np.float32) for _ in range(3)]

    def fn(q, k, v):
        y = _attention(q, k, v).reshape(q.shape[0], q.shape[1], 16)
        return y @ w[0] @ w[1] @ w[2]
    path = tmp_path / "m.onnx"
    onnx.save(jaxonnx.to_onnx(fn, [("B", 8, 4, 4)] * 3, target=target,
                              opset=18 if target == "portable" else None), path)
    rng = np.random.default_rng(3)
    cases = []
    for b in (1, 3):
        xs = [rng.standard_normal((b, 8, 4, 4)).astype(np.float32) for _ in range(3)]
        cases.append((b, xs, [np.asarray(fn(*xs))]))
    cell = pt.check(runtime, path, cases)
    assert cell.status == "pass", (cell.status, cell.detail)


@pytest.mark.parametrize("target", ["onnxruntime", "portable"])
def test_group_norm_guard_only_where_the_target_has_it(target):
    m = nnx.GroupNorm(8, num_groups=2, rngs=nnx.Rngs(0))
    model = jaxonnx.to_onnx(m, [("B", 4, 4, 8)], target=target, opset=23)
    assert ("If" in set(all_op_types(model.graph))) == (target == "onnxruntime")
    for b in (3, 0):
        x = np.random.default_rng(4).standard_normal((b, 4, 4, 8)).astype(np.float32)
        np.testing.assert_allclose(_run(model, [x])[0], np.asarray(m(x)), rtol=1e-4, atol=1e-5)


def test_group_norm_then_a_matmul_on_openvino(tmp_path):
    """The guard's barrier after GroupNorm's If: OpenVINO reads garbage from an If output
    that feeds a MatMul without it."""
    if not pt.installed("openvino"):
        pytest.skip("openvino is not installed (pip install -r scripts/requirements.txt)")
    m = nnx.GroupNorm(8, num_groups=2, rngs=nnx.Rngs(0))
    w = np.random.default_rng(7).standard_normal((8, 8)).astype(np.float32)
    fn = lambda x: (m(x) @ w) @ w  # noqa: E731
    path = tmp_path / "m.onnx"
    onnx.save(jaxonnx.to_onnx(fn, [("B", 4, 4, 8)]), path)
    rng = np.random.default_rng(8)
    cases = []
    for b in (1, 3, 2):
        x = rng.standard_normal((b, 4, 4, 8)).astype(np.float32)
        cases.append((b, [x], [np.asarray(fn(x))]))
    cell = pt.check("openvino", path, cases)
    assert cell.status == "pass", (cell.status, cell.detail)


def test_targets_are_data_and_checked():
    profiles = jaxonnx._targets.profiles()
    assert list(profiles) == ["onnxruntime", "portable", "onnxruntime-contrib"]
    assert profiles["onnxruntime"]["default_opset"] == 23
    assert [(what, refused) for what, refused, _ in profiles["onnxruntime"]["lacks"]] == [
        ("Attention", True), ("dequantize_weights", False)]
    assert [w for w, _, _ in profiles[FUSED]["lacks"]] == ["dequantize_weights"]
    lacks = {what: refused for what, refused, _ in profiles["portable"]["lacks"]}
    assert lacks["Attention"] is True and lacks["negative_pad"] is False
    with pytest.raises(jaxonnx.ConversionError, match="target must be one of .*'portable'"):
        jaxonnx.to_onnx(jnp.sin, [(3,)], target="tpu")


class _Block(nnx.Module):
    """A layer norm, a gelu, attention and a relu: each stage's fused ops."""

    def __init__(self):
        self.ln = nnx.LayerNorm(16, rngs=nnx.Rngs(0))
        self.attn = nnx.MultiHeadAttention(2, 16, decode=False, rngs=nnx.Rngs(1))

    def __call__(self, x):
        y = self.attn(self.ln(x))
        return jnp.maximum(jax.nn.gelu(y) @ jnp.ones((16, 16)) + 1.0, 0.0)


@pytest.mark.parametrize("fusion", ["fast", "exact", "none", "approximate"])
def test_fusion_drives_both_stages(fusion):
    block = _Block()
    model = jaxonnx.to_onnx(block, [("B", 5, 16)], fusion=fusion, target=FUSED)
    ops = set(all_op_types(model.graph))
    spec_ops = {"LayerNormalization", "Attention"}  # binding specs (declared exact)
    if fusion == "none":
        assert not ops & (spec_ops | {"Gelu", "Gemm", "Relu", "Softmax"}), ops
    else:
        assert spec_ops <= ops, ops
        assert "Gelu" in ops  # jax.nn.gelu's spec: exact
        # max(x, 0) -> Relu is finite-only (Relu(-0.0) is -0.0): not under "exact"
        assert ("Relu" in ops) == (fusion in ("fast", "approximate")), ops
    x = np.random.default_rng(5).standard_normal((2, 5, 16)).astype(np.float32)
    np.testing.assert_allclose(_run(model, [x])[0], np.asarray(block(x)), rtol=1e-4, atol=1e-4)


def test_fusion_aliases():
    from jaxonnx import _fusion
    assert _fusion.levels(None) == ("fast", "fast")
    assert _fusion.levels(None, crisp="exact") == ("exact", "exact")
    assert _fusion.levels(None, crisp=False) == ("none", "fast")
    assert _fusion.levels(None, fuse=False) == ("fast", "none")
    assert _fusion.levels("exact", fuse=False) == ("exact", "none")
    assert _fusion.levels(None, normalization_mode="force_decomposed") == ("none", "none")
    assert _fusion.levels("approximate") == ("approximate", "approximate")
    assert _fusion.levels("approximate", crisp="exact") == ("exact", "exact")
    assert _fusion.levels("approximate", fuse=False) == ("approximate", "none")
    with pytest.raises(jaxonnx.ConversionError, match="fusion must be one of"):
        jaxonnx.to_onnx(jnp.sin, [(3,)], fusion="fastest")


def test_every_bundled_spec_and_rule_declares_its_numerics():
    from jaxonnx import _plugins
    for plugin in _plugins.registry(None).plugins:
        for p in plugin["primitives"]:
            for b in p["bindings"]:
                assert b["numerics"] in ("exact", "finite"), (plugin["name"], b["target"])
                assert (b["numerics"] == "finite") == bool(b["numerics_note"]), b["target"]
        for r in plugin["rules"]:
            assert r["numerics"] in ("exact", "finite", "approximate"), (plugin["name"], r["name"])
            assert (r["numerics"] != "exact") == bool(r["numerics_note"]), r["name"]


def test_portable_crops_with_a_slice_not_a_negative_pad():
    f = lambda x: jax.lax.pad(x, 0.0, [(0, 0, 0), (-1, 2, 0)])  # noqa: E731
    model = jaxonnx.to_onnx(f, [("B", 6)], target="portable", opset=18)
    pads = [onnx.numpy_helper.to_array(i) for i in model.graph.initializer
            if any(n.op_type == "Pad" and n.input[1] == i.name for n in model.graph.node)]
    assert pads and all((p >= 0).all() for p in pads)
    assert "Slice" in set(all_op_types(model.graph))
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(_run(model, [x])[0], np.asarray(f(x)))


def _scan_program(reverse, length=5):
    def fn(x, w):  # x: [B, length, 3]; w: [3, 3]
        def step(c, xt):
            c = jnp.tanh(c @ w + xt)
            return c, (c, xt.sum(-1))
        c, (cs, sums) = jax.lax.scan(step, jnp.zeros_like(x[:, 0]), jnp.swapaxes(x, 0, 1), reverse=reverse)
        return c, cs, sums
    return fn


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_portable_unrolls_a_static_scan(reverse, dtype):
    """tract has no Loop (and the reference evaluator and quantize_dynamic mishandle one):
    portable unrolls a scan of static length; the ys are stacked in JAX's index order."""
    x64 = dtype == np.float64
    fn = _scan_program(reverse)
    with jax.enable_x64(x64):
        specs = symbolic_specs([("B", 5, 3), (3, 3)], [dtype] * 2)
        model = jaxonnx.to_onnx(fn, specs, target="portable", enable_double_precision=x64)
        onnx.checker.check_model(model, full_check=True)
        ops = all_op_types(model.graph)
        assert "Loop" not in ops and ops.count("Tanh") == 5, ops
        assert "Loop" in all_op_types(jaxonnx.to_onnx(fn, specs, enable_double_precision=x64).graph)
        rng = np.random.default_rng(9)
        for b in (2, 1, 0):
            xs = [rng.standard_normal((b, 5, 3)).astype(dtype), rng.standard_normal((3, 3)).astype(dtype)]
            for got, want in zip(_run(model, xs), fn(*xs)):
                assert got.shape == want.shape
                np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5 if not x64 else 1e-12, atol=1e-6)


def test_portable_keeps_a_loop_where_unrolling_would_not_pay():
    """A symbolic length cannot be unrolled; nor one past 20000 body equations in all."""
    fn = lambda x: jax.lax.scan(lambda c, xt: (c + xt, None), jnp.zeros_like(x[0]), x)[0]  # noqa: E731
    assert "Loop" in all_op_types(jaxonnx.to_onnx(fn, [("T", 3)], target="portable").graph)
    long = jaxonnx.to_onnx(fn, [(20001, 3)], target="portable")
    assert "Loop" in all_op_types(long.graph)
    x = np.random.default_rng(10).standard_normal((20001, 3)).astype(np.float32)
    np.testing.assert_allclose(_run(long, [x])[0], np.asarray(fn(x)), rtol=1e-4, atol=1e-3)
