"""jaxonnx's version, in a module of its own so that the modules the package's
__init__ imports can read it without importing the package (an import cycle)."""

__version__ = "0.1.0"
