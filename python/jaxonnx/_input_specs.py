"""Input specs -> jax.ShapeDtypeStruct, with one symbolic scope for all inputs."""

from __future__ import annotations

import functools
import re

import jax
import numpy as np
from jax import export

from jaxonnx import _keys
from jaxonnx._core import ConversionError

_KINDS = ("a shape tuple such as ('B', 30), a jax.ShapeDtypeStruct, or an array (a typed "
          "PRNG key such as jax.random.key(0) included)")


# One process-wide scope per set of constraints: the same shape text gives the
# same JAX dims on every call (each conversion still traces afresh: see _trace.py).
_SCOPE = export.SymbolicScope()


@functools.lru_cache(maxsize=64)
def _constrained_scope(constraints):
    try:
        return export.SymbolicScope(list(constraints))
    except Exception as e:  # JAX raises ValueError or its own parse errors
        raise ConversionError(f"constraints {list(constraints)!r}: {e}") from None


def constraints_of(constraints):
    """The constraints option as a tuple of strings (each "T <= 512", ">=" or "<=";
    "==" too, which JAX reads as a rewrite of the left side)."""
    if constraints is None:
        return ()
    if isinstance(constraints, str):
        constraints = [constraints]
    if not isinstance(constraints, (list, tuple)) or \
            not all(isinstance(c, str) and c.strip() for c in constraints):
        raise ConversionError(f"constraints must be a list of strings such as 'T <= 512'; "
                              f"got {constraints!r}")
    return tuple(c.strip() for c in constraints)


def _scope_of(specs, constraints=()):
    """The one symbolic scope of all inputs: the one ShapeDtypeStruct inputs already
    use (their JAX dims carry it), else the scope of `constraints`."""
    wanted = _constrained_scope(constraints) if constraints else _SCOPE
    for spec in specs:
        if isinstance(spec, jax.ShapeDtypeStruct):
            for d in spec.shape:
                if export.is_symbolic_dim(d):
                    if constraints and d.scope is not wanted:
                        raise ConversionError(
                            f"an input's dim {d} was made by jax.export.symbolic_shape in a scope "
                            f"of its own, so constraints= cannot apply to it: give the shape as "
                            f"text (('B', 'T')), or make it with symbolic_shape(..., "
                            f"constraints={list(constraints)!r}) and leave constraints= out")
                    return d.scope
    return wanted


@functools.lru_cache(maxsize=256)
def _parse(text, scope):
    return export.symbolic_shape(text, scope=scope)


def _shape_tuple(index, shape, dtype, scope):
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer, str)):
            raise ConversionError(
                f"input {index}: dim {d!r} of {tuple(shape)!r} must be an int or a symbol string "
                f"such as 'B'")
        if isinstance(d, (int, np.integer)) and d < 0:
            raise ConversionError(f"input {index}: dim {d} of {tuple(shape)!r} is negative")
        if isinstance(d, str) and not d.strip():
            raise ConversionError(f"input {index}: an empty string is not a symbolic dim")
    if not any(isinstance(d, str) for d in shape):
        return jax.ShapeDtypeStruct(tuple(int(d) for d in shape), dtype)
    text = ", ".join(str(d) for d in shape)
    try:
        dims = _parse(text, scope)
    except Exception as e:  # JAX raises several types for a bad expression
        raise ConversionError(f"input {index}: cannot read the shape {tuple(shape)!r}: {e}") from None
    return jax.ShapeDtypeStruct(dims, dtype)


def normalize_params(params: dict, enable_double_precision: bool) -> list[jax.ShapeDtypeStruct]:
    """input_params values -> specs; a Python scalar takes JAX's default dtype
    for it (int32 or int64 by 64-bit mode, say), as it would calling fn in JAX."""
    specs = []
    for name, value in params.items():
        if not isinstance(name, str) or not name:
            raise ConversionError(f"input_params keys must be non-empty strings; got {name!r}")
        if isinstance(value, (bool, int, float, complex)):
            value = np.asarray(value, jax.dtypes.canonicalize_dtype(type(value)))
        value = np.asarray(value) if not hasattr(value, "dtype") else value
        if np.dtype(value.dtype).itemsize == 8 and np.dtype(value.dtype).kind in "iuf" \
                and not enable_double_precision:
            raise ConversionError(
                f"input_params[{name!r}] is {np.dtype(value.dtype).name}, which JAX truncates to "
                f"32 bits unless 64-bit mode is on; pass enable_double_precision=True or a 32-bit value")
        specs.append(jax.ShapeDtypeStruct(tuple(value.shape), value.dtype))
    return specs


