"""Source lines for error messages, from a JAX equation's source_info."""

from __future__ import annotations

import os
import sys
import sysconfig

from jax._src import source_info_util

_LIBRARY_DIRS = tuple({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})


def describe(source_info) -> str:
    """'file:line (function)' of the innermost user frame; when that lies in an
    installed library (flax, say), also the innermost frame of the user's own code."""
    where = source_info_util.summarize(source_info)
    tb = getattr(source_info, "traceback", None)
    if tb is None:
        return where
    frames = list(source_info_util.user_frames(tb))
    if frames and frames[0].file_name.startswith(_LIBRARY_DIRS):
        for f in frames:
            if not f.file_name.startswith(_LIBRARY_DIRS):
                return f"{os.fspath(f.file_name)}:{f.start_line} ({f.function_name}), via {where}"
    return where


_OWN_DIR = os.path.dirname(os.path.abspath(__file__))


def user_line(tb) -> str:
    """'file:line (function)' of the innermost frame of a traceback that is the
    user's code: not an installed library (JAX, flax) and not jaxonnx itself."""
    found = "an unknown line"
    while tb is not None:
        code = tb.tb_frame.f_code
        path = os.path.abspath(code.co_filename)
        if not path.startswith(_LIBRARY_DIRS) and not path.startswith(_OWN_DIR) \
                and not code.co_filename.startswith("<frozen"):
            found = f"{code.co_filename}:{tb.tb_lineno} ({code.co_name})"
        tb = tb.tb_next
    return found


def _package_dir(name):
    try:
        return os.path.dirname(os.path.abspath(__import__(name).__file__)) + os.sep
    except ImportError:
        return None


def library_line(tb) -> str:
    """'file:line (function)' of the innermost frame of a traceback in code that
    calls JAX (a model library such as keras-hub or flax, or the user's own), not in
    JAX, jaxonnx or Keras's layer of ops over JAX; "" when there is none."""
    keras = _package_dir("keras") if "keras" in sys.modules else None
    plumbing = [os.path.join(keras, "src", d) + os.sep for d in ("backend", "ops", "utils")] \
        if keras else []
    skip = tuple(d for d in (_package_dir("jax"), _package_dir("jaxlib"), _OWN_DIR + os.sep,
                             *plumbing) if d)
    found = ""
    while tb is not None:
        code = tb.tb_frame.f_code
        path = os.path.abspath(code.co_filename)
        if not path.startswith(skip) and not code.co_filename.startswith("<frozen") \
                and f"{os.sep}contextlib.py" not in path:
            found = f"{code.co_filename}:{tb.tb_lineno} ({code.co_name})"
        tb = tb.tb_next
    return found


_SWITCHES = ("JAXONNX_ENABLE_STACKTRACE_METADATA", "JAX2ONNX_ENABLE_STACKTRACE_METADATA")
_DETAIL = ("JAXONNX_STACKTRACE_DETAIL", "JAX2ONNX_STACKTRACE_DETAIL")


def _env(names, default):
    for name in names:
        if name in os.environ:
            return os.environ[name].strip().lower()
    return default


def stack(source_info) -> str:
    """The user frames of an equation's call stack, outermost first, one
    'file:line in function' a line."""
    tb = getattr(source_info, "traceback", None)
    if tb is None:
        return ""
    frames = [f for f in source_info_util.user_frames(tb)
              if not os.path.abspath(f.file_name).startswith(_OWN_DIR)]
    return "\n".join(f"{f.file_name}:{f.start_line} in {f.function_name}" for f in reversed(frames))


def provenance_from_env():
    """The per-equation metadata callback for the core, switched as jax2onnx
    switches it: $JAXONNX_ENABLE_STACKTRACE_METADATA (or $JAX2ONNX_...) on, and
    $JAXONNX_STACKTRACE_DETAIL=full adds the call stack; None when off."""
    if _env(_SWITCHES, "0") in ("", "0", "false", "no", "off"):
        return None
    full = _env(_DETAIL, "minimal") == "full"

    def props(source_info):
        out = [("pkg.jaxonnx.callsite", describe(source_info))]
        if full:
            out.append(("pkg.jaxonnx.stacktrace", stack(source_info)))
        return out

    return props
