// lax_linalg_iter: the iterative factorizations -- eigh, svd, geqrf,
// householder_product and qr here; ormqr, hessenberg and tridiagonal in
// householder.cpp, tridiagonal_solve (gtsv) and cholesky_update in their own
// files -- each an ONNX Loop whose body does one step, so the model size
// does not grow with the matrix size.
//
// The matrix dims (two trailing) must be static; any leading batch dims,
// symbolic included, ride along by broadcasting. float32/float64 only.
//
// - geqrf: Householder QR with LAPACK's conventions (dlarfg): the reflector
//   of column j maps it to beta e_j with beta = -sign(a_jj) ||x|| (sign(0) =
//   +1), stored below the diagonal with v_j = 1, tau = 2 v_j^2 / v^T v; when
//   the column is already zero below the diagonal tau = 0 (no reflection). So
//   Q and R match JAX's signs, not only up to sign.
// - householder_product: Q = H_0 ... H_{k-1} I[:, :n], the reflectors
//   applied back to front (orgqr), one per Loop step.
// - qr: geqrf then householder_product (full_matrices pads a with zero
//   columns to m x m, as JAX does); r is triu(a).
// - eigh: cyclic two-sided Jacobi with the round-robin (tournament) ordering:
//   each Loop step rotates n/2 disjoint pairs at once, each index i rotating
//   with partner(i) by c_i, s_i, which makes a step two Gathers and
//   elementwise ops. It stops after the first sweep in which every pair had
//   a_pq^2 <= (n eps)^2 (|a_pp a_qq| + |A|_F^2 / n) (at most kMaxSweeps):
//   relative accuracy where it is reachable, else eps |A| as syevd.
//   Eigenvalues ascending (TopK), eigenvectors' signs are whatever Jacobi
//   gives (JAX/LAPACK fix none either). Only the `lower` (or upper) triangle
//   is read.
// - svd: one-sided (Hestenes) Jacobi on the columns of A (of A^T when
//   m < n), the same rotation kernel on the Gram entries. Singular values
//   descending; u's columns are the rotated columns over their norms (a zero
//   singular value gives a zero column of u, where LAPACK gives some
//   orthonormal completion). full_matrices with m != n completes u with a
//   Householder QR first: A = Q R, svd(R[:n]) = Ur S V^T, u = Q diag(Ur, I).
//   The row count may be symbolic (not with full_matrices): the n columns
//   are orthogonalized whatever m is, and cut to min(m, n) at run time.
//   Stops after a sweep in which every pair had gamma^2 <= (max(m, n) eps)^2
//   (alpha beta + eps^2 |A|_F^4).
#include <jaxonnx/plugin.hpp>

#include "util.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

constexpr int64_t kMaxSweeps = 30;

// A value with its type.
struct T {
  Value v;
  Aval a;
};

Aval scalar_aval(int32_t dt) { return Aval(dt, {}); }

// The batch dims of `a` followed by `tail`.
Shape batch_then(const Aval& a, std::vector<int64_t> tail) {
  Shape s(a.shape.begin(), a.shape.end() - 2);
  for (int64_t t : tail) s.push_back(Dim(t));
  return s;
}

void require_float_matrix(Lowering& L, const Aval& a, bool symbolic_rows = false) {
  if (a.dtype != dtype::f32 && a.dtype != dtype::f64)
    L.fail(std::string(L.primitive()) + ": operand dtype " + dtype::name(a.dtype) +
           " is not supported (float32 and float64 only)");
  if (a.rank() < 2) L.fail(std::string(L.primitive()) + ": operand " + a.str() + " is not a matrix");
  for (int64_t ax = a.rank() - (symbolic_rows ? 1 : 2); ax < a.rank(); ++ax)
    if (!a.shape[static_cast<size_t>(ax)].is_static())
      L.fail(std::string(L.primitive()) + ": the matrix dims of " + a.str() +
             " must be static; only the batch dims may be symbolic");
}

int64_t dim(const Aval& a, int64_t from_end) { return a.shape[a.shape.size() - static_cast<size_t>(from_end)].value; }

double eps_of(int32_t dt) { return dt == dtype::f32 ? 1.1920928955078125e-07 : 2.220446049250313e-16; }
double tiny_of(int32_t dt) { return dt == dtype::f32 ? 1.1754943508222875e-38 : 2.2250738585072014e-308; }

// A float constant of dtype dt.
Value fconst(Lowering& L, int32_t dt, const std::vector<double>& v, const std::vector<int64_t>& dims) {
  if (dt == dtype::f64) return L.constant(v, dims);
  std::vector<float> f(v.begin(), v.end());
  return L.constant(f, dims);
}

Value eye(Lowering& L, int32_t dt, int64_t rows, int64_t cols) {
  std::vector<double> e(static_cast<size_t>(rows * cols), 0.0);
  for (int64_t i = 0; i < std::min(rows, cols); ++i) e[static_cast<size_t>(i * cols + i)] = 1.0;
  return fconst(L, dt, e, {rows, cols});
}

template <typename Pred>
Value bool_mask(Lowering& L, int64_t rows, int64_t cols, Pred pred) {
  std::vector<uint8_t> m;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m.push_back(pred(i, j) ? 1 : 0);
  return L.constant(dtype::boolean, {rows, cols}, m.data(), m.size());
}

