"""Checking a model against JAX: allclose (jax2onnx's, same signature and
answers), first_divergence (which equation's lowering went wrong) and
to_onnx(verify=True) (verify_conversion)."""

from __future__ import annotations

import dataclasses
import os
import re
from typing import NamedTuple

import jax
import numpy as np

from jaxonnx import _core, _fusion, _input_specs, _keys, _pipeline, _plugins, _source, _targets
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


def _session(model, optimized=False):
    """A one-thread CPU session: graph optimizations off (allclose checks the
    model as written, as jax2onnx's does), or at onnxruntime's default level
    (verify checks the model as a user runs it)."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    if not optimized:
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

    Args:
        onnx_model_path: a file (or an onnx.ModelProto, or its bytes).
        inputs: concrete arrays, or shape tuples that are sampled (symbols take 2).
        input_params: keyword arguments of fn, fed to the model's inputs of those names.
        inputs_as_nchw: as given to to_onnx; inputs are given in
            NHWC (as fn takes them) and transposed for the model.
        outputs_as_nchw: as given to to_onnx.

    Returns:
        (True, message) when every output is close, else (False, what differs).
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
    index: int            # position among its program's equations (the innermost one: see path)
    primitive: str
    plugin: str           # the plugin that lowered it ("" if none claims it)
    source: str           # the user's file:line
    output: int           # which output of the equation
    detail: str           # shape mismatch, or the largest difference
    expected: np.ndarray  # JAX's value
    got: np.ndarray       # the model's value
    path: tuple = ()      # the enclosing equations, outermost first: ((index, primitive), ...)

    def __str__(self):
        inside = "".join(f" inside equation {k} ({p})" for k, p in reversed(self.path))
        return (f"equation {self.index} ({self.primitive}, lowered by plugin {self.plugin!r}) at "
                f"{self.source}{inside}: output {self.output}: {self.detail}")


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


def _sub_program(eqn, values):
    """(closed jaxpr, its input values) of the program an equation runs: a
    call's (jit, closed_call, custom_jvp/vjp, remat), a scan's or while's body
    at its first iteration, the cond branch taken; None when it has none."""
    from jax.extend.core import ClosedJaxpr
    p, name = eqn.params, eqn.primitive.name
    if name == "scan":
        nc, ncarry = p["num_consts"], p["num_carry"]
        xs = values[nc + ncarry:]
        if not p["length"]:
            return None
        step = -1 if p["reverse"] else 0
        return p["jaxpr"], values[:nc + ncarry] + [x[step] for x in xs]
    if name == "while":
        cn, bn = p["cond_nconsts"], p["body_nconsts"]
        return p["body_jaxpr"], values[cn:cn + bn] + values[cn + bn:]
    if name == "cond":
        branches = p["branches"]
        return branches[int(np.clip(int(values[0]), 0, len(branches) - 1))], values[1:]
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        sub = p.get(key)
        if sub is None or not hasattr(sub, "invars" if not hasattr(sub, "consts") else "consts"):
            continue
        closed = sub if hasattr(sub, "consts") else ClosedJaxpr(sub, ())
        if len(closed.jaxpr.invars) == len(values):
            return closed, values
    return None


class _Search:
    """first_divergence's settings, and the search over one program and its sub-programs."""

    def __init__(self, registry, binding_level, options, rtol, atol, x64):
        self.registry, self.binding_level, self.options = registry, binding_level, options
        self.rtol, self.atol, self.x64 = rtol, atol, x64
        self.owners = {p["name"]: plugin["name"] for plugin in registry.plugins for p in plugin["primitives"]}

    def run(self, program, xs, params, path=()):
        """The first equation of `program` (traced over xs + params) whose value
        differs, looking inside the sub-program of the first one that does."""
        closed = program.closed
        where, probe = _probe(closed)
        if not where:  # no equation makes a value the model could compare
            return None
        options = _core.ConvertOptions(
            **self.options, input_names=[f"in_{i}" for i in range(len(xs))] + list(params),
            output_names=[f"eqn{k}_out{j}" for k, j in where])
        data = _pipeline.lower(dataclasses.replace(program, closed=probe), self.registry, options).model
        args = [*xs, *(np.asarray(v) for v in params.values())]
        # JAX's values as jax.jit computes them, as a user compares a model with: XLA
        # compiling the program may round differently from running it equation by
        # equation (a constant it folds, an approximation it picks).
        evaluate = jax.extend.core.jaxpr_as_fun(probe)
        try:
            expected = jax.jit(evaluate)(*args)
        except NotImplementedError:  # a primitive XLA cannot compile (an impl only): eagerly
            expected = evaluate(*args)
        session = _session(data)
        got = session.run(None, _feeds(session, xs, params))
        for (k, j), e, g in zip(where, expected, got):
            why = _compare(np.asarray(e), g, self.rtol, self.atol)
            if not why:
                continue
            eqn = closed.jaxpr.eqns[k]
            name = eqn.primitive.name
            here = Divergence(k, name, self.owners.get(name, ""), _source.describe(eqn.source_info), j,
                              why, np.asarray(e), np.asarray(g), path)
            return self._inside(closed, probe, args, expected, where, eqn, k, path) or here
        return None

    def _inside(self, closed, probe, args, expected, where, eqn, k, path):
        """The divergence inside equation k's sub-program, given the values JAX
        computed for its inputs; None when it has none or all of it agrees."""
        env = {id(v): a for v, a in zip(closed.jaxpr.invars, args)}
        env.update({id(v): c for v, c in zip(closed.jaxpr.constvars, closed.consts)})
        env.update({id(probe.jaxpr.outvars[i]): e for i, e in enumerate(expected)})
        values = []
        for v in eqn.invars:
            if hasattr(v, "val"):  # a literal
                values.append(np.asarray(v.val))
            elif id(v) in env:
                values.append(np.asarray(env[id(v)]))
            else:
                return None  # a value the probe does not carry (a key): stay at this level
        sub = _sub_program(eqn, values)
        if sub is None:
            return None
        inner, inner_values = sub
        if any(_keys.is_key(getattr(v, "dtype", None)) or np.asarray(v).dtype == jax.dtypes.float0
               for v in inner_values):
            return None
        try:  # a body this cannot run on its own (shard_map's per-shard shapes): stay at this level
            specs = _input_specs.normalize_inputs(inner_values, self.x64)
            program = _pipeline.trace(jax.extend.core.jaxpr_as_fun(inner), specs, [], {}, self.registry,
                                      self.binding_level)
            return self.run(program, inner_values, {}, path + ((k, eqn.primitive.name),))
        except Exception:  # noqa: BLE001
            return None


