"""equinox_internals, lax_platform, lax_unstack, lax_mulhi plugins."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend import core as jex_core
from jax.interpreters import mlir

from helpers import check

FLOATS = [(np.float32, False), (np.float64, True)]
IDS = ["f32", "f64"]


# -------------------------------------------------------- equinox internals --
# The primitives equinox.internal binds (same names and semantics; equinox itself is
# not a test dependency). Each is defined here as equinox defines it.

def _prim(name, abstract, impl):
    p = jex_core.Primitive(name)
    p.def_abstract_eval(abstract)
    p.def_impl(impl)
    mlir.register_lowering(p, mlir.lower_fun(impl, multiple_results=False))
    return p


unvmap_any = _prim("unvmap_any", lambda x: jax.core.ShapedArray((), jnp.bool_), lambda x: jnp.any(x))
unvmap_all = _prim("unvmap_all", lambda x: jax.core.ShapedArray((), jnp.bool_), lambda x: jnp.all(x))
unvmap_max = _prim("unvmap_max", lambda x: jax.core.ShapedArray((), x.dtype), lambda x: jnp.max(x))
select_if_vmap = _prim("select_if_vmap", lambda p, x, y: x, lambda p, x, y: x)
nonbatchable = _prim("nonbatchable", lambda x, **_: x, lambda x, **_: x)


def batched_while(x):
    """What equinox's while_loop makes of vmap: the loop runs while any lane is active."""
    def cond(c):
        return unvmap_any.bind(c[1] < 10.0)

    def body(c):
        i, v = c
        active = v < 10.0
        stepped = jnp.where(active, v * 2.0, v)
        return nonbatchable.bind(i + 1, msg="", allow_constant_across_batch=False), \
            select_if_vmap.bind(jnp.all(active), stepped, v)
    i, v = lax.while_loop(cond, body, (jnp.int32(0), x))
    return i, v, unvmap_all.bind(v >= 10.0), unvmap_max.bind(i), unvmap_max.bind(v)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_equinox_vmap_of_while(dtype, x64):
    check(batched_while, [("B", 3)], x64=x64,
          make_inputs=lambda s, d, rng: rng.uniform(0.5, 9, size=s).astype(d))


def test_unvmap_on_scalars_and_ints():
    check(lambda x: (unvmap_any.bind(x > 0), unvmap_max.bind(x), unvmap_all.bind(x > -100)), [()],
          [np.int16])
    check(lambda x: unvmap_max.bind(x), [("B", 2, 3)], [np.int32])


# ---------------------------------------------------------- platform_index --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_platform_dependent_takes_the_cpu_branch(dtype, x64):
    f = lambda x: lax.platform_dependent(x, cpu=jnp.sin, cuda=jnp.cos, default=jnp.tanh)
    check(f, [("B", 3)], x64=x64)
    g = lambda x: lax.platform_dependent(x, tpu=jnp.cos, default=jnp.exp)  # default branch
    check(g, [("B", 3)], x64=x64)


# ------------------------------------------------------------------ unstack --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=IDS)
def test_unstack(dtype, x64):
    check(lambda x: jnp.unstack(x, axis=1), [("B", 3, 2)], x64=x64)
    check(lambda x: jnp.unstack(x), [(1, 4)], x64=x64)
    check(lambda x: jnp.unstack(x, axis=-1)[1], [("B", 2)], [np.int32])


def test_grad_through_unstack():
    check(jax.grad(lambda x: sum(jnp.sum(r ** (i + 1)) for i, r in enumerate(jnp.unstack(x)))),
          [(3, "B")])


# -------------------------------------------------------------------- mulhi --

@pytest.mark.parametrize("dtype,x64", [(np.uint32, False), (np.int32, False), (np.uint8, False),
                                       (np.int16, False), (np.uint64, True), (np.int64, True)],
                         ids=["u32", "i32", "u8", "i16", "u64", "i64"])
def test_mulhi(dtype, x64):
    def gen(s, d, rng):
        info = np.iinfo(d)
        return rng.integers(info.min, info.max, size=s, dtype=d, endpoint=True)
    check(lambda x, y: lax.mulhi(x, y), [("B", 16), ("B", 16)], [dtype, dtype], x64=x64,
          make_inputs=gen)
