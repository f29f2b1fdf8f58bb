// Eigenvalues and geev's eigenvectors from the real Schur form.
//
// Eigenvalues: wr is T's diagonal; a nonzero subdiagonal T(j+1, j) marks a
// standardized 2x2 block (equal diagonal, b c < 0) whose pair is
// wr +- i sqrt|b| sqrt|c|, positive imaginary part first: what dlanv2 and
// dhseqr return.
//
// Right eigenvectors (dtrevc3 'R', 'B', then dgebak and dgeev's normalization;
// left ones the same way on the transposed form, see left_eigenvectors):
// every eigenvector is solved at once, as a column of X with T X = X diag(w)
// in complex arithmetic, one Loop step per row j from the bottom up (a 2x2
// block of T takes two rows in one step). Column c starts as dtrevc3 starts
// it: a real eigenvalue with x(c) = 1; the first of a pair (c, c+1) with
// x(c) = 1, x(c+1) = i wi / T(c, c+1) when |T(c, c+1)| >= |T(c+1, c)|, else
// x(c) = -wi / T(c+1, c), x(c+1) = i; the second of a pair conjugated (the
// arithmetic is conjugate-symmetric, so it solves to the conjugate). A 1x1
// diagonal is perturbed to smin = max(ulp (|wr| + |wi|), smlnum) as dlaln2
// does (repeated eigenvalues); a 2x2 block is solved by Cramer's rule, an
// exactly singular one (a repeated pair) with its determinant raised to smin
// times its largest entry, as dlaln2's perturbed pivot; instead of dlaln2's
// overflow scaling, a column about to exceed a large bound is scaled down
// first and one that has grown large is renormalized (positive factors: the direction is kept). Then V = Z X, the
// balancing undone (rows scaled by dgebal's factors, then permuted back),
// each column scaled to unit 2-norm and, for a complex one, rotated so that
// its largest-magnitude component (the first of them) is real with the sign
// of its real part: dlartg + drot as dgeev does.
#include "lapack.hpp"

#include <jaxonnx/complex.hpp>