def first_divergence(fn, inputs, input_params=None, rtol=1e-3, atol=1e-5, *,
                     enable_double_precision=False, opset=None, plugin_dirs=None,
                     plugin_overrides=None, crisp=True, fusion=None, target="onnxruntime"):
    """Converts fn with every value of its top-level equations as a model
    output (unoptimized, so each is its equation's own lowering), runs that in
    onnxruntime and the same equations under jax.jit, and returns the first
    equation whose value differs as a Divergence (its index, primitive, plugin,
    source line, the difference). When that equation holds a sub-program (jit,
    closed_call, custom_jvp/vjp, remat, a scan's or while's body, the cond
    branch taken), the search goes on inside it, on the values JAX computed for
    its inputs (a loop body at its first iteration), and names the innermost
    equation that differs (Divergence.path: the enclosing ones).

    Returns None when every equation agrees and so does the whole model (fn
    converted as to_onnx does with these settings, run at onnxruntime's default
    optimization level). When every equation agrees but the whole model does
    not (an optimization or fusion across equations changed the result),
    raises ConversionError saying so: never None while the outputs differ.

    Args:
        inputs: concrete arrays, or shape tuples that are sampled (symbols take 2).
        crisp: as in to_onnx, so the equations are the ones
            to_onnx lowers (a crisp op such as jaxonnx.nn.layer_norm is one
            equation) with the lowerings it picks for the target.
        fusion: as in to_onnx (see crisp).
        target: as in to_onnx (see crisp).

    Returns:
        The first Divergence, or None when every equation agrees.
    """
    binding_level, _ = _fusion.levels(fusion, crisp)
    target, opset = _targets.resolve(target, opset)
    xs = _arrays(inputs)
    params = dict(input_params or {})
    with jax.enable_x64(bool(enable_double_precision)), jax.default_matmul_precision("float32"):
        specs = _input_specs.normalize_inputs(xs, enable_double_precision)
        param_specs = _input_specs.normalize_params(params, enable_double_precision)
        registry = _plugins.registry(plugin_dirs, plugin_overrides)
        program = _pipeline.trace(fn, specs, param_specs, params, registry, binding_level)
        options = dict(  # for _core.ConvertOptions
            # At MIN_OPSET or newer: an unoptimized model may hold ops an older opset lacks.
            opset=max(int(opset), _core.MIN_OPSET), model_name="first_divergence",
            describe_source=_source.describe, optimize=False, target=target)
        search = _Search(registry, binding_level, options, rtol, atol, bool(enable_double_precision))
        found = search.run(program, xs, params)
        if found is not None:
            return found
        why = _whole_model_differs(fn, xs, params, rtol, atol, enable_double_precision=enable_double_precision,
                                   opset=opset, plugin_dirs=plugin_dirs, plugin_overrides=plugin_overrides,
                                   crisp=crisp, fusion=fusion, target=target)
    if why:
        raise ConversionError(
            f"first_divergence: every equation agrees with JAX when lowered on its own, but {why}: "
            "a rewrite across equations (fusion, the optimizer) changes the result; convert with "
            "fuse=False, then optimize=False, to narrow it down, and please report it")
    return None


