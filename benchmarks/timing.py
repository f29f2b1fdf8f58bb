"""onnxruntime latency of several sessions, measured fairly.

onnxruntime's intra-op threads spin for a while after a run, so a session
timed right after another one inherits its warm (or busy) threads. Sessions
are therefore timed in alternating blocks of runs, each block's first run
dropped, and each session's time is the median of its kept runs: load that
comes and goes hits every session alike, and no session is timed in another's
wake.

Dropping one run is not enough with more than one intra-op thread: on this
2-core machine a session timed right after another ran up to 2x slower for
30 ms and more (the previous session's pool still held the cores), so three
sessions of one decode-step graph measured 6.4, 12.3 and 6.6 ms. Each block
therefore starts after IDLE seconds without a run; at 50 ms the three measured
4.5, 4.3 and 4.3 ms. With one intra-op thread there is no pool to wait for.
"""

from __future__ import annotations

import statistics
import time

IDLE = 0.05  # seconds before each block: another session's intra-op threads park


def block_latency(sessions, feed_of, runs, block=5, warmup=3, idle=IDLE):
    """Median seconds per run of each of `sessions` (a list), over `runs` kept
    runs each, in alternating blocks of `block` + 1 runs (the first dropped),
    each block (of more than one session) after `idle` seconds without a run.
    feed_of(session) gives the session's input dict."""
    for s in sessions:
        feed = feed_of(s)
        for _ in range(warmup):
            s.run(None, feed)
    times = [[] for _ in sessions]
    while min(len(t) for t in times) < runs:
        for s, t in zip(sessions, times):
            feed = feed_of(s)
            if len(sessions) > 1:  # alone, no other session's pool to wait for
                time.sleep(idle)
            s.run(None, feed)  # the block's first run: the previous session's threads may still spin
            for _ in range(block):
                start = time.perf_counter()
                s.run(None, feed)
                t.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]