namespace lax_eig {

std::pair<E, E> eigenvalues(Ctx& K, const E& T) {
  E d = diag(K, T, 0), sub = diag(K, T, -1), up = diag(K, T, 1);
  E nsub = shift(K, sub, 1), sup = shift(K, up, -1);  // T(r+1, r), T(r-1, r)
  E first = ne(nsub, 0.0) && lt(K.iv, K.i(K.n - 1));
  E second = ne(sub, 0.0) && gt(K.iv, K.i(0));
  E wi = sel(first, fsqrt(fabs(up)) * fsqrt(fabs(nsub)),
             sel(second, -(fsqrt(fabs(sup)) * fsqrt(fabs(sub))), 0.0));
  return {d, wi};
}

namespace {

complex::Parts parts(const E& re, const E& im) { return {re.v, im.v}; }
E re_of(const complex::Parts& z, const Aval& a, Lowering& L) { return {&L, z.re, a}; }
E im_of(const complex::Parts& z, const Aval& a, Lowering& L) { return {&L, z.im, a}; }

// Solves T X = X diag(wr + i wi) for the rows of each column c above top[c]
// (rows top[c] .. are X0's, below them zeros), bottom up: dtrevc3's back
// substitution for every eigenvector at once.
std::pair<E, E> back_substitute(Ctx& K, const E& T, const E& wr, const E& wi, const E& top, const E& Xre,
                                const E& Xim) {
  Lowering& L = K.L;
  double ulp = K.ulp();
  E smin = fmax(ulp * (fabs(wr) + fabs(wi)), K.f(K.safmin() * (double(K.n) / ulp)));
  Aval va = K.vec();
  std::vector<E> init = {Xre, Xim, lit(L, dtype::boolean, 0)};
  std::vector<E> out = loop(L, K.i(K.n), init, "dtrevc3", [&](const E& it, const std::vector<E>& s) {
    const E &xr = s[0], &xi = s[1], &skip = s[2];
    E j = K.i(K.n - 1) - it;
    E j0 = K.clamp(j - K.i(1));
    E blk = gt(j, K.i(0)) && ne(at(T, j, j0), 0.0);
    E act = !skip && lt(j, top);  // [n] over columns
    E Tj = take(T, j, 0), Tj0 = take(T, j0, 0);
    // rhs of rows j, j-1: -(T X)[row, :]
    E r1re = -mk(L, "MatMul", {Tj.v, xr.v}, va), r1im = -mk(L, "MatMul", {Tj.v, xi.v}, va);
    E r0re = -mk(L, "MatMul", {Tj0.v, xr.v}, va), r0im = -mk(L, "MatMul", {Tj0.v, xi.v}, va);
    // 1x1: x_j = r_j / (T(j, j) - lambda), perturbed as dlaln2.
    E dr = at(T, j, j) - wr, di = -wi;
    E tiny = lt(fabs(dr) + fabs(di), smin);
    dr = sel(tiny, smin, dr);
    di = sel(tiny, 0.0, di);
    // 2x2 block rows (j-1, j): Cramer's rule.
    E a = at(T, j0, j0) - wr, b = at(T, j0, j), c = at(T, j, j0), dd = at(T, j, j) - wr;
    E mwi = -wi;
    complex::Parts am{a.v, mwi.v}, dm{dd.v, mwi.v};
    complex::Parts ad = complex::mul(L, am, dm, va);
    E det_re = re_of(ad, va, L) - b * c, det_im = im_of(ad, va, L);
    E m2 = fmax(fmax(fabs(a) + fabs(wi), fabs(dd) + fabs(wi)), fmax(fabs(b), fabs(c)));
    // An exactly singular block (the eigenvalue's pair repeated, e.g. two
    // equal blocks): the determinant becomes smin times the largest entry,
    // the size dlaln2's perturbed pivot gives it; without it 0/0 is NaN.
    // Only below safmin: a merely small determinant (a pair split by
    // rounding) is solved as it is, which keeps the vector accurate.
    E sing = lt(fabs(det_re) + fabs(det_im), K.f(K.safmin()) * m2);
    det_re = sel(sing, smin * m2, det_re);
    det_im = sel(sing, 0.0, det_im);
    // Overflow guard (dtrevc3/dlaln2 rescale a column instead): a column
    // whose solution would exceed kBig is scaled down first; the direction,
    // all that geev keeps, is unchanged.
    E rn1 = fabs(r1re) + fabs(r1im), rn0 = fabs(r0re) + fabs(r0im);
    E q1 = fabs(dr) + fabs(di);
    E q2 = fmax((fabs(det_re) + fabs(det_im)) / fmax(m2, K.f(K.safmin())), K.f(K.safmin()));
    E need = sel(blk, rn0 + rn1, rn1), q = sel(blk, q2, q1);
    double big = K.dt == dtype::f32 ? 1e30 : 1e290;
    E sc = sel(act && gt(need, q * big), (q * big) / need, 1.0);
    r1re = r1re * sc; r1im = r1im * sc; r0re = r0re * sc; r0im = r0im * sc;
    E xr_s = xr * unsq(sc, 0), xi_s = xi * unsq(sc, 0);
    complex::Parts x1 = complex::div(L, parts(r1re, r1im), parts(dr, di), va);
    complex::Parts det = parts(det_re, det_im);
    complex::Parts n0 = complex::mul(L, parts(r0re, r0im), dm, va);
    complex::Parts n1 = complex::mul(L, am, parts(r1re, r1im), va);
    E n0re = re_of(n0, va, L) - b * r1re, n0im = im_of(n0, va, L) - b * r1im;
    E n1re = re_of(n1, va, L) - c * r0re, n1im = im_of(n1, va, L) - c * r0im;
    complex::Parts y0 = complex::div(L, parts(n0re, n0im), det, va);
    complex::Parts y1 = complex::div(L, parts(n1re, n1im), det, va);
    E one_row = unsq(act && !blk, 0), two_rows = unsq(act && blk, 0);
    E rj = eq(K.ir, j), rj0 = eq(K.ir, j - K.i(1));
    auto upd = [&](const E& X, const Value& v1, const Value& v2, const Value& v0) {
      E X1 = sel(rj && one_row, unsq(E{&L, v1, va}, 0), X);
      X1 = sel(rj && two_rows, unsq(E{&L, v2, va}, 0), X1);
      return sel(rj0 && two_rows, unsq(E{&L, v0, va}, 0), X1);
    };
    E xr2 = upd(xr_s, x1.re, y1.re, y0.re);
    E xi2 = upd(xi_s, x1.im, y1.im, y0.im);
    // Keep every column's entries modest: rescale one that has grown large.
    E cmax = reduce("ReduceMax", fabs(xr2) + fabs(xi2), 0, true);
    double grown = K.dt == dtype::f32 ? 1e15 : 1e100;
    E inv = sel(gt(cmax, grown), 1.0 / cmax, 1.0);
    xr2 = xr2 * inv;
    xi2 = xi2 * inv;
    return std::make_pair(lit(L, dtype::boolean, 1), std::vector<E>{xr2, xi2, !skip && blk});
  });
  return {out[0], out[1]};
}

// geev's end: back-transform Y (Schur coordinates) by Z, scale the rows by
// `rows` and undo dgebal's permutation (dgebak), then normalize each column.
std::pair<E, E> finish(Ctx& K, const Schur& S, const E& Yre, const E& Yim, const E& rows, const E& cplx) {
  Lowering& L = K.L;
  E Vre = matmul(S.Z, Yre) * unsq(rows, 1), Vim = matmul(S.Z, Yim) * unsq(rows, 1);
  Vre = mk(L, "Gather", {Vre.v, S.invp.v}, Vre.a, {Attr::i("axis", 0)});
  Vim = mk(L, "Gather", {Vim.v, S.invp.v}, Vim.a, {Attr::i("axis", 0)});
  // Unit 2-norm.
  E nrm = fsqrt(reduce("ReduceSum", Vre * Vre + Vim * Vim, 0, true));
  E scl = 1.0 / nrm;
  Vre = Vre * scl;
  Vim = Vim * scl;
  // The largest component real (dlartg, drot), for complex columns.
  E mag = Vre * Vre + Vim * Vim;
  E kmax = mk(L, "ArgMax", {mag.v}, Aval(dtype::i64, {1, K.n}), {Attr::i("axis", 0), Attr::i("keepdims", 1)});
  E f = mk(L, "GatherElements", {Vre.v, kmax.v}, Aval(K.dt, {1, K.n}), {Attr::i("axis", 0)});
  E g = mk(L, "GatherElements", {Vim.v, kmax.v}, Aval(K.dt, {1, K.n}), {Attr::i("axis", 0)});
  E dn = fsqrt(f * f + g * g);
  E cs = fabs(f) / dn;
  E r = sign1(f) * dn;
  E sn = g / r;
  E rot = unsq(cplx, 0);  // real columns stay as they are
  E Rre = sel(rot, cs * Vre + sn * Vim, Vre);
  E Rim = sel(rot, cs * Vim - sn * Vre, Vim);
  Rim = sel(eq(K.ir, kmax) && rot, 0.0, Rim);
  return {Rre, Rim};
}

}  // namespace

std::pair<E, E> right_eigenvectors(Ctx& K, const Schur& S, const E& wr, const E& wi) {
  const E& T = S.T;
  E first = gt(wi, 0.0), second = lt(wi, 0.0), cplx = ne(wi, 0.0);
  E top = sel(second, K.iv - K.i(1), K.iv);  // the row of x's leading entry
  E tcc1 = diag(K, T, 1), tc1c = shift(K, diag(K, T, -1), 1);  // T(c, c+1), T(c+1, c)
  E big = ge(fabs(tcc1), fabs(tc1c));
  E af = sel(big, K.f(1.0), -wi / tc1c);
  E bf = sel(big, wi / tcc1, K.f(1.0));
  E alpha = sel(first, af, sel(second, shift(K, af, -1), K.f(1.0)));
  E beta = sel(first, bf, sel(second, -shift(K, bf, -1), K.f(0.0)));
  E Xre = sel(eq(K.ir, unsq(top, 0)), unsq(alpha, 0), 0.0);
  E Xim = sel(eq(K.ir, unsq(top + K.i(1), 0)) && unsq(cplx, 0), unsq(beta, 0), 0.0);
  auto [Yre, Yim] = back_substitute(K, T, wr, wi, top, Xre, Xim);
  return finish(K, S, Yre, Yim, S.d, cplx);
}

// u^H A = w u^H: y = Z^T u solves T^T y = conj(w) y, forward from the
// eigenvalue's block. With R the row reversal, T' = R T^T R is upper
// quasi-triangular and y' = R y solves T' y' = conj(w) y' bottom up, so the
// same back substitution runs on T'. dtrevc3 'L' starts a real eigenvalue's
// y(c) = 1 and a pair (p, p+1) (its first column) with y(p) = wi / T(p, p+1),
// y(p+1) = i when |T(p, p+1)| >= |T(p+1, p)|, else y(p) = 1,
// y(p+1) = -i wi / T(p+1, p); dgebak divides the rows by dgebal's factors.
std::pair<E, E> left_eigenvectors(Ctx& K, const Schur& S, const E& wr, const E& wi) {
  Lowering& L = K.L;
  const E& T = S.T;
  int64_t n = K.n;
  std::vector<int64_t> r;
  for (int64_t i = 0; i < n; ++i) r.push_back(n - 1 - i);
  Value rev = L.constant(r, {n});
  E Tt = mk(L, "Transpose", {T.v}, T.a, {Attr::ints("perm", {1, 0})});
  E Tr = mk(L, "Gather", {mk(L, "Gather", {Tt.v, rev}, T.a, {Attr::i("axis", 0)}).v, rev}, T.a, {Attr::i("axis", 1)});
  E first = gt(wi, 0.0), second = lt(wi, 0.0), cplx = ne(wi, 0.0);
  E tcc1 = diag(K, T, 1), tc1c = shift(K, diag(K, T, -1), 1);  // T(c, c+1), T(c+1, c)
  E big = ge(fabs(tcc1), fabs(tc1c));
  E af = sel(big, wi / tcc1, K.f(1.0));
  E bf = sel(big, K.f(1.0), -wi / tc1c);
  E alpha = sel(first, af, sel(second, shift(K, af, -1), K.f(1.0)));
  E beta = sel(first, bf, sel(second, -shift(K, bf, -1), K.f(0.0)));
  // The block's first row p in the reversed rows: n-1-p (alpha), n-2-p (beta).
  E p = sel(second, K.iv - K.i(1), K.iv);
  E rowA = K.i(n - 1) - p;
  E top = sel(cplx, rowA - K.i(1), rowA);
  E Xre = sel(eq(K.ir, unsq(rowA, 0)), unsq(alpha, 0), 0.0);
  E Xim = sel(eq(K.ir, unsq(rowA - K.i(1), 0)) && unsq(cplx, 0), unsq(beta, 0), 0.0);
  auto [Yre, Yim] = back_substitute(K, Tr, wr, -wi, top, Xre, Xim);
  Yre = mk(L, "Gather", {Yre.v, rev}, Yre.a, {Attr::i("axis", 0)});
  Yim = mk(L, "Gather", {Yim.v, rev}, Yim.a, {Attr::i("axis", 0)});
  return finish(K, S, Yre, Yim, 1.0 / S.d, cplx);
}

}  // namespace lax_eig
