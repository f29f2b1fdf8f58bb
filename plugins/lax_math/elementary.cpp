// lax_math: the elementary real functions ONNX lacks or onnxruntime lacks in
// float64, built from elementwise ops: Cephes' atan (and atan2, asin, acos
// from it), the hyperbolics and their inverses by log1p / expm1, tan, round
// half away from zero, cbrt, exp2, and nextafter without a bitcast.
#include "math.hpp"

#include <cmath>
#include <limits>

namespace lax_math {

// ------------------------------------------------------------ atan family --

// Cephes atan (double): reduce |x| to [0, 0.66] via pi/4 and pi/2, then
// x + x^3 P(x^2)/Q(x^2). |x| < 2^-27: atan(x) = x, which keeps -0.
constexpr double kAtanP[] = {-8.750608600031904122785E-1, -1.615753718733365076637E1,
                             -7.500855792314704667340E1, -1.228866684490136173410E2,
                             -6.485021904942025371773E1};
constexpr double kAtanQ[] = {1.0, 2.485846490142306297962E1, 1.650270098316988542046E2,
                             4.328810604912902668951E2, 4.853903996359136964868E2,
                             1.945506571482613964425E2};
constexpr double kMoreBits = 6.123233995736765886130E-17;  // pi/2 - double(pi/2)
constexpr double kTan3Pi8 = 2.41421356237309504880;

Value atan_f64(Ops& o, Value x) {
  Value ax = o.abs(x);
  Value big = o.gt(ax, o.k(kTan3Pi8));
  Value mid = o.gt(ax, o.k(0.66));
  Value xr = o.where(big, o.div(o.k(-1), ax),
                     o.where(mid, o.div(o.sub(ax, o.k(1)), o.add(ax, o.k(1))), ax));
  Value base = o.where(big, o.k(kPi / 2), o.where(mid, o.k(kPi / 4), o.k(0)));
  Value more = o.where(big, o.k(kMoreBits), o.where(mid, o.k(0.5 * kMoreBits), o.k(0)));
  Value z = o.mul(xr, xr);
  Value p = o.div(o.mul(z, poly(o, z, kAtanP)), poly(o, z, kAtanQ));
  Value r = o.add(base, o.add(o.add(o.mul(xr, p), xr), more));
  return o.copysign(o.where(o.lt(ax, o.k(7.450580596923828e-9)), ax, r), x);
}

// atan; float32 has ONNX Atan, float64 Cephes.
Value atan_any(Ops& o, Value x) { return o.f64() ? atan_f64(o, x) : o.f("Atan", {x}); }

// atan2(y, x) from atan of t = min(|x|,|y|) / max(|x|,|y|) in [0, 1], then
// the octant: pi/2 - r when |y| > |x|, pi - r when x is negative (or -0),
// and y's sign (or -0). Both zero: t = 0; both infinite: t = 1 (pi/4 family).
Value atan2(Ops& o, Value y, Value x) {
  Value ax = o.abs(x), ay = o.abs(y);
  Value hi = o.f("Max", {ax, ay}), lo = o.f("Min", {ax, ay});
  Value t = o.div(lo, hi);
  t = o.where(o.eq(lo, o.k(kInf)), o.k(1), t);
  t = o.where(o.eq(hi, o.k(0)), o.k(0), t);
  Value r = atan_any(o, t);
  r = o.where(o.gt(ay, ax), o.sub(o.k(kPi / 2), r), r);
  r = o.where(o.signbit(x), o.sub(o.k(kPi), r), r);
  return o.mul(r, o.sign_factor(y));
}

// asin(x) = 2 atan(x / (1 + sqrt((1-x)(1+x)))), acos(x) = 2 atan(sqrt((1-x)(1+x)) / (1+x))
// (XLA's identities); |x| > 1 gives sqrt of a negative: NaN.
Value sqrt_one_minus_sq(Ops& o, Value x) {
  return o.sqrt(o.mul(o.sub(o.k(1), x), o.add(o.k(1), x)));
}
Value asin_f64(Ops& o, Value x) {
  return o.mul(o.k(2), atan_f64(o, o.div(x, o.add(o.k(1), sqrt_one_minus_sq(o, x)))));
}
Value acos_f64(Ops& o, Value x) {
  Value r = o.mul(o.k(2), atan_f64(o, o.div(sqrt_one_minus_sq(o, x), o.add(o.k(1), x))));
  return o.where(o.eq(x, o.k(-1)), o.k(kPi), r);
}

// ---------------------------------------------------------- hyperbolics --

// cosh(x) = c + 1/(4c) with c = exp(|x| - log 2): no overflow before cosh does.
Value cosh_f64(Ops& o, Value x) {
  Value c = o.exp(o.sub(o.abs(x), o.k(kLn2)));
  return o.add(c, o.div(o.k(0.25), c));
}
// sinh(|x|): below 1 as (u + u/(u+1))/2 with u = expm1(|x|) (no
// cancellation); beyond, c - 1/(4c). Then x's sign.
Value sinh_f64(Ops& o, Value x) {
  Value ax = o.abs(x);
  Value u = expm1(o, ax);
  Value small = o.mul(o.k(0.5), o.add(u, o.div(u, o.add(u, o.k(1)))));
  Value c = o.exp(o.sub(ax, o.k(kLn2)));
  Value large = o.sub(c, o.div(o.k(0.25), c));
  return o.copysign(o.where(o.lt(ax, o.k(1)), small, large), x);
}
constexpr double kTwo28 = 268435456.0;  // beyond, sqrt(x^2 + 1) == |x| in double
// asinh(x) = sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); log|x| + log 2 when huge.
Value asinh_f64(Ops& o, Value x) {
  Value ax = o.abs(x);
  Value x2 = o.mul(ax, ax);
  Value mid = log1p(o, o.add(ax, o.div(x2, o.add(o.k(1), o.sqrt(o.add(o.k(1), x2))))));
  Value r = o.where(o.gt(ax, o.k(kTwo28)), o.add(o.log(ax), o.k(kLn2)), mid);
  r = o.where(o.lt(ax, o.k(1.0 / kTwo28)), ax, r);  // asinh(x) = x
  return o.copysign(r, x);
}
// acosh(x) = log1p(t + sqrt(t (t + 2))), t = x - 1; log x + log 2 when huge.
Value acosh_f64(Ops& o, Value x) {
  Value t = o.sub(x, o.k(1));
  Value mid = log1p(o, o.add(t, o.sqrt(o.mul(t, o.add(t, o.k(2))))));
  return o.where(o.gt(x, o.k(kTwo28)), o.add(o.log(x), o.k(kLn2)), mid);
}
// atanh(x) = sign(x) log1p(2|x| / (1 - |x|)) / 2.
Value atanh_f64(Ops& o, Value x) {
  Value ax = o.abs(x);
  return o.copysign(o.mul(o.k(0.5), log1p(o, o.div(o.mul(o.k(2), ax), o.sub(o.k(1), ax)))), x);
}

// -------------------------------------------------------------- rounding --

// round(x) half away from zero: Round rounds halves to even. When x sits
// exactly halfway (d = x - Round(x) is exactly +-0.5), Round went toward zero
// iff d has x's sign, and then the answer is Round(x) + sign(x): subtract
// c = Where(half, -(d + sign(x)/2), 0), which is -sign(x) or 0 (subtracting
// +0 keeps Round's -0). No floor(|x| + 0.5): that rounds 0.49999997 up.
Value round_away(Ops& o, Value x) {
  Value r = o.f("Round", {x});
  Value d = o.sub(x, r);
  Value half = o.eq(o.abs(d), o.k(0.5));
  Value c = o.where(half, o.sub(o.mul(o.f("Sign", {x}), o.k(-0.5)), d), o.k(0));
  return o.sub(r, c);
}

// cbrt(x) = sign(x) |x|^(1/3), -0 included.
Value cbrt(Ops& o, Value x) { return o.copysign(o.f("Pow", {o.abs(x), o.k(1.0 / 3.0)}), x); }

// tan = sin / cos. onnxruntime's float64 Cos is accurate in absolute, not
// relative, terms (~1e-16), so within ~1e-7 of a pole tan's relative error
// grows to ~1e-9 (JAX's own tan is exact there).
Value tan_f64(Ops& o, Value x) { return o.div(o.f("Sin", {x}), o.f("Cos", {x})); }

Value exp2(Ops& o, Value x) { return o.f("Pow", {o.k(2), x}); }
// expm1 and log1p have x's sign: copysign restores a -0 lost in a Where.
Value expm1_signed(Ops& o, Value x) { return o.copysign(expm1(o, x), x); }
Value log1p_signed(Ops& o, Value x) { return o.copysign(log1p(o, x), x); }

// ------------------------------------------------------------- nextafter --

// nextafter(x, y) without a bitcast (ONNX has none). For finite x, adding
// d = |x| * 1.25 * 2^-p (p = significand bits) towards y lands within
// (1/2, 3/2) of the neighbour's spacing in that direction (also below a power
// of two, where the spacing halves), so the rounded sum IS the neighbour.
// d must not be subnormal for that, so |x| < 2^-100 (f32) / 2^-900 (f64)
// works scaled up by an exact power of two and scales back; at |x| <= the
// smallest normal the neighbours are x +- the smallest subnormal, exactly.
// Then: inf -> +-max, x == y -> y, NaN -> NaN (via the sign of y - x).
//
// float16 / bfloat16 (`half`) work in float32 with their own constants: x and
// d are exact there, and a Cast to the half type rounds the sum (to nearest,
// as onnxruntime's Casts do) onto the neighbour. No scaling: d is exact in
// float32 (bfloat16's smallest normals give float32 subnormals with room).
Value nextafter_in(Ops& o, Value x, Value y, int32_t half) {
  const bool d = o.f64();
  struct Consts { int p; double min_normal, denorm, max; };
  const Consts c =
      half == dtype::f16    ? Consts{11, std::ldexp(1.0, -14), std::ldexp(1.0, -24), 65504.0}
      : half == dtype::bf16 ? Consts{8, std::ldexp(1.0, -126), std::ldexp(1.0, -133), std::ldexp(255.0, 120)}
      : d ? Consts{53, std::numeric_limits<double>::min(), std::numeric_limits<double>::denorm_min(),
                   std::numeric_limits<double>::max()}
          : Consts{24, std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                   std::numeric_limits<float>::max()};
  const double p_eps = 1.25 * std::ldexp(1.0, -c.p);

  Value dir = o.f("Sign", {o.sub(y, x)});  // NaN if x or y is NaN
  Value ax = o.abs(x);
  Value r;
  if (half != 0) {
    Value sum = o.add(x, o.mul(dir, o.mul(ax, o.k(p_eps))));
    r = o.op("Cast", {o.op("Cast", {sum}, half, {Attr::i("to", half)})}, o.t, {Attr::i("to", o.t)});
  } else {
    const double small = d ? std::ldexp(1.0, -900) : std::ldexp(1.0, -100);
    const double scale = d ? std::ldexp(1.0, 600) : std::ldexp(1.0, 50);
    Value is_small = o.lt(ax, o.k(small));
    Value s = o.where(is_small, o.k(scale), o.k(1));
    Value sx = o.mul(x, s);
    Value step = o.mul(dir, o.mul(o.abs(sx), o.k(p_eps)));
    r = o.div(o.add(sx, step), s);
  }
  r = o.where(o.le(ax, o.k(c.min_normal)), o.add(x, o.mul(dir, o.k(c.denorm))), r);
  r = o.where(o.eq(ax, o.k(kInf)), o.mul(o.abs(dir), o.k(c.max)), r);  // |dir|: NaN for y NaN
  // Magnitude, then the sign (Where loses -0): y's when x == y, the
  // direction's when leaving 0, else x's (kept when stepping onto 0).
  Value same = o.eq(x, y);
  Value mag = o.where(same, o.abs(y), o.abs(r));
  Value sign = o.where(same, o.sign_factor(y), o.where(o.eq(x, o.k(0)), dir, o.sign_factor(x)));
  return o.mul(mag, sign);
}

Value nextafter(Ops& o, Value x, Value y) { return nextafter_in(o, x, y, 0); }
Value nextafter_f16(Ops& o, Value x, Value y) { return nextafter_in(o, x, y, dtype::f16); }
Value nextafter_bf16(Ops& o, Value x, Value y) { return nextafter_in(o, x, y, dtype::bf16); }

}  // namespace lax_math
