// eigh and svd: Jacobi rotations in an ONNX Loop, one round of the
// round-robin (tournament) pair schedule per Loop step: n/2 disjoint pairs
// at once, each index i rotating with partner(i) by c_i, s_i, which makes a
// step two Gathers and elementwise ops. The schedule, eye, iota, tolerances
// and trip count come from the matrix size at run time when it is symbolic
// (one model for every n, 0 and 1 included), as constants when static.
//
// - eigh: cyclic two-sided Jacobi. It stops after the first sweep in which
//   every pair had a_pq^2 <= (n eps)^2 (|a_pp a_qq| + |A|_F^2 / n) (at most
//   kMaxSweeps): relative accuracy where it is reachable, else eps |A| as
//   syevd. Eigenvalues ascending (TopK), eigenvectors' signs are whatever
//   Jacobi gives (JAX/LAPACK fix none either). Only the `lower` (or upper)
//   triangle is read.
// - svd: one-sided (Hestenes) Jacobi on the columns of A, the same rotation
//   kernel on the Gram entries. Singular values descending; u's columns are
//   the rotated columns over their norms (a zero singular value gives a zero
//   column of u, where LAPACK gives some orthonormal completion). Stops
//   after a sweep in which every pair had gamma^2 <= (max(m, n) eps)^2
//   (alpha beta + eps^2 |A|_F^4). Static m < n works on A^T (fewer, longer
//   columns); full_matrices with m != n completes u with a Householder QR
//   first: A = Q R, svd(R[:n]) = Ur S V^T, u = Q diag(Ur, I). With a
//   symbolic m or n the n columns are orthogonalized whatever m is, and the
//   n values cut to min(m, n) at run time; full_matrices then needs m and n
//   to be one symbol (a square matrix).
#include "util.hpp"

#include <jaxonnx/complex.hpp>
#include <jaxonnx/empty_result.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lax_linalg_iter {

