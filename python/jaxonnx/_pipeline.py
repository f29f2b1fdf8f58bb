"""The two stages every conversion goes through, for to_onnx and
first_divergence (hence verify) alike: trace (the user's callable to a
_trace.TracedProgram, with the binding specs of the fusion level applied and
PRNG keys as key data) and lower (the refusals before lowering, then the
core's pipeline to ONNX bytes)."""

from __future__ import annotations

from jaxonnx import _bindings, _core, _functions, _keys, _opset, _record, _supported, _trace


def trace(fn, specs, param_specs, param_names, registry, binding_level,
          wrap=lambda target: target):
    """fn traced over specs + param_specs (input_params named param_names) as a
    TracedProgram, inside the activation window of `registry`'s binding specs
    that binding_level (_fusion.levels) allows; typed PRNG keys become key data."""
    with _functions.tracing(), _bindings.window(registry, binding_level):
        program = _trace.trace(fn, specs, param_specs, list(param_names), wrap=wrap)
    return program.with_key_data()


def lower(program, registry, options, record_file=None, progress=None):
    """`program` through the core as `options` (a _core.ConvertOptions) says:
    a _core.Converted. Programs no model can carry are refused first
    (ConversionError); record_file receives every equation as JSON
    (record_primitive_calls_file); progress (a _progress.Progress) hears of
    the start."""
    _keys.check_threefry_partitionable(program)
    _supported.check_program(program, options.input_names)
    if record_file:
        _record.write(record_file, program, registry)
    if progress is not None:
        progress.traced(program.closed)
    converted = _core.convert(registry, program.closed, options)
    if _core.MIN_OPSET <= options.opset < _opset.CHECKED_BELOW:
        _opset.check_lowered(converted.model, options.opset)
    return converted
