"""`python -m jaxonnx keras`: a saved Keras model (.keras) to an ONNX file."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

HELP = "convert a saved Keras model (.keras, JAX backend) to an ONNX file"
DESCRIPTION = """\
Loads MODEL with keras.saving.load_model on the JAX backend and writes OUTPUT with
jaxonnx.keras.export: the model's own input specs, None dims symbolic, inference
mode. Custom layers load when the modules that register them are imported first
(--import MODULE).

example: python -m jaxonnx keras classifier.keras classifier.onnx --verify
"""


def add_parser(sub) -> None:
    p = sub.add_parser("keras", help=HELP, description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL", help="a .keras file (keras.Model.save)")
    p.add_argument("output", metavar="OUTPUT", help="the .onnx file written")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="a module to import first, importable from the current folder (one "
                        "that registers the model's custom layers); repeatable")
    p.add_argument("--constraint", action="append", default=[], metavar="TEXT",
                   help="a constraint on a symbolic dim, e.g. 'dim_0_1 <= 512' (repeatable; "
                        "None dims are named batch and dim_<input>_<axis>)")
    p.add_argument("--opset", type=int, default=None,
                   help="default-domain opset (default: the target's, 23 for onnxruntime)")
    p.add_argument("--target", default="onnxruntime",
                   choices=("onnxruntime", "portable", "onnxruntime-contrib"),
                   help="the runtime the model is for (docs/targets.md; default onnxruntime)")
    p.add_argument("--external-data", action="store_true",
                   help="write weights of 1 KiB or more to OUTPUT.data (always done past 2 GB)")
    p.add_argument("--verify", action="store_true",
                   help="run the model in onnxruntime on random inputs and compare with Keras; "
                        "a mismatch is an error and nothing is written")
    p.set_defaults(run=run)


def run(args) -> int:
    if os.environ.setdefault("KERAS_BACKEND", "jax") != "jax":
        print(f"error: KERAS_BACKEND is {os.environ['KERAS_BACKEND']!r}; jaxonnx converts "
              f"models of the JAX backend: unset it or set it to jax", file=sys.stderr)
        return 2
    import jaxonnx
    from jaxonnx import keras as jaxonnx_keras

    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        for name in args.imports:
            importlib.import_module(name)
    except ImportError as e:
        print(f"error: cannot import {e.name or name}: {e}", file=sys.stderr)
        return 2
    try:
        keras = jaxonnx_keras._keras()
        model = keras.saving.load_model(args.model)
    except jaxonnx.ConversionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # keras raises ValueError, TypeError, OSError, ... for a bad file
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(f"error: cannot load {args.model}: {type(e).__name__}: {first}", file=sys.stderr)
        return 2
    try:
        jaxonnx_keras.export(model, args.output, opset=args.opset, target=args.target,
                             external_data=True if args.external_data else None,
                             verify=args.verify, constraints=args.constraint or None)
    except jaxonnx.ConversionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(args.output)
    return 0
