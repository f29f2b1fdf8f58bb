"""flax nnx modules as JAX can trace them: a private copy per conversion and the
hint for training mode. (nnx.Dropout's runtime flag is _runtime_flags'.)

A module's Variables remember the JAX trace they were made in, and flax refuses
to update them from another one ("Cannot mutate RngCount from a different trace
level": nnx.RNN draws its initial carry from an Rngs stream). So the module is
copied inside the trace (nnx.merge(..., copy=True) makes Variables of that
trace); whatever the traced code updates (Rngs counts, BatchNorm statistics,
caches) is updated on the copy, and the user's module is never touched.
"""

from __future__ import annotations

import sys


def _nnx():
    """flax.nnx if the user has imported it (no module of theirs exists otherwise)."""
    return sys.modules.get("flax.nnx")


def module_of(fn):
    """(module, method name) when fn is an nnx Module or a bound method of one, else None."""
    nnx = _nnx()
    if nnx is None:
        return None
    if isinstance(fn, nnx.Module):
        return fn, "__call__"
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, nnx.Module) and getattr(fn, "__name__", None):
        return owner, fn.__name__
    return None


def copier(module):
    """A function that makes a copy of the nnx `module` when called: called inside
    a trace, the copy's Variables belong to that trace, so the state updates the
    module makes while traced (Rngs counts, statistics) land on the copy."""
    nnx = _nnx()
    graphdef, state = nnx.split(module)
    return lambda: nnx.merge(graphdef, state, copy=True)


def private_copy(fn):
    """A callable that runs fn on a copy of its nnx module made inside the current
    trace, or None when fn is not an nnx module (or a bound method of one)."""
    found = module_of(fn)
    if found is None:
        return None
    module, method = found
    make = copier(module)

    def call(*args, **kwargs):
        return getattr(make(), method)(*args, **kwargs)

    return call


def training_modules(fn) -> list[str]:
    """Paths and types of the submodules that run in training mode: BatchNorm
    using batch statistics, Dropout that is not deterministic."""
    found = module_of(fn)
    if found is None:
        return []
    nnx = _nnx()
    out = []
    for path, sub in nnx.iter_graph(found[0]):
        training = (isinstance(sub, nnx.BatchNorm) and sub.use_running_average is False) or \
            (isinstance(sub, nnx.Dropout) and sub.deterministic is False and sub.rate > 0)
        if training:
            out.append(f"{'.'.join(str(p) for p in path) or '<root>'} ({type(sub).__name__})")
    return out
