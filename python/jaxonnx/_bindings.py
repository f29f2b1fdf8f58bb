"""The activation window: while jaxonnx traces, the Python callables that loaded
plugins name in their binding specs (ABI 1.2) bind those plugins' primitives.

Everything here is generic: the targets, operands, params and call modes come
from the plugins as data; no target or plugin is named. A spec applies to a call
when its `when` expressions hold and its operands are arrays one of which is
traced; every other call runs the original callable.

A bound primitive carries `reference`, the original callable traced as a
function of the operands (a ClosedJaxpr). It gives the primitive its meaning
everywhere JAX can meet it: eager impl and XLA lowering (evaluate it),
abstract eval (the plugin's callback, else its output avals: jax.eval_shape of
the original, so symbolic dims survive), jvp (differentiate it) and vmap (bind again with the
batch dim leading where the spec says the primitive maps over leading dims,
else vmap it). Plugins may inline it where their fused op does not fit.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import sys

import jax
import numpy as np
from jax import core as jax_core
from jax.extend import core as jex_core
from jax.interpreters import ad, batching, mlir

from jax._src import source_info_util

from jaxonnx import _core

# An equation traced through a wrapper here names the user's line, not ours.
source_info_util.register_exclusion(__file__)

REFERENCE = "reference"
LEADING = "leading_dims_operands"

# ------------------------------------------------------------ expressions

_FUNCTIONS = {"len": len, "tuple": tuple, "int": int, "float": float, "bool": bool, "str": str,
              "abs": abs, "min": min, "max": max}
_NODES = (ast.Expression, ast.Name, ast.Load, ast.Attribute, ast.Subscript, ast.Constant,
          ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Tuple, ast.Compare, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub,
          ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot, ast.In,
          ast.NotIn, ast.Call)


class SpecError(_core.ConversionError):
    """A plugin's binding spec is malformed."""


