"""The preflight's child process: loads one plugin file and runs its checks.

    python -I -S _preflight_child.py CORE STEPS PLUGIN

CORE is the path of jaxonnx's _core extension, loaded by path so the child
imports nothing else (no jax, no site-packages: it starts in about 30 ms).
Before each step that runs plugin code it appends a JSON line {"step",
"primitive", "eqn"} to the file STEPS, unbuffered, so that if the plugin kills this process the
parent (jaxonnx/_preflight.py) knows where; the report follows as {"report": ...},
then the step "exit" (static destructors run after it). Only the standard
library may be imported here.
"""

import importlib.util
import json
import os
import sys


def main(argv):
    _no_core_dumps()
    core_path, steps_path, plugin = argv[1:4]
    fd = os.open(steps_path, os.O_WRONLY | os.O_APPEND)

    def note(obj):
        os.write(fd, (json.dumps(obj) + "\n").encode())

    spec = importlib.util.spec_from_file_location("_core", core_path)
    core = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(core)
    report = core.preflight(plugin, lambda what, primitive, eqn: note(
        {"step": what, "primitive": primitive, "eqn": eqn}))
    note({"report": report})
    note({"step": "exit", "primitive": "", "eqn": ""})
    return 0


def _no_core_dumps():
    """A crash here is expected and reported: writing a core file would only cost time."""
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv))
