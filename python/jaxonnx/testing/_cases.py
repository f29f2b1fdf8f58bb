"""Testcases as data, expanded into variants and run in a child process per test module."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import select
import subprocess
import sys
import tempfile
import warnings
from typing import Callable, Sequence

import onnx

from jaxonnx import _core
from jaxonnx.testing._inputs import VARIANTS, Variant, _has_symbol
from jaxonnx.testing._check import check


# ---------------------------------------------------------------- testcases as data

@dataclasses.dataclass
class Testcase:
    """A program using the plugin, declared as data.

    Attributes:
        callable: the function to convert (positional inputs).
        input_specs: as for check(): shapes with symbols, or (shape, dtype).
        expected_ops: expect_graph paths (e.g. ["Softsign"] or ["Mul -> Softsign"]) the
            optimized model must contain; expect_options passes match=, counts=, ...
        variants: restrict the expansion (default: every applicable Variant).
    """
    __test__ = False  # not a pytest class

    name: str
    callable: Callable
    input_specs: Sequence
    expected_ops: Sequence[str] = ()
    expect_options: dict = dataclasses.field(default_factory=dict)
    plugin_dirs: Sequence | None = None
    variants: Sequence[Variant] | None = None
    rtol: float | None = None
    atol: float | None = None
    make_inputs: Callable | None = None


@dataclasses.dataclass
class Case:
    """One testcase in one variant: what a generated test runs. `module`: the
    test module whose TESTCASES it comes from (set by the pytest plugin), so
    that a child process can run it."""
    testcase: Testcase
    variant: Variant
    module: str | None = None

    @property
    def id(self):
        return f"{self.testcase.name}-{self.variant}"

    def run(self, plugin_dirs=None, *, isolate=None):
        """check() in this case's variant; returns the optimized model. With
        `isolate` (default: when `module` is known and $JAXONNX_TESTING_ISOLATE is
        not 0) the conversions run in a child process, and a crash there raises
        AssertionError naming the signal, the plugin call and the case."""
        if isolate is None:
            isolate = self.module is not None and os.environ.get(ISOLATE_ENV_VAR, "1") != "0"
        if isolate and self.module is not None:
            server = _CaseServer.of(self.module)
            if server is not None:
                return server.run(self, plugin_dirs)
        t = self.testcase
        return check(t.callable, t.input_specs, plugin_dirs=t.plugin_dirs or plugin_dirs,
                     variants=[self.variant], rtol=t.rtol, atol=t.atol,
                     make_inputs=t.make_inputs, expect=list(t.expected_ops),
                     expect_options=t.expect_options)[self.variant]


ISOLATE_ENV_VAR = "JAXONNX_TESTING_ISOLATE"
CASE_TIMEOUT_ENV_VAR = "JAXONNX_TESTING_CASE_TIMEOUT"

_STEP_WORDS = {"lower": "while lowering '{n}' (plugin '{p}')",
               "abstract_eval": "in the abstract eval of '{n}' (plugin '{p}')",
               "rule": "in the rewrite rule '{n}' of plugin '{p}'"}


class _CaseServer:
    """A child process running the testcases of one test module (_case_server.py)."""
    _servers: dict[str, _CaseServer | None] = {}

    @classmethod
    def of(cls, module):
        """The module's live server, started when needed; None when the child
        cannot import the module (its cases then run in this process)."""
        server = cls._servers.get(module, False)
        if server is None:
            return None
        if server is False or server.proc.poll() is not None:
            server = cls(module)
            cls._servers[module] = server if server.ready else None
            if not server.ready:
                warnings.warn(f"jaxonnx.testing could not import {module} in a child process "
                              f"({server.why}); its testcases run in this process", stacklevel=3)
                return None
        return server

    def __init__(self, module):
        self.module = module
        fd, self.steps = tempfile.mkstemp(prefix="jaxonnx-cases-", suffix=".log")
        os.close(fd)
        self.err = tempfile.TemporaryFile()
        r, w = os.pipe()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        env.pop("PYTEST_XDIST_WORKER", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jaxonnx._case_server", module, str(w), self.steps],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self.err, pass_fds=(w,),
            env=env, text=True)
        os.close(w)
        self.reply, self.buffer = r, b""
        atexit.register(self.close)
        hello = self._read(float(os.environ.get(CASE_TIMEOUT_ENV_VAR, 900)))
        if hello is self._TIMEOUT:
            self.proc.kill()
            hello = {"error": "it did not start in time"}
        self.ready = bool(hello and hello.get("ready"))
        self.why = (hello or {}).get("error") or self._stderr() or "it exited"

    _TIMEOUT = {"timeout": True}

    def _read(self, timeout):
        """The child's next answer; None when it died, _TIMEOUT when the time is up."""
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.reply], [], [], timeout)
            if not ready:
                return self._TIMEOUT
            chunk = os.read(self.reply, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def _stderr(self):
        self.err.seek(0)
        return self.err.read()[-1500:].decode("utf-8", "replace").strip()

    def _where(self):
        """The plugin call the child was in, from its step log."""
        with open(self.steps, encoding="utf-8", errors="replace") as f:
            lines = [line.rstrip("\n").split("\t") for line in f if line.strip()]
        what, plugin, name = (lines[-1] + ["", ""])[:3] if lines else ("", "", "")
        if what in _STEP_WORDS:
            return _STEP_WORDS[what].format(n=name, p=plugin)
        return "outside any plugin call (in JAX, onnxruntime or jaxonnx itself)"

    def run(self, case, plugin_dirs):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.onnx")
            request = {"id": case.id, "model": path,
                       "plugin_dirs": [os.fspath(d) for d in plugin_dirs or []] or None}
            timeout = float(os.environ.get(CASE_TIMEOUT_ENV_VAR, 900))
            try:
                self.proc.stdin.write(json.dumps(request) + "\n")
                self.proc.stdin.flush()
            except OSError:
                pass  # it died: _read says so
            answer = self._read(timeout)
            if answer is None or answer is self._TIMEOUT:
                hung = answer is self._TIMEOUT
                if hung:
                    self.proc.kill()
                rc = self.proc.wait()
                where = self._where()
                if hung:
                    what = f"did not finish within {timeout:g} s (${CASE_TIMEOUT_ENV_VAR})"
                elif rc < 0:
                    from jaxonnx._preflight import _signal_name
                    name, text = _signal_name(-rc)
                    what = f"crashed its test process with {name} ({text})"
                else:
                    what = f"ended its test process (exit status {rc})"
                tail = self._stderr()
                raise AssertionError(
                    f"{case.id}: the conversion {what} {where}. jaxonnx.testing runs testcases "
                    f"in a child process, so only this test fails"
                    + (f"\n  its stderr ends with:\n{tail}" if tail else ""))
            if answer.get("error") == "AssertionError":
                raise AssertionError(answer["message"])
            if answer.get("error") == "ConversionError":
                raise _core.ConversionError(answer["message"])
            if answer.get("error"):
                raise RuntimeError(f"{case.id} failed in jaxonnx.testing's child process:\n"
                                   f"{answer['message']}")
            return onnx.load(path)

    def close(self):
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        with contextlib.suppress(OSError):
            os.close(self.reply)
        with contextlib.suppress(OSError):
            os.unlink(self.steps)
        self.err.close()


def expand(testcases: Sequence[Testcase]) -> list[Case]:
    """Every testcase in every variant it applies to (symbolic ones need a symbol)."""
    cases = []
    for t in testcases:
        for v in (t.variants or VARIANTS):
            if v.symbolic and not _has_symbol(t.input_specs):
                continue
            cases.append(Case(t, v))
    return cases
