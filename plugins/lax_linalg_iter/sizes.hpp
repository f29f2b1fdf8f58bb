// The size-dependent values of the lax_linalg_iter lowerings (trip counts,
// iotas, eye, triangle masks, pads), for a static or a symbolic matrix size.
// A static size gives a constant, so static graphs keep their constants; a
// symbolic one is computed at run time from the input's Shape (dim_value), so
// one model serves every size. The algorithms call these and have one path.
#pragma once

#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace lax_linalg_iter {

using namespace jaxonnx::sdk;

inline bool all_static(std::initializer_list<Dim> ds) {
  for (const Dim& d : ds)
    if (!d.is_static()) return false;
  return true;
}

// Dim arithmetic for the declared shapes of intermediates: exact when
// static, else a JAX-style expression (dim_value can evaluate it).
inline std::string dim_text(const Dim& d) { return d.is_static() ? std::to_string(d.value) : "(" + d.symbol + ")"; }
inline Dim dim_min(const Dim& a, const Dim& b) {
  if (a == b) return a;
  if (all_static({a, b})) return Dim(std::min(a.value, b.value));
  return Dim::sym("min(" + dim_text(a) + ", " + dim_text(b) + ")");
}
inline Dim dim_max(const Dim& a, const Dim& b) {
  if (a == b) return a;
  if (all_static({a, b})) return Dim(std::max(a.value, b.value));
  return Dim::sym("max(" + dim_text(a) + ", " + dim_text(b) + ")");
}
inline Dim dim_add(const Dim& a, int64_t c) {
  if (a.is_static()) return Dim(a.value + c);
  if (c == 0) return a;
  return Dim::sym(dim_text(a) + (c < 0 ? " - " : " + ") + std::to_string(c < 0 ? -c : c));
}

// The size as an int64 scalar (a Loop trip count, a bound to compare with).
inline Value count(Lowering& L, const Dim& d) {
  if (d.is_static()) return scalar(L, dtype::i64, double(d.value));
  return L.op("Squeeze", {dim_value(L, d), i64s(L, {0})}, Aval(dtype::i64, {}));
}

// max(d + c, 0) as an int64 scalar: a trip count that must not go negative
// (n - 1 steps at n = 0).
inline Value count_plus(Lowering& L, const Dim& d, int64_t c) {
  if (d.is_static()) return scalar(L, dtype::i64, double(std::max<int64_t>(d.value + c, 0)));
  Aval isc(dtype::i64, {});
  Value v = L.op("Add", {count(L, d), scalar(L, dtype::i64, double(c))}, isc);
  return L.op("Max", {v, scalar(L, dtype::i64, 0.0)}, isc);
}

// n - 1 as an int64 scalar (the first index of a back-to-front Loop).
inline Value last_index(Lowering& L, const Dim& n) {
  if (n.is_static()) return scalar(L, dtype::i64, double(n.value - 1));
  return L.op("Sub", {count(L, n), scalar(L, dtype::i64, 1.0)}, Aval(dtype::i64, {}));
}

// 0 .. n-1 as int64, laid out as [n] (axis 0 of rank 1), [n, 1] (axis 0 of
// rank 2) or [1, n] (axis 1 of rank 2).
inline Value iota(Lowering& L, const Dim& n, int64_t axis = 0, int64_t rank = 1) {
  Shape s(static_cast<size_t>(rank), Dim(1));
  s[static_cast<size_t>(axis)] = n;
  if (n.is_static()) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n.value; ++i) v.push_back(i);
    std::vector<int64_t> dims;
    for (const Dim& d : s) dims.push_back(d.value);
    return L.constant(v, dims);
  }
  Value r = L.op("Range", {scalar(L, dtype::i64, 0.0), count(L, n), scalar(L, dtype::i64, 1.0)},
                 Aval(dtype::i64, {n}));
  if (rank == 1) return r;
  return L.op("Unsqueeze", {r, i64s(L, {axis == 0 ? 1 : 0})}, Aval(dtype::i64, s));
}

// The [rows, cols] boolean mask `op(i, j)` (op: Equal, Greater,
// GreaterOrEqual, LessOrEqual) of row index i and column index j, shifted by
// `offset` (i op j + offset).
inline Value index_mask(Lowering& L, const char* op, const Dim& rows, const Dim& cols, int64_t offset = 0) {
  std::string o = op;
  if (all_static({rows, cols})) {
    std::vector<uint8_t> m;
    for (int64_t i = 0; i < rows.value; ++i)
      for (int64_t j = 0; j < cols.value; ++j) {
        int64_t k = j + offset;
        m.push_back(o == "Equal" ? i == k : o == "Greater" ? i > k : o == "GreaterOrEqual" ? i >= k : i <= k);
      }
    return L.constant(dtype::boolean, {rows.value, cols.value}, m.data(), m.size());
  }
  Value j = iota(L, cols, 1, 2);
  if (offset != 0) j = L.op("Add", {j, scalar(L, dtype::i64, double(offset))}, Aval(dtype::i64, {1, cols}));
  return L.op(op, {iota(L, rows, 0, 2), j}, Aval(dtype::boolean, {rows, cols}));
}

// A float constant of dtype dt.
inline Value fconst(Lowering& L, int32_t dt, const std::vector<double>& v, const std::vector<int64_t>& dims) {
  if (dt == dtype::f64) return L.constant(v, dims);
  std::vector<float> f(v.begin(), v.end());
  return L.constant(f, dims);
}

// The [rows, cols] identity of dtype dt.
inline Value eye(Lowering& L, int32_t dt, const Dim& rows, const Dim& cols) {
  if (all_static({rows, cols})) {
    std::vector<double> e(static_cast<size_t>(rows.value * cols.value), 0.0);
    for (int64_t i = 0; i < std::min(rows.value, cols.value); ++i) e[static_cast<size_t>(i * cols.value + i)] = 1.0;
    return fconst(L, dt, e, {rows.value, cols.value});
  }
  return L.op("Cast", {index_mask(L, "Equal", rows, cols)}, Aval(dt, {rows, cols}), {Attr::i("to", dt)});
}

// The size as a float scalar of dtype dt.
inline Value fcount(Lowering& L, const Dim& d, int32_t dt) {
  if (d.is_static()) return scalar(L, dt, double(d.value));
  return L.op("Cast", {count(L, d)}, Aval(dt, {}), {Attr::i("to", dt)});
}

}  // namespace lax_linalg_iter
