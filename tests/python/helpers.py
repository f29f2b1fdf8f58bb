"""Shared checks for the Python tests: convert, validate, run in onnxruntime, compare with JAX."""

from __future__ import annotations

import contextlib
import os

import jax
import numpy as np
import onnx
from jax import export

import jaxonnx
from jaxonnx.testing import _test_key, ort_levels, ort_session
from jaxonnx.testing import random_input  # noqa: F401  (tests import it from here)

# Concrete sizes the symbolic batch takes when the model runs.
BATCHES = (1, 7)
# The target that emits onnxruntime's fused attention (Attention; GroupQueryAttention
# for causal self-attention): the default target's tools cannot read the standard
# Attention op, so the default decomposes it (docs/targets.md).
FUSED_TARGET = "onnxruntime-contrib"
FUSED_ATTENTION = {"Attention", "GroupQueryAttention"}


def symbolic_specs(shapes, dtypes):
    """ShapeDtypeStructs for `shapes` (ints and symbol strings), symbols sharing one scope."""
    scope = export.SymbolicScope()
    specs = []
    for shape, dtype in zip(shapes, dtypes):
        text = ", ".join(str(d) for d in shape)
        dims = export.symbolic_shape(text, scope=scope) if shape else ()
        specs.append(jax.ShapeDtypeStruct(dims, dtype))
    return specs


def _concrete(shape, batch):
    """`shape` with its symbols bound: all to `batch`, or each by name when it is a dict."""
    if isinstance(batch, dict):
        return tuple(batch[d] if isinstance(d, str) else d for d in shape)
    return tuple(batch if isinstance(d, str) else d for d in shape)


def _tolerance(dtype):
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        return 1e-9, 1e-9
    if dtype in (np.float16,) or dtype.name == "bfloat16":
        return 1e-2, 1e-2
    return 1e-5, 1e-5


def check(fn, shapes, dtypes=None, *, x64=False, make_inputs=None, batches=BATCHES, rtol=None,
          atol=None, opset=None, target="onnxruntime"):
    """Converts `fn` and asserts the ONNX model is valid and matches JAX.

    The model is also converted with optimize=False, and both must give the
    same outputs: that is how every test program checks that the optimizer
    never changes a result. The optimized model runs at onnxruntime's graph
    optimization levels (jaxonnx.testing.ort_levels).

    shapes: one shape per input; ints or strings ("B") for symbolic dims.
    dtypes: one dtype per input (default float32, or float64 when x64).
    make_inputs(shape, dtype, rng): optional custom input generator.
    batches: the values every symbol takes in turn, or dicts binding each symbol by name.
    opset: the model's opset; default 23, or JAXONNX_TEST_OPSET (a sweep of the
        suite at an older opset: structural assertions then may not hold).
    target: to_onnx's target.
    Returns the ModelProto for structural assertions.
    """
    if opset is None:
        opset = int(os.environ.get("JAXONNX_TEST_OPSET", "23"))
    if dtypes is None:
        dtypes = [np.float64 if x64 else np.float32] * len(shapes)
    ctx = jax.enable_x64(True) if x64 else contextlib.nullcontext()
    with ctx:
        specs = symbolic_specs(shapes, dtypes)
        model = jaxonnx.to_onnx(fn, specs, enable_double_precision=x64, opset=opset, target=target)
        raw = jaxonnx.to_onnx(fn, specs, enable_double_precision=x64, opset=opset, target=target,
                              optimize=False)
    onnx.checker.check_model(model, full_check=True)
    # onnxruntime's optimization levels (jaxonnx.testing.ort_levels; the suite
    # runs "fast", JAXONNX_TEST_ORT_LEVELS=every runs each model at all four).
    levels, raw_level = ort_levels(f"{_test_key()} {shapes} {dtypes} {x64} {opset}")
    sessions = {level: ort_session(model, level) for level in levels}
    raw_sess = ort_session(raw, raw_level)
    names = [i.name for i in raw_sess.get_inputs()]
    rng = np.random.default_rng(0)
    symbolic = any(isinstance(d, str) for s in shapes for d in s)
    for batch in (batches if symbolic else batches[:1]):
        gen = make_inputs or random_input
        args = [gen(_concrete(s, batch), d, rng) for s, d in zip(shapes, dtypes)]
        with (jax.enable_x64(True) if x64 else contextlib.nullcontext()):
            expected = jax.tree_util.tree_leaves(fn(*args))
        unoptimized = raw_sess.run(None, dict(zip(names, args)))
        for level, sess in sessions.items():
            got = sess.run(None, dict(zip(names, args)))
            assert len(got) == len(expected), (len(got), len(expected))
            for g, u in zip(got, unoptimized):  # at another onnxruntime level: the test's tolerance
                assert_same_result(g, u, rtol, atol)
            for g, e in zip(got, expected):
                e = np.asarray(e)
                assert g.dtype == e.dtype, f"level {level!r}: dtype {g.dtype} != JAX {e.dtype}"
                assert g.shape == e.shape, f"level {level!r}: shape {g.shape} != JAX {e.shape}"
                r, a = _tolerance(e.dtype)
                if np.issubdtype(e.dtype, np.floating):
                    np.testing.assert_allclose(g, e, rtol=rtol or r, atol=atol or a, equal_nan=True,
                                               err_msg=f"onnxruntime level {level!r}")
                else:
                    np.testing.assert_array_equal(g, e, err_msg=f"onnxruntime level {level!r}")
    return model


