// lax_linalg: cholesky, triangular_solve, lu, lu_pivots_to_permutation,
// symmetric_product and custom_linear_solve -- what jnp.linalg.cholesky / solve / inv / det /
// slogdet and jax.scipy.linalg.{solve_triangular, lu, lu_factor, lu_solve,
// cho_solve} reduce to. The factorizations live in cholesky.cpp,
// triangular_solve.cpp and lu.cpp; common.hpp has their shared pieces.
//
// ONNX has no Cholesky, LU or triangular-solve operator (Det exists, but JAX
// never emits a det primitive: jnp.linalg.det arrives as `lu`). The matrix
// dims are the two trailing ones; every dim may be symbolic. For a static
// size from 1 to kMaxUnrolled (64) each factorization is unrolled into Slice /
// Mul / ReduceSum / MatMul / Div / Concat steps on [..., n, n] (O(n) nodes, no
// Loop overhead at run time). Otherwise (larger, empty, or symbolic) the same
// steps run as an ONNX Loop, one column (row, pivot) per iteration, with
// Gather / Where masks for the dynamic index; for a symbolic size the trip
// count, iotas and masks come from the input's Shape at run time, so one model
// serves every size, 0 included (the Loop then runs no iteration).
//
// Semantics kept from JAX's CPU (LAPACK) kernels:
// - cholesky reads the lower triangle only and returns the input's strict
//   upper triangle unchanged (jnp.linalg.cholesky zeroes it afterwards). If a
//   pivot d_j <= 0 the factorization fails and the WHOLE matrix of that batch
//   element is NaN, as JAX does on potrf's info != 0 (a NaN pivot is not a
//   failure there: NaN propagates through the remaining columns, as here).
// - triangular_solve reads only the `lower` (or upper) triangle of `a`, and
//   not its diagonal when unit_diagonal; conjugate_a is a no-op for reals.
// - lu is getrf's partial pivoting: the pivot is the FIRST row of maximal
//   |a| (ONNX ArgMax with select_last_index=0), rows are swapped exactly (a
//   one-hot Where + ReduceSum that adds only zeros, no MatMul by a permutation
//   matrix, which would smear NaN/Inf), and a zero pivot skips the scaling of
//   the column (getf2 leaves it as is) instead of dividing by zero. Outputs
//   are lu (L strictly below the diagonal, U on and above), pivots int32
//   [..., min(m, n)] and permutation int32 [..., m]; m != n is supported.
// - custom_linear_solve's forward value is its `solve` jaxpr applied to b;
//   it is inlined.
// - symmetric_product is alpha a a^T + beta c as one MatMul (the whole
//   matrix, as JAX's CPU lowering gives it).
// dtypes: float32/float64; cholesky, triangular_solve and lu also take
// complex64/complex128, carried as float[..., 2] (plugin_sdk complex.hpp) and
// split into real and imaginary parts for the same steps in complex arithmetic
// (arith.hpp): cholesky of a Hermitian A = L L^H (potrf reads the real part of
// the diagonal and writes a real one), triangular_solve with conjugate_a
// (ADJOINT when transposed), lu pivoting on |re| + |im| (LAPACK's izamax).
// triangular_solve of float16/bfloat16 is solved in float32 and rounded once.
// symmetric_product stays real. eigh, svd, qr, geqrf, householder_product, ormqr,
// hessenberg, tridiagonal, tridiagonal_solve and cholesky_update are Loops in
// plugins/lax_linalg_iter; eig and schur are plugins/lax_eig.
#include "common.hpp"

#include <string>
#include <vector>

