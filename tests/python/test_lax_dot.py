"""lax_dot plugin: every dot_general as one MatMul (never Einsum), or one Mul when
nothing is contracted, with Transpose/Reshape only where needed."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from helpers import all_op_types, check, op_types, random_input

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
    # Swapped: B3 @ v needs no Transpose.
    "v@B3_transposed": ((8,), ("B", 16, 8), (((0,), (2,)), ((), ())), ["MatMul"]),
    # Swapped: x @ W, then one Transpose to (N, B, T).
    "W.x3d": ((8, 16), ("B", 5, 8), (((0,), (2,)), ((), ())), ["MatMul", "Transpose"]),
    "bmm": (("B", 5, 8), ("B", 8, 6), (((2,), (1,)), ((0,), (0,))), ["MatMul"]),
    "bmm_rhsT": (("B", 5, 8), ("B", 6, 8), (((2,), (2,)), ((0,), (0,))), ["Transpose", "MatMul"]),
    "bmm_batch_last": ((5, 8, "B"), ("B", 8, 6), (((1,), (1,)), ((2,), (0,))),
                       ["Transpose", "MatMul"]),
    "bmm_two_batch": (("B", 3, 5, 8), ("B", 3, 8, 6), (((3,), (2,)), ((0, 1), (0, 1))), ["MatMul"]),
    "attention_scores": (("B", 4, 5, 8), ("B", 4, 7, 8), (((3,), (3,)), ((0, 1), (0, 1))),
                         ["Transpose", "MatMul"]),
    "two_contractions": (("B", 3, 4), (3, 4, 6), (((1, 2), (0, 1)), ((), ())),
                         ["Reshape", "Reshape", "MatMul"]),
    "two_contractions_swapped": (("B", 3, 4), (4, 3, 6), (((2, 1), (0, 1)), ((), ())),
                                 ["Transpose", "Reshape", "Reshape", "MatMul"]),
    # Nothing contracted: one (broadcasting) Mul.
    "outer": (("B",), (6,), (((), ()), ((), ())), ["Unsqueeze"]),
    "scalar_lhs": ((), ("B", 6), (((), ()), ((), ())), []),
    "free_dims_both": (("B", 5, 8), (8, 3, 6), (((2,), (0,)), ((), ())), ["Reshape", "MatMul", "Reshape"]),
    "batch_no_free": (("B", 8), ("B", 8), (((1,), (1,)), ((0,), (0,))),
                      ["Unsqueeze", "Unsqueeze", "MatMul", "Squeeze"]),
    "batch_matvec": (("B", 5, 8), ("B", 8), (((2,), (1,)), ((0,), (0,))), ["Unsqueeze", "MatMul", "Squeeze"]),
    "batch_outer": (("B", 5), ("B", 6), (((), ()), ((0,), (0,))), ["Unsqueeze", "Unsqueeze"]),
    "all_batch": (("B", 3, 4), (3, "B", 4), (((), ()), ((0, 1, 2), (1, 0, 2))), ["Transpose"]),
    "batch_two_free": (("B", 2, 5, 8), ("B", 8, 6), (((3,), (1,)), ((0,), (0,))),
                       ["Reshape", "MatMul", "Reshape"]),
    # Two symbolic merged sizes: 5*B takes Reshape's -1, 3*T its runtime value.
    "sym_free_and_contract": ((2, "B", 5, 3, "T"), (2, 3, "T", 4), (((3, 4), (1, 2)), ((0,), (0,))),
                              ["Reshape", "Reshape", "MatMul", "Reshape"]),
    # A static 0 dim: Reshape with allowzero=1 and exact sizes.
    "zero_size": (("B", 0, 8), (8, 3, 6), (((2,), (0,)), ((), ())), ["Reshape", "MatMul", "Reshape"]),
    # MultiHeadAttention: q (B,T,H,D) . k (B,S,H,D) -> (B,H,T,S); p (B,H,T,S) . v (B,S,H,D) -> (B,H,T,D).
    "attn_BTHD_BSHD": (("B", 5, 2, 4), ("B", 7, 2, 4), (((3,), (3,)), ((0, 2), (0, 2))),
                       ["Transpose", "Transpose", "MatMul"]),
    "attn_BHTS_BSHD": (("B", 2, 5, 7), ("B", 7, 2, 4), (((3,), (1,)), ((0, 1), (0, 2))),
                       ["Transpose", "MatMul"]),
}


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_dot_general(name, dtype, x64):
    lhs, rhs, dn, expected = CASES[name]
    model = check(dot(dn), [lhs, rhs], [dtype, dtype], x64=x64, rtol=1e-4 if not x64 else None,
                  atol=1e-4 if not x64 else None)
    # Shape/Concat/Mul compute symbolic merged sizes at runtime.
    assert [op for op in op_types(model) if op not in ("Shape", "Concat", "Mul")] == expected


def test_x_at_w_is_a_single_matmul():
    # The Dense layer shape: no Transpose, no Reshape, nothing but MatMul.
    model = check(lambda x, w: x @ w, [("B", 8), (8, 16)])
    assert op_types(model) == ["MatMul"]


# ---------------------------------------------------------------- attention --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("batch", [3, "B"], ids=["static", "symbolic"])
@pytest.mark.parametrize("name", ["attn_BTHD_BSHD", "attn_BHTS_BSHD"])
def test_attention_is_one_matmul(name, batch, dtype, x64):
    # onnxruntime's Einsum is far slower than MatMul: these two patterns were
    # 24 Einsum nodes and 25.5 of 44 ms in a ViT profile.
    lhs, rhs, dn, expected = CASES[name]
    lhs, rhs = (batch,) + lhs[1:], (batch,) + rhs[1:]
    model = check(dot(dn), [lhs, rhs], [dtype, dtype], x64=x64, rtol=1e-4 if not x64 else None,
                  atol=1e-4 if not x64 else None)
    ops = op_types(model)
    assert "Einsum" not in ops and ops.count("MatMul") == 1 and ops == expected



def test_symbolic_sizes_that_are_zero_at_run_time():
    # jax.nn.dot_product_attention's decomposition over a symbolic length T
    # reshapes (2, 2, T, T) to (2, 2, T, 1, T): copying T (code 0) and
    # inferring the other (-1) fails in onnxruntime when T is 0 (nothing to
    # infer from), so such shapes take their runtime values.
    fn = lambda q, k: jax.lax.dot_general(  # noqa: E731
        q.reshape(2, q.shape[1], 2, 1, 4), k, (([4], [3]), ([0, 2], [0, 2])))
    check(fn, [(2, "T", 2, 4), (2, "T", 2, 4)], batches=(0, 1, 3))


EINSUMS = {
    "bij,bjk->bik": [("B", 3, 4), ("B", 4, 5)],
    "bhqd,bhkd->bhqk": [("B", 2, 5, 4), ("B", 2, 7, 4)],
    "ij,j->i": [("B", 4), (4,)],
    "i,i->": [("B",), ("B",)],
    "bi,bi->b": [("B", 4), ("B", 4)],
    "bthd,bshd->bhts": [("B", 5, 2, 4), ("B", 7, 2, 4)],
    "bij,jk->bki": [("B", 3, 4), (4, 5)],
    "btd,dhk->bthk": [("B", 5, 8), (8, 2, 4)],
    "bthk,hkd->btd": [("B", 5, 2, 4), (2, 4, 8)],
    "btd,bsd->bts": [(2, 5, 8), (2, 7, 8)],
    "bhts,bshd->bthd": [("B", 2, 5, 7), ("B", 7, 2, 4)],
}


@pytest.mark.parametrize("eq", sorted(EINSUMS))
def test_einsum_from_jnp_is_matmul(eq):
    model = check(lambda a, b: jnp.einsum(eq, a, b), EINSUMS[eq], rtol=1e-4, atol=1e-4)
    ops = op_types(model)
    assert "Einsum" not in ops and ops.count("MatMul") == 1


@pytest.mark.parametrize("eq,expected", [
    ("bthd,bshd->bhts", ["Transpose", "Transpose", "MatMul"]),
    # JAX emits dot_general(v, p) -> (b, h, d, t) then a Transpose: MatMul(p, v')
    # and Transpose the result, which the optimizer merges with JAX's.
    ("bhts,bshd->bthd", ["Transpose", "MatMul", "Transpose"]),
    ("bij,jk->bki", ["MatMul", "Transpose"]),
])
def test_einsum_structure(eq, expected):
    model = check(lambda a, b: jnp.einsum(eq, a, b), EINSUMS[eq], rtol=1e-4, atol=1e-4)
    assert op_types(model) == expected


def test_multi_head_attention_has_no_einsum():
    nnx = pytest.importorskip("flax.nnx")
    mha = nnx.MultiHeadAttention(num_heads=2, in_features=8, qkv_features=8, decode=False,
                                 rngs=nnx.Rngs(0))
    model = check(lambda x: mha(x), [("B", 5, 8)], rtol=1e-4, atol=1e-4)
    ops = all_op_types(model)
    # q, k, v and output projections (Gemms on rows), scores and weighted sum
    # (inside one Attention where the target has it, docs/crisp_ops.md).
    assert "Einsum" not in ops and ops.count("MatMul") + ops.count("Gemm") == 6 - 2 * ops.count("Attention")


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
