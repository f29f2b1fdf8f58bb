// tridiagonal_solve(dl, d, du, b): LAPACK's gtsv, which JAX's CPU kernel
// calls -- Gaussian elimination with partial pivoting (rows i and i+1 swap
// when |A[i+1, i]| > |pivot|), so U gets a second superdiagonal of fill-in,
// then back substitution. Two ONNX Loops:
// - forward, i = 0 .. n-1: the carry is row i as modified so far (pivot d,
//   superdiagonal u, right-hand side b [..., k]); each step reads original
//   row i+1 (none at the last step), emits final row i of U (d, u, fill, b)
//   as scan outputs and carries the modified row i+1;
// - backward, i = n-1 .. 0: x_i = (b_i - u_i x_{i+1} - fill_i x_{i+2}) / d_i
//   with the two previous solutions carried.
// dl[0] and du[n-1] are never read (JAX documents them as 0; gtsv's dl and
// du have n-1 entries). A zero pivot is gtsv's info > 0: JAX then returns
// NaN for the whole b of that batch element, and so does this. perturb_singular
// (another kernel that perturbs tiny pivots) is refused. The system size
// (0 included at run time) and the batch dims may be symbolic.
#include "util.hpp"

#include <cmath>
#include <cstdint>

namespace lax_linalg_iter {

void lower_tridiagonal_solve(Lowering& L) {
  TV dl{L.input(0), L.in_aval(0)}, d{L.input(1), L.in_aval(1)}, du{L.input(2), L.in_aval(2)};
  TV b{L.input(3), L.in_aval(3)};
  require_float(L, d.a, 1);
  require_float(L, b.a, 2);
  if (L.has_param("perturb_singular") && L.param("perturb_singular").as_bool())
    L.fail("tridiagonal_solve: perturb_singular=True is not supported (it needs LAPACK's perturbed-pivot kernel)");
  int64_t r = d.a.rank(), rb = b.a.rank();
  Dim n = d.a.shape.back();  // may be symbolic
  if (n.is_static() && n.value == 0) L.fail("tridiagonal_solve: empty system " + b.a.str());
  int32_t dt = b.a.dtype;
  Aval bat = d.a.with_shape(Shape(d.a.shape.begin(), d.a.shape.end() - 1));  // [B...]
  Shape rs(b.a.shape.begin(), b.a.shape.end() - 2);
  rs.push_back(b.a.shape.back());
  Aval row = b.a.with_shape(rs);  // one row of b, [B..., k]
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Value zero = scalar(L, dt, 0.0);
  Value one_i = scalar(L, dtype::i64, 1.0);
  Value nv = L.op("Squeeze", {dim_value(L, n), i64s(L, {0})}, isc);  // n, at run time
  Value last = L.op("Sub", {nv, one_i}, isc);                         // n - 1
  Shape sb{n}, sr{n};
  sb.insert(sb.end(), bat.shape.begin(), bat.shape.end());
  sr.insert(sr.end(), row.shape.begin(), row.shape.end());
  Aval stk_b = bat.with_shape(sb), stk_r = row.with_shape(sr);  // U's rows on a leading axis
  // Row 0, the first carry. A symbolic n may be 0 at run time, where there
  // is no row to Gather: the sum over x[0:1] is row 0, or zeros (no Loop step
  // reads them).
  Value i0 = n.is_static() ? scalar(L, dtype::i64, 0.0) : kNoValue;
  auto first = [&](const TV& x, int64_t axis) {
    if (n.is_static()) return pick(L, x, i0, axis);
    Shape s = x.a.shape;
    s[static_cast<size_t>(axis)] = Dim(1);
    Value head = L.op("Slice", {x.v, i64s(L, {0}), i64s(L, {1}), i64s(L, {axis})}, x.a.with_shape(s));
    s.erase(s.begin() + axis);
    return nd(L, "ReduceSum", {head, i64s(L, {axis})}, x.a.with_shape(s), {Attr::i("keepdims", 0)});
  };
  TV d0 = first(d, r - 1), u0 = first(du, r - 1), b0 = first(b, rb - 2);
  // Forward, i = 0 .. n-1; at i = n-1 there is no row below (l = 0: no swap,
  // fact = 0), so that step only emits the last row and every system size,
  // 1 included, runs the same Loop.
  Subgraph g = L.begin_subgraph("gtsv_forward");
  Value i = g.input(isc, "i");
  Value cin = g.input(bsc, "cond_in");
  TV dc{g.input(bat, "d"), bat}, uc{g.input(bat, "u"), bat}, bc{g.input(row, "b"), row};
  Value i1 = L.op("Min", {L.op("Add", {i, one_i}, isc), last}, isc);
  Value below = L.op("Less", {i, last}, bsc);  // row i + 1 exists
  Value upper = L.op("Less", {i1, last}, bsc);  // and du[i+1] is in the matrix
  TV l = nd(L, "Where", {below, pick(L, dl, i1, r - 1).v, zero}, bat);
  TV dn = pick(L, d, i1, r - 1), bn = pick(L, b, i1, rb - 2);
  TV un = nd(L, "Where", {upper, pick(L, du, i1, r - 1).v, zero}, bat);
  Aval bb = bat.with_dtype(dtype::boolean);
  TV swap = nd(L, "Less", {nd(L, "Abs", {dc.v}, bat).v, nd(L, "Abs", {l.v}, bat).v}, bb);
  TV fact = nd(L, "Where", {swap.v, nd(L, "Div", {dc.v, l.v}, bat).v, nd(L, "Div", {l.v, dc.v}, bat).v}, bat);
  TV swap_r = unsqueeze(L, swap, swap.a.rank());
  TV fact_r = unsqueeze(L, fact, fact.a.rank());
  auto sel = [&](const TV& c, const TV& a, const TV& e) { return nd(L, "Where", {c.v, a.v, e.v}, e.a); };
  TV ud = sel(swap, l, dc), uu = sel(swap, dn, uc);
  TV uf = nd(L, "Where", {swap.v, un.v, zero}, bat);
  TV ub = sel(swap_r, bn, bc);
  auto axpy = [&](const TV& y, const TV& f, const TV& x) {  // y - f * x
    return nd(L, "Sub", {y.v, nd(L, "Mul", {f.v, x.v}, y.a).v}, y.a);
  };
  TV dc2 = sel(swap, axpy(uc, fact, dn), axpy(dn, fact, uc));
  TV uc2 = sel(swap, nd(L, "Neg", {nd(L, "Mul", {fact.v, un.v}, bat).v}, bat), un);
  TV bc2 = sel(swap_r, axpy(bc, fact_r, bn), axpy(bn, fact_r, bc));
  // The last row's u is not in the matrix either (gtsv's du has n - 1 entries).
  uu = nd(L, "Where", {below, uu.v, zero}, bat);
  GraphRef fwd = g.end({cin, dc2.v, uc2.v, bc2.v, ud.v, uu.v, uf.v, ub.v});
  std::vector<Value> o = L.op_n("Loop", {nv, scalar(L, dtype::boolean, 1), d0.v, u0.v, b0.v},
                                {bat, bat, row, stk_b, stk_b, stk_b, stk_r}, {Attr::graph("body", fwd)});
  TV D{o[3], stk_b}, U{o[4], stk_b}, F{o[5], stk_b}, Bv{o[6], stk_r};
  // Back substitution, i = n-1 .. 0; the solutions come out last row first.
  Subgraph h = L.begin_subgraph("gtsv_backward");
  Value it = h.input(isc, "it");
  Value cin2 = h.input(bsc, "cond_in");
  TV x1{h.input(row, "x1"), row}, x2{h.input(row, "x2"), row};
  Value k = L.op("Sub", {last, it}, isc);
  auto col = [&](const TV& stacked) { return unsqueeze(L, pick(L, stacked, k, 0), bat.rank()); };
  TV di = col(D), ui = col(U), fi = col(F), bi = pick(L, Bv, k, 0);
  TV t = nd(L, "Sub", {bi.v, nd(L, "Mul", {ui.v, x1.v}, row).v}, row);
  t = nd(L, "Sub", {t.v, nd(L, "Mul", {fi.v, x2.v}, row).v}, row);
  TV x = nd(L, "Div", {t.v, di.v}, row);
  GraphRef bwd = h.end({cin2, x.v, x1.v, x.v});
  Value zr = L.op("Expand", {zero, shape_value(L, row.shape)}, row);
  std::vector<Value> o2 = L.op_n("Loop", {nv, scalar(L, dtype::boolean, 1), zr, zr}, {row, row, stk_r},
                                 {Attr::graph("body", bwd)});
  Value X = L.op("Slice", {o2[2], i64s(L, {-1}), i64s(L, {INT64_MIN}), i64s(L, {0}), i64s(L, {-1})}, stk_r);
  std::vector<int64_t> perm;
  for (int64_t a = 1; a < rb - 1; ++a) perm.push_back(a);
  perm.push_back(0);
  perm.push_back(rb - 1);
  Value xs = transpose(L, X, stk_r, perm);
  // gtsv's info > 0 (a zero pivot): NaN for that batch element, as JAX.
  TV zp = nd(L, "Cast", {L.op("Equal", {D.v, zero}, stk_b.with_dtype(dtype::boolean))}, stk_b, {Attr::i("to", dt)});
  TV any{reduce_over(L, "ReduceMax", zp.v, {0}, false, bat), bat};
  TV bad = nd(L, "Cast", {any.v}, bat.with_dtype(dtype::boolean), {Attr::i("to", dtype::boolean)});
  bad = unsqueeze(L, unsqueeze(L, bad, bat.rank()), bat.rank());
  L.bind(0, L.op("Where", {bad.v, scalar(L, dt, NAN), xs}, b.a));
}

}  // namespace lax_linalg_iter
