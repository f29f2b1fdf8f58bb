// Small helpers shared by the lax_linalg_iter lowerings, and the
// algorithms one file uses from another (svd's full_matrices runs qr).
#pragma once

#include <jaxonnx/plugin.hpp>

#include "sizes.hpp"

#include <jaxonnx/complex.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lax_linalg_iter {

using namespace jaxonnx::sdk;

// A value with its type.
struct TV {
  Value v;
  Aval a;
};

inline TV nd(Lowering& L, const char* op, const std::vector<Value>& ins, const Aval& out,
             const std::vector<Attr>& attrs = {}) {
  return {L.op(op, ins, out, attrs), out};
}

// x with the axis `axis` removed at the dynamic index i (an int64 scalar).
inline TV pick(Lowering& L, const TV& x, Value i, int64_t axis) {
  Shape s = x.a.shape;
  s.erase(s.begin() + axis);
  return nd(L, "Gather", {x.v, i}, x.a.with_shape(s), {Attr::i("axis", axis)});
}

// x with a unit axis inserted at `axis`.
inline TV unsqueeze(Lowering& L, const TV& x, int64_t axis) {
  Shape s = x.a.shape;
  s.insert(s.begin() + axis, Dim(1));
  return nd(L, "Unsqueeze", {x.v, i64s(L, {axis})}, x.a.with_shape(s));
}

inline void require_float(Lowering& L, const Aval& a, int64_t min_rank) {
  if (a.dtype != dtype::f32 && a.dtype != dtype::f64)
    L.fail(std::string(L.primitive()) + ": operand dtype " + dtype::name(a.dtype) +
           " is not supported (float32 and float64 only)");
  if (a.rank() < min_rank)
    L.fail(std::string(L.primitive()) + ": operand " + a.str() + " has rank < " + std::to_string(min_rank));
}

// The dim `from_end` places from the end of a's shape (1: the last).
inline Dim dim(const Aval& a, int64_t from_end) { return a.shape[a.shape.size() - static_cast<size_t>(from_end)]; }

// The batch dims of `a` (all but the two trailing) followed by `tail`.
inline Shape batch_then(const Aval& a, std::vector<Dim> tail) {
  Shape s(a.shape.begin(), a.shape.end() - 2);
  s.insert(s.end(), tail.begin(), tail.end());
  return s;
}

// x with its two trailing axes swapped.
inline TV transpose_last(Lowering& L, const TV& x) {
  int64_t r = x.a.rank();
  std::vector<int64_t> p;
  for (int64_t i = 0; i < r; ++i) p.push_back(i);
  std::swap(p[static_cast<size_t>(r - 1)], p[static_cast<size_t>(r - 2)]);
  Aval a = x.a;
  std::swap(a.shape[static_cast<size_t>(r - 1)], a.shape[static_cast<size_t>(r - 2)]);
  return {transpose(L, x.v, x.a, p), a};
}

inline TV reduce(Lowering& L, const char* op, const TV& x, int64_t axis, bool keep) {
  Shape s = x.a.shape;
  if (keep) s[static_cast<size_t>(axis)] = Dim(1);
  else s.erase(s.begin() + axis);
  Aval out = x.a.with_shape(s);
  return {reduce_over(L, op, x.v, {axis}, keep, out), out};
}

// x[..., start:end] along `axis`, `end` a static or symbolic dim.
inline TV slice_to(Lowering& L, const TV& x, int64_t axis, const Dim& end, int64_t start = 0) {
  Shape s = x.a.shape;
  s[static_cast<size_t>(axis)] = end.is_static() ? Dim(end.value - start) : dim_add(end, -start);
  return nd(L, "Slice", {x.v, i64s(L, {start}), dim_value(L, end), i64s(L, {axis})}, x.a.with_shape(s));
}

// `m` (a constant or smaller-rank value) broadcast to the full shape `to`.
inline Value expand_to(Lowering& L, Value m, const Aval& to) {
  return L.op("Expand", {m, shape_value(L, to.shape)}, to);
}

// Zeros of aval a.
inline TV zeros(Lowering& L, const Aval& a) { return {expand_to(L, scalar(L, a.dtype, 0.0), a), a}; }

// A complex matrix as its two parts (each of the real part dtype); `im` is
// kNoValue for a real one.
struct Cx {
  TV re, im;
};

// The parts of A, a packed complex value of complex aval A.a.
inline Cx split_parts(Lowering& L, const TV& A) {
  complex::Parts z = complex::split(L, A.v, A.a);
  Aval p = complex::part(A.a);
  return {{z.re, p}, {z.im, p}};
}

// The primitives and algorithms, by file.
std::pair<TV, TV> geqrf(Lowering& L, const TV& A);                    // qr.cpp
std::pair<TV, TV> qr(Lowering& L, const TV& A, bool full);            // qr.cpp
std::pair<Cx, Cx> complex_qr(Lowering& L, const Cx& A, bool full);    // complex_qr.cpp
std::pair<Cx, Cx> complex_geqrf(Lowering& L, const Cx& A);            // complex_qr.cpp
Cx complex_householder_product(Lowering& L, const Cx& A, const Cx& taus);  // complex_qr.cpp
void lower_geqrf(Lowering& L);                                        // qr.cpp
void lower_householder_product(Lowering& L);                          // qr.cpp
void lower_qr(Lowering& L);                                           // qr.cpp
void lower_eigh(Lowering& L);                                         // jacobi.cpp
void lower_svd(Lowering& L);                                          // jacobi.cpp
void lower_ormqr(Lowering& L);                                        // householder.cpp
void lower_hessenberg(Lowering& L);                                   // householder.cpp
void lower_tridiagonal(Lowering& L);                                  // householder.cpp
void lower_tridiagonal_solve(Lowering& L);                            // tridiagonal_solve.cpp
void lower_cholesky_update(Lowering& L);                              // cholesky_update.cpp

// x [..., m, n] with zero columns appended (or columns dropped) up to `cols`.
inline TV pad_cols(Lowering& L, const TV& x, const Dim& cols) {
  int64_t r = x.a.rank();
  Dim n = dim(x.a, 1);
  if (cols == n) return x;
  Shape s = x.a.shape;
  s.back() = cols;
  std::vector<int64_t> pads(static_cast<size_t>(2 * r), 0);
  Value pv;
  if (all_static({cols, n})) {
    pads.back() = cols.value - n.value;
    pv = i64s(L, pads);
  } else {
    pads.pop_back();
    Value extra = L.op("Sub", {dim_value(L, cols), dim_value(L, n)}, Aval(dtype::i64, {1}));
    pv = L.op("Concat", {i64s(L, pads), extra}, Aval(dtype::i64, {2 * r}), {Attr::i("axis", 0)});
  }
  return nd(L, "Pad", {x.v, pv, scalar(L, x.a.dtype, 0.0)}, x.a.with_shape(s), {Attr::s("mode", "constant")});
}

}  // namespace lax_linalg_iter
