// jaxonnx plugin SDK: elementary functions of complex values.
//
// Over the parts of jaxonnx/complex.hpp (z = x + iy, `p` the aval of one
// part): tanh, tan, sinh, cosh, expm1, log1p, asin, acos, atan, asinh,
// acosh, atanh, sign, rsqrt, logistic, exp2, and atan2 of complex operands. Principal branches and cuts as
// C99's complex functions (and JAX's CHLO/XLA expansions) put them; the
// formulas avoid cancellation and overflow on finite inputs:
//
// - asin, acos, acosh are Kahan's ("Branch cuts for complex elementary
//   functions", 1987): real asinh/atan2 of products of sqrt(1 - z),
//   sqrt(1 + z), sqrt(z - 1), sqrt(z + 1), whose terms never cancel. On a
//   cut JAX takes a zero part as +0 for these (and asinh): plus_zero makes
//   it so, and the inner square roots read the sign of zero (C99's csqrt) to
//   land on that side. atanh/atan (like log) follow the sign of zero.
// - asinh(z) = -i asin(iz), atan(z) = -i atanh(iz), tan(z) = -i tanh(iz).
// - tanh(z) = (sinh x cosh x + i sin y cos y) / (sinh^2 x + cos^2 y), or
//   sign(x) + 4 i sin y cos y e^(-2|x|) once tanh x rounds to +-1.
// - atanh(z) = log(((1 + x)^2 + y^2) / ((1 - x)^2 + y^2)) / 4
//   + i atan2(2y, (1 - x)(1 + x) - y^2) / 2; i pi/2 sign(y) far out.
// - log1p, expm1 and the real sinh use Kahan's real log1p/expm1
//   (jaxonnx/special.hpp, as plugins/lax_math does for real operands).
//
// Every function is elementwise on one shape (the operand's); .emits the
// ops of `emits_functions`.
#pragma once

#include <cmath>
#include <string_view>
#include <vector>

#include "jaxonnx/complex.hpp"
#include "jaxonnx/expr.hpp"
#include "jaxonnx/registration.hpp"
#include "jaxonnx/special.hpp"

namespace jaxonnx::sdk::complex {

// Real elementwise ops (jaxonnx/expr.hpp) on parts of aval `p`, and the real
// functions the complex ones are built from.
struct Real : Expr {
  Lowering& L;
  Aval p;
  Real(Lowering& l, const Aval& part) : Expr(l, part.dtype), L(l), p(part) {}

  // Beyond this magnitude x^2 + 1 rounds to x^2 (1/sqrt(eps)).
  double big() const { return f64() ? 134217728.0 : 4096.0; }

