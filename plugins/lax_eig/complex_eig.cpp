// eig of a complex matrix through a real one: A = X + iY (n x n) is shifted
// to A' = A + i s I, s = 2 ||A||_F (1 when A = 0), and embedded as
//
//   B = [[X, -(Y + sI)], [Y + sI, X]]   (2n x 2n, real),
//
// whose eigenvalues are A''s and their conjugates. |lambda| <= ||A||_F, so
// every eigenvalue of A' has Im >= s - ||A||_F >= ||A||_F > 0 and every
// conjugate Im < 0: A''s half of B's spectrum is the n eigenvalues with
// positive imaginary part, separated from the other half by at least
// 2 ||A||_F whatever A is (real, Hermitian, repeated or zero eigenvalues),
// so picking them needs no tie-break. B runs the real path (dgebal, dgehd2,
// dlahqr, dtrevc3, dgebak: schur.cpp, eigvec.cpp); lambda = mu - i s.
//
// For B w = mu w with mu in A''s half, w = [w1; w2], v = w1 + i w2 solves
// A v = lambda v (and w1 - i w2 = 0). A left vector y of B (y^H B = mu y^H)
// gives u = y1 + i y2 with u^H A = lambda u^H (B^T embeds A'^H). Each vector
// is scaled to unit 2-norm with its largest component real and positive, as
// zgeev does. Repeated eigenvalues of A are repeated pairs of B: their
// vectors are what the real path gives for a real matrix with repeated
// pairs (a defective A gives near-parallel vectors, as LAPACK's).
//
// The eigenvalues keep the order dlahqr finds them in on B (JAX's zgeev
// order differs; eig's order is not defined). If dlahqr fails, or does not
// return exactly n eigenvalues with positive imaginary part, all outputs of
// that matrix are NaN.
#include "lapack.hpp"

#include <jaxonnx/complex.hpp>

#include <cmath>
#include <vector>

namespace lax_eig {

namespace {

// The columns idx [n] of M [2n, 2n], split into the top and bottom halves.
std::pair<E, E> halves(Ctx& K, const E& M, const E& idx, int64_t n) {
  Lowering& L = K.L;
  E cols = mk(L, "Gather", {M.v, idx.v}, Aval(K.dt, {2 * n, n}), {Attr::i("axis", 1)});
  std::vector<int64_t> top, bot;
  for (int64_t i = 0; i < n; ++i) {
    top.push_back(i);
    bot.push_back(n + i);
  }
  Aval h(K.dt, {n, n});
  return {mk(L, "Gather", {cols.v, L.constant(top, {n})}, h, {Attr::i("axis", 0)}),
          mk(L, "Gather", {cols.v, L.constant(bot, {n})}, h, {Attr::i("axis", 0)})};
}

// v = w1 + i w2 from B's complex vectors (re, im) at columns idx, scaled as
// zgeev scales: unit 2-norm, the (first) largest-magnitude component real
// and positive. Packed [n, n, 2], NaN where `bad`.
E a_vectors(Ctx& K, const std::pair<E, E>& W, const E& idx, int64_t n, const E& bad) {
  Lowering& L = K.L;
  auto [r1, r2] = halves(K, W.first, idx, n);
  auto [i1, i2] = halves(K, W.second, idx, n);
  E vr = r1 - i2, vi = i1 + r2;
  E mag = vr * vr + vi * vi;
  E nrm = fsqrt(reduce("ReduceSum", mag, 0, true));
  E kmax = mk(L, "ArgMax", {mag.v}, Aval(dtype::i64, {1, n}), {Attr::i("axis", 0), Attr::i("keepdims", 1)});
  E f = mk(L, "GatherElements", {vr.v, kmax.v}, Aval(K.dt, {1, n}), {Attr::i("axis", 0)});
  E g = mk(L, "GatherElements", {vi.v, kmax.v}, Aval(K.dt, {1, n}), {Attr::i("axis", 0)});
  E am = fsqrt(f * f + g * g);
  E ok = gt(am, 0.0);
  // v conj(v_k) / (|v_k| ||v||)
  E den = sel(ok, am * nrm, 1.0);
  E cr = sel(ok, f / den, 0.0), ci = sel(ok, -g / den, 0.0);
  E outr = vr * cr - vi * ci, outi = vr * ci + vi * cr;
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < n; ++i) rows.push_back(i);
  E ir{&L, L.constant(rows, {n, 1}), Aval(dtype::i64, {n, 1})};
  outi = sel(eq(ir, kmax), 0.0, outi);
  outr = sel(bad, lit(outr, NAN), outr);
  outi = sel(bad, lit(outi, NAN), outi);
  Aval ca(complex::of_part(K.dt), {n, n});
  return {&L, complex::pack(L, outr.v, outi.v, ca), complex::packed(ca)};
}

}  // namespace

