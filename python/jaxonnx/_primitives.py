"""jaxonnx.primitive: a JAX primitive for a plugin-declared primitive name.

Its shapes come from the plugin's abstract eval (the C callback); what it
computes in JAX comes from a Python reference the author gives (`impl`), which
also drives jit, differentiation and, by default, vmap. When converted, the
primitive itself reaches the plugin's lowering.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax import core as jax_core
from jax import export
from jax.extend import core as jex_core
from jax.interpreters import ad, mlir
from jax.interpreters import batching as jax_batching

from jaxonnx import _core, _plugins
from jaxonnx._core import ConversionError

_cache: dict = {}
BATCHING_MODES = ("reference", "leading")


def _dim_reader(in_avals):
    """Maps a dim from the plugin back to JAX: an int stays; a symbol string is
    the input dim it names, or is parsed in the inputs' symbolic scope ("2*B")."""
    known, scope = {}, None
    for aval in in_avals:
        for d in aval.shape:
            if export.is_symbolic_dim(d):
                known[str(d)] = d
                scope = d.scope

    def read(dim):
        if isinstance(dim, int):
            return dim
        if dim in known:
            return known[dim]
        if scope is None:
            raise ConversionError(f"abstract eval gave the symbolic dim {dim!r} but no input has one")
        return export.symbolic_shape(dim, scope=scope)[0]

    return read


def _reference_outputs(name, impl, multiple_results, args, params):
    out = impl(*args, **params)
    if not multiple_results:
        return out
    if not isinstance(out, (tuple, list)):
        raise ConversionError(
            f"primitive {name!r} is declared with multiple_results=True but its impl returned "
            f"{type(out).__name__}, not a tuple or list")
    return list(out)


def _leading_batch_rule(prim, multiple_results):
    """vmap by moving every batch axis to the front: right for ops that map over
    leading axes (elementwise ones, or ops written for any number of leading dims)."""
    def rule(args, dims, **params):
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        moved = [jax.numpy.broadcast_to(a, (size, *a.shape)) if d is None
                 else jax.numpy.moveaxis(a, d, 0) for a, d in zip(args, dims)]
        out = prim.bind(*moved, **params)
        return out, ([0] * len(out) if multiple_results else 0)
    return rule


def _reference_batch_rule(name, impl, multiple_results):
    """vmap through the reference: the batched program runs the reference's ops."""
    def rule(args, dims, **params):
        ref = functools.partial(_reference_outputs, name, impl, multiple_results)
        out = jax.vmap(lambda *a: ref(a, params), in_axes=tuple(dims))(*args)
        return out, ([0] * len(out) if multiple_results else 0)
    return rule


def primitive(name: str, plugin_dirs=None, *, impl=None, multiple_results=False, batching=None,
              plugin_overrides=None):
    """The JAX primitive `name` declared by a loaded plugin. Its abstract eval is
    the plugin's C callback; `bind` it inside code you convert with to_onnx (give
    to_onnx the same plugin_dirs).

    Args:
        impl: a reference implementation in JAX, impl(*operands, **params), returning
            one array (a tuple/list with multiple_results). It runs the primitive
            eagerly and under jit, and differentiation goes through it (the primal
            stays the plugin primitive, so a differentiated program still converts
            it). Without impl the primitive can only be traced.
        multiple_results: the plugin's abstract eval gives several outputs; bind
            returns a list.
        batching: how jax.vmap treats it: a JAX batching rule
            rule(operands, batch_dims, **params) -> (out, out_batch_dims); "leading"
            (the op maps over leading axes: batch axes move to the front and the
            primitive is bound on the batched operands, so it stays in the graph);
            or "reference"/None (vmap of impl; the default when impl is given).
        plugin_overrides: as for to_onnx, when the name is claimed by several plugins.
    """
    if isinstance(batching, str) and batching not in BATCHING_MODES:
        raise ConversionError(f"batching must be a callable or one of {BATCHING_MODES}; "
                              f"got {batching!r}")
    if batching is not None and not isinstance(batching, str) and not callable(batching):
        raise ConversionError(f"batching must be a callable or one of {BATCHING_MODES}; "
                              f"got {type(batching).__name__}")
    if impl is not None and not callable(impl):
        raise ConversionError(f"impl must be callable; got {type(impl).__name__}")
    folders = tuple(_plugins.plugin_folders(plugin_dirs))
    chosen = _plugins.plugin_overrides(plugin_overrides)
    key = (name, folders, tuple(sorted(chosen.items())), impl, bool(multiple_results), batching)
    if key in _cache:
        return _cache[key]
    reg = _plugins.registry(plugin_dirs, plugin_overrides)
    if not reg.has(name):
        raise ConversionError(
            f"no loaded plugin declares the primitive {name!r}; folders searched: "
            + ", ".join(folders))

    prim = jex_core.Primitive(name)
    prim.multiple_results = bool(multiple_results)

    def abstract_eval(*avals, **params):
        outs = _core.abstract_eval(reg, name, list(avals), params)
        if not multiple_results and len(outs) != 1:
            raise ConversionError(
                f"primitive {name!r}: its abstract eval gave {len(outs)} outputs; "
                f"declare it with jaxonnx.primitive(..., multiple_results=True)")
        read = _dim_reader(avals)
        shaped = [jax_core.ShapedArray(tuple(read(d) for d in dims), np.dtype(dtype))
                  for dtype, dims in outs]
        return shaped if multiple_results else shaped[0]

    prim.def_abstract_eval(abstract_eval)

    if impl is None:
        def no_impl(*args, **params):
            raise ConversionError(
                f"primitive {name!r} has no JAX implementation; it exists to be traced "
                f"(jax.make_jaxpr, jaxonnx.to_onnx), not run. Give jaxonnx.primitive an impl= "
                f"(a reference in jax.numpy) to run, jit, differentiate or vmap it")
        prim.def_impl(no_impl)
    else:
        def run(*args, **params):
            return _reference_outputs(name, impl, multiple_results, args, params)

        prim.def_impl(run)
        mlir.register_lowering(prim, mlir.lower_fun(run, multiple_results=bool(multiple_results)))

        def jvp(primals, tangents, **params):
            tangents = [ad.instantiate_zeros(t) for t in tangents]
            out = prim.bind(*primals, **params)
            _, t_out = jax.jvp(lambda *a: run(*a, **params), tuple(primals), tuple(tangents))
            return out, t_out

        ad.primitive_jvps[prim] = jvp

    if callable(batching):
        batching_rule = batching
    elif batching == "leading":
        batching_rule = _leading_batch_rule(prim, multiple_results)
    elif impl is not None:
        batching_rule = _reference_batch_rule(name, impl, multiple_results)
    else:
        batching_rule = None
    if batching_rule is not None:
        jax_batching.primitive_batchers[prim] = batching_rule

    _cache[key] = prim
    return prim
