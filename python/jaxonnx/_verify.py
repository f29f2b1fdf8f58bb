"""Checking a model against JAX: allclose (jax2onnx's, same signature and
answers) and first_divergence (which equation's lowering went wrong)."""

from __future__ import annotations

import os
from typing import NamedTuple

import jax
import numpy as np

from jaxonnx import _core, _keys, _plugins, _source, _specs, _trace
from jaxonnx._core import ConversionError
from jaxonnx._layout import TO_NCHW, TO_NHWC


def _arrays(inputs):
    """Concrete inputs; shape tuples are sampled (a symbolic dim takes 2), as jax2onnx does."""
    def is_shape(x):
        return isinstance(x, (tuple, list)) and all(isinstance(d, (int, str)) for d in x)

    if inputs and all(is_shape(x) for x in inputs):
        rng = np.random.default_rng(0)
        return [rng.random(tuple(d if isinstance(d, int) else 2 for d in s)).astype(np.float32)
                for s in inputs]
    return [np.asarray(x) for x in inputs]


def _session(model):
    import onnxruntime as ort
    options = ort.SessionOptions()
    # ORT's fusions do not all take float64; the check is of the model as written.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    if not isinstance(model, (str, bytes, os.PathLike)):
        model = model.SerializeToString()
    return ort.InferenceSession(os.fspath(model) if isinstance(model, os.PathLike) else model,
                                options, providers=["CPUExecutionProvider"])


def _feeds(session, xs, params):
    """Positional arrays to the inputs in order, input_params by name; each cast
    to the dtype the model declares."""
    positional = iter(xs)
    feeds = {}
    for meta in session.get_inputs():
        value = params[meta.name] if meta.name in params else next(positional, None)
        if value is None:
            raise ConversionError(f"no value for the model input {meta.name!r}")
        dtype = _ORT_TYPES.get(meta.type)
        value = _packed(np.asarray(value))
        feeds[meta.name] = value.astype(dtype) if dtype is not None else value
    return feeds


_ORT_TYPES = {f"tensor({k})": np.dtype(v) for k, v in {
    "float": "float32", "double": "float64", "float16": "float16", "int64": "int64",
    "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "uint32": "uint32",
    "uint64": "uint64", "bool": "bool"}.items()}


def _packed(x):
    """A complex array as the model carries it: float[..., 2] (real, imaginary)."""
    return np.stack([x.real, x.imag], axis=-1) if np.iscomplexobj(x) else x


def _compare(expected, got, rtol, atol):
    """None when close (floats within rtol/atol, NaN equal; others exact), else why not."""
    expected, got = _packed(np.asarray(expected)), np.asarray(got)
    if expected.shape != got.shape:
        return f"shape mismatch (JAX {expected.shape} vs ONNX {got.shape})"
    if np.issubdtype(expected.dtype, np.inexact) or np.issubdtype(got.dtype, np.inexact):
        if not np.allclose(expected, got.astype(expected.dtype, copy=False), rtol=rtol, atol=atol,
                           equal_nan=True):
            diff = np.abs(expected.astype(np.float64) - got.astype(np.float64))
            return f"max abs diff {float(np.nanmax(diff)) if diff.size else 0.0} (rtol={rtol}, atol={atol})"
        return None
    if not np.array_equal(expected, got.astype(expected.dtype, copy=False)):
        return "values differ (exact comparison for non-float types)"
    return None


def allclose(fn, onnx_model_path, inputs, input_params=None, rtol=1e-3, atol=1e-5, *,
             enable_double_precision=False, inputs_as_nchw=None, outputs_as_nchw=None):
    """Runs fn in JAX and the model in onnxruntime on the same inputs and
    compares every output: (True, message) when all are close, else (False,
    what differs). jax2onnx's allclose, same arguments and answers.

    onnx_model_path: a file (or an onnx.ModelProto, or its bytes).
    inputs: concrete arrays, or shape tuples that are sampled (symbols take 2).
    input_params: keyword arguments of fn, fed to the model's inputs of those names.
    inputs_as_nchw / outputs_as_nchw: as given to to_onnx; inputs are given in
        NHWC (as fn takes them) and transposed for the model.
    """
    xs = _arrays(inputs)
    params = dict(input_params or {})
    with jax.enable_x64(bool(enable_double_precision)), jax.default_matmul_precision("float32"):
        try:
            session = _session(onnx_model_path)
        except Exception as e:  # onnxruntime's own error types
            return False, f"onnxruntime cannot load the model: {e}"
        ort_xs = [np.transpose(x, TO_NCHW) if i in (inputs_as_nchw or ()) and x.ndim == 4 else x
                  for i, x in enumerate(xs)]
        try:
            got = session.run(None, _feeds(session, ort_xs, params))
        except Exception as e:
            return False, f"onnxruntime failed to run the model: {e}"
        try:
            expected = jax.tree.leaves(fn(*[jax.numpy.asarray(x) for x in xs], **params))
        except Exception as e:
            return False, f"JAX failed to evaluate the function: {type(e).__name__}: {e}"
    if len(expected) != len(got):
        return False, f"output count mismatch (JAX {len(expected)} vs ONNX {len(got)})"
    for i, (e, g) in enumerate(zip(expected, got)):
        if i in (outputs_as_nchw or ()) and g.ndim == 4:
            g = np.transpose(g, TO_NHWC)
        why = _compare(np.asarray(e), g, rtol, atol)
        if why:
            return False, f"Output {i} mismatch: {why}"
    return True, "Outputs match within tolerance."


