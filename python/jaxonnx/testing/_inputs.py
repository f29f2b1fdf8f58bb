"""Testcase variants and inputs: the dtypes and batch sizes a check runs, random
inputs, and the tolerances JAX is compared at."""

from __future__ import annotations

import contextlib
import dataclasses

import jax
import numpy as np
from jax import export


# Concrete sizes a symbolic dim takes when the model runs, and the size it takes
# in a static variant.
BATCHES = (1, 7)
STATIC_BATCH = 3


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way of converting a testcase: float dtype, and symbolic dims kept or fixed."""
    dtype: str = "float32"
    symbolic: bool = True

    def __str__(self):
        return f"{'f64' if self.dtype == 'float64' else 'f32'}-" \
               f"{'symbolic' if self.symbolic else 'static'}"


VARIANTS = tuple(Variant(d, s) for d in ("float32", "float64") for s in (False, True))


# ---------------------------------------------------------------- input specs

def _split_spec(spec):
    """An input spec is a shape tuple (float, in the variant's dtype) or
    (shape, dtype) for a fixed dtype, e.g. (("B", 4), "int32")."""
    if isinstance(spec, (tuple, list)) and len(spec) == 2 and isinstance(spec[0], (tuple, list)):
        return tuple(spec[0]), np.dtype(spec[1])
    if isinstance(spec, (tuple, list)):
        return tuple(spec), None
    raise TypeError(f"an input spec is a shape tuple such as ('B', 8) or (shape, dtype); "
                    f"got {spec!r}")


def _has_symbol(specs):
    return any(isinstance(d, str) for s in specs for d in _split_spec(s)[0])


def _concrete(shape, batch):
    return tuple(batch if isinstance(d, str) else d for d in shape)


def _resolve(specs, variant):
    """(shapes, dtypes) of the inputs in `variant`: symbols stay or become STATIC_BATCH."""
    shapes, dtypes = [], []
    for spec in specs:
        shape, dtype = _split_spec(spec)
        shapes.append(shape if variant.symbolic else _concrete(shape, STATIC_BATCH))
        dtypes.append(dtype if dtype is not None else np.dtype(variant.dtype))
    return shapes, dtypes


def _shape_dtype_structs(shapes, dtypes):
    scope = export.SymbolicScope()
    out = []
    for shape, dtype in zip(shapes, dtypes):
        if any(isinstance(d, str) for d in shape):
            dims = export.symbolic_shape(", ".join(str(d) for d in shape), scope=scope)
        else:
            dims = tuple(int(d) for d in shape)
        out.append(jax.ShapeDtypeStruct(dims, dtype))
    return out


def packed(x):
    """`x` as the model carries it: a complex array as float[..., 2] (real,
    imaginary), anything else as it is."""
    x = np.asarray(x)
    if not np.iscomplexobj(x):
        return x
    return np.stack([x.real, x.imag], axis=-1)


def random_input(shape, dtype, rng):
    """Standard-normal floats (complex: both parts), small integers, random booleans."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(size=shape) + 1j * rng.standard_normal(size=shape)).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -20), min(info.max, 20) + 1, size=shape).astype(dtype)
    return rng.standard_normal(size=shape).astype(dtype)


def _tolerance(dtype):
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        return 1e-9, 1e-9
    if dtype == np.float16 or dtype.name == "bfloat16":
        return 1e-2, 1e-2
    return 1e-5, 1e-5


def _x64(on):
    return jax.enable_x64(True) if on else contextlib.nullcontext()


def _assert_close(got, expected, what, rtol=None, atol=None):
    expected = np.asarray(expected)
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != {expected.dtype}"
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    if np.issubdtype(expected.dtype, np.inexact):
        r, a = _tolerance(expected.dtype)
        np.testing.assert_allclose(got, expected, rtol=rtol or r, atol=atol or a, equal_nan=True,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(got, expected, err_msg=what)
