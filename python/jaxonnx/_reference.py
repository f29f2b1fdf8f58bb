"""A bound call's reference: the original callable traced as a function of the
primitive's operands, made on first use.

Most conversions never read it: the plugin lowers the primitive from its
operands and params. It is needed to run the primitive (eager, XLA), to
differentiate or vmap it, and by a plugin that falls back to the original's
decomposition (jaxpr_import.cpp hands it to the core as a jaxpr made when a
lowering asks for it). Until then it holds the call (the original and its
arguments) and the output avals, which do not need a trace.
"""

from __future__ import annotations

import jax
from jax import core as jax_core
from jax._src import source_info_util
from jax.extend import core as jex_core

from jaxonnx._core import ConversionError

source_info_util.register_exclusion(__file__)


class Reference:
    """The reference of one bound call. `closed` is a ClosedJaxpr taking the
    operands; `out_avals` are its output avals (known without tracing)."""

    __slots__ = ("_call", "_closed", "out_avals", "__weakref__")

    def __init__(self, out_avals, closed=None, call=None):
        self.out_avals = tuple(out_avals)
        self._closed = closed
        self._call = call  # (original, args, kwargs, operands, source) until traced

    @classmethod
    def traced(cls, closed):
        return cls([v.aval for v in closed.jaxpr.outvars], closed=closed)

    @property
    def is_traced(self):
        return self._closed is not None

    @property
    def closed(self):
        if self._closed is None:
            original, args, kwargs, operands, source = self._call
            closed = trace(original, args, kwargs, operands, source)
            if closed is None:
                raise ConversionError(
                    f"the reference of a call of {getattr(original, '__qualname__', original)!r} "
                    f"reads a traced value that is not an operand of its binding spec, so the "
                    f"plugin's primitive cannot stand for it; convert with crisp=False")
            self._closed, self._call = closed, None
        return self._closed

    def __call__(self, *operands):
        closed = self.closed
        return jax_core.eval_jaxpr(closed.jaxpr, closed.consts, *operands)

    def __repr__(self):
        # The same whether traced yet or not: jaxpr text (onnx_function's
        # unique=True fingerprint, records) must not depend on it.
        return f"Reference({', '.join(a.str_short() for a in self.out_avals)})"


def trace(original, args, kwargs, operands, source, return_shape=False):
    """original(*args, **kwargs) as a ClosedJaxpr taking `operands` (found by
    identity among what it reads); None when it also reads another traced
    value (the operands do not determine it). Its equations get `source` (the
    bound call's source_info), whenever it is traced: errors and provenance
    name the user's line. With return_shape, also the output structure (as
    jax.make_jaxpr gives it)."""
    with source_info_util.user_context(source.traceback, name_stack=source.name_stack):
        closed, shape = jax.make_jaxpr(lambda: original(*args, **kwargs), return_shape=True)()
    closed = _as_function_of(closed, operands)
    return (closed, shape) if return_shape else closed


def _as_function_of(closed, operands):
    """`closed` (traced with no inputs) with the constants that are the operands
    turned into its inputs, in operand order; None when it also reads another
    traced value (then the operands do not determine it)."""
    jaxpr = closed.jaxpr
    by_id = {id(c): v for v, c in zip(jaxpr.constvars, closed.consts)}
    invars, taken = [], set()
    for o in operands:
        v = by_id.get(id(o))
        if v is None or id(o) in taken:  # unread (or read through an earlier operand)
            v = jex_core.Var(jax.typeof(o))
        taken.add(id(o))
        invars.append(v)
    used = {id(v) for v in invars}
    constvars, consts = [], []
    for v, c in zip(jaxpr.constvars, closed.consts):
        if id(v) in used:
            continue
        if isinstance(c, jax_core.Tracer):
            return None
        constvars.append(v)
        consts.append(c)
    return jex_core.ClosedJaxpr(jaxpr.replace(constvars=constvars, invars=invars), consts)
