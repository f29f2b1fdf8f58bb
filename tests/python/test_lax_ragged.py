"""lax_ragged plugin: ragged_dot_general (jax.lax.ragged_dot, mixture-of-experts
grouped matmuls) in its three modes, f32 / f64, static and symbolic dims."""

import jax
import numpy as np
import pytest
from jax import lax

import jaxonnx
from helpers import check, op_types, symbolic_specs

DN = lax.RaggedDotDimensionNumbers


def sizes_and_normals(total):
    """group sizes summing to at most `total` rows (some groups empty, some rows in none)."""
    def make(shape, dtype, rng):
        if np.issubdtype(dtype, np.integer):
            return rng.integers(0, max(1, total // shape[-1]) + 1, size=shape).astype(dtype)
        return rng.standard_normal(size=shape).astype(dtype)
    return make


@pytest.mark.parametrize("dtype,x64", [(np.float32, False), (np.float64, True)], ids=["f32", "f64"])
@pytest.mark.parametrize("m", [8, "B"], ids=["static", "symbolic"])
def test_ragged_dot(m, dtype, x64):
    # lhs [m, k], rhs [g, k, n], group_sizes [g]: the MoE expert matmul.
    fn = lambda x, w, gs: lax.ragged_dot(x, w, gs)
    model = check(fn, [(m, 4), (3, 4, 5), (3,)], [dtype, dtype, np.int32], x64=x64,
                  make_inputs=sizes_and_normals(1), batches=(1, 9))
    assert "MatMul" in op_types(model) and "Einsum" not in op_types(model)


@pytest.mark.parametrize("dtype,x64", [(np.float32, False), (np.float64, True)], ids=["f32", "f64"])
def test_ragged_contracting(dtype, x64):
    # The ragged dim is contracted: one [m, n] block per group, a leading g dim.
    dn = DN((([1], [0]), ([], [])), lhs_ragged_dimensions=[1], rhs_group_dimensions=[])
    fn = lambda x, w, gs: lax.ragged_dot_general(x, w, gs, dn)
    model = check(fn, [("B", 6), (6, 3), (3,)], [dtype, dtype, np.int64 if x64 else np.int32], x64=x64,
          make_inputs=sizes_and_normals(6))
    assert "Einsum" in op_types(model)


def test_ragged_batched_group_sizes_per_batch_row():
    # Batch dims on both sides, group sizes per batch row [b, g], ragged dim inner.
    dn = DN((([2], [2]), ([0], [1])), lhs_ragged_dimensions=[1], rhs_group_dimensions=[0])
    fn = lambda x, w, gs: lax.ragged_dot_general(x, w, gs, dn)
    check(fn, [(2, 6, 4), (3, 2, 4, 5), (2, 3)], [np.float32, np.float32, np.int32],
          make_inputs=sizes_and_normals(6))


def test_ragged_batch_mode_is_a_plain_dot_opset18():
    dn = DN((([2], [1]), ([0], [0])), lhs_ragged_dimensions=[0], rhs_group_dimensions=[])
    fn = lambda x, w, gs: lax.ragged_dot_general(x, w, gs, dn)
    check(fn, [("B", 3, 4), ("B", 4, 2), (2,)], [np.float32, np.float32, np.int32],
          make_inputs=sizes_and_normals(1), opset=18)


def test_ragged_preferred_element_type():
    # bfloat16 operands accumulated in float32, as preferred_element_type asks.
    import jax.numpy as jnp
    fn = lambda x, w, gs: lax.ragged_dot(x.astype(jnp.bfloat16), w.astype(jnp.bfloat16), gs,
                                         preferred_element_type=jnp.float32)
    check(fn, [(7, 4), (2, 4, 3), (2,)], [np.float32, np.float32, np.int32],
          make_inputs=sizes_and_normals(7), rtol=1e-2, atol=1e-2)


def test_group_offset_is_refused():
    import jax.numpy as jnp
    fn = lambda x, w, gs: lax.ragged_dot(x, w, gs, group_offset=jnp.array([1], jnp.int32))
    specs = symbolic_specs([(4, 2), (2, 2, 3), (2,)], [np.float32, np.float32, np.int32])
    with pytest.raises(jaxonnx.ConversionError, match="ragged_dot_general.*group_offset"):
        jaxonnx.to_onnx(fn, specs)
