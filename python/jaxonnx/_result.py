"""What to_onnx returns for each return_mode, from the converted bytes and data files."""

from __future__ import annotations

import contextlib
import os

import onnx

from jaxonnx import _output
from jaxonnx._core import ConversionError

RETURN_MODES = ("proto", "ir", "bytes", "file")


def onnx_ir():
    """The onnx_ir module ("ir" needs it; checked before converting)."""
    try:
        import onnx_ir
    except ImportError:
        raise ConversionError('return_mode="ir" needs the onnx-ir package: '
                              'pip install "jaxonnx[ir]" (or onnx-ir)') from None
    return onnx_ir


def deliver(return_mode, data, data_files, external, data_folder, output_path, progress):
    """The model as `return_mode` asks: written to output_path ("file"), a ModelProto
    or onnx_ir.Model (weights inline where `external` is _output.INLINE, else their
    data files written into data_folder first), or the bytes."""
    if return_mode == "file":
        _output.write_model(output_path, data, data_files, data_folder, progress.written)
        progress.done(output_path)
        return os.fspath(output_path)
    if external is _output.INLINE:
        model = _output.model_proto(data, data_files)
        progress.done("ModelProto")
        return onnx_ir().from_proto(model) if return_mode == "ir" else model
    with contextlib.ExitStack() as stack:
        _output.write_data_files(data_folder, data_files, stack, progress.written)
    progress.done(return_mode)
    if return_mode == "bytes":
        return data
    model = onnx.load_from_string(data)
    return onnx_ir().from_proto(model) if return_mode == "ir" else model