std::vector<int64_t> swap_last_perm(int64_t r) {
  std::vector<int64_t> p;
  for (int64_t i = 0; i < r; ++i) p.push_back(i);
  std::swap(p[static_cast<size_t>(r - 1)], p[static_cast<size_t>(r - 2)]);
  return p;
}

T transpose_last(Lowering& L, const T& x) {
  Aval a = x.a;
  std::swap(a.shape[a.shape.size() - 1], a.shape[a.shape.size() - 2]);
  return {transpose(L, x.v, x.a, swap_last_perm(x.a.rank())), a};
}

T node(Lowering& L, const char* op, const std::vector<Value>& ins, const Aval& out,
       const std::vector<Attr>& attrs = {}) {
  return {L.op(op, ins, out, attrs), out};
}

T reduce(Lowering& L, const char* op, const T& x, int64_t axis, bool keep) {
  Shape s = x.a.shape;
  if (keep) s[static_cast<size_t>(axis)] = Dim(1);
  else s.erase(s.begin() + axis);
  return node(L, op, {x.v, i64s(L, {axis})}, x.a.with_shape(s), {Attr::i("keepdims", keep ? 1 : 0)});
}

// x[..., start:end] along `axis` (static bounds).
T slice(Lowering& L, const T& x, int64_t axis, int64_t start, int64_t end) {
  Shape s = x.a.shape;
  s[static_cast<size_t>(axis)] = Dim(end - start);
  return node(L, "Slice", {x.v, i64s(L, {start}), i64s(L, {end}), i64s(L, {axis})}, x.a.with_shape(s));
}

// x[..., :end] along `axis`, `end` a static or symbolic dim.
T slice_to(Lowering& L, const T& x, int64_t axis, const Dim& end) {
  Shape s = x.a.shape;
  s[static_cast<size_t>(axis)] = end;
  return node(L, "Slice", {x.v, i64s(L, {0}), dim_value(L, end), i64s(L, {axis})}, x.a.with_shape(s));
}

// `m` (a constant or smaller-rank value) broadcast to the full shape `to`.
Value expand_to(Lowering& L, Value m, const Aval& to) { return L.op("Expand", {m, shape_value(L, to.shape)}, to); }

// The columns of `x` [..., r, c] reordered by idx [..., c] (int64).
T gather_cols(Lowering& L, const T& x, const T& idx) {
  Shape s = idx.a.shape;
  s.insert(s.end() - 1, Dim(1));
  Value u = L.op("Unsqueeze", {idx.v, i64s(L, {idx.a.rank() - 1})}, idx.a.with_shape(s));
  Value full = expand_to(L, u, x.a.with_dtype(dtype::i64));
  return node(L, "GatherElements", {x.v, full}, x.a, {Attr::i("axis", x.a.rank() - 1)});
}

// TopK over the last axis, all n of them, sorted.
std::pair<T, T> sort_last(Lowering& L, const T& x, bool descending) {
  int64_t n = x.a.shape.back().value;
  std::vector<Value> o =
      L.op_n("TopK", {x.v, i64s(L, {n})}, {x.a, x.a.with_dtype(dtype::i64)},
             {Attr::i("axis", x.a.rank() - 1), Attr::i("largest", descending ? 1 : 0), Attr::i("sorted", 1)});
  return {T{o[0], x.a}, T{o[1], x.a.with_dtype(dtype::i64)}};
}

// ------------------------------------------------------------------ jacobi --

// The round-robin schedule for n indices: R = n' - 1 rounds (n' = n rounded
// up to even); in each, partner[i] is i's pair (i itself when paired with the
// dummy of odd n) and role[i] is +1 for the smaller index of a pair, -1 for
// the larger, 0 when unpaired.
void schedule(int64_t n, std::vector<int64_t>& partner, std::vector<double>& role, int64_t& rounds) {
  int64_t N = n + (n % 2);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < N; ++i) idx.push_back(i);
  rounds = N - 1;
  for (int64_t r = 0; r < rounds; ++r) {
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
    // Keep idx[0], rotate the rest by one.
    int64_t last = idx.back();
    idx.pop_back();
    idx.insert(idx.begin() + 1, last);
  }
}

