"""Typed PRNG keys (key<fry>, key<rbg>, key<urbg>) as their uint32 key data, for
the core: the one place of jaxonnx's key policy (which keys are mapped, and to
what).

The core sees a key array of shape S as its key data of shape S + (2,) for
threefry2x32, S + (4,) for rbg and unsafe_rbg (key_data_layout, which
jaxpr_import.cpp applies). Shape ops on keys (slice, squeeze, reshape, select_n,
gather, ... as in `a, b = jax.random.split(k)`) have params for the logical
shape, so a jaxpr holding keys is re-traced first with every key replaced by its
key data: those ops become the same ops vmapped over the trailing key-data axis
(their batching rules adjust the params), jit calls holding keys are inlined,
scan / while / cond bodies are re-traced the same way, and keys stay typed only
from a random_wrap into one random_* primitive (lowered by the lax_random
plugin). A random_* primitive on an rbg or unsafe_rbg key is replaced by JAX's
own implementation of it on the key data (threefry2x32, iota_2x32_shape and
rng_bit_generator, which the lax_random plugin lowers bit for bit with XLA),
as JAX's lowering does. A jaxpr without keys is left untouched.
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
    map it. threefry2x32 keys (uint32[..., 2]) and rbg / unsafe_rbg keys
    (uint32[..., 4]) are mapped: random_wrap / random_unwrap are identities and
    a key input of the model is the key data of jax.random.key_data."""
    if not is_key(dtype) or dtype._impl.name not in _MAPPED_IMPLS:
        return None
    return "uint32", tuple(int(d) for d in dtype._impl.key_shape)


# threefry2x32 keys reach the lax_random plugin's random_* lowerings; the others
# are replaced by their implementation (_inline_impl).
_MAPPED_IMPLS = frozenset({"threefry2x32", "rbg", "unsafe_rbg"})


def _is_key(aval):
    return is_key(getattr(aval, "dtype", None))


def _sub_jaxprs(params):
    for v in params.values():
        for sub in (v if isinstance(v, (tuple, list)) else (v,)):
            if hasattr(getattr(sub, "jaxpr", sub), "eqns"):
                yield sub


# Keys enter a jaxpr as inputs or constants, or are made by these; every other
# primitive yielding a key takes one. Checking names, not every variable's dtype,
# keeps the pre-pass cheap on the (usual) programs without keys
# (_trace.TracedProgram's walk looks for them).
KEY_MAKERS = frozenset({"random_seed", "random_wrap"})


def _has_keys(jaxpr):
    """Whether keys enter or are made in `jaxpr`: a nested body, while a program
    with keys is re-traced (a whole program's answer is TracedProgram.has_keys)."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    if any(_is_key(v.aval) for v in (*jaxpr.invars, *jaxpr.constvars)):
        return True
    return _makes_keys(jaxpr, set())


def _makes_keys(jaxpr, seen):
    for e in jaxpr.eqns:
        if e.primitive.name in KEY_MAKERS:
            return True
        for sub in _sub_jaxprs(e.params):
            sub = getattr(sub, "jaxpr", sub)
            if id(sub) not in seen:  # a body shared by many calls is walked once
                seen.add(id(sub))
                if any(_is_key(v.aval) for v in sub.constvars) or _makes_keys(sub, seen):
                    return True
    return False


def physical(closed):
    """`closed` (a ClosedJaxpr) re-traced with keys as key data (itself without
    keys). _trace.TracedProgram.with_key_data applies it to a whole program."""
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
        tb = eqn.source_info.traceback
        if tb is None or next(source_info_util.user_frames(tb), None) is None:
            # An equation of an inlined jit (jax.random.uniform's, say) keeps the caller's line.
            tb = source_info_util.current().traceback
        with source_info_util.user_context(tb, name_stack=eqn.source_info.name_stack), eqn.ctx.manager:
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
        impl = params["impl"] if name == "random_seed" else eqn.invars[0].aval.dtype._impl
        if impl.name != "threefry2x32":
            return _inline_impl(name, impl, eqn, ins, params)
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
                params[k] = type(v)(physical(x) for x in v)
            elif hasattr(getattr(v, "jaxpr", v), "eqns") and hasattr(v, "consts"):
                params[k] = physical(v)
        return prim.bind(*ins, **params)
    if not any(in_keys):
        raise ConversionError(f"cannot convert '{name}' producing PRNG keys from non-key operands")
    # A shape op on keys: the same op on each word of the key data.
    fn = jax.vmap(lambda *a: prim.bind(*a, **params),
                  in_axes=[-1 if k else None for k in in_keys],
                  out_axes=[-1 if k else None for k in out_keys] if prim.multiple_results
                  else (-1 if out_keys[0] else None))
    return fn(*ins)


def _inline_impl(name, impl, eqn, ins, params):
    """JAX's implementation of a random_* primitive on the key data of a key of
    `impl` (rbg, unsafe_rbg), as JAX lowers it: its jaxpr is physical but for
    random_gamma, whose implementation draws from typed keys (re-traced)."""
    from jax._src.random import core as random_core
    from jax._src.random import prng

    if impl.name not in _MAPPED_IMPLS:
        from jax._src import source_info_util

        from jaxonnx._source import describe
        raise ConversionError(f"'{name}' on PRNG keys of the '{impl.name}' implementation at "
                              f"{describe(source_info_util.current())}: only {', '.join(sorted(_MAPPED_IMPLS))} "
                              f"keys are supported")
    if name == "random_seed":
        return prng.random_seed_impl_base(ins[0], impl=impl)
    keys_aval = eqn.invars[0].aval
    if name == "random_bits":
        return prng.random_bits_impl_base(impl, ins[0], keys_aval.ndim, **params)
    if name == "random_split":
        return prng.random_split_impl_base(impl, ins[0], keys_aval.ndim, **params)
    if name == "random_fold_in":
        return prng.random_fold_in_impl_base(impl, ins[0], ins[1], keys_aval.shape)
    # random_gamma: JAX's lowering of it, on keys typed again, evaluated physically.
    def gamma(key_data, a):
        key = prng.random_wrap_p.bind(key_data, impl=impl)
        return random_core._gamma_impl(key, a, use_vmap=True, **params)
    closed = jax.make_jaxpr(gamma)(*ins)
    return _eval_physical(closed.jaxpr, closed.consts, ins)[0]


# The lax_random plugin reproduces JAX's partitionable threefry bits, JAX's
# default; the legacy algorithm binds the same primitives, so it is refused here.
RANDOM_PRIMITIVES = frozenset({"random_bits", "random_split", "random_gamma"})


def check_threefry_partitionable(program):
    if not jax.config.jax_threefry_partitionable and program.uses_random:
        raise ConversionError(
            "random_bits/random_split are lowered with JAX's partitionable threefry algorithm, "
            "but jax_threefry_partitionable is False; set it to True to convert")