std::vector<E> complex_eig(Ctx& K, const E& Ap, int64_t n, bool left, bool right) {
  Lowering& L = K.L;
  const int32_t dt = K.dt;
  Aval h(dt, {n, n});
  Value last = L.constant(std::vector<int64_t>{0}, {});
  E X = mk(L, "Gather", {Ap.v, last}, h, {Attr::i("axis", 2)});
  E Y = mk(L, "Gather", {Ap.v, L.constant(std::vector<int64_t>{1}, {})}, h, {Attr::i("axis", 2)});
  E fro = fsqrt(reduce("ReduceSum", reduce("ReduceSum", X * X + Y * Y, 0), 0));
  E s = sel(eq(fro, 0.0), lit(fro, 1.0), fro * 2.0);
  std::vector<double> e(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) e[static_cast<size_t>(i * n + i)] = 1.0;
  E I{&L, dt == dtype::f64 ? L.constant(e, {n, n}) : L.constant(std::vector<float>(e.begin(), e.end()), {n, n}), h};
  E Ys = Y + I * s;
  auto cat = [&](const E& a, const E& b, int64_t axis) {
    Shape sh = a.a.shape;
    sh[static_cast<size_t>(axis)] = Dim(sh[static_cast<size_t>(axis)].value * 2);
    return mk(L, "Concat", {a.v, b.v}, a.a.with_shape(sh), {Attr::i("axis", axis)});
  };
  E B = cat(cat(X, -Ys, 1), cat(Ys, X, 1), 0);
  Schur S = real_schur(K, B, true);
  auto [wr, wi] = eigenvalues(K, S.T);
  // A''s half: the positive imaginary parts, in the order found.
  E up = gt(wi, 0.0);
  E j = as(K.iv, dt);
  E key = sel(up, -j, -(j + double(2 * n)));
  std::vector<Value> tk = L.op_n("TopK", {key.v, L.constant(std::vector<int64_t>{n}, {1})},
                                 {Aval(dt, {n}), Aval(dtype::i64, {n})},
                                 {Attr::i("axis", 0), Attr::i("largest", 1), Attr::i("sorted", 1)});
  E idx{&L, tk[1], Aval(dtype::i64, {n})};
  E count = reduce("ReduceSum", as(up, dtype::i64), 0);
  E bad = S.failed || ne(count, K.i(n));
  E lr = mk(L, "Gather", {wr.v, idx.v}, Aval(dt, {n}), {Attr::i("axis", 0)}) * S.unscale;
  E li = mk(L, "Gather", {wi.v, idx.v}, Aval(dt, {n}), {Attr::i("axis", 0)}) * S.unscale - s;
  Aval wa(complex::of_part(dt), {n});
  std::vector<E> out = {{&L, complex::pack(L, sel(bad, lit(lr, NAN), lr).v, sel(bad, lit(li, NAN), li).v, wa),
                         complex::packed(wa)}};
  if (left) out.push_back(a_vectors(K, left_eigenvectors(K, S, wr, wi), idx, n, bad));
  if (right) out.push_back(a_vectors(K, right_eigenvectors(K, S, wr, wi), idx, n, bad));
  return out;
}

}  // namespace lax_eig
