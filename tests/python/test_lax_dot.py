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


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.bool_],
                         ids=["i8", "u8", "i16", "bool"])
def test_narrow_types_without_preferred_wrap_like_xla(dtype):
    # MatMul has no 8/16-bit ints or bool: computed in 32 bits and cast back, which equals
    # XLA's wrapping narrow arithmetic (mod 2^bits), and bool's or-of-ands (nonzero -> true).
    def gen(s, d, rng):
        if d == np.bool_:
            return rng.integers(0, 2, size=s).astype(d)
        info = np.iinfo(d)
        return rng.integers(max(info.min, -100), min(info.max, 100), size=s).astype(d)
    model = check(dot((((1,), (0,)), ((), ()))), [("B", 8), (8, 4)], [dtype, dtype],
                  make_inputs=gen)
    assert op_types(model) == ["Cast", "Cast", "MatMul", "Cast"]


def test_preferred_f32_from_f16():
    def gen(s, d, rng):
        return random_input(s, np.float32, rng).astype(d)
    model = check(dot((((1,), (0,)), ((), ())), np.float32), [("B", 8), (8, 4)],
                  [np.float16, np.float16], make_inputs=gen, rtol=1e-3, atol=1e-3)
    assert op_types(model) == ["Cast", "Cast", "MatMul"]


def test_preferred_f32_from_bf16():
    # onnxruntime's Python API takes no bfloat16 arrays: feed f32, round to bf16 inside.
    def fn(a, b):
        a, b = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
        return dot((((1,), (0,)), ((), ())), np.float32)(a, b)
    model = check(fn, [("B", 8), (8, 4)], rtol=1e-3, atol=1e-3)
    assert op_types(model).count("MatMul") == 1 and "Einsum" not in op_types(model)


def test_preferred_f64_from_f32():
    model = check(dot((((1,), (0,)), ((), ())), np.float64), [("B", 8), (8, 4)],
                  [np.float32, np.float32], x64=True, rtol=1e-6, atol=1e-6)
    assert op_types(model) == ["Cast", "Cast", "MatMul"]


def test_int32_operands_preferred_f32():
    check(dot((((1,), (0,)), ((), ())), np.float32), [("B", 8), (8, 4)], [np.int32, np.int32])


@pytest.mark.parametrize("opset", [18, 19, 20, 21, 22, 23])
def test_dot_every_opset(opset):
    def fn(a, b):
        return (dot(CASES["bmm_rhsT"][2])(a, b),
                dot(CASES["free_dims_both"][2])(a, b.reshape(b.shape[0] * 6, 8).T.reshape(8, -1, 2)))
    check(fn, [("B", 5, 8), ("B", 6, 8)], opset=opset, rtol=1e-4, atol=1e-4)