def _compile(expr: str, where: str):
    """A code object for a spec expression, after checking it uses only the
    small language jxo_binding documents (no dunder attributes, calls only of
    _FUNCTIONS)."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise SpecError(f"{where}: expression {expr!r} does not parse: {e.msg}") from None
    for node in ast.walk(tree):
        ok = isinstance(node, _NODES)
        if isinstance(node, ast.Attribute) and node.attr.startswith("__") \
                and node.attr not in ("__name__", "__module__"):
            ok = False
        if isinstance(node, ast.Call):
            ok = (isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
                  and not node.keywords)
        if not ok:
            raise SpecError(f"{where}: expression {expr!r} uses {type(node).__name__}, which "
                            f"binding specs do not allow")
    return compile(tree, f"<binding spec {where}>", "eval")


def _eval(code, env):
    return eval(code, {"__builtins__": {}, **_FUNCTIONS}, env)  # noqa: S307 (checked by _compile)


class _Spec:
    """One binding spec, compiled."""

    def __init__(self, primitive, has_abstract_eval, plugin, d):
        self.primitive = primitive
        self.has_abstract_eval = has_abstract_eval
        self.target = d["target"]
        where = f"plugin {plugin!r}, primitive {primitive!r}, target {self.target!r}"
        self.where = where
        self.operands = [_compile(e, where) for e in d["operands"]]
        self.params = []
        for p in d["params"]:
            name, _, expr = p.partition("=")
            self.params.append((name.strip(), _compile(expr.strip(), where)))
        self.when = [_compile(e, where) for e in d["when"]]
        self.leading = int(d["leading_dims_operands"])


# ------------------------------------------------------------ primitives

_primitives: dict = {}


def _reference_fn(reference):
    return lambda *ops: jax_core.eval_jaxpr(reference.jaxpr, reference.consts, *ops)


def _primitive(spec: _Spec, registry):
    key = (spec.primitive, tuple(registry.dirs))
    if key in _primitives:
        return _primitives[key]
    prim = jex_core.Primitive(spec.primitive)
    prim.multiple_results = True

    def impl(*ops, **params):
        return _reference_fn(params[REFERENCE])(*ops)

    def abstract_eval(*avals, **params):
        if spec.has_abstract_eval:
            from jaxonnx._primitives import _dim_reader
            read = _dim_reader(avals)
            outs = _core.abstract_eval(registry, spec.primitive, list(avals), params)
            return [jax_core.ShapedArray(tuple(read(d) for d in dims), np.dtype(dt))
                    for dt, dims in outs]
        return [v.aval for v in params[REFERENCE].jaxpr.outvars]

    def jvp(primals, tangents, **params):
        tangents = [ad.instantiate_zeros(t) for t in tangents]
        _, t_out = jax.jvp(_reference_fn(params[REFERENCE]), list(primals), tangents)
        return prim.bind(*primals, **params), t_out

    def batch(args, dims, **params):
        ref = _reference_fn(params[REFERENCE])
        mask = params[LEADING]
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        leading = all(d is None or (mask >> i) & 1 for i, d in enumerate(dims))
        if not leading:
            outs = jax.vmap(ref, in_axes=list(dims))(*args)
            return outs, [0] * len(outs)
        moved, axes = [], []
        for i, (a, d) in enumerate(zip(args, dims)):
            if (mask >> i) & 1:
                a = (jax.numpy.broadcast_to(a, (size, *a.shape)) if d is None
                     else jax.numpy.moveaxis(a, d, 0))
                axes.append(0)
            else:
                axes.append(None)
            moved.append(a)
        avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in moved]
        batched = jax.make_jaxpr(jax.vmap(ref, in_axes=axes))(*avals)
        outs = prim.bind(*moved, **{**params, REFERENCE: batched})
        return outs, [0] * len(outs)

    prim.def_impl(impl)
    mlir.register_lowering(prim, mlir.lower_fun(impl, multiple_results=True))
    prim.def_abstract_eval(abstract_eval)
    ad.primitive_jvps[prim] = jvp
    batching.primitive_batchers[prim] = batch
    _primitives[key] = prim
    return prim


def _hashable(v):
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, np.generic):
        return v.item()
    return v


def _is_static(v):
    if isinstance(v, tuple):
        return all(_is_static(x) for x in v)
    return v is None or isinstance(v, (bool, int, float, str))


def _is_array(v):
    return isinstance(v, (jax.Array, jax_core.Tracer, np.ndarray))


def _bind(spec: _Spec, registry, original, args, kwargs, env):
    """The outputs of the call through spec's primitive, or None when the spec
    does not apply to this call."""
    try:
        if not all(_eval(w, env) for w in spec.when):
            return None
        operands = [_eval(o, env) for o in spec.operands]
        params = {name: _hashable(_eval(e, env)) for name, e in spec.params}
    except Exception:  # noqa: BLE001  (a spec that does not fit this call: the original runs)
        return None
    if not all(_is_array(o) for o in operands) or not all(map(_is_static, params.values())):
        return None
    if not any(isinstance(o, jax_core.Tracer) for o in operands):
        return None  # nothing traced: an eager call
    try:
        closed, shape = jax.make_jaxpr(lambda: original(*args, **kwargs), return_shape=True)()
    except Exception:  # noqa: BLE001  (non-array results, or the call's own error: the
        return None    # original then runs, and raises that error itself)
    reference = _as_function_of(closed, operands)
    if reference is None:
        return None
    tree = jax.tree_util.tree_structure(shape)
    prim = _primitive(spec, registry)
    outs = prim.bind(*operands, **params, **{REFERENCE: reference, LEADING: spec.leading})
    return jax.tree_util.tree_unflatten(tree, outs)


def _as_function_of(closed, operands):
    """`closed` (traced with no inputs) with the constants that are the operands
    turned into its inputs, in operand order; None when it also reads another
    traced value (then the operands do not determine it)."""
    jaxpr = closed.jaxpr
    by_id = {id(c): v for v, c in zip(jaxpr.constvars, closed.consts)}
    invars, taken = [], set()
    for o in operands:
        v = by_id.get(id(o))
        if v is None or id(o) in taken:  # unread (or read through an earlier operand)
            v = jex_core.Var(jax.typeof(o))
        taken.add(id(o))
        invars.append(v)
    used = {id(v) for v in invars}
    constvars, consts = [], []
    for v, c in zip(jaxpr.constvars, closed.consts):
        if id(v) in used:
            continue
        if isinstance(c, jax_core.Tracer):
            return None
        constvars.append(v)
        consts.append(c)
    return jex_core.ClosedJaxpr(jaxpr.replace(constvars=constvars, invars=invars), consts)


# ------------------------------------------------------------ the window

def _resolve(target):
    """(owner, attribute name) for a dotted target whose module is already
    imported (a module the program has not imported it cannot call), else None."""
    parts = target.split(".")
    for i in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:i]))
        if module is None:
            continue
        owner = module
        try:
            for name in parts[i:-1]:
                owner = getattr(owner, name)
            getattr(owner, parts[-1])
        except AttributeError:
            return None
        return owner, parts[-1]
    return None


def _wrapper(original, specs, registry, exact):
    try:
        signature = inspect.signature(original)
    except (TypeError, ValueError):
        return None

    def call(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)
        bound.apply_defaults()
        env = dict(bound.arguments, jaxonnx_exact=exact)
        for spec in specs:
            out = _bind(spec, registry, original, args, kwargs, env)
            if out is not None:
                return out
        return original(*args, **kwargs)

    call.__wrapped__ = original
    call.__doc__ = getattr(original, "__doc__", None)
    call.__name__ = getattr(original, "__name__", "binding")
    return call


def _specs(registry):
    """The binding specs of every loaded plugin, in registry order, by target."""
    by_target: dict = {}
    for plugin in registry.plugins:
        for p in plugin["primitives"]:
            for d in p["bindings"]:
                spec = _Spec(p["name"], p["abstract_eval"], plugin["name"], d)
                by_target.setdefault(spec.target, []).append(spec)
    return by_target


@contextlib.contextmanager
def window(registry, crisp=True):
    """Applies every binding spec of `registry` (none when crisp is False) and
    restores every target on exit, also on an exception. crisp="exact" passes
    jaxonnx_exact=True to the spec expressions, whose specs then keep only ops
    that agree with JAX on NaN and infinity as well."""
    if crisp is False:
        yield
        return
    if crisp not in (True, "exact"):
        raise _core.ConversionError(f'crisp must be True, False or "exact"; got {crisp!r}')
    restore = []
    try:
        for target, specs in _specs(registry).items():
            found = _resolve(target)
            if found is None:
                continue
            owner, name = found
            had = name in getattr(owner, "__dict__", {})
            saved = owner.__dict__[name] if had else None
            if had and isinstance(saved, (staticmethod, classmethod)):
                continue
            wrapper = _wrapper(getattr(owner, name), specs, registry, crisp == "exact")
            if wrapper is None:
                continue
            setattr(owner, name, wrapper)
            restore.append((owner, name, had, saved))
        yield
    finally:
        for owner, name, had, saved in reversed(restore):
            if had:
                setattr(owner, name, saved)
            else:
                delattr(owner, name)