namespace lax_linalg {

namespace {

// ------------------------------------------------------- symmetric_product --

// alpha a a^T + beta c, the whole matrix (JAX's CPU lowering computes all of
// it; only its GPU syrk kernel leaves the upper triangle unspecified).
void lower_symmetric_product(Lowering& L) {
  T a{L.input(0), L.in_aval(0)};
  T c{L.input(1), L.in_aval(1)};
  require_float(L, a.a);
  require_float(L, c.a);
  int64_t r = rank_of(a);
  Aval out = L.out_aval(0);
  int32_t dt = out.dtype;
  Value aat = L.op("MatMul", {a.v, transpose(L, a.v, a.a, swap_last_two(r))}, out);
  Value lhs = L.op("Mul", {scalar(L, dt, L.param("alpha").as_float()), aat}, out);
  Value rhs = L.op("Mul", {scalar(L, dt, L.param("beta").as_float()), c.v}, out);
  L.bind(0, L.op("Add", {lhs, rhs}, out));
}

// ------------------------------------------------------ custom_linear_solve --

// The forward value of custom_linear_solve(matvec, b, solve, ...) is
// solve(matvec, b): its `solve` jaxpr, inlined on its consts and b.
void lower_custom_linear_solve(Lowering& L) {
  Param lens = L.param("const_lengths");
  int64_t n_matvec = lens.field("matvec").as_int();
  int64_t n_vecmat = lens.field("vecmat").as_int();
  int64_t n_solve = lens.field("solve").as_int();
  int64_t n_tsolve = lens.field("transpose_solve").as_int();
  Param solve = L.param("jaxprs").field("solve");
  if (!solve.exists() || solve.is_none())
    L.fail("custom_linear_solve: param 'jaxprs.solve' is None; nothing to lower");
  std::vector<Value> ins = L.inputs();
  size_t first_b = static_cast<size_t>(n_matvec + n_vecmat + n_solve + n_tsolve);
  if (ins.size() < first_b)
    L.fail("custom_linear_solve: " + std::to_string(ins.size()) + " operands but const_lengths sum to " +
           std::to_string(first_b));
  size_t s0 = static_cast<size_t>(n_matvec + n_vecmat);
  std::vector<Value> args(ins.begin() + s0, ins.begin() + s0 + n_solve);
  args.insert(args.end(), ins.begin() + first_b, ins.end());
  std::vector<Value> outs = L.inline_jaxpr(solve.as_jaxpr(), args);
  if (outs.size() != L.num_outputs())
    L.fail("custom_linear_solve: the solve jaxpr gives " + std::to_string(outs.size()) + " outputs, expected " +
           std::to_string(L.num_outputs()));
  for (size_t i = 0; i < outs.size(); ++i) L.bind(i, outs[i]);
}

}  // namespace

}  // namespace lax_linalg

using namespace lax_linalg;

JAXONNX_PLUGIN("lax_linalg", "0.1.0") {
  plugin.primitive("cholesky", lower_cholesky)
      .emits({"Slice", "Mul", "ReduceSum", "Sub", "Sqrt", "Div", "Concat", "Where", "LessOrEqual",
              "Cast", "ReduceMax", "Loop", "Gather", "Unsqueeze", "Transpose", "MatMul", "Equal", "GreaterOrEqual", "And", "Expand",
              "Range", "Squeeze", "Less", "Neg", "Add"})
      .emits_shape_ops()
      .doc(onnx_doc("Sqrt"))
      .summary("column-by-column (left-looking) Cholesky, unrolled for n <= 64, else a Loop (symbolic n too); NaN matrix when "
               "not positive definite; complex (Hermitian) too");
  plugin.primitive("triangular_solve", lower_triangular_solve)
      .emits({"Slice", "MatMul", "Sub", "Div", "Concat", "Transpose", "Loop", "Gather", "Unsqueeze", "Less", "Greater", "Where", "Equal", "Expand",
              "Range", "Squeeze", "Neg", "Add", "Mul", "Abs", "GreaterOrEqual", "Cast"})
      .emits_shape_ops()
      .doc(onnx_doc("MatMul"))
      .summary("forward/back substitution, one row of the solution per step, unrolled for n <= 64, else a Loop "
               "(symbolic n too); complex too, float16/bfloat16 solved in float32");
  plugin.primitive("lu", lower_lu)
      .emits({"Slice", "Abs", "ArgMax", "Equal", "Where", "ReduceSum", "Add", "Div", "Mul", "Sub", "Concat",
              "Squeeze", "Cast", "Loop", "Gather", "Unsqueeze", "GreaterOrEqual", "Greater", "GatherElements", "Expand", "And", "Range"})
      .emits_shape_ops()
      .doc(onnx_doc("ArgMax"))
      .summary("LU with partial pivoting (getf2), unrolled over the columns up to 64, else a Loop (symbolic m, n too); "
               "complex too, pivoting on |re| + |im|");
  plugin.primitive("lu_pivots_to_permutation", lower_lu_pivots_to_permutation)
      .emits({"Cast", "Slice", "Equal", "Where", "ReduceSum", "Expand", "Loop", "Gather", "Unsqueeze", "GatherElements", "Range", "Squeeze"})
      .emits_shape_ops()
      .doc(onnx_doc("Where"))
      .summary("applies the pivot swaps to iota with one-hot masks (a Loop beyond 64 pivots or for symbolic sizes)");
  plugin.primitive("symmetric_product", lower_symmetric_product)
      .emits({"Transpose", "MatMul", "Mul", "Add"})
      .doc(onnx_doc("MatMul"))
      .summary("alpha a a^T + beta c: one MatMul");
  plugin.primitive("custom_linear_solve", lower_custom_linear_solve)
      .emits({})
      .summary("inlines the solve jaxpr: no node of its own");
}
