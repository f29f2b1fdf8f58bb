"""Prints the default ONNX domain's operators as C++ table entries,
{"Name", first_opset},, sorted by name (core/src/onnx_schema.cpp includes it)."""
import onnx.defs

since = {}
for schema in onnx.defs.get_all_schemas_with_history():
    if schema.domain == "":
        since[schema.name] = min(since.get(schema.name, 10**6), schema.since_version)
print("".join('{"%s", %d},\n' % (n, v) for n, v in sorted(since.items())), end="")
