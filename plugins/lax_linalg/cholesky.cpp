// cholesky: left-looking, one column j at a time,
//   c = A[:, j] - L[:, :j] @ L[j, :j]^T,   L[j, j] = sqrt(c[j]),   L[i, j] = c[i] / L[j, j],
// unrolled for a static n up to kMaxUnrolled, else a Loop (any n, symbolic included).
#include "common.hpp"

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
  T acol = take(L, a, j, r - 1);
  T lrow = take(L, lc, j, r - 2);
  Value lrow_t = transpose(L, lrow.v, lrow.a, swap_last_two(r));
  T c = node(L, "Sub", {acol.v, L.op("MatMul", {lc.v, lrow_t}, acol.a)}, acol.a);
  T d = take(L, c, j, r - 2);
  T col = node(L, "Div", {c.v, node(L, "Sqrt", {d.v}, d.a).v}, c.a);
  Value is_col = L.op("Equal", {cols, j}, Aval(dtype::boolean, {1, n}));
  Value below = L.op("GreaterOrEqual", {rows, j}, Aval(dtype::boolean, {n, 1}));
  Value put = L.op("And", {is_col, below}, Aval(dtype::boolean, {n, n}));
  T lc2 = node(L, "Where", {put, col.v, lc.v}, a.a);
  T dv2 = node(L, "Where", {is_col, d.v, dv.v}, dva);
  GraphRef body = g.end({cin, lc2.v, dv2.v});
  std::vector<Value> res = L.op_n("Loop", {count(L, n), scalar(L, dtype::boolean, 1),
                                           zeros_like_aval(L, a.a), zeros_like_aval(L, dva)},
                                  {a.a, dva}, {Attr::graph("body", body)});
  return {T{res[0], a.a}, T{res[1], dva}};
}

}  // namespace

// Rows above j of each column are scratch (never read back): the result takes
// A's strict upper triangle there.
void lower_cholesky(Lowering& L) {
  T a{L.input(0), L.in_aval(0)};
  require_float(L, a.a);
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
      T prod = node(L, "Mul", {acc.v, row.v}, acc.a);
      c = node(L, "Sub", {c.v, sum_keep(L, prod, r - 1).v}, c.a);
    }
    T d = slice(L, c, r - 2, j, j + 1);  // [..., 1, 1]
    diags.push_back(d);
    T ljj = node(L, "Sqrt", {d.v}, d.a);
    T col = node(L, "Div", {c.v, ljj.v}, c.a);
    acc = j == 0 ? col : concat(L, {acc, col}, r - 1);
  }
  // The diagonal is sqrt(d) itself (c[j] / sqrt(c[j]) is not exactly that).
  if (unrolled(n)) dvec = concat(L, diags, r - 1);  // [..., 1, n]
  T sq = node(L, "Sqrt", {dvec.v}, dvec.a);
  Value eye = index_mask(L, n, n, "Equal");
  Value upper = index_mask(L, n, n, "Less");
  T res = node(L, "Where", {eye, sq.v, acc.v}, a.a);
  res = node(L, "Where", {upper, a.v, res.v}, a.a);
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
  res = node(L, "Where", {anyb.v, scalar(L, dt, NAN), res.v}, a.a);
  L.bind(0, res.v);
}

}  // namespace lax_linalg
