// jaxonnx plugin SDK: Expr, elementwise arithmetic written as calls, over an
// Emitter (a Lowering or a Rewrite). One working dtype `t`: constants k(v)
// are rank-0 tensors of it, float results are of it, comparisons are bool.
// A result's shape is its operands' shapes broadcast (numpy's rules, as
// ONNX's elementwise ops and JAX's implicit size-1 broadcasting have it), read
// from the emitter, so values of different ranks mix.
//
//   Expr e{L, dtype::f32};
//   Value y = e.where(e.lt(x, e.k(0)), e.neg(x), x);
//
// Each call emits one node now, in call order; the special functions built
// from these are in special.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "jaxonnx/attr.hpp"
#include "jaxonnx/emitter.hpp"
#include "jaxonnx/idioms.hpp"
#include "jaxonnx/types.hpp"

namespace jaxonnx::sdk {

// `a` and `b` broadcast: right-aligned, a dim of 1 takes the other's.
inline Shape broadcast_shape(const Shape& a, const Shape& b) {
  Shape out = a;
  if (b.size() > out.size()) out.insert(out.begin(), b.size() - out.size(), Dim(1));
  for (size_t i = 0, off = out.size() - b.size(); i < b.size(); ++i)
    if (out[off + i] == Dim(1)) out[off + i] = b[i];
  return out;
}

struct Expr {
  Emitter& E;
  int32_t t;  // the working dtype

  Expr(Emitter& emitter, int32_t dt) : E(emitter), t(dt) {}

  bool f64() const { return t == dtype::f64; }
  Shape shape_of(const std::vector<Value>& ins) const {
    Shape out;
    for (Value v : ins) out = broadcast_shape(out, E.aval_of(v).shape);
    return out;
  }
  // `type` of `ins`, giving dtype `dt` in their broadcast shape.
  Value op(std::string_view type, const std::vector<Value>& ins, int32_t dt, const std::vector<Attr>& attrs = {}) {
    return E.op(type, ins, Aval(dt, shape_of(ins)), attrs);
  }
  Value f(std::string_view type, const std::vector<Value>& ins) { return op(type, ins, t); }
  Value b(std::string_view type, const std::vector<Value>& ins) { return op(type, ins, dtype::boolean); }

  Value k(double v) { return scalar(E, t, v); }
  Value add(Value x, Value y) { return f("Add", {x, y}); }
  Value sub(Value x, Value y) { return f("Sub", {x, y}); }
  Value mul(Value x, Value y) { return f("Mul", {x, y}); }
  Value div(Value x, Value y) { return f("Div", {x, y}); }
  Value neg(Value x) { return f("Neg", {x}); }
  Value abs(Value x) { return f("Abs", {x}); }
  Value sqrt(Value x) { return f("Sqrt", {x}); }
  Value exp(Value x) { return f("Exp", {x}); }
  Value log(Value x) { return f("Log", {x}); }
  Value sin(Value x) { return f("Sin", {x}); }
  Value cos(Value x) { return f("Cos", {x}); }
  Value floor(Value x) { return f("Floor", {x}); }
  Value where(Value c, Value x, Value y) { return f("Where", {c, x, y}); }
  Value lt(Value x, Value y) { return b("Less", {x, y}); }
  Value gt(Value x, Value y) { return b("Greater", {x, y}); }
  Value le(Value x, Value y) { return b("LessOrEqual", {x, y}); }
  Value ge(Value x, Value y) { return b("GreaterOrEqual", {x, y}); }
  Value eq(Value x, Value y) { return b("Equal", {x, y}); }
  Value or_(Value x, Value y) { return b("Or", {x, y}); }
  Value and_(Value x, Value y) { return b("And", {x, y}); }
  Value not_(Value x) { return b("Not", {x}); }

  // x < 0 or x is -0 (1/-0 = -inf) or -inf; false for NaN.
  Value signbit(Value x) { return or_(lt(x, k(0)), lt(div(k(1), x), k(0))); }
  // -1 where x has its sign bit set (also -0), else 1.
  Value sign_factor(Value x) { return where(signbit(x), k(-1), k(1)); }
  // |r| with the sign of s, -0 included. onnxruntime's Where turns a selected
  // -0 into +0, so signs of zeros are applied by multiplying, after any Where.
  Value copysign(Value r, Value s) { return mul(abs(r), sign_factor(s)); }
};

}  // namespace jaxonnx::sdk
