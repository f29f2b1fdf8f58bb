"""The child process that runs jaxonnx.testing testcases, so a plugin's crash fails a test.

    python -m jaxonnx._case_server MODULE REPLY_FD STEPS

Imports MODULE (a test module with a TESTCASES list), answers one JSON line on the
file descriptor REPLY_FD when ready, then for each request line on stdin
({"id": case id, "plugin_dirs": [...], "model": path}) runs that case as
jaxonnx.testing would in-process, writes the optimized model to "model", and
answers {"id", "ok"} or {"id", "error": "AssertionError", "ConversionError" or
another type, "message"}. Before each case it appends "case\\t<id>" to the file STEPS, and the
core appends a line before each call into a plugin (jaxonnx._core.set_step_log),
so when plugin code kills this process the parent (testing._CaseServer) names
the case, the plugin and the primitive. Started by jaxonnx.testing only.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback

from jaxonnx._preflight_child import _no_core_dumps  # one child-process setup for both


def main(argv) -> int:
    _no_core_dumps()
    module_name, reply_fd, steps = argv[1], int(argv[2]), argv[3]
    steps_fd = os.open(steps, os.O_WRONLY | os.O_APPEND)

    def reply(obj):
        os.write(reply_fd, (json.dumps(obj) + "\n").encode())

    try:
        from jaxonnx import _core, testing

        module = importlib.import_module(module_name)
        cases = {c.id: c for c in testing.expand(module.TESTCASES)}
    except BaseException as e:  # the parent then runs the cases itself
        reply({"ready": False, "error": f"{type(e).__name__}: {e}"})
        return 1
    _core.set_step_log(steps_fd)
    reply({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        cid = request["id"]
        os.write(steps_fd, f"case\t{cid}\t\n".encode())
        try:
            model = cases[cid].run(request.get("plugin_dirs"), isolate=False)
            with open(request["model"], "wb") as f:
                f.write(model.SerializeToString())
            reply({"id": cid, "ok": True})
        except (AssertionError, _core.ConversionError) as e:
            reply({"id": cid, "error": type(e).__name__, "message": str(e)})
        except BaseException as e:  # noqa: BLE001  (reported to the parent, which raises)
            reply({"id": cid, "error": type(e).__name__,
                   "message": "".join(traceback.format_exception(e))})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
