// Helpers shared by the lax_linalg lowerings (cholesky.cpp, triangular_solve.cpp,
// lu.cpp, lax_linalg.cpp): typed values (real, or complex as two real parts),
// slices and concats that derive their avals, and the size-dependent pieces
// (iota, masks, trip counts) that are constants for a static matrix size and
// computed from the input's Shape for a symbolic one. The arithmetic on
// possibly complex values is in arith.hpp.
#pragma once

#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lax_linalg {

using namespace jaxonnx::sdk;

// Unrolling beyond this many columns makes models of thousands of nodes: a Loop then.
constexpr int64_t kMaxUnrolled = 64;

// A value with its type, so slices and concats can derive their avals. A
// complex value is its real part `v` and imaginary part `im`, both of the real
// aval `a` (complex64[n, n] is two float32[n, n]); `im` is kNoValue for a real one.
struct T {
  Value v;
  Aval a;
  Value im = kNoValue;
};

inline bool is_complex(const T& x) { return x.im != kNoValue; }

// `f` applied to x's value and, for a complex x, to its imaginary part too
// (the structural ops: slices, gathers, transposes act on each part alike).
template <class F>
T each(const T& x, const Aval& out, F f) {
  T r{f(x.v), out};
  if (is_complex(x)) r.im = f(x.im);
  return r;
}

inline int64_t rank_of(const T& x) { return x.a.rank(); }

// Static matrix sizes from 1 to kMaxUnrolled are unrolled; anything else
// (larger, empty, or symbolic) runs as a Loop whose trip count may be 0.
inline bool unrolled(const Dim& d) { return d.is_static() && d.value >= 1 && d.value <= kMaxUnrolled; }

// float32/float64, and complex64/complex128 where `complex_ok`.
inline void require_float(Lowering& L, const Aval& a, bool complex_ok = false) {
  bool cplx = a.dtype == dtype::c64 || a.dtype == dtype::c128;
  if (a.dtype != dtype::f32 && a.dtype != dtype::f64 && !(complex_ok && cplx))
    L.fail(std::string(L.primitive()) + ": operand dtype " + dtype::name(a.dtype) + " is not supported (float32 and float64" +
           (complex_ok ? ", complex64 and complex128" : "") + " only)");
  if (a.rank() < 2) L.fail(std::string(L.primitive()) + ": operand " + a.str() + " is not a matrix");
}

// Emits `op` whose output has type `out`.
inline T node(Lowering& L, const char* op, const std::vector<Value>& ins, const Aval& out,
              const std::vector<Attr>& attrs = {}) {
  return {L.op(op, ins, out, attrs), out};
}

// x[..., start:end] along `axis`.
inline T slice(Lowering& L, const T& x, int64_t axis, int64_t start, int64_t end) {
  Shape s = x.a.shape;
  s[static_cast<size_t>(axis)] = Dim(end - start);
  return each(x, x.a.with_shape(s), [&](Value v) {
    return L.op("Slice", {v, i64s(L, {start}), i64s(L, {end}), i64s(L, {axis})}, x.a.with_shape(s));
  });
}

// Concat of static-size parts (the unrolled forms).
inline T concat(Lowering& L, const std::vector<T>& parts, int64_t axis) {
  if (parts.size() == 1) return parts[0];
  Shape s = parts[0].a.shape;
  int64_t total = 0;
  std::vector<Value> vs, ims;
  for (const T& p : parts) {
    total += p.a.shape[static_cast<size_t>(axis)].value;
    vs.push_back(p.v);
    ims.push_back(p.im);
  }
  s[static_cast<size_t>(axis)] = Dim(total);
  Aval out = parts[0].a.with_shape(s);
  T r{L.op("Concat", vs, out, {Attr::i("axis", axis)}), out};
  if (is_complex(parts[0])) r.im = L.op("Concat", ims, out, {Attr::i("axis", axis)});
  return r;
}

// The batch dims of `a` followed by `tail`.
inline Shape batch_then(const Aval& a, const std::vector<Dim>& tail) {
  Shape s(a.shape.begin(), a.shape.end() - 2);
  s.insert(s.end(), tail.begin(), tail.end());
  return s;
}

// The permutation of `rank` axes swapping the last two.
inline std::vector<int64_t> swap_last_two(int64_t rank) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i) perm.push_back(i);
  std::swap(perm[static_cast<size_t>(rank - 1)], perm[static_cast<size_t>(rank - 2)]);
  return perm;
}

