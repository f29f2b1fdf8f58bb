"""jaxonnx.to_onnx: trace with JAX, lower through the plugin host, return ONNX."""

from __future__ import annotations

import contextlib
import os
import tempfile

import jax
import numpy as np
import onnx

from jaxonnx import (_bindings, _callbacks, _core, _fusion, _input_specs, _layout, _output,
                     _pipeline, _plugins, _progress, _report, _result, _source, _targets, _verify)
from jaxonnx._core import ConversionError
from jaxonnx._version import __version__

EXPORT_MODES = ("standard", "web")
NORMALIZATION_MODES = ("auto", "prefer_native", "force_decomposed")


def _check_opset(opset):
    newest = onnx.defs.onnx_opset_version()
    if isinstance(opset, bool) or not isinstance(opset, (int, np.integer)) \
            or not 7 <= opset <= newest:
        raise ConversionError(
            f"opset must be an int from 7 to {newest} (the newest the installed onnx knows; "
            f"below {_core.MIN_OPSET} only models whose operators kept their form since convert); "
            f"got {opset!r}")


def _choice(name, value, allowed):
    if value not in allowed:
        raise ConversionError(f"{name} must be one of {allowed}; got {value!r}")


def _names(kind, names, count):
    """Validated user names for `count` inputs or outputs (None: the defaults)."""
    if names is None:
        return None
    if isinstance(names, (str, bytes)) or not hasattr(names, "__iter__"):
        raise ConversionError(f"{kind} must be a list of strings, not {type(names).__name__}")
    names = list(names)
    for n in names:
        if not isinstance(n, str) or not n.strip():
            raise ConversionError(f"{kind}: {n!r} is not a non-empty string")
    if len(set(names)) != len(names):
        raise ConversionError(f"{kind}: names must be distinct; got {names}")
    if len(names) != count:
        raise ConversionError(f"{kind} has {len(names)} names for {count} {kind.split('_')[0]}s")
    return names


def _default_names(names, taken):
    """`names`, each made distinct from the user's `taken` names (theirs win)."""
    taken, out = set(taken), []
    for base in names:
        name, k = base, 1
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        taken.add(name)
        out.append(name)
    return out


def _checked(fn, input_params, return_mode, export_mode, normalization_mode, external_data,
             output_path):
    """to_onnx's arguments checked before any tracing: (external_data as the
    export mode allows it, input_params as a dict)."""
    _choice("return_mode", return_mode, _result.RETURN_MODES)
    _choice("export_mode", export_mode, EXPORT_MODES)
    _choice("normalization_mode", normalization_mode, NORMALIZATION_MODES)
    if export_mode == "web":  # onnxruntime-web loads one self-contained file
        if external_data not in (None, False):
            raise ConversionError('export_mode="web" writes one self-contained file; '
                                  "external_data cannot be used with it")
        external_data = False
    if return_mode == "file" and not output_path:
        raise ConversionError('return_mode="file" needs output_path')
    if return_mode == "ir":
        _result.onnx_ir()
    if not callable(fn):
        raise ConversionError(f"fn must be callable; got {type(fn).__name__}")
    if input_params is not None and not isinstance(input_params, dict):
        raise ConversionError(f"input_params must be a dict; got {type(input_params).__name__}")
    return external_data, dict(input_params or {})


