"""benchmarks/worker_process.py: the pool the catalog and corpus benchmarks isolate their
cases in goes on past a case that kills or hangs its worker, and blames that case."""

import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from worker_process import run_pool  # noqa: E402

WORKER = textwrap.dedent("""
    import json, os, sys, time
    print("@@t " + json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        case = line.strip()
        if case == "die":
            os._exit(3)
        if case == "hang":
            time.sleep(60)
        print("noise on stdout", flush=True)
        print("@@t " + json.dumps({"case": case, "pid": os.getpid()}), flush=True)
""")


def test_a_dead_or_hung_worker_is_replaced_and_the_case_blamed(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    out = {}

    def handle(slot, case):
        proc = slot.get()
        proc.send(case)
        rec = proc.read(2.0)
        out[case] = slot.drop() if rec is None else ("ok", rec["pid"])

    run_pool(["a", "die", "b", "hang", "c"], 1, script, "@@t ", handle)
    assert out["die"] == ("crash", "the worker process died (exit status 3)")
    assert out["hang"] == ("hang", None)
    assert [out[c][0] for c in "abc"] == ["ok"] * 3
    assert len({out[c][1] for c in "abc"}) == 3  # a new worker after each of die and hang
