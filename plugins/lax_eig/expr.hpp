// Operators over values that carry their aval, for lax_eig, so that LAPACK's
// scalar recurrences read as arithmetic (the SDK's Expr, jaxonnx/expr.hpp,
// is calls over bare values; this is its operator spelling, with broadcast
// shapes and constants from the SDK). Every operator
// emits one ONNX node in the current scope; shapes are static (the matrix
// dims are, and the kernels run on one matrix at a time), and a binary node's
// output shape is its operands' broadcast.
#pragma once

#include <jaxonnx/expr.hpp>
#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lax_eig {

using namespace jaxonnx::sdk;

struct E {
  Lowering* L = nullptr;
  Value v = kNoValue;
  Aval a;
};

// A binary node's output shape: its operands' broadcast (jaxonnx/expr.hpp).
inline Shape bshape(const Shape& x, const Shape& y) { return broadcast_shape(x, y); }

inline E mk(Lowering& L, const char* op, const std::vector<Value>& ins, const Aval& out,
            const std::vector<Attr>& attrs = {}) {
  return {&L, L.op(op, ins, out, attrs), out};
}
inline E bin(const char* op, const E& x, const E& y, int32_t dt) {
  return mk(*x.L, op, {x.v, y.v}, Aval(dt, bshape(x.a.shape, y.a.shape)));
}
inline E lit(const E& like, double d) { return {like.L, scalar(*like.L, like.a.dtype, d), Aval(like.a.dtype, {})}; }
inline E lit(Lowering& L, int32_t dt, double d) { return {&L, scalar(L, dt, d), Aval(dt, {})}; }
inline E idx(Lowering& L, int64_t i) { return lit(L, dtype::i64, double(i)); }

inline E operator+(const E& x, const E& y) { return bin("Add", x, y, x.a.dtype); }
inline E operator-(const E& x, const E& y) { return bin("Sub", x, y, x.a.dtype); }
inline E operator*(const E& x, const E& y) { return bin("Mul", x, y, x.a.dtype); }
inline E operator/(const E& x, const E& y) { return bin("Div", x, y, x.a.dtype); }
inline E operator+(const E& x, double y) { return x + lit(x, y); }
inline E operator-(const E& x, double y) { return x - lit(x, y); }
inline E operator*(const E& x, double y) { return x * lit(x, y); }
inline E operator/(const E& x, double y) { return x / lit(x, y); }
inline E operator+(double x, const E& y) { return lit(y, x) + y; }
inline E operator-(double x, const E& y) { return lit(y, x) - y; }
inline E operator*(double x, const E& y) { return lit(y, x) * y; }
inline E operator/(double x, const E& y) { return lit(y, x) / y; }
inline E operator-(const E& x) { return mk(*x.L, "Neg", {x.v}, x.a); }

inline E lt(const E& x, const E& y) { return bin("Less", x, y, dtype::boolean); }
inline E le(const E& x, const E& y) { return bin("LessOrEqual", x, y, dtype::boolean); }
inline E gt(const E& x, const E& y) { return bin("Greater", x, y, dtype::boolean); }
inline E ge(const E& x, const E& y) { return bin("GreaterOrEqual", x, y, dtype::boolean); }
inline E eq(const E& x, const E& y) { return bin("Equal", x, y, dtype::boolean); }
inline E lt(const E& x, double y) { return lt(x, lit(x, y)); }
inline E le(const E& x, double y) { return le(x, lit(x, y)); }
inline E gt(const E& x, double y) { return gt(x, lit(x, y)); }
inline E ge(const E& x, double y) { return ge(x, lit(x, y)); }
inline E eq(const E& x, double y) { return eq(x, lit(x, y)); }
inline E ne(const E& x, const E& y) { return mk(*x.L, "Not", {eq(x, y).v}, Aval(dtype::boolean, bshape(x.a.shape, y.a.shape))); }
inline E ne(const E& x, double y) { return ne(x, lit(x, y)); }
inline E operator&&(const E& x, const E& y) { return bin("And", x, y, dtype::boolean); }
inline E operator||(const E& x, const E& y) { return bin("Or", x, y, dtype::boolean); }
inline E operator!(const E& x) { return mk(*x.L, "Not", {x.v}, x.a); }

// Where(c, x, y); x and y of one dtype (not bool: onnxruntime has no kernel).
inline E sel(const E& c, const E& x, const E& y) {
  return mk(*x.L, "Where", {c.v, x.v, y.v}, Aval(x.a.dtype, bshape(c.a.shape, bshape(x.a.shape, y.a.shape))));
}
inline E sel(const E& c, const E& x, double y) { return sel(c, x, lit(x, y)); }
inline E sel(const E& c, double x, const E& y) { return sel(c, lit(y, x), y); }
inline E fabs(const E& x) { return mk(*x.L, "Abs", {x.v}, x.a); }
inline E fsqrt(const E& x) { return mk(*x.L, "Sqrt", {x.v}, x.a); }
inline E fmax(const E& x, const E& y) { return bin("Max", x, y, x.a.dtype); }
inline E fmin(const E& x, const E& y) { return bin("Min", x, y, x.a.dtype); }
inline E as(const E& x, int32_t dt) { return {x.L, cast(*x.L, x.v, x.a, dt), x.a.with_dtype(dt)}; }
// Fortran SIGN(1, x) as gfortran gives it: -1 for x < 0 and for -0.0.
inline E sign1(const E& x) {
  E neg = lt(x, 0.0) || (eq(x, 0.0) && lt(1.0 / x, 0.0));
  return sel(neg, lit(x, -1.0), lit(x, 1.0));
}