// Jacobi rotations on X [..., rows, n] (columns; rows too when two_sided, X
// then square and symmetric), accumulated into V [..., n, n]. Per index i
// with partner j: d_i, d_j the diagonal (of X, or of X^T X), g_i the (i, j)
// entry; the rotation that zeroes g is t = sign(th) / (|th| + sqrt(th^2 +
// 1)), th = (d_q - d_p) / (2 g), from the pair's smaller index p, and index i
// applies c, role_i * s: x_i <- c x_i - s_i x_j.
std::pair<T, T> jacobi(Lowering& L, T X, T V, bool two_sided) {
  int32_t dt = X.a.dtype;
  int64_t r = X.a.rank();
  int64_t n = dim(X.a, 1);
  if (n < 2) return {X, V};
  std::vector<int64_t> partner;
  std::vector<double> role;
  int64_t R = 0;
  schedule(n, partner, role, R);
  Value ptab = L.constant(partner, {R, n});
  Value rtab = fconst(L, dt, role, {R, n});
  Value eyen = eye(L, dt, n, n);
  std::vector<int64_t> iota;
  for (int64_t i = 0; i < n; ++i) iota.push_back(i);
  double eps = eps_of(dt);
  double tol = double(std::max(n, dim(X.a, 2))) * eps;
  double tol2 = tol * tol;
  Aval sc = scalar_aval(dt);
  Aval isc = scalar_aval(dtype::i64);
  Aval bsc = scalar_aval(dtype::boolean);
  Aval vecA = X.a.with_shape(batch_then(X.a, {n}));
  Aval rowA = X.a.with_shape(batch_then(X.a, {1, n}));

  Subgraph g = L.begin_subgraph("jacobi_body");
  Value iter = g.input(isc, "iter");
  g.input(bsc, "cond_in");
  T x{g.input(X.a, "x"), X.a};
  T v{g.input(V.a, "v"), V.a};
  Value mx = g.input(sc, "sweep_max");

  Value k = L.op("Mod", {iter, scalar(L, dtype::i64, double(R))}, isc);
  Value part = L.op("Gather", {ptab, k}, Aval(dtype::i64, {n}), {Attr::i("axis", 0)});
  Value ro = L.op("Gather", {rtab, k}, Aval(dt, {n}), {Attr::i("axis", 0)});
  T d, gij, fro2;
  if (two_sided) {
    // onehot[i, j] = (j == partner[i])
    Value hot = L.op("Equal", {L.op("Unsqueeze", {part, i64s(L, {1})}, Aval(dtype::i64, {n, 1})),
                               L.constant(iota, {n})},
                     Aval(dtype::boolean, {n, n}));
    Value hotf = cast(L, hot, Aval(dtype::boolean, {n, n}), dt);
    d = reduce(L, "ReduceSum", node(L, "Mul", {x.v, eyen}, x.a), r - 1, false);
    // (a_pq + a_qp) / 2: rounding leaves x slightly asymmetric, and a pair
    // must see one g, else its two c, s differ and the rotation is not
    // orthogonal (near convergence g is itself of the order of that noise).
    T gi = reduce(L, "ReduceSum", node(L, "Mul", {x.v, hotf}, x.a), r - 1, false);
    T gp = node(L, "Gather", {gi.v, part}, gi.a, {Attr::i("axis", r - 2)});
    gij = node(L, "Mul", {node(L, "Add", {gi.v, gp.v}, gi.a).v, scalar(L, dt, 0.5)}, gi.a);
    T sq = node(L, "Mul", {x.v, x.v}, x.a);
    fro2 = reduce(L, "ReduceSum", reduce(L, "ReduceSum", sq, r - 1, false), r - 2, false);
  } else {
    T sq = node(L, "Mul", {x.v, x.v}, x.a);
    d = reduce(L, "ReduceSum", sq, r - 2, false);
    T xp = node(L, "Gather", {x.v, part}, x.a, {Attr::i("axis", r - 1)});
    gij = reduce(L, "ReduceSum", node(L, "Mul", {x.v, xp.v}, x.a), r - 2, false);
    fro2 = reduce(L, "ReduceSum", d, r - 2, false);
  }
  T dj = node(L, "Gather", {d.v, part}, vecA, {Attr::i("axis", r - 2)});
  // Convergence measure of this round: max g^2 / (|d_i d_j| + floor).
  T dd = node(L, "Abs", {node(L, "Mul", {d.v, dj.v}, vecA).v}, vecA);
  Aval fa = fro2.a;
  T fl = two_sided ? node(L, "Mul", {fro2.v, scalar(L, dt, 1.0 / double(n))}, fa)
                   : node(L, "Mul", {node(L, "Mul", {fro2.v, fro2.v}, fa).v, scalar(L, dt, eps * eps)}, fa);
  fl = node(L, "Add", {fl.v, scalar(L, dt, tiny_of(dt))}, fa);
  Shape fs = fa.shape;
  fs.push_back(Dim(1));
  Value flu = L.op("Unsqueeze", {fl.v, i64s(L, {r - 2})}, fa.with_shape(fs));
  T g2 = node(L, "Mul", {gij.v, gij.v}, vecA);
  T ratio = node(L, "Div", {g2.v, node(L, "Add", {dd.v, flu}, vecA).v}, vecA);
  Value rmax = L.op("ReduceMax", {ratio.v}, sc, {Attr::i("keepdims", 0)});
  // The rotation.
  Value zero = scalar(L, dt, 0.0), one = scalar(L, dt, 1.0);
  T th = node(L, "Div", {node(L, "Mul", {ro, node(L, "Sub", {dj.v, d.v}, vecA).v}, vecA).v,
                         node(L, "Mul", {gij.v, scalar(L, dt, 2.0)}, vecA).v},
              vecA);
  Aval vb = vecA.with_dtype(dtype::boolean);
  T sg = node(L, "Where", {node(L, "GreaterOrEqual", {th.v, zero}, vb).v, one, scalar(L, dt, -1.0)}, vecA);
  T den = node(L, "Add", {node(L, "Abs", {th.v}, vecA).v,
                          node(L, "Sqrt", {node(L, "Add", {node(L, "Mul", {th.v, th.v}, vecA).v, one}, vecA).v},
                               vecA)
                              .v},
               vecA);
  T t = node(L, "Mul", {node(L, "Div", {sg.v, den.v}, vecA).v, ro}, vecA);
  t = node(L, "Where", {node(L, "Equal", {gij.v, zero}, vb).v, zero, t.v}, vecA);
  T c = node(L, "Div", {one, node(L, "Sqrt", {node(L, "Add", {node(L, "Mul", {t.v, t.v}, vecA).v, one}, vecA).v},
                                  vecA)
                                 .v},
             vecA);
  T s = node(L, "Mul", {t.v, c.v}, vecA);
  Value cr = L.op("Unsqueeze", {c.v, i64s(L, {r - 2})}, rowA);
  Value sr = L.op("Unsqueeze", {s.v, i64s(L, {r - 2})}, rowA);
  auto rot_cols = [&](const T& y) {
    T yp = node(L, "Gather", {y.v, part}, y.a, {Attr::i("axis", r - 1)});
    return node(L, "Sub", {node(L, "Mul", {y.v, cr}, y.a).v, node(L, "Mul", {yp.v, sr}, y.a).v}, y.a);
  };
  T x2 = rot_cols(x);
  if (two_sided) {
    Aval colA = X.a.with_shape(batch_then(X.a, {n, 1}));
    Value cc = L.op("Unsqueeze", {c.v, i64s(L, {r - 1})}, colA);
    Value scol = L.op("Unsqueeze", {s.v, i64s(L, {r - 1})}, colA);
    T xp = node(L, "Gather", {x2.v, part}, x2.a, {Attr::i("axis", r - 2)});
    x2 = node(L, "Sub", {node(L, "Mul", {x2.v, cc}, x2.a).v, node(L, "Mul", {xp.v, scol}, x2.a).v}, x2.a);
  }
  T v2 = rot_cols(v);
  // Stop at the end of a sweep in which every pair was converged.
  Value mnew = L.op("Max", {mx, rmax}, sc);
  Value at_end = L.op("Equal", {k, scalar(L, dtype::i64, double(R - 1))}, bsc);
  Value done = L.op("And", {at_end, L.op("LessOrEqual", {mnew, scalar(L, dt, tol2)}, bsc)}, bsc);
  Value cond_out = L.op("Not", {done}, bsc);
  Value m_out = L.op("Where", {at_end, zero, mnew}, sc);
  GraphRef body = g.end({cond_out, x2.v, v2.v, m_out});

  std::vector<Value> res =
      L.op_n("Loop", {scalar(L, dtype::i64, double(R * kMaxSweeps)), scalar(L, dtype::boolean, 1), X.v, V.v,
                      scalar(L, dt, 0.0)},
             {X.a, V.a, sc}, {Attr::graph("body", body)});
  return {T{res[0], X.a}, T{res[1], V.a}};
}

