"""The user's callable traced to a ClosedJaxpr, afresh on every conversion, and
walked once for what the steps before lowering need (TracedProgram).

JAX caches traces keyed on the callable (weakly) and the input types. Tracing
the user's own object would let a second conversion of the same module or
function reuse the first trace, constants and all: weights changed in place
since then would be missing from the model. Each conversion therefore traces a
new function object, so JAX's cache never answers for it.
"""

from __future__ import annotations

import dataclasses

import jax
from jax._src.interpreters import partial_eval as pe

from jaxonnx import _callbacks, _input_specs, _keys, _nnx, _runtime_flags, _source, _supported
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
    """make_jaxpr of wrap(fn) over specs + param_specs, as a TracedProgram; an
    error of JAX or flax while tracing becomes a ConversionError naming the
    user's source line."""
    call = _fresh(fn, len(specs), list(param_names), wrap)
    try:
        with _runtime_flags.dropout_switch():
            closed = _without_dead_equations(jax.make_jaxpr(call)(*specs, *param_specs))
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
        elif symbolic := _input_specs.constraint_hint(e):
            hint = symbolic
        elif training:
            hint = (f"; the module is in training mode ({', '.join(training)}): call "
                    f"model.eval() before converting")
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        inner = _source.library_line(e.__traceback__)
        if inner and inner != where:  # the line in the model's library (keras, flax) that failed
            where = f"{where}, in {inner}"
        err = ConversionError(
            f"tracing {_name(fn)} failed at {where}: {type(e).__name__}: {first}{hint}")
        raise err from None  # the message says what and where; flax's frames would not
    return TracedProgram.of(closed)


def sub_jaxprs(params):
    """(label, jaxpr) of every jaxpr in an equation's params: a ClosedJaxpr's or
    a Jaxpr, alone or in a tuple or list (cond's branches: "branches[1]")."""
    for name, v in params.items():
        many = isinstance(v, (tuple, list))
        for k, sub in enumerate(v if many else (v,)):
            inner = getattr(sub, "jaxpr", sub)
            if hasattr(inner, "eqns"):
                yield (f"{name}[{k}]" if many else name), inner


@dataclasses.dataclass
class TracedProgram:
    """A traced program and what one walk over it (nested jaxprs included, a
    jaxpr shared by many equations once) found for the steps before lowering:
    _keys (has_keys, uses_random), _callbacks (dropped), _supported
    (unsupported) and _record (calls, spelled out by equations())."""

    closed: object        # the jax ClosedJaxpr
    has_keys: bool        # typed PRNG keys enter (inputs, constants) or are made
    uses_random: bool     # random_bits / random_split / random_gamma anywhere
    dropped: list         # [(primitive, source_info)] of debug_print / debug_callback, in order
    unsupported: tuple | None  # the first (eqn, var, dtype name) no model can hold, nested first
    # [(eqn, context, None)] of each equation as the walk met it, context the
    # path of the equations and params holding it ("/scan.jaxpr"); a shared
    # jaxpr met again is one (None, context, (start, end, first context)) that
    # stands for calls[start:end] again: equations() spells the calls out
    calls: list

    @classmethod
    def of(cls, closed):
        facts = cls(closed, False, False, [], None, [])
        jaxpr = closed.jaxpr
        facts.has_keys = any(_keys.is_key(getattr(v.aval, "dtype", None))
                             for v in (*jaxpr.invars, *jaxpr.constvars))
        calls = facts.calls
        # id -> (jaxpr, (start, end, context) of its first walk in calls); the
        # jaxpr is held so that no id is reused
        seen = {}

        def walk(jaxpr, context):
            for eqn in jaxpr.eqns:
                name = eqn.primitive.name
                calls.append((eqn, context, None))
                facts.has_keys = facts.has_keys or name in _keys.KEY_MAKERS
                facts.uses_random = facts.uses_random or name in _keys.RANDOM_PRIMITIVES
                if name in _callbacks.DROPPED:
                    facts.dropped.append((name, eqn.source_info))
                for label, sub in sub_jaxprs(eqn.params):
                    inner = f"{context}/{name}.{label}"
                    if id(sub) in seen:
                        calls.append((None, inner, seen[id(sub)][1]))
                        continue
                    facts.has_keys = facts.has_keys or any(
                        _keys.is_key(getattr(v.aval, "dtype", None)) for v in sub.constvars)
                    start = len(calls)
                    walk(sub, inner)
                    seen[id(sub)] = (sub, (start, len(calls), inner))
                if facts.unsupported is None:  # after the nested ones: the innermost is named
                    for v in (*eqn.invars, *eqn.outvars):
                        if (dt := _supported.unsupported(v.aval)):
                            facts.unsupported = (eqn, v, dt)
                            break

        walk(jaxpr, "")
        return facts

    def with_key_data(self):
        """This program with typed PRNG keys replaced by their key data (_keys's
        policy), walked again; itself when it has no keys."""
        return TracedProgram.of(_keys.physical(self.closed)) if self.has_keys else self

    def equations(self):
        """(eqn, context) of every equation in the order the lowering meets
        them, each call of a shared jaxpr again: calls spelled out, the jaxpr
        not walked again."""
        def spell(start, end, first, context):
            for eqn, where, again in self.calls[start:end]:
                where = context + where[len(first):]
                if again is None:
                    yield eqn, where
                else:
                    yield from spell(*again, where)

        yield from spell(0, len(self.calls), "", "")
