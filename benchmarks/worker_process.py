"""The worker processes of a benchmark that isolates its cases (corpus.py, catalog.py):
the script run with --worker, its protocol lines read by a thread into a queue (a
select on a buffered pipe would miss lines already read into the buffer), and a pool
of threads each driving one, replaced when a case kills or hangs it."""

from __future__ import annotations

import collections
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class WorkerProcess:
    """`script --worker` on one thread of everything, its records (stdout lines
    starting with `mark`, then JSON) queued as they come."""

    def __init__(self, script, mark):
        env = dict(os.environ, JAX_PLATFORMS="cpu", OMP_NUM_THREADS="1",
                   XLA_FLAGS=os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false")
        self.mark = mark
        self.proc = subprocess.Popen([sys.executable, "-u", str(script), "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env=env, cwd=str(ROOT))
        self.lines = queue.Queue()
        self.eof = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            if line.startswith(self.mark):
                self.lines.put(json.loads(line[len(self.mark):]))
        self.eof.set()
        self.lines.put(None)  # end of output: the process is gone

    def read(self, timeout):
        """The next record, or None when the process died or fell silent for `timeout` s."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def send(self, *fields):
        """One request: the fields tab-separated on a line."""
        self.proc.stdin.write("\t".join(fields) + "\n")
        self.proc.stdin.flush()

    def kill(self):
        """Ends the process; its exit status, None when it was still running (hung)."""
        status = self.proc.poll()
        if status is None and self.eof.is_set():
            # A dying process closes its pipes before it can be reaped: wait for its status.
            try:
                status = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.proc.kill()
        self.proc.wait()
        return status

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


class Slot:
    """One thread's worker: started on first use (its first record says it is ready),
    replaced after `drop` (a task that killed or hung it)."""

    def __init__(self, script, mark):
        self.script, self.mark, self.proc = script, mark, None

    def get(self):
        if self.proc is None:
            self.proc = WorkerProcess(self.script, self.mark)
            if self.proc.read(300) is None:
                raise RuntimeError(f"a worker of {Path(self.script).name} did not start")
        return self.proc

    def drop(self):
        """Kills the worker; the status and detail a task that ended it gets."""
        died, self.proc = self.proc.kill(), None
        return (("hang", None) if died is None else ("crash", f"the worker process died (exit status {died})"))

    def close(self):
        if self.proc is not None:
            self.proc.close()


def run_pool(items, jobs, script, mark, handle):
    """handle(slot, item) for every item, on `jobs` threads, each with its own Slot."""
    todo = collections.deque(items)
    lock = threading.Lock()

    def work():
        slot = Slot(script, mark)
        while True:
            with lock:
                if not todo:
                    break
                item = todo.popleft()
            handle(slot, item)
        slot.close()

    threads = [threading.Thread(target=work) for _ in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def serve(mark, handle):
    """The worker's side (`script --worker`): handle(fields, emit) for every request line
    on stdin (its tab-separated fields), emit(record) writing `mark` + JSON on stdout.
    Library prints go to stderr so they cannot break the protocol."""
    out = sys.stdout
    sys.stdout = sys.stderr

    def emit(rec):
        out.write(mark + json.dumps(rec) + "\n")
        out.flush()
    emit({"ready": True})
    for line in sys.stdin:
        if line.strip():
            handle(line.rstrip("\n").split("\t"), emit)
    return 0
