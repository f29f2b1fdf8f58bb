"""my_plugin: a jaxonnx plugin with the primitive my_plugin.softsign.

    import my_plugin
    y = my_plugin.softsign(x)     # runs, jits, vmaps and differentiates in JAX
    jaxonnx.to_onnx(fn, ...)      # becomes one ONNX Softsign node

Installing the package is enough for jaxonnx to find the plugin: pyproject.toml
registers plugin_dir() in the "jaxonnx.plugins" entry-point group.
"""

from __future__ import annotations

import functools
from pathlib import Path

PLUGIN_DIR = Path(__file__).resolve().parent / "plugins"


def plugin_dir() -> str:
    """The folder holding the built plugin (the jaxonnx.plugins entry point)."""
    return str(PLUGIN_DIR)


def softsign_reference(x):
    """What my_plugin.softsign computes, in JAX: used to run it eagerly, under jit,
    and to differentiate it."""
    import jax.numpy as jnp
    return x / (1 + jnp.abs(x))


@functools.cache
def softsign_p():
    """The JAX primitive (created on first use: jaxonnx imports this package while
    it looks for plugins, so nothing here may call jaxonnx at import time)."""
    import jaxonnx
    return jaxonnx.primitive("my_plugin.softsign", plugin_dirs=[PLUGIN_DIR],
                             impl=softsign_reference, batching="leading")


def softsign(x):
    return softsign_p().bind(x)


def built_with() -> str:
    """The jaxonnx version the binary was built against."""
    from my_plugin._built_with import JAXONNX_VERSION
    return JAXONNX_VERSION
