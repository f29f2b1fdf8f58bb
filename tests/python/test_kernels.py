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


# --- widening: the host computes a node onnxruntime has no kernel for (or ONNX does
# not allow) in the narrowest exact wider type (kernels.hpp, node_builder.cpp).

BF16 = jnp.bfloat16


def in_bfloat16(fn):
    """`fn` on bfloat16 values, fed and answered in float32: onnxruntime's Python API
    takes and gives no bfloat16 arrays, so the model's boundary casts."""
    def wrapped(*args):
        out = fn(*[a.astype(BF16) for a in args])
        return jax.tree_util.tree_map(lambda o: o.astype(jnp.float32), out)
    return wrapped


# JAX keeps excess precision too (XLA's CPU float normalization): agreement to bfloat16
# rounding of the results' magnitude.
BF16_TOL = dict(rtol=1e-2, atol=1e-2)


def _uniform(shape, dtype, rng):
    return rng.uniform(-2.0, 2.0, shape).astype(dtype)


def test_bfloat16_matmul_runs_through_float32():
    # onnxruntime's CPU provider has no bfloat16 MatMul: the model would not load.
    model = check(in_bfloat16(lambda x, w: x @ w), [("B", 16), (16, 8)], make_inputs=_uniform, **BF16_TOL)
    matmul = next(n for n in model.graph.node if n.op_type == "MatMul")
    producers = {o: n for n in model.graph.node for o in n.output}
    assert all(producers[i].op_type == "Cast" for i in matmul.input)


def test_bfloat16_chain_rounds_once_between_widened_ops():
    # Add, Mul and MatMul all lack bfloat16 kernels: each input is cast up once and
    # the result back once, not a round trip between each pair of ops.
    def f(x, w, b):
        return jnp.tanh((x + b) * x) @ w

    model = check(in_bfloat16(f), [("B", 16), (16, 8), (16,)], make_inputs=_uniform, **BF16_TOL)
    ops = [n.op_type for n in model.graph.node]
    assert [op for op in ops if op != "Cast"] == ["Unsqueeze", "Add", "Mul", "Tanh", "MatMul"]
    # The model's 3 inputs to bfloat16 and its output back; x, b and w up to float32
    # once each; the product down to bfloat16 once.
    assert ops.count("Cast") == 8, ops


@pytest.mark.parametrize("fn", [
    lambda x: jnp.sum(x, axis=1),
    lambda x: jnp.max(x, axis=0),
    lambda x: x + jax.lax.broadcasted_iota(BF16, x.shape, 1),
    lambda x: jax.nn.softmax(x, axis=-1),
    lambda x: jnp.cumsum(x, axis=1),
], ids=["reduce_sum", "reduce_max", "iota", "softmax", "cumsum"])
def test_bfloat16_ops_without_kernels(fn):
    check(in_bfloat16(fn), [("B", 6)], make_inputs=_uniform, **BF16_TOL)


@pytest.mark.parametrize("dtype", [np.int16, np.uint16, np.uint32, np.int8])
def test_integer_reductions_in_types_onnx_or_onnxruntime_lacks(dtype):
    # ReduceMax/ReduceMin: int16/uint16 are not valid ONNX there; uint32 has no kernel.
    def f(x):
        return jnp.max(x, axis=1), jnp.min(x, axis=0), jnp.sum(x, axis=1)

    info = np.iinfo(dtype)
    check(f, [("B", 5)], dtypes=[dtype],
          make_inputs=lambda s, d, rng: rng.integers(info.min, info.max, s, dtype=d, endpoint=True))


def test_float16_is_left_to_onnxruntime():
    # onnxruntime runs a float16 node without a kernel in float32 itself
    # (InsertCastTransformer): no Cast in the model.
    model = check(lambda x, w: x @ w, [("B", 16), (16, 8)], dtypes=[np.float16, np.float16],
                  make_inputs=_uniform)
    assert "Cast" not in [n.op_type for n in model.graph.node]


def test_kernel_table_is_current():
    # The table is generated from the pinned onnxruntime and onnx (scripts/requirements.txt).
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "plugin_sdk" / "kernels_table.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16])
def test_8_and_16_bit_arithmetic_before_opset_14_wraps_as_jax(dtype):
    # Add/Sub/Mul/Div-13 have no 8- or 16-bit integer form: computed wider (the
    # opset's form in kernels.hpp), the Cast back wraps as XLA does.
    info = np.iinfo(dtype)
    check(lambda a, b: (a + b, a - b, a * b, a // jnp.where(b == 0, 1, b).astype(dtype)),
          [("B", 5), ("B", 5)], dtypes=[dtype, dtype], opset=13,
          make_inputs=lambda s, d, rng: rng.integers(info.min, info.max, s, dtype=d, endpoint=True))
