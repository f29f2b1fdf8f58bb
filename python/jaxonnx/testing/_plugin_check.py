"""check_plugin(): a built plugin's descriptor, exports (an ELF reader) and test equations."""

from __future__ import annotations

import os
import re
import struct

import onnx

from jaxonnx import _core, _preflight


# ---------------------------------------------------------------- check_plugin

def _jax_primitive_names():
    """The primitives JAX defines: every Primitive object its modules created,
    plus names older JAX versions used (pjit, core_call)."""
    import gc

    import jax.lax  # noqa: F401  (importing creates the primitives)
    import jax.numpy  # noqa: F401
    import jax.random  # noqa: F401
    import jax.scipy.linalg  # noqa: F401
    from jax.extend.core import Primitive
    return {o.name for o in gc.get_objects() if isinstance(o, Primitive)} | {"pjit", "core_call"}


def _elf_exports(path):
    """Names of the defined global/weak dynamic symbols of an ELF file (Linux);
    None when the file is not ELF."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF":
        return None
    is64, little = data[4] == 2, data[5] == 1
    e = "<" if little else ">"
    if is64:
        shoff, = struct.unpack_from(e + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(e + "HH", data, 0x3A)
    else:
        shoff, = struct.unpack_from(e + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(e + "HH", data, 0x2E)

    def section(i):
        base = shoff + i * shentsize
        if is64:
            _, typ, _, _, off, size, link, _, _, entsize = struct.unpack_from(e + "IIQQQQIIQQ",
                                                                              data, base)
        else:
            _, typ, _, _, off, size, link, _, _, entsize = struct.unpack_from(e + "IIIIIIIIII",
                                                                              data, base)
        return typ, off, size, link, entsize

    names = []
    for i in range(shnum):
        typ, off, size, link, entsize = section(i)
        if typ != 11:  # SHT_DYNSYM
            continue
        _, str_off, _, _, _ = section(link)
        for k in range(1, size // entsize):
            base = off + k * entsize
            if is64:
                name, info, other, shndx = struct.unpack_from(e + "IBBH", data, base)
            else:
                name, _, _, info, other, shndx = struct.unpack_from(e + "IIIBBH", data, base)
            binding, visibility = info >> 4, other & 3
            if shndx != 0 and binding in (1, 2) and visibility in (0, 3):  # defined, GLOBAL/WEAK
                end = data.index(b"\0", str_off + name)
                names.append(data[str_off + name:end].decode())
    return sorted(names)


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def check_plugin(path, *, opset: int = 23, allow_empty_emits: bool = False,
                 defined_elsewhere=()) -> dict:
    """Checks one plugin file, first in a child process, then loads it and
    asserts its descriptor is sound:

    - the preflight passes in a child process (jaxonnx's own check before it
      loads a plugin it has not seen): loading, init and descriptor validation,
      then per primitive with a test equation (.test(...) in the SDK) its
      abstract eval, lowering and the plugin's rewrite rules. A crash or hang
      there fails with the signal, the step and the primitive, and this process
      never loads the file; an error status of a test equation is a problem;
    - it loads in this jaxonnx (ABI major equal, minor not newer than the host's);
    - plugin and primitive names are non-empty, well formed and unique;
    - every primitive declares .emits(...) ops (unless allow_empty_emits), each
      one ONNX knows at `opset`;
    - a primitive JAX does not define has an abstract eval or a binding spec
      (jaxonnx.primitive needs one to trace), unless `defined_elsewhere` names
      it (a primitive another library defines, such as equinox's);
    - its dynamic symbol table exports exactly jaxonnx_plugin_init_v1 (ELF files).

    Returns:
        The plugin's description (as `python -m jaxonnx plugins --json` gives
        it) plus "abi_range" and "preflight" (the child's outcome: per
        primitive its test equation and error).

    Raises:
        AssertionError: listing every problem.
    """
    path = os.fspath(path)
    preflight = _preflight.check_files([path], fresh=True)[path]
    crashed = _preflight.failure(preflight)
    assert not crashed, f"plugin {path}: {crashed}"
    info = _core.load_plugin(path)  # a load error raises here, as it did in the child
    info["preflight"] = preflight
    problems = [f"{p['name']}: its test equation {t['eqn']} failed: {t['error']}"
                for p in preflight.get("primitives", []) for t in p["tests"] if t["error"]]
    major, minor = (int(x) for x in info["abi"].split("."))
    if major != _core.ABI_MAJOR or minor > _core.ABI_MINOR:
        problems.append(f"ABI {info['abi']} is outside this host's "
                        f"{_core.ABI_MAJOR}.0-{_core.ABI_MAJOR}.{_core.ABI_MINOR}")
    info["abi_range"] = f">={major}.{minor},<{major + 1}"
    if not _NAME.match(info["name"]):
        problems.append(f"plugin name {info['name']!r} is not [A-Za-z_][A-Za-z0-9_.-]*")
    if not info["version"]:
        problems.append("the plugin declares no version")
    jax_names = _jax_primitive_names()
    seen = set()
    for prim in info["primitives"]:
        name = prim["name"]
        if not _NAME.match(name):
            problems.append(f"primitive name {name!r} is not [A-Za-z_][A-Za-z0-9_.-]*")
        if name in seen:
            problems.append(f"primitive {name!r} is declared twice")
        seen.add(name)
        if not prim["onnx_ops"] and not allow_empty_emits:
            problems.append(f"{name}: declares no .emits(...) ops")
        for op in prim["onnx_ops"]:
            # "com.microsoft.FastGelu": an op of another domain (ONNX op types have
            # no dot), whose schemas onnx does not have: the host checks it against
            # the target profile's domains instead.
            domain, _, op_type = op.rpartition(".")
            if domain not in ("", "ai.onnx"):
                continue
            try:
                onnx.defs.get_schema(op_type, opset, domain)
            except onnx.defs.SchemaError:
                problems.append(f"{name}: .emits({op!r}): ONNX has no such op at opset {opset}")
        # A primitive bound by a binding spec takes its abstract eval from the
        # original callable (jax.eval_shape of its reference) when it gives none.
        if name not in jax_names and name not in defined_elsewhere \
                and not prim["abstract_eval"] and not prim.get("bindings"):
            problems.append(f"{name}: JAX does not define this primitive and the plugin gives no "
                            f"abstract eval or binding spec, so it cannot be traced")
    exports = _elf_exports(path)
    if exports is not None and exports != ["jaxonnx_plugin_init_v1"]:
        problems.append(f"the dynamic symbol table exports {exports}, not exactly "
                        f"['jaxonnx_plugin_init_v1'] (build with jaxonnx_add_plugin)")
    assert not problems, f"plugin {path}:\n  " + "\n  ".join(problems)
    return info