def assert_same_result(optimized, raw, rtol=None, atol=None):
    """The optimized model's output matches the raw lowering's (within the
    dtype's rounding, or the test's own tolerance when it gives one)."""
    assert optimized.dtype == raw.dtype and optimized.shape == raw.shape
    if np.issubdtype(raw.dtype, np.floating):
        r, a = _tolerance(raw.dtype)
        np.testing.assert_allclose(optimized, raw, rtol=rtol or r, atol=atol or a, equal_nan=True)
    else:
        np.testing.assert_array_equal(optimized, raw)


def op_types(model):
    """The op_type of every node of the main graph, in order."""
    return [n.op_type for n in model.graph.node]


def all_op_types(graph):
    """The op_type of every node of `graph` (a GraphProto or ModelProto) and of
    its subgraphs (If branches, Loop bodies), depth first."""
    graph = getattr(graph, "graph", graph)
    out = []
    for n in graph.node:
        out.append(n.op_type)
        for a in n.attribute:
            if a.HasField("g"):
                out += all_op_types(a.g)
    return out


def example_plugin_build_dir(root):
    """A build folder for the out-of-tree example plugin, one per pytest-xdist worker:
    two workers configuring one CMake tree at once break it."""
    import os
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return root / "build" / f"pytest-example-plugin-{worker}"


def catalog_harness(group, name):
    """JAX's own primitive test case `name` of `group` (the catalog
    jax._src.internal_test_util.test_harnesses builds at import, x64 off)."""
    return _catalog()[(group, name)]


def _catalog():
    global _CATALOG
    if _CATALOG is None:
        from jax._src.internal_test_util import test_harnesses
        _CATALOG = {(h.group_name, h.name): h for h in test_harnesses.all_harnesses}
    return _CATALOG


_CATALOG = None


def check_harness(group, name):
    """Converts the catalog case as a user would (its dyn_fun on
    dyn_args_maker(RandomState(0)) arguments), asserts the model is valid and
    runs in onnxruntime with JAX's (jit) results: shapes, dtypes and values.
    Complex values are compared packed, as the model carries them
    (np.stack([z.real, z.imag], -1)). Returns the ModelProto."""
    h = catalog_harness(group, name)
    # 64-bit arguments in JAX's 32-bit mode: the dtypes jax.jit gives them.
    args = [np.asarray(a, jax.dtypes.canonicalize_dtype(np.asarray(a).dtype))
            for a in h.dyn_args_maker(np.random.RandomState(0))]
    model = jaxonnx.to_onnx(h.dyn_fun, args)
    onnx.checker.check_model(model, full_check=True)
    sess = ort_session(model)
    names = [i.name for i in sess.get_inputs()]
    got = sess.run(None, dict(zip(names, [_packed(a) for a in args])))
    expected = [_packed(e) for e in jax.tree_util.tree_leaves(jax.jit(h.dyn_fun)(*args))]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, g.dtype, e.shape, e.dtype)
        if np.issubdtype(e.dtype, np.floating):
            r, a = _tolerance(e.dtype)
            np.testing.assert_allclose(g, e, rtol=r, atol=a, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, e)
    return model


def _packed(x):
    x = np.asarray(x)
    return np.stack([x.real, x.imag], -1) if np.iscomplexobj(x) else x


def int64_fault_inputs(shape, dtype, rng):
    """64-bit integers sharing their high words (onnxruntime 1.31's int64 Max/Min and
    ReduceMax/ReduceMin compare those low words as signed: jaxonnx/max_min.hpp), around 0,
    2^31, 2^32, 2^63 and the type's limits."""
    info = np.iinfo(dtype)
    hi = rng.integers(-2, 2, size=shape) if info.min < 0 else rng.integers(0, 2, size=shape)
    hi = np.where(rng.random(shape) < 0.1, int(info.max >> 32), hi)
    lo = rng.integers(0, 2**32, size=shape, dtype=np.uint64)
    x = (hi.astype(np.uint64) << np.uint64(32)) | lo
    flat = x.astype(dtype).reshape(-1)
    special = np.array([v % 2**64 for v in (int(info.max), int(info.min), 2**31, 1, 2, 3)], np.uint64).astype(dtype)
    flat[:min(len(special), flat.size)] = special[:flat.size]
    return flat.reshape(shape)


def prefill_model(spec, **to_onnx_kw):
    """(fn, model): llm_models' prefill of `spec` (fresh weights) and its ONNX
    model at a symbolic batch and length, checked by onnx.checker."""
    import llm_models as lm
    fn = lm.prefill(spec, lm.init(spec))
    model = jaxonnx.to_onnx(fn, symbolic_specs([("B", "T")] * 3, [np.int32] * 3), **to_onnx_kw)
    onnx.checker.check_model(model, full_check=True)
    return fn, model


def check_padded_prefill(model, fn, vocab, rtol=2e-5, atol=2e-5):
    """A prefill model `fn(input_ids, attention_mask, position_ids) -> logits`
    matches JAX at batch 1 and 3, the last row padded at its end as
    onnxruntime-genai pads a shorter prompt (positions cumsum(mask) - 1)."""
    sess = ort_session(model, "all")
    names = [i.name for i in sess.get_inputs()]
    rng = np.random.default_rng(0)
    for b, t in [(1, 7), (3, 5)]:
        ids = rng.integers(1, vocab, (b, t)).astype(np.int32)
        mask = np.ones((b, t), np.int32)
        mask[-1, t - 2:] = 0
        pos = np.maximum(np.cumsum(mask, axis=1) - 1, 0).astype(np.int32)
        want = np.asarray(jax.jit(fn)(ids, mask, pos))
        got = sess.run(None, dict(zip(names, (ids, mask, pos))))[0]
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
