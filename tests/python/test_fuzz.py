"""The random-program fuzzer (fuzz_programs.py) in the suite.

A fixed set of seeds runs in every ./scripts/test, split into chunks so
pytest-xdist spreads them; each chunk checks its seeds in a child process
that may crash without taking the suite down (a crash is reported with the
seed that caused it). JAXONNX_FUZZ_SEEDS=N runs N seeds instead (the long,
nightly mode), JAXONNX_FUZZ_START=S starts at seed S.

To reproduce a failure: python tests/python/fuzz_programs.py <seed>.
Every seed that ever failed is kept in REPRODUCERS and runs on its own.
"""

from __future__ import annotations

import os

import pytest

import fuzz_programs

SEEDS = int(os.environ.get("JAXONNX_FUZZ_SEEDS", "240"))
START = int(os.environ.get("JAXONNX_FUZZ_START", "0"))
CHUNKS = 8

# Seeds that found bugs (fixed since); each is a regression test of its own.
REPRODUCERS = {
}


def _report(failures):
    return "\n\n".join(f"seed {s}: {why}" for s, why in sorted(failures.items()))


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_programs(chunk):
    seeds = range(START + chunk, START + SEEDS, CHUNKS)
    failures = fuzz_programs.run_seeds(seeds)
    assert not failures, _report(failures)


@pytest.mark.parametrize("seed", sorted(REPRODUCERS), ids=lambda s: f"{s}-{REPRODUCERS[s]}")
def test_reproducer(seed):
    failures = fuzz_programs.run_seeds([seed])
    assert not failures, _report(failures)


def test_the_runner_survives_a_crashing_case(monkeypatch):
    # A seed whose check kills the child process is reported, and the
    # seeds after it still run.
    monkeypatch.setenv("JAXONNX_FUZZ_CRASH_SEED", "5")
    failures = fuzz_programs.run_seeds([4, 5, 6])
    assert list(failures) == [5]
    assert "the process died" in failures[5]
