"""record_primitive_calls_file: every equation of the traced program, as JSON.

One record per equation, nested jaxprs (scan and cond bodies, jit calls)
included, in the order the lowering meets them; the fields follow jax2onnx's
log (sequence_id, primitive_name, params, inputs_aval as [shape, dtype], ...), plus the plugin
that lowers the primitive and the user's source line.
"""

from __future__ import annotations

import json

from jaxonnx import _source
from jaxonnx._core import ConversionError


def _aval(atom):
    aval = atom.aval
    return [[str(d) if not isinstance(d, int) else d for d in getattr(aval, "shape", ())],
            str(getattr(aval, "dtype", ""))]


def records(program, plugin_of):
    """The records of `program` (a _trace.TracedProgram); plugin_of(name) names
    the plugin lowering a primitive."""
    out = []
    for eqn, context in program.equations():
        params = {k: v for k, v in eqn.params.items()}
        out.append({
            "sequence_id": len(out),
            "primitive_name": eqn.primitive.name,
            "plugin": plugin_of(eqn.primitive.name),
            "context": context,
            "source": _source.describe(eqn.source_info),
            "params_repr": "\n".join(f"  - {k}: {v!r}" for k, v in params.items()),
            "params": {k: repr(v) for k, v in params.items()},
            "inputs_aval": [_aval(a) for a in eqn.invars],
            "outputs_aval": [_aval(a) for a in eqn.outvars],
        })
    return out


def write(path, program, registry):
    owners = {p["name"]: plugin["name"] for plugin in registry.plugins for p in plugin["primitives"]}
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(records(program, owners.get), f, indent=2)
            f.write("\n")
    except OSError as e:
        raise ConversionError(f"record_primitive_calls_file: cannot write {path!r}: {e}") from None
