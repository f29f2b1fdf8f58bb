"""NCHW bridges (inputs_as_nchw, outputs_as_nchw): the model takes or gives
NCHW where the JAX function works in NHWC.

The bridge is a transpose traced into the program, so it reaches the core as
an ordinary equation; the optimizer then cancels it against the transpose a
conv's lowering puts around its ONNX Conv (NCHW), leaving a model whose first
and last convs touch the NCHW interface directly (docs/optimizer.md).
"""

from __future__ import annotations

import jax
from jax import lax

from jaxonnx._core import ConversionError

TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)


def indices(value, kind, count=None):
    """A validated tuple of distinct in-range ints (count None: not known yet)."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ConversionError(f"{kind} must be a list of indices; got {value!r}")
    out = tuple(value)
    for i in out:
        if isinstance(i, bool) or not isinstance(i, int) or i < 0 or (count is not None and i >= count):
            bound = f" below {count}" if count is not None else ""
            raise ConversionError(f"{kind}: {i!r} is not an index{bound}")
    if len(set(out)) != len(out):
        raise ConversionError(f"{kind}: repeated index in {list(out)}")
    return out


def input_specs(specs, nchw):
    """The model's specs: NCHW shapes for the bridged inputs (given in NHWC)."""
    out = list(specs)
    for i in nchw:
        shape = specs[i].shape
        if len(shape) != 4:
            raise ConversionError(
                f"inputs_as_nchw: input {i} has rank {len(shape)} ({tuple(shape)}); an NCHW "
                f"bridge needs rank 4 (give the input's NHWC shape, as the function sees it)")
        out[i] = jax.ShapeDtypeStruct(tuple(shape[p] for p in TO_NCHW), specs[i].dtype)
    return out


def bridge(nchw_in, nchw_out):
    """Wraps a callable: bridged inputs arrive NCHW and go in NHWC; bridged
    outputs (indices into the flattened outputs) leave NCHW."""
    def wrap(target):
        if not nchw_in and not nchw_out:
            return target

        def call(*args, **kwargs):
            args = [lax.transpose(a, TO_NHWC) if i in nchw_in else a for i, a in enumerate(args)]
            outs, tree = jax.tree.flatten(target(*args, **kwargs))
            for i in nchw_out:
                if i >= len(outs):
                    raise ConversionError(f"outputs_as_nchw: index {i}, but the function has "
                                          f"{len(outs)} outputs")
                if outs[i].ndim != 4:
                    raise ConversionError(f"outputs_as_nchw: output {i} has rank {outs[i].ndim} "
                                          f"({tuple(outs[i].shape)}); an NCHW bridge needs rank 4")
            outs = [lax.transpose(o, TO_NCHW) if i in nchw_out else o for i, o in enumerate(outs)]
            return jax.tree.unflatten(tree, outs)

        return call

    return wrap
