// jaxonnx plugin SDK: special functions over Expr (expr.hpp), written once
// for every plugin that must round as XLA does: Horner polynomials, Kahan's
// log1p and expm1, Giles' erf_inv (XLA's ErfInv, with its coefficient
// tables). Each agrees with JAX to a few ulp on finite inputs; the ONNX ops a
// function emits are listed with it, for a plugin's .emits().
#pragma once

#include <cmath>
#include <cstddef>
#include <iterator>

#include "jaxonnx/expr.hpp"

namespace jaxonnx::sdk::special {

// Horner: c[0] x^(n-1) + ... + c[n-1]. Emits Add, Mul.
template <typename C> Value poly(Expr& e, Value x, const C& c) {
  Value y = e.k(c[0]);
  for (size_t i = 1; i < std::size(c); ++i) y = e.add(e.mul(y, x), e.k(c[i]));
  return y;
}

// log1p, after Kahan: with u = 1 + x (rounded), log(u) * x / (u - 1) cancels
// the rounding of u. u == 1 means |x| is below half an ulp: log1p(x) = x.
// Emits Add, Sub, Mul, Div, Log, Equal, Where.
inline Value log1p(Expr& e, Value x) {
  Value u = e.add(e.k(1), x);
  Value r = e.mul(e.log(u), e.div(x, e.sub(u, e.k(1))));
  r = e.where(e.eq(u, e.k(INFINITY)), u, r);  // x = +inf (inf / inf otherwise)
  return e.where(e.eq(u, e.k(1)), x, r);
}

// expm1, after Kahan: for |x| < 0.5, (u - 1) * (x / log(u)) with u = exp(x);
// u == 1 means expm1(x) = x. Beyond that, u - 1 loses nothing.
// Emits Exp, Sub, Mul, Div, Log, Equal, Where, Abs, Less.
inline Value expm1(Expr& e, Value x) {
  Value u = e.exp(x);
  Value um1 = e.sub(u, e.k(1));
  Value small = e.where(e.eq(u, e.k(1)), x, e.mul(um1, e.div(x, e.log(u))));
  return e.where(e.lt(e.abs(x), e.k(0.5)), small, um1);
}

// The coefficients of XLA's ErfInv (Giles, "Approximating the erfinv
// function"), one table per range of w = -log1p(-x^2), highest power first.
namespace erf_inv_coefficients {
constexpr double kLt5[] = {2.81022636e-08,  3.43273939e-07, -3.5233877e-06,
                                 -4.39150654e-06, 0.00021858087,  -0.00125372503,
                                 -0.00417768164,  0.246640727,    1.50140941};
constexpr double kGe5[] = {-0.000200214257, 0.000100950558, 0.00134934322,
                                 -0.00367342844,  0.00573950773,  -0.0076224613,
                                 0.00943887047,   1.00167406,     2.83297682};
constexpr double kLt625[] = {
    -3.6444120640178196996e-21, -1.685059138182016589e-19,  1.2858480715256400167e-18,
    1.115787767802518096e-17,   -1.333171662854620906e-16,  2.0972767875968561637e-17,
    6.6376381343583238325e-15,  -4.0545662729752068639e-14, -8.1519341976054721522e-14,
    2.6335093153082322977e-12,  -1.2975133253453532498e-11, -5.4154120542946279317e-11,
    1.051212273321532285e-09,   -4.1126339803469836976e-09, -2.9070369957882005086e-08,
    4.2347877827932403518e-07,  -1.3654692000834678645e-06, -1.3882523362786468719e-05,
    0.0001867342080340571352,   -0.00074070253416626697512, -0.0060336708714301490533,
    0.24015818242558961693,     1.6536545626831027356};
constexpr double kLt16[] = {
    2.2137376921775787049e-09,  9.0756561938885390979e-08,  -2.7517406297064545428e-07,
    1.8239629214389227755e-08,  1.5027403968909827627e-06,  -4.013867526981545969e-06,
    2.9234449089955446044e-06,  1.2475304481671778723e-05,  -4.7318229009055733981e-05,
    6.8284851459573175448e-05,  2.4031110387097893999e-05,  -0.0003550375203628474796,
    0.00095328937973738049703,  -0.0016882755560235047313, 0.0024914420961078508066,
    -0.0037512085075692412107, 0.005370914553590063617,    1.0052589676941592334,
    3.0838856104922207635};
constexpr double kGe16[] = {
    -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
    -3.7894654401267369937e-09, 7.6157012080783393804e-09,  -1.4960026627149240478e-08,
    2.9147953450901080826e-08,  -6.7711997758452339498e-08, 2.2900482228026654717e-07,
    -9.9298272942317002539e-07, 4.5260625972231537039e-06,  -1.9681778105531670567e-05,
    7.5995277030017761139e-05,  -0.00021503011930044477347, -0.00013871931833623122026,
    1.0103004648645343977,      4.8499064014085844221};
}  // namespace erf_inv_coefficients

// erf_inv on (-1, 1): w = -log1p(-x^2), p(w) a polynomial per range of w,
// erf_inv(x) = p x. Emits log1p's ops, Neg, Less, Sqrt.
inline Value erf_inv_open(Expr& e, Value x) {
  using namespace erf_inv_coefficients;
  Value w = e.neg(log1p(e, e.neg(e.mul(x, x))));
  Value p;
  if (e.f64()) {
    Value lt625 = e.lt(w, e.k(6.25));
    Value lt16 = e.lt(w, e.k(16));
    Value sw = e.sqrt(w);
    Value p1 = poly(e, e.sub(w, e.k(3.125)), kLt625);
    Value p2 = poly(e, e.sub(sw, e.k(3.25)), kLt16);
    Value p3 = poly(e, e.sub(sw, e.k(5.0)), kGe16);
    p = e.where(lt625, p1, e.where(lt16, p2, p3));
  } else {
    Value lt5 = e.lt(w, e.k(5));
    Value p1 = poly(e, e.sub(w, e.k(2.5)), kLt5);
    Value p2 = poly(e, e.sub(e.sqrt(w), e.k(3)), kGe5);
    p = e.where(lt5, p1, p2);
  }
  return e.mul(p, x);
}

// erf_inv everywhere: +-1 -> +-inf, |x| > 1 -> NaN, -0 kept. Emits
// erf_inv_open's ops, Abs, Or (copysign).
inline Value erf_inv(Expr& e, Value x) {
  Value px = erf_inv_open(e, x);
  Value r = e.where(e.eq(e.abs(x), e.k(1)), e.k(INFINITY), px);
  return e.copysign(r, x);  // p > 0
}

}  // namespace jaxonnx::sdk::special
