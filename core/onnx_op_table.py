"""Prints the default ONNX domain's operators as C++ table entries,
{"Name", {since, ...}}, sorted by name, each with the opsets in which its
form changed, oldest first (core/src/onnx_schema.cpp includes it)."""
import onnx.defs

since = {}
for schema in onnx.defs.get_all_schemas_with_history():
    if schema.domain == "":
        since.setdefault(schema.name, set()).add(schema.since_version)
print("".join('{"%s", {%s}},\n' % (n, ", ".join(map(str, sorted(v))))
              for n, v in sorted(since.items())), end="")
