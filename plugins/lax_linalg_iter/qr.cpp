// geqrf, householder_product and qr: Householder QR with LAPACK's
// conventions, one column (or reflector) per ONNX Loop step; the trip counts,
// iotas, eye and masks come from sizes.hpp, so the matrix dims may be
// symbolic (one model for every m, n; 0 included).
//
// - geqrf: dlarfg: the reflector of column j maps it to beta e_j with beta =
//   -sign(a_jj) ||x|| (sign(0) = +1), stored below the diagonal with v_j = 1,
//   tau = 2 v_j^2 / v^T v; when the column is already zero below the
//   diagonal tau = 0 (no reflection). So Q and R match JAX's signs, not only
//   up to sign.
// - householder_product: Q = H_0 ... H_{k-1} I[:, :n], the reflectors
//   applied back to front (orgqr), one per Loop step.
// - qr: geqrf then householder_product (full_matrices pads a with zero
//   columns to m x m, as JAX does); r is triu(a).
#include "util.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lax_linalg_iter {

namespace {

// householder_product: the first n columns of H_0 ... H_{k-1}, from a
// [..., m, n] (reflectors below the diagonal, v_j = 1) and taus [..., k].
TV householder_product(Lowering& L, const TV& A, const TV& taus) {
  int32_t dt = A.a.dtype;
  int64_t r = A.a.rank();
  Dim m = dim(A.a, 2), n = dim(A.a, 1), K = dim(taus.a, 1);
  TV Q{expand_to(L, eye(L, dt, m, n), A.a), A.a};
  if (K.is_static() && K.value == 0) return Q;
  Value rows = iota(L, m, 0, 2);
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Aval colA = A.a.with_shape(batch_then(A.a, {m, 1}));
  Aval rowA = A.a.with_shape(batch_then(A.a, {1, n}));
  Value zero = scalar(L, dt, 0.0), one = scalar(L, dt, 1.0);
  Aval mb(dtype::boolean, {m, 1});
  Value last = last_index(L, K);

  Subgraph g = L.begin_subgraph("householder_product_body");
  Value it = g.input(isc, "iter");
  Value cin = g.input(bsc, "cond_in");
  TV q{g.input(A.a, "q"), A.a};
  Value j = L.op("Sub", {last, it}, isc);  // back to front
  Value j1 = L.op("Unsqueeze", {j, i64s(L, {0})}, Aval(dtype::i64, {1}));
  TV x = nd(L, "Gather", {A.v, j1}, colA, {Attr::i("axis", r - 1)});
  TV v = nd(L, "Where", {L.op("Greater", {rows, j}, mb), x.v,
                         L.op("Where", {L.op("Equal", {rows, j}, mb), one, zero}, Aval(dt, {m, 1}))},
            colA);
  Aval tA = taus.a.with_shape([&] { Shape s = taus.a.shape; s.back() = Dim(1); return s; }());
  TV tau = nd(L, "Gather", {taus.v, j1}, tA, {Attr::i("axis", taus.a.rank() - 1)});
  Shape t2 = tA.shape;
  t2.push_back(Dim(1));
  Value tau2 = L.op("Unsqueeze", {tau.v, i64s(L, {r - 1})}, tA.with_shape(t2));
  TV vtq = reduce(L, "ReduceSum", nd(L, "Mul", {v.v, q.v}, q.a), r - 2, true);
  TV w = nd(L, "Mul", {vtq.v, tau2}, rowA);
  TV q2 = nd(L, "Sub", {q.v, nd(L, "Mul", {v.v, w.v}, q.a).v}, q.a);
  GraphRef body = g.end({cin, q2.v});
  std::vector<Value> res =
      L.op_n("Loop", {count(L, K), scalar(L, dtype::boolean, 1), Q.v}, {A.a}, {Attr::graph("body", body)});
  return TV{res[0], A.a};
}

// The upper triangle of x [..., m, n] (below it zeroed).
TV triu(Lowering& L, const TV& x) {
  Value low = index_mask(L, "Greater", dim(x.a, 2), dim(x.a, 1));
  return nd(L, "Where", {low, scalar(L, x.a.dtype, 0.0), x.v}, x.a);
}

}  // namespace