// x with `axis` taken at the dynamic int64 scalar i (the axis disappears).
inline E take(const E& x, const E& i, int64_t axis) {
  Shape s = x.a.shape;
  s.erase(s.begin() + axis);
  return mk(*x.L, "Gather", {x.v, i.v}, x.a.with_shape(s), {Attr::i("axis", axis)});
}
// x[r, c] of a matrix, dynamic indices.
inline E at(const E& m, const E& r, const E& c) { return take(take(m, r, 0), c, 0); }
inline E reduce(const char* op, const E& x, int64_t axis, bool keep = false) {
  Shape s = x.a.shape;
  if (keep) s[static_cast<size_t>(axis)] = Dim(1);
  else s.erase(s.begin() + axis);
  Aval out = x.a.with_shape(s);
  return {x.L, reduce_over(*x.L, op, x.v, {axis}, keep, out), out};
}
inline E unsq(const E& x, int64_t axis) {
  Shape s = x.a.shape;
  s.insert(s.begin() + axis, Dim(1));
  return mk(*x.L, "Unsqueeze", {x.v, i64s(*x.L, {axis})}, x.a.with_shape(s));
}
// outer(u, v)[r, c] = u[r] * v[c]
inline E outer(const E& u, const E& v) { return unsq(u, 1) * unsq(v, 0); }
inline E matvec(const E& m, const E& v) {  // [n, n] x [n] -> [n]
  return mk(*m.L, "MatMul", {m.v, v.v}, m.a.with_shape({m.a.shape[0]}));
}
inline E matmul(const E& x, const E& y) {
  return mk(*x.L, "MatMul", {x.v, y.v}, x.a.with_shape({x.a.shape[0], y.a.shape[1]}));
}

// Per-kernel constants: the matrix size, its dtype, index ramps.
struct Ctx {
  Lowering& L;
  int32_t dt;
  int64_t n;
  E iv, ir, ic;  // int64 0..n-1 as [n], [n, 1], [1, n]
  Ctx(Lowering& L_, int32_t dt_, int64_t n_) : L(L_), dt(dt_), n(n_) {
    std::vector<int64_t> r;
    for (int64_t i = 0; i < n; ++i) r.push_back(i);
    iv = {&L, L.constant(r, {n}), Aval(dtype::i64, {n})};
    ir = {&L, L.constant(r, {n, 1}), Aval(dtype::i64, {n, 1})};
    ic = {&L, L.constant(r, {1, n}), Aval(dtype::i64, {1, n})};
  }
  E f(double x) const { return lit(L, dt, x); }
  E i(int64_t x) const { return idx(L, x); }
  Aval mat() const { return Aval(dt, {n, n}); }
  Aval vec() const { return Aval(dt, {n}); }
  Aval sc() const { return Aval(dt, {}); }
  // machine constants as LAPACK's dlamch gives them
  double eps() const { return dt == dtype::f32 ? 0x1p-24 : 0x1p-53; }      // 'E'
  double ulp() const { return dt == dtype::f32 ? 0x1p-23 : 0x1p-52; }      // 'P'
  double safmin() const { return dt == dtype::f32 ? 0x1p-126 : 0x1p-1022; } // 'S'
  // m with element (r, c) set to val
  E set(const E& m, const E& r, const E& c, const E& val) const { return sel(eq(ir, r) && eq(ic, c), val, m); }
  E clamp(const E& k) const { return fmax(fmin(k, i(n - 1)), i(0)); }
};

// A Loop: `body(state) -> (keep_going, state')`, run at most `trips` times
// (an int64 scalar), from `init`. Returns the final state.
template <typename Body>
std::vector<E> loop(Lowering& L, const E& trips, const std::vector<E>& init, const char* name, Body body) {
  Subgraph g = L.begin_subgraph(name);
  E it{&L, g.input(Aval(dtype::i64, {}), "iter"), Aval(dtype::i64, {})};
  g.input(Aval(dtype::boolean, {}), "cond_in");
  std::vector<E> st;
  for (size_t k = 0; k < init.size(); ++k)
    st.push_back({&L, g.input(init[k].a, "s" + std::to_string(k)), init[k].a});
  auto [go, next] = body(it, st);
  std::vector<Value> outs = {go.v};
  for (const E& e : next) outs.push_back(e.v);
  GraphRef ref = g.end(outs);
  std::vector<Value> ins = {trips.v, scalar(L, dtype::boolean, 1)};
  std::vector<Aval> avals;
  for (const E& e : init) { ins.push_back(e.v); avals.push_back(e.a); }
  std::vector<Value> res = L.op_n("Loop", ins, avals, {Attr::graph("body", ref)});
  std::vector<E> out;
  for (size_t k = 0; k < res.size(); ++k) out.push_back({&L, res[k], init[k].a});
  return out;
}

}  // namespace lax_eig
