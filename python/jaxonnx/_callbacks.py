"""Warns about jax.debug.print / jax.debug.callback, which the model drops.

The host_callbacks plugin lowers them to nothing (an ONNX model cannot call
Python); this names each one's source line so the user knows what went away.
"""

from __future__ import annotations

import warnings

from jaxonnx import _source

DROPPED = {"debug_print": "jax.debug.print", "debug_callback": "jax.debug.callback"}


def warn_dropped(program) -> None:
    """One warning per debug_print / debug_callback of `program` (a
    _trace.TracedProgram), nested jaxprs included, per source line."""
    for name, where in dict.fromkeys((name, _source.describe(info)) for name, info in program.dropped):
        warnings.warn(f"jaxonnx: {DROPPED[name]} at {where} is dropped: an ONNX model cannot "
                      f"call Python, so it prints nothing", UserWarning, stacklevel=3)
