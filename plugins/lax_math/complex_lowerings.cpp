// lax_math: complex operands. ONNX has no complex dtype, so complex values
// are carried packed as float[..., 2] (jaxonnx/complex.hpp); complex /
// real / imag / conj build and take apart that form, square is a complex
// product, sin and cos take complex operands, and tan, the inverse and
// hyperbolic functions, log1p, expm1, exp2 and atan2 dispatch to
// jaxonnx/complex_math.hpp.
#include "math.hpp"

#include <jaxonnx/complex.hpp>
#include <jaxonnx/complex_math.hpp>

#include <string>
#include <vector>

namespace lax_math {

// A complex operand (packed, jaxonnx/complex.hpp) of the functions
// complex_math.hpp defines.
void lower_complex_unary(Lowering& L) {
  Aval a = L.in_aval(0);
  complex::Function fn = complex::function(L.primitive());
  if (!fn) L.fail(std::string(L.primitive()) + " of a complex operand is not lowered by lax_math");
  L.bind(0, complex::pack(L, fn(L, complex::split(L, L.input(0), a), complex::part(a)), a));
}

// sin / cos of a complex z = a + bi (packed, jaxonnx/complex.hpp):
//   sin z = sin a cosh b + i cos a sinh b,  cos z = cos a cosh b - i sin a sinh b,
// cosh b = (e^b + e^-b)/2, sinh b the same difference, or its Taylor series
// below |b| = 0.1 where the difference cancels (the series' first omitted
// term is 3e-15 relative there).
void lower_complex_sin_cos(Lowering& L, bool sin) {
  Aval a = L.in_aval(0);
  Aval p = complex::part(a);
  complex::Parts z = complex::split(L, L.input(0), a);
  Ops o{L, p.dtype};
  Value e = o.exp(z.im), ie = o.exp(o.f("Neg", {z.im}));
  Value cosh = o.mul(o.k(0.5), o.add(e, ie));
  Value b2 = o.mul(z.im, z.im);
  Value series = o.mul(z.im, o.add(o.k(1), o.mul(b2, o.add(o.k(1.0 / 6), o.mul(b2, o.add(
                     o.k(1.0 / 120), o.mul(b2, o.k(1.0 / 5040))))))));
  Value sinh = o.where(o.lt(o.abs(z.im), o.k(0.1)), series, o.mul(o.k(0.5), o.sub(e, ie)));
  Value sa = o.f("Sin", {z.re}), ca = o.f("Cos", {z.re});
  Value re = o.mul(sin ? sa : ca, cosh);
  Value im = sin ? o.mul(ca, sinh) : o.f("Neg", {o.mul(sa, sinh)});
  L.bind(0, complex::pack(L, re, im, a));
}

// square: x * x (exact, any numeric type), not Pow.
void lower_square(Lowering& L) {
  Value x = L.input(0);
  if (complex::is(L.in_aval(0).dtype)) {
    Aval a = L.in_aval(0);
    complex::Parts z = complex::split(L, x, a);
    L.bind(0, complex::pack(L, complex::mul(L, z, z, complex::part(a)), a));
    return;
  }
  L.bind(0, L.op("Mul", {x, x}, L.out_aval(0)));
}

// complex(re, im): the packed form from the parts. An operand not of the
// output's shape (a rank-0 literal, or a part that lax.complex broadcasts,
// such as (1,) or () against (3, 4)) is expanded to it first: pack's
// Unsqueeze + Concat take parts of the result's shape.
void lower_complex(Lowering& L) {
  Aval out = L.out_aval(0);
  Aval p = complex::part(out);
  Value parts[2];
  for (size_t i = 0; i < 2; ++i) {
    Aval a = L.in_aval(i);
    parts[i] = L.input(i);
    if (a.shape != out.shape)
      parts[i] = L.op("Expand", {parts[i], shape_value(L, out.shape)}, p.with_dtype(a.dtype));
  }
  L.bind(0, complex::pack(L, parts[0], parts[1], out));
}

// real / imag: one part of the packed form.
void lower_real_imag(Lowering& L) {
  Aval a = L.in_aval(0);
  if (!complex::is(a.dtype)) L.fail(std::string(L.primitive()) + " of a " + dtype::name(a.dtype) + " operand");
  complex::Parts z = complex::split(L, L.input(0), a);
  L.bind(0, L.primitive() == "real" ? z.re : z.im);
}

// conj: the packed form times [1, -1] (broadcast over the trailing dim); a
// real operand gives a complex result with a zero imaginary part.
void lower_conj(Lowering& L) {
  Aval a = L.in_aval(0), out = L.out_aval(0);
  if (!complex::is(a.dtype)) {
    L.bind(0, complex::from_real(L, L.input(0), a, out));
    return;
  }
  int32_t t = complex::part_dtype(a.dtype);
  Value flip = t == dtype::f64 ? L.constant(std::vector<double>{1.0, -1.0}, {2})
                               : L.constant(std::vector<float>{1.0f, -1.0f}, {2});
  L.bind(0, L.op("Mul", {L.input(0), flip}, complex::packed(out)));
}

// atan2; complex operands by XLA's expansion (complex_math.hpp).
void lower_atan2(Lowering& L) {
  Aval out = L.out_aval(0);
  if (!complex::is(out.dtype)) return lower_binary(L, atan2);
  const Aval p = complex::part(out);
  // A rank-0 operand (a literal) is expanded: the expansion's products would
  // otherwise be rank 0 where they are declared of the result's shape.
  auto operand = [&](size_t i) {
    complex::Parts z = complex::operand(L, i, out.with_shape(L.in_aval(i).shape));
    if (L.in_aval(i).shape == out.shape) return z;
    Value shape = shape_value(L, out.shape);
    return complex::Parts{L.op("Expand", {z.re, shape}, p), L.op("Expand", {z.im, shape}, p)};
  };
  complex::Parts y = operand(0), x = operand(1);
  L.bind(0, complex::pack(L, complex::atan2_complex(L, y, x, p), out));
}

}  // namespace lax_math
