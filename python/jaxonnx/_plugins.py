"""Which plugin folders are searched, which plugin wins a primitive, and the registry they give.

Folders, in order: the bundled plugins, the folders of installed plugin packages
(the `jaxonnx.plugins` entry-point group), $JAXONNX_PLUGIN_PATH, then the
caller's plugin_dirs. A primitive claimed twice is an error unless the user
names the winner: plugin_overrides={primitive: plugin name or file}, or
$JAXONNX_PLUGIN_OVERRIDES="prim=plugin,prim2=plugin2" (the argument wins over
the variable).

A registry is cached per (folders, overrides) and rebuilt only when the plugin
files of one of its folders change (names, sizes or modification times).

Before a scan loads a file, _preflight decides whether it may run in this
process: a bundled file must match the build's manifest (SHA256SUMS), any other
file must have passed the preflight in a child process (cached per user).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from jaxonnx import _core, _preflight

BUNDLED_PLUGINS = Path(__file__).resolve().parent / "plugins"
ENV_VAR = "JAXONNX_PLUGIN_PATH"
OVERRIDES_ENV_VAR = "JAXONNX_PLUGIN_OVERRIDES"
ENTRY_POINT_GROUP = "jaxonnx.plugins"


class PluginWarning(UserWarning):
    """A file in a plugin folder was skipped."""


_entry_point_folders: list[str] | None = None
_resolving_entry_points = False


def _folders_of(name, value) -> list[str]:
    """What an entry point gives: a folder, a list of folders, or a callable returning either."""
    if callable(value):
        value = value()
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    try:
        return [os.fspath(v) for v in value]
    except TypeError:
        raise _core.ConversionError(
            f"the {ENTRY_POINT_GROUP} entry point {name!r} gave {value!r}; it must name a "
            f"folder, a list of folders, or a function returning one") from None


def entry_point_folders(refresh: bool = False) -> list[str]:
    """The plugin folders of installed packages (entry-point group `jaxonnx.plugins`,
    sorted by entry-point name). Read once per process; refresh=True reads again."""
    global _entry_point_folders, _resolving_entry_points
    if _resolving_entry_points:
        return []  # a plugin package importing jaxonnx while we load its entry point
    if _entry_point_folders is None or refresh:
        from importlib.metadata import entry_points

        _resolving_entry_points = True
        try:
            folders = []
            for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
                try:
                    value = ep.load()
                except Exception as e:  # a broken package must not break every conversion
                    warnings.warn(f"jaxonnx skipped the {ENTRY_POINT_GROUP} entry point "
                                  f"{ep.name!r} ({ep.value}): {type(e).__name__}: {e}",
                                  PluginWarning, stacklevel=3)
                    continue
                folders += [f for f in _folders_of(ep.name, value) if f not in folders]
        finally:
            _resolving_entry_points = False
        _entry_point_folders = folders
    return list(_entry_point_folders)


def plugin_folders(plugin_dirs=None) -> list[str]:
    """The folders searched, in order: bundled, installed plugin packages,
    $JAXONNX_PLUGIN_PATH, plugin_dirs."""
    if isinstance(plugin_dirs, (str, bytes, os.PathLike)):
        raise _core.ConversionError(
            f"plugin_dirs must be a list of folders, not a single {type(plugin_dirs).__name__}; "
            f"write plugin_dirs=[{str(plugin_dirs)!r}]")
    folders = [str(BUNDLED_PLUGINS)]
    folders += entry_point_folders()
    folders += [p for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p]
    folders += [os.fspath(p) for p in (plugin_dirs or [])]
    return folders


def plugin_overrides(overrides=None) -> dict[str, str]:
    """$JAXONNX_PLUGIN_OVERRIDES ("prim=plugin,...") updated by `overrides`."""
    out = {}
    for item in os.environ.get(OVERRIDES_ENV_VAR, "").split(","):
        if not item.strip():
            continue
        prim, sep, plugin = item.partition("=")
        if not sep or not prim.strip() or not plugin.strip():
            raise _core.ConversionError(
                f"${OVERRIDES_ENV_VAR}: {item!r} is not primitive=plugin "
                f"(e.g. tanh=my_plugin; entries separated by commas)")
        out[prim.strip()] = plugin.strip()
    if overrides is not None and not isinstance(overrides, dict):
        raise _core.ConversionError(
            f"plugin_overrides must be a dict {{primitive: plugin name}}; got "
            f"{type(overrides).__name__}")
    for prim, plugin in (overrides or {}).items():
        if not isinstance(prim, str) or not isinstance(plugin, (str, os.PathLike)):
            raise _core.ConversionError(
                f"plugin_overrides: {prim!r}: {plugin!r} must map a primitive name to a plugin "
                f"name or file")
        out[prim] = os.fspath(plugin)
    return out


def _fingerprint(folders) -> tuple:
    """What a folder's plugins look like on disk: a change here means a rescan."""
    out = []
    for folder in folders:
        try:
            entries = sorted(
                (e.name, st.st_size, st.st_mtime_ns, st.st_ino)
                for e in os.scandir(folder)
                if e.name.endswith(_PLUGIN_SUFFIXES) and (st := e.stat()))
        except OSError:
            entries = None
        out.append((folder, tuple(entries) if entries is not None else None))
    return tuple(out)


_PLUGIN_SUFFIXES = (".so", ".dylib", ".dll")  # a superset of what the host loads
_cache: dict = {}


def registry(plugin_dirs=None, overrides=None, *, keep_conflicts=False) -> _core.Registry:
    """The registry of every plugin folder (cached until a folder's plugin files
    change); warns about each file it skips. overrides: {primitive: plugin name or
    file}, on top of $JAXONNX_PLUGIN_OVERRIDES. keep_conflicts: record an
    unresolved double claim in .conflicts instead of raising (for listings)."""
    folders = plugin_folders(plugin_dirs)
    chosen = plugin_overrides(overrides)
    key = (tuple(folders), tuple(sorted(chosen.items())), bool(keep_conflicts),
           _preflight.enabled())
    stamp = _fingerprint(folders)
    hit = _cache.get(key)
    if hit is not None and hit[0] == stamp:
        reg = hit[1]
    else:
        reg = _core.Registry(folders, chosen, bool(keep_conflicts),
                             _preflight.gate(BUNDLED_PLUGINS))
        _cache[key] = (stamp, reg)
    for path, reason in reg.diagnostics:
        warnings.warn(f"jaxonnx skipped {path}: {reason}", PluginWarning, stacklevel=3)
    return reg
