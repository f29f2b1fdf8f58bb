// jaxonnx plugin SDK: complex numbers.
//
// ONNX has (almost) no complex kernels, so a complex value is carried as a
// REAL tensor with a trailing dim of 2: [..., 0] the real part, [..., 1] the
// imaginary part. complex64 is float32[..., 2], complex128 float64[..., 2]
// (the layout of ONNX DFT, and jax2onnx's at a model's inputs and outputs).
// A lowering still sees JAX's avals (`L.in_aval(i)` is complex64[3, 4]); the
// value behind it (`L.input(i)`) is float32[3, 4, 2], and the value bound to a
// complex output must be packed too (the host checks it). The host refuses a
// node declaring a complex output: a lowering that meets a complex operand it
// does not handle fails clearly instead of building a wrong model.
//
// The idioms below let a plugin handle a complex operand in a few lines:
//
//   if (complex::is(L.in_aval(0).dtype)) {
//     Aval a = L.in_aval(0);
//     complex::Parts z = complex::split(L, L.input(0), a);
//     L.bind(0, complex::pack(L, complex::exp(L, z, complex::part(a)), a));
//   }
//
// Ops emitted (for .emits): split Gather; pack Unsqueeze, Concat; from_real
// Cast, Unsqueeze, Pad; mul Mul, Sub, Add; div Mul, Add, Sub, Div; abs Abs,
// Max, Min, Div, Mul, Add, Sqrt, Equal, Or, Where; exp Exp, Cos, Sin, Mul;
// log = abs + Log + atan2; atan2 Abs, Max, Min, Div, Equal, Where, Atan,
// Greater, Less, Sub, Neg, Cast, Cos, Sin, Mul, Add, IsInf.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "jaxonnx/plugin.hpp"

