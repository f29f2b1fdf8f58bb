"""Which plugin folders are searched, and the registry they give."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from jaxonnx import _core

BUNDLED_PLUGINS = Path(__file__).resolve().parent / "plugins"
ENV_VAR = "JAXONNX_PLUGIN_PATH"


class PluginWarning(UserWarning):
    """A file in a plugin folder was skipped."""


def plugin_folders(plugin_dirs=None) -> list[str]:
    """The folders searched, in order: bundled, $JAXONNX_PLUGIN_PATH, plugin_dirs."""
    if isinstance(plugin_dirs, (str, bytes, os.PathLike)):
        raise _core.ConversionError(
            f"plugin_dirs must be a list of folders, not a single {type(plugin_dirs).__name__}; "
            f"write plugin_dirs=[{str(plugin_dirs)!r}]")
    folders = [str(BUNDLED_PLUGINS)]
    folders += [p for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p]
    folders += [os.fspath(p) for p in (plugin_dirs or [])]
    return folders


def registry(plugin_dirs=None) -> _core.Registry:
    """Loads the plugins of every folder; warns about each file it skips."""
    reg = _core.Registry(plugin_folders(plugin_dirs))
    for path, reason in reg.diagnostics:
        warnings.warn(f"jaxonnx skipped {path}: {reason}", PluginWarning, stacklevel=3)
    return reg
