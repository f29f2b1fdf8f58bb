// cholesky: left-looking, one column j at a time,
//   c = A[:, j] - L[:, :j] @ L[j, :j]^T,   L[j, j] = sqrt(c[j]),   L[i, j] = c[i] / L[j, j],
// unrolled for a static n up to kMaxUnrolled, else a Loop (any n, symbolic included).
// A complex (Hermitian) A runs the same steps with conj(L[j, :j]) (A = L L^H):
// the pivot d_j is real (potrf reads only Re A[j, j]), so L[j, j] = sqrt(d_j) is
// real and the column is divided by a real number.
#include "arith.hpp"

#include <cmath>
#include <tuple>
#include <utility>

namespace lax_linalg {

namespace {

// The columns as a Loop: column j is A[:, j] - Lc L[j, :]^T with Lc holding
// the finished columns (zeros beyond). Returns Lc and the pivots d [..., 1, n].
std::pair<T, T> cholesky_loop(Lowering& L, const T& a, const Dim& n) {
  int64_t r = rank_of(a);
  Aval dva = a.a.with_shape(batch_then(a.a, {1, n}));
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Value rows = iota(L, n, {n, 1}), cols = iota(L, n, {1, n});
  Subgraph g = L.begin_subgraph("cholesky_body");
  Value j = g.input(isc, "j");
  Value cin = g.input(bsc, "cond_in");
  T lc{g.input(a.a, "l"), a.a};
  T dv{g.input(dva, "d"), dva};
  if (is_complex(a)) lc.im = g.input(a.a, "l_im");
  T acol = take(L, a, j, r - 1);
  T lrow = take(L, lc, j, r - 2);
  T lrow_t = conj(L, transpose_t(L, lrow, swap_last_two(r)));
  T c = sub(L, acol, matmul(L, lc, lrow_t, acol.a), acol.a);
  T d = take(L, T{c.v, c.a}, j, r - 2);  // the real part
  T col = div(L, c, node(L, "Sqrt", {d.v}, d.a), c.a);
  Value is_col = L.op("Equal", {cols, j}, Aval(dtype::boolean, {1, n}));
  Value below = L.op("GreaterOrEqual", {rows, j}, Aval(dtype::boolean, {n, 1}));
  Value put = L.op("And", {is_col, below}, Aval(dtype::boolean, {n, n}));
  T lc2 = where(L, put, col, lc, a.a);
  T dv2 = node(L, "Where", {is_col, d.v, dv.v}, dva);
  std::vector<Value> outs = {cin, lc2.v, dv2.v};
  if (is_complex(a)) outs.push_back(lc2.im);
  GraphRef body = g.end(outs);
  // The initial state, in the main graph (after the body is closed).
  std::vector<Value> init = {count(L, n), scalar(L, dtype::boolean, 1), zeros_like_aval(L, a.a), zeros_like_aval(L, dva)};
  std::vector<Aval> types = {a.a, dva};
  if (is_complex(a)) {
    init.push_back(zeros_like_aval(L, a.a));
    types.push_back(a.a);
  }
  std::vector<Value> res = L.op_n("Loop", init, types, {Attr::graph("body", body)});
  T lres{res[0], a.a};
  if (is_complex(a)) lres.im = res[2];
  return {lres, T{res[1], dva}};
}

}  // namespace

// Rows above j of each column are scratch (never read back): the result takes
// A's strict upper triangle there.
void lower_cholesky(Lowering& L) {
  T a = operand(L, 0);
  require_float(L, a.a, /*complex_ok=*/true);
  int64_t r = rank_of(a);
  const Dim n = a.a.shape[static_cast<size_t>(r - 1)];
  if (a.a.shape[static_cast<size_t>(r - 2)] != n) L.fail("cholesky: operand " + a.a.str() + " is not square");
  int32_t dt = a.a.dtype;
  std::vector<T> diags;
  T acc{kNoValue, {}};  // L[:, :j]
  T dvec{kNoValue, {}};
  if (!unrolled(n)) std::tie(acc, dvec) = cholesky_loop(L, a, n);
  for (int64_t j = 0; unrolled(n) && j < n.value; ++j) {
    T c = slice(L, a, r - 1, j, j + 1);  // [..., n, 1]
    if (j > 0) {
      T row = slice(L, acc, r - 2, j, j + 1);  // L[j, :j], [..., 1, j]
      T prod = mul(L, acc, conj(L, row), acc.a);
      c = sub(L, c, sum_keep(L, prod, r - 1), c.a);
    }
    T d = slice(L, T{c.v, c.a}, r - 2, j, j + 1);  // [..., 1, 1], the real part
    diags.push_back(d);
    T ljj = node(L, "Sqrt", {d.v}, d.a);
    T col = div(L, c, ljj, c.a);
    acc = j == 0 ? col : concat(L, {acc, col}, r - 1);
  }
  // The diagonal is sqrt(d) itself (c[j] / sqrt(c[j]) is not exactly that).
  if (unrolled(n)) dvec = concat(L, diags, r - 1);  // [..., 1, n]
  T sq = node(L, "Sqrt", {dvec.v}, dvec.a);
  Value eye = index_mask(L, n, n, "Equal");
  Value upper = index_mask(L, n, n, "Less");
  T diag = sq;  // real: a complex diagonal has imaginary part 0 (potrf writes a real number)
  if (is_complex(a)) diag.im = scalar(L, dt, 0.0);
  T res = where(L, eye, diag, acc, a.a);
  res = where(L, upper, a, res, a.a);
  // The factorization fails when a pivot d_j <= 0 (JAX's CPU kernel does not
  // count a NaN pivot as a failure: NaN just propagates); JAX then returns
  // NaN for the whole matrix. The flags go through float for ReduceMax
  // (bool reductions need opset 20).
  Aval flags = dvec.a;
  T bad = node(L, "LessOrEqual", {dvec.v, scalar(L, dt, 0.0)}, flags.with_dtype(dtype::boolean));
  T badf = node(L, "Cast", {bad.v}, flags, {Attr::i("to", dt)});
  Aval one = flags.with_shape(batch_then(a.a, {1, 1}));
  T anyf{reduce_over(L, "ReduceMax", badf.v, {r - 1}, true, one), one};
  T anyb = node(L, "Cast", {anyf.v}, one.with_dtype(dtype::boolean), {Attr::i("to", dtype::boolean)});
  res = where(L, anyb.v, scalar_like(res, scalar(L, dt, NAN)), res, a.a);
  L.bind(0, result(L, res, 0));
}

}  // namespace lax_linalg
