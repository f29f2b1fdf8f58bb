// tridiagonal_solve(dl, d, du, b): LAPACK's gtsv, which JAX's CPU kernel
// calls -- Gaussian elimination with partial pivoting (rows i and i+1 swap
// when |A[i+1, i]| > |pivot|), so U gets a second superdiagonal of fill-in,
// then back substitution. Two ONNX Loops:
// - forward, i = 0 .. n-2: the carry is row i as modified so far (pivot d,
//   superdiagonal u, right-hand side b [..., k]); each step reads original
//   row i+1, emits final row i of U (d, u, fill, b) as scan outputs and
//   carries the modified row i+1;
// - backward, i = n-1 .. 0: x_i = (b_i - u_i x_{i+1} - fill_i x_{i+2}) / d_i
//   with the two previous solutions carried.
// dl[0] and du[n-1] are never read (JAX documents them as 0; gtsv's dl and
// du have n-1 entries). A zero pivot is gtsv's info > 0: JAX then returns
// NaN for the whole b of that batch element, and so does this. perturb_singular
// (another kernel that perturbs tiny pivots) is refused. The system size n
// must be static; batch dims may be symbolic.
#include "util.hpp"

#include <cmath>

namespace lax_linalg_iter {

void lower_tridiagonal_solve(Lowering& L) {
  TV dl{L.input(0), L.in_aval(0)}, d{L.input(1), L.in_aval(1)}, du{L.input(2), L.in_aval(2)};
  TV b{L.input(3), L.in_aval(3)};
  require_float(L, d.a, 1);
  require_float(L, b.a, 2);
  if (L.has_param("perturb_singular") && L.param("perturb_singular").as_bool())
    L.fail("tridiagonal_solve: perturb_singular=True is not supported (it needs LAPACK's perturbed-pivot kernel)");
  int64_t r = d.a.rank(), rb = b.a.rank();
  int64_t n = static_dim(L, d.a, r - 1, "system");
  int32_t dt = b.a.dtype;
  Aval bat = d.a.with_shape(Shape(d.a.shape.begin(), d.a.shape.end() - 1));  // [B...]
  Shape rs(b.a.shape.begin(), b.a.shape.end() - 2);
  rs.push_back(b.a.shape.back());
  Aval row = b.a.with_shape(rs);  // one row of b, [B..., k]
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Value zero = L.scalar(dt, 0.0);
  auto idx = [&](int64_t i) { return L.scalar(dtype::i64, double(i)); };

  TV D, U, F, Bv;  // U's rows stacked on a leading axis [n, B...] / [n, B..., k]
  Shape sb{Dim(n)}, sr{Dim(n)};
  sb.insert(sb.end(), bat.shape.begin(), bat.shape.end());
  sr.insert(sr.end(), row.shape.begin(), row.shape.end());
  Aval stk_b = bat.with_shape(sb), stk_r = row.with_shape(sr);
  TV d0 = pick(L, d, idx(0), r - 1), b0 = pick(L, b, idx(0), rb - 2);
  if (n == 1) {
    D = unsqueeze(L, d0, 0);
    U = F = {L.op("Expand", {zero, L.shape_value(sb)}, stk_b), stk_b};
    Bv = unsqueeze(L, b0, 0);
  } else {
    TV u0 = pick(L, du, idx(0), r - 1);
    Subgraph g = L.begin_subgraph("gtsv_forward");
    Value i = g.input(isc, "i");
    Value cin = g.input(bsc, "cond_in");
    TV dc{g.input(bat, "d"), bat}, uc{g.input(bat, "u"), bat}, bc{g.input(row, "b"), row};
    Value i1 = L.op("Add", {i, idx(1)}, isc);
    TV l = pick(L, dl, i1, r - 1), dn = pick(L, d, i1, r - 1), bn = pick(L, b, i1, rb - 2);
    // du[n-1] is not part of the matrix.
    TV un = nd(L, "Where", {L.op("Equal", {i1, idx(n - 1)}, bsc), zero, pick(L, du, i1, r - 1).v}, bat);
    Aval bb = bat.with_dtype(dtype::boolean);
    TV swap = nd(L, "Less", {nd(L, "Abs", {dc.v}, bat).v, nd(L, "Abs", {l.v}, bat).v}, bb);
    TV fact = nd(L, "Where", {swap.v, nd(L, "Div", {dc.v, l.v}, bat).v, nd(L, "Div", {l.v, dc.v}, bat).v}, bat);
    TV swap_r = unsqueeze(L, swap, swap.a.rank());
    TV fact_r = unsqueeze(L, fact, fact.a.rank());
    auto sel = [&](const TV& s, const TV& a, const TV& c) { return nd(L, "Where", {s.v, a.v, c.v}, c.a); };
    TV ud = sel(swap, l, dc), uu = sel(swap, dn, uc);
    TV uf = nd(L, "Where", {swap.v, un.v, zero}, bat);
    TV ub = sel(swap_r, bn, bc);
    auto axpy = [&](const TV& y, const TV& f, const TV& x) {  // y - f * x
      return nd(L, "Sub", {y.v, nd(L, "Mul", {f.v, x.v}, y.a).v}, y.a);
    };
    TV dc2 = sel(swap, axpy(uc, fact, dn), axpy(dn, fact, uc));
    TV uc2 = sel(swap, nd(L, "Neg", {nd(L, "Mul", {fact.v, un.v}, bat).v}, bat), un);
    TV bc2 = sel(swap_r, axpy(bc, fact_r, bn), axpy(bn, fact_r, bc));
    GraphRef body = g.end({cin, dc2.v, uc2.v, bc2.v, ud.v, uu.v, uf.v, ub.v});
    Shape sb1{Dim(n - 1)}, sr1{Dim(n - 1)};
    sb1.insert(sb1.end(), bat.shape.begin(), bat.shape.end());
    sr1.insert(sr1.end(), row.shape.begin(), row.shape.end());
    Aval s_b = bat.with_shape(sb1), s_r = row.with_shape(sr1);
    std::vector<Value> o = L.op_n("Loop", {idx(n - 1), L.scalar(dtype::boolean, 1), d0.v, u0.v, b0.v},
                                  {bat, bat, row, s_b, s_b, s_b, s_r}, {Attr::graph("body", body)});
    auto append = [&](Value stacked, Value last, const Aval& one, const Aval& full) {
      TV l1 = unsqueeze(L, {last, one}, 0);
      return nd(L, "Concat", {stacked, l1.v}, full, {Attr::i("axis", 0)});
    };
    Value zb = L.op("Expand", {zero, L.shape_value(bat.shape)}, bat);
    D = append(o[3], o[0], bat, stk_b);
    U = append(o[4], zb, bat, stk_b);
    F = append(o[5], zb, bat, stk_b);
    Bv = append(o[6], o[2], row, stk_r);
  }
  // Back substitution, i = n-1 .. 0; the solutions come out last row first.
  Subgraph g = L.begin_subgraph("gtsv_backward");
  Value it = g.input(isc, "it");
  Value cin = g.input(bsc, "cond_in");
  TV x1{g.input(row, "x1"), row}, x2{g.input(row, "x2"), row};
  Value i = L.op("Sub", {idx(n - 1), it}, isc);
  auto col = [&](const TV& stacked) { return unsqueeze(L, pick(L, stacked, i, 0), bat.rank()); };
  TV di = col(D), ui = col(U), fi = col(F), bi = pick(L, Bv, i, 0);
  TV t = nd(L, "Sub", {bi.v, nd(L, "Mul", {ui.v, x1.v}, row).v}, row);
  t = nd(L, "Sub", {t.v, nd(L, "Mul", {fi.v, x2.v}, row).v}, row);
  TV x = nd(L, "Div", {t.v, di.v}, row);
  GraphRef body = g.end({cin, x.v, x1.v, x.v});
  Value zr = L.op("Expand", {zero, L.shape_value(row.shape)}, row);
  std::vector<Value> o = L.op_n("Loop", {idx(n), L.scalar(dtype::boolean, 1), zr, zr}, {row, row, stk_r},
                                {Attr::graph("body", body)});
  std::vector<int64_t> rev;
  for (int64_t k = n - 1; k >= 0; --k) rev.push_back(k);
  TV X = nd(L, "Gather", {o[2], L.constant(rev, {n})}, stk_r, {Attr::i("axis", 0)});
  std::vector<int64_t> perm;
  for (int64_t k = 1; k < rb - 1; ++k) perm.push_back(k);
  perm.push_back(0);
  perm.push_back(rb - 1);
  Value xs = L.transpose(X.v, X.a, perm);
  // gtsv's info > 0 (a zero pivot): NaN for that batch element, as JAX.
  TV zp = nd(L, "Cast", {L.op("Equal", {D.v, zero}, stk_b.with_dtype(dtype::boolean))}, stk_b, {Attr::i("to", dt)});
  TV any = nd(L, "ReduceMax", {zp.v, L.i64s({0})}, bat, {Attr::i("keepdims", 0)});
  TV bad = nd(L, "Cast", {any.v}, bat.with_dtype(dtype::boolean), {Attr::i("to", dtype::boolean)});
  bad = unsqueeze(L, unsqueeze(L, bad, bat.rank()), bat.rank());
  L.bind(0, L.op("Where", {bad.v, L.scalar(dt, NAN), xs}, b.a));
}

}  // namespace lax_linalg_iter