// -------------------------------------------------------------- householder --

// geqrf on A [..., m, n]: a (R on and above the diagonal, the reflectors
// below it) and taus [..., k].
std::pair<T, T> geqrf(Lowering& L, const T& A) {
  int32_t dt = A.a.dtype;
  int64_t r = A.a.rank();
  int64_t m = dim(A.a, 2), n = dim(A.a, 1), K = std::min(m, n);
  Aval tau_a = A.a.with_shape(batch_then(A.a, {K}));
  T taus0{expand_to(L, fconst(L, dt, std::vector<double>(static_cast<size_t>(K), 0.0), {K}), tau_a), tau_a};
  if (K == 0) return {A, taus0};
  std::vector<int64_t> im, in, ik;
  for (int64_t i = 0; i < m; ++i) im.push_back(i);
  for (int64_t i = 0; i < n; ++i) in.push_back(i);
  for (int64_t i = 0; i < K; ++i) ik.push_back(i);
  Value rows = L.constant(im, {m, 1});
  Value cols = L.constant(in, {1, n});
  Value kidx = L.constant(ik, {K});
  Aval isc = scalar_aval(dtype::i64), bsc = scalar_aval(dtype::boolean);
  Aval colA = A.a.with_shape(batch_then(A.a, {m, 1}));
  Aval rowA = A.a.with_shape(batch_then(A.a, {1, n}));
  Aval oneA = A.a.with_shape(batch_then(A.a, {1, 1}));
  Value zero = scalar(L, dt, 0.0), one = scalar(L, dt, 1.0);

  Subgraph g = L.begin_subgraph("geqrf_body");
  Value j = g.input(isc, "j");
  Value cin = g.input(bsc, "cond_in");
  T a{g.input(A.a, "a"), A.a};
  T taus{g.input(tau_a, "taus"), tau_a};
  Aval mb(dtype::boolean, {m, 1}), nb(dtype::boolean, {1, n});
  Value row_gt = L.op("Greater", {rows, j}, mb);
  Value row_eq = L.op("Equal", {rows, j}, mb);
  Value col_gt = L.op("Greater", {cols, j}, nb);
  Value col_eq = L.op("Equal", {cols, j}, nb);
  T x = node(L, "Gather", {a.v, L.op("Unsqueeze", {j, i64s(L, {0})}, Aval(dtype::i64, {1}))}, colA,
             {Attr::i("axis", r - 1)});
  T below = node(L, "Where", {row_gt, x.v, zero}, colA);
  T alpha = reduce(L, "ReduceSum", node(L, "Where", {row_eq, x.v, zero}, colA), r - 2, true);
  T bn2 = reduce(L, "ReduceSum", node(L, "Mul", {below.v, below.v}, colA), r - 2, true);
  Aval ob = oneA.with_dtype(dtype::boolean);
  T skip = node(L, "Equal", {bn2.v, zero}, ob);
  T nrm = node(L, "Sqrt", {node(L, "Add", {node(L, "Mul", {alpha.v, alpha.v}, oneA).v, bn2.v}, oneA).v}, oneA);
  T sg = node(L, "Where", {node(L, "GreaterOrEqual", {alpha.v, zero}, ob).v, one, scalar(L, dt, -1.0)}, oneA);
  T beta = node(L, "Neg", {node(L, "Mul", {sg.v, nrm.v}, oneA).v}, oneA);
  T vj = node(L, "Sub", {alpha.v, beta.v}, oneA);  // v = below + vj e_j
  T v = node(L, "Add", {below.v, node(L, "Where", {row_eq, vj.v, zero}, colA).v}, colA);
  T vtv = node(L, "Add", {bn2.v, node(L, "Mul", {vj.v, vj.v}, oneA).v}, oneA);
  T coef = node(L, "Where", {skip.v, zero, node(L, "Div", {scalar(L, dt, 2.0), vtv.v}, oneA).v}, oneA);
  // The trailing columns: a <- a - v coef (v^T a).
  T vta = reduce(L, "ReduceSum", node(L, "Mul", {v.v, a.v}, a.a), r - 2, true);
  T w = node(L, "Where", {col_gt, node(L, "Mul", {vta.v, coef.v}, rowA).v, zero}, rowA);
  T upd = node(L, "Sub", {a.v, node(L, "Mul", {v.v, w.v}, a.a).v}, a.a);
  // Column j: beta on the diagonal (alpha when skipped), v / v_j below.
  T dj = node(L, "Where", {skip.v, alpha.v, beta.v}, oneA);
  T vsafe = node(L, "Where", {skip.v, one, vj.v}, oneA);
  T vn = node(L, "Div", {below.v, vsafe.v}, colA);
  T colj = node(L, "Where", {row_eq, dj.v, node(L, "Where", {row_gt, vn.v, x.v}, colA).v}, colA);
  T a2 = node(L, "Where", {col_eq, colj.v, upd.v}, a.a);
  // tau = coef v_j^2.
  T tau = node(L, "Mul", {coef.v, node(L, "Mul", {vj.v, vj.v}, oneA).v}, oneA);
  Shape ts = tau_a.shape;
  ts.back() = Dim(1);
  Value tau1 = L.op("Reshape", {tau.v, shape_value(L, ts)}, tau_a.with_shape(ts));
  Value kmask = L.op("Equal", {kidx, j}, Aval(dtype::boolean, {K}));
  T taus2 = node(L, "Where", {kmask, tau1, taus.v}, tau_a);
  GraphRef body = g.end({cin, a2.v, taus2.v});
  std::vector<Value> res = L.op_n("Loop", {scalar(L, dtype::i64, double(K)), scalar(L, dtype::boolean, 1), A.v, taus0.v},
                                  {A.a, tau_a}, {Attr::graph("body", body)});
  return {T{res[0], A.a}, T{res[1], tau_a}};
}