// geqrf on A [..., m, n]: a (R on and above the diagonal, the reflectors
// below it) and taus [..., k].
std::pair<TV, TV> geqrf(Lowering& L, const TV& A) {
  int32_t dt = A.a.dtype;
  int64_t r = A.a.rank();
  Dim m = dim(A.a, 2), n = dim(A.a, 1), K = dim_min(m, n);
  Aval tau_a = A.a.with_shape(batch_then(A.a, {K}));
  TV taus0 = K.is_static()
                 ? TV{expand_to(L, fconst(L, dt, std::vector<double>(static_cast<size_t>(K.value), 0.0), {K.value}),
                                tau_a),
                      tau_a}
                 : zeros(L, tau_a);
  if (K.is_static() && K.value == 0) return {A, taus0};
  Value rows = iota(L, m, 0, 2);
  Value cols = iota(L, n, 1, 2);
  Value kidx = iota(L, K);
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Aval colA = A.a.with_shape(batch_then(A.a, {m, 1}));
  Aval rowA = A.a.with_shape(batch_then(A.a, {1, n}));
  Aval oneA = A.a.with_shape(batch_then(A.a, {1, 1}));
  Value zero = scalar(L, dt, 0.0), one = scalar(L, dt, 1.0);

  Subgraph g = L.begin_subgraph("geqrf_body");
  Value j = g.input(isc, "j");
  Value cin = g.input(bsc, "cond_in");
  TV a{g.input(A.a, "a"), A.a};
  TV taus{g.input(tau_a, "taus"), tau_a};
  Aval mb(dtype::boolean, {m, 1}), nb(dtype::boolean, {1, n});
  Value row_gt = L.op("Greater", {rows, j}, mb);
  Value row_eq = L.op("Equal", {rows, j}, mb);
  Value col_gt = L.op("Greater", {cols, j}, nb);
  Value col_eq = L.op("Equal", {cols, j}, nb);
  TV x = nd(L, "Gather", {a.v, L.op("Unsqueeze", {j, i64s(L, {0})}, Aval(dtype::i64, {1}))}, colA,
            {Attr::i("axis", r - 1)});
  TV below = nd(L, "Where", {row_gt, x.v, zero}, colA);
  TV alpha = reduce(L, "ReduceSum", nd(L, "Where", {row_eq, x.v, zero}, colA), r - 2, true);
  TV bn2 = reduce(L, "ReduceSum", nd(L, "Mul", {below.v, below.v}, colA), r - 2, true);
  Aval ob = oneA.with_dtype(dtype::boolean);
  TV skip = nd(L, "Equal", {bn2.v, zero}, ob);
  TV nrm = nd(L, "Sqrt", {nd(L, "Add", {nd(L, "Mul", {alpha.v, alpha.v}, oneA).v, bn2.v}, oneA).v}, oneA);
  TV sg = nd(L, "Where", {nd(L, "GreaterOrEqual", {alpha.v, zero}, ob).v, one, scalar(L, dt, -1.0)}, oneA);
  TV beta = nd(L, "Neg", {nd(L, "Mul", {sg.v, nrm.v}, oneA).v}, oneA);
  TV vj = nd(L, "Sub", {alpha.v, beta.v}, oneA);  // v = below + vj e_j
  TV v = nd(L, "Add", {below.v, nd(L, "Where", {row_eq, vj.v, zero}, colA).v}, colA);
  TV vtv = nd(L, "Add", {bn2.v, nd(L, "Mul", {vj.v, vj.v}, oneA).v}, oneA);
  TV coef = nd(L, "Where", {skip.v, zero, nd(L, "Div", {scalar(L, dt, 2.0), vtv.v}, oneA).v}, oneA);
  // The trailing columns: a <- a - v coef (v^T a).
  TV vta = reduce(L, "ReduceSum", nd(L, "Mul", {v.v, a.v}, a.a), r - 2, true);
  TV w = nd(L, "Where", {col_gt, nd(L, "Mul", {vta.v, coef.v}, rowA).v, zero}, rowA);
  TV upd = nd(L, "Sub", {a.v, nd(L, "Mul", {v.v, w.v}, a.a).v}, a.a);
  // Column j: beta on the diagonal (alpha when skipped), v / v_j below.
  TV dj = nd(L, "Where", {skip.v, alpha.v, beta.v}, oneA);
  TV vsafe = nd(L, "Where", {skip.v, one, vj.v}, oneA);
  TV vn = nd(L, "Div", {below.v, vsafe.v}, colA);
  TV colj = nd(L, "Where", {row_eq, dj.v, nd(L, "Where", {row_gt, vn.v, x.v}, colA).v}, colA);
  TV a2 = nd(L, "Where", {col_eq, colj.v, upd.v}, a.a);
  // tau = coef v_j^2.
  TV tau = nd(L, "Mul", {coef.v, nd(L, "Mul", {vj.v, vj.v}, oneA).v}, oneA);
  Shape ts = tau_a.shape;
  ts.back() = Dim(1);
  Value tau1 = reshape(L, tau.v, oneA, tau_a.with_shape(ts));
  Value kmask = L.op("Equal", {kidx, j}, Aval(dtype::boolean, {K}));
  TV taus2 = nd(L, "Where", {kmask, tau1, taus.v}, tau_a);
  GraphRef body = g.end({cin, a2.v, taus2.v});
  std::vector<Value> res = L.op_n("Loop", {count(L, K), scalar(L, dtype::boolean, 1), A.v, taus0.v},
                                  {A.a, tau_a}, {Attr::graph("body", body)});
  return {TV{res[0], A.a}, TV{res[1], tau_a}};
}

