// Complex Householder QR (complex64/complex128), qr.cpp's algorithm in
// complex arithmetic with LAPACK's (zgeqrf, zlarfg, zungqr) conventions; each
// matrix is carried as its two real parts.
//
// - geqrf: the reflector of column j, H = I - tau v v^H with v_j = 1, maps
//   the column (alpha at the diagonal, x below) by H^H to beta e_j with beta
//   = -sign(Re alpha) ||(alpha, x)|| real (Fortran's SIGN: +0.0 gives +1,
//   -0.0, which a purely imaginary entry has, -1), tau = (beta - alpha) /
//   beta, v = x / (alpha - beta). When x = 0 and alpha is real there
//   is no reflection (tau = 0): R's diagonal is real, as LAPACK's and JAX's.
//   The trailing columns get a <- a - conj(tau) v (v^H a).
// - householder_product: Q = H_0 ... H_{k-1} I[:, :n], back to front,
//   q <- q - tau v (v^H q).
// - qr: geqrf then householder_product (full_matrices pads with zero
//   columns), r = triu(a).
#include "util.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace lax_linalg_iter {

namespace {

// The real 2-part algebra on TVs of one aval (broadcasting as the values do).
struct C {
  Lowering& L;
  TV op(const char* o, const TV& x, const TV& y, const Aval& a) { return nd(L, o, {x.v, y.v}, a); }
  // (x * y) parts.
  Cx mul(const Cx& x, const Cx& y, const Aval& a) {
    return {op("Sub", op("Mul", x.re, y.re, a), op("Mul", x.im, y.im, a), a),
            op("Add", op("Mul", x.re, y.im, a), op("Mul", x.im, y.re, a), a)};
  }
  // (conj(x) * y) parts.
  Cx cmul(const Cx& x, const Cx& y, const Aval& a) {
    return {op("Add", op("Mul", x.re, y.re, a), op("Mul", x.im, y.im, a), a),
            op("Sub", op("Mul", x.re, y.im, a), op("Mul", x.im, y.re, a), a)};
  }
  Cx sub(const Cx& x, const Cx& y, const Aval& a) { return {op("Sub", x.re, y.re, a), op("Sub", x.im, y.im, a)}; }
  Cx where(Value c, const Cx& x, const Cx& y, const Aval& a) {
    return {nd(L, "Where", {c, x.re.v, y.re.v}, a), nd(L, "Where", {c, x.im.v, y.im.v}, a)};
  }
  Cx sum(const Cx& x, int64_t axis) {
    return {reduce(L, "ReduceSum", x.re, axis, true), reduce(L, "ReduceSum", x.im, axis, true)};
  }
};

Cx zeros_c(Lowering& L, const Aval& a) { return {zeros(L, a), zeros(L, a)}; }

// The upper triangle of both parts.
Cx triu_c(Lowering& L, const Cx& x) {
  Value low = index_mask(L, "Greater", dim(x.re.a, 2), dim(x.re.a, 1));
  Value z = scalar(L, x.re.a.dtype, 0.0);
  return {nd(L, "Where", {low, z, x.re.v}, x.re.a), nd(L, "Where", {low, z, x.im.v}, x.im.a)};
}

}  // namespace

