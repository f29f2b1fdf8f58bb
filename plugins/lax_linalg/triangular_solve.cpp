// triangular_solve: substitution, one row of X at a time, unrolled for a
// static matrix size up to kMaxUnrolled, else a Loop (any size, symbolic included).
// Complex operands run the same steps in complex arithmetic (arith.hpp);
// float16/bfloat16 ones are solved in float32 and rounded once.
#include "arith.hpp"

#include <utility>

namespace lax_linalg {

namespace {

// The substitution as a Loop: X starts at zero and row i = (b_i - M[i, solved] X)
// / M[i, i], the other triangle of M masked out (it may hold anything, NaN included).
T triangular_solve_loop(Lowering& L, const T& M, const T& b, const Dim& m, bool m_lower, bool unit) {
  int64_t ra = rank_of(M), rb = rank_of(b);
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Value rows = iota(L, m, {m, 1}), cols = iota(L, m, {1, m});
  // Backwards, row m - 1 - step (a symbolic m - 1 is computed once, outside the body).
  Value last = m_lower || m.is_static() ? kNoValue : L.op("Sub", {count(L, m), scalar(L, dtype::i64, 1.0)}, isc);
  Subgraph g = L.begin_subgraph("triangular_solve_body");
  Value step = g.input(isc, "step");
  Value cin = g.input(bsc, "cond_in");
  T x{g.input(b.a, "x"), b.a};
  if (is_complex(b)) x.im = g.input(b.a, "x_im");
  if (!m_lower && m.is_static()) last = scalar(L, dtype::i64, double(m.value - 1));
  Value i = m_lower ? step : L.op("Sub", {last, step}, isc);
  T mrow = take(L, M, i, ra - 2);  // [..., 1, m]
  Value solved = L.op(m_lower ? "Less" : "Greater", {cols, i}, Aval(dtype::boolean, {1, m}));
  T masked = where(L, solved, mrow, zero_like(L, mrow), mrow.a);
  T bi = take(L, b, i, rb - 2);
  T xi = sub(L, bi, matmul(L, masked, x, bi.a), bi.a);
  if (!unit) xi = div(L, xi, take(L, mrow, i, ra - 1), bi.a);
  T x2 = where(L, L.op("Equal", {rows, i}, Aval(dtype::boolean, {m, 1})), xi, x, b.a);
  std::vector<Value> outs = {cin, x2.v};
  if (is_complex(b)) outs.push_back(x2.im);
  GraphRef body = g.end(outs);
  // The initial state, in the main graph (after the body is closed).
  std::vector<Value> init = {count(L, m), scalar(L, dtype::boolean, 1)};
  std::vector<Aval> types(outs.size() - 1, b.a);
  for (size_t k = 0; k < types.size(); ++k) init.push_back(zeros_like_aval(L, b.a));
  std::vector<Value> res = L.op_n("Loop", init, types, {Attr::graph("body", body)});
  T r{res[0], b.a};
  if (is_complex(b)) r.im = res[1];
  return r;
}

}  // namespace

// Left side (op(A) X = B), with M = op(A): lower M solves rows 0..m-1
// forwards, x_i = (b_i - M[i, :i] X[:i]) / M[i, i]; upper M solves backwards.
// The right side (X op(A) = B) is the left side transposed: op(A)^T X^T = B^T.
void lower_triangular_solve(Lowering& L) {
  T a = operand(L, 0);
  T b = operand(L, 1);
  // float16/bfloat16: solved in float32, rounded once at the end.
  int32_t half = a.a.dtype == dtype::f16 || a.a.dtype == dtype::bf16 ? a.a.dtype : 0;
  if (half) {
    a = {cast(L, a.v, a.a, dtype::f32), a.a.with_dtype(dtype::f32)};
    b = {cast(L, b.v, b.a, dtype::f32), b.a.with_dtype(dtype::f32)};
  }
  require_float(L, a.a, /*complex_ok=*/true);  // a complex a is float parts by now
  bool left = L.param("left_side").as_bool();
  bool lower = L.param("lower").as_bool();
  bool trans = L.param("transpose_a").as_bool();
  bool unit = L.param("unit_diagonal").as_bool();
  // conjugate_a conjugates op(A) (ADJOINT when transposed); the identity on real matrices.
  bool conj_a = L.param("conjugate_a").as_bool();
  int64_t ra = rank_of(a), rb = rank_of(b);
  if (rb < 2) L.fail("triangular_solve: b " + b.a.str() + " is not a matrix");
  const Dim m = a.a.shape[static_cast<size_t>(ra - 1)];
  std::vector<int64_t> swap_last = swap_last_two(rb);
  if (!left) {  // (conj(A)^T)^T = conj(A): the conjugation stays as it is
    b = transpose_t(L, b, swap_last);
    trans = !trans;
  }
  T M = trans ? transpose_t(L, a, swap_last_two(ra)) : a;
  if (conj_a) M = conj(L, M);
  bool m_lower = lower != trans;

  Aval out_a = L.out_aval(0);  // batch dims of the result
  Shape bs(out_a.shape.begin(), out_a.shape.end() - 2);
  bs.push_back(Dim(1));
  bs.push_back(b.a.shape[rb - 1]);
  Aval row_a = b.a.with_shape(bs);  // one solved row [..., 1, k]

  T acc{kNoValue, {}};  // the rows solved so far, in matrix order
  if (!unrolled(m)) acc = triangular_solve_loop(L, M, b, m, m_lower, unit);
  for (int64_t step = 0; unrolled(m) && step < m.value; ++step) {
    int64_t i = m_lower ? step : m.value - 1 - step;
    T x = slice(L, b, rb - 2, i, i + 1);
    if (step > 0) {
      T mrow = m_lower ? slice(L, slice(L, M, ra - 2, i, i + 1), ra - 1, 0, i)
                       : slice(L, slice(L, M, ra - 2, i, i + 1), ra - 1, i + 1, m.value);
      T dot = matmul(L, mrow, acc, row_a);
      x = sub(L, x, dot, row_a);
    }
    if (!unit) {
      T diag = slice(L, slice(L, M, ra - 2, i, i + 1), ra - 1, i, i + 1);
      x = div(L, x, diag, row_a);
    }
    if (x.a.shape != row_a.shape) x.a = row_a;
    acc = step == 0 ? x : m_lower ? concat(L, {acc, x}, rb - 2) : concat(L, {x, acc}, rb - 2);
  }
  T out = left ? acc : transpose_t(L, acc, swap_last);
  if (half) {
    L.bind(0, cast(L, out.v, out.a, half));
    return;
  }
  L.bind(0, result(L, out, 0));
}

}  // namespace lax_linalg