  Value log1p(Value x) { return special::log1p(*this, x); }
  Value expm1(Value x) { return special::expm1(*this, x); }
  // (expm1(x) - expm1(-x)) / 2: the two terms have opposite signs.
  Value sinh(Value x) { return mul(k(0.5), sub(expm1(x), expm1(neg(x)))); }
  Value cosh(Value x) { return mul(k(0.5), add(exp(x), exp(neg(x)))); }
  // asinh(t) = sign(t) log1p(|t| + t^2 / (1 + sqrt(1 + t^2))); log 2|t| far out.
  Value asinh(Value t) {
    Value a = abs(t);
    Value a2 = mul(a, a);
    Value r = log1p(add(a, div(a2, add(k(1), sqrt(add(k(1), a2))))));
    r = where(gt(a, k(big())), add(log(a), k(0.69314718055994530942)), r);
    return copysign(r, t);
  }
};

// i z and -i z.
inline Parts times_i(Real& r, const Parts& z) { return {r.neg(z.im), z.re}; }
inline Parts times_minus_i(Real& r, const Parts& z) { return {z.im, r.neg(z.re)}; }

// conj(a) b, as its real and imaginary parts.
inline Parts conj_mul(Real& r, const Parts& a, const Parts& b) {
  return {r.add(r.mul(a.re, b.re), r.mul(a.im, b.im)), r.sub(r.mul(a.re, b.im), r.mul(a.im, b.re))};
}

// 1 + s z for s = +-1, keeping the sign of a zero imaginary part (-0 for
// 1 - (x + 0i)), which decides the side of a cut in sqrt(.., true).
inline Parts one_plus(Real& r, const Parts& z, double s) {
  if (s > 0) return {r.add(r.k(1), z.re), z.im};
  return {r.sub(r.k(1), z.re), r.neg(z.im)};
}
inline Parts plus_one(Real& r, const Parts& z, double s) { return {r.add(z.re, r.k(s)), z.im}; }

inline Parts sinh(Lowering& L, const Parts& z, const Aval& p) {
  Real r{L, p};
  return {r.mul(r.sinh(z.re), r.cos(z.im)), real_if_zero(L, z.im, r.mul(r.cosh(z.re), r.sin(z.im)), p)};
}
inline Parts cosh(Lowering& L, const Parts& z, const Aval& p) {
  Real r{L, p};
  return {r.mul(r.cosh(z.re), r.cos(z.im)), real_if_zero(L, z.im, r.mul(r.sinh(z.re), r.sin(z.im)), p)};
}

inline Parts tanh(Lowering& L, const Parts& z, const Aval& p) {
  Real r{L, p};
  Value s = r.sinh(z.re), c = r.cosh(z.re);
  Value sy = r.sin(z.im), cy = r.cos(z.im);
  Value d = r.add(r.mul(s, s), r.mul(cy, cy));
  Value scy = r.mul(sy, cy);
  Value ax = r.abs(z.re);
  Value far = r.gt(ax, r.k(20));  // tanh(20) rounds to 1 in float64
  Value re = r.where(far, r.where(r.signbit(z.re), r.k(-1), r.k(1)), r.div(r.mul(s, c), d));
  Value im = r.where(far, r.mul(r.mul(r.k(4), scy), r.exp(r.mul(r.k(-2), ax))), r.div(scy, d));
  return {re, im};
}
inline Parts tan(Lowering& L, const Parts& z, const Aval& p) {
  Real r{L, p};
  Parts t = tanh(L, times_i(r, z), p);
  return times_minus_i(r, t);
}

// expm1(z) = (e^x cos y - 1) + i e^x sin y with e^x cos y - 1 =
// expm1(x) cos y - 2 sin^2(y/2).
inline Parts expm1(Lowering& L, const Parts& z, const Aval& p) {
  Real r{L, p};
  Value h = r.sin(r.mul(r.k(0.5), z.im));
  Value re = r.sub(r.mul(r.expm1(z.re), r.cos(z.im)), r.mul(r.k(2), r.mul(h, h)));
  return {re, real_if_zero(L, z.im, r.mul(r.exp(z.re), r.sin(z.im)), p)};
}

// log1p(z) = log|1 + z| + i arg(1 + z); near 0 the modulus as
// log1p(x (2 + x) + y^2) / 2.
inline Parts log1p(Lowering& L, const Parts& z, const Aval& p) {
  Real r{L, p};
  Parts w = one_plus(r, z, 1);
  Value near = r.lt(abs(L, z, p), r.k(0.5));
  Value small = r.mul(r.k(0.5), r.log1p(r.add(r.mul(z.re, r.add(r.k(2), z.re)), r.mul(z.im, z.im))));
  Value re = r.where(near, small, r.log(abs(L, w, p)));
  return {re, atan2(L, w.im, w.re, p)};
}

// z with -0 parts as +0 (by Where: the optimizer may drop an x + 0).
inline Parts plus_zero(Real& r, const Parts& z) {
  auto fix = [&](Value v) { return r.where(r.eq(v, r.k(0)), r.k(0), v); };
  return {fix(z.re), fix(z.im)};
}

// asin(z) = atan2(x, Re(sqrt(1 - z) sqrt(1 + z)))
//         + i asinh(Im(conj(sqrt(1 - z)) sqrt(1 + z))).
inline Parts asin(Lowering& L, const Parts& z0, const Aval& p) {
  Real r{L, p};
  Parts z = plus_zero(r, z0);
  Parts a = sqrt(L, one_plus(r, z, -1), p, true), b = sqrt(L, one_plus(r, z, 1), p, true);
  Value re_ab = r.sub(r.mul(a.re, b.re), r.mul(a.im, b.im));
  return {atan2(L, z.re, re_ab, p), r.asinh(conj_mul(r, a, b).im)};
}
// acos(z) = 2 atan2(Re sqrt(1 - z), Re sqrt(1 + z))
//         + i asinh(Im(conj(sqrt(1 + z)) sqrt(1 - z))).
inline Parts acos(Lowering& L, const Parts& z0, const Aval& p) {
  Real r{L, p};
  Parts z = plus_zero(r, z0);
  Parts a = sqrt(L, one_plus(r, z, -1), p, true), b = sqrt(L, one_plus(r, z, 1), p, true);
  return {r.mul(r.k(2), atan2(L, a.re, b.re, p)), r.asinh(conj_mul(r, b, a).im)};
}
// acosh(z) = asinh(Re(conj(sqrt(z - 1)) sqrt(z + 1)))
//          + 2i atan2(Im sqrt(z - 1), Re sqrt(z + 1)).
inline Parts acosh(Lowering& L, const Parts& z0, const Aval& p) {
  Real r{L, p};
  Parts z = plus_zero(r, z0);
  Parts a = sqrt(L, plus_one(r, z, -1), p, true), b = sqrt(L, plus_one(r, z, 1), p, true);
  return {r.asinh(conj_mul(r, a, b).re), r.mul(r.k(2), atan2(L, a.im, b.re, p))};
}
inline Parts asinh(Lowering& L, const Parts& z, const Aval& p) {
  Real r{L, p};
  return times_minus_i(r, asin(L, times_i(r, z), p));
}

inline Parts atanh(Lowering& L, const Parts& z, const Aval& p) {
  Real r{L, p};
  Value one_minus = r.sub(r.k(1), z.re);
  Value y2 = r.mul(z.im, z.im);
  Value one_plus_x = r.add(r.k(1), z.re);
  Value d = r.add(r.mul(one_minus, one_minus), y2);
  Value n = r.add(r.mul(one_plus_x, one_plus_x), y2);
  // log(n / d) = log1p(4x / d): log1p where 4x/d is small, the difference
  // of logs near x = +-1 (where 1 + 4x/d would cancel).
  Value q = r.div(r.mul(r.k(4), z.re), d);
  Value re = r.mul(r.k(0.25), r.where(r.lt(r.abs(q), r.k(0.5)), r.log1p(q), r.sub(r.log(n), r.log(d))));
  Value im = r.mul(r.k(0.5), atan2(L, r.mul(r.k(2), z.im),
                                   r.sub(r.mul(one_minus, one_plus_x), y2), p));
  // Far out the squares overflow: atanh(z) ~ 1/z + i pi/2 sign(y).
  double far = r.f64() ? 1e150 : 1e18;
  Value out = r.gt(r.f("Max", {r.abs(z.re), r.abs(z.im)}), r.k(far));
  Parts inv = div(L, {r.k(1), r.k(0)}, z, p);
  return {r.where(out, inv.re, re), r.where(out, r.where(r.signbit(z.im), r.k(-1.57079632679489661923), r.k(1.57079632679489661923)), im)};
}
inline Parts atan(Lowering& L, const Parts& z, const Aval& p) {
  Real r{L, p};
  return times_minus_i(r, atanh(L, times_i(r, z), p));
}

// sign(z) = z / |z|, 0 at 0.
inline Parts sign(Lowering& L, const Parts& z, const Aval& p) {
  Real r{L, p};
  Value m = abs(L, z, p);
  Value zero = r.eq(m, r.k(0));
  return {r.where(zero, r.k(0), r.div(z.re, m)), r.where(zero, r.k(0), r.div(z.im, m))};
}
// rsqrt(z) = 1 / sqrt(z); inf + NaN i at 0, as JAX.
inline Parts rsqrt(Lowering& L, const Parts& z, const Aval& p) {
  Real r{L, p};
  Parts q = div(L, {r.k(1), r.k(0)}, sqrt(L, z, p), p);
  Value zero = r.eq(r.add(r.abs(z.re), r.abs(z.im)), r.k(0));
  return {r.where(zero, r.k(INFINITY), q.re), q.im};
}
// logistic(z) = 1 / (1 + e^-z), JAX's formula.
inline Parts logistic(Lowering& L, const Parts& z, const Aval& p) {
  Real r{L, p};
  Parts e = exp(L, neg(L, z, p), p);
  return div(L, {r.k(1), r.k(0)}, {r.add(r.k(1), e.re), e.im}, p);
}
// exp2(z) = exp(z log 2), as JAX lowers it.
inline Parts exp2(Lowering& L, const Parts& z, const Aval& p) {
  Real r{L, p};
  Value ln2 = r.k(0.69314718055994530942);
  return exp(L, {r.mul(z.re, ln2), r.mul(z.im, ln2)}, p);
}

// atan2(y, x) of complex y, x = -i log((x + iy) / sqrt(x^2 + y^2)), XLA's
// expansion (NaN where x^2 + y^2 = 0). `p` is the broadcast result's part.
inline Parts atan2_complex(Lowering& L, const Parts& y, const Parts& x, const Aval& p) {
  Real r{L, p};
  Parts num = add(L, x, times_i(r, y), p);
  Parts l = log(L, div(L, num, sqrt(L, add(L, mul(L, x, x, p), mul(L, y, y, p), p), p), p), p);
  return times_minus_i(r, l);
}

// The complex function JAX's primitive `name` is, or null.
using Function = Parts (*)(Lowering&, const Parts&, const Aval&);
inline Function function(std::string_view name) {
  struct Entry { std::string_view name; Function fn; };
  static constexpr Entry kTable[] = {
      {"tanh", tanh},   {"tan", tan},     {"sinh", sinh},   {"cosh", cosh},         {"expm1", expm1},
      {"log1p", log1p}, {"asin", asin},   {"acos", acos},   {"atan", atan},         {"asinh", asinh},
      {"acosh", acosh}, {"atanh", atanh}, {"sign", sign},   {"rsqrt", rsqrt},       {"logistic", logistic},
      {"exp2", exp2},   {"exp", exp},     {"log", log},
      {"sqrt", [](Lowering& L, const Parts& z, const Aval& p) { return sqrt(L, z, p); }},
  };
  for (const Entry& e : kTable)
    if (e.name == name) return e.fn;
  return nullptr;
}

// The ops the functions above (and complex.hpp's split/pack) may emit.
inline void emits_functions(Plugin::PrimitiveRef p) {
  p.emits({"Gather", "Unsqueeze", "Concat", "Cast", "Add", "Sub", "Mul", "Div", "Neg", "Abs", "Max",
                  "Min", "Sqrt", "Exp", "Log", "Sin", "Cos", "Atan", "Equal", "Less", "Greater",
                  "GreaterOrEqual", "Or", "Where", "IsInf"});
}

}  // namespace jaxonnx::sdk::complex