// Q (full: [m, m]; else [m, k]) and R (full: [m, n]; else [k, n]).
std::pair<TV, TV> qr(Lowering& L, const TV& A, bool full) {
  Dim m = dim(A.a, 2), n = dim(A.a, 1), K = dim_min(m, n);
  auto [a, taus] = geqrf(L, A);
  TV R = triu(L, a);
  TV q = full ? householder_product(L, pad_cols(L, a, m), taus)
              : householder_product(L, n != K ? slice_to(L, a, a.a.rank() - 1, K) : a, taus);
  if (!full && m != K) R = slice_to(L, R, R.a.rank() - 2, K);
  return {q, R};
}

namespace {

// A complex operand's parts (complex_qr.cpp), or the real operand as re.
Cx operand_parts(Lowering& L, size_t i) {
  TV A{L.input(i), L.in_aval(i)};
  Cx c = complex::is(A.a.dtype) ? split_parts(L, A) : Cx{A, {kNoValue, {}}};
  require_float(L, c.re.a, 1);
  return c;
}

Value packed(Lowering& L, const Cx& x, int32_t cdt) {
  return complex::pack(L, x.re.v, x.im.v, x.re.a.with_dtype(cdt));
}

}  // namespace

void lower_geqrf(Lowering& L) {
  TV A{L.input(0), L.in_aval(0)};
  if (complex::is(A.a.dtype)) {
    Cx a0 = operand_parts(L, 0);
    require_float(L, a0.re.a, 2);
    auto [a, taus] = complex_geqrf(L, a0);
    L.bind(0, packed(L, a, A.a.dtype));
    L.bind(1, packed(L, taus, A.a.dtype));
    return;
  }
  require_float(L, A.a, 2);
  auto [a, taus] = geqrf(L, A);
  L.bind(0, a.v);
  L.bind(1, taus.v);
}

void lower_householder_product(Lowering& L) {
  TV A{L.input(0), L.in_aval(0)};
  TV taus{L.input(1), L.in_aval(1)};
  const bool cx = complex::is(A.a.dtype);
  Cx a0 = operand_parts(L, 0), t0 = operand_parts(L, 1);
  require_float(L, a0.re.a, 2);
  Dim m = dim(A.a, 2), n = dim(A.a, 1), k = dim(taus.a, 1);
  if (all_static({m, n, k}) && (k.value > n.value || n.value > m.value))
    L.fail("householder_product: needs a [..., m, n] with n <= m and taus [..., k] with k <= n; got " + A.a.str() +
           " and " + taus.a.str());
  if (cx != complex::is(taus.a.dtype))
    L.fail("householder_product: a " + A.a.str() + " and taus " + taus.a.str() + " must both be real or complex");
  if (cx) {
    L.bind(0, packed(L, complex_householder_product(L, a0, t0), A.a.dtype));
    return;
  }
  L.bind(0, householder_product(L, A, taus).v);
}

void lower_qr(Lowering& L) {
  TV A{L.input(0), L.in_aval(0)};
  Cx a0 = operand_parts(L, 0);
  require_float(L, a0.re.a, 2);
  if (L.has_param("pivoting") && L.param("pivoting").as_bool())
    L.fail("qr: pivoting=True (column-pivoted QR) is not supported");
  bool full = L.param("full_matrices").as_bool();
  if (complex::is(A.a.dtype)) {
    auto [q, r] = complex_qr(L, a0, full);
    L.bind(0, packed(L, q, A.a.dtype));
    L.bind(1, packed(L, r, A.a.dtype));
    return;
  }
  auto [q, r] = qr(L, A, full);
  L.bind(0, q.v);
  L.bind(1, r.v);
}

}  // namespace lax_linalg_iter
