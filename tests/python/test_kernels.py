"""The runtime-kernel table (plugin_sdk/include/jaxonnx/kernels.hpp): every emitted node
has an onnxruntime CPU kernel for its dtype, computed exactly in a wider type where it
has none."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import check


def test_vmapped_while_loop_with_a_bool_carry_runs():
    # The batched predicate selects finished lanes with Where; onnxruntime has no
    # Where(bool), so the carry selects as uint8 and casts back.
    def count_until(x):
        def cond(c):
            i, done, _ = c
            return jnp.logical_and(i < 10, jnp.logical_not(done))

        def body(c):
            i, done, acc = c
            acc = acc + x
            return i + 1, acc > 3.0, acc

        return jax.lax.while_loop(cond, body, (0, False, jnp.zeros_like(x)))

    def batched(xs):
        i, done, acc = jax.vmap(count_until)(xs)
        return i, done, acc

    model = check(batched, [("B",)], make_inputs=lambda s, d, rng: rng.uniform(0.1, 2.0, s).astype(d))
    where = [n for g in _graphs(model.graph) for n in g.node if n.op_type == "Where"]
    assert where  # the select is there, in a type onnxruntime runs


def _graphs(g):
    yield g
    for n in g.node:
        for a in n.attribute:
            if a.g.node:
                yield from _graphs(a.g)


@pytest.mark.parametrize("dtype", [np.int16, np.uint16, np.uint64, np.bool_])
def test_select_of_types_without_a_where_kernel(dtype):
    check(lambda p, a, b: jnp.where(p, a, b), [(5,), (5,), (5,)],
          dtypes=[np.bool_, dtype, dtype], x64=dtype == np.uint64)


@pytest.mark.parametrize("dtype", [np.int16, np.uint16])
def test_max_min_of_16_bit_integers(dtype):
    check(lambda a, b: (jnp.maximum(a, b), jnp.minimum(a, b)), [(5,), (5,)], dtypes=[dtype, dtype])
