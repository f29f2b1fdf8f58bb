"""Architecture rules that a reviewer would otherwise have to remember."""

import re
from pathlib import Path

import onnx.defs

ROOT = Path(__file__).resolve().parents[2]
STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
# The optimizer needs some op semantics (Relu is elementwise, a Transpose with
# the identity permutation is a no-op). All of it sits in this one table, so
# the passes themselves stay structure-only; no other file of core/ may name
# an op.
OP_TABLE = {Path("core/src/passes/onnx_ops.cpp")}


def test_core_names_no_onnx_op():
    ops = {s.name for s in onnx.defs.get_all_schemas_with_history()}
    found = []
    for path in sorted((ROOT / "core").rglob("*.[ch]pp")):
        if path.relative_to(ROOT) in OP_TABLE:
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            found += [f"{path.relative_to(ROOT)}:{lineno}: {s}" for s in STRING.findall(line)
                      if s in ops]
    assert found == [], "op names belong in plugins (or, for passes, in onnx_ops.cpp):\n" + \
        "\n".join(found)


def test_the_op_table_exists():
    # Guards the exception above from outliving the file it names.
    assert all((ROOT / p).is_file() for p in OP_TABLE)


def test_plugins_include_only_the_sdk():
    # Any header of the SDK (jaxonnx/<name>.h or .hpp; the core's are under jaxonnx/core/),
    # the standard library's, or the plugin's own beside it.
    allowed = re.compile(r'#include\s+[<"](jaxonnx/[a-z_]+\.h(pp)?|[a-z_]+(\.h)?)[>"]')
    bad = []
    for path in sorted((ROOT / "plugins").rglob("*.[ch]*")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            local = re.match(r'#include\s+"([a-z_]+\.hpp)"', line)
            if local and (path.parent / local.group(1)).is_file():
                continue  # the plugin's own header, beside it
            if line.startswith("#include") and not allowed.match(line):
                bad.append(f"{path.relative_to(ROOT)}:{lineno}: {line}")
    assert bad == [], "plugins build only against plugin_sdk:\n" + "\n".join(bad)


def test_plugins_emit_no_reshape_of_their_own():
    # A Reshape's shape operand (0 copies, -1 infers, allowzero from opset 14)
    # is decided in one place: the SDK's reshape forms (idioms.hpp; and
    # reshape_by_value.hpp for a rule's runtime shape value). A plugin names
    # Reshape only to declare it or to match it in a rewrite rule.
    emitted = re.compile(r'"Reshape",\s*\{')  # an op call's type and inputs
    found = []
    for path in sorted((ROOT / "plugins").rglob("*.[ch]*")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if emitted.search(line):
                found.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert found == [], ("reshape through idioms.hpp (reshape, flatten, merge_leading, reshape_after) "
                         "or reshape_by_value.hpp:\n" + "\n".join(found))
