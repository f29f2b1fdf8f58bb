"""lax_dot plugin: dot_general as MatMul (with at most one Transpose per operand) or Einsum."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from helpers import check, op_types, random_input

FLOATS = [(np.float32, False), (np.float64, True)]


def dot(dn, preferred=None):
    return lambda a, b: lax.dot_general(a, b, dn, preferred_element_type=preferred)


# (lhs shape, rhs shape, ((lc, rc), (lb, rb)), expected op types)
CASES = {
    "x@W": ((5, 8), (8, 16), (((1,), (0,)), ((), ())), ["MatMul"]),
    "x@W_batch": (("B", 8), (8, 16), (((1,), (0,)), ((), ())), ["MatMul"]),
    "x3d@W": (("B", 5, 8), (8, 16), (((2,), (0,)), ((), ())), ["MatMul"]),
    "x@WT": (("B", 8), (16, 8), (((1,), (1,)), ((), ())), ["Transpose", "MatMul"]),
    "xT@W": ((8, "B"), (8, 16), (((0,), (0,)), ((), ())), ["Transpose", "MatMul"]),
    "x@v": (("B", 8), (8,), (((1,), (0,)), ((), ())), ["MatMul"]),
    "v@W": ((8,), (8, 16), (((0,), (0,)), ((), ())), ["MatMul"]),
    "v@v": ((8,), (8,), (((0,), (0,)), ((), ())), ["MatMul"]),
    "v@B3": ((8,), ("B", 8, 16), (((0,), (1,)), ((), ())), ["MatMul"]),
    "v@B3_transposed": ((8,), ("B", 16, 8), (((0,), (2,)), ((), ())), ["Transpose", "MatMul"]),
    "bmm": (("B", 5, 8), ("B", 8, 6), (((2,), (1,)), ((0,), (0,))), ["MatMul"]),
    "bmm_rhsT": (("B", 5, 8), ("B", 6, 8), (((2,), (2,)), ((0,), (0,))), ["Transpose", "MatMul"]),
    "bmm_batch_last": ((5, 8, "B"), ("B", 8, 6), (((1,), (1,)), ((2,), (0,))),
                       ["Transpose", "MatMul"]),
    "bmm_two_batch": (("B", 3, 5, 8), ("B", 3, 8, 6), (((3,), (2,)), ((0, 1), (0, 1))), ["MatMul"]),
    "attention_scores": (("B", 4, 5, 8), ("B", 4, 7, 8), (((3,), (3,)), ((0, 1), (0, 1))),
                         ["Transpose", "MatMul"]),
    "two_contractions": (("B", 3, 4), (3, 4, 6), (((1, 2), (0, 1)), ((), ())), ["Einsum"]),
    "outer": (("B",), (6,), (((), ()), ((), ())), ["Einsum"]),
    "free_dims_both": (("B", 5, 8), (8, 3, 6), (((2,), (0,)), ((), ())), ["Einsum"]),
    "batch_no_free": (("B", 8), ("B", 8), (((1,), (1,)), ((0,), (0,))), ["Einsum"]),
    "batch_two_free": (("B", 2, 5, 8), ("B", 8, 6), (((3,), (1,)), ((0,), (0,))), ["Einsum"]),
}


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_dot_general(name, dtype, x64):
    lhs, rhs, dn, expected = CASES[name]
    model = check(dot(dn), [lhs, rhs], [dtype, dtype], x64=x64, rtol=1e-4 if not x64 else None,
                  atol=1e-4 if not x64 else None)
    assert op_types(model) == expected


def test_x_at_w_is_a_single_matmul():
    # The Dense layer shape: no Transpose, no Reshape, nothing but MatMul.
    model = check(lambda x, w: x @ w, [("B", 8), (8, 16)])
    assert op_types(model) == ["MatMul"]


def test_einsum_from_jnp():
    check(lambda a, b: jnp.einsum("bij,jk->bki", a, b), [("B", 3, 4), (4, 5)], rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------- dtypes --

@pytest.mark.parametrize("dtype,x64", [(np.int32, False), (np.int64, True)], ids=["i32", "i64"])
@pytest.mark.parametrize("name", ["x@W_batch", "bmm", "two_contractions"])
def test_dot_general_int(name, dtype, x64):
    lhs, rhs, dn, expected = CASES[name]
    model = check(dot(dn), [lhs, rhs], [dtype, dtype], x64=x64)
    assert op_types(model) == expected


@pytest.mark.parametrize("name", ["x@W_batch", "bmm", "two_contractions"])
def test_preferred_int8_to_int32(name):
    lhs, rhs, dn, expected = CASES[name]
    model = check(dot(dn, np.int32), [lhs, rhs], [np.int8, np.int8])
    assert op_types(model).count("Cast") == 2  # the operands, widened; no cast back


def test_int8_without_preferred_wraps_like_xla():
    # MatMul has no int8: computed in int32, cast back to int8 (same result mod 2^8).
    def gen(s, d, rng):
        return rng.integers(-100, 100, size=s).astype(d)
    model = check(dot((((1,), (0,)), ((), ()))), [("B", 8), (8, 4)], [np.int8, np.int8],
                  make_inputs=gen)
    assert op_types(model)[-1] == "Cast"


@pytest.mark.parametrize("src", [np.float16, jnp.bfloat16], ids=["f16", "bf16"])
def test_preferred_f32_from_half(src):
    def gen(s, d, rng):
        return random_input(s, np.float32, rng).astype(d)
    model = check(dot((((1,), (0,)), ((), ())), np.float32), [("B", 8), (8, 4)], [src, src],
                  make_inputs=gen, rtol=1e-3, atol=1e-3)
    assert op_types(model) == ["Cast", "Cast", "MatMul"]


def test_preferred_f64_from_f32():
    model = check(dot((((1,), (0,)), ((), ())), np.float64), [("B", 8), (8, 4)],
                  [np.float32, np.float32], x64=True, rtol=1e-6, atol=1e-6)
    assert op_types(model) == ["Cast", "Cast", "MatMul"]


def test_int32_operands_preferred_f32():
    check(dot((((1,), (0,)), ((), ())), np.float32), [("B", 8), (8, 4)], [np.int32, np.int32])