# to_onnx, which _convert sets when it loads: it imports this module (verify=), so
# importing it from here would be a cycle.
converter = None


def _whole_model_differs(fn, xs, params, rtol, atol, **convert):
    """What differs between fn under jax.jit and the model to_onnx makes of it
    (run at onnxruntime's default level), or None."""
    from jaxonnx import _nnx

    data = converter(fn, xs, input_params=params or None, return_mode="bytes", **convert)
    session = _session(data, optimized=True)
    got = session.run(None, _feeds(session, xs, params))
    target = _nnx.private_copy(fn) or fn
    try:
        expected = jax.tree.leaves(jax.jit(lambda *a: target(*a, **params))(*xs))
    except NotImplementedError:  # a primitive XLA cannot compile (an impl only): eagerly
        expected = jax.tree.leaves(target(*xs, **params))
    if len(expected) != len(got):
        return f"the model has {len(got)} outputs, fn {len(expected)}"
    for i, (e, g) in enumerate(zip(expected, got)):
        why = _compare(np.asarray(_model_value(e)), g, rtol, atol)
        if why:
            return f"the whole model's output {i} differs: {why}"
    return None


# ------------------------------------------------------------ to_onnx(verify=True)

def _symbols(specs):
    """The symbolic dims' names over every spec, in order of appearance."""
    out = []
    for spec in specs:
        for d in spec.shape:
            if not isinstance(d, (int, np.integer)):
                out += [v for v in sorted(d.get_vars()) if v not in out]
    return out


def _assignments(symbols):
    """Sizes the symbols take in turn: every one 1, then two distinct sets
    (2, 3, 4, ... and 5, 6, 7, ...), so a mixed-up symbol shows."""
    if not symbols:
        return [{}]
    return [{s: 1 for s in symbols}, {s: 2 + i for i, s in enumerate(symbols)},
            {s: 5 + i for i, s in enumerate(symbols)}]


