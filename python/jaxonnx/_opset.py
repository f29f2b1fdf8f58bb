"""Older opsets' type constraints, checked on the lowered model.

From MIN_OPSET (13) up, every plugin lowers at the requested opset itself;
below it, the core lowers at MIN_OPSET and declares the requested opset when
every operator kept its form (converter.cpp's declare_older_opset, which
names the operators that did not). The core's node check knows each op's
forms but not their type constraints, so from MIN_OPSET to CHECKED_BELOW a
lowered model is checked against the schemas of its opset (older ops accept
fewer types: Add on int8 needs 14): a lowering that missed an older form is a
ConversionError, never an invalid model.
"""

from __future__ import annotations

import re

import onnx

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
        hint = f"opset={newer[0]} or newer" if newer else "a newer opset"
        if re.search(r"tensor\(u?int4\)", first):
            # The type, not the op, is what is new: ONNX has 4-bit integers from opset 21.
            hint = ("opset=21 or newer (4-bit integers need it; with the optimizer on, an int4 "
                    "weight is widened to int8 below it: docs/quantization.md)")
        raise ConversionError(f"opset {opset}: jaxonnx has no form of a node for this opset "
                              f"({first}); pass {hint}") from None
