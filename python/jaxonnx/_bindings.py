"""The activation window: while jaxonnx traces, the Python callables that loaded
plugins name in their binding specs (ABI 1.2) bind those plugins' primitives.

Everything here is generic: the targets, operands, params and call modes come
from the plugins as data; no target or plugin is named. A spec applies to a call
when its `when` expressions hold and its operands are arrays one of which is
traced; every other call runs the original callable.

A bound primitive carries `reference` (_reference.Reference): the original
callable as a function of the operands. It gives the primitive its meaning
everywhere JAX can meet it: eager impl and XLA lowering (evaluate it), jvp
(differentiate it) and vmap (bind again with the batch dim leading where the
spec says the primitive maps over leading dims, else vmap it); plugins may
inline it where their fused op does not fit. It is traced only when one of
these needs it. Abstract eval is the plugin's callback, else the output avals
of the original: by the binding-spec contract (the plugin lowers a call from
its operands and params alone) they depend only on the spec, the operands'
avals and the params, so the first such call traces the original (keeping that
trace as its reference) and later ones reuse its avals without tracing.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import contextvars
import inspect
import sys
import threading

import jax
import numpy as np
from jax import core as jax_core
from jax.extend import core as jex_core
from jax.interpreters import ad, batching, mlir

from jax._src import source_info_util

from jaxonnx import _core, _reference
from jaxonnx._reference import Reference

# An equation traced through a wrapper here names the user's line, not ours.
source_info_util.register_exclusion(__file__)

REFERENCE = "reference"
LEADING = "leading_dims_operands"

# ------------------------------------------------------------ expressions

# type: a default such as a bare object() is told apart by type(x).__name__
# (type's three-argument form needs a dict, which the language has not).
_FUNCTIONS = {"len": len, "tuple": tuple, "int": int, "float": float, "bool": bool, "str": str,
              "abs": abs, "min": min, "max": max, "type": type}
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


_GLOBALS = {"__builtins__": {}, **_FUNCTIONS}


def _eval(code, env):
    return eval(code, _GLOBALS, env)  # noqa: S307 (checked by _compile; nothing writes _GLOBALS)


class _Binding:
    """One binding spec, compiled."""

    def __init__(self, primitive, has_abstract_eval, plugin, d):
        self.primitive = primitive
        self.plugin = plugin
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
        self.numerics = d.get("numerics", "undeclared")


# ------------------------------------------------------------ primitives

_primitives: dict = {}


def _primitive(spec: _Binding, registry):
    key = (spec.primitive, tuple(registry.dirs))
    if key in _primitives:
        return _primitives[key]
    prim = jex_core.Primitive(spec.primitive)
    prim.multiple_results = True

    def impl(*ops, **params):
        return params[REFERENCE](*ops)

    def abstract_eval(*avals, **params):
        if spec.has_abstract_eval:
            from jaxonnx._primitives import _dim_reader
            read = _dim_reader(avals)
            outs = _core.abstract_eval(registry, spec.primitive, list(avals), params)
            return [jax_core.ShapedArray(tuple(read(d) for d in dims), np.dtype(dt))
                    for dt, dims in outs]
        return list(params[REFERENCE].out_avals)

    def jvp(primals, tangents, **params):
        tangents = [ad.instantiate_zeros(t) for t in tangents]
        _, t_out = jax.jvp(params[REFERENCE], list(primals), tangents)
        return prim.bind(*primals, **params), t_out

    def batch(args, dims, **params):
        ref = params[REFERENCE]
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
        batched = Reference.traced(jax.make_jaxpr(jax.vmap(ref, in_axes=axes))(*avals))
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


# (spec, operand avals, params) -> (output tree, output avals) of a call that
# traced; see the module's doc. Bounded: symbolic dims of other scopes, shapes
# of models long gone.
_outputs: dict = {}
_OUTPUTS_MAX = 4096


def _bind(spec: _Binding, registry, original, args, kwargs, env):
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
    key = (spec, tuple(jax.typeof(o) for o in operands), tuple(params.items()))
    known = _outputs.get(key)
    source = source_info_util.current()
    if known is not None:
        tree, avals = known
        reference = Reference(avals, call=(original, args, kwargs, operands, source))
    else:
        # Specs that fire inside the reference's trace are not in the program.
        quiet = _FIRED.set(None)
        try:
            closed, shape = _reference.trace(original, args, kwargs, operands, source,
                                             return_shape=True)
        except Exception:  # noqa: BLE001  (non-array results, or the call's own error: the
            return None    # original then runs, and raises that error itself)
        finally:
            _FIRED.reset(quiet)
        if closed is None:
            return None
        reference = Reference.traced(closed)
        tree = jax.tree_util.tree_structure(shape)
        if len(_outputs) >= _OUTPUTS_MAX:
            _outputs.clear()
        _outputs[key] = (tree, reference.out_avals)
    prim = _primitive(spec, registry)
    fired = _FIRED.get()
    if fired is not None:
        fired[(spec.plugin, spec.primitive, spec.target, spec.numerics)] += 1
    outs = prim.bind(*operands, **params, **{REFERENCE: reference, LEADING: spec.leading})
    return jax.tree_util.tree_unflatten(tree, outs)


# ------------------------------------------------------------ the window

# The binding specs that routed a call while recording() is open (the
# conversion report): a Counter of (plugin, primitive, target, numerics).
_FIRED: contextvars.ContextVar = contextvars.ContextVar("jaxonnx_bindings_fired", default=None)


@contextlib.contextmanager
def recording():
    """Counts, in the Counter it yields, each call a binding spec routes to its
    primitive while open: (plugin, primitive, target, numerics) -> calls."""
    fired = collections.Counter()
    token = _FIRED.set(fired)
    try:
        yield fired
    finally:
        _FIRED.reset(token)


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


def _wrapper(original, specs, registry, level):
    exact = level == "exact"
    if exact:  # only specs that declare themselves exact on NaN and infinity too
        specs = [s for s in specs if s.numerics == "exact"]
    elif level != "approximate":  # beyond float rounding: only when asked
        specs = [s for s in specs if s.numerics != "approximate"]
    if not specs:
        return None
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


class _Compiled:
    """A registry's specs by target, and the wrappers made for them, kept
    between windows (compiling the specs and reading signatures is most of
    what opening a window costs)."""

    def __init__(self, registry):
        self.registry = registry  # keeps id(registry) ours while cached
        self.specs: dict = {}
        for plugin in registry.plugins:
            for p in plugin["primitives"]:
                for d in p["bindings"]:
                    spec = _Binding(p["name"], p["abstract_eval"], plugin["name"], d)
                    self.specs.setdefault(spec.target, []).append(spec)
        self.wrappers: dict = {}  # (target, level) -> (original, wrapper or None)

    def wrapper(self, target, original, level):
        hit = self.wrappers.get((target, level))
        if hit is None or hit[0] is not original:
            hit = (original, _wrapper(original, self.specs[target], self.registry, level))
            self.wrappers[(target, level)] = hit
        return hit[1]


_compiled: dict = {}


def _compile_registry(registry) -> _Compiled:
    hit = _compiled.get(id(registry))
    if hit is None:
        if len(_compiled) >= 8:  # registries rebuilt after their plugin files changed
            _compiled.clear()
        hit = _compiled[id(registry)] = _Compiled(registry)
    return hit


def _specs(registry):
    """The binding specs of every loaded plugin, in registry order, by target."""
    return _compile_registry(registry).specs


# The window patches attributes every thread sees, so one thread at a time
# traces with it open (or, with crisp=False, must see the originals); reentrant
# for a conversion started inside another's trace.
_WINDOW_LOCK = threading.RLock()


@contextlib.contextmanager
def window(registry, level="fast"):
    """Applies the binding specs of `registry` at a fusion level (_fusion.LEVELS:
    "fast" every spec but those declared approximate, "approximate" every spec,
    "exact" the specs declared exact on NaN and infinity too, "none" none) and restores every target on exit, also on an exception.
    "exact" also passes jaxonnx_exact=True to the spec expressions. Windows of
    several threads take turns (_WINDOW_LOCK)."""
    if level not in ("fast", "exact", "none", "approximate"):
        raise _core.ConversionError(
            f'fusion level must be "fast", "exact", "none" or "approximate"; got {level!r}')
    with _WINDOW_LOCK:
        if level == "none":
            yield
            return
        compiled = _compile_registry(registry)
        restore = []
        try:
            for target in compiled.specs:
                found = _resolve(target)
                if found is None:
                    continue
                owner, name = found
                had = name in getattr(owner, "__dict__", {})
                saved = owner.__dict__[name] if had else None
                if had and isinstance(saved, (staticmethod, classmethod)):
                    continue
                wrapper = compiled.wrapper(target, getattr(owner, name), level)
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
