// Arithmetic on lax_linalg's values (T, common.hpp), real or complex: for a
// real value each helper emits the one float op the factorizations always
// used (so float graphs do not change); for a complex one, complex arithmetic
// on the two parts (the SDK's complex.hpp for mul and Smith's division).
// A complex operand enters split into its parts and leaves packed.
#pragma once

#include "common.hpp"

#include <jaxonnx/complex.hpp>

namespace lax_linalg {

inline complex::Parts parts(const T& x) { return {x.v, x.im}; }
inline T of_parts(const complex::Parts& z, const Aval& a) {
  T r{z.re, a};
  r.im = z.im;
  return r;
}

// Operand i: a complex one as its two parts, of the real aval.
inline T operand(Lowering& L, size_t i) {
  Aval a = L.in_aval(i);
  if (!complex::is(a.dtype)) return {L.input(i), a};
  return of_parts(complex::split(L, L.input(i), a), complex::part(a));
}

// The value to bind as output i: packed when complex.
inline Value result(Lowering& L, const T& x, size_t i) {
  return is_complex(x) ? complex::pack(L, parts(x), L.out_aval(i)) : x.v;
}

// The real scalar `s` as a value of x's kind (both parts `s` for a complex x).
inline T scalar_like(const T& x, Value s) {
  T r{s, x.a.with_shape({})};
  if (is_complex(x)) r.im = s;
  return r;
}
// A zero scalar of x's kind.
inline T zero_like(Lowering& L, const T& x) { return scalar_like(x, scalar(L, x.a.dtype, 0.0)); }

// Zeros of x's aval and kind (a Loop's initial state).
inline T zeros_like(Lowering& L, const T& x) {
  return each(x, x.a, [&](Value) { return zeros_like_aval(L, x.a); });
}

inline T transpose_t(Lowering& L, const T& x, const std::vector<int64_t>& perm) {
  Shape s;
  for (int64_t p : perm) s.push_back(x.a.shape[static_cast<size_t>(p)]);
  return each(x, x.a.with_shape(s), [&](Value v) { return transpose(L, v, x.a, perm); });
}

inline T conj(Lowering& L, const T& x) {
  if (!is_complex(x)) return x;
  return of_parts(complex::conj(L, parts(x), x.a), x.a);
}

// Where(mask, x, y) on each part; x and y of one kind.
inline T where(Lowering& L, Value mask, const T& x, const T& y, const Aval& out) {
  T r = node(L, "Where", {mask, x.v, y.v}, out);
  if (is_complex(x)) r.im = L.op("Where", {mask, x.im, y.im}, out);
  return r;
}

inline T sub(Lowering& L, const T& x, const T& y, const Aval& out) {
  if (!is_complex(x)) return node(L, "Sub", {x.v, y.v}, out);
  return of_parts(complex::sub(L, parts(x), parts(y), out), out);
}

inline T mul(Lowering& L, const T& x, const T& y, const Aval& out) {
  if (!is_complex(x)) return node(L, "Mul", {x.v, y.v}, out);
  return of_parts(complex::mul(L, parts(x), parts(y), out), out);
}

// x / y: a real y divides each part of x; a complex y by Smith's algorithm.
inline T div(Lowering& L, const T& x, const T& y, const Aval& out) {
  if (!is_complex(y)) return each(x, out, [&](Value v) { return L.op("Div", {v, y.v}, out); });
  return of_parts(complex::div(L, parts(x), parts(y), out), out);
}

// x @ y; complex: (xr yr - xi yi) + (xr yi + xi yr)i, four real MatMuls.
inline T matmul(Lowering& L, const T& x, const T& y, const Aval& out) {
  if (!is_complex(x)) return node(L, "MatMul", {x.v, y.v}, out);
  auto mm = [&](Value p, Value q) { return L.op("MatMul", {p, q}, out); };
  T r{L.op("Sub", {mm(x.v, y.v), mm(x.im, y.im)}, out), out};
  r.im = L.op("Add", {mm(x.v, y.im), mm(x.im, y.v)}, out);
  return r;
}

}  // namespace lax_linalg
