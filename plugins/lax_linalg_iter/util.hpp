// Small helpers shared by the lax_linalg_iter lowerings kept in their own
// files (tridiagonal_solve.cpp, cholesky_update.cpp, ...).
#pragma once

#include <jaxonnx/plugin.hpp>

#include <cstdint>
#include <string>
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

// The static size of axis `axis` of a, or a clear failure.
inline int64_t static_dim(Lowering& L, const Aval& a, int64_t axis, const char* what) {
  const Dim& d = a.shape.at(static_cast<size_t>(axis));
  if (!d.is_static())
    L.fail(std::string(L.primitive()) + ": the " + what + " dim of " + a.str() +
           " is symbolic; only the batch dims may be symbolic");
  return d.value;
}

// The primitives lowered in their own files.
void lower_tridiagonal_solve(Lowering& L);
void lower_cholesky_update(Lowering& L);
void lower_ormqr(Lowering& L);
void lower_hessenberg(Lowering& L);
void lower_tridiagonal(Lowering& L);

}  // namespace lax_linalg_iter
