"""Typed PRNG keys (key<fry>) as their uint32 key data, for the core: the one
place of jaxonnx's key policy (which keys are mapped, and to what).

The core sees a key<fry> array of shape S as its key data of shape S + (2,)
(key_data_layout, which jaxpr_import.cpp applies). Shape ops on keys (slice, squeeze, reshape, select_n,
gather, ... as in `a, b = jax.random.split(k)`) have params for the logical
shape, so a jaxpr holding keys is re-traced first with every key replaced by its
key data: those ops become the same ops vmapped over the trailing key-data axis
(their batching rules adjust the params), jit calls holding keys are inlined,
scan / while / cond bodies are re-traced the same way, and keys stay typed only
from a random_wrap into one random_* primitive (lowered by the lax_random
plugin). A jaxpr without keys is left untouched.
"""

from __future__ import annotations

import jax

from jaxonnx._core import ConversionError

def is_key(dtype) -> bool:
    """Whether `dtype` is a typed PRNG key dtype (key<impl>)."""
    try:
        return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    except TypeError:
        return False


def key_data_layout(dtype):
    """How a typed key of `dtype` reaches the core: (the NumPy name of its key
    data's dtype, the key data's trailing shape), or None when jaxonnx does not
    map it. Only threefry2x32 keys are mapped: their key data is uint32[..., 2],
    so random_wrap / random_unwrap are identities and a key input of the model
    is the key data of jax.random.key_data."""
    if not is_key(dtype) or dtype._impl.name != "threefry2x32":
        return None
    return "uint32", tuple(int(d) for d in dtype._impl.key_shape)


def _is_key(aval):
    return is_key(getattr(aval, "dtype", None))


def _sub_jaxprs(params):
    for v in params.values():
        for sub in (v if isinstance(v, (tuple, list)) else (v,)):
            if hasattr(getattr(sub, "jaxpr", sub), "eqns"):
                yield sub


# Keys enter a jaxpr as inputs or constants, or are made by these; every other
# primitive yielding a key takes one. Checking names, not every variable's dtype,
# keeps the pre-pass cheap on the (usual) programs without keys.
_KEY_MAKERS = frozenset({"random_seed", "random_wrap"})


def _has_keys(jaxpr):
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    if any(_is_key(v.aval) for v in (*jaxpr.invars, *jaxpr.constvars)):
        return True
    return _makes_keys(jaxpr, set())


def _makes_keys(jaxpr, seen):
    for e in jaxpr.eqns:
        if e.primitive.name in _KEY_MAKERS:
            return True
        for sub in _sub_jaxprs(e.params):
            sub = getattr(sub, "jaxpr", sub)
            if id(sub) not in seen:  # a body shared by many calls is walked once
                seen.add(id(sub))
                if any(_is_key(v.aval) for v in sub.constvars) or _makes_keys(sub, seen):
                    return True
    return False


def physical_keys(closed):
    """`closed` with keys replaced by key data (a no-op without keys)."""
    if not _has_keys(closed):
        return closed
    from jax._src import core

    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in map(core.physical_aval, closed.in_avals)]
    consts = [jax.random.key_data(c) if _is_key(c) else c for c in closed.consts]
    return jax.make_jaxpr(lambda *a: _eval_physical(closed.jaxpr, consts, a))(*specs)


def _eval_physical(jaxpr, consts, args):
    from jax._src import source_info_util
    from jax.extend.core import Literal

    env = dict(zip((*jaxpr.constvars, *jaxpr.invars), (*consts, *args)))
    read = lambda v: v.val if isinstance(v, Literal) else env[v]  # noqa: E731
    for eqn in jaxpr.eqns:
        with source_info_util.user_context(eqn.source_info.traceback,
                                           name_stack=eqn.source_info.name_stack), eqn.ctx.manager:
            outs = _eval_eqn_physical(eqn, [read(v) for v in eqn.invars])
        if not eqn.primitive.multiple_results:
            outs = [outs]
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def _eval_eqn_physical(eqn, ins):
    from jax._src.random import prng

    prim, params, name = eqn.primitive, dict(eqn.params), eqn.primitive.name
    in_keys = [_is_key(v.aval) for v in eqn.invars]
    out_keys = [_is_key(v.aval) for v in eqn.outvars]
    if name in ("random_wrap", "random_unwrap", "random_clone"):
        return ins[0]
    if name in ("random_seed", "random_bits", "random_split", "random_fold_in", "random_gamma"):
        if in_keys[0]:
            ins[0] = prng.random_wrap_p.bind(ins[0], impl=eqn.invars[0].aval.dtype._impl)
        out = prim.bind(*ins, **params)
        return prng.random_unwrap_p.bind(out) if out_keys[0] else out
    subs = list(_sub_jaxprs(params))
    if not any(in_keys) and not any(out_keys) and not any(_has_keys(s) for s in subs):
        return prim.bind(*ins, **prim.get_bind_params(params))
    if name in ("jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call"):
        call = params.get("jaxpr", params.get("call_jaxpr"))  # inlined (custom rules dropped)
        outs = _eval_physical(call.jaxpr, call.consts, ins)
        return outs if prim.multiple_results else outs[0]
    if subs:  # scan / while / cond: the same primitive over re-traced bodies
        for k, v in params.items():
            if isinstance(v, (tuple, list)) and v and all(hasattr(x, "eqns") for x in map(
                    lambda x: getattr(x, "jaxpr", x), v)):
                params[k] = type(v)(physical_keys(x) for x in v)
            elif hasattr(getattr(v, "jaxpr", v), "eqns") and hasattr(v, "consts"):
                params[k] = physical_keys(v)
        return prim.bind(*ins, **params)
    if not any(in_keys):
        raise ConversionError(f"cannot convert '{name}' producing PRNG keys from non-key operands")
    # A shape op on keys: the same op on each word of the key data.
    fn = jax.vmap(lambda *a: prim.bind(*a, **params),
                  in_axes=[-1 if k else None for k in in_keys],
                  out_axes=[-1 if k else None for k in out_keys] if prim.multiple_results
                  else (-1 if out_keys[0] else None))
    return fn(*ins)


# The lax_random plugin reproduces JAX's partitionable threefry bits, JAX's
# default; the legacy algorithm binds the same primitives, so it is refused here.
_RANDOM_PRIMITIVES = {"random_bits", "random_split", "random_gamma"}


def _uses_random(jaxpr):
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    return any(e.primitive.name in _RANDOM_PRIMITIVES or any(map(_uses_random, _sub_jaxprs(e.params)))
               for e in jaxpr.eqns)


def check_threefry_partitionable(closed):
    if not jax.config.jax_threefry_partitionable and _uses_random(closed.jaxpr):
        raise ConversionError(
            "random_bits/random_split are lowered with JAX's partitionable threefry algorithm, "
            "but jax_threefry_partitionable is False; set it to True to convert")
