"""Warns about jax.debug.print / jax.debug.callback, which the model drops.

The host_callbacks plugin lowers them to nothing (an ONNX model cannot call
Python); this names each one's source line so the user knows what went away.
"""

from __future__ import annotations

import warnings

from jax.extend import core as jex_core

from jaxonnx import _source

DROPPED = {"debug_print": "jax.debug.print", "debug_callback": "jax.debug.callback"}


def _walk(jaxpr, seen):
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in DROPPED:
            yield name, _source.describe(eqn.source_info)
        for sub in jex_core.jaxprs_in_params(eqn.params):
            if id(sub) not in seen:
                seen.add(id(sub))
                yield from _walk(sub, seen)


def warn_dropped(closed) -> None:
    """One warning per debug_print / debug_callback in `closed`, nested jaxprs included."""
    for name, where in dict.fromkeys(_walk(closed.jaxpr, set())):
        warnings.warn(f"jaxonnx: {DROPPED[name]} at {where} is dropped: an ONNX model cannot "
                      f"call Python, so it prints nothing", UserWarning, stacklevel=3)