def _allowed(env, constraints):
    """Whether the sizes `env` satisfy every constraint ("T <= 512", "T >= 4", "A == 2*B")."""
    from jax import export
    for text in constraints:
        m = re.fullmatch(r"(.+?)\s*(<=|>=|==)\s*(.+)", text)
        if not m:
            continue
        try:
            left, right = export.symbolic_shape(f"{m.group(1)}, {m.group(3)}")
            left, right = (int(d) if isinstance(d, (int, np.integer)) else int(d._evaluate(env))
                           for d in (left, right))
        except Exception:  # a symbol no input has: nothing to check
            continue
        if not {"<=": left <= right, ">=": left >= right, "==": left == right}[m.group(2)]:
            return False
    return True


def _within(assignments, constraints):
    """The assignments, each moved up (one size, then every size, plus 8, 16, ...
    512) until the constraints allow it; one no move makes allowed is left out."""
    out = []
    for env in assignments:
        moves = [env]
        for shift in (8, 16, 32, 64, 128, 256, 512):
            moves += [{**env, s: env[s] + shift} for s in env]
            moves.append({s: v + shift for s, v in env.items()})
        moved = next((m for m in moves if _allowed(m, constraints)), None)
        if moved is not None and moved not in out:
            out.append(moved)
    return out


def _concrete_shape(shape, env):
    dims = tuple(int(d) if isinstance(d, (int, np.integer)) else int(d._evaluate(env)) for d in shape)
    return dims if all(d >= 0 for d in dims) else None


def _sample(spec, shape, rng):
    """A random value of `spec`'s dtype with `shape`, as the function takes it:
    floats standard normal, integers small, booleans random, keys from random
    key data."""
    layout = _keys.key_data_layout(spec.dtype)
    if layout is not None:
        data = rng.integers(0, 2**32, size=shape + layout[1], dtype=np.uint64).astype(np.uint32)
        return jax.random.wrap_key_data(data, impl=spec.dtype._impl)
    dtype = np.dtype(spec.dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -20), min(info.max, 20) + 1, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _model_value(x):
    """What the model takes for a value the function takes (key data for keys)."""
    return np.asarray(jax.random.key_data(x)) if _keys.is_key(getattr(x, "dtype", None)) else x


def _tolerances(expected):
    """(rtol, atol) of verify for a float output: rounding, atol scaled by the
    output's largest finite magnitude."""
    dtype = expected.dtype
    finite = np.abs(expected[np.isfinite(expected)]) if expected.size else expected
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    if dtype in (np.float64, np.complex128):
        return 1e-9, 1e-9 * scale
    if dtype.itemsize <= 2:  # float16, bfloat16
        return 1e-2, 1e-2 * scale
    return 1e-4, 1e-4 * scale


class VerifyPlan(NamedTuple):
    """What to_onnx knows of a conversion that verify needs."""
    fn: object
    specs: list            # the positional inputs as fn takes them (NHWC)
    params: dict           # input_params: name -> the user's example value
    nchw_in: tuple
    nchw_out: tuple
    x64: bool
    opset: int
    plugin_dirs: object
    plugin_overrides: object
    binding_level: str = "fast"  # _fusion.levels' first: which binding specs applied
    target: str = "onnxruntime"
    constraints: tuple = ()      # to_onnx's constraints on the symbolic dims


