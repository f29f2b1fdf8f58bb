"""`python -m jaxonnx inspect`: what an ONNX file holds, without loading its weights."""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys

HELP = "summarize an ONNX file: inputs/outputs, opsets, op histogram, functions, size, external data"
DESCRIPTION = """\
Prints the model's inputs and outputs (dtype and shape, symbolic dims by name), the
opsets it imports, how many nodes of each op type it holds (subgraphs and functions
included), its local functions, its size, and its initializers: how many bytes are
inside the file and which external data files it references (and whether they exist).
External data is not read.
"""


def add_parser(sub) -> None:
    p = sub.add_parser("inspect", help=HELP, description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="an .onnx file")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=run)


def _value(vi):
    import onnx

    t = vi.type.tensor_type
    if not vi.type.HasField("tensor_type"):
        return {"name": vi.name, "type": vi.type.WhichOneof("value") or "unknown"}
    dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name if t.elem_type else "undefined"
    shape = None
    if t.HasField("shape"):
        shape = [d.dim_param if d.HasField("dim_param") else
                 (d.dim_value if d.HasField("dim_value") else "?") for d in t.shape.dim]
    return {"name": vi.name, "dtype": dtype, "shape": shape}


def _graphs(graph):
    yield graph
    for n in graph.node:
        for a in n.attribute:
            if a.HasField("g"):
                yield from _graphs(a.g)
            for g in a.graphs:
                yield from _graphs(g)


def _nbytes(t):
    import numpy as np
    import onnx

    n = int(np.prod(t.dims, dtype=np.int64)) if t.dims else 1
    try:
        return n * np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
    except Exception:  # string or unknown types: the bytes actually stored
        return t.ByteSize()


def summary(path) -> dict:
    import onnx

    model = onnx.load(path, load_external_data=False)
    graphs = list(_graphs(model.graph))
    ops = collections.Counter(
        (f"{n.domain}::" if n.domain else "") + n.op_type for g in graphs for n in g.node)
    for f in model.functions:
        ops.update((f"{n.domain}::" if n.domain else "") + n.op_type for n in f.node)
    inside = external = count = 0
    files = collections.Counter()
    for g in graphs:
        for t in g.initializer:
            count += 1
            if t.data_location == onnx.TensorProto.EXTERNAL:
                entries = {e.key: e.value for e in t.external_data}
                size = int(entries.get("length", _nbytes(t)))
                external += size
                files[entries.get("location", "?")] += size
            else:
                inside += _nbytes(t)
    folder = os.path.dirname(os.path.abspath(path))
    return {
        "file": path,
        "size": os.path.getsize(path),
        "ir_version": model.ir_version,
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "graph": model.graph.name,
        "opsets": {o.domain or "ai.onnx": o.version for o in model.opset_import},
        "inputs": [_value(v) for v in model.graph.input],
        "outputs": [_value(v) for v in model.graph.output],
        "nodes": sum(ops.values()),
        "subgraphs": len(graphs) - 1,
        "ops": dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))),
        "functions": [{"domain": f.domain, "name": f.name, "nodes": len(f.node)}
                      for f in model.functions],
        "initializers": {"count": count, "bytes_inside": inside, "bytes_external": external},
        "external_data": [
            {"location": loc, "bytes": size,
             "exists": os.path.isfile(os.path.join(folder, loc)),
             "file_size": (os.path.getsize(os.path.join(folder, loc))
                           if os.path.isfile(os.path.join(folder, loc)) else None)}
            for loc, size in sorted(files.items())],
    }


def _size(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000


def _shape(v):
    if "shape" not in v:
        return v["type"]
    if v["shape"] is None:
        return f"{v['dtype']}[unknown rank]"
    return f"{v['dtype']}[{', '.join(str(d) for d in v['shape'])}]"


def run(args) -> int:
    try:
        info = summary(args.model)
    except Exception as e:  # OSError, or onnx's DecodeError and others for a bad file
        print(f"error: cannot read {args.model}: {e}", file=sys.stderr)
        return 1
    if args.json:
        json.dump(info, sys.stdout, indent=2)
        print()
        return 0
    print(f"{info['file']}: {_size(info['size'])}, IR {info['ir_version']}, "
          f"producer {info['producer'] or '?'}, graph '{info['graph']}'")
    print("opsets: " + ", ".join(f"{d} {v}" for d, v in info["opsets"].items()))
    for title in ("inputs", "outputs"):
        print(f"{title}:")
        for v in info[title]:
            print(f"  {v['name']}: {_shape(v)}")
    print(f"nodes: {info['nodes']}" + (f" (in {info['subgraphs']} subgraphs too)"
                                        if info["subgraphs"] else ""))
    for op, n in info["ops"].items():
        print(f"  {n:6d}  {op}")
    if info["functions"]:
        print("functions:")
        for f in info["functions"]:
            print(f"  {f['domain']}::{f['name']} ({f['nodes']} nodes)")
    init = info["initializers"]
    print(f"initializers: {init['count']}, {_size(init['bytes_inside'])} inside, "
          f"{_size(init['bytes_external'])} external")
    for f in info["external_data"]:
        state = "present" if f["exists"] else "MISSING"
        print(f"  {f['location']}: {_size(f['bytes'])} referenced ({state})")
    return 0