def to_onnx(fn, inputs, input_params=None, model_name="jax_model", opset=None, *,
            enable_double_precision=False, record_primitive_calls_file=None,
            return_mode="proto", output_path=None, inputs_as_nchw=None, outputs_as_nchw=None,
            input_names=None, output_names=None, export_mode="standard",
            normalization_mode="auto", plugin_dirs=None, optimize=True, plugin_overrides=None,
            inline_functions=False, external_data=None, crisp=True, fuse=True, verify=False,
            fusion=None, target="onnxruntime", report=None,
            constraints=None):
    """Converts `fn` to an ONNX model. jax2onnx 0.17.1's signature and meanings,
    plus plugin_dirs, optimize, plugin_overrides, inline_functions,
    external_data, fusion, target, verify, report, constraints and
    return_mode="bytes".

    Args:
        fn: a callable (a function, a flax nnx module or a bound method of one)
            taking one positional argument per entry of `inputs`. An nnx module is
            traced from a private copy: Rngs counts, BatchNorm statistics and caches
            it updates while tracing stay as they were on yours. Each call traces
            afresh, so a module whose weights changed converts with the new ones.
        inputs: per positional argument, a shape tuple (ints, and strings such as "B" for
            symbolic dims; float32, or float64 with enable_double_precision), a
            jax.ShapeDtypeStruct (its shape may hold strings too: ("B", 3)), or an
            array. A typed PRNG key (jax.random.key(0), or a ShapeDtypeStruct of its
            dtype) becomes a uint32[..., 2] model input that takes its key data
            (jax.random.key_data(key)).
        input_params: {name: example value}: extra keyword arguments of fn that become
            runtime inputs of the model, named after their keys (a Python scalar
            takes JAX's default dtype). Dropout's flag works so (`deterministic` of
            flax nnx and linen Dropout, `inference` of equinox's): the model selects
            at run time between the input and its dropout. Code that needs the
            flag's Python value (`if train:`) fails with a ConversionError naming it.
        model_name: the ONNX graph's name.
        opset: the default-domain opset (default: the target's, 23 for onnxruntime
            and 17 for portable). From 13 up the model is
            lowered at this opset: an op the opset lacks (LayerNormalization below
            17, Attention below 23, ...) is decomposed, one whose form changed takes
            the older form, and what has no form there fails with a ConversionError
            naming it (docs/api.md lists what each opset gives up). Below 13 a model
            converts when every operator it uses has the same form there as at 13,
            else the ConversionError names which operators need which opset.
        enable_double_precision: trace with 64-bit types enabled.
        record_primitive_calls_file: a path; every equation of the traced program
            (primitive, params, input and output types, plugin, source line) is
            written there as JSON.
        return_mode: "proto" (an onnx.ModelProto), "ir" (an onnx_ir.Model; needs the
            onnx-ir package), "bytes" (the serialization), or "file" (writes
            output_path and returns it: a regular file is replaced atomically and
            keeps its mode, a symlink's target is written, /dev/null or a FIFO is
            written through).
        inputs_as_nchw: indices of 4-D inputs the model takes in NCHW while fn takes
            NHWC (give their NHWC shape in `inputs`); named in_<i>_nchw by default.
        outputs_as_nchw: indices of (flattened) 4-D outputs the model gives in NCHW.
            The optimizer cancels these transposes against the first and last conv.
        input_names: names of the positional inputs and of the
            outputs, in order (input_params keep their keys).
        output_names: names of the positional inputs and of the
            outputs, in order (input_params keep their keys).
        export_mode: "standard" or "web" (one self-contained file that
            onnxruntime-web loads: never external data).
        normalization_mode: "auto" or "prefer_native" (native LayerNormalization
            and the like where a plugin offers them and the opset has them), or
            "force_decomposed" (an alias of fusion="none").
        plugin_dirs: folders searched for plugins after the bundled folder, installed
            plugin packages (entry-point group "jaxonnx.plugins") and $JAXONNX_PLUGIN_PATH.
        optimize: run the structure-only IR passes (dead code, no-ops, transpose
            pairs, duplicates, shape arithmetic on constants; see docs/optimizer.md).
            False keeps the raw lowering, with only dead nodes removed.
            With $JAXONNX_DUMP_IR set to a folder, the graph is written there as
            text before and after every pass run.
        plugin_overrides: {primitive name: plugin name or file} choosing the plugin that
            lowers a primitive several plugins claim (a bundled one included); on top of
            $JAXONNX_PLUGIN_OVERRIDES ("prim=plugin,..."). Without a choice a double
            claim is an error naming both plugins.
        inline_functions: replace every @onnx_function call by its body before the
            passes (no model.functions), for whole-graph optimization.
        external_data: where large weights go (ONNX external data, needed past
            protobuf's 2 GB). None: for "file", into output_path + ".data" only when
            the model would not fit in one file, else nowhere; True: always, with the
            defaults of jaxonnx.ExternalData (one file, tensors from 1 KiB); an
            ExternalData sets threshold, layout and file name, and for "proto"/"bytes"
            the folder the data is written to (the model then references it there);
            False: never. A model over 2 GB without external data raises ConversionError.
        fusion: which fused ONNX ops the model may use, for both stages that make
            them: the binding specs while tracing (flax.nnx.LayerNorm or jax.nn.gelu
            as one op; docs/crisp_ops.md) and, with optimize, the rewrite rules
            after lowering (MatMul+Add -> Gemm, the softmax chain -> Softmax, ...;
            docs/optimizer.md). "fast" (the default): all of them, which agree with
            JAX within float rounding on finite inputs (docs/coverage.md lists where
            they differ on NaN/inf); "exact": only those that agree on NaN and
            infinity too; "none": JAX's own decompositions; "approximate" (opt-in):
            also those whose result differs from JAX's beyond float rounding by a
            documented, measured error (today: int4/int8 weight products with int8
            activations, onnxruntime's MatMulNBits accuracy_level 4, under
            target="onnxruntime-contrib": 3-4x faster decode, about 5e-3 of
            the output's scale off JAX; docs/quantization.md).
        crisp: an older switch, kept as an alias: crisp="exact" is
            fusion="exact"; crisp=False turns off the binding specs only (to tell
            which stage a difference comes from).
        fuse: an older switch, kept as an alias: fuse=False turns off the rewrite
            rules only.
        target: the runtime the model is for (docs/targets.md). "onnxruntime" (the
            default): standard ONNX, the fastest graph in onnxruntime. "portable":
            what onnxruntime, OpenVINO, tract, the ONNX reference evaluator and
            onnxruntime's symbolic shape inference all run (opset 17 unless given,
            no guard If, no op a tool misreads), at some cost in onnxruntime.
            "onnxruntime-contrib" (opt-in): the onnxruntime graph plus onnxruntime's
            com.microsoft ops where they are measurably faster (GroupQueryAttention
            for causal self-attention and for attention over a KV cache, MatMulNBits
            for int4 weights); it runs on onnxruntime only.
        verify: after converting, run the model in onnxruntime on random inputs,
            with every symbolic dim at 1 and at two larger sizes (moved up to
            sizes the constraints allow), and compare each
            output with fn's (float rounding: rtol 1e-4 for float32, 1e-9 for
            float64, atol scaled by the output's magnitude; integers exact). A
            mismatch raises ConversionError naming the output, the error and,
            through first_divergence, the first equation that diverges; nothing
            is written. Off by default (it runs fn three times).
        report: a path (str or os.PathLike): writes there a markdown conversion
            report (docs/report.md): the primitives and the plugin (name, version,
            file) that lowered each, the binding specs and rewrite rules that
            fired with their declared numerics, what the target profile changed
            or refused, nodes per op type before and after the optimizer (and per
            pass), verify's results when asked, and onnxruntime's time per op
            type (its profiler, on random inputs made from `inputs`), charted in
            a PNG beside it (the path without its extension + "_profile.png";
            needs matplotlib). The model is the same with or without a report. A
            path that cannot be written raises ConversionError before converting;
            the files are written whole after converting, or not at all.
        constraints: what the symbolic dims of `inputs` are known to satisfy, as
            jax.export.symbolic_shape reads them: a list of strings such as
            ["T <= 512"] or ["T >= 1", "B <= 64"] (">=", "<=", and "==" rewriting
            the left side). JAX's shape polymorphism stops on a comparison it
            cannot decide for every size (slicing a 512-long position table to the
            input's length T); a constraint decides it, and the model is then
            valid for the sizes the constraints allow. All inputs share one
            symbolic scope, which the constraints belong to.

    With $JAXONNX_ENABLE_STACKTRACE_METADATA=1 (or jax2onnx's variable) every
    node carries its provenance as metadata_props: pkg.jaxonnx.primitive,
    pkg.jaxonnx.plugin, pkg.jaxonnx.callsite (the user's file:line), and with
    $JAXONNX_STACKTRACE_DETAIL=full also pkg.jaxonnx.stacktrace (docs/api.md).

    Returns:
        The model, as return_mode asks: an onnx.ModelProto, an onnx_ir.Model,
        its bytes, or output_path.

    Raises:
        ConversionError: (a ValueError) with a message naming what went wrong.
    """
    external_data, params = _checked(fn, input_params, return_mode, export_mode, normalization_mode,
                                     external_data, output_path)
    report_to = _report.check(report)
    # jax2onnx's switch for native normalization ops maps onto the binding-spec
    # window: "force_decomposed" traces through every high-level call.
    binding_level, rule_level = _fusion.levels(fusion, crisp, fuse, normalization_mode)
    target, opset = _targets.resolve(target, opset)
    _check_opset(opset)
    external, data_folder = _output.external_plan(external_data, return_mode, output_path,
                                                  model_name)
    if external is None and return_mode in ("proto", "ir"):
        external = _output.INLINE
    progress = _progress.Progress()

    with jax.enable_x64(bool(enable_double_precision)):
        specs = _input_specs.normalize_inputs(inputs, enable_double_precision, constraints)
        param_specs = _input_specs.normalize_params(params, enable_double_precision)
        nchw_in = _layout.indices(inputs_as_nchw, "inputs_as_nchw", len(specs))
        nchw_out = _layout.indices(outputs_as_nchw, "outputs_as_nchw")
        names_in = _names("input_names", input_names, len(specs)) or _default_names(
            [f"in_{i}_nchw" if i in nchw_in else f"in_{i}" for i in range(len(specs))], params)
        if set(names_in) & set(params):
            raise ConversionError(f"input_names {sorted(set(names_in) & set(params))} are "
                                  f"input_params keys too")
        registry = _plugins.registry(plugin_dirs, plugin_overrides)
        with _bindings.recording() if report_to else contextlib.nullcontext() as fired:
            program = _pipeline.trace(fn, _layout.input_specs(specs, nchw_in), param_specs, params,
                                      registry, binding_level,
                                      wrap=_layout.bridge(nchw_in, nchw_out))
        names_out = _names("output_names", output_names, len(program.closed.jaxpr.outvars)) or []
        if clash := sorted(set(names_out) & (set(names_in) | set(params))):
            raise ConversionError(f"output_names {clash} are input names too")
        _callbacks.warn_dropped(program)
        options = _core.ConvertOptions(
            opset=int(opset), model_name=model_name, input_names=names_in + list(params),
            output_names=names_out, describe_source=_source.describe, producer_version=__version__,
            optimize=bool(optimize), dump_ir_dir=os.environ.get("JAXONNX_DUMP_IR", ""),
            inline_functions=bool(inline_functions), provenance=_source.provenance_from_env(),
            external_data=external, fusion=rule_level, target=target, facts=bool(report_to))
        converted = _pipeline.lower(program, registry, options,
                                    record_file=record_primitive_calls_file, progress=progress)
        data, data_files = converted.model, converted.data_files
    progress.converted(data, data_files, inline=external is _output.INLINE)
    verified = None
    if verify:
        plan = _verify.VerifyPlan(fn, specs, params, tuple(nchw_in), tuple(nchw_out),
                                  bool(enable_double_precision), int(opset), plugin_dirs,
                                  plugin_overrides, binding_level, target,
                                  _input_specs.constraints_of(constraints))
        with _runnable(data, data_files, external) as model:
            verified = _verify.verify_conversion(plan, model)
    if report_to:
        facts = _report.Facts(
            model_name=model_name, target=target, opset=int(opset), binding_level=binding_level,
            rule_level=rule_level, optimize=bool(optimize),
            inputs=[(n, _report_input(s)) for n, s in zip(names_in, specs)]
            + [(n, _report_input(s)) for n, s in zip(params, param_specs)],
            program=program, registry=registry, fired=fired, core=converted.facts,
            times=converted.times, model_bytes=len(data), verify=verified)
        _profiled(facts, data, data_files, external, specs, params, nchw_in,
                  bool(enable_double_precision))

    result = _result.deliver(return_mode, data, data_files, external, data_folder, output_path,
                             progress)
    if report_to:
        _report.write(report_to, facts)
    return result