std::pair<Cx, Cx> complex_geqrf(Lowering& L, const Cx& A) {
  const Aval aa = A.re.a;
  int32_t dt = aa.dtype;
  int64_t r = aa.rank();
  Dim m = dim(aa, 2), n = dim(aa, 1), K = dim_min(m, n);
  Aval tau_a = aa.with_shape(batch_then(aa, {K}));
  Cx taus0 = zeros_c(L, tau_a);
  if (K.is_static() && K.value == 0) return {A, taus0};
  C c{L};
  Value rows = iota(L, m, 0, 2);
  Value cols = iota(L, n, 1, 2);
  Value kidx = iota(L, K);
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Aval colA = aa.with_shape(batch_then(aa, {m, 1}));
  Aval rowA = aa.with_shape(batch_then(aa, {1, n}));
  Aval oneA = aa.with_shape(batch_then(aa, {1, 1}));
  Aval ob = oneA.with_dtype(dtype::boolean);
  Value zero = scalar(L, dt, 0.0), one = scalar(L, dt, 1.0);
  TV z0{zero, Aval(dt, {})};

  Subgraph g = L.begin_subgraph("complex_geqrf_body");
  Value j = g.input(isc, "j");
  Value cin = g.input(bsc, "cond_in");
  Cx a{{g.input(aa, "a_re"), aa}, {g.input(aa, "a_im"), aa}};
  Cx taus{{g.input(tau_a, "taus_re"), tau_a}, {g.input(tau_a, "taus_im"), tau_a}};
  Aval mb(dtype::boolean, {m, 1}), nb(dtype::boolean, {1, n});
  Value row_gt = L.op("Greater", {rows, j}, mb);
  Value row_eq = L.op("Equal", {rows, j}, mb);
  Value col_gt = L.op("Greater", {cols, j}, nb);
  Value col_eq = L.op("Equal", {cols, j}, nb);
  Value j1 = L.op("Unsqueeze", {j, i64s(L, {0})}, Aval(dtype::i64, {1}));
  Cx x{nd(L, "Gather", {a.re.v, j1}, colA, {Attr::i("axis", r - 1)}),
       nd(L, "Gather", {a.im.v, j1}, colA, {Attr::i("axis", r - 1)})};
  Cx zc{z0, z0};
  Cx below = c.where(row_gt, x, zc, colA);
  // alpha = x[j] [..., 1, 1], gathered (a masked sum would turn -0.0 into +0.0).
  Cx alpha{nd(L, "Gather", {x.re.v, j1}, oneA, {Attr::i("axis", r - 2)}),
           nd(L, "Gather", {x.im.v, j1}, oneA, {Attr::i("axis", r - 2)})};
  TV bn2 = reduce(L, "ReduceSum", c.op("Add", c.op("Mul", below.re, below.re, colA), c.op("Mul", below.im, below.im, colA), colA),
                  r - 2, true);
  TV ai2 = c.op("Mul", alpha.im, alpha.im, oneA);
  TV skip = nd(L, "And", {c.op("Equal", bn2, z0, ob).v, c.op("Equal", ai2, z0, ob).v}, ob);
  TV nrm = nd(L, "Sqrt", {c.op("Add", c.op("Add", c.op("Mul", alpha.re, alpha.re, oneA), ai2, oneA), bn2, oneA).v},
              oneA);
  // Fortran's SIGN(., Re alpha): -1 for -0.0 too (a purely imaginary
  // column has one), which 1 / Re alpha < 0 tells.
  TV sg = nd(L, "Where", {c.op("Less", nd(L, "Div", {one, alpha.re.v}, oneA), z0, ob).v, scalar(L, dt, -1.0), one},
             oneA);
  TV beta = nd(L, "Neg", {c.op("Mul", sg, nrm, oneA).v}, oneA);
  TV bsafe = nd(L, "Where", {skip.v, one, beta.v}, oneA);
  // tau = (beta - alpha) / beta; 1 / (alpha - beta) = conj(d) / |d|^2.
  Cx tau{nd(L, "Div", {c.op("Sub", beta, alpha.re, oneA).v, bsafe.v}, oneA),
         nd(L, "Div", {nd(L, "Neg", {alpha.im.v}, oneA).v, bsafe.v}, oneA)};
  tau = c.where(skip.v, zc, tau, oneA);
  Cx dd{c.op("Sub", alpha.re, beta, oneA), alpha.im};
  TV d2 = c.op("Add", c.op("Mul", dd.re, dd.re, oneA), c.op("Mul", dd.im, dd.im, oneA), oneA);
  d2 = nd(L, "Where", {skip.v, one, d2.v}, oneA);
  Cx inv{nd(L, "Div", {dd.re.v, d2.v}, oneA), nd(L, "Neg", {nd(L, "Div", {dd.im.v, d2.v}, oneA).v}, oneA)};
  Cx vb = c.mul(below, inv, colA);  // v below the diagonal
  Cx v{nd(L, "Where", {row_eq, one, vb.re.v}, colA), vb.im};
  // The trailing columns: a <- a - v (conj(tau) (v^H a)).
  Cx vha = c.sum(c.cmul(v, a, aa), r - 2);
  Cx ct{tau.re, nd(L, "Neg", {tau.im.v}, oneA)};
  Cx w = c.where(col_gt, c.mul(ct, vha, rowA), zc, rowA);
  Cx upd = c.sub(a, c.mul(v, w, aa), aa);
  // Column j: beta on the diagonal (alpha, real, when skipped), v below.
  Cx dj{nd(L, "Where", {skip.v, alpha.re.v, beta.v}, oneA), zc.re};
  Cx colj = c.where(row_eq, dj, c.where(row_gt, vb, x, colA), colA);
  Cx a2 = c.where(col_eq, colj, upd, aa);
  Shape ts = tau_a.shape;
  ts.back() = Dim(1);
  Aval t1a = tau_a.with_shape(ts);
  Value kmask = L.op("Equal", {kidx, j}, Aval(dtype::boolean, {K}));
  Value tr = nd(L, "Where", {kmask, reshape(L, tau.re.v, oneA, t1a), taus.re.v}, tau_a).v;
  Value ti = nd(L, "Where", {kmask, reshape(L, tau.im.v, oneA, t1a), taus.im.v}, tau_a).v;
  GraphRef body = g.end({cin, a2.re.v, a2.im.v, tr, ti});
  std::vector<Value> res =
      L.op_n("Loop", {count(L, K), scalar(L, dtype::boolean, 1), A.re.v, A.im.v, taus0.re.v, taus0.im.v},
             {aa, aa, tau_a, tau_a}, {Attr::graph("body", body)});
  return {Cx{{res[0], aa}, {res[1], aa}}, Cx{{res[2], tau_a}, {res[3], tau_a}}};
}

