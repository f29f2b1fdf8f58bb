"""jaxonnx.onnx_function: keep a block as an ONNX function (a FunctionProto).

Outside jaxonnx.to_onnx a decorated callable is the undecorated one (eager,
jit, vmap, grad). While to_onnx traces, each call traces the block's body to
a closed jaxpr and binds the primitive `onnx_fn::<module>.<qualname>` with it;
the core lowers one body per key (the primitive, input avals, the capture key
made here) into model.functions and emits a call-site node
(docs/functions.md).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import inspect
import re

import jax
import numpy as np
from jax.extend import core as jex_core

from jaxonnx import _nnx
from jaxonnx._core import ConversionError

# Equations bound here point at the user's call, not at this file.
try:
    from jax._src import source_info_util as _source_info_util

    _source_info_util.register_exclusion(__file__)
except (ImportError, AttributeError):  # a JAX without it: source lines just say less
    pass

_DEFAULT_DOMAIN = "custom"
_MARK = "__jaxonnx_onnx_function__"


class _Conversion:
    """Per-conversion state: stable ordinals for instances (held alive so an
    id is never reused mid-conversion), traced bodies, the calls being traced."""

    def __init__(self):
        self.ordinals: dict[int, tuple[object, int]] = {}
        self.bodies: dict[tuple, tuple] = {}
        self.building: set[tuple[str, int]] = set()

    def ordinal(self, obj) -> int:
        entry = self.ordinals.setdefault(id(obj), (obj, len(self.ordinals)))
        return entry[1]


_ACTIVE: contextvars.ContextVar[_Conversion | None] = contextvars.ContextVar(
    "jaxonnx_functions", default=None)


@contextlib.contextmanager
def tracing():
    """Entered by to_onnx around its trace: inside, calls bind function primitives."""
    token = _ACTIVE.set(_Conversion())
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def _sanitize(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def _namespace(namespace) -> str:
    parts = [_sanitize(p) for p in (namespace or _DEFAULT_DOMAIN).split(".") if p]
    return ".".join(p for p in parts if p) or _DEFAULT_DOMAIN


def _qualified(target) -> str:
    module = getattr(target, "__module__", None) or "<unknown>"
    return f"{module}.{getattr(target, '__qualname__', getattr(target, '__name__', repr(target)))}"


class _Decoration:
    """What @onnx_function was told about a target: its function's name,
    domain and display name, and whether each call gets its own body."""

    def __init__(self, target, unique, namespace, display):
        self.qualname = _qualified(target)
        self.unique = bool(unique)
        self.domain = _namespace(namespace)
        self.display = _sanitize(display or getattr(target, "__name__", "Function"))
        self.explicit_namespace = namespace is not None
        self.explicit_name = display is not None

    def merge(self, unique, namespace, display):
        """A second decoration of the same target: jax2onnx's rules."""
        if namespace is not None and _namespace(namespace) != self.domain and self.explicit_namespace:
            raise ConversionError(f"@onnx_function namespace mismatch for {self.qualname}: "
                                  f"{self.domain} vs {_namespace(namespace)}")
        if display is not None and self.explicit_name and _sanitize(display) != self.display:
            raise ConversionError(f"@onnx_function name/type mismatch for {self.qualname}: "
                                  f"{self.display} vs {_sanitize(display)}")
        if namespace is not None:
            self.domain, self.explicit_namespace = _namespace(namespace), True
        if display is not None:
            self.display, self.explicit_name = _sanitize(display), True
        self.unique = self.unique or bool(unique)


# -- the primitive

_PRIMITIVES: dict[str, jex_core.Primitive] = {}


def _eval_body(body, *args):
    return jex_core.jaxpr_as_fun(body)(*args)


def _primitive(qualname: str) -> jex_core.Primitive:
    prim = _PRIMITIVES.get(qualname)
    if prim is not None:
        return prim
    from jax.interpreters import ad, batching, mlir

    prim = jex_core.Primitive(f"onnx_fn::{qualname}")
    prim.multiple_results = True
    prim.def_impl(lambda *args, body, **_: _eval_body(body, *args))
    prim.def_abstract_eval(lambda *avals, body, **_: body.out_avals)
    mlir.register_lowering(prim, mlir.lower_fun(
        lambda *args, body, **_: _eval_body(body, *args), multiple_results=True))

    def jvp(primals, tangents, *, body, **_):
        tangents = [ad.instantiate_zeros(t) for t in tangents]
        return jax.jvp(functools.partial(_eval_body, body), list(primals), tangents)

    def batch(args, dims, *, body, key, **params):
        # The vmapped body, still one function (its own key: other avals).
        axes = list(dims)  # None: not mapped
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
        batched = jax.make_jaxpr(jax.vmap(functools.partial(_eval_body, body), in_axes=axes))(*specs)
        outs = prim.bind(*args, body=batched, key=f"{key}|vmap{axes}", **params)
        return outs, [0] * len(outs)

    ad.primitive_jvps[prim] = jvp
    batching.primitive_batchers[prim] = batch
    _PRIMITIVES[qualname] = prim
    return prim


# -- a call while converting

def _is_operand(leaf) -> bool:
    return isinstance(leaf, (jax.Array, np.ndarray, np.generic, jax.core.Tracer))


def _static_key(value) -> str:
    return f"{type(value).__qualname__}:{value!r}"


def _fingerprint(closed, statics) -> str:
    """Equal blocks (same computation, same parameter values) share one body."""
    h = hashlib.sha256()
    h.update(str(closed.jaxpr).encode())
    h.update(repr(statics).encode())
    for c in closed.consts:
        a = np.asarray(c)
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return "unique:" + h.hexdigest()[:16]


