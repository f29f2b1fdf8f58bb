// The Householder primitives beyond QR: ormqr (apply Q from geqrf without
// forming it), hessenberg (gehrd) and tridiagonal (sytrd), one reflector per
// ONNX Loop step, with LAPACK's conventions (dlarfg: the column maps to
// beta e_p, beta = -sign(alpha) ||x|| with sign(0) = +1; the stored vector has
// v_p = 1; tau = 0 and nothing applied when x is already zero below p), so
// the outputs match JAX's CPU (LAPACK) results to rounding, signs included.
// The matrix dims may be symbolic (sizes.hpp: trip counts, iotas, masks and
// flips then come from the input's Shape at run time), batch dims too.
#include "util.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

namespace lax_linalg_iter {

namespace {

TV reduce_sum(Lowering& L, const TV& x, int64_t axis) {
  Shape s = x.a.shape;
  s[static_cast<size_t>(axis)] = Dim(1);
  return nd(L, "ReduceSum", {x.v, i64s(L, {axis})}, x.a.with_shape(s), {Attr::i("keepdims", 1)});
}

// dlarfg on the column x [..., n, 1] at pivot row p (an int64 scalar): the
// rows above p are not part of the vector.
struct Reflector {
  TV u;     // [..., n, 1]: 0 above p, 1 at p, x / (alpha - beta) below
  TV tau;   // [..., 1, 1]
  TV diag;  // [..., 1, 1]: beta, or alpha when no reflection
};

Reflector reflector(Lowering& L, const TV& x, Value p, Value rows) {
  int32_t dt = x.a.dtype;
  Dim n = dim(x.a, 2);
  Aval col = x.a, one = x.a.with_shape(batch_then(x.a, {1, 1}));
  Aval ob = one.with_dtype(dtype::boolean), mb(dtype::boolean, {n, 1});
  Value zero = scalar(L, dt, 0.0), onev = scalar(L, dt, 1.0);
  Value at = L.op("Equal", {rows, p}, mb), below_m = L.op("Greater", {rows, p}, mb);
  TV below = nd(L, "Where", {below_m, x.v, zero}, col);
  TV alpha = reduce_sum(L, nd(L, "Where", {at, x.v, zero}, col), col.rank() - 2);
  TV bn2 = reduce_sum(L, nd(L, "Mul", {below.v, below.v}, col), col.rank() - 2);
  TV skip = nd(L, "Equal", {bn2.v, zero}, ob);
  TV nrm = nd(L, "Sqrt", {L.op("Add", {L.op("Mul", {alpha.v, alpha.v}, one), bn2.v}, one)}, one);
  TV sg = nd(L, "Where", {L.op("GreaterOrEqual", {alpha.v, zero}, ob), onev, scalar(L, dt, -1.0)}, one);
  TV beta = nd(L, "Neg", {L.op("Mul", {sg.v, nrm.v}, one)}, one);
  TV vj = nd(L, "Sub", {alpha.v, beta.v}, one);
  TV tau = nd(L, "Where", {skip.v, zero, L.op("Div", {L.op("Sub", {beta.v, alpha.v}, one), beta.v}, one)}, one);
  TV vs = nd(L, "Where", {skip.v, onev, vj.v}, one);
  TV u = nd(L, "Where", {at, onev, L.op("Div", {below.v, vs.v}, col)}, col);
  TV diag = nd(L, "Where", {skip.v, alpha.v, beta.v}, one);
  return {u, tau, diag};
}

// Column j of x [..., n, m] as [..., n, 1].
TV column(Lowering& L, const TV& x, Value j) {
  Shape s = x.a.shape;
  s.back() = Dim(1);
  Value j1 = L.op("Unsqueeze", {j, i64s(L, {0})}, Aval(dtype::i64, {1}));
  return nd(L, "Gather", {x.v, j1}, x.a.with_shape(s), {Attr::i("axis", x.a.rank() - 1)});
}

// taus [..., k] with entry j replaced by t [..., 1, 1].
TV put_tau(Lowering& L, const TV& taus, Value j, const TV& t, Value kidx) {
  Shape s = taus.a.shape;
  s.back() = Dim(1);
  Value t1 = reshape(L, t.v, t.a, taus.a.with_shape(s));
  Dim k = taus.a.shape.back();
  return nd(L, "Where", {L.op("Equal", {kidx, j}, Aval(dtype::boolean, {k})), t1, taus.v}, taus.a);
}

// Zero taus [..., n - 1] for an n x n matrix: [..., max(n - 1, 0)] at run
// time when n is symbolic (JAX's n - 1 would be -1 at n = 0).
TV zero_taus(Lowering& L, const Aval& tau_a, const Dim& n) {
  if (n.is_static()) return zeros(L, tau_a);
  Shape s = tau_a.shape;
  s.back() = n;
  TV z = zeros(L, tau_a.with_shape(s));
  Value end = i64s(L, {INT64_MAX});
  return nd(L, "Slice", {z.v, i64s(L, {1}), end, i64s(L, {tau_a.rank() - 1})}, tau_a);
}

// n - 1 .. 0 as int64 [n].
Value reversed(Lowering& L, const Dim& n) {
  if (n.is_static()) {
    std::vector<int64_t> rev;
    for (int64_t i = n.value - 1; i >= 0; --i) rev.push_back(i);
    return L.constant(rev, {n.value});
  }
  return L.op("Sub", {last_index(L, n), iota(L, n)}, Aval(dtype::i64, {n}));
}

// The Loop step of the tridiagonal reduction (lower), on the full symmetric
// S: reflector i (pivot i + 1) of column i, then S22 -= u w^T + w u^T with
// w = tau S u - (tau / 2)(w^T u) u (dsytd2), and column i stores beta / u.
std::pair<TV, TV> sytrd_lower(Lowering& L, const TV& S0, const Dim& n) {
  int32_t dt = S0.a.dtype;
  int64_t r = S0.a.rank();
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Aval tau_a = S0.a.with_shape(batch_then(S0.a, {dim_add(n, -1)}));
  Value rows = iota(L, n, 0, 2), kidx = iota(L, dim_add(n, -1));
  // A computed iota outside the body (once); a constant where it always was.
  Value cols = n.is_static() ? kNoValue : iota(L, n, 1, 2);
  Subgraph g = L.begin_subgraph("sytrd_body");
  Value i = g.input(isc, "i");
  Value cin = g.input(bsc, "cond_in");
  TV S{g.input(S0.a, "s"), S0.a}, taus{g.input(tau_a, "taus"), tau_a};
  Value p = L.op("Add", {i, scalar(L, dtype::i64, 1.0)}, isc);
  TV x = column(L, S, i);
  Reflector h = reflector(L, x, p, rows);
  Aval col = x.a;
  Value active = L.op("GreaterOrEqual", {rows, p}, Aval(dtype::boolean, {n, 1}));
  TV su = nd(L, "MatMul", {S.v, h.u.v}, col);
  TV w = nd(L, "Mul", {h.tau.v, nd(L, "Where", {active, su.v, scalar(L, dt, 0.0)}, col).v}, col);
  TV wu = reduce_sum(L, nd(L, "Mul", {w.v, h.u.v}, col), r - 2);
  TV alpha = nd(L, "Mul", {L.op("Mul", {scalar(L, dt, -0.5), h.tau.v}, h.tau.a), wu.v}, h.tau.a);
  w = nd(L, "Add", {w.v, L.op("Mul", {alpha.v, h.u.v}, col)}, col);
  TV ut = transpose_last(L, h.u), wt = transpose_last(L, w);
  TV upd = nd(L, "Add", {L.op("MatMul", {h.u.v, wt.v}, S.a), L.op("MatMul", {w.v, ut.v}, S.a)}, S.a);
  TV S2 = nd(L, "Sub", {S.v, upd.v}, S.a);
  Aval mb(dtype::boolean, {n, 1});
  TV newcol = nd(L, "Where", {L.op("Equal", {rows, p}, mb), h.diag.v,
                              L.op("Where", {L.op("Greater", {rows, p}, mb), h.u.v, x.v}, col)},
                 col);
  if (n.is_static()) cols = iota(L, n, 1, 2);
  Value is_col = L.op("Equal", {cols, i}, Aval(dtype::boolean, {1, n}));
  TV S3 = nd(L, "Where", {is_col, newcol.v, S2.v}, S.a);
  TV taus2 = put_tau(L, taus, i, h.tau, kidx);
  GraphRef body = g.end({cin, S3.v, taus2.v});
  std::vector<Value> o = L.op_n("Loop", {count_plus(L, n, -1), scalar(L, dtype::boolean, 1), S0.v,
                                         zero_taus(L, tau_a, n).v},
                                {S0.a, tau_a}, {Attr::graph("body", body)});
  return {TV{o[0], S0.a}, TV{o[1], tau_a}};
}

// x [..., n, n] with rows and columns in reverse order (J x J).
TV flip(Lowering& L, const TV& x, const Dim& n) {
  int64_t r = x.a.rank();
  Value idx = reversed(L, n);
  TV a = nd(L, "Gather", {x.v, idx}, x.a, {Attr::i("axis", r - 1)});
  return nd(L, "Gather", {a.v, idx}, x.a, {Attr::i("axis", r - 2)});
}

TV flip_last(Lowering& L, const TV& x) {
  return nd(L, "Gather", {x.v, reversed(L, x.a.shape.back())}, x.a, {Attr::i("axis", x.a.rank() - 1)});
}

// The diagonal (offset 0) or subdiagonal (offset 1) of x [..., n, n].
TV diagonal(Lowering& L, const TV& x, const Dim& n, int64_t offset) {
  int64_t r = x.a.rank();
  Value mask = index_mask(L, "Equal", n, n, offset);
  TV sel = nd(L, "Where", {mask, x.v, scalar(L, x.a.dtype, 0.0)}, x.a);
  Shape s(x.a.shape.begin(), x.a.shape.end() - 2);
  s.push_back(Dim(n));
  TV sum = nd(L, "ReduceSum", {sel.v, i64s(L, {r - 2})}, x.a.with_shape(s), {Attr::i("keepdims", 0)});
  if (offset == 0) return sum;
  return slice_to(L, sum, r - 2, dim_add(n, -offset));
}

}  // namespace

// ormqr(a, taus, c; left, transpose): Q c, Q^T c, c Q or c Q^T with
// Q = H_0 ... H_{k-1} from a's reflectors, one H_i applied per Loop step
// (JAX's own lowering, LAPACK's dorm2r).
void lower_ormqr(Lowering& L) {
  TV a{L.input(0), L.in_aval(0)}, taus{L.input(1), L.in_aval(1)}, c{L.input(2), L.in_aval(2)};
  require_float(L, a.a, 2);
  require_float(L, c.a, 2);
  bool left = L.param("left").as_bool(), trans = L.param("transpose").as_bool();
  int64_t r = a.a.rank();
  Dim m = dim(a.a, 2), k = dim(taus.a, 1);
  if (k.is_static() && k.value == 0) return L.bind(0, c.v);
  bool reverse = left != trans;
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Value rows = iota(L, m, 0, 2), last = last_index(L, k);
  int32_t dt = a.a.dtype;
  Subgraph g = L.begin_subgraph("ormqr_body");
  Value it = g.input(isc, "it");
  Value cin = g.input(bsc, "cond_in");
  TV C{g.input(c.a, "c"), c.a};
  Value j = reverse ? L.op("Sub", {last, it}, isc) : it;
  TV x = column(L, a, j);  // [..., m, 1]
  Aval mb(dtype::boolean, {m, 1});
  TV v = nd(L, "Where", {L.op("Greater", {rows, j}, mb), x.v,
                         L.op("Where", {L.op("Equal", {rows, j}, mb), scalar(L, dt, 1.0), scalar(L, dt, 0.0)},
                              Aval(dt, {m, 1}))},
            x.a);
  Shape ts = taus.a.shape;
  ts.back() = Dim(1);
  Value j1 = L.op("Unsqueeze", {j, i64s(L, {0})}, Aval(dtype::i64, {1}));
  TV tau = nd(L, "Gather", {taus.v, j1}, taus.a.with_shape(ts), {Attr::i("axis", taus.a.rank() - 1)});
  tau = unsqueeze(L, tau, tau.a.rank());  // [..., 1, 1]
  TV upd;
  if (left) {  // C - tau v (v^T C)
    TV vtc = reduce_sum(L, nd(L, "Mul", {v.v, C.v}, C.a), r - 2);
    upd = nd(L, "Mul", {v.v, vtc.v}, C.a);
  } else {  // C - tau (C v) v^T
    TV vt = transpose_last(L, v);
    TV cv = reduce_sum(L, nd(L, "Mul", {C.v, vt.v}, C.a), r - 1);
    upd = nd(L, "Mul", {cv.v, vt.v}, C.a);
  }
  TV C2 = nd(L, "Sub", {C.v, L.op("Mul", {tau.v, upd.v}, C.a)}, C.a);
  GraphRef body = g.end({cin, C2.v});
  L.bind(0, L.op_n("Loop", {count(L, k), scalar(L, dtype::boolean, 1), c.v}, {c.a},
                   {Attr::graph("body", body)})[0]);
}

// hessenberg(a): gehrd. Step j reflects column j below row j + 1, applies
// H from the right to every row and from the left to the columns after j
// (dgehd2's order), and stores beta and the reflector in column j. The last
// tau (of a one-entry column) is 0, as LAPACK's.
void lower_hessenberg(Lowering& L) {
  TV A{L.input(0), L.in_aval(0)};
  require_float(L, A.a, 2);
  int64_t r = A.a.rank();
  Dim n = dim(A.a, 1);
  Aval tau_a = L.out_aval(1);
  if (n.is_static() && n.value <= 1) {
    L.bind(0, A.v);
    L.bind(1, zeros(L, tau_a).v);
    return;
  }
  int32_t dt = A.a.dtype;
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Value rows = iota(L, n, 0, 2), kidx = iota(L, dim_add(n, -1));
  Value cols = iota(L, n, 1, 2);
  Subgraph g = L.begin_subgraph("gehrd_body");
  Value j = g.input(isc, "j");
  Value cin = g.input(bsc, "cond_in");
  TV a{g.input(A.a, "a"), A.a}, taus{g.input(tau_a, "taus"), tau_a};
  Value p = L.op("Add", {j, scalar(L, dtype::i64, 1.0)}, isc);
  TV x = column(L, a, j);
  Reflector h = reflector(L, x, p, rows);
  TV ut = transpose_last(L, h.u);
  // Right: a - (a u) tau u^T.
  TV au = nd(L, "MatMul", {a.v, h.u.v}, x.a);
  TV a1 = nd(L, "Sub", {a.v, L.op("Mul", {au.v, L.op("Mul", {h.tau.v, ut.v}, ut.a)}, a.a)}, a.a);
  // Left, on the columns after j: a - u tau (u^T a).
  TV uta = reduce_sum(L, nd(L, "Mul", {h.u.v, a1.v}, a.a), r - 2);
  TV left = nd(L, "Mul", {h.u.v, L.op("Mul", {h.tau.v, uta.v}, uta.a)}, a.a);
  Aval nb(dtype::boolean, {1, n}), mb(dtype::boolean, {n, 1});
  TV a2 = nd(L, "Sub", {a1.v, L.op("Where", {L.op("Greater", {cols, j}, nb), left.v, scalar(L, dt, 0.0)}, a.a)},
             a.a);
  TV newcol = nd(L, "Where", {L.op("Equal", {rows, p}, mb), h.diag.v,
                              L.op("Where", {L.op("Greater", {rows, p}, mb), h.u.v, x.v}, x.a)},
                 x.a);
  TV a3 = nd(L, "Where", {L.op("Equal", {cols, j}, nb), newcol.v, a2.v}, a.a);
  TV taus2 = put_tau(L, taus, j, h.tau, kidx);
  GraphRef body = g.end({cin, a3.v, taus2.v});
  std::vector<Value> o = L.op_n("Loop", {count_plus(L, n, -1), scalar(L, dtype::boolean, 1), A.v,
                                         zero_taus(L, tau_a, n).v},
                                {A.a, tau_a}, {Attr::graph("body", body)});
  L.bind(0, o[0]);
  L.bind(1, o[1]);
}

// tridiagonal(a; lower): sytrd. Works on the symmetric matrix of the
// triangle JAX reads; upper is the lower algorithm on J a J (rows and
// columns reversed, which maps dsytd2's upper sweep onto its lower one).
// Outputs (a, d, e, taus): a's triangle holds d, e and the reflectors, its
// other strict triangle is the input's, untouched as LAPACK leaves it.
void lower_tridiagonal(Lowering& L) {
  TV A{L.input(0), L.in_aval(0)};
  require_float(L, A.a, 2);
  int64_t r = A.a.rank();
  Dim n = dim(A.a, 1);
  bool lower = L.param("lower").as_bool();
  if (n.is_static() && n.value == 0) L.fail("tridiagonal: empty matrix " + A.a.str());
  bool several = !n.is_static() || n.value > 1;  // a symbolic n runs the (maybe empty) Loop
  TV B = lower ? A : flip(L, A, n);
  Value low = index_mask(L, "GreaterOrEqual", n, n);
  TV S = nd(L, "Where", {low, B.v, transpose_last(L, B).v}, B.a);
  TV out = S, taus = zeros(L, L.out_aval(3));
  if (several) std::tie(out, taus) = sytrd_lower(L, S, n);
  out = nd(L, "Where", {low, out.v, B.v}, B.a);
  TV d = diagonal(L, out, n, 0);
  TV e = several ? diagonal(L, out, n, 1) : zeros(L, L.out_aval(2));
  if (!lower) {
    out = flip(L, out, n);
    d = flip_last(L, d);
    if (several) {
      e = flip_last(L, e);
      taus = flip_last(L, taus);
    }
  }
  L.bind(0, out.v);
  L.bind(1, d.v);
  L.bind(2, e.v);
  L.bind(3, taus.v);
}

}  // namespace lax_linalg_iter
