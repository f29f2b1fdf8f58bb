"""The conversion report's chart: onnxruntime's time per op type as horizontal
bars (matplotlib, drawn off-screen), written as a PNG."""

from __future__ import annotations

import os

MAX_BARS = 20  # the rest is one "other" bar


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def draw(path, ops, title):
    """Writes the chart of `ops` (_ort_profile.OpTime, slowest first) to `path`
    (a PNG) through a temporary file beside it, so `path` is whole or absent."""
    import matplotlib
    matplotlib.use("Agg", force=False)  # no display; keeps a backend the caller chose
    from matplotlib.figure import Figure

    shown = list(ops[:MAX_BARS])
    labels = [o.op_type for o in shown]
    values = [o.microseconds for o in shown]
    if len(ops) > MAX_BARS:
        labels.append(f"other ({len(ops) - MAX_BARS} op types)")
        values.append(sum(o.microseconds for o in ops[MAX_BARS:]))
    total = sum(values) or 1.0
    # A Figure without pyplot: no global state, nothing left open.
    fig = Figure(figsize=(7.5, 1.2 + 0.32 * len(labels)), dpi=100)
    ax = fig.add_subplot()
    bars = ax.barh(range(len(labels)), values, color="#4878a8")
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()  # slowest on top
    ax.set_xlabel("microseconds per run (kernel time, summed over the op's nodes)")
    ax.set_title(title, fontsize=10)
    for bar, v in zip(bars, values):
        ax.annotate(f"{100 * v / total:.1f}%", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                    xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xlim(0, max(values or [1.0]) * 1.15)
    fig.tight_layout()
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        fig.savefig(tmp, format="png", metadata={"Software": None})
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
