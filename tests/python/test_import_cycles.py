"""No import cycle inside the jaxonnx package.

Read from the sources (no import runs): every `import` and `from ... import`
naming a jaxonnx module counts, those inside functions too, since a deferred
import is how a cycle hides until one module is imported first.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "jaxonnx"
# Extension modules the build adds beside the sources.
EXTENSIONS = {"jaxonnx._core"}


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict:
    """module -> the set of modules of the package it imports, for the package at `root`."""
    files = {_module_name(f, root): f for f in root.rglob("*.py")}
    known = set(files) | {f"{root.name}.{e.split('.', 1)[1]}" for e in EXTENSIONS}
    graph = {}
    for name, path in files.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = here[:len(here) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:  # `from pkg import submodule` imports the submodule
                    sub = f"{module}.{alias.name}"
                    deps.add(sub if sub in known else module)
        graph[name] = {d for d in deps if d in files and d != name}
    return graph


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_cycle():
    graph = import_graph(PACKAGE)
    assert "jaxonnx._trace" in graph and "jaxonnx._keys" in graph["jaxonnx._trace"]
    found = cycles(graph)
    assert found == [], "import cycles: " + "; ".join(
        " <-> ".join(c) + " (" + ", ".join(f"{m} -> {sorted(graph[m] & set(c))}" for m in c) + ")"
        for c in found)


def test_the_check_finds_a_cycle_through_a_deferred_import(tmp_path):
    pkg = tmp_path / "jaxonnx"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from jaxonnx._a import f\n")
    (pkg / "_a.py").write_text("from jaxonnx import _b, _core\n\ndef f():\n    return _b\n")
    (pkg / "_b.py").write_text("def g():\n    from ._a import f\n    return f\n")
    (pkg / "_c.py").write_text("from jaxonnx._core import ConversionError\n")
    graph = import_graph(pkg)
    assert graph["jaxonnx._c"] == set()  # the extension module is a leaf, not the package
    assert cycles(graph) == [["jaxonnx._a", "jaxonnx._b"]]
    # A module importing the package's __init__ that imports it back is a cycle too.
    (pkg / "_c.py").write_text("def h():\n    from jaxonnx import f\n    return f\n")
    (pkg / "__init__.py").write_text("from jaxonnx._c import h\n")
    assert ["jaxonnx", "jaxonnx._c"] in cycles(import_graph(pkg))