namespace {

constexpr int64_t kMaxSweeps = 30;

double eps_of(int32_t dt) { return dt == dtype::f32 ? 1.1920928955078125e-07 : 2.220446049250313e-16; }
double tiny_of(int32_t dt) { return dt == dtype::f32 ? 1.1754943508222875e-38 : 2.2250738585072014e-308; }

// The columns of `x` [..., r, c] reordered by idx [..., c] (int64).
TV gather_cols(Lowering& L, const TV& x, const TV& idx) {
  Shape s = idx.a.shape;
  s.insert(s.end() - 1, Dim(1));
  Value u = L.op("Unsqueeze", {idx.v, i64s(L, {idx.a.rank() - 1})}, idx.a.with_shape(s));
  Value full = expand_to(L, u, x.a.with_dtype(dtype::i64));
  return nd(L, "GatherElements", {x.v, full}, x.a, {Attr::i("axis", x.a.rank() - 1)});
}

// TopK over the last axis, all n of them, sorted.
std::pair<TV, TV> sort_last(Lowering& L, const TV& x, bool descending) {
  std::vector<Value> o =
      L.op_n("TopK", {x.v, dim_value(L, x.a.shape.back())}, {x.a, x.a.with_dtype(dtype::i64)},
             {Attr::i("axis", x.a.rank() - 1), Attr::i("largest", descending ? 1 : 0), Attr::i("sorted", 1)});
  return {TV{o[0], x.a}, TV{o[1], x.a.with_dtype(dtype::i64)}};
}

// The round-robin schedule for n indices: R = n' - 1 rounds (n' = n rounded
// up to even); in each, partner[i] is i's pair (i itself when paired with the
// dummy of odd n) and role[i] is +1 for the smaller index of a pair, -1 for
// the larger, 0 when unpaired. Index 0 stays put, the others rotate one
// place per round (the pairs are positions p and n' - 1 - p).
struct Schedule {
  Value partner, role;  // [R, n]: int64, float
  Value rounds, last;   // R and R - 1, int64 scalars
  Value trips;          // R * kMaxSweeps
};

Schedule schedule(Lowering& L, const Dim& nd_, int32_t dt) {
  Aval isc(dtype::i64, {});
  if (nd_.is_static()) {
    int64_t n = nd_.value, N = n + (n % 2), R = N - 1;
    std::vector<int64_t> idx, partner;
    std::vector<double> role;
    for (int64_t i = 0; i < N; ++i) idx.push_back(i);
    for (int64_t r = 0; r < R; ++r) {
      std::vector<int64_t> p(static_cast<size_t>(n));
      std::vector<double> ro(static_cast<size_t>(n), 0.0);
      for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
      for (int64_t k = 0; k < N / 2; ++k) {
        int64_t a = idx[static_cast<size_t>(k)], b = idx[static_cast<size_t>(N - 1 - k)];
        if (a < n && b < n) {
          p[static_cast<size_t>(a)] = b;
          p[static_cast<size_t>(b)] = a;
          ro[static_cast<size_t>(std::min(a, b))] = 1.0;
          ro[static_cast<size_t>(std::max(a, b))] = -1.0;
        }
      }
      partner.insert(partner.end(), p.begin(), p.end());
      role.insert(role.end(), ro.begin(), ro.end());
      int64_t last = idx.back();
      idx.pop_back();
      idx.insert(idx.begin() + 1, last);
    }
    return {L.constant(partner, {R, n}), fconst(L, dt, role, {R, n}), scalar(L, dtype::i64, double(R)),
            scalar(L, dtype::i64, double(R - 1)), scalar(L, dtype::i64, double(R * kMaxSweeps))};
  }
  // The same tables in closed form, from n at run time: in round r, index
  // e >= 1 sits at position 1 + (e - 1 + r) mod (n' - 1), and position q >= 1
  // holds index 1 + (q - 1 - r) mod (n' - 1).
  auto op = [&](const char* o, std::vector<Value> in, const Aval& a) { return L.op(o, in, a); };
  auto i64 = [&](double x) { return scalar(L, dtype::i64, x); };
  Value n = count(L, nd_);
  Value N = op("Add", {n, op("Mod", {n, i64(2)}, isc)}, isc);
  Value M = op("Sub", {N, i64(1)}, isc);
  Value R = op("Max", {M, i64(0)}, isc);  // no round (and no Loop step) at n = 0
  Dim Rd = Dim::sym("jacobi_rounds(" + nd_.symbol + ")");
  Aval tab(dtype::i64, {Rd, nd_}), row(dtype::i64, {1, nd_}), col(dtype::i64, {Rd, 1});
  Value e = iota(L, nd_, 1, 2);
  Value r = L.op("Unsqueeze", {L.op("Range", {i64(0), R, i64(1)}, Aval(dtype::i64, {Rd})), i64s(L, {1})}, col);
  Value pos = op("Where", {op("Equal", {e, i64(0)}, row.with_dtype(dtype::boolean)), i64(0),
                           op("Add", {i64(1), op("Mod", {op("Add", {op("Sub", {e, i64(1)}, row), r}, tab), M}, tab)},
                              tab)},
                 tab);
  Value q = op("Sub", {op("Sub", {N, i64(1)}, isc), pos}, tab);
  Value el = op("Where", {op("Equal", {q, i64(0)}, tab.with_dtype(dtype::boolean)), i64(0),
                          op("Add", {i64(1), op("Mod", {op("Sub", {op("Sub", {q, i64(1)}, tab), r}, tab), M}, tab)},
                             tab)},
                tab);
  Aval tb = tab.with_dtype(dtype::boolean);
  Value part = op("Where", {op("GreaterOrEqual", {el, n}, tb), e, el}, tab);
  Aval ft(dt, {Rd, nd_});
  Value role = op("Where", {op("Equal", {part, e}, tb), scalar(L, dt, 0.0),
                            op("Where", {op("Less", {e, part}, tb), scalar(L, dt, 1.0), scalar(L, dt, -1.0)}, ft)},
                  ft);
  return {part, role, R, op("Sub", {R, i64(1)}, isc), op("Mul", {R, i64(double(kMaxSweeps))}, isc)};
}

// Jacobi rotations on X [..., rows, n] (columns; rows too when two_sided, X
// then square and symmetric), accumulated into V [..., n, n]. Per index i
// with partner j: d_i, d_j the diagonal (of X, or of X^T X), g_i the (i, j)
// entry; the rotation that zeroes g is t = sign(th) / (|th| + sqrt(th^2 +
// 1)), th = (d_q - d_p) / (2 g), from the pair's smaller index p, and index i
// applies c, role_i * s: x_i <- c x_i - s_i x_j.
//
// Complex (Xi, Vi: the imaginary parts, carried beside X, V): g_i is complex
// (A[i, j] of a Hermitian A, or x_i^H x_j); the real rotation is computed
// from |g_i| and the partner's column is first turned by the phase
// ph_i = conj(g_i) / |g_i| (1 where g_i = 0): x_i <- c x_i - s_i ph_i x_j,
// rows (two-sided) with conj(ph_i). For the pair (p, q), ph_q = conj(ph_p),
// so the 2x2 step [[c, s conj(ph)], [-s ph, c]] is unitary and zeroes g.
struct Rotated {
  TV x, v, xi, vi;  // xi, vi: kNoValue when real
};
Rotated jacobi(Lowering& L, TV X, TV V, bool two_sided, TV Xi = {kNoValue, {}}, TV Vi = {kNoValue, {}}) {
  const bool cx = Xi.v != kNoValue;
  int32_t dt = X.a.dtype;
  int64_t r = X.a.rank();
  Dim n = dim(X.a, 1);
  if (n.is_static() && n.value < 2) return {X, V, Xi, Vi};
  Schedule sch = schedule(L, n, dt);
  Value eyen = eye(L, dt, n, n);
  Value iotan = iota(L, n);
  double eps = eps_of(dt);
  Dim big = dim_max(n, dim(X.a, 2));
  Value tol2;
  if (big.is_static()) {
    double tol = double(big.value) * eps;
    tol2 = scalar(L, dt, tol * tol);
  } else {
    Value tol = L.op("Mul", {fcount(L, big, dt), scalar(L, dt, eps)}, Aval(dt, {}));
    tol2 = L.op("Mul", {tol, tol}, Aval(dt, {}));
  }
  Aval sc(dt, {});
  Aval isc(dtype::i64, {});
  Aval bsc(dtype::boolean, {});
  Aval vecA = X.a.with_shape(batch_then(X.a, {n}));
  Aval rowA = X.a.with_shape(batch_then(X.a, {1, n}));

  Subgraph g = L.begin_subgraph("jacobi_body");
  Value iter = g.input(isc, "iter");
  g.input(bsc, "cond_in");
  TV x{g.input(X.a, "x"), X.a};
  TV v{g.input(V.a, "v"), V.a};
  TV xi{cx ? g.input(X.a, "xi") : kNoValue, X.a};
  TV vi{cx ? g.input(V.a, "vi") : kNoValue, V.a};
  Value mx = g.input(sc, "sweep_max");

  Value k = L.op("Mod", {iter, sch.rounds}, isc);
  Value part = L.op("Gather", {sch.partner, k}, Aval(dtype::i64, {n}), {Attr::i("axis", 0)});
  Value ro = L.op("Gather", {sch.role, k}, Aval(dt, {n}), {Attr::i("axis", 0)});
  TV d, gij, fro2, gim;  // gim: the imaginary part of g (complex)
  if (two_sided) {
    // onehot[i, j] = (j == partner[i])
    Value hot = L.op("Equal", {L.op("Unsqueeze", {part, i64s(L, {1})}, Aval(dtype::i64, {n, 1})), iotan},
                     Aval(dtype::boolean, {n, n}));
    Value hotf = cast(L, hot, Aval(dtype::boolean, {n, n}), dt);
    d = reduce(L, "ReduceSum", nd(L, "Mul", {x.v, eyen}, x.a), r - 1, false);
    // (a_pq + a_qp) / 2: rounding leaves x slightly asymmetric, and a pair
    // must see one g, else its two c, s differ and the rotation is not
    // orthogonal (near convergence g is itself of the order of that noise).
    TV gi = reduce(L, "ReduceSum", nd(L, "Mul", {x.v, hotf}, x.a), r - 1, false);
    TV gp = nd(L, "Gather", {gi.v, part}, gi.a, {Attr::i("axis", r - 2)});
    gij = nd(L, "Mul", {nd(L, "Add", {gi.v, gp.v}, gi.a).v, scalar(L, dt, 0.5)}, gi.a);
    TV sq = nd(L, "Mul", {x.v, x.v}, x.a);
    if (cx) {  // (a_ij + conj(a_ji)) / 2
      TV hi = reduce(L, "ReduceSum", nd(L, "Mul", {xi.v, hotf}, x.a), r - 1, false);
      TV hp = nd(L, "Gather", {hi.v, part}, hi.a, {Attr::i("axis", r - 2)});
      gim = nd(L, "Mul", {nd(L, "Sub", {hi.v, hp.v}, hi.a).v, scalar(L, dt, 0.5)}, hi.a);
      sq = nd(L, "Add", {sq.v, nd(L, "Mul", {xi.v, xi.v}, x.a).v}, x.a);
    }
    fro2 = reduce(L, "ReduceSum", reduce(L, "ReduceSum", sq, r - 1, false), r - 2, false);
  } else if (!cx) {
    TV sq = nd(L, "Mul", {x.v, x.v}, x.a);
    d = reduce(L, "ReduceSum", sq, r - 2, false);
    TV xp = nd(L, "Gather", {x.v, part}, x.a, {Attr::i("axis", r - 1)});
    gij = reduce(L, "ReduceSum", nd(L, "Mul", {x.v, xp.v}, x.a), r - 2, false);
    fro2 = reduce(L, "ReduceSum", d, r - 2, false);
  } else {  // g_i = x_i^H x_j
    TV sq = nd(L, "Add", {nd(L, "Mul", {x.v, x.v}, x.a).v, nd(L, "Mul", {xi.v, xi.v}, x.a).v}, x.a);
    d = reduce(L, "ReduceSum", sq, r - 2, false);
    TV xp = nd(L, "Gather", {x.v, part}, x.a, {Attr::i("axis", r - 1)});
    TV xpi = nd(L, "Gather", {xi.v, part}, x.a, {Attr::i("axis", r - 1)});
    TV re = nd(L, "Add", {nd(L, "Mul", {x.v, xp.v}, x.a).v, nd(L, "Mul", {xi.v, xpi.v}, x.a).v}, x.a);
    TV im = nd(L, "Sub", {nd(L, "Mul", {x.v, xpi.v}, x.a).v, nd(L, "Mul", {xi.v, xp.v}, x.a).v}, x.a);
    gij = reduce(L, "ReduceSum", re, r - 2, false);
    gim = reduce(L, "ReduceSum", im, r - 2, false);
    fro2 = reduce(L, "ReduceSum", d, r - 2, false);
  }
  // Complex: the rotation comes from |g|, the phase ph = conj(g) / |g|.
  TV phr, phi;
  if (cx) {
    Value zero0 = scalar(L, dt, 0.0);
    TV gre = gij;
    gij = nd(L, "Sqrt", {nd(L, "Add", {nd(L, "Mul", {gre.v, gre.v}, vecA).v, nd(L, "Mul", {gim.v, gim.v}, vecA).v},
                            vecA).v},
             vecA);
    Value nz = L.op("Equal", {gij.v, zero0}, vecA.with_dtype(dtype::boolean));
    Value safe = L.op("Where", {nz, scalar(L, dt, 1.0), gij.v}, vecA);
    phr = nd(L, "Where", {nz, scalar(L, dt, 1.0), L.op("Div", {gre.v, safe}, vecA)}, vecA);
    phi = nd(L, "Where", {nz, zero0, L.op("Neg", {L.op("Div", {gim.v, safe}, vecA)}, vecA)}, vecA);
  }
  TV dj = nd(L, "Gather", {d.v, part}, vecA, {Attr::i("axis", r - 2)});
  // Convergence measure of this round: max g^2 / (|d_i d_j| + floor) over
  // the paired indices (an unpaired one's g is its own diagonal).
  TV dd = nd(L, "Abs", {nd(L, "Mul", {d.v, dj.v}, vecA).v}, vecA);
  Aval fa = fro2.a;
  TV fl = two_sided ? (n.is_static() ? nd(L, "Mul", {fro2.v, scalar(L, dt, 1.0 / double(n.value))}, fa)
                                     : nd(L, "Div", {fro2.v, fcount(L, n, dt)}, fa))
                    : nd(L, "Mul", {nd(L, "Mul", {fro2.v, fro2.v}, fa).v, scalar(L, dt, eps * eps)}, fa);
  fl = nd(L, "Add", {fl.v, scalar(L, dt, tiny_of(dt))}, fa);
  Shape fs = fa.shape;
  fs.push_back(Dim(1));
  Value flu = L.op("Unsqueeze", {fl.v, i64s(L, {r - 2})}, fa.with_shape(fs));
  TV g2 = nd(L, "Mul", {gij.v, gij.v}, vecA);
  TV ratio = nd(L, "Div", {g2.v, nd(L, "Add", {dd.v, flu}, vecA).v}, vecA);
  ratio = nd(L, "Mul", {ratio.v, L.op("Abs", {ro}, Aval(dt, {n}))}, vecA);
  Value rmax = L.op("ReduceMax", {ratio.v}, sc, {Attr::i("keepdims", 0)});
  // The rotation.
  Value zero = scalar(L, dt, 0.0), one = scalar(L, dt, 1.0);
  TV th = nd(L, "Div", {nd(L, "Mul", {ro, nd(L, "Sub", {dj.v, d.v}, vecA).v}, vecA).v,
                        nd(L, "Mul", {gij.v, scalar(L, dt, 2.0)}, vecA).v},
             vecA);
  Aval vb = vecA.with_dtype(dtype::boolean);
  TV sg = nd(L, "Where", {nd(L, "GreaterOrEqual", {th.v, zero}, vb).v, one, scalar(L, dt, -1.0)}, vecA);
  TV den = nd(L, "Add", {nd(L, "Abs", {th.v}, vecA).v,
                         nd(L, "Sqrt", {nd(L, "Add", {nd(L, "Mul", {th.v, th.v}, vecA).v, one}, vecA).v}, vecA).v},
              vecA);
  TV t = nd(L, "Mul", {nd(L, "Div", {sg.v, den.v}, vecA).v, ro}, vecA);
  t = nd(L, "Where", {nd(L, "Equal", {gij.v, zero}, vb).v, zero, t.v}, vecA);
  TV c = nd(L, "Div", {one, nd(L, "Sqrt", {nd(L, "Add", {nd(L, "Mul", {t.v, t.v}, vecA).v, one}, vecA).v}, vecA).v},
            vecA);
  TV s = nd(L, "Mul", {t.v, c.v}, vecA);
  Value cr = L.op("Unsqueeze", {c.v, i64s(L, {r - 2})}, rowA);
  Value sr = L.op("Unsqueeze", {s.v, i64s(L, {r - 2})}, rowA);
  auto rot_cols = [&](const TV& y) {
    TV yp = nd(L, "Gather", {y.v, part}, y.a, {Attr::i("axis", r - 1)});
    return nd(L, "Sub", {nd(L, "Mul", {y.v, cr}, y.a).v, nd(L, "Mul", {yp.v, sr}, y.a).v}, y.a);
  };
  if (cx) {
    // y_i <- c y_i - sigma_i y_j (sigma = s ph; conj(sigma) on rows), on
    // the parts (re, im) along `axis`, c and sigma laid out by `at`.
    auto rot = [&](const TV& y, const TV& yi, int64_t axis, bool conj_) {
      int64_t at = axis == r - 1 ? r - 2 : r - 1;
      Aval lay = axis == r - 1 ? rowA : X.a.with_shape(batch_then(X.a, {n, 1}));
      Value cc = L.op("Unsqueeze", {c.v, i64s(L, {at})}, lay);
      Value sgr = L.op("Unsqueeze", {L.op("Mul", {s.v, phr.v}, vecA), i64s(L, {at})}, lay);
      Value sgi = L.op("Unsqueeze", {L.op("Mul", {s.v, phi.v}, vecA), i64s(L, {at})}, lay);
      if (conj_) sgi = L.op("Neg", {sgi}, lay);
      Value yp = L.op("Gather", {y.v, part}, y.a, {Attr::i("axis", axis)});
      Value ypi = L.op("Gather", {yi.v, part}, y.a, {Attr::i("axis", axis)});
      auto mul = [&](Value a, Value b) { return L.op("Mul", {a, b}, y.a); };
      Value re = L.op("Sub", {mul(y.v, cc), L.op("Sub", {mul(yp, sgr), mul(ypi, sgi)}, y.a)}, y.a);
      Value im = L.op("Sub", {mul(yi.v, cc), L.op("Add", {mul(ypi, sgr), mul(yp, sgi)}, y.a)}, y.a);
      return std::make_pair(TV{re, y.a}, TV{im, y.a});
    };
    std::pair<TV, TV> xr = rot(x, xi, r - 1, false);
    if (two_sided) xr = rot(xr.first, xr.second, r - 2, true);
    std::pair<TV, TV> vr = rot(v, vi, r - 1, false);
    TV x2 = xr.first, x2i = xr.second, v2 = vr.first, v2i = vr.second;
    Value mnew = L.op("Max", {mx, rmax}, sc);
    Value at_end = L.op("Equal", {k, sch.last}, bsc);
    Value done = L.op("And", {at_end, L.op("LessOrEqual", {mnew, tol2}, bsc)}, bsc);
    Value cond_out = L.op("Not", {done}, bsc);
    Value m_out = L.op("Where", {at_end, zero, mnew}, sc);
    GraphRef body = g.end({cond_out, x2.v, v2.v, x2i.v, v2i.v, m_out});
    std::vector<Value> res =
        L.op_n("Loop", {sch.trips, scalar(L, dtype::boolean, 1), X.v, V.v, Xi.v, Vi.v, scalar(L, dt, 0.0)},
               {X.a, V.a, X.a, V.a, sc}, {Attr::graph("body", body)});
    return {TV{res[0], X.a}, TV{res[1], V.a}, TV{res[2], X.a}, TV{res[3], V.a}};
  }
  TV x2 = rot_cols(x);
  if (two_sided) {
    Aval colA = X.a.with_shape(batch_then(X.a, {n, 1}));
    Value cc = L.op("Unsqueeze", {c.v, i64s(L, {r - 1})}, colA);
    Value scol = L.op("Unsqueeze", {s.v, i64s(L, {r - 1})}, colA);
    TV xp = nd(L, "Gather", {x2.v, part}, x2.a, {Attr::i("axis", r - 2)});
    x2 = nd(L, "Sub", {nd(L, "Mul", {x2.v, cc}, x2.a).v, nd(L, "Mul", {xp.v, scol}, x2.a).v}, x2.a);
  }
  TV v2 = rot_cols(v);
  // Stop at the end of a sweep in which every pair was converged.
  Value mnew = L.op("Max", {mx, rmax}, sc);
  Value at_end = L.op("Equal", {k, sch.last}, bsc);
  Value done = L.op("And", {at_end, L.op("LessOrEqual", {mnew, tol2}, bsc)}, bsc);
  Value cond_out = L.op("Not", {done}, bsc);
  Value m_out = L.op("Where", {at_end, zero, mnew}, sc);
  GraphRef body = g.end({cond_out, x2.v, v2.v, m_out});

  std::vector<Value> res = L.op_n("Loop", {sch.trips, scalar(L, dtype::boolean, 1), X.v, V.v, scalar(L, dt, 0.0)},
                                  {X.a, V.a, sc}, {Attr::graph("body", body)});
  return {TV{res[0], X.a}, TV{res[1], V.a}, Xi, Vi};
}

// [lo, hi) of subset_by_index, or the whole range (nullopt-like {-1, -1}).
std::pair<int64_t, int64_t> subset(Lowering& L, const Dim& n) {
  if (!L.has_param("subset_by_index")) return {-1, -1};
  Param p = L.param("subset_by_index");
  if (p.is_none()) return {-1, -1};
  std::vector<int64_t> v = p.as_ints();
  if (!n.is_static())
    L.fail(std::string(L.primitive()) + ": subset_by_index needs a static matrix size; " + L.in_aval(0).str() +
           " has a symbolic one");
  if (v.size() != 2 || v[0] < 0 || v[1] > n.value || v[0] > v[1])
    L.fail(std::string(L.primitive()) + ": subset_by_index must be (lo, hi) with 0 <= lo <= hi <= " +
           std::to_string(n.value));
  if (v[0] == 0 && v[1] == n.value) return {-1, -1};
  return {v[0], v[1]};
}

// s [..., k] as a row [..., 1, k] with zeros replaced by ones (a safe divisor).
Value safe_row(Lowering& L, const TV& s) {
  int64_t r = s.a.rank();
  Aval rowA = s.a.with_shape([&] { Shape sh = s.a.shape; sh.insert(sh.end() - 1, Dim(1)); return sh; }());
  Value srow = L.op("Unsqueeze", {s.v, i64s(L, {r - 1})}, rowA);
  Value zero = scalar(L, s.a.dtype, 0.0);
  return L.op("Where", {L.op("Equal", {srow, zero}, rowA.with_dtype(dtype::boolean)), scalar(L, s.a.dtype, 1.0), srow},
              rowA);
}

}  // namespace

