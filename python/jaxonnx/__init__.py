"""jaxonnx: convert JAX programs to ONNX through a C++ plugin host.

    model = jaxonnx.to_onnx(fn, [("B", 30)])      # an onnx.ModelProto
"""

from jaxonnx._core import ConversionError
from jaxonnx._convert import to_onnx
from jaxonnx._functions import onnx_function
from jaxonnx._output import ExternalData
from jaxonnx._plugins import plugin_folders
from jaxonnx._primitives import primitive
from jaxonnx._verify import Divergence, allclose, first_divergence
from jaxonnx._version import __version__
from jaxonnx import genai  # jaxonnx.genai.export: an onnxruntime-genai model folder

__all__ = ["ConversionError", "ExternalData", "to_onnx", "onnx_function", "allclose",
           "first_divergence", "Divergence", "primitive", "plugin_folders", "__version__"]


def __getattr__(name):
    # jaxonnx.keras after a plain `import jaxonnx`, without importing keras before it is used
    if name == "keras":
        import importlib
        return importlib.import_module("jaxonnx.keras")
    raise AttributeError(f"module 'jaxonnx' has no attribute {name!r}")
