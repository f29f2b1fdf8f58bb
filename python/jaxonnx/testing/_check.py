"""check(): parity with JAX, validity and determinism of one conversion."""

from __future__ import annotations

import os
from typing import Callable, Sequence

import jax
import numpy as np
import onnx

import jaxonnx
from jaxonnx import _plugins, _preflight
from jaxonnx.testing._inputs import (BATCHES, STATIC_BATCH, VARIANTS, Variant, _assert_close, _concrete,
                                     _has_symbol, _resolve, _shape_dtype_structs, _x64, packed, random_input)
from jaxonnx.testing._ort import _test_key, ort_levels, ort_session
from jaxonnx.testing._graph import expect_graph


# ---------------------------------------------------------------- check

def check(fn: Callable, input_specs: Sequence, *, plugin_dirs=None, plugin_overrides=None,
          variants: Sequence[Variant] | None = None, batches=BATCHES, make_inputs=None,
          rtol=None, atol=None, opset: int = 23, expect: Sequence[str] | None = None,
          expect_options: dict | None = None) -> dict:
    """Converts `fn` in each variant and asserts what jaxonnx's own tests assert:

    - onnx.checker.check_model(full_check=True) passes;
    - onnxruntime's outputs match JAX's (dtype, shape, values within float rounding;
      integers exact), at each of `batches` for a symbolic dim, at each graph
      optimization level of onnxruntime (ort_levels: $JAXONNX_TEST_ORT_LEVELS);
    - the optimized model gives the raw lowering's (optimize=False) results;
    - converting twice gives byte-identical models.

    Args:
        input_specs: one per positional argument of fn: a shape tuple of ints and
            symbol strings ("B"), float in the variant's dtype; or (shape, dtype) for
            a fixed dtype.
        variants: default every float32/float64 x static/symbolic combination (the
            symbolic ones only when a spec has a symbol).
        make_inputs: custom input data, make_inputs(shape, dtype, rng) (default
            random_input).
        expect: expect_graph paths every optimized model must match.
        expect_options: expect_graph's keyword arguments for `expect`.

    Returns:
        {Variant: the optimized onnx.ModelProto}.
    """
    if variants is None:
        variants = [v for v in VARIANTS if not v.symbolic or _has_symbol(input_specs)]
    _assert_preflight_passed(plugin_dirs, plugin_overrides)

    models = {}
    for variant in variants:
        shapes, dtypes = _resolve(input_specs, variant)
        x64 = variant.dtype == "float64" or any(
            np.dtype(d).itemsize == 8 and np.dtype(d).kind != "c" or np.dtype(d) == np.complex128
            for d in dtypes)
        opts = dict(enable_double_precision=x64, opset=opset, plugin_dirs=plugin_dirs,
                    plugin_overrides=plugin_overrides)
        with _x64(x64):
            specs = _shape_dtype_structs(shapes, dtypes)
            data = jaxonnx.to_onnx(fn, specs, return_mode="bytes", **opts)
            again = jaxonnx.to_onnx(fn, specs, return_mode="bytes", **opts)
            raw = jaxonnx.to_onnx(fn, specs, return_mode="bytes", optimize=False, **opts)
        assert data == again, f"{variant}: two conversions gave different bytes"
        model = onnx.load_from_string(data)
        onnx.checker.check_model(model, full_check=True)
        onnx.checker.check_model(onnx.load_from_string(raw), full_check=True)
        levels, raw_level = ort_levels(f"{_test_key()} {variant}")
        sessions = {level: ort_session(data, level) for level in levels}
        raw_sess = ort_session(raw, raw_level)
        names = [i.name for i in raw_sess.get_inputs()]
        rng = np.random.default_rng(0)
        gen = make_inputs or random_input
        for batch in (batches if variant.symbolic else (STATIC_BATCH,)):
            args = [gen(_concrete(s, batch), d, rng) for s, d in zip(shapes, dtypes)]
            with _x64(x64):
                expected = jax.tree_util.tree_leaves(fn(*args))
            feed = dict(zip(names, map(packed, args)))  # complex inputs go in packed
            unoptimized = raw_sess.run(None, feed)
            expected = [packed(e) for e in expected]
            for level, sess in sessions.items():
                got = sess.run(None, feed)
                assert len(got) == len(expected), \
                    f"{variant}: the model has {len(got)} outputs, JAX gives {len(expected)}"
                where = f"{variant} batch {batch} onnxruntime level {level!r}"
                for k, (g, u, e) in enumerate(zip(got, unoptimized, expected)):
                    _assert_close(g, e, f"{where} output {k} vs JAX", rtol, atol)
                    _assert_close(g, u, f"{where} output {k} optimized vs raw", rtol, atol)
        if expect:
            expect_graph(model, expect, **(expect_options or {}))
        models[variant] = model
    return models


def _assert_preflight_passed(plugin_dirs, plugin_overrides):
    """A plugin of `plugin_dirs` that crashed or hung its preflight (so jaxonnx
    skipped it) fails the test with the reason, signal and primitive, instead of
    a confusing "no plugin lowers" later."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _plugins.PluginWarning)
        reg = _plugins.registry(plugin_dirs, plugin_overrides)
    ours = {os.path.realpath(os.fspath(d)) for d in (plugin_dirs or [])}
    failed = [f"{path}: {reason}" for path, reason in reg.diagnostics
              if os.path.dirname(os.path.realpath(path)) in ours
              and os.path.realpath(path) in _preflight.refused]
    assert not failed, "a plugin failed jaxonnx's preflight:\n  " + "\n  ".join(failed)