void lower_eigh(Lowering& L) {
  TV A{L.input(0), L.in_aval(0)};
  // 0x0 matrices or no matrix (any dtype): empty results; the Jacobi Loop
  // would gather from nothing. (A complex result is carried packed.)
  if (has_static_zero(A.a)) {
    for (size_t k = 0; k < 2; ++k) L.bind(k, empty_of(L, complex::packed(L.out_aval(k))));
    return;
  }
  const bool cx = complex::is(A.a.dtype);
  Cx Ac = cx ? split_parts(L, A) : Cx{A, {kNoValue, {}}};
  require_float(L, Ac.re.a, 2);
  Dim n = dim(A.a, 1);
  if (dim(A.a, 2) != n) L.fail("eigh: operand " + A.a.str() + " is not square");
  bool lower = L.param("lower").as_bool();
  auto [lo, hi] = subset(L, n);
  const Aval pa = Ac.re.a;
  int64_t r = pa.rank();
  // The symmetric (Hermitian) matrix of the triangle JAX reads; a complex
  // diagonal's imaginary part is not read (Hermitian: it is zero).
  TV At = transpose_last(L, Ac.re);
  Value keep = index_mask(L, lower ? "GreaterOrEqual" : "LessOrEqual", n, n);
  TV S = nd(L, "Where", {keep, Ac.re.v, At.v}, pa);
  TV V0{expand_to(L, eye(L, pa.dtype, n, n), pa), pa};
  TV Si{kNoValue, {}}, V0i{kNoValue, {}};
  if (cx) {
    TV Ait = transpose_last(L, Ac.im);
    TV h = nd(L, "Where", {keep, Ac.im.v, L.op("Neg", {Ait.v}, pa)}, pa);
    Si = nd(L, "Where", {index_mask(L, "Equal", n, n), scalar(L, pa.dtype, 0.0), h.v}, pa);
    V0i = zeros(L, pa);
  }
  Rotated J = jacobi(L, S, V0, true, Si, V0i);
  TV w = reduce(L, "ReduceSum", nd(L, "Mul", {J.x.v, eye(L, pa.dtype, n, n)}, pa), r - 1, false);
  auto [ws, idx] = sort_last(L, w, false);
  TV vs = gather_cols(L, J.v, idx);
  TV vsi = cx ? gather_cols(L, J.vi, idx) : TV{kNoValue, {}};
  if (lo >= 0) {
    ws = slice_to(L, ws, r - 2, Dim(hi), lo);
    vs = slice_to(L, vs, r - 1, Dim(hi), lo);
    if (cx) vsi = slice_to(L, vsi, r - 1, Dim(hi), lo);
  }
  L.bind(0, cx ? complex::pack(L, vs.v, vsi.v, vs.a.with_dtype(A.a.dtype)) : vs.v);
  L.bind(1, ws.v);
}