def normalize_inputs(inputs, enable_double_precision: bool,
                     constraints=()) -> list[jax.ShapeDtypeStruct]:
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, (list, tuple)):
        raise ConversionError(
            f"inputs must be a list with one entry per positional argument, each {_KINDS}; "
            f"got {type(inputs).__name__}")
    float_dtype = np.dtype(np.float64 if enable_double_precision else np.float32)
    scope = _scope_of(inputs, constraints_of(constraints))
    specs = []
    for i, spec in enumerate(inputs):
        if isinstance(spec, jax.ShapeDtypeStruct) and any(isinstance(d, str) for d in spec.shape):
            out = _shape_tuple(i, spec.shape, spec.dtype, scope)  # ("B", 3): symbolic, typed
        elif isinstance(spec, jax.ShapeDtypeStruct):
            out = spec
        elif isinstance(spec, (tuple, list)):
            out = _shape_tuple(i, spec, float_dtype, scope)
        elif hasattr(spec, "shape") and hasattr(spec, "dtype"):
            out = jax.ShapeDtypeStruct(tuple(spec.shape), spec.dtype)
        else:
            raise ConversionError(f"input {i}: expected {_KINDS}; got {type(spec).__name__} {spec!r}")
        if _keys.is_key(out.dtype):
            # A typed PRNG key (jax.random.key): the model input is its uint32 key data.
            specs.append(out)
            continue
        if np.dtype(out.dtype) in (np.float64, np.int64, np.uint64, np.complex128) \
                and not enable_double_precision:
            raise ConversionError(
                f"input {i} is {np.dtype(out.dtype).name}, which JAX truncates to 32 bits unless "
                f"64-bit mode is on; pass enable_double_precision=True")
        specs.append(out)
    return specs


_COMPARISON = re.compile(r"comparison '([^']+)' ([<>=!]=?) '([^']+)' is inconclusive")
_MIN_OF = re.compile(r"\bmin\((\d+), (\w+)\)|\bmin\((\w+), (\d+)\)")


def constraint_hint(error) -> str:
    """Advice for a JAX error of shape polymorphism that a constraint on a symbolic
    dim decides (or that needs the size computed on dims); "" for any other error."""
    text = str(error)
    if type(error).__name__ == "InconclusiveDimensionOperation":
        m = _COMPARISON.search(text)
        what = f"'{m.group(1)} {m.group(2)} {m.group(3)}'" if m else "a comparison of a symbolic dim"
        sym, num = (m.group(1), m.group(3)) if m and m.group(3).isdigit() else (None, None)
        example = f"constraints=['{sym} <= {num}']" if sym else "constraints=['T <= 512']"
        return (f"; JAX cannot decide {what} for every size: state the sizes the model takes "
                f"with {example} (or the bound the model has; an option of to_onnx and "
                f"jaxonnx.keras.export), and the model is valid for those")
    m = _MIN_OF.search(text)
    if m and "incompatible shapes" in text.lower():
        num, sym = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
        return (f"; {m.group(0)} is a slice of a {num}-long table to the length {sym}: with "
                f"constraints=['{sym} <= {num}'] (an option of to_onnx and jaxonnx.keras.export) "
                f"JAX knows the slice is {sym} long")
    if "Shapes must be 1D sequences of concrete values" in text:
        return ("; a size computed as an array from a symbolic dim (jnp.minimum(T, n), say) was "
                "used as a shape: compute it on the dims themselves (Python's min(T, n), which "
                "constraints=['T <= n'] decides), or export with a fixed length")
    return ""
