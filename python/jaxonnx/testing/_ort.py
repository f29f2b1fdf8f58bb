"""onnxruntime sessions at the optimization levels a check runs."""

from __future__ import annotations

import os
import zlib


# ------------------------------------------------------- onnxruntime levels

# onnxruntime's graph optimization levels, by the names $JAXONNX_TEST_ORT_LEVELS takes.
ORT_LEVELS = ("disabled", "basic", "extended", "all")
ORT_LEVELS_ENV_VAR = "JAXONNX_TEST_ORT_LEVELS"


def ort_levels(key: str = "") -> tuple[list[str], str]:
    """The onnxruntime optimization levels a check runs at: (the levels of the
    optimized model, the level of the raw lowering).

    $JAXONNX_TEST_ORT_LEVELS: "every" (the default: the optimized model at all
    four levels, the raw one with none), "fast" (the optimized model at "all",
    the default session's level; the raw one at "disabled" or "basic", picked
    by `key`, at no extra cost), or a comma-separated list of ORT_LEVELS for
    the optimized model. The raw lowering never runs at "extended": there
    onnxruntime 1.31/1.32 fuses float64 scales into a float32 alpha, which
    only the optimizer's rules guard against (onnx_fusion's f64_scale_*).
    """
    value = os.environ.get(ORT_LEVELS_ENV_VAR, "every").strip()
    if value == "every":
        return list(ORT_LEVELS), "disabled"
    if value == "fast":
        return ["all"], ORT_LEVELS[zlib.crc32(key.encode()) % 2]
    levels = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in levels if v not in ORT_LEVELS]
    if unknown or not levels:
        raise ValueError(f"${ORT_LEVELS_ENV_VAR}={value!r}: use 'every', 'fast' or a comma list "
                         f"of {ORT_LEVELS}")
    return levels, "disabled"


def ort_session(model, level: str = "all"):
    """An onnxruntime CPU session of `model` (bytes or ModelProto) at `level` (ORT_LEVELS)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = {
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[level]
    # At "all", onnxruntime fuses DequantizeLinear + MatMul of int4/int8 weights
    # into MatMulNBits with accuracy_level 4 (activations rounded to int8) unless
    # told otherwise; 0 computes in float32, JAX's numerics (docs/quantization.md).
    options.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", "0")
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def _test_key():
    """The running pytest test's id (pytest sets it), else ""."""
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
