"""python -m jaxonnx plugins --check [DIR ...]: the preflight on demand, as a table.

Every plugin file of DIR (or of every folder searched) is checked now, in a
child process each, ignoring the cache (whose records it then updates): the
host's own file checks, the manifest for bundled files, then the preflight,
and whether a file is a copy of a bundled plugin. Nothing is loaded into this
process but the bundled plugins that match their manifest (to know their names).
Exit status 0 when every file would load and every test equation passed.
"""

from __future__ import annotations

import json
import os
import sys

from jaxonnx import _core, _plugins, _preflight

_LISTED = "\0listed"  # what the collecting gate answers: keeps every file out of this process


def _discover(folders):
    """What the host's scan finds, in scan order: (path, None) for a file it
    would load, (path, reason) for a folder or file it refuses on its own (not a
    folder, untrusted, not a regular file, truncated or foreign ELF)."""
    reg = _core.Registry(folders, {}, True, lambda files: [_LISTED] * len(files))
    return [(p, None if r == _LISTED else r) for p, r in reg.diagnostics]


def _row(path, result, detail, **extra):
    return dict({"file": path, "result": result, "detail": detail}, **extra)


def _describe(outcome, bundled_note):
    prims = outcome.get("primitives", [])
    tests = [(p["name"], t) for p in prims for t in p["tests"]]
    failed = [(name, t) for name, t in tests if t["error"]]
    head = (f"'{outcome['name']}' {outcome['version']}: {len(prims)} primitive"
            f"{'' if len(prims) == 1 else 's'}, ")
    if not tests:
        head += "no test equations"
    elif failed:
        head += f"{len(failed)} of {len(tests)} test equations failed: " + "; ".join(
            f"{name} ({t['eqn']}): {t['error']}" for name, t in failed)
    else:
        head += f"{len(tests)} test equation{'' if len(tests) == 1 else 's'} passed"
    return head + bundled_note, bool(failed)


def check(folders) -> list[dict]:
    """One row per plugin file of `folders`: file, result, detail (and the outcome's facts)."""
    found = _discover(folders)
    files = [p for p, why in found if why is None]
    rows = {p: _row(p, "skipped", why) for p, why in found if why is not None}
    bundled_real = os.path.realpath(_plugins.BUNDLED_PLUGINS)
    sums = _preflight.manifest(_plugins.BUNDLED_PLUGINS) or {}
    notes, to_run = {}, []
    for path in files:
        real = os.path.realpath(path)
        if os.path.dirname(real) == bundled_real and os.path.basename(real) in sums:
            why = _preflight.bundled_problem(path, real, sums)
            if why:
                rows[path] = _row(path, "refused", why)
                continue
            notes[path] = f"; bundled, matches {_preflight.MANIFEST}"
        to_run.append(path)
    outcomes = _preflight.check_files(to_run, fresh=True)
    verified = [str(p) for p in sorted(_plugins.BUNDLED_PLUGINS.glob("*"))
                if p.name in sums and not _preflight.bundled_problem(str(p), str(p.resolve()), sums)]
    bundled = _preflight.bundled_identities(verified)
    for path in to_run:
        o = outcomes[path]
        copy = "" if path in notes else _preflight.copy_of_bundled(o, bundled, sums)
        facts = {k: o[k] for k in ("sha256", "seconds", "signal", "step", "primitive", "eqn",
                                   "name", "version", "primitives") if k in o}
        if o["status"] != "ok":
            result = {"crashed": "crashed", "hung": "hung"}.get(o["status"], "unchecked")
            rows[path] = _row(path, result, _preflight.failure(o), **facts)
        elif o.get("load_error") or copy:
            rows[path] = _row(path, "skipped", o.get("load_error") or copy, **facts)
        else:
            detail, failed = _describe(o, notes.get(path, ""))
            rows[path] = _row(path, "test failed" if failed else "ok", detail, **facts)
    return [rows[p] for p in dict.fromkeys(p for p, _ in found)]


def run(args) -> int:
    folders = [os.fspath(d) for d in args.check] or _plugins.plugin_folders(args.plugin_dir)
    folders = [os.path.abspath(f) for f in folders]
    rows = check(folders)
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        print()
    else:
        print(f"Preflight of {len(rows)} plugin file{'' if len(rows) == 1 else 's'} "
              f"(each loaded and exercised in a child process; cache: "
              f"{_preflight.cache_dir() / _preflight.CACHE_FILE}):\n")
        width = max([len("result")] + [len(r["result"]) for r in rows])
        print(f"{'result':<{width}}  file")
        for r in rows:
            print(f"{r['result']:<{width}}  {r['file']}")
            print(f"{'':<{width}}    {r['detail']}")
    return 0 if all(r["result"] == "ok" for r in rows) else 1