@contextlib.contextmanager
def _runnable(data, data_files, external):
    """The model as converted, its external data included, as onnxruntime
    loads it: the bytes, or a path in a temporary folder."""
    if not data_files:
        yield data
    elif external is _output.INLINE:
        yield _output.model_proto(data, data_files).SerializeToString()
    else:
        with tempfile.TemporaryDirectory() as folder:  # onnxruntime reads external data from files
            path = os.path.join(folder, "model.onnx")
            _output.write_model(path, data, data_files, folder)
            yield path


_verify.converter = to_onnx  # first_divergence's whole-model check (_verify.converter)


def _report_input(spec):
    return f"{spec.dtype}[{', '.join(str(d) for d in spec.shape)}]"


def _profiled(facts, data, data_files, external, specs, params, nchw_in, x64):
    """onnxruntime's per-op-type profile into `facts`, or why there is none
    (the report says so; the conversion stands)."""
    from jaxonnx import _ort_profile
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        facts.profile_error = "onnxruntime is not installed (pip install onnxruntime)."
        return
    try:
        with _runnable(data, data_files, external) as model:
            facts.profile = _ort_profile.profile(model, specs, params, nchw_in, x64)
    except Exception as e:  # onnxruntime's own error types: the report carries them
        facts.profile_error = f"onnxruntime could not run the model: {type(e).__name__}: {e}"

