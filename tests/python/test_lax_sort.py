"""lax_sort plugin: sort / top_k / approx_top_k as ONNX TopK (+ GatherElements)."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from helpers import check, op_types, random_input

FLOATS = [(np.float32, False), (np.float64, True)]
FLOAT_IDS = ["f32", "f64"]


def _registered():
    from jaxonnx import _plugins

    return {q["name"] for p in _plugins.registry().plugins for q in p["primitives"]}


def needs(*prims):
    """Skips a test whose JAX program also needs primitives of another family."""
    missing = sorted(set(prims) - _registered())
    return pytest.mark.skipif(bool(missing), reason=f"not claimed by any plugin: {missing}")


def with_index(shape, dtype, rng, special=None):
    """Input maker: int32 inputs are the position along the last axis (an explicit
    iota, so the sorted copy is the permutation); float inputs come from `special`."""
    if np.dtype(dtype) == np.int32:
        return np.broadcast_to(np.arange(shape[-1], dtype=np.int32), shape).copy()
    return special(shape, dtype, rng) if special else random_input(shape, dtype, rng)


def specials(shape, dtype, rng):
    """NaNs (several per row), infinities, -0.0 and 0.0, and many ties."""
    pool = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 2.5, np.nan, -0.0],
                    dtype=dtype)
    return rng.choice(pool, size=shape)


def ties(shape, dtype, rng):
    return rng.integers(0, 3, size=shape).astype(dtype)


def argsort_via_sort(axis=-1, num_keys=1, is_stable=True):
    """lax.sort of (keys..., index): the sorted index is the permutation JAX chose."""
    return lambda *ops: lax.sort(ops, dimension=axis, num_keys=num_keys, is_stable=is_stable)


# -------------------------------------------------------------------- sort --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape,axis", [((3, 5), 0), (("B", 5), 1), (("B", 4), 0),
                                        (("B",), 0), ((2, "B", 3), 1)], ids=str)
def test_sort(shape, axis, dtype, x64):
    model = check(lambda x: jnp.sort(x, axis=axis), [shape], x64=x64)
    assert "TopK" in op_types(model) and "Loop" not in op_types(model)


@pytest.mark.parametrize("opset", [18, 23])
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_sort_nan_inf_signed_zero(dtype, x64, opset):
    # NaNs last and equal to each other, -0.0 == 0.0: checked through the permutation.
    check(argsort_via_sort(), [("B", 40), ("B", 40)], [dtype, np.int32], x64=x64, opset=opset,
          make_inputs=lambda s, d, r: with_index(s, d, r, specials))


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", [(3, 64), ("B", 64)], ids=str)
def test_sort_is_stable(shape, dtype, x64):
    check(argsort_via_sort(), [shape, shape], [dtype, np.int32], x64=x64,
          make_inputs=lambda s, d, r: with_index(s, d, r, ties))


def test_sort_unstable_without_ties():
    check(argsort_via_sort(is_stable=False), [("B", 9), ("B", 9)], [np.float32, np.int32],
          make_inputs=with_index)


@needs("iota")
def test_jnp_argsort():
    check(lambda x: jnp.argsort(x, axis=-1), [("B", 50)], make_inputs=specials)


@needs("rev", "iota")
def test_jnp_sort_descending():
    check(lambda x: (jnp.sort(x, axis=-1, descending=True), jnp.argsort(x, descending=True)),
          [("B", 30)], make_inputs=specials)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", [(4, 30), ("B", 30)], ids=str)
def test_sort_two_keys(shape, dtype, x64):
    # key 1 has many ties, key 2 (with NaNs and signed zeros) breaks them, and
    # the index is a payload that is permuted along.
    makers = [ties, specials, with_index]  # one per input, in order
    calls = []

    def make(s, d, rng):
        calls.append(None)
        return makers[(len(calls) - 1) % 3](s, d, rng)

    check(argsort_via_sort(num_keys=2), [shape, shape, shape], [dtype, dtype, np.int32],
          x64=x64, make_inputs=make)


@pytest.mark.parametrize("x64", [False, True], ids=["i32", "i64"])
def test_sort_int_keys_multi_operand(x64):
    kdt = np.int64 if x64 else np.int32
    model = check(lambda k, v: lax.sort((k, v), dimension=0, num_keys=1),
                  [("B", 3), ("B", 3)], [kdt, np.float64 if x64 else np.float32], x64=x64,
                  make_inputs=lambda s, d, r: ties(s, d, r) if np.dtype(d).kind == "i"
                  else random_input(s, d, r))
    assert op_types(model).count("TopK") == 1


@pytest.mark.parametrize("dtype,x64", [(np.int8, False), (np.uint8, False), (np.int16, False),
                                       (np.uint16, False), (np.uint32, False), (np.bool_, False),
                                       (np.int64, True), (np.uint64, True)], ids=str)
def test_sort_int_dtypes(dtype, x64):
    def gen(s, d, rng):
        if np.dtype(d) == np.bool_:
            return rng.integers(0, 2, size=s).astype(d)
        info = np.iinfo(d)  # extremes included: uint64 above 2**63 must sort last
        return rng.choice(np.array([info.min, info.max, info.max // 2 + 1, info.max // 2,
                                    0, 1, 7], dtype=d), size=s)

    check(lambda x: jnp.sort(x, axis=-1), [("B", 12)], [dtype], x64=x64, make_inputs=gen)


def test_sort_int32_structure():
    model = check(lambda x: jnp.sort(x, axis=-1), [(3, 6)], [np.int32])
    assert op_types(model) == ["TopK"]


def test_sort_f32_structure():
    model = check(lambda x: jnp.sort(x, axis=-1), [(3, 6)])
    ops = op_types(model)
    assert ops.count("TopK") == 1 and "Loop" not in ops


# ------------------------------------------------------------------- top_k --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape,k", [((4, 6), 1), (("B", 6), 3), (("B", 6), 6), ((3, "B"), 1)],
                         ids=str)
def test_top_k(shape, k, dtype, x64):
    check(lambda x: lax.top_k(x, k), [shape], x64=x64)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_top_k_axis0_symbolic(dtype, x64):
    check(lambda x: lax.top_k(x, 2, axis=0), [(5, "B")], x64=x64)


@pytest.mark.parametrize("k,opset", [(1, 23), (5, 18), (40, 23)], ids=str)
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_top_k_nan_inf_signed_zero(dtype, x64, k, opset):
    # JAX: NaN above +inf, 0.0 above -0.0, ties by lower index (the indices show it).
    check(lambda x: lax.top_k(x, k), [("B", 40)], x64=x64, make_inputs=specials, opset=opset)


def test_top_k_ties_pick_lower_index():
    check(lambda x: lax.top_k(x, 10), [("B", 50)], make_inputs=ties)


@pytest.mark.parametrize("dtype,x64", [(np.int32, False), (np.uint32, False), (np.bool_, False),
                                       (np.int64, True)], ids=str)
def test_top_k_int(dtype, x64):
    check(lambda x: lax.top_k(x, 3), [("B", 8)], [dtype], x64=x64)


def test_f16_sort_and_top_k():
    check(lambda x: (jnp.sort(x, axis=-1), lax.top_k(x, 4)), [("B", 12)], [np.float16],
          make_inputs=specials)


def test_top_k_int32_structure():
    model = check(lambda x: lax.top_k(x, 3), [(2, 8)], [np.int32])
    assert op_types(model) == ["TopK", "Cast"]


# ------------------------------------------------------------ approx_top_k --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("fn,shape,dim,k", [
    ("approx_max_k", (4, 20), -1, 5), ("approx_min_k", ("B", 20), 1, 20),
    ("approx_max_k", ("B", 6), 0, 1), ("approx_min_k", (3, "B"), 0, 2)], ids=str)
def test_approx_top_k(fn, shape, dim, k, dtype, x64):
    # Exact on CPU; random normal inputs have no ties (JAX's tie order is unspecified).
    model = check(lambda x: getattr(lax, fn)(x, k, reduction_dimension=dim, recall_target=0.9),
                  [shape], x64=x64)
    assert "TopK" in op_types(model)


@pytest.mark.parametrize("fn", ["approx_max_k", "approx_min_k"])
def test_approx_top_k_not_aggregated(fn):
    # aggregate_to_topk=False: JAX returns its (longer) candidate list, sorted.
    check(lambda x: getattr(lax, fn)(x, 3, aggregate_to_topk=False), [("B", 12)], opset=18)


@pytest.mark.parametrize("fn", ["approx_max_k", "approx_min_k"])
def test_approx_top_k_inf_signed_zero(fn):
    # -0.0 == 0.0 here (plain comparator), unlike lax.top_k; ties by lower index.
    def gen(s, d, rng):
        return rng.permutation(np.array([np.inf, -np.inf, 0.0, -0.0, 1.0, -2.0, 3.0, 0.5], d))

    check(lambda x: getattr(lax, fn)(x, 8), [(8,)], make_inputs=gen)
