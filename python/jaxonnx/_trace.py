"""The user's callable traced to a ClosedJaxpr, afresh on every conversion.

JAX caches traces keyed on the callable (weakly) and the input types. Tracing
the user's own object would let a second conversion of the same module or
function reuse the first trace, constants and all: weights changed in place
since then would be missing from the model. Each conversion therefore traces a
new function object, so JAX's cache never answers for it.
"""

from __future__ import annotations

import jax
from jax._src.interpreters import partial_eval as pe

from jaxonnx import _nnx, _runtime_flags, _source
from jaxonnx._core import ConversionError


def _fresh(fn, n_args, param_names, wrap):
    """A new function object calling fn; input_params go in as keywords."""
    target = wrap(_nnx.private_copy(fn) or fn)

    def call(*args):
        kwargs = dict(zip(param_names, args[n_args:]))
        return target(*args[:n_args], **kwargs)

    return call


def _without_dead_equations(closed):
    """closed without the equations no output needs (the updates a module copy
    makes to its own Rngs counts and statistics, say), nor the constants only
    they used; every input stays."""
    jaxpr = closed.jaxpr
    n_const, n_in = len(jaxpr.constvars), len(jaxpr.invars)
    flat = pe.convert_constvars_jaxpr(jaxpr)
    kept, used = pe.dce_jaxpr(flat, [True] * len(jaxpr.outvars),
                              instantiate=[False] * n_const + [True] * n_in)
    n_kept = sum(used[:n_const])
    consts = [c for c, u in zip(closed.consts, used[:n_const]) if u]
    kept = kept.replace(constvars=kept.invars[:n_kept], invars=kept.invars[n_kept:])
    return jax.extend.core.ClosedJaxpr(kept, consts)


def _name(fn):
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def trace(fn, specs, param_specs, param_names, wrap=lambda target: target):
    """make_jaxpr of wrap(fn) over specs + param_specs; an error of JAX or flax
    while tracing becomes a ConversionError naming the user's source line."""
    call = _fresh(fn, len(specs), list(param_names), wrap)
    try:
        with _runtime_flags.dropout_switch():
            return _without_dead_equations(jax.make_jaxpr(call)(*specs, *param_specs))
    except ConversionError:
        raise
    except Exception as e:  # whatever JAX, flax or the user's code raised
        where = _source.user_line(e.__traceback__)
        hint = ""
        training = _nnx.training_modules(fn)
        if type(e).__name__ == "TraceContextError":  # flax: state of a module fn closes over
            hint = ("; a module that fn closes over cannot update its state (Rngs, statistics, "
                    "caches) inside the trace: pass the module itself, or its bound method, "
                    "as fn, and jaxonnx traces a private copy")
        elif branch := _runtime_flags.branch_hint(e, len(specs), list(param_names)):
            hint = branch
        elif training:
            hint = (f"; the module is in training mode ({', '.join(training)}): call "
                    f"model.eval() before converting")
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        err = ConversionError(
            f"tracing {_name(fn)} failed at {where}: {type(e).__name__}: {first}{hint}")
        raise err from None  # the message says what and where; flax's frames would not
