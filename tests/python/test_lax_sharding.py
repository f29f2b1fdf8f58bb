"""lax_sharding: code written for a device mesh converts on a one-device mesh.

Model code passes out_sharding= to matmuls, jnp.zeros and embedding gathers, constrains
activations, and runs blocks under shard_map with collectives. On one device every one
of these keeps its values: reshard / sharding_constraint emit nothing, a shard_map over
size-1 axes is its body, and a collective over such an axis is its operand. A shard_map
that would split work across devices is refused with a ConversionError.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import AbstractMesh, AxisType, PartitionSpec as P

import jaxonnx

from helpers import check, op_types

FLOATS = [(np.float32, False), (np.float64, True)]
_rng = np.random.default_rng(0)
W1 = _rng.standard_normal((8, 16)).astype(np.float32) * 0.3
W2 = _rng.standard_normal((16, 8)).astype(np.float32) * 0.3
EMB = _rng.standard_normal((11, 8)).astype(np.float32)


def mesh(kind):
    return jax.make_mesh((1, 1), ("data", "model"), axis_types=(kind, kind))


def explicit_mlp(ids, x):
    """A transformer-ish block as written for an explicit-sharding mesh."""
    w1, w2, emb = (jnp.asarray(a, x.dtype) for a in (W1, W2, EMB))
    h = emb.at[ids].get(out_sharding=P("data", None, None)) + x          # embedding gather
    h = jnp.matmul(h, w1, out_sharding=P("data", None, "model"))
    h = jax.nn.gelu(h)
    bias = jnp.zeros((h.shape[-1],), h.dtype, out_sharding=P("model"))
    h = jax.sharding.reshard(h + bias, P("data", None, None))
    return jnp.einsum("btf,fd->btd", h, w2, out_sharding=P("data", None, None))


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_explicit_mesh_model_converts(dtype, x64):
    with jax.set_mesh(mesh(AxisType.Explicit)):
        with jax.enable_x64(x64):
            spec = jax.ShapeDtypeStruct((2, 3, 8), dtype)
            ids = jax.ShapeDtypeStruct((2, 3), np.int32)
            assert "reshard" in str(jax.make_jaxpr(explicit_mlp)(ids, spec)), "no longer exercised"
        model = check(explicit_mlp, [("B", 3), ("B", 3, 8)], [np.int32, dtype], x64=x64,
                      make_inputs=lambda s, d, r: (r.integers(0, 11, s).astype(d) if d == np.int32
                                                   else r.standard_normal(s).astype(d)))
    assert "Identity" not in op_types(model)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_auto_mesh_constraints_convert(dtype, x64):
    def fn(x):
        h = lax.with_sharding_constraint(jnp.tanh(x), P("data", None))
        return lax.with_sharding_constraint(h * 2.0, P(None, "model"))
    with jax.set_mesh(mesh(AxisType.Auto)):
        model = check(fn, [("B", 6)], [dtype], x64=x64)
    assert op_types(model) == ["Tanh", "Mul"]


def shard_map_block(x):
    """Data-parallel loss-style statistics under shard_map, over a (1, 1) mesh."""
    def body(y):
        total = lax.psum(jnp.sum(y, axis=0), "data")              # psum_invariant
        mean = lax.pmean(y, ("data", "model"))
        biggest = lax.pmax(jnp.max(y, axis=1), "model")
        gathered = lax.all_gather(y, "model", axis=0, tiled=False)  # adds an axis of size 1
        tiled = lax.all_gather(y, "data", axis=1, tiled=True)
        rank = lax.axis_index("data").astype(y.dtype)
        moved = lax.ppermute(y, "data", perm=[(0, 0)])
        nothing = lax.ppermute(y, "model", perm=[])              # a shift off the end: zeros
        a2a = lax.all_to_all(y, "model", 0, 1, tiled=True)
        scattered = lax.psum_scatter(y, "data", scatter_dimension=1, tiled=True)
        out = mean + moved + nothing + a2a + scattered + rank + total + biggest[:, None]
        return out, gathered, tiled
    m = jax.sharding.get_abstract_mesh()
    return jax.shard_map(body, mesh=m, in_specs=P("data", "model"),
                         out_specs=(P("data", "model"), P(None, "data", "model"),
                                    P("data", "model")))(x)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
def test_shard_map_on_one_device_is_its_body(dtype, x64):
    with jax.set_mesh(mesh(AxisType.Auto)):
        with jax.enable_x64(x64):
            text = str(jax.make_jaxpr(shard_map_block)(jax.ShapeDtypeStruct((3, 4), dtype)))
        for prim in ("shard_map", "psum_invariant", "pmax", "all_gather", "axis_index",
                     "ppermute", "all_to_all", "reduce_scatter", "pvary"):
            assert prim in text, f"{prim} no longer exercised"
        check(shard_map_block, [("B", 4)], [dtype], x64=x64)


def test_shard_map_over_a_multi_device_axis_is_refused():
    two = AbstractMesh((2,), ("d",), axis_types=(AxisType.Auto,))

    def fn(x):
        return jax.shard_map(lambda y: lax.psum(y, "d"), mesh=two, in_specs=P("d"),
                             out_specs=P())(x)
    with pytest.raises(jaxonnx.ConversionError, match=r"shard_map over mesh axis 'd' of size 2"):
        jaxonnx.to_onnx(fn, [(4, 3)])
