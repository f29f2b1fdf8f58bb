"""`python -m jaxonnx genai`: a decoder step from a factory, to an onnxruntime-genai folder."""

from __future__ import annotations

import argparse
import json
import sys

from jaxonnx._cli_convert import _load_factory

HELP = "export a JAX decoder step as an onnxruntime-genai model folder"
DESCRIPTION = """\
Imports MODULE, calls FACTORY() with no arguments and exports what it returns
with jaxonnx.genai.export: either (step, config) or the step alone with
--config. The step is step(input_ids, attention_mask, position_ids, past) ->
(logits, present) (docs/llm.md); config holds genai_config.json's model keys.
Writes OUTPUT/model.onnx and OUTPUT/genai_config.json, which
onnxruntime_genai.Model(OUTPUT) loads.

example: python -m jaxonnx genai mymodel:make_step --config config.json -o llm/
"""


def add_parser(sub) -> None:
    p = sub.add_parser("genai", help=HELP, description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("factory", metavar="MODULE:FACTORY",
                   help="a module importable from the current folder and a function in it "
                        "returning (step, config) or the step")
    p.add_argument("--config", metavar="JSON",
                   help="a JSON file of the config (genai_config.json's model keys; with a "
                        "factory that returns (step, config), its keys override the factory's)")
    p.add_argument("--target", default="onnxruntime", choices=("onnxruntime", "onnxruntime-contrib"),
                   help="standard ops and a growing cache (default), or onnxruntime's com.microsoft "
                        "ops (docs/llm.md)")
    p.add_argument("--cache-layout", default="BKLH", choices=("BKLH", "BLKH"),
                   help="the step's cache layout: [B, kv_heads, L, head_size] (genai's, the "
                        "default) or [B, L, kv_heads, head_size]")
    p.add_argument("--fusion", default="fast", choices=("fast", "exact", "none", "approximate"),
                   help="fused ONNX ops as for convert; approximate (opt-in) adds int8-activation "
                        "MatMulNBits for int4/int8 weights under onnxruntime-contrib (docs/quantization.md)")
    p.add_argument("--opset", type=int, default=None, help="default-domain opset (default: the target's)")
    p.add_argument("--external-data", action="store_true",
                   help="write weights of 1 KiB or more to model.onnx.data (always done past 2 GB)")
    p.add_argument("--plugin-dir", action="append", default=[], metavar="DIR",
                   help="an extra plugin folder (repeatable)")
    p.add_argument("--verify", action="store_true",
                   help="compare the model with the step in onnxruntime on random inputs first")
    p.add_argument("-o", "--output", required=True, metavar="OUTPUT", help="the folder written")
    p.set_defaults(run=run)


def run(args) -> int:
    import jaxonnx
    from jaxonnx import genai

    try:
        factory = _load_factory(args.factory)
    except (ImportError, AttributeError, ValueError) as e:
        print(f"error: cannot load {args.factory}: {e}", file=sys.stderr)
        return 2
    config = {}
    if args.config:
        try:
            with open(args.config) as f:
                config = json.load(f)
        except (OSError, ValueError) as e:
            print(f"error: cannot read --config {args.config}: {e}", file=sys.stderr)
            return 2
    try:
        made = factory()
    except Exception as e:  # raised by the user's factory
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(f"error: {args.factory} failed: {type(e).__name__}: {first}", file=sys.stderr)
        return 1
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[1], dict):
        step, config = made[0], {**made[1], **config}
    elif args.config:
        step = made
    else:
        print(f"error: {args.factory} returned no (step, config) pair; give --config JSON",
              file=sys.stderr)
        return 2
    try:
        genai.export(step, config, args.output, target=args.target, cache_layout=args.cache_layout,
                     fusion=args.fusion,
                     opset=args.opset, external_data=True if args.external_data else None,
                     plugin_dirs=args.plugin_dir or None, verify=args.verify)
    except jaxonnx.ConversionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # raised by the step itself while tracing
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(f"error: {args.factory} failed: {type(e).__name__}: {first}", file=sys.stderr)
        return 1
    print(args.output)
    return 0
