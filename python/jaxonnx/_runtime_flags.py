"""Dropout's train / eval flag as a runtime model input, for flax nnx, flax linen and
equinox.

An input_params entry reaches the traced code as a tracer, and each library's Dropout
branches on its flag in Python (nnx and linen `deterministic`, equinox `inference`),
which a tracer cannot do. While tracing, a Dropout whose flag is traced computes its
dropout and selects at run time: Where(flag, input, dropout). The mask comes from the
randomness the layer would use (its Rngs, the 'dropout' rng stream, its key argument),
else from key 0, and is fixed in the model. Any other Python branch on a traced flag
fails in JAX; branch_hint() turns that failure into advice naming the flag.
"""

from __future__ import annotations

import contextlib
import re
import sys


def _traced(flag):
    import jax
    return isinstance(flag, jax.core.Tracer)


def _select(flag, kept, dropped):
    import jax.numpy as jnp
    return jnp.where(jnp.asarray(flag, bool), kept, dropped)


def _key0():
    import jax
    return jax.random.key(0)


@contextlib.contextmanager
def _patched(cls, make):
    """cls.__call__ replaced by make(original) while the block runs."""
    original = cls.__call__
    cls.__call__ = make(original)
    try:
        yield
    finally:
        cls.__call__ = original


def _nnx_call(original):
    def call(self, inputs, *, deterministic=None, rngs=None):
        if not _traced(deterministic):
            return original(self, inputs, deterministic=deterministic, rngs=rngs)
        if rngs is None and self.rngs is None:
            rngs = _key0()
        dropped = original(self, inputs, deterministic=False, rngs=rngs)
        return _select(deterministic, inputs, dropped)
    return call


def _linen_call(original):
    def call(self, inputs, deterministic=None, rng=None):
        flag = self.deterministic if deterministic is None else deterministic
        if not _traced(flag) or (deterministic is not None and self.deterministic is not None):
            return original(self, inputs, deterministic=deterministic, rng=rng)  # flax decides
        if rng is None and not (self.scope is not None and self.has_rng(self.rng_collection)):
            rng = _key0()
        # A traced flag given as the attribute (nn.Dropout(rate, deterministic=flag)) is
        # set aside for the dropout call: flax refuses the flag given twice.
        attribute = self.deterministic
        object.__setattr__(self, "deterministic", None)
        try:
            dropped = original(self, inputs, deterministic=False, rng=rng)
        finally:
            object.__setattr__(self, "deterministic", attribute)
        return _select(flag, inputs, dropped)
    return call


def _equinox_call(original):
    def call(self, x, *, key=None, inference=None, deterministic=None):
        flag = deterministic if deterministic is not None else (
            self.inference if inference is None else inference)
        if not _traced(flag):
            return original(self, x, key=key, inference=inference, deterministic=deterministic)
        dropped = original(self, x, key=_key0() if key is None else key, inference=False)
        return _select(flag, x, dropped)
    return call


@contextlib.contextmanager
def dropout_switch():
    """While tracing: the Dropout layers of the libraries the user has imported take a
    traced flag and select at run time."""
    with contextlib.ExitStack() as stack:
        for module, attr, make in (("flax.nnx", "Dropout", _nnx_call),
                                   ("flax.linen", "Dropout", _linen_call),
                                   ("equinox.nn", "Dropout", _equinox_call)):
            lib = sys.modules.get(module)
            cls = getattr(lib, attr, None) if lib is not None else None
            if cls is not None:
                stack.enter_context(_patched(cls, make))
        yield


def branch_hint(error, n_inputs, param_names):
    """Advice for a JAX error raised because Python branched on an input_params entry
    (TracerBoolConversionError, ConcretizationTypeError), naming the entry; "" for any
    other error."""
    import jax
    if not isinstance(error, jax.errors.ConcretizationTypeError) or not param_names:
        return ""
    found = [int(k) - n_inputs for k in re.findall(r"\bargs\[(\d+)\]", str(error))]
    names = [param_names[k] for k in found if 0 <= k < len(param_names)]
    if not names:
        return ""
    which = ", ".join(f"'{n}'" for n in dict.fromkeys(names))
    return (f"; input_params {which} became a runtime model input, but the code needs its "
            f"Python value here (an `if`, `not`, or a layer option such as BatchNorm's "
            f"use_running_average). A runtime flag works only where it reaches Dropout "
            f"(flax nnx / linen `deterministic`, equinox `inference`) directly. Otherwise fix "
            f"its value in fn instead (functools.partial(fn, {names[0]}=...)) and leave it "
            f"out of input_params")
