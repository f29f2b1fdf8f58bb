"""The differential check, long form: every case of differential_cases.py at
more seeds, magnitudes and symbolic sizes than the test suite runs, and a
table per binding spec and rewrite rule.

    python benchmarks/differential.py [--seeds 3] [--filter REGEX] [--short]

Each case converts its program with the crisp ops and fusion rules on and with
both off, runs both at every onnxruntime graph optimization level, and compares
them with each other and with JAX (differential_check.py). The table gives, for
each spec and rule, the cases that cover it, the input sets compared, the
largest error as a multiple of the tolerance (<= 1 passes) and pass / FAIL /
known (a divergence owned elsewhere, named by the case). Then the worst run of
every case that did not pass. Exit status 1 when something fails that is not
known.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import differential_cases  # noqa: E402
import differential_check  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3, help="input seeds per case (default 3)")
    ap.add_argument("--filter", default="", help="only cases whose name matches this regex")
    ap.add_argument("--short", action="store_true",
                    help="the suite's magnitudes and sizes only (no long_scales, long_batches)")
    args = ap.parse_args(argv)

    cases = [c for c in differential_cases.CASES if re.search(args.filter, c.name)]
    results = {}
    for c in cases:
        start = time.perf_counter()
        r = differential_check.run_case(c, seeds=tuple(range(args.seeds)), long=not args.short)
        results[c.name] = r
        state = "pass" if r.passed else ("known" if c.known else "FAIL")
        print(f"  {c.name}: {r.runs} input sets, max {r.ratio:.3g} x tol, {state} "
              f"({time.perf_counter() - start:.1f} s)", file=sys.stderr, flush=True)

    keys = list(differential_check.spec_keys()) + differential_check.rule_names()
    print("| spec / rule | cases | input sets | max error / tol | result |")
    print("|---|---|---|---|---|")
    failed = False
    for key in keys:
        mine = [c for c in cases if key in c.covers]
        if not mine:
            if not args.filter:
                print(f"| `{key}` | 0 | 0 | | not covered |")
                failed = True
            continue
        ratio, runs, states = 0.0, 0, set()
        for c in mine:
            r = results[c.name]
            own = r.per_output.get(key)
            ratio = max(ratio, own if own is not None else r.ratio)
            runs += r.runs
            if key not in r.exercised:
                states.add("not exercised")
            elif r.errors:
                states.add("known" if c.known else "errors")
            elif not r.passed:
                states.add("known" if c.known else "FAIL")
        state = ", ".join(sorted(states)) or "pass"
        failed = failed or bool(states - {"known"})
        print(f"| `{key}` | {len(mine)} | {runs} | {ratio:.3g} | {state} |")
    uncovering = [c for c in cases if not c.covers]
    for c in uncovering:
        r = results[c.name]
        state = "pass" if r.passed else ("known" if c.known else "FAIL")
        failed = failed or state == "FAIL"
        print(f"| ({c.name}) | 1 | {r.runs} | {r.ratio:.3g} | {state} |")

    bad = [r for c in cases if not (r := results[c.name]).passed]
    if bad:
        print("\nCases that did not pass:\n")
        for r in bad:
            print(differential_check.describe(r) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
