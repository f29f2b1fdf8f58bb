"""jaxonnx.primitive: a JAX primitive for a plugin-declared primitive name."""

from __future__ import annotations

import numpy as np
from jax import core as jax_core
from jax import export
from jax.extend import core as jex_core

from jaxonnx import _core, _plugins
from jaxonnx._core import ConversionError

_cache: dict = {}


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


def primitive(name: str, plugin_dirs=None):
    """The JAX primitive `name` declared by a loaded plugin. Its abstract eval is
    the plugin's C callback; `bind` it inside code you convert with to_onnx (give
    to_onnx the same plugin_dirs)."""
    folders = tuple(_plugins.plugin_folders(plugin_dirs))
    key = (name, folders)
    if key in _cache:
        return _cache[key]
    reg = _plugins.registry(plugin_dirs)
    if not reg.has(name):
        raise ConversionError(
            f"no loaded plugin declares the primitive {name!r}; folders searched: "
            + ", ".join(folders))

    prim = jex_core.Primitive(name)

    def abstract_eval(*avals, **params):
        outs = _core.abstract_eval(reg, name, list(avals), params)
        if len(outs) != 1:
            raise ConversionError(
                f"primitive {name!r}: its abstract eval gave {len(outs)} outputs; "
                f"jaxonnx.primitive supports exactly one")
        dtype, dims = outs[0]
        read = _dim_reader(avals)
        return jax_core.ShapedArray(tuple(read(d) for d in dims), np.dtype(dtype))

    def impl(*args, **params):
        raise ConversionError(
            f"primitive {name!r} has no JAX implementation; it exists to be traced "
            f"(jax.make_jaxpr, jaxonnx.to_onnx), not run eagerly")

    prim.def_abstract_eval(abstract_eval)
    prim.def_impl(impl)
    _cache[key] = prim
    return prim