// ReduceSum over one axis, kept.
inline T sum_keep(Lowering& L, const T& x, int64_t axis) {
  Shape s = x.a.shape;
  s[static_cast<size_t>(axis)] = Dim(1);
  return each(x, x.a.with_shape(s), [&](Value v) {
    return L.op("ReduceSum", {v, i64s(L, {axis})}, x.a.with_shape(s), {Attr::i("keepdims", 1)});
  });
}

// Row/column j of x (j an int64 scalar) along `axis`, kept as size 1.
inline T take(Lowering& L, const T& x, Value j, int64_t axis) {
  Shape s = x.a.shape;
  s[static_cast<size_t>(axis)] = Dim(1);
  Value j1 = L.op("Unsqueeze", {j, i64s(L, {0})}, Aval(dtype::i64, {1}));
  return each(x, x.a.with_shape(s),
              [&](Value v) { return L.op("Gather", {v, j1}, x.a.with_shape(s), {Attr::i("axis", axis)}); });
}

inline Value zeros_like_aval(Lowering& L, const Aval& a) {
  return L.op("Expand", {scalar(L, a.dtype, 0.0), shape_value(L, a.shape)}, a);
}

// ------------------------------------------------ size-dependent values --

// The value of size `n` as an int64 scalar (a Loop trip count, a Range limit);
// a symbolic one is computed once per graph scope.
inline Value count(Lowering& L, const Dim& n) {
  if (n.is_static()) return scalar(L, dtype::i64, double(n.value));
  return L.memoized("lax_linalg.count:" + n.symbol, [&] {
    return L.op("Squeeze", {dim_value(L, n), i64s(L, {0})}, Aval(dtype::i64, {}));
  });
}

// min(a, b) as an int64 scalar.
inline Value count_min(Lowering& L, const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return scalar(L, dtype::i64, double(std::min(a.value, b.value)));
  Value m = L.op("Min", {dim_value(L, a), dim_value(L, b)}, Aval(dtype::i64, {1}));
  return L.op("Squeeze", {m, i64s(L, {0})}, Aval(dtype::i64, {}));
}

// 0..n-1 as int64 of shape `dims`: all 1 but one axis, of size n.
inline Value iota(Lowering& L, const Dim& n, const std::vector<Dim>& dims) {
  if (n.is_static()) {
    std::vector<int64_t> v, sd;
    for (int64_t i = 0; i < n.value; ++i) v.push_back(i);
    for (const Dim& d : dims) sd.push_back(d.value);
    return L.constant(v, sd);
  }
  std::vector<int64_t> unit_axes;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != n) unit_axes.push_back(static_cast<int64_t>(i));
  Value r = L.op("Range", {scalar(L, dtype::i64, 0.0), count(L, n), scalar(L, dtype::i64, 1.0)},
                 Aval(dtype::i64, {n}));
  if (unit_axes.empty()) return r;
  return L.op("Unsqueeze", {r, i64s(L, unit_axes)}, Aval(dtype::i64, Shape(dims.begin(), dims.end())));
}

// A bool [rows, cols] mask of `cmp`(i, j) (Equal, Less, ...): a constant
// for static sizes, else the comparison of two runtime iotas.
inline Value index_mask(Lowering& L, const Dim& rows, const Dim& cols, const std::string& cmp) {
  if (cmp != "Equal" && cmp != "Less" && cmp != "Greater") throw Error("index_mask: no comparison " + cmp);
  if (rows.is_static() && cols.is_static()) {
    std::vector<uint8_t> m;
    for (int64_t i = 0; i < rows.value; ++i)
      for (int64_t j = 0; j < cols.value; ++j)
        m.push_back(cmp == "Equal" ? i == j : cmp == "Less" ? i < j : i > j);
    return L.constant(dtype::boolean, {rows.value, cols.value}, m.data(), m.size());
  }
  return L.op(cmp, {iota(L, rows, {rows, 1}), iota(L, cols, {1, cols})}, Aval(dtype::boolean, {rows, cols}));
}

// The lowerings kept in their own files.
void lower_cholesky(Lowering& L);
void lower_triangular_solve(Lowering& L);
void lower_lu(Lowering& L);
void lower_lu_pivots_to_permutation(Lowering& L);

}  // namespace lax_linalg
