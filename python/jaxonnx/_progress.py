"""Progress lines on stderr for long conversions.

JAXONNX_PROGRESS=1 shows them always, JAXONNX_PROGRESS=0 never; unset, they
show when stderr is a terminal and the conversion has already taken a second
(so quick conversions and logs stay quiet).
"""

from __future__ import annotations

import os
import sys
import time

_AFTER_SECONDS = 1.0


def _enabled() -> bool:
    setting = os.environ.get("JAXONNX_PROGRESS", "").strip()
    if setting in ("0", "1"):
        return setting == "1"
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _size(n) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


class Progress:
    def __init__(self):
        self.enabled = _enabled()
        self.forced = os.environ.get("JAXONNX_PROGRESS", "").strip() == "1"
        self.start = time.perf_counter()
        self._last_bytes_line = 0.0
        self._total = 0

    def _elapsed(self):
        return time.perf_counter() - self.start

    def say(self, text, end="\n"):
        if self.enabled and (self.forced or self._elapsed() >= _AFTER_SECONDS):
            sys.stderr.write(f"\rjaxonnx [{self._elapsed():6.1f}s] {text}{end}")
            sys.stderr.flush()

    def traced(self, closed):
        self.say(f"traced: {len(closed.jaxpr.eqns)} equations; lowering and optimizing")

    def converted(self, data, data_files, inline=False):
        """inline: the data files' tensors go into the ModelProto, not to files."""
        self._total = len(data) + sum(f.size for f in data_files)
        kind = "weights to copy in" if inline else "external data"
        self.say(f"lowered and optimized; model {_size(len(data))}"
                 + (f", {kind} {_size(self._total - len(data))}" if data_files else ""))

    def written(self, n):
        """Bytes of external data written so far (a DataFile.write progress callback)."""
        now = self._elapsed()
        if now - self._last_bytes_line >= 0.5:
            self._last_bytes_line = now
            self.say(f"writing: {_size(n)}", end="")

    def done(self, what):
        if self._last_bytes_line:
            self.say(f"wrote {_size(self._total)}")
        self.say(f"done: {what}")