// householder_product: the first n columns of H_0 ... H_{k-1}, from a
// [..., m, n] (reflectors below the diagonal, v_j = 1) and taus [..., k].
T householder_product(Lowering& L, const T& A, const T& taus) {
  int32_t dt = A.a.dtype;
  int64_t r = A.a.rank();
  int64_t m = dim(A.a, 2), n = dim(A.a, 1);
  int64_t K = taus.a.shape.back().value;
  T Q{expand_to(L, eye(L, dt, m, n), A.a), A.a};
  if (K == 0) return Q;
  std::vector<int64_t> im;
  for (int64_t i = 0; i < m; ++i) im.push_back(i);
  Value rows = L.constant(im, {m, 1});
  Aval isc = scalar_aval(dtype::i64), bsc = scalar_aval(dtype::boolean);
  Aval colA = A.a.with_shape(batch_then(A.a, {m, 1}));
  Aval rowA = A.a.with_shape(batch_then(A.a, {1, n}));
  Value zero = scalar(L, dt, 0.0), one = scalar(L, dt, 1.0);
  Aval mb(dtype::boolean, {m, 1});

  Subgraph g = L.begin_subgraph("householder_product_body");
  Value it = g.input(isc, "iter");
  Value cin = g.input(bsc, "cond_in");
  T q{g.input(A.a, "q"), A.a};
  Value j = L.op("Sub", {scalar(L, dtype::i64, double(K - 1)), it}, isc);  // back to front
  Value j1 = L.op("Unsqueeze", {j, i64s(L, {0})}, Aval(dtype::i64, {1}));
  T x = node(L, "Gather", {A.v, j1}, colA, {Attr::i("axis", r - 1)});
  T v = node(L, "Where", {L.op("Greater", {rows, j}, mb), x.v,
                          L.op("Where", {L.op("Equal", {rows, j}, mb), one, zero}, Aval(dt, {m, 1}))},
             colA);
  Aval tA = taus.a.with_shape([&] { Shape s = taus.a.shape; s.back() = Dim(1); return s; }());
  T tau = node(L, "Gather", {taus.v, j1}, tA, {Attr::i("axis", taus.a.rank() - 1)});
  Shape t2 = tA.shape;
  t2.push_back(Dim(1));
  Value tau2 = L.op("Unsqueeze", {tau.v, i64s(L, {r - 1})}, tA.with_shape(t2));
  T vtq = reduce(L, "ReduceSum", node(L, "Mul", {v.v, q.v}, q.a), r - 2, true);
  T w = node(L, "Mul", {vtq.v, tau2}, rowA);
  T q2 = node(L, "Sub", {q.v, node(L, "Mul", {v.v, w.v}, q.a).v}, q.a);
  GraphRef body = g.end({cin, q2.v});
  std::vector<Value> res =
      L.op_n("Loop", {scalar(L, dtype::i64, double(K)), scalar(L, dtype::boolean, 1), Q.v}, {A.a}, {Attr::graph("body", body)});
  return T{res[0], A.a};
}

