"""Refuses, before lowering, programs no ONNX model can carry: values of dtypes
ONNX or onnxruntime cannot hold (float8, string, ...) and functions that
return no array. Complex values are carried as real tensors with a trailing dim
of 2 (complex64 as float32[..., 2]), so they are supported."""

from __future__ import annotations

import numpy as np

from jaxonnx import _source
from jaxonnx import _core, _keys
from jaxonnx._core import ConversionError

# The dtypes the core maps to ONNX element types that onnxruntime runs: the
# core's one dtype table (plugin_sdk/include/jaxonnx/dtypes.hpp).
SUPPORTED = frozenset(_core.exported_dtypes())
_SUPPORTED_TEXT = ("float16/bfloat16/float32/float64, int8-int64, uint8-uint64, bool, "
                   "int4/uint4 (weights: ONNX packs them two per byte; opset 21 carries them) and "
                   "complex64/complex128 (as float32/float64[..., 2])")


_verdicts: dict = {}  # dtype -> its name if unsupported, else None (asked for every value)


def unsupported(aval) -> str | None:
    """The name of `aval`'s dtype if no model can hold it, else None."""
    dt = getattr(aval, "dtype", None)
    if dt is None:
        return None  # tokens and other non-array values
    try:
        return _verdicts[dt]
    except KeyError:
        pass
    except TypeError:  # an unhashable dtype-like object
        return _verdict(dt)
    verdict = _verdicts[dt] = _verdict(dt)
    return verdict


def _verdict(dt) -> str | None:
    if _keys.is_key(dt):
        return None  # typed PRNG keys reach the core as their key data (_keys)
    name = np.dtype(dt).name if not hasattr(dt, "name") else dt.name
    return None if name in SUPPORTED else name


def _why(dtype_name: str) -> str:
    return f"which ONNX models cannot carry; jaxonnx exports {_SUPPORTED_TEXT}"


def check_program(program, input_names) -> None:
    """Raises ConversionError naming the first value of `program` (a
    _trace.TracedProgram) that cannot be exported: inputs, then equations
    (the innermost first, as its walk found them), then outputs."""
    jaxpr = program.closed.jaxpr
    if not jaxpr.outvars:
        raise ConversionError(
            "the function returned no arrays (None or an empty structure); an ONNX model needs "
            "at least one output")
    for i, (v, name) in enumerate(zip(jaxpr.invars, input_names)):
        if (dt := unsupported(v.aval)):
            label = f"'{name}'" if name else f"{i}"
            raise ConversionError(
                f"input {label} has dtype {dt} ({v.aval.str_short()}), {_why(dt)}")
    if program.unsupported is not None:
        eqn, v, dt = program.unsupported
        raise ConversionError(
            f"'{eqn.primitive.name}' {'reads' if v in eqn.invars else 'makes'} a "
            f"{dt} value ({v.aval.str_short()}) at {_source.describe(eqn.source_info)}"
            f", {_why(dt)}")
    # Outputs last: a computed one was named with its equation above.
    for i, v in enumerate(jaxpr.outvars):
        if (dt := unsupported(v.aval)):
            raise ConversionError(
                f"output {i} has dtype {dt} ({v.aval.str_short()}), {_why(dt)}")
