"""expect_graph(): assertions on the op structure of a model's main graph."""

from __future__ import annotations

import re
from typing import Any, Sequence

import onnx


# ---------------------------------------------------------------- expect_graph

_ARROW = re.compile(r"\s*->\s*")


def _graph_of(model):
    return model.graph if isinstance(model, onnx.ModelProto) else model


def _used_names(graph):
    """Every value name a node of `graph` (or of its subgraphs) reads."""
    used = set()
    for node in graph.node:
        used.update(node.input)
        for attr in node.attribute:
            for g in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                used |= _used_names(g)
    return used


def _dims(value_info):
    shape = value_info.type.tensor_type.shape
    return tuple(d.dim_param if d.HasField("dim_param") else
                 d.dim_value if d.HasField("dim_value") else None for d in shape.dim)


def _find_paths(graph, ops):
    """Every chain of nodes with op types `ops` where each node reads an output of the
    one before; as lists of node indices."""
    consumers: dict[str, list[int]] = {}
    for i, node in enumerate(graph.node):
        for name in node.input:
            if name:
                consumers.setdefault(name, []).append(i)
    found = []

    def walk(path):
        if len(path) == len(ops):
            found.append(list(path))
            return
        nexts = sorted({j for out in graph.node[path[-1]].output for j in consumers.get(out, [])})
        for j in nexts:
            if graph.node[j].op_type == ops[len(path)] and j not in path:
                walk(path + [j])

    for i, node in enumerate(graph.node):
        if node.op_type == ops[0]:
            walk([i])
    return found


def expect_graph(model, paths: Sequence[str] = (), *, match: str = "contains",
                 counts: dict[str, int] | None = None, absent: Sequence[str] = (),
                 inputs: Sequence[Sequence[Any]] | None = None,
                 outputs: Sequence[Sequence[Any]] | None = None,
                 no_unused_inputs: bool = False) -> None:
    """Asserts the structure of a model's main graph.

    Args:
        paths: "A -> B -> C" strings: a chain of nodes, each reading an output of the
            one before (other inputs may come from anywhere).
        match: "contains": each path occurs somewhere (distinct paths for repeated
            strings); "exact": moreover each runs from a node reading a graph input
            to one writing a graph output, and together they cover every node (paths
            may share nodes: ["Slice -> Add", "Slice -> Add"] is two Slices into one Add).
        counts: {op_type: exact number of nodes}.
        absent: op types that must not occur.
        inputs: per graph input, its dims: ints, symbol names ("B"),
            or None for "any".
        outputs: per graph output, its dims, as for inputs.
        no_unused_inputs: every graph input is read by a node (or is an output).

    Raises:
        AssertionError: describing the graph, when something does not hold.
    """
    if match not in ("contains", "exact"):
        raise ValueError(f'match must be "contains" or "exact"; got {match!r}')
    graph = _graph_of(model)
    ops = [n.op_type for n in graph.node]
    where = f"graph ops: {' -> '.join(ops) if ops else '(none)'}"
    covered: set[int] = set()
    chosen: list[list[int]] = []
    graph_inputs = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    graph_outputs = {o.name for o in graph.output}
    for text in paths:
        want = [p for p in _ARROW.split(text.strip()) if p]
        assert want, f"empty path {text!r}"
        candidates = [c for c in _find_paths(graph, want) if c not in chosen]
        if match == "exact":
            candidates = [
                c for c in candidates
                if any(n in graph_inputs for n in graph.node[c[0]].input)
                and any(n in graph_outputs for n in graph.node[c[-1]].output)]
        assert candidates, f"no path {text!r} ({match}); {where}"
        best = max(candidates, key=lambda c: len(set(c) - covered))  # first of the widest
        chosen.append(best)
        covered |= set(best)
    if match == "exact":
        missing = [f"{i}:{ops[i]}" for i in range(len(ops)) if i not in covered]
        assert not missing, f"nodes on no expected path: {missing}; {where}"
    for op, n in (counts or {}).items():
        assert ops.count(op) == n, f"{op}: {ops.count(op)} nodes, expected {n}; {where}"
    for op in absent:
        assert op not in ops, f"{op} should not occur; {where}"
    for kind, want, got in (("input", inputs, graph.input), ("output", outputs, graph.output)):
        if want is None:
            continue
        assert len(got) == len(want), f"{len(got)} graph {kind}s, expected {len(want)}"
        for k, (dims, vi) in enumerate(zip(want, got)):
            have = _dims(vi)
            assert len(have) == len(dims) and all(
                w is None or w == h for w, h in zip(dims, have)), \
                f"graph {kind} {k} ({vi.name}) has dims {have}, expected {tuple(dims)}"
    if no_unused_inputs:
        used = _used_names(graph) | graph_outputs
        unused = [i.name for i in graph.input if i.name not in used]
        assert not unused, f"graph inputs read by no node: {unused}"