// The upper triangle of x [..., m, n] (below it zeroed).
T triu(Lowering& L, const T& x) {
  int64_t m = dim(x.a, 2), n = dim(x.a, 1);
  Value low = bool_mask(L, m, n, [](int64_t i, int64_t j) { return i > j; });
  return node(L, "Where", {low, scalar(L, x.a.dtype, 0.0), x.v}, x.a);
}

// a [..., m, n] with zero columns appended up to `cols`.
T pad_cols(Lowering& L, const T& x, int64_t cols) {
  int64_t r = x.a.rank(), n = dim(x.a, 1);
  if (cols == n) return x;
  std::vector<int64_t> pads(static_cast<size_t>(2 * r), 0);
  pads[static_cast<size_t>(2 * r - 1)] = cols - n;
  Shape s = x.a.shape;
  s.back() = Dim(cols);
  return node(L, "Pad", {x.v, i64s(L, pads), scalar(L, x.a.dtype, 0.0)}, x.a.with_shape(s), {Attr::s("mode", "constant")});
}

// Q (full: [m, m]; else [m, k]) and R (full: [m, n]; else [k, n]).
std::pair<T, T> qr(Lowering& L, const T& A, bool full) {
  int64_t m = dim(A.a, 2), n = dim(A.a, 1), K = std::min(m, n);
  auto [a, taus] = geqrf(L, A);
  T R = triu(L, a);
  T q = full ? householder_product(L, pad_cols(L, a, m), taus)
             : householder_product(L, n > K ? slice(L, a, a.a.rank() - 1, 0, K) : a, taus);
  if (!full && m > K) R = slice(L, R, R.a.rank() - 2, 0, K);
  return {q, R};
}

// --------------------------------------------------------------- lowerings --

void lower_geqrf(Lowering& L) {
  T A{L.input(0), L.in_aval(0)};
  require_float_matrix(L, A.a);
  auto [a, taus] = geqrf(L, A);
  L.bind(0, a.v);
  L.bind(1, taus.v);
}

void lower_householder_product(Lowering& L) {
  T A{L.input(0), L.in_aval(0)};
  T taus{L.input(1), L.in_aval(1)};
  require_float_matrix(L, A.a);
  if (!taus.a.shape.back().is_static() || taus.a.shape.back().value > dim(A.a, 1) || dim(A.a, 1) > dim(A.a, 2))
    L.fail("householder_product: needs a [..., m, n] with n <= m and taus [..., k] with k <= n; got " + A.a.str() +
           " and " + taus.a.str());
  L.bind(0, householder_product(L, A, taus).v);
}

void lower_qr(Lowering& L) {
  T A{L.input(0), L.in_aval(0)};
  require_float_matrix(L, A.a);
  if (L.has_param("pivoting") && L.param("pivoting").as_bool())
    L.fail("qr: pivoting=True (column-pivoted QR) is not supported");
  bool full = L.param("full_matrices").as_bool();
  auto [q, r] = qr(L, A, full);
  L.bind(0, q.v);
  L.bind(1, r.v);
}

// [lo, hi) of subset_by_index, or the whole range.
std::pair<int64_t, int64_t> subset(Lowering& L, int64_t n) {
  if (!L.has_param("subset_by_index")) return {0, n};
  Param p = L.param("subset_by_index");
  if (p.is_none()) return {0, n};
  std::vector<int64_t> v = p.as_ints();
  if (v.size() != 2 || v[0] < 0 || v[1] > n || v[0] > v[1])
    L.fail(std::string(L.primitive()) + ": subset_by_index must be (lo, hi) with 0 <= lo <= hi <= " +
           std::to_string(n));
  return {v[0], v[1]};
}