def verify_conversion(plan: VerifyPlan, model) -> list:
    """Runs `model` (bytes or a path) in onnxruntime on random inputs at each
    assignment of the symbolic dims (all 1, then two more) and compares every
    output with fn's; a mismatch raises ConversionError naming the output, the
    error and the first equation that diverges (first_divergence). Returns what
    was checked, for the conversion report: [{at, output, max_abs_diff,
    tolerance}] per size tried and output."""
    from jaxonnx import _nnx

    try:
        session = _session(model, optimized=True)
    except Exception as e:  # onnxruntime's own error types
        raise ConversionError(f"verify: onnxruntime cannot load the model: {e}") from None
    symbols = _symbols(plan.specs)
    out_names = [o.name for o in session.get_outputs()]
    checked, results = 0, []
    for k, env in enumerate(_within(_assignments(symbols), plan.constraints)):
        shapes = [_concrete_shape(s.shape, env) for s in plan.specs]
        if any(s is None for s in shapes):
            continue
        rng = np.random.default_rng(k)
        xs = [_sample(spec, shape, rng) for spec, shape in zip(plan.specs, shapes)]
        where = ", ".join(f"{s}={v}" for s, v in env.items()) or "the static shapes"
        with jax.enable_x64(plan.x64), jax.default_matmul_precision("float32"):
            try:  # a private copy: calling it must not advance the user's Rngs or statistics
                expected = jax.tree.leaves((_nnx.private_copy(plan.fn) or plan.fn)(*xs, **plan.params))
            except Exception:  # fn is not defined at these sizes (JAX says so): not a model error
                continue
            model_xs = [np.transpose(_model_value(x), TO_NCHW) if i in plan.nchw_in
                        else _model_value(x) for i, x in enumerate(xs)]
            try:
                got = session.run(None, _feeds(session, model_xs, plan.params))
            except Exception as e:
                raise ConversionError(f"verify: onnxruntime failed to run the model at {where}: "
                                      f"{e}") from None
        checked += 1
        if len(expected) != len(got):
            raise ConversionError(f"verify: the model has {len(got)} outputs, fn gives "
                                  f"{len(expected)}")
        for i, (e, g) in enumerate(zip(expected, got)):
            if i in plan.nchw_out and g.ndim == 4:
                g = np.transpose(g, TO_NHWC)
            e = _packed(np.asarray(_model_value(e)))
            rtol, atol = _tolerances(e) if e.dtype.kind == "f" else (0, 0)
            why = _compare(e, g, rtol, atol)
            if why:
                raise ConversionError(
                    f"verify: output {i} ({out_names[i]!r}) differs from JAX at {where}: {why}; "
                    f"{_cause(plan, xs)}")
            results.append(_checked(where, out_names[i], e, g, rtol, atol))
    if not checked:
        raise ConversionError("verify: fn could not be evaluated in JAX at any size tried "
                              f"({', '.join(symbols)} = 1, 2 and 5)")
    return results


def _checked(where, name, expected, got, rtol, atol):
    """One output's comparison that passed, as verify_conversion returns it."""
    if expected.dtype.kind != "f":  # the kinds verify compares exactly
        return {"at": where, "output": name, "max_abs_diff": "equal", "tolerance": "exact"}
    expected, got = expected.astype(np.float64), np.asarray(got).astype(np.float64)
    both = np.isfinite(expected) & np.isfinite(got)
    diff = float(np.abs(expected[both] - got[both]).max()) if both.any() else 0.0
    return {"at": where, "output": name, "max_abs_diff": f"{diff:.3g}",
            "tolerance": f"rtol {rtol:g}, atol {atol:.3g}"}


def _cause(plan, xs):
    """Where the difference comes from, as far as first_divergence tells."""
    try:
        found = first_divergence(plan.fn, xs, plan.params, enable_double_precision=plan.x64,
                                 opset=plan.opset, plugin_dirs=plan.plugin_dirs,
                                 plugin_overrides=plan.plugin_overrides, fusion=plan.binding_level,
                                 target=plan.target)
    except ConversionError as e:  # every equation agrees: it says so
        return str(e)
    except Exception as e:  # the diagnosis must not hide the finding
        return f"locating the equation failed ({type(e).__name__}: {e})"
    if found is None:
        return ("every equation agrees when lowered without the optimizer, so a rewrite rule "
                "or pass changed it: convert with fuse=False, then optimize=False, to narrow it "
                "down, and please report it")
    return f"the first equation that diverges is {found}"
