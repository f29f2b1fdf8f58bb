"""`python -m jaxonnx convert`: a model from a factory function, to an ONNX file."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

HELP = "convert the callable a factory returns to an ONNX file"
DESCRIPTION = """\
Imports MODULE, calls FACTORY() with no arguments and converts the callable it
returns (a function or a flax nnx module) with jaxonnx.to_onnx, writing OUTPUT.
Give one --input per positional argument of the callable: its dims separated by
commas, ints or symbols (B,3,224,224 keeps B symbolic).

example (in examples/): python -m jaxonnx convert mlp:make_model --input B,30 -o mlp.onnx
"""


def add_parser(sub) -> None:
    p = sub.add_parser("convert", help=HELP, description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("factory", metavar="MODULE:FACTORY",
                   help="a module importable from the current folder and a function in it "
                        "(dotted for an attribute path) returning the callable")
    p.add_argument("--input", action="append", required=True, metavar="DIMS",
                   help="one positional input's shape, e.g. B,3,224,224 (repeat per input)")
    p.add_argument("--dtype", action="append", default=[], metavar="DTYPE",
                   help="its dtype (default float32; float64 turns on 64-bit tracing); once "
                        "for all inputs or once per --input")
    p.add_argument("--opset", type=int, default=None,
                   help="default-domain opset (default: the target's, 23 for onnxruntime)")
    p.add_argument("--target", default="onnxruntime",
                   choices=("onnxruntime", "portable", "onnxruntime-contrib"),
                   help="the runtime the model is for (docs/targets.md; default onnxruntime)")
    p.add_argument("--fusion", default="fast", choices=("fast", "exact", "none", "approximate"),
                   help="fused ONNX ops: all within float rounding (fast, the default), only those "
                        "exact on NaN and infinity too (exact), none, or also those beyond rounding by a "
                        "documented error (approximate: docs/quantization.md)")
    p.add_argument("--model-name", default="jax_model", help="the ONNX graph's name")
    p.add_argument("--no-optimize", action="store_true", help="keep the raw lowering")
    p.add_argument("--external-data", action="store_true",
                   help="write weights of 1 KiB or more to OUTPUT.data (always done past 2 GB)")
    p.add_argument("--plugin-dir", action="append", default=[], metavar="DIR",
                   help="an extra plugin folder (repeatable)")
    p.add_argument("--verify", action="store_true",
                   help="run the model in onnxruntime on random inputs (symbolic dims at 1 and "
                        "two larger sizes) and compare with JAX; a mismatch is an error naming "
                        "the first equation that diverges, and nothing is written")
    p.add_argument("--report", metavar="PATH", default=None,
                   help="also write a markdown conversion report to PATH (docs/report.md): the "
                        "plugins that lowered each primitive, the binding specs and rewrite rules "
                        "that fired, what the target changed or refused, nodes before and after "
                        "the optimizer, --verify's results, and onnxruntime's time per op type, "
                        "charted in PATH's stem + _profile.png")
    p.add_argument("-o", "--output", required=True, metavar="OUTPUT", help="the .onnx file written")
    p.set_defaults(run=run)


def _dims(text):
    dims = []
    for d in text.split(","):
        d = d.strip()
        if not d:
            raise ValueError(f"empty dimension in --input {text!r}")
        dims.append(int(d) if d.lstrip("-").isdigit() else d)
    return tuple(dims)


def _load_factory(spec):
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected MODULE:FACTORY, got {spec!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def run(args) -> int:
    import jax
    import numpy as np

    import jaxonnx

    try:
        shapes = [_dims(s) for s in args.input]
        dtypes = args.dtype or ["float32"]
        if len(dtypes) == 1:
            dtypes = dtypes * len(shapes)
        if len(dtypes) != len(shapes):
            raise ValueError(f"{len(dtypes)} --dtype for {len(shapes)} --input; give one or one each")
        dtypes = [np.dtype(d) for d in dtypes]
    except (ValueError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        factory = _load_factory(args.factory)
    except (ImportError, AttributeError, ValueError) as e:
        print(f"error: cannot load {args.factory}: {e}", file=sys.stderr)
        return 2
    if not callable(factory):
        print(f"error: {args.factory} is not callable", file=sys.stderr)
        return 2
    x64 = any(d.itemsize == 8 for d in dtypes)
    try:
        with jax.enable_x64(x64):
            fn = factory()
            specs = [jax.ShapeDtypeStruct(shape, dt) for shape, dt in zip(shapes, dtypes)]
        jaxonnx.to_onnx(fn, specs, model_name=args.model_name, opset=args.opset,
                        enable_double_precision=x64, return_mode="file", output_path=args.output,
                        plugin_dirs=args.plugin_dir or None, optimize=not args.no_optimize,
                        external_data=True if args.external_data else None,
                        verify=args.verify, target=args.target, fusion=args.fusion,
                        report=args.report)
    except jaxonnx.ConversionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # raised by the model itself (a shape error while tracing, ...)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(f"error: {args.factory} failed: {type(e).__name__}: {first}", file=sys.stderr)
        return 1
    print(args.output)
    if args.report:
        print(args.report)
    return 0
