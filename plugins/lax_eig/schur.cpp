// The real Schur form of one matrix as LAPACK computes it, each stage an ONNX
// Loop whose step is one step of the reference routine (indices 0-based):
//
//  * dgebal (LAPACK 3.12's, which scipy's OpenBLAS and so JAX use): the
//    permutation search (rows isolating an eigenvalue pushed down, then
//    columns pushed left, one candidate per step), then, for job 'B', the
//    scaling sweeps by powers of 2 until no factor changes. The factor of a
//    step is found in closed form (log2, then corrected by exact tests)
//    instead of LAPACK's doubling loops; the sfmin2/sfmax2 guards of those
//    loops (entries near the over/underflow limits) are left out.
//  * dgehd2: one Householder reflector (dlarfg's conventions) per column
//    ilo..ihi-2, applied from both sides and accumulated into Q (dorghr).
//  * dlahqr (dhseqr calls it for n < 75): one Loop step is one iteration of
//    its ITS loop: the deflation search (Ahues-Tisseur criterion), then either
//    the split-off 1x1 / 2x2 block (dlanv2 standardizes a 2x2 and its
//    rotation is applied to the rest of T and to Z) or a Francis double-shift
//    sweep (exceptional shifts when KDEFL hits multiples of 10 and 20; the
//    bulge chase is an inner Loop over k = m .. i-1). ITMAX = 30 max(10, nh)
//    sweeps per eigenvalue, as LAPACK; running out sets `failed`.
// The searches LAPACK runs as DO loops with an early exit (the largest k
// whose subdiagonal is negligible, the largest m that starts the sweep) are
// evaluated for all positions at once and the largest qualifying index
// taken with ReduceMax. dlarfg's rescaling of tiny vectors and dlanv2's of
// extreme entries are left out.
#include "lapack.hpp"

#include <cmath>

