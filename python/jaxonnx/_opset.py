"""Opsets below the oldest the plugins lower to (jaxonnx._core.MIN_OPSET, 13).

From MIN_OPSET up, every plugin lowers at the requested opset itself. Below
it, the program is lowered at MIN_OPSET; when every operator of the model has
the same definition at the requested opset (Add, Conv, ... changed long ago),
the model is relabelled to it. Otherwise the ConversionError names each
operator and the opset its form needs.

Below CHECKED_BELOW, a lowered model is checked against the schemas of its
opset (older ops accept fewer types: Add on int8 needs 14), so a lowering
that missed an older form is a ConversionError, never an invalid model.
"""

from __future__ import annotations

import re

import onnx

from jaxonnx import _core
from jaxonnx._core import ConversionError


CHECKED_BELOW = 18


def check_lowered(data: bytes, opset: int) -> None:
    """A ConversionError unless `data`, lowered at `opset`, checks at it."""
    model = onnx.load_from_string(data)
    # Tensors kept outside (data files, not yet written) are checked as inputs
    # of their type and shape: only the nodes' forms matter here.
    kept = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    for t in kept:
        model.graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, t.dims))
        model.graph.initializer.remove(t)
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        first = str(e).strip().splitlines()[0]
        op = re.search(r"op_type:(\w+)", first)
        newer = sorted(s.since_version for s in onnx.defs.get_all_schemas_with_history()
                       if op and s.name == op.group(1) and s.domain == ""
                       and s.since_version > opset)
        hint = f"opset={newer[0]} or newer" if newer else f"a newer opset"
        raise ConversionError(f"opset {opset}: jaxonnx has no form of a node for this opset "
                              f"({first}); pass {hint}") from None


def _op_types(graph, out):
    for node in graph.node:
        if node.domain in ("", "ai.onnx"):
            out.add(node.op_type)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _op_types(attr.g, out)
            for g in attr.graphs:
                _op_types(g, out)
    return out


def relabel(data: bytes, opset: int) -> bytes:
    """data (a model at MIN_OPSET) declared at `opset`, or a ConversionError."""
    model = onnx.load_from_string(data)
    need = {}
    for op in sorted(_op_types(model.graph, set())):
        emitted = onnx.defs.get_schema(op, _core.MIN_OPSET, "").since_version
        try:
            older = onnx.defs.get_schema(op, opset, "").since_version
        except onnx.defs.SchemaError:
            older = None
        if older != emitted:
            need[op] = emitted
    if need:
        listed = ", ".join(f"{op} (opset {v})" for op, v in sorted(need.items(), key=lambda kv: (-kv[1], kv[0])))
        raise ConversionError(
            f"opset {opset}: this model needs operators in forms newer than opset {opset}: "
            f"{listed}; pass opset={max(need.values())} or newer ({_core.MIN_OPSET} is the oldest "
            f"jaxonnx lowers to; below it a model converts only when every operator kept its form)")
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            entry.version = opset
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        raise ConversionError(f"opset {opset}: the model does not check at this opset: "
                              f"{str(e).strip().splitlines()[0]}; pass opset={_core.MIN_OPSET} "
                              f"or newer") from None
    return model.SerializeToString(deterministic=True)
