"""jaxonnx.to_onnx: trace with JAX, lower through the plugin host, return ONNX."""

from __future__ import annotations

import os
import tempfile

import jax
import numpy as np
import onnx

from jaxonnx import _core, _keys, _plugins, _source, _specs
from jaxonnx._core import ConversionError

RETURN_MODES = ("proto", "bytes", "file")


def _check_opset(opset):
    newest = onnx.defs.onnx_opset_version()
    if isinstance(opset, bool) or not isinstance(opset, (int, np.integer)) \
            or not _core.MIN_OPSET <= opset <= newest:
        raise ConversionError(
            f"opset must be an int from {_core.MIN_OPSET} to {newest} (the newest the installed "
            f"onnx knows); got {opset!r}")


def _with_params(fn, n_args, names):
    """fn taking `names` as keyword arguments, traced as trailing positional inputs."""
    def call(*args):
        return fn(*args[:n_args], **dict(zip(names, args[n_args:])))
    return call


def _write_atomically(path, data: bytes):
    """Writes via a temporary file in the same folder, so a failure leaves no partial file."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".jaxonnx-", suffix=".onnx.tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def to_onnx(fn, inputs, input_params=None, model_name="jax_model", opset=23, *,
            enable_double_precision=False, return_mode="proto", output_path=None,
            plugin_dirs=None, optimize=True, fuse=True):
    """Converts `fn` to an ONNX model.

    fn: a callable (a function, or a flax nnx module) taking one positional argument per
        entry of `inputs`.
    inputs: per positional argument, a shape tuple (ints, and strings such as "B" for
        symbolic dims; float32, or float64 with enable_double_precision), a
        jax.ShapeDtypeStruct, or an array. A typed PRNG key (jax.random.key(0), or a
        ShapeDtypeStruct of its dtype) becomes a uint32[..., 2] model input that takes
        its key data (jax.random.key_data(key)).
    input_params: {name: example value}: extra keyword arguments of fn that become
        runtime inputs of the model, named after their keys.
    model_name: the ONNX graph's name.
    opset: the default-domain opset, 18 or newer (default 23).
    enable_double_precision: trace with 64-bit types enabled.
    return_mode: "proto" (an onnx.ModelProto), "bytes" (its serialization), or "file"
        (writes output_path and returns it).
    plugin_dirs: folders searched for plugins after the bundled folder and
        $JAXONNX_PLUGIN_PATH.
    optimize: run the structure-only IR passes (dead code, no-ops, transpose
        pairs, duplicates, shape arithmetic on constants; see docs/optimizer.md).
        False keeps the raw lowering, with only dead nodes removed.
        With $JAXONNX_DUMP_IR set to a folder, the graph is written there as
        text before and after every pass run.
    fuse: with optimize, apply the plugins' rewrite rules, which turn JAX's
        decompositions into fused ONNX ops (MatMul+Add -> Gemm, the softmax
        chain -> Softmax, layer norm -> LayerNormalization, ...). They agree
        with JAX within float rounding on finite inputs; docs/coverage.md lists
        where they differ on NaN/inf. False keeps the exact decompositions.

    Raises ConversionError (a ValueError) with a message naming what went wrong.
    """
    if return_mode not in RETURN_MODES:
        raise ConversionError(f"return_mode must be one of {RETURN_MODES}; got {return_mode!r}")
    if return_mode == "file" and not output_path:
        raise ConversionError('return_mode="file" needs output_path')
    if not callable(fn):
        raise ConversionError(f"fn must be callable; got {type(fn).__name__}")
    _check_opset(opset)
    if input_params is not None and not isinstance(input_params, dict):
        raise ConversionError(f"input_params must be a dict; got {type(input_params).__name__}")
    params = dict(input_params or {})

    with jax.enable_x64(bool(enable_double_precision)):
        specs = _specs.normalize_inputs(inputs, enable_double_precision)
        param_specs = _specs.normalize_inputs(
            [np.asarray(v) for v in params.values()], enable_double_precision)
        traced = _with_params(fn, len(specs), list(params)) if params else fn
        closed = jax.make_jaxpr(traced)(*specs, *param_specs)
        closed = _keys.physical_keys(closed)
        _keys.check_threefry_partitionable(closed)
        input_names = [f"in_{i}" for i in range(len(specs))] + list(params)
        data = _core.convert(_plugins.registry(plugin_dirs), closed, int(opset), model_name,
                             input_names, [], _source.describe, _version(),
                             bool(optimize), os.environ.get("JAXONNX_DUMP_IR", ""),
                             fuse=bool(fuse))

    if return_mode == "bytes":
        return data
    if return_mode == "file":
        _write_atomically(output_path, data)
        return output_path
    return onnx.load_from_string(data)


def _version():
    from jaxonnx import __version__
    return __version__
