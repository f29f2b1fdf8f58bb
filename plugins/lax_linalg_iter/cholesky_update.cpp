// cholesky_update(R, w): the upper Cholesky factor of R^T R + w w^T, by JAX's
// own algorithm (_cholesky_update_jax_fn, what it runs on CPU): for k = 0 ..
// n-1 a Givens rotation (drotg, scaled by max(|x|, |y|), the identity when
// w_k = 0) of row k of R against w. One ONNX Loop step per k; the whole row
// is rotated, as JAX does, so entries left of the diagonal keep its rounding
// residue too. n may be symbolic (the trip count and the row iota then come
// from R's Shape at run time); batch dims (JAX gives none) too.
#include "util.hpp"

namespace lax_linalg_iter {

void lower_cholesky_update(Lowering& L) {
  TV R{L.input(0), L.in_aval(0)}, w{L.input(1), L.in_aval(1)};
  require_float(L, R.a, 2);
  require_float(L, w.a, 1);
  int64_t r = R.a.rank();
  Dim n = dim(R.a, 1);
  if (dim(R.a, 2) != n || w.a.rank() != r - 1 || w.a.shape.back() != Dim(n))
    L.fail("cholesky_update: needs a square R [..., n, n] and w [..., n]; got " + R.a.str() + " and " + w.a.str());
  int32_t dt = R.a.dtype;
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Aval vec = w.a;                                                    // [B..., n]
  Aval sc = vec.with_shape(Shape(vec.shape.begin(), vec.shape.end() - 1));  // [B...]
  Aval sb = sc.with_dtype(dtype::boolean);
  Value rows = iota(L, n, 0, 2);
  Value zero = scalar(L, dt, 0.0), one = scalar(L, dt, 1.0);

  Subgraph g = L.begin_subgraph("cholesky_update_body");
  Value k = g.input(isc, "k");
  Value cin = g.input(bsc, "cond_in");
  TV Rk{g.input(R.a, "r"), R.a}, z{g.input(vec, "z"), vec};
  TV row = pick(L, Rk, k, r - 2);
  TV x = pick(L, row, k, r - 2), y = pick(L, z, k, r - 2);
  // drotg: c, s with c x - s y = +-hypot and c y + s x = 0.
  TV ax = nd(L, "Abs", {x.v}, sc), ay = nd(L, "Abs", {y.v}, sc);
  TV den = nd(L, "Where", {L.op("Greater", {ax.v, ay.v}, sb), ax.v, ay.v}, sc);
  TV xn = nd(L, "Div", {x.v, den.v}, sc), yn = nd(L, "Div", {y.v, den.v}, sc);
  TV h = nd(L, "Add", {L.op("Mul", {xn.v, xn.v}, sc), L.op("Mul", {yn.v, yn.v}, sc)}, sc);
  TV rh = nd(L, "Div", {one, L.op("Sqrt", {h.v}, sc)}, sc);
  Value y0 = L.op("Equal", {y.v, zero}, sb);
  TV c = nd(L, "Where", {y0, one, L.op("Mul", {xn.v, rh.v}, sc)}, sc);
  TV s = nd(L, "Where", {y0, zero, L.op("Neg", {L.op("Mul", {yn.v, rh.v}, sc)}, sc)}, sc);
  TV c1 = unsqueeze(L, c, sc.rank()), s1 = unsqueeze(L, s, sc.rank());
  TV row2 = nd(L, "Sub", {L.op("Mul", {c1.v, row.v}, vec), L.op("Mul", {s1.v, z.v}, vec)}, vec);
  TV z2 = nd(L, "Add", {L.op("Mul", {c1.v, z.v}, vec), L.op("Mul", {s1.v, row.v}, vec)}, vec);
  TV row2u = unsqueeze(L, row2, r - 2);
  TV R2 = nd(L, "Where", {L.op("Equal", {rows, k}, Aval(dtype::boolean, {n, 1})), row2u.v, Rk.v}, R.a);
  GraphRef body = g.end({cin, R2.v, z2.v});
  std::vector<Value> o = L.op_n("Loop", {count(L, n), scalar(L, dtype::boolean, 1), R.v, w.v},
                                {R.a, vec}, {Attr::graph("body", body)});
  L.bind(0, o[0]);
}

}  // namespace lax_linalg_iter
