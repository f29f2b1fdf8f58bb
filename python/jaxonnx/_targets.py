"""to_onnx's target option: the runtime a model is for.

The profiles are data in the plugin SDK (jaxonnx/targets.hpp; docs/targets.md
is generated from them): what each target lacks, which plugins read to pick a
lowering, and the opset it gets unless the user gives one.
"""

from __future__ import annotations

from jaxonnx import _core
from jaxonnx._core import ConversionError

DEFAULT = "onnxruntime"


def profiles():
    """{name: profile dict} of every target, in declaration order."""
    return {p["name"]: p for p in _core.targets()}


def resolve(target, opset):
    """(target, opset): the target checked, and opset or the target's default."""
    known = profiles()
    if target not in known:
        raise ConversionError(f"target must be one of {tuple(known)}; got {target!r}")
    return target, known[target]["default_opset"] if opset is None else opset