def _trace(fn, instance, leaves, treedef, operand_idx, specs):
    def body(*operands, make_instance=lambda: instance):
        args = list(leaves)
        for i, v in zip(operand_idx, operands):
            args[i] = v
        a, kw = jax.tree_util.tree_unflatten(treedef, args)
        return fn(make_instance(), *a, **kw) if instance is not None else fn(*a, **kw)

    try:
        return jax.make_jaxpr(body, return_shape=True)(*specs)
    except Exception as e:
        if instance is None or type(e).__name__ != "TraceContextError":
            raise
    # A flax nnx module that updates its own state (BatchNorm statistics, RNG
    # counters) cannot do so from the body's trace: the body works on a copy
    # made inside that trace, and its updates are dropped.
    copy = functools.partial(body, make_instance=_nnx.copier(instance))
    return jax.make_jaxpr(copy, return_shape=True)(*specs)


def _lift_tracer_consts(closed):
    """Values of the enclosing trace the body closed over become leading inputs."""
    is_tracer = [isinstance(c, jax.core.Tracer) for c in closed.consts]
    if not any(is_tracer):
        return closed, []
    j = closed.jaxpr
    keep = [v for v, t in zip(j.constvars, is_tracer) if not t]
    lifted = [v for v, t in zip(j.constvars, is_tracer) if t]
    new = j.replace(constvars=keep, invars=lifted + list(j.invars))
    return (jex_core.ClosedJaxpr(new, [c for c, t in zip(closed.consts, is_tracer) if not t]),
            [c for c, t in zip(closed.consts, is_tracer) if t])


def _call(decoration, fn, instance, args, kwargs, conv):
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    operand_idx = [i for i, leaf in enumerate(leaves) if _is_operand(leaf)]
    statics = tuple(_static_key(leaf) if i not in operand_idx else "*"
                    for i, leaf in enumerate(leaves))
    specs = []
    for i in operand_idx:
        aval = jax.typeof(leaves[i])
        specs.append(jax.ShapeDtypeStruct(aval.shape, aval.dtype,
                                          weak_type=getattr(aval, "weak_type", False)))
    owner = conv.ordinal(instance if instance is not None else fn)
    cache_key = (decoration.qualname, owner, str(treedef), statics,
                 tuple((s.shape, str(s.dtype), s.weak_type) for s in specs))
    cached = conv.bodies.get(cache_key)
    if cached is None:
        building = (decoration.qualname, owner)
        conv.building.add(building)
        try:
            closed, out_shape = _trace(fn, instance, leaves, treedef, operand_idx, specs)
        finally:
            conv.building.discard(building)
        closed, captured = _lift_tracer_consts(closed)
        key = _fingerprint(closed, (str(treedef), statics)) if decoration.unique \
            else f"owner:{owner}|{treedef}|{statics}"
        cached = (closed, jax.tree_util.tree_structure(out_shape), key)
        if not captured:  # a body closing over traced values is traced per call
            conv.bodies[cache_key] = cached
    else:
        captured = []
    closed, out_tree, key = cached
    operands = [*captured, *(leaves[i] for i in operand_idx)]
    outs = _primitive(decoration.qualname).bind(*operands, body=closed, name=decoration.display,
                                                domain=decoration.domain, key=key)
    return jax.tree_util.tree_unflatten(out_tree, outs)


def _wrap(fn, decoration, method: bool):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        conv = _ACTIVE.get()
        if conv is None:
            return fn(*args, **kwargs)
        instance, call_args = (args[0], args[1:]) if method else (None, args)
        owner = conv.ordinal(instance if method else fn)
        if (decoration.qualname, owner) in conv.building:  # a recursive call: inline
            return fn(*args, **kwargs)
        return _call(decoration, fn, instance, call_args, kwargs, conv)

    setattr(wrapper, _MARK, decoration)
    return wrapper


def onnx_function(target=None, *, unique=False, namespace=None, name=None, type=None):  # noqa: A002
    """Marks a class (its __call__) or a free function as an ONNX function.

    While jaxonnx.to_onnx traces, every call becomes a node that calls a
    FunctionProto in model.functions instead of inline nodes. Outside a
    conversion the decorated callable behaves exactly as the undecorated one.
    Usable bare (@onnx_function) or with arguments (@onnx_function(...)); the
    signature and meanings are jax2onnx 0.17.1's.

    Args:
        unique: share one definition among all calls of equal blocks (same
            computation and parameter values) instead of one per instance.
        namespace: the functions' ONNX domain (default "custom").
        name: the function's name (the call node's op_type) instead of the
            class or function name.
        type: as name; `type` wins when both are given.

    Raises:
        ConversionError: (a ValueError) when the same target is decorated
            again with another namespace or name.
    """
    display = type if isinstance(type, str) and type else name

    def decorate(t):
        if inspect.isclass(t):
            owner = next((k for k in t.__mro__ if "__call__" in k.__dict__ and k is not object),
                         None)
            if owner is None:
                raise ConversionError(f"@onnx_function: class {t.__qualname__} has no __call__")
            call = owner.__dict__["__call__"]
            existing = getattr(call, _MARK, None)
            if existing is not None and owner is t:
                existing.merge(unique, namespace, display)
                return t
            if existing is not None:  # a decorated base's: this class is its own function
                call = call.__wrapped__
            t.__call__ = _wrap(call, _Decoration(t, unique, namespace, display), method=True)
            return t
        if callable(t):
            existing = getattr(t, _MARK, None)
            if existing is not None:
                existing.merge(unique, namespace, display)
                return t
            return _wrap(t, _Decoration(t, unique, namespace, display), method=False)
        raise ConversionError("@onnx_function expects a class or a callable")

    if target is None:
        return decorate
    return decorate(target)