namespace jaxonnx::sdk::complex {

inline bool is(int32_t t) { return dtype::is_complex(t); }

// The dtype of a complex dtype's parts (complex64 -> float32); others unchanged.
inline int32_t part_dtype(int32_t t) {
  return t == dtype::c64 ? dtype::f32 : t == dtype::c128 ? dtype::f64 : t;
}
// The complex dtype whose parts are `real` (float32 -> complex64).
inline int32_t of_part(int32_t real) {
  if (real == dtype::f32) return dtype::c64;
  if (real == dtype::f64) return dtype::c128;
  throw Error(std::string("no complex dtype has ") + dtype::name(real) + " parts");
}

// The IR type of a value of aval `a`: float[..., 2] for a complex `a`, else `a`.
inline Aval packed(const Aval& a) {
  if (!is(a.dtype)) return a;
  if (a.unknown_rank) return Aval::of_unknown_shape(part_dtype(a.dtype));
  Shape s = a.shape;
  s.push_back(Dim(2));
  return Aval(part_dtype(a.dtype), std::move(s));
}
// The aval of one part of a complex `a`: a's shape, the real dtype.
inline Aval part(const Aval& a) { return a.with_dtype(part_dtype(a.dtype)); }
// A shape with the trailing 2 of the packed form.
inline Shape packed_shape(Shape s) { s.push_back(Dim(2)); return s; }
// A 1-D int64 tensor holding the IR shape of `a` (packed when complex;
// symbolic dims at runtime).
inline Value packed_shape_value(Lowering& L, const Aval& a) {
  return shape_value(L, packed(a).shape);
}

// The two parts of a complex value, each of the part aval.
struct Parts {
  Value re = kNoValue, im = kNoValue;
};

// The parts of `v`, a packed value of complex aval `a`.
inline Parts split(Lowering& L, Value v, const Aval& a) {
  Aval p = part(a);
  auto take = [&](int64_t k) {
    return L.op("Gather", {v, L.constant(std::vector<int64_t>{k}, {})}, p, {Attr::i("axis", -1)});
  };
  return {take(0), take(1)};
}
// The packed value of complex aval `a` from its parts.
inline Value pack(Lowering& L, Value re, Value im, const Aval& a) {
  Value axis = i64s(L, {-1});
  Shape one = a.shape;
  one.push_back(Dim(1));
  Aval col(part_dtype(a.dtype), one);
  return L.op("Concat", {L.op("Unsqueeze", {re, axis}, col), L.op("Unsqueeze", {im, axis}, col)},
              packed(a), {Attr::i("axis", -1)});
}
inline Value pack(Lowering& L, const Parts& z, const Aval& a) { return pack(L, z.re, z.im, a); }

// A real value `x` of aval `x_aval` as the complex aval `a` (imaginary part
// 0): cast to the part dtype, then one trailing zero padded on.
inline Value from_real(Lowering& L, Value x, const Aval& x_aval, const Aval& a) {
  Aval p = part(a);
  x = cast(L, x, x_aval, p.dtype);
  Shape one = p.shape;
  one.push_back(Dim(1));
  Value col = L.op("Unsqueeze", {x, i64s(L, {-1})}, Aval(p.dtype, one));
  return pad_axis(L, col, static_cast<int64_t>(one.size()), -1, 0, 1, scalar(L, p.dtype, 0), packed(a));
}
// Operand i of the equation as complex aval `a`: its packed value, or a real
// operand promoted (JAX promotes first, but a weak-typed literal may differ).
inline Parts operand(Lowering& L, size_t i, const Aval& a) {
  Aval in = L.in_aval(i);
  Aval want = a.with_shape(in.shape);
  Value v = is(in.dtype) ? cast(L, L.input(i), packed(in), part_dtype(a.dtype))
                         : from_real(L, L.input(i), in, want);
  return split(L, v, want);
}

// ------------------------------------------------------------- arithmetic --
// `p` is the aval of one part of the result (broadcasting as the operands do).

inline Parts add(Lowering& L, const Parts& x, const Parts& y, const Aval& p) {
  return {L.op("Add", {x.re, y.re}, p), L.op("Add", {x.im, y.im}, p)};
}
inline Parts sub(Lowering& L, const Parts& x, const Parts& y, const Aval& p) {
  return {L.op("Sub", {x.re, y.re}, p), L.op("Sub", {x.im, y.im}, p)};
}
// (a + bi)(c + di) = (ac - bd) + (ad + bc)i
inline Parts mul(Lowering& L, const Parts& x, const Parts& y, const Aval& p) {
  Value re = L.op("Sub", {L.op("Mul", {x.re, y.re}, p), L.op("Mul", {x.im, y.im}, p)}, p);
  Value im = L.op("Add", {L.op("Mul", {x.re, y.im}, p), L.op("Mul", {x.im, y.re}, p)}, p);
  return {re, im};
}
// (a + bi)/(c + di) by Smith's algorithm (no overflow of c^2 + d^2): with
// |c| >= |d|, r = d/c, t = c + d r: ((a + b r) + (b - a r)i) / t; else the
// mirror image with r = c/d, t = c r + d: ((a r + b) + (b r - a)i) / t.
inline Parts div(Lowering& L, const Parts& x, const Parts& y, const Aval& p) {
  const Aval q = L.aval_of(y.re);  // y's own shape (a rank-0 divisor stays rank 0)
  Value c_big = L.op("GreaterOrEqual", {L.op("Abs", {y.re}, q), L.op("Abs", {y.im}, q)},
                     q.with_dtype(dtype::boolean));
  // Case c big: r = d/c, t = c + d r.
  Value r1 = L.op("Div", {y.im, y.re}, q);
  Value t1 = L.op("Add", {y.re, L.op("Mul", {y.im, r1}, q)}, q);
  Value re1 = L.op("Div", {L.op("Add", {x.re, L.op("Mul", {x.im, r1}, p)}, p), t1}, p);
  Value im1 = L.op("Div", {L.op("Sub", {x.im, L.op("Mul", {x.re, r1}, p)}, p), t1}, p);
  // Case d big: r = c/d, t = c r + d.
  Value r2 = L.op("Div", {y.re, y.im}, q);
  Value t2 = L.op("Add", {L.op("Mul", {y.re, r2}, q), y.im}, q);
  Value re2 = L.op("Div", {L.op("Add", {L.op("Mul", {x.re, r2}, p), x.im}, p), t2}, p);
  Value im2 = L.op("Div", {L.op("Sub", {L.op("Mul", {x.im, r2}, p), x.re}, p), t2}, p);
  return {L.op("Where", {c_big, re1, re2}, p), L.op("Where", {c_big, im1, im2}, p)};
}
inline Parts neg(Lowering& L, const Parts& x, const Aval& p) {
  return {L.op("Neg", {x.re}, p), L.op("Neg", {x.im}, p)};
}
inline Parts conj(Lowering& L, const Parts& x, const Aval& p) { return {x.re, L.op("Neg", {x.im}, p)}; }

// |z| = hypot(re, im) = hi sqrt(1 + (lo/hi)^2), which neither overflows nor
// underflows; hi = 0 or inf gives hi (NaN parts propagate through Max).
inline Value abs(Lowering& L, const Parts& z, const Aval& p) {
  Aval mask = p.with_dtype(dtype::boolean);
  Value ar = L.op("Abs", {z.re}, p), ai = L.op("Abs", {z.im}, p);
  Value hi = L.op("Max", {ar, ai}, p), lo = L.op("Min", {ar, ai}, p);
  Value q = L.op("Div", {lo, hi}, p);
  Value r = L.op("Mul", {hi, L.op("Sqrt", {L.op("Add", {scalar(L, p.dtype, 1), L.op("Mul", {q, q}, p)}, p)}, p)}, p);
  Value edge = L.op("Or", {L.op("Equal", {hi, scalar(L, p.dtype, 0)}, mask),
                           L.op("Equal", {hi, scalar(L, p.dtype, INFINITY)}, mask)}, mask);
  return L.op("Where", {edge, hi, r}, p);
}

// A zero imaginary part where b is 0: a real result stays real even when
// its modulus overflows (inf * sin 0 would be NaN), as in XLA.
inline Value real_if_zero(Lowering& L, Value b, Value im, const Aval& p) {
  Value zero = L.op("Equal", {b, scalar(L, p.dtype, 0)}, p.with_dtype(dtype::boolean));
  return L.op("Where", {zero, b, im}, p);
}

// exp(a + bi) = e^a (cos b + i sin b)
inline Parts exp(Lowering& L, const Parts& z, const Aval& p) {
  Value e = L.op("Exp", {z.re}, p);
  return {L.op("Mul", {e, L.op("Cos", {z.im}, p)}, p),
          real_if_zero(L, z.im, L.op("Mul", {e, L.op("Sin", {z.im}, p)}, p), p)};
}

// y < 0 or y is -0 (1/-0 = -inf); false for NaN.
inline Value signbit(Lowering& L, Value y, const Aval& p) {
  Aval mask = p.with_dtype(dtype::boolean);
  Value zero = scalar(L, p.dtype, 0);
  return L.op("Or", {L.op("Less", {y, zero}, mask),
                     L.op("Less", {L.op("Div", {scalar(L, p.dtype, 1), y}, p), zero}, mask)}, mask);
}

// atan2(y, x) in [-pi, pi], with y's sign (-0 included, as JAX's log). float32: Atan of min(|x|,|y|)/max(|x|,|y|) and the
// octant. float64 (onnxruntime has no float64 Atan): that float32 angle t0 of
// the scaled point (x, y)/max, refined once by the exact identity
// atan2(y, x) = t0 + atan2(y cos t0 - x sin t0, x cos t0 + y sin t0); the
// second angle is below 1e-6, where atan(u) = u to float64 precision.
inline Value atan2_f32(Lowering& L, Value y, Value x, const Aval& p) {
  const double kPi = 3.14159265358979323846;
  Aval mask = p.with_dtype(dtype::boolean);
  Value ax = L.op("Abs", {x}, p), ay = L.op("Abs", {y}, p);
  Value hi = L.op("Max", {ax, ay}, p), lo = L.op("Min", {ax, ay}, p);
  Value t = L.op("Div", {lo, hi}, p);
  t = L.op("Where", {L.op("Equal", {lo, scalar(L, p.dtype, INFINITY)}, mask), scalar(L, p.dtype, 1), t}, p);
  t = L.op("Where", {L.op("Equal", {hi, scalar(L, p.dtype, 0)}, mask), scalar(L, p.dtype, 0), t}, p);
  Value r = L.op("Atan", {t}, p);
  r = L.op("Where", {L.op("Greater", {ay, ax}, mask), L.op("Sub", {scalar(L, p.dtype, kPi / 2), r}, p), r}, p);
  r = L.op("Where", {L.op("Less", {x, scalar(L, p.dtype, 0)}, mask), L.op("Sub", {scalar(L, p.dtype, kPi), r}, p), r}, p);
  return L.op("Where", {signbit(L, y, p), L.op("Neg", {r}, p), r}, p);
}
inline Value atan2(Lowering& L, Value y, Value x, const Aval& p) {
  if (p.dtype != dtype::f64) return atan2_f32(L, y, x, p);
  Aval mask = p.with_dtype(dtype::boolean);
  Value zero = scalar(L, p.dtype, 0), one = scalar(L, p.dtype, 1), minus_one = scalar(L, p.dtype, -1);
  Value hi = L.op("Max", {L.op("Abs", {x}, p), L.op("Abs", {y}, p)}, p);
  Value hi_inf = L.op("IsInf", {hi}, mask), hi_zero = L.op("Equal", {hi, zero}, mask);
  // The point scaled into [-1, 1]: (x, y) / max(|x|, |y|); an infinite
  // coordinate as +-1 and a finite one as 0 when the max is infinite (the
  // angle is then a multiple of pi/4); (0, 0) as it is.
  auto scaled = [&](Value v) {
    Value dir = L.op("Where", {L.op("IsInf", {v}, mask),
                               L.op("Where", {L.op("Less", {v, zero}, mask), minus_one, one}, p),
                               zero}, p);
    Value s = L.op("Where", {hi_inf, dir, L.op("Div", {v, hi}, p)}, p);
    return L.op("Where", {hi_zero, v, s}, p);
  };
  Value xs = scaled(x), ys = scaled(y);
  Aval p32 = p.with_dtype(dtype::f32);
  Value t0_32 = atan2_f32(L, cast(L, ys, p, dtype::f32), cast(L, xs, p, dtype::f32), p32);
  Value t0 = cast(L, t0_32, p32, dtype::f64);
  Value c = L.op("Cos", {t0}, p), s = L.op("Sin", {t0}, p);
  Value num = L.op("Sub", {L.op("Mul", {ys, c}, p), L.op("Mul", {xs, s}, p)}, p);
  Value den = L.op("Add", {L.op("Mul", {xs, c}, p), L.op("Mul", {ys, s}, p)}, p);
  Value refined = L.op("Add", {t0, L.op("Div", {num, den}, p)}, p);
  Value r = L.op("Where", {hi_zero, t0, refined}, p);  // (0, 0): 0 exactly
  // y's sign (the scaled point may have lost a -0 in a Where).
  return L.op("Mul", {L.op("Abs", {r}, p),
                      L.op("Where", {signbit(L, y, p), scalar(L, p.dtype, -1), scalar(L, p.dtype, 1)}, p)}, p);
}

// log z = log|z| + i arg z (principal branch).
inline Parts log(Lowering& L, const Parts& z, const Aval& p) {
  return {L.op("Log", {abs(L, z, p)}, p), atan2(L, z.im, z.re, p)};
}

// The principal square root: with t = sqrt((|a| + |z|)/2), a >= 0 gives
// t + (b / 2t)i, a < 0 gives |b|/2t + copysign(t, b)i (no cancellation);
// z = 0 gives 0. JAX's sqrt puts b = -0 on the upper side of the cut (as
// +0); `signed_zero` puts it on the lower side, as C99's csqrt.
inline Parts sqrt(Lowering& L, const Parts& z, const Aval& p, bool signed_zero = false) {
  Aval mask = p.with_dtype(dtype::boolean);
  Value zero = scalar(L, p.dtype, 0);
  Value m = abs(L, z, p);
  Value t = L.op("Sqrt", {L.op("Mul", {scalar(L, p.dtype, 0.5), L.op("Add", {L.op("Abs", {z.re}, p), m}, p)}, p)}, p);
  Value half = L.op("Div", {z.im, L.op("Add", {t, t}, p)}, p);
  Value ahalf = L.op("Abs", {half}, p);
  Value neg_b = signed_zero ? signbit(L, z.im, p) : L.op("Less", {z.im, zero}, mask);
  Value signed_t = L.op("Where", {neg_b, L.op("Neg", {t}, p), t}, p);
  Value a_pos = L.op("GreaterOrEqual", {z.re, zero}, mask);
  Value re = L.op("Where", {a_pos, t, ahalf}, p);
  Value im = L.op("Where", {a_pos, half, signed_t}, p);
  Value is_zero = L.op("Equal", {m, zero}, mask);
  return {L.op("Where", {is_zero, zero, re}, p), L.op("Where", {is_zero, z.im, im}, p)};
}

}  // namespace jaxonnx::sdk::complex
