"""benchmarks/corpus.py runs end to end on a few candidates and reports a sane summary.
(The benchmark itself is not a test: docs/benchmarks/corpus.md has its results.)"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTCOMES = {"pass", "n/a", "conversion error", "invalid model", "onnxruntime error", "mismatch", "exception",
            "crash", "timeout"}


def test_corpus_limit_20(tmp_path):
    out = tmp_path / "corpus.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "corpus.py"), "--limit", "20", "--jobs", "1",
                          "--quiet", "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Pass rate:" in run.stdout and "| f64-symbolic |" in run.stdout
    data = json.loads(out.read_text())
    s, records = data["summary"], data["records"]
    assert s["candidates"] == 20
    assert 10 <= s["programs"] <= 20 and s["programs"] + s["no_program"] == 20
    # Four variants a program, each counted or not (JAX cannot run it).
    assert s["conversions"] + s["not_counted"] == 4 * s["programs"]
    assert 0.9 * s["conversions"] <= s["passed"] <= s["conversions"]
    assert {r["status"] for r in records if r.get("program")} <= OUTCOMES
    # Records come in the corpus's candidate order, every candidate once at least.
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import corpus_programs
    assert list(dict.fromkeys(r["name"] for r in records)) == corpus_programs.candidates()[:20]