namespace lax_eig {

// v[clamp(r + s)] for every r: v shifted by s positions (edges repeat).
E shift(Ctx& K, const E& v, int64_t s) {
  std::vector<int64_t> ix;
  for (int64_t r = 0; r < K.n; ++r) ix.push_back(std::min(std::max(r + s, int64_t{0}), K.n - 1));
  return mk(K.L, "Gather", {v.v, K.L.constant(ix, {K.n})}, v.a, {Attr::i("axis", 0)});
}

// M[r, r + off] for every r (0 where r + off is outside the matrix).
E diag(Ctx& K, const E& M, int64_t off) {
  std::vector<int64_t> ix;
  std::vector<uint8_t> ok;
  for (int64_t r = 0; r < K.n; ++r) {
    int64_t c = r + off;
    ix.push_back(std::min(std::max(c, int64_t{0}), K.n - 1));
    ok.push_back(c >= 0 && c < K.n);
  }
  E g = mk(K.L, "GatherElements", {M.v, K.L.constant(ix, {K.n, 1})}, M.a.with_shape({K.n, 1}), {Attr::i("axis", 1)});
  E v{&K.L, reshape(K.L, g.v, g.a, M.a.with_shape({K.n})), M.a.with_shape({K.n})};
  E mask{&K.L, K.L.constant(dtype::boolean, {K.n}, ok.data(), ok.size()), Aval(dtype::boolean, {K.n})};
  return sel(mask, v, 0.0);
}

namespace {

E pow2(const E& e) { return mk(*e.L, "Pow", {lit(e, 2.0).v, e.v}, e.a); }

// The number of t >= 0 with x 2^(2t+1) < y (strict) or <= y: how many times
// one of dgebal's scaling loops runs (x, y > 0).
E doublings(const E& x, const E& y, bool strict) {
  auto runs = [&](const E& t) { return strict ? lt(x * pow2(2.0 * t + 1.0), y) : le(x * pow2(2.0 * t + 1.0), y); };
  E lg = mk(*x.L, "Log", {(y / x).v}, x.a) / 0.6931471805599453;
  E t = fmax(mk(*x.L, "Ceil", {((lg - 1.0) * 0.5).v}, x.a), lit(x, 0.0));
  for (int pass = 0; pass < 2; ++pass) {
    t = sel(gt(t, 0.0) && !runs(t - 1.0), t - 1.0, t);
    t = sel(runs(t), t + 1.0, t);
  }
  return t;
}

struct Balanced {
  E A, lo, hi, p, d;
};

// dgebal's permutation search.
Balanced permute(Ctx& K, const E& A0) {
  Lowering& L = K.L;
  E zero = K.i(0), n1 = K.i(K.n - 1);
  E p0 = K.iv;
  std::vector<E> init = {A0, zero, n1, n1, zero, lit(L, dtype::boolean, 0), p0};
  int64_t cap = 2 * (K.n + 1) * (K.n + 1);
  std::vector<E> out = loop(L, K.i(cap), init, "dgebal_permute", [&](const E&, const std::vector<E>& s) {
    const E &A = s[0], &k = s[1], &l = s[2], &cur = s[3], &phase = s[4], &noconv = s[5], &p = s[6];
    E isrow = eq(phase, K.i(0)), iscol = eq(phase, K.i(1));
    E pos = K.clamp(cur);
    E row = fabs(take(A, pos, 0)), col = fabs(take(A, pos, 1));
    E rnz = reduce("ReduceMax", sel(le(K.iv, l) && ne(K.iv, pos), row, 0.0), 0);
    E cnz = reduce("ReduceMax", sel(ge(K.iv, k) && le(K.iv, l) && ne(K.iv, pos), col, 0.0), 0);
    E can = (isrow && eq(rnz, 0.0)) || (iscol && eq(cnz, 0.0));
    E target = sel(isrow, l, k);
    E s1 = sel(can && eq(K.iv, pos), target, sel(can && eq(K.iv, target), pos, K.iv));
    E A1 = sel(ge(K.ic, k), mk(L, "Gather", {A.v, s1.v}, A.a, {Attr::i("axis", 0)}), A);
    E A2 = sel(le(K.ir, l), mk(L, "Gather", {A1.v, s1.v}, A.a, {Attr::i("axis", 1)}), A1);
    E p2 = mk(L, "Gather", {p.v, s1.v}, p.a, {Attr::i("axis", 0)});
    E nc = noconv || can;
    E all_isolated = isrow && can && eq(l, K.i(0));
    E l2 = sel(isrow && can && gt(l, K.i(0)), l - K.i(1), l);
    E k2 = sel(iscol && can, k + K.i(1), k);
    E cur2 = sel(isrow, cur - K.i(1), cur + K.i(1));
    E row_end = isrow && lt(cur2, K.i(0));
    E col_end = iscol && gt(cur2, l2);
    E pass_end = row_end || col_end;
    E cur3 = sel(row_end && nc, l2, sel(pass_end, k2, cur2));
    E phase2 = sel(all_isolated || (col_end && !nc), K.i(2), sel(row_end && !nc, K.i(1), phase));
    E nc2 = nc && !pass_end;
    return std::make_pair(ne(phase2, K.i(2)), std::vector<E>{A2, k2, l2, cur3, phase2, nc2, p2});
  });
  return {out[0], out[1], out[2], out[6], mk(L, "Expand", {K.f(1.0).v, i64s(L, {K.n})}, K.vec())};
}

// dgebal's scaling sweeps on rows/columns lo..hi.
void scale(Ctx& K, Balanced& B) {
  Lowering& L = K.L;
  double sfmin1 = K.safmin() / K.ulp(), sfmax1 = 1.0 / sfmin1;
  std::vector<E> init = {B.A, B.d, B.lo, lit(L, dtype::boolean, 0)};
  E lo = B.lo, hi = B.hi;
  std::vector<E> out = loop(L, K.i(128 * K.n), init, "dgebal_scale", [&](const E&, const std::vector<E>& s) {
    const E &A = s[0], &d = s[1], &i = s[2], &noconv = s[3];
    E inkl = ge(K.iv, lo) && le(K.iv, hi);
    E colv = take(A, i, 1), rowv = take(A, i, 0);
    E c = nrm2(sel(inkl, colv, 0.0));
    E r = nrm2(sel(inkl, rowv, 0.0));
    E skip0 = eq(c, 0.0) || eq(r, 0.0);
    E cs = sel(skip0, K.f(1.0), c), rs = sel(skip0, K.f(1.0), r);
    E e = doublings(cs, rs, true) - doublings(rs, cs, false);
    E f = pow2(e);
    E skip1 = ge(cs * f + rs / f, K.f(0.95) * (cs + rs));
    E sci = take(d, i, 0);
    E skip2 = lt(f, 1.0) && lt(sci, 1.0) && le(f * sci, sfmin1);
    E skip3 = gt(f, 1.0) && gt(sci, 1.0) && ge(sci, sfmax1 / f);
    E apply = !(skip0 || skip1 || skip2 || skip3);
    E fe = sel(apply, f, 1.0);
    E d2 = sel(eq(K.iv, i), d * fe, d);
    E A1 = sel(eq(K.ir, i) && ge(K.ic, lo), A * (1.0 / fe), A);
    E A2 = sel(eq(K.ic, i) && le(K.ir, hi), A1 * fe, A1);
    E nc = noconv || apply;
    E i2 = i + K.i(1);
    E end = gt(i2, hi);
    E done = end && !nc;
    return std::make_pair(!done, std::vector<E>{A2, d2, sel(end, lo, i2), nc && !end});
  });
  B.A = out[0];
  B.d = out[1];
}

// dgehd2 + dorghr: A = Q H Q^T, H upper Hessenberg.
std::pair<E, E> hessenberg(Ctx& K, const E& A0, const E& lo, const E& hi) {
  Lowering& L = K.L;
  std::vector<double> eye(static_cast<size_t>(K.n * K.n), 0.0);
  for (int64_t r = 0; r < K.n; ++r) eye[static_cast<size_t>(r * K.n + r)] = 1.0;
  E Q0 = K.dt == dtype::f64 ? E{&L, L.constant(eye, {K.n, K.n}), K.mat()}
                            : E{&L, L.constant(std::vector<float>(eye.begin(), eye.end()), {K.n, K.n}), K.mat()};
  E trips = fmax(hi - lo - K.i(1), K.i(0));
  std::vector<E> out = loop(L, trips, {A0, Q0}, "dgehd2", [&](const E& it, const std::vector<E>& s) {
    const E &A = s[0], &Q = s[1];
    E i = lo + it, i1 = i + K.i(1);
    E alpha = at(A, i1, i);
    E x = sel(gt(K.iv, i1) && le(K.iv, hi), take(A, i, 1), 0.0);
    E xnorm = nrm2(x);
    E z = eq(xnorm, 0.0);
    E beta = -(sign1(alpha) * dlapy2(alpha, xnorm));
    E tau = sel(z, 0.0, (beta - alpha) / beta);
    E scal = sel(z, 0.0, 1.0 / (alpha - beta));
    E v = sel(eq(K.iv, i1), K.f(1.0), x * scal);
    E tv = v * tau;
    E w = sel(le(K.iv, hi), matvec(A, v), 0.0);
    E A1 = A - outer(w, tv);
    E u = sel(gt(K.iv, i), mk(L, "MatMul", {v.v, A1.v}, K.vec()), 0.0);
    E A2 = A1 - outer(tv, u);
    E A3 = K.set(A2, i1, i, sel(z, alpha, beta));
    E Q1 = Q - outer(matvec(Q, v), tv);
    return std::make_pair(lit(L, dtype::boolean, 1), std::vector<E>{A3, Q1});
  });
  // Below the subdiagonal: the reflectors in LAPACK's storage, zeros here.
  E H = sel(gt(K.ir, K.ic + K.i(1)), 0.0, out[0]);
  return {H, out[1]};
}

struct Nv2 {
  E a, b, c, d, cs, sn;
};

// dlanv2: the standardized Schur form of [[a, b], [c, d]] and its rotation.
Nv2 dlanv2(Ctx& K, const E& a, const E& b, const E& c, const E& d) {
  double eps = K.ulp();
  E one = K.f(1.0), zero = K.f(0.0);
  E temp = a - d;
  E p = 0.5 * temp;
  E bcmax = fmax(fabs(b), fabs(c));
  E bcmis = fmin(fabs(b), fabs(c)) * sign1(b) * sign1(c);
  E scl = fmax(fabs(p), bcmax);
  E scl_s = sel(eq(scl, 0.0), one, scl);
  E z = (p / scl_s) * p + (bcmax / scl_s) * bcmis;
  E real = ge(z, 4.0 * eps);
  // Real eigenvalues.
  E zr = p + sign1(p) * (fsqrt(scl) * fsqrt(sel(real, z, zero)));
  E zr_s = sel(eq(zr, 0.0), one, zr);
  E ra = d + zr, rd = d - (bcmax / zr_s) * bcmis;
  E rtau = dlapy2(c, zr);
  E rtau_s = sel(eq(rtau, 0.0), one, rtau);
  E rcs = zr / rtau_s, rsn = c / rtau_s, rb = b - c;
  // Complex or almost equal real eigenvalues: make the diagonal equal.
  E sigma = b + c;
  E tau = dlapy2(sigma, temp);
  E tau_s = sel(eq(tau, 0.0), one, tau);
  E cs = fsqrt(0.5 * (1.0 + fabs(sigma) / tau_s));
  E sn = -(p / (tau_s * cs)) * sign1(sigma);
  E aa = a * cs + b * sn, bb = -a * sn + b * cs, cc = c * cs + d * sn, dd = -c * sn + d * cs;
  E a2 = aa * cs + cc * sn, b2 = bb * cs + dd * sn, c2 = -(aa * sn) + cc * cs, d2 = -bb * sn + dd * cs;
  E t2 = 0.5 * (a2 + d2);
  E c_nz = ne(c2, 0.0), b_nz = ne(b2, 0.0);
  E same = c_nz && b_nz && eq(sign1(b2), sign1(c2));
  E sab = fsqrt(fabs(b2)), sac = fsqrt(fabs(c2));
  E pp = sign1(c2) * (sab * sac);
  E bc = fabs(b2 + c2);
  E tt = 1.0 / fsqrt(sel(eq(bc, 0.0), one, bc));
  E cs1 = sab * tt, sn1 = sac * tt;
  E cs_same = cs * cs1 - sn * sn1, sn_same = cs * sn1 + sn * cs1;
  E bzero = c_nz && !b_nz;
  E ca = sel(same, t2 + pp, t2), cd = sel(same, t2 - pp, t2);
  E cb = sel(same, b2 - c2, sel(bzero, -c2, b2));
  E cc_ = sel(same || bzero, zero, c2);
  E ccs = sel(same, cs_same, sel(bzero, -sn, cs));
  E csn = sel(same, sn_same, sel(bzero, cs, sn));
  // The general case: real or not.
  E ga = sel(real, ra, ca), gb = sel(real, rb, cb), gc = sel(real, zero, cc_), gd = sel(real, rd, cd);
  E gcs = sel(real, rcs, ccs), gsn = sel(real, rsn, csn);
  // The early exits.
  E c0 = eq(c, 0.0), b0 = !c0 && eq(b, 0.0);
  E keep = c0 || (!b0 && eq(temp, 0.0) && ne(sign1(b), sign1(c)));
  Nv2 r;
  r.a = sel(keep, a, sel(b0, d, ga));
  r.b = sel(keep, b, sel(b0, -c, gb));
  r.c = sel(keep, c, sel(b0, zero, gc));
  r.d = sel(keep, d, sel(b0, a, gd));
  r.cs = sel(keep, one, sel(b0, zero, gcs));
  r.sn = sel(keep, zero, sel(b0, one, gsn));
  return r;
}

// One double-shift sweep k = m .. i-1 (dlahqr's DO 130 loop).
std::pair<E, E> sweep(Ctx& K, const E& H0, const E& Z0, const E& trips, const E& m, const E& i, const E& l,
                      const E& vm1, const E& vm2, const E& vm3) {
  Lowering& L = K.L;
  std::vector<E> out = loop(L, trips, {H0, Z0}, "dlahqr_sweep", [&](const E& it, const std::vector<E>& s) {
    E H = s[0], Z = s[1];
    E k = m + it;
    E nr3 = lt(k, i - K.i(1));
    E first = eq(k, m);
    E k0 = K.clamp(k), k1 = K.clamp(k + K.i(1)), k2 = K.clamp(k + K.i(2)), km1 = K.clamp(k - K.i(1));
    E colk = take(H, km1, 1);
    E a = sel(first, vm1, take(colk, k0, 0));
    E b = sel(first, vm2, take(colk, k1, 0));
    E c = sel(nr3, sel(first, vm3, take(colk, k2, 0)), 0.0);
    // dlarfg(nr, a, (b, c))
    E bc = mk(L, "Concat", {unsq(b, 0).v, unsq(c, 0).v}, b.a.with_shape({2}), {Attr::i("axis", 0)});
    E xn = sel(nr3, K.dt == dtype::f64 ? hypot_rounded(b, c) : nrm2(bc), fabs(b));
    E z = eq(xn, 0.0);
    E beta = -(sign1(a) * dlapy2(a, xn));
    E t1 = sel(z, 0.0, (beta - a) / beta);
    E scal = sel(z, 1.0, 1.0 / (a - beta));
    E v2 = b * scal, v3 = c * scal;
    E v1 = sel(z, a, beta);
    E gtm = gt(k, m);
    H = sel(gtm && eq(K.ir, k) && eq(K.ic, k - K.i(1)), v1, H);
    H = sel(gtm && eq(K.ir, k + K.i(1)) && eq(K.ic, k - K.i(1)), 0.0, H);
    H = sel(gtm && nr3 && eq(K.ir, k + K.i(2)) && eq(K.ic, k - K.i(1)), 0.0, H);
    H = sel(!gtm && gt(m, l) && eq(K.ir, k) && eq(K.ic, k - K.i(1)), H * (1.0 - t1), H);
    E t2 = t1 * v2, t3 = t1 * v3;
    E e = sel(eq(K.iv, k), t1, sel(eq(K.iv, k + K.i(1)), t2, sel(nr3 && eq(K.iv, k + K.i(2)), t3, 0.0)));
    // From the left, columns k .. n-1.
    E sum = take(H, k0, 0) + v2 * take(H, k1, 0) + v3 * take(H, k2, 0);
    H = H - outer(e, sel(ge(K.iv, k), sum, 0.0));
    // From the right, rows 0 .. min(k+3, i).
    E sc = take(H, k0, 1) + v2 * take(H, k1, 1) + v3 * take(H, k2, 1);
    H = H - outer(sel(le(K.iv, fmin(k + K.i(3), i)), sc, 0.0), e);
    E sz = take(Z, k0, 1) + v2 * take(Z, k1, 1) + v3 * take(Z, k2, 1);
    Z = Z - outer(sz, e);
    return std::make_pair(lit(L, dtype::boolean, 1), std::vector<E>{H, Z});
  });
  return {out[0], out[1]};
}

// dlahqr with WANTT and WANTZ on rows/columns lo..hi of H.
std::tuple<E, E, E> dlahqr(Ctx& K, const E& H0, const E& Z0, const E& lo, const E& hi) {
  Lowering& L = K.L;
  double ulp = K.ulp();
  E nh = hi - lo + K.i(1);
  E smlnum = K.f(K.safmin()) * (as(nh, K.dt) / ulp);
  E itmax = K.i(30) * fmax(nh, K.i(10));
  int64_t cap = K.n * (30 * std::max<int64_t>(10, K.n) + 2) + 2;
  std::vector<E> init = {H0, Z0, hi, lo, K.i(0), K.i(0), lit(L, dtype::boolean, 0)};
  std::vector<E> out = loop(L, K.i(cap), init, "dlahqr", [&](const E&, const std::vector<E>& s) {
    E H = s[0], Z = s[1];
    const E &i = s[2], &l = s[3], &its = s[4], &kdefl = s[5];
    // d[r] = H(r, r), sub[r] = H(r, r-1), up[r] = H(r, r+1), sup[r] = H(r-1, r)
    E d = diag(K, H, 0), sub = diag(K, H, -1), up = diag(K, H, 1), sup = shift(K, up, -1);
    E dm1 = shift(K, d, -1), dp1 = shift(K, d, 1);
    E subm1 = shift(K, sub, -1), subp1 = shift(K, sub, 1), subp2 = shift(K, sub, 2);
    // Look for a single small subdiagonal element.
    E hs = fabs(sub);
    E tst0 = fabs(dm1) + fabs(d);
    E tst = sel(eq(tst0, 0.0),
                tst0 + sel(ge(K.iv - K.i(2), lo), fabs(subm1), 0.0) + sel(le(K.iv + K.i(1), hi), fabs(subp1), 0.0),
                tst0);
    E ab = fmax(hs, fabs(sup)), ba = fmin(hs, fabs(sup));
    E aa = fmax(fabs(d), fabs(dm1 - d)), bb = fmin(fabs(d), fabs(dm1 - d));
    E ss = aa + ab;
    ss = sel(eq(ss, 0.0), K.f(1.0), ss);
    E small = le(hs, smlnum) ||
              (le(hs, ulp * tst) && le(ba * (ab / ss), fmax(smlnum, ulp * (bb * (aa / ss)))));
    E newl = reduce("ReduceMax", sel(gt(K.iv, l) && le(K.iv, i) && small, K.iv, l), 0);
    H = sel(gt(newl, lo) && eq(K.ir, newl) && eq(K.ic, newl - K.i(1)), 0.0, H);
    E conv = ge(newl, i - K.i(1));
    // Shifts.
    E kd = kdefl + K.i(1);
    E ex20 = eq(mk(L, "Mod", {kd.v, K.i(20).v}, kd.a), K.i(0));
    E ex10 = eq(mk(L, "Mod", {kd.v, K.i(10).v}, kd.a), K.i(0));
    E ic_ = K.clamp(i), im1 = K.clamp(i - K.i(1)), im2 = K.clamp(i - K.i(2));
    E lc = K.clamp(newl), lp1 = K.clamp(newl + K.i(1)), lp2 = K.clamp(newl + K.i(2));
    E sA = fabs(at(H, ic_, im1)) + fabs(at(H, im1, im2));
    E sB = fabs(at(H, lp1, lc)) + fabs(at(H, lp2, lp1));
    E exs = sel(ex20, sA, sB), exd = sel(ex20, at(H, ic_, ic_), at(H, lc, lc));
    E ex = ex20 || ex10;
    E x11 = 0.75 * exs + exd;
    E h11 = sel(ex, x11, at(H, im1, im1));
    E h12 = sel(ex, -0.4375 * exs, at(H, im1, ic_));
    E h21 = sel(ex, exs, at(H, ic_, im1));
    E h22 = sel(ex, x11, at(H, ic_, ic_));
    E s0 = fabs(h11) + fabs(h12) + fabs(h21) + fabs(h22);
    E sz = eq(s0, 0.0);
    E sv = sel(sz, K.f(1.0), s0);
    h11 = h11 / sv; h21 = h21 / sv; h12 = h12 / sv; h22 = h22 / sv;
    E tr = (h11 + h22) / 2.0;
    E det = (h11 - tr) * (h22 - tr) - h12 * h21;
    E rtdisc = fsqrt(fabs(det));
    E cplx = ge(det, 0.0);
    E r1 = tr + rtdisc, r2 = tr - rtdisc;
    E rr = sel(le(fabs(r1 - h22), fabs(r2 - h22)), r1, r2) * sv;
    E rt1r = sel(sz, 0.0, sel(cplx, tr * sv, rr));
    E rt2r = rt1r;
    E rt1i = sel(sz || !cplx, K.f(0.0), rtdisc * sv);
    E rt2i = -rt1i;
    // Look for two consecutive small subdiagonal elements.
    E s1 = fabs(d - rt2r) + fabs(rt2i) + fabs(subp1);
    s1 = sel(eq(s1, 0.0), K.f(1.0), s1);
    E h21s = subp1 / s1;
    E v1 = h21s * up + (d - rt1r) * ((d - rt2r) / s1) - rt1i * (rt2i / s1);
    E v2 = h21s * (d + dp1 - rt1r - rt2r);
    E v3 = h21s * subp2;
    E s2 = fabs(v1) + fabs(v2) + fabs(v3);
    s2 = sel(eq(s2, 0.0), K.f(1.0), s2);
    v1 = v1 / s2; v2 = v2 / s2; v3 = v3 / s2;
    E stop = eq(K.iv, newl) ||
             le(fabs(sub) * (fabs(v2) + fabs(v3)), ulp * fabs(v1) * (fabs(dm1) + fabs(d) + fabs(dp1)));
    E m = reduce("ReduceMax", sel(ge(K.iv, newl) && le(K.iv, i - K.i(2)) && stop, K.iv, newl), 0);
    E mc = K.clamp(m);
    E trips = sel(conv, K.i(0), i - m);
    auto [Hs, Zs] = sweep(K, H, Z, trips, m, i, newl, take(v1, mc, 0), take(v2, mc, 0), take(v3, mc, 0));
    // A 2x2 block split off: standardize it (dlanv2) and rotate the rest.
    E two = conv && eq(newl, i - K.i(1)) && gt(i, K.i(0));
    E p = im1, q = ic_;
    Nv2 nv = dlanv2(K, at(H, p, p), at(H, p, q), at(H, q, p), at(H, q, q));
    E rp = take(H, p, 0), rq = take(H, q, 0);
    E right = gt(K.ic, q);
    E Hr = sel(two && eq(K.ir, p) && right, nv.cs * rp + nv.sn * rq,
               sel(two && eq(K.ir, q) && right, nv.cs * rq - nv.sn * rp, H));
    E cp = unsq(take(Hr, p, 1), 1), cq = unsq(take(Hr, q, 1), 1);
    E above = lt(K.ir, p);
    Hr = sel(two && eq(K.ic, p) && above, nv.cs * cp + nv.sn * cq,
             sel(two && eq(K.ic, q) && above, nv.cs * cq - nv.sn * cp, Hr));
    Hr = sel(two && eq(K.ir, p) && eq(K.ic, p), nv.a, Hr);
    Hr = sel(two && eq(K.ir, p) && eq(K.ic, q), nv.b, Hr);
    Hr = sel(two && eq(K.ir, q) && eq(K.ic, p), nv.c, Hr);
    Hr = sel(two && eq(K.ir, q) && eq(K.ic, q), nv.d, Hr);
    E zp = unsq(take(Z, p, 1), 1), zq = unsq(take(Z, q, 1), 1);
    E Zr = sel(two && eq(K.ic, p), nv.cs * zp + nv.sn * zq, sel(two && eq(K.ic, q), nv.cs * zq - nv.sn * zp, Z));
    E Hn = sel(conv, Hr, Hs), Zn = sel(conv, Zr, Zs);
    E i2 = sel(conv, newl - K.i(1), i);
    E l2 = sel(conv, lo, newl);
    E its2 = sel(conv, K.i(0), its + K.i(1));
    E kd2 = sel(conv, K.i(0), kd);
    E failed = !conv && gt(its2, itmax);
    E go = ge(i2, lo) && !failed;
    return std::make_pair(go, std::vector<E>{Hn, Zn, i2, l2, its2, kd2, failed});
  });
  return {out[0], out[1], out[6]};
}

}  // namespace

Schur real_schur(Ctx& K, const E& A0, bool scaling) {
  // geev/gees first scale a matrix whose largest entry is outside
  // [sqrt(safmin) / ulp, its inverse] to that bound (dlascl: one multiplication
  // by cscale / anrm for all but the most extreme norms).
  double smlnum = std::sqrt(K.safmin()) / K.ulp(), bignum = 1.0 / smlnum;
  E anrm = reduce("ReduceMax", reduce("ReduceMax", fabs(A0), 1), 0);
  E lo_n = gt(anrm, 0.0) && lt(anrm, smlnum), hi_n = gt(anrm, bignum);
  E cscale = sel(lo_n, K.f(smlnum), sel(hi_n, K.f(bignum), anrm));
  E safe = sel(eq(anrm, 0.0), K.f(1.0), anrm);
  E A = sel(lo_n || hi_n, A0 * (cscale / safe), A0);
  E unscale = sel(lo_n || hi_n, safe / cscale, K.f(1.0));
  Balanced B = permute(K, A);
  if (scaling) scale(K, B);
  auto [H, Q] = hessenberg(K, B.A, B.lo, B.hi);
  auto [T, Z, failed] = dlahqr(K, H, Q, B.lo, B.hi);
  // invp[p[r]] = r
  E invp = mk(K.L, "ScatterElements", {K.iv.v, B.p.v, K.iv.v}, K.iv.a, {Attr::i("axis", 0)});
  return {T, Z, B.d, invp, failed, unscale};
}

}  // namespace lax_eig