Cx complex_householder_product(Lowering& L, const Cx& A, const Cx& taus) {
  const Aval aa = A.re.a;
  int32_t dt = aa.dtype;
  int64_t r = aa.rank();
  Dim m = dim(aa, 2), n = dim(aa, 1), K = dim(taus.re.a, 1);
  Cx Q{{expand_to(L, eye(L, dt, m, n), aa), aa}, zeros(L, aa)};
  if (K.is_static() && K.value == 0) return Q;
  C c{L};
  Value rows = iota(L, m, 0, 2);
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Aval colA = aa.with_shape(batch_then(aa, {m, 1}));
  Aval rowA = aa.with_shape(batch_then(aa, {1, n}));
  Value zero = scalar(L, dt, 0.0);
  Aval mb(dtype::boolean, {m, 1});
  Value last = last_index(L, K);
  Aval tA = taus.re.a.with_shape([&] { Shape s = taus.re.a.shape; s.back() = Dim(1); return s; }());
  Shape t2 = tA.shape;
  t2.push_back(Dim(1));
  Aval tA2 = tA.with_shape(t2);

  Subgraph g = L.begin_subgraph("complex_householder_product_body");
  Value it = g.input(isc, "iter");
  Value cin = g.input(bsc, "cond_in");
  Cx q{{g.input(aa, "q_re"), aa}, {g.input(aa, "q_im"), aa}};
  Value j = L.op("Sub", {last, it}, isc);  // back to front
  Value j1 = L.op("Unsqueeze", {j, i64s(L, {0})}, Aval(dtype::i64, {1}));
  Value gt = L.op("Greater", {rows, j}, mb);
  Value eqj = L.op("Equal", {rows, j}, mb);
  auto col = [&](const TV& x, double diag) {
    Value xj = L.op("Gather", {x.v, j1}, colA, {Attr::i("axis", r - 1)});
    return nd(L, "Where", {gt, xj, L.op("Where", {eqj, scalar(L, dt, diag), zero}, Aval(dt, {m, 1}))}, colA);
  };
  Cx v{col(A.re, 1.0), col(A.im, 0.0)};
  auto tau_of = [&](const TV& t) {
    Value tj = L.op("Gather", {t.v, j1}, tA, {Attr::i("axis", t.a.rank() - 1)});
    return TV{L.op("Unsqueeze", {tj, i64s(L, {r - 1})}, tA2), tA2};
  };
  Cx tau{tau_of(taus.re), tau_of(taus.im)};
  Cx w = c.mul(tau, c.sum(c.cmul(v, q, aa), r - 2), rowA);
  Cx q2 = c.sub(q, c.mul(v, w, aa), aa);
  GraphRef body = g.end({cin, q2.re.v, q2.im.v});
  std::vector<Value> res = L.op_n("Loop", {count(L, K), scalar(L, dtype::boolean, 1), Q.re.v, Q.im.v}, {aa, aa},
                                  {Attr::graph("body", body)});
  return {{res[0], aa}, {res[1], aa}};
}

std::pair<Cx, Cx> complex_qr(Lowering& L, const Cx& A, bool full) {
  Dim m = dim(A.re.a, 2), n = dim(A.re.a, 1), K = dim_min(m, n);
  auto [a, taus] = complex_geqrf(L, A);
  Cx R = triu_c(L, a);
  int64_t r = A.re.a.rank();
  Cx q{{kNoValue, {}}, {kNoValue, {}}};
  if (full) {
    q = complex_householder_product(L, {pad_cols(L, a.re, m), pad_cols(L, a.im, m)}, taus);
  } else if (n != K) {
    q = complex_householder_product(L, {slice_to(L, a.re, r - 1, K), slice_to(L, a.im, r - 1, K)}, taus);
  } else {
    q = complex_householder_product(L, a, taus);
  }
  if (!full && m != K) R = {slice_to(L, R.re, r - 2, K), slice_to(L, R.im, r - 2, K)};
  return {q, R};
}

}  // namespace lax_linalg_iter
