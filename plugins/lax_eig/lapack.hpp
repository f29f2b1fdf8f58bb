// The LAPACK pieces lax_eig's lowerings share: the norms and dlapy2 with the
// rounding LAPACK (on OpenBLAS) gives them, and the stages of geev / gees
// (schur.cpp: the real Schur form; eigvec.cpp: eigenvalues, eigenvectors).
#pragma once

#include "expr.hpp"

#include <utility>

namespace lax_eig {

// sqrt(sum(x * x)) over `axis` (all of a vector): dnrm2/snrm2. OpenBLAS's
// snrm2 accumulates in double, so float32 does too (its rounding decides
// dgebal's factors and dlarfg's reflectors, and so the iteration's path).
inline E nrm2(const E& x, int64_t axis = 0) {
  if (x.a.dtype != dtype::f32) return fsqrt(reduce("ReduceSum", x * x, axis));
  E d = as(x, dtype::f64);
  return as(fsqrt(reduce("ReduceSum", d * d, axis)), dtype::f32);
}

// dnrm2 of two float64 numbers as OpenBLAS's x86-64 kernel gives it: it
// accumulates in x87 extended precision, so the result is (all but always)
// sqrt(b^2 + c^2) correctly rounded. Emulated in double-double: exact
// squares (Dekker's split), their exact sum, one Newton correction of the
// square root. The reflectors of dlahqr's sweeps hang on these last bits:
// with a plainly rounded norm the deflation order of some 16x16 symmetric
// matrices already differs from LAPACK's.
inline E hypot_rounded(const E& b, const E& c) {
  auto split = [](const E& x) {
    E t = x * 134217729.0;  // 2^27 + 1
    E hi = t - (t - x);
    return std::make_pair(hi, x - hi);
  };
  auto two_prod = [&](const E& x, const E& y) {
    E p = x * y;
    auto [xh, xl] = split(x);
    auto [yh, yl] = split(y);
    E e = ((xh * yh - p) + xh * yl + xl * yh) + xl * yl;
    return std::make_pair(p, e);
  };
  auto [p1, e1] = two_prod(b, b);
  auto [p2, e2] = two_prod(c, c);
  E s = p1 + p2;
  E z = s - p1;
  E es = (p1 - (s - z)) + (p2 - z);
  E lo = (e1 + e2) + es;
  E r = fsqrt(s);
  auto [rr, err] = two_prod(r, r);
  E res = ((s - rr) - err) + lo;
  E r_safe = sel(eq(r, 0.0), lit(r, 1.0), r);
  return sel(eq(r, 0.0), r, r + res / (r_safe * 2.0));
}

// Fortran DLAPY2 (NaN checks left out): sqrt(x^2 + y^2) without overflow.
inline E dlapy2(const E& x, const E& y) {
  E ax = fabs(x), ay = fabs(y);
  E w = fmax(ax, ay), z = fmin(ax, ay);
  E q = z / sel(eq(w, 0.0), lit(w, 1.0), w);
  return sel(eq(z, 0.0), w, w * fsqrt(1.0 + q * q));
}

// v[clamp(r + s)] for every r; M[r, r + off] for every r (0 outside M).
E shift(Ctx& K, const E& v, int64_t s);
E diag(Ctx& K, const E& M, int64_t off);

// The real Schur form of one matrix A [n, n] (dgebal, dgehd2 + dorghr,
// dlahqr, as LAPACK's dgeev / dgees run them).
struct Schur {
  E T, Z;      // quasi-triangular form of the balanced matrix, its Schur vectors
  E d;         // dgebal's scaling factors [n] (1 where not scaled)
  E invp;      // int64 [n]: row r of the original matrix is row invp[r] of the balanced one
  E failed;    // bool scalar: dlahqr ran out of iterations (LAPACK's info > 0)
  E unscale;   // geev/gees scaled A by 1 / unscale (its norm was extreme); 1 else
};
Schur real_schur(Ctx& K, const E& A, bool scale);

// Eigenvalues (wr, wi [n]) read off the standardized Schur form.
std::pair<E, E> eigenvalues(Ctx& K, const E& T);
// geev's right eigenvectors (re, im [n, n]) from the Schur form: dtrevc3's
// back substitution, back-transformed, dgebak, geev's normalization.
std::pair<E, E> right_eigenvectors(Ctx& K, const Schur& S, const E& wr, const E& wi);
// geev's left eigenvectors (u^H A = w u^H), the same way (dtrevc3 'L').
std::pair<E, E> left_eigenvectors(Ctx& K, const Schur& S, const E& wr, const E& wi);

// eig of one complex matrix A (packed, [n, n, 2]) through its real embedding,
// K of size 2n: the packed eigenvalues [n, 2], then the left and/or right
// eigenvectors [n, n, 2] as asked (complex_eig.cpp).
std::vector<E> complex_eig(Ctx& K, const E& A, int64_t n, bool left, bool right);

}  // namespace lax_eig