// One-sided Jacobi on the n columns of W [..., m, n] (Wi: its imaginary
// part when complex): the singular values sorted descending and, with `uv`,
// the matching left vectors (W's rotated columns over their norms) and right
// vectors (the accumulated rotations).
struct SortedSvd {
  TV s;
  Cx u, v;
};
SortedSvd one_sided_jacobi(Lowering& L, const Cx& W, const Dim& n, bool uv) {
  const bool cx = W.im.v != kNoValue;
  const Aval wa = W.re.a;
  const int64_t r = wa.rank();
  Aval va = wa.with_shape(batch_then(wa, {n, n}));
  TV V0{expand_to(L, eye(L, wa.dtype, n, n), va), va};
  Rotated J = jacobi(L, W.re, V0, false, W.im, cx ? zeros(L, va) : TV{kNoValue, {}});
  TV sq = nd(L, "Mul", {J.x.v, J.x.v}, wa);
  if (cx) sq = nd(L, "Add", {sq.v, nd(L, "Mul", {J.xi.v, J.xi.v}, wa).v}, wa);
  TV s = nd(L, "Sqrt", {reduce(L, "ReduceSum", sq, r - 2, false).v}, wa.with_shape(batch_then(wa, {n})));
  auto [ss, idx] = sort_last(L, s, true);
  TV none{kNoValue, {}};
  if (!uv) return {ss, {none, none}, {none, none}};
  Cx Us{gather_cols(L, J.x, idx), cx ? gather_cols(L, J.xi, idx) : none};
  Cx Vs{gather_cols(L, J.v, idx), cx ? gather_cols(L, J.vi, idx) : none};
  Value srow = safe_row(L, ss);
  Us.re = nd(L, "Div", {Us.re.v, srow}, Us.re.a);
  if (cx) Us.im = nd(L, "Div", {Us.im.v, srow}, Us.im.a);
  return {ss, Us, Vs};
}