class Divergence(NamedTuple):
    """The first equation whose ONNX value differs from JAX's."""
    index: int            # position among the program's top-level equations
    primitive: str
    plugin: str           # the plugin that lowered it ("" if none claims it)
    source: str           # the user's file:line
    output: int           # which output of the equation
    detail: str           # shape mismatch, or the largest difference
    expected: np.ndarray  # JAX's value
    got: np.ndarray       # the model's value

    def __str__(self):
        return (f"equation {self.index} ({self.primitive}, lowered by plugin {self.plugin!r}) at "
                f"{self.source}: output {self.output}: {self.detail}")


def _probe(closed):
    """closed with every value a top-level equation makes as an output, in
    equation order: [(equation index, output index)] and the probe."""
    where, outvars, seen = [], [], set()
    for k, eqn in enumerate(closed.jaxpr.eqns):
        for j, v in enumerate(eqn.outvars):
            aval = v.aval
            if type(v).__name__ == "DropVar" or id(v) in seen or not hasattr(aval, "dtype") \
                    or _keys.is_key(aval.dtype) \
                    or aval.dtype == jax.dtypes.float0:
                continue
            seen.add(id(v))
            where.append((k, j))
            outvars.append(v)
    jaxpr = closed.jaxpr
    probe = jaxpr.replace(outvars=outvars,
                          debug_info=jaxpr.debug_info._replace(result_paths=None))
    return where, jax.extend.core.ClosedJaxpr(probe, closed.consts)


def first_divergence(fn, inputs, input_params=None, rtol=1e-3, atol=1e-5, *,
                     enable_double_precision=False, opset=23, plugin_dirs=None):
    """Converts fn with every value of its top-level equations as a model
    output (unoptimized, so each is its equation's own lowering), runs that in
    onnxruntime and the same equations in JAX, and returns the first equation
    whose value differs as a Divergence (its index, primitive, plugin, source
    line, the difference), or None when all agree. An equation holding a
    sub-program (jit, scan, cond) counts as one.

    inputs: concrete arrays, or shape tuples that are sampled (symbols take 2).
    """
    xs = _arrays(inputs)
    params = dict(input_params or {})
    with jax.enable_x64(bool(enable_double_precision)), jax.default_matmul_precision("float32"):
        specs = _specs.normalize_inputs(xs, enable_double_precision)
        param_specs = _specs.normalize_params(params, enable_double_precision)
        closed = _keys.physical_keys(_trace.trace(fn, specs, param_specs, list(params)))
        where, probe = _probe(closed)
        registry = _plugins.registry(plugin_dirs)
        data = _core.convert(registry, probe, max(int(opset), _core.MIN_OPSET), "first_divergence",
                             [f"in_{i}" for i in range(len(xs))] + list(params),
                             [f"eqn{k}_out{j}" for k, j in where], _source.describe, "", False, "")
        args = [*xs, *(np.asarray(v) for v in params.values())]
        expected = jax.extend.core.jaxpr_as_fun(probe)(*args)
        session = _session(data)
        got = session.run(None, _feeds(session, xs, params))
    owners = {p["name"]: plugin["name"] for plugin in registry.plugins for p in plugin["primitives"]}
    for (k, j), e, g in zip(where, expected, got):
        why = _compare(np.asarray(e), g, rtol, atol)
        if why:
            eqn = closed.jaxpr.eqns[k]
            name = eqn.primitive.name
            return Divergence(k, name, owners.get(name, ""), _source.describe(eqn.source_info), j,
                              why, np.asarray(e), np.asarray(g))
    return None
