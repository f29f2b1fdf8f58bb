"""python -m jaxonnx: convert models, inspect ONNX files and the installation.

    python -m jaxonnx convert MODULE:FACTORY --input B,3,224,224 [--dtype ...] [--opset N] [--verify] [--report PATH] -o model.onnx
    python -m jaxonnx genai MODULE:FACTORY [--config config.json] [--target ...] -o folder/
    python -m jaxonnx keras MODEL.keras OUT.onnx [--constraint TEXT ...] [--opset N] [--verify]
    python -m jaxonnx inspect model.onnx [--json]
    python -m jaxonnx plugins [--json] [--plugin-dir DIR ...]
    python -m jaxonnx plugins --check [DIR ...] [--json]
    python -m jaxonnx new-plugin NAME DIR
    python -m jaxonnx --cmakedir
    python -m jaxonnx --version
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from jaxonnx import _cli_convert, _cli_genai, _cli_inspect, _cli_keras

CMAKE_DIR = Path(__file__).resolve().parent / "sdk" / "lib" / "cmake" / "jaxonnx"


def _plugins(args) -> int:
    import warnings

    from jaxonnx import _plugins

    if args.check is not None:
        from jaxonnx import _cli_plugin_check
        try:
            return _cli_plugin_check.run(args)
        except _plugins._core.ConversionError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:  # a double claim is listed below, not raised
            reg = _plugins.registry(args.plugin_dir, keep_conflicts=True)
        except _plugins._core.ConversionError as e:  # e.g. a bad $JAXONNX_PLUGIN_OVERRIDES
            print(f"error: {e}", file=sys.stderr)
            return 1
    info = {
        "folders": reg.dirs,
        "plugins": reg.plugins,
        "skipped": [{"file": p, "reason": r} for p, r in reg.diagnostics],
        "conflicts": reg.conflicts,
    }
    if args.json:
        json.dump(info, sys.stdout, indent=2)
        print()
        return 0
    print("Plugin folders searched:")
    for d in reg.dirs:
        print(f"  {d}")
    for p in reg.plugins:
        prims = ", ".join(q["name"] for q in p["primitives"])
        print(f"\n{p['name']} {p['version']} (ABI {p['abi']}, SDK {p['sdk_version']})")
        print(f"  file: {p['file']}")
        print(f"  primitives ({len(p['primitives'])}): {prims}")
    for p, r in reg.diagnostics:
        print(f"\nskipped {p}: {r}")
    for c in reg.conflicts:
        who = ", ".join(f"'{n}' ({f})" for n, f in c["plugins"])
        outcome = (f"'{c['winner']}' wins (override)" if c["winner"] else
                   f"unusable until one is chosen: plugin_overrides={{'{c['primitive']}': NAME}} "
                   f"or ${_plugins.OVERRIDES_ENV_VAR}={c['primitive']}=NAME")
        print(f"\nconflict: primitive '{c['primitive']}' is claimed by {who}; {outcome}")
    del caught
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jaxonnx", description=__doc__.split("\n")[0])
    parser.add_argument("--cmakedir", action="store_true",
                        help="print the folder holding jaxonnxConfig.cmake (for find_package)")
    parser.add_argument("--version", action="store_true", help="print the jaxonnx version")
    sub = parser.add_subparsers(dest="command")
    plugins = sub.add_parser("plugins", help="list the loaded plugins and their primitives "
                                              "(--check: check every plugin file now)")
    plugins.add_argument("--json", action="store_true", help="machine-readable output")
    plugins.add_argument("--plugin-dir", action="append", default=[], metavar="DIR",
                         help="an extra plugin folder (repeatable)")
    plugins.add_argument("--check", nargs="*", metavar="DIR",
                         help="run the preflight now on every plugin file of DIR (default: of "
                              "every folder searched), each in a child process, ignoring the "
                              "cache, and print a table; exit status 1 if any file would be "
                              "skipped or a test equation failed")
    from jaxonnx import _new_plugin
    _new_plugin.register(sub)
    _cli_convert.add_parser(sub)
    _cli_genai.add_parser(sub)
    _cli_keras.add_parser(sub)
    _cli_inspect.add_parser(sub)
    args = parser.parse_args(argv)
    if args.cmakedir:
        print(CMAKE_DIR)
        return 0
    if args.version:
        from jaxonnx import __version__
        print(__version__)
        return 0
    if args.command == "plugins":
        return _plugins(args)
    if getattr(args, "run", None):  # subcommands registered by their own module
        return args.run(args)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