// x[..., start:end] along `axis` of both parts.
Cx slice_parts(Lowering& L, const Cx& x, int64_t axis, const Dim& end, int64_t start = 0) {
  return {slice_to(L, x.re, axis, end, start),
          x.im.v == kNoValue ? x.im : slice_to(L, x.im, axis, end, start)};
}

// x^H (x^T when real).
Cx adjoint(Lowering& L, const Cx& x) {
  TV re = transpose_last(L, x.re);
  if (x.im.v == kNoValue) return {re, x.im};
  TV im = transpose_last(L, x.im);
  return {re, nd(L, "Neg", {im.v}, im.a)};
}

void lower_svd(Lowering& L) {
  TV A{L.input(0), L.in_aval(0)};
  const bool cx = complex::is(A.a.dtype);
  Cx Ac = cx ? split_parts(L, A) : Cx{A, {kNoValue, {}}};
  require_float(L, Ac.re.a, 2);
  bool full = L.param("full_matrices").as_bool();
  bool uv = L.param("compute_uv").as_bool();
  int64_t r = A.a.rank();
  Dim m = dim(A.a, 2), n = dim(A.a, 1);
  if (has_static_zero(A.a)) {
    // No singular value (or no matrix): s is empty, u and vh are what JAX
    // gives, identities (full_matrices' m x m or n x n) or empty.
    for (size_t k = 0; k < (uv ? 3u : 1u); ++k) {
      Aval o = L.out_aval(k), p = complex::part(o);
      if (has_static_zero(o)) {
        L.bind(k, empty_of(L, complex::packed(o)));
        continue;
      }
      Value e = expand_to(L, eye(L, p.dtype, dim(o, 2), dim(o, 1)), p);
      L.bind(k, cx ? complex::from_real(L, e, p, o) : e);
    }
    return;
  }
  auto out = [&](size_t k, const Cx& x) {
    L.bind(k, cx ? complex::pack(L, x.re.v, x.im.v, x.re.a.with_dtype(A.a.dtype)) : x.re.v);
  };
  if (!all_static({m, n})) {
    // Jacobi on the n columns works for any m; the n singular values are
    // cut to min(m, n) at run time.
    if (uv && full && m != n)
      L.fail("svd: full_matrices=True needs static matrix dims or a square matrix (one symbol); " + A.a.str() +
             " has a symbolic one (full_matrices=False works)");
    subset(L, dim_min(m, n));  // symbolic: refuses subset_by_index
    SortedSvd d = one_sided_jacobi(L, Ac, n, uv);
    Dim k = L.out_aval(0).shape.back();
    L.bind(0, (k == n ? d.s : slice_to(L, d.s, r - 2, k)).v);
    if (!uv) return;
    out(1, k == n ? d.u : slice_parts(L, d.u, r - 1, k));
    out(2, adjoint(L, k == n ? d.v : slice_parts(L, d.v, r - 1, k)));
    return;
  }
  bool tr = m.value < n.value;
  Cx W = tr ? adjoint(L, Ac) : Ac;  // [..., M, N], M >= N
  int64_t M = std::max(m.value, n.value), N = std::min(m.value, n.value);
  auto [lo, hi] = subset(L, N);
  Cx Qf{{kNoValue, {}}, {kNoValue, {}}};
  bool via_qr = uv && full && M > N;
  if (via_qr) {
    if (cx) {
      auto [q, R] = complex_qr(L, W, true);
      Qf = q;
      W = slice_parts(L, R, r - 2, N);
    } else {
      auto [q, R] = qr(L, W.re, true);
      Qf.re = q;
      W.re = slice_to(L, R, r - 2, N);
    }
  }
  SortedSvd d = one_sided_jacobi(L, W, N, uv);
  TV sout = lo >= 0 ? slice_to(L, d.s, r - 2, hi, lo) : d.s;
  L.bind(0, sout.v);
  if (!uv) return;
  Cx Us = d.u, Vs = d.v;
  if (via_qr) {
    // u = Q diag(Ur, I): its first N columns are Q[:, :N] Ur.
    Cx q1 = slice_parts(L, Qf, r - 1, N);
    Cx q2 = slice_parts(L, Qf, r - 1, M, N);
    Aval qa = q1.re.a;
    auto mm = [&](const TV& x, const TV& y) { return nd(L, "MatMul", {x.v, y.v}, qa); };
    auto cat = [&](const TV& x, const TV& y) {
      return nd(L, "Concat", {x.v, y.v}, Qf.re.a, {Attr::i("axis", r - 1)});
    };
    if (cx) {
      TV re = nd(L, "Sub", {mm(q1.re, Us.re).v, mm(q1.im, Us.im).v}, qa);
      TV im = nd(L, "Add", {mm(q1.re, Us.im).v, mm(q1.im, Us.re).v}, qa);
      Us = {cat(re, q2.re), cat(im, q2.im)};
    } else {
      Us.re = cat(mm(q1.re, Us.re), q2.re);
    }
  }
  if (lo >= 0) {
    Us = slice_parts(L, Us, r - 1, hi, lo);
    Vs = slice_parts(L, Vs, r - 1, hi, lo);
  }
  // A = U S V^H; when transposed (W = A^H), A = V S U^H.
  out(1, tr ? Vs : Us);
  out(2, adjoint(L, tr ? Us : Vs));
}

}  // namespace lax_linalg_iter