void lower_eigh(Lowering& L) {
  T A{L.input(0), L.in_aval(0)};
  require_float_matrix(L, A.a);
  int64_t n = dim(A.a, 1);
  if (dim(A.a, 2) != n) L.fail("eigh: operand " + A.a.str() + " is not square");
  bool lower = L.param("lower").as_bool();
  auto [lo, hi] = subset(L, n);
  int64_t r = A.a.rank();
  // The symmetric matrix of the triangle JAX reads.
  T At = transpose_last(L, A);
  Value keep = bool_mask(L, n, n, [&](int64_t i, int64_t j) { return lower ? i >= j : i <= j; });
  T S = node(L, "Where", {keep, A.v, At.v}, A.a);
  T V0{expand_to(L, eye(L, A.a.dtype, n, n), A.a), A.a};
  auto [X, V] = jacobi(L, S, V0, true);
  T w = reduce(L, "ReduceSum", node(L, "Mul", {X.v, eye(L, A.a.dtype, n, n)}, X.a), r - 1, false);
  auto [ws, idx] = sort_last(L, w, false);
  T vs = gather_cols(L, V, idx);
  if (lo != 0 || hi != n) {
    ws = slice(L, ws, r - 2, lo, hi);
    vs = slice(L, vs, r - 1, lo, hi);
  }
  L.bind(0, vs.v);
  L.bind(1, ws.v);
}

void lower_svd(Lowering& L) {
  T A{L.input(0), L.in_aval(0)};
  bool full = L.param("full_matrices").as_bool();
  bool uv = L.param("compute_uv").as_bool();
  int64_t r = A.a.rank();
  // A symbolic row count (a PCA over samples): Jacobi on the n columns works
  // for any m; the n singular values are cut to min(m, n) at run time.
  bool sym_m = r >= 2 && !A.a.shape[static_cast<size_t>(r - 2)].is_static();
  require_float_matrix(L, A.a, sym_m);
  if (sym_m) {
    if (uv && full)
      L.fail("svd: full_matrices=True needs a static row count; " + A.a.str() +
             " has a symbolic one (full_matrices=False works)");
    if (L.has_param("subset_by_index") && !L.param("subset_by_index").is_none())
      L.fail("svd: subset_by_index with a symbolic row count is not supported");
    int64_t n = dim(A.a, 1);
    Aval va = A.a.with_shape(batch_then(A.a, {n, n}));
    T V0{expand_to(L, eye(L, A.a.dtype, n, n), va), va};
    auto [U, V] = jacobi(L, A, V0, false);
    T s = node(L, "Sqrt", {reduce(L, "ReduceSum", node(L, "Mul", {U.v, U.v}, U.a), r - 2, false).v},
               U.a.with_shape(batch_then(U.a, {n})));
    auto [ss, idx] = sort_last(L, s, true);
    Dim k = L.out_aval(0).shape.back();
    L.bind(0, slice_to(L, ss, r - 2, k).v);
    if (!uv) return;
    T Us = gather_cols(L, U, idx);
    Aval rowA = ss.a.with_shape([&] { Shape sh = ss.a.shape; sh.insert(sh.end() - 1, Dim(1)); return sh; }());
    Value srow = L.op("Unsqueeze", {ss.v, i64s(L, {r - 2})}, rowA);
    Value safe = L.op("Where", {L.op("Equal", {srow, scalar(L, A.a.dtype, 0.0)}, rowA.with_dtype(dtype::boolean)),
                                scalar(L, A.a.dtype, 1.0), srow},
                      rowA);
    Us = node(L, "Div", {Us.v, safe}, Us.a);
    L.bind(1, slice_to(L, Us, r - 1, k).v);
    L.bind(2, transpose_last(L, slice_to(L, gather_cols(L, V, idx), r - 1, k)).v);
    return;
  }
  int64_t m = dim(A.a, 2), n = dim(A.a, 1);
  bool tr = m < n;
  T W = tr ? transpose_last(L, A) : A;  // [..., M, N], M >= N
  int64_t M = std::max(m, n), N = std::min(m, n);
  auto [lo, hi] = subset(L, N);
  int32_t dt = A.a.dtype;
  T Qf{kNoValue, {}};
  bool via_qr = uv && full && M > N;
  if (via_qr) {
    auto [q, R] = qr(L, W, true);
    Qf = q;
    W = slice(L, R, r - 2, 0, N);
  }
  Aval va = W.a.with_shape(batch_then(W.a, {N, N}));
  T V0{expand_to(L, eye(L, dt, N, N), va), va};
  auto [U, V] = jacobi(L, W, V0, false);
  T s = node(L, "Sqrt", {reduce(L, "ReduceSum", node(L, "Mul", {U.v, U.v}, U.a), r - 2, false).v},
             U.a.with_shape(batch_then(U.a, {N})));
  auto [ss, idx] = sort_last(L, s, true);
  T sout = (lo != 0 || hi != N) ? slice(L, ss, r - 2, lo, hi) : ss;
  L.bind(0, sout.v);
  if (!uv) return;
  T Us = gather_cols(L, U, idx);
  T Vs = gather_cols(L, V, idx);
  Aval rowA = ss.a.with_shape([&] { Shape sh = ss.a.shape; sh.insert(sh.end() - 1, Dim(1)); return sh; }());
  Value srow = L.op("Unsqueeze", {ss.v, i64s(L, {r - 2})}, rowA);
  Value zero = scalar(L, dt, 0.0);
  Value safe = L.op("Where", {L.op("Equal", {srow, zero}, rowA.with_dtype(dtype::boolean)), scalar(L, dt, 1.0), srow}, rowA);
  Us = node(L, "Div", {Us.v, safe}, Us.a);
  if (via_qr) {
    // u = Q diag(Ur, I): its first N columns are Q[:, :N] Ur.
    T q1 = slice(L, Qf, r - 1, 0, N);
    T q2 = slice(L, Qf, r - 1, N, M);
    T qu = node(L, "MatMul", {q1.v, Us.v}, q1.a);
    Us = node(L, "Concat", {qu.v, q2.v}, Qf.a, {Attr::i("axis", r - 1)});
  }
  if (lo != 0 || hi != N) {
    Us = slice(L, Us, r - 1, lo, hi);
    Vs = slice(L, Vs, r - 1, lo, hi);
  }
  // A = U S V^T; when transposed, A = V S U^T.
  T u = tr ? Vs : Us;
  T vt = transpose_last(L, tr ? Us : Vs);
  L.bind(1, u.v);
  L.bind(2, vt.v);
}

}  // namespace

JAXONNX_PLUGIN("lax_linalg_iter", "0.1.0") {
  plugin.primitive("eigh", lower_eigh)
      .emits({"Transpose", "Where", "Expand", "Loop", "Mod", "Gather", "Unsqueeze", "Equal", "Cast", "Mul",
              "ReduceSum", "Abs", "Add", "Div", "ReduceMax", "Sub", "GreaterOrEqual", "Sqrt", "Max", "And",
              "LessOrEqual", "Not", "TopK", "GatherElements", "Slice"})
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("cyclic Jacobi (round-robin pairs, n/2 rotations per Loop step); eigenvalues ascending");
  plugin.primitive("svd", lower_svd)
      .emits({"Transpose", "Expand", "Loop", "Mod", "Gather", "Unsqueeze", "Equal", "Mul", "ReduceSum",
              "Abs", "Add", "Div", "ReduceMax", "Sub", "GreaterOrEqual", "Sqrt", "Max", "And", "LessOrEqual",
              "Not", "Where", "TopK", "GatherElements", "Slice", "MatMul", "Concat", "Greater", "Neg", "Reshape",
              "Pad"})
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("one-sided Jacobi in a Loop (Householder QR first for full_matrices); descending singular values");
  plugin.primitive("qr", lower_qr)
      .emits({"Expand", "Loop", "GreaterOrEqual", "Greater", "Equal", "Gather", "Unsqueeze", "Where", "ReduceSum",
              "Mul", "Sqrt", "Add", "Neg", "Sub", "Div", "Reshape", "Slice", "Pad"})
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("Householder QR (geqrf + orgqr) in Loops, LAPACK's sign conventions");
  plugin.primitive("geqrf", lower_geqrf)
      .emits({"Expand", "Loop", "GreaterOrEqual", "Greater", "Equal", "Gather", "Unsqueeze", "Where", "ReduceSum",
              "Mul", "Sqrt", "Add", "Neg", "Sub", "Div", "Reshape"})
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("Householder reflectors (dlarfg conventions), one column per Loop step");
  plugin.primitive("householder_product", lower_householder_product)
      .emits({"Expand", "Loop", "Sub", "Unsqueeze", "Gather", "Greater", "Equal", "Where", "ReduceSum", "Mul"})
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("H_0 ... H_{k-1} applied back to front, one reflector per Loop step");
  plugin.primitive("tridiagonal_solve", lax_linalg_iter::lower_tridiagonal_solve)
      .emits({"Gather", "Loop", "Add", "Min", "Equal", "Where", "Abs", "Less", "Div", "Unsqueeze", "Squeeze", "Mul",
              "Sub", "Neg", "Expand", "Slice", "Transpose", "Cast", "ReduceMax"})
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("gtsv: elimination with partial pivoting, then back substitution, one row per Loop step");
  plugin.primitive("cholesky_update", lax_linalg_iter::lower_cholesky_update)
      .emits({"Loop", "Gather", "Abs", "Greater", "Where", "Div", "Mul", "Add", "Sqrt", "Equal", "Neg", "Unsqueeze",
              "Sub"})
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("JAX's Givens rotations of each row of R against w, one per Loop step");
  const std::initializer_list<const char*> kReflector = {
      "Equal", "Greater", "GreaterOrEqual", "Where", "ReduceSum", "Mul", "Add", "Sqrt", "Neg", "Sub", "Div"};
  plugin.primitive("ormqr", lax_linalg_iter::lower_ormqr)
      .emits({"Loop", "Sub", "Unsqueeze", "Gather", "Greater", "Equal", "Where", "ReduceSum", "Mul", "Transpose"})
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("applies the reflectors H_i of a QR to c without forming Q, one per Loop step (dorm2r)");
  plugin.primitive("hessenberg", lax_linalg_iter::lower_hessenberg)
      .emits(kReflector)
      .emits({"Loop", "Expand", "Unsqueeze", "Gather", "MatMul", "Transpose", "Reshape"})
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("gehrd: a Householder reflector per column, applied from both sides, one per Loop step");
  plugin.primitive("tridiagonal", lax_linalg_iter::lower_tridiagonal)
      .emits(kReflector)
      .emits({"Loop", "Expand", "Unsqueeze", "Gather", "MatMul", "Transpose", "Reshape", "Slice"})
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("sytrd: symmetric Householder reduction (dsytd2), one reflector per Loop step; d, e, taus as LAPACK");
}
