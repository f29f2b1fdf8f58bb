// jaxonnx plugin SDK: ONNX idioms, the small node patterns most lowerings
// share, as free functions over a Lowering: casts and transposes that vanish
// when they are the identity, Where around onnxruntime's missing kernels
// (kernels.hpp), int64 shape constants and typed scalars, the runtime value of
// a symbolic dim or shape, Reshape with its shape codes, and a log-depth scan. Everything here is built from
// Lowering's host calls; none of it needs the host's help.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jaxonnx/attr.hpp"
#include "jaxonnx/kernels.hpp"
#include "jaxonnx/lowering.hpp"
#include "jaxonnx/plugin_abi.h"
#include "jaxonnx/types.hpp"

namespace jaxonnx::sdk {

// `v` (of type `from`) cast to dtype `to`; no node when it already is.
inline Value cast(Emitter& L, Value v, const Aval& from, int32_t to) {
  if (from.dtype == to) return v;
  return L.op("Cast", {v}, from.with_dtype(to), {Attr::i("to", to)});
}

// Where(cond, a, b) giving `out`. Where onnxruntime has no Where kernel for
// out's dtype (kernels.hpp: bool, 16-bit integers, uint64), it selects in a
// type that keeps every value (or, for uint64, every bit) and casts back.
inline Value where(Lowering& L, Value cond, Value a, Value b, const Aval& out) {
  int32_t t = out.dtype;
  int32_t c = kernels::compute_type("Where", t, /*bits_only=*/true);
  if (c == t || c == JXO_DTYPE_UNDEFINED) return L.op("Where", {cond, a, b}, out);
  Aval wide = out.with_dtype(c);
  Value r = L.op("Where", {cond, cast(L, a, L.aval_of(a), c), cast(L, b, L.aval_of(b), c)}, wide);
  return cast(L, r, wide, t);
}

// `x` (of type `a`) transposed by `perm`; no node for the identity.
inline Value transpose(Lowering& L, Value x, const Aval& a, const std::vector<int64_t>& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
  if (identity) return x;
  Shape s;
  for (int64_t p : perm) s.push_back(a.shape.at(static_cast<size_t>(p)));
  return L.op("Transpose", {x}, a.with_shape(std::move(s)), {Attr::ints("perm", perm)});
}

// A 1-D int64 constant, the currency of shape arguments (axes, shapes, starts).
inline Value i64s(Emitter& L, const std::vector<int64_t>& v) {
  return L.constant(dtype::i64, {static_cast<int64_t>(v.size())}, v.data(), v.size() * sizeof(int64_t));
}

namespace detail {
template <typename T> Value scalar_of(Emitter& L, T x) {
  return L.constant(dtype::of<T>(), {}, &x, sizeof(T));
}
}  // namespace detail

// A scalar (rank-0) of dtype `dt` holding `x` converted to that dtype.
inline Value scalar(Emitter& L, int32_t dt, double x) {
  using detail::scalar_of;
  switch (dt) {
    case dtype::f32: return scalar_of<float>(L, static_cast<float>(x));
    case dtype::f64: return scalar_of<double>(L, x);
    case dtype::i8: return scalar_of<int8_t>(L, static_cast<int8_t>(x));
    case dtype::i16: return scalar_of<int16_t>(L, static_cast<int16_t>(x));
    case dtype::i32: return scalar_of<int32_t>(L, static_cast<int32_t>(x));
    case dtype::i64: return scalar_of<int64_t>(L, static_cast<int64_t>(x));
    case dtype::u8: return scalar_of<uint8_t>(L, static_cast<uint8_t>(x));
    case dtype::u16: return scalar_of<uint16_t>(L, static_cast<uint16_t>(x));
    case dtype::u32: return scalar_of<uint32_t>(L, static_cast<uint32_t>(x));
    case dtype::u64: return scalar_of<uint64_t>(L, static_cast<uint64_t>(x));
    case dtype::boolean: {
      uint8_t b = x != 0;
      return L.constant(dtype::boolean, {}, &b, 1);
    }
    default: break;
  }
  // f16/bf16: build in f32 and cast, rather than hand-rounding here.
  Value f = scalar_of<float>(L, static_cast<float>(x));
  return L.op("Cast", {f}, Aval(dt, {}), {Attr::i("to", dt)});
}

namespace detail {
// Evaluates a JAX symbolic dim expression ("2*B + 1", "floordiv(B, 2)",
// "max(B, 1)", "B*C", "2*B^2") into an int64[1] value with ONNX arithmetic.
struct DimExprParser {
  std::string_view s;
  size_t pos;
  Lowering* L;

  Aval one() const { return Aval(dtype::i64, {1}); }
  void skip() { while (pos < s.size() && s[pos] == ' ') ++pos; }
  bool eat(char c) { skip(); if (pos < s.size() && s[pos] == c) { ++pos; return true; } return false; }
  [[noreturn]] void bad() const {
    throw Error("cannot evaluate symbolic dim expression '" + std::string(s) + "'");
  }
  Value parse() { Value v = expr(); skip(); if (pos != s.size()) bad(); return v; }
  Value expr() {
    Value v = term();
    for (;;) {
      if (eat('+')) v = L->op("Add", {v, term()}, one());
      else if (eat('-')) v = L->op("Sub", {v, term()}, one());
      else return v;
    }
  }
  Value term() {
    Value v = power();
    while (eat('*')) v = L->op("Mul", {v, power()}, one());
    return v;
  }
  // base^k (JAX writes B*B as "B^2"), k a positive integer: k - 1 products.
  Value power() {
    Value v = factor();
    if (!eat('^')) return v;
    skip();
    int64_t k = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') k = k * 10 + (s[pos++] - '0');
    if (k < 1) bad();
    Value base = v;
    for (int64_t i = 1; i < k; ++i) v = L->op("Mul", {v, base}, one());
    return v;
  }
  Value factor() {
    skip();
    if (eat('(')) { Value v = expr(); if (!eat(')')) bad(); return v; }
    if (eat('-')) return L->op("Neg", {power()}, one());  // -B^2 is -(B^2)
    if (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      int64_t n = 0;
      while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') n = n * 10 + (s[pos++] - '0');
      return i64s(*L, {n});
    }
    size_t start = pos;
    while (pos < s.size() && (std::isalnum(static_cast<unsigned char>(s[pos])) || s[pos] == '_')) ++pos;
    if (start == pos) bad();
    std::string_view name = s.substr(start, pos - start);
    if (eat('(')) {
      Value a = expr();
      if (!eat(',')) bad();
      Value b = expr();
      if (!eat(')')) bad();
      if (name == "floordiv") return floordiv(a, b);
      if (name == "mod") return L->op("Mod", {a, b}, one(), {Attr::i("fmod", 0)});
      if (name == "max") return L->op("Max", {a, b}, one());
      if (name == "min") return L->op("Min", {a, b}, one());
      bad();
    }
    return atom(name);
  }
  // Floor division. ONNX Div truncates, but Mod(fmod=0) takes the divisor's
  // sign, so a - mod(a, b) is an exact multiple of b and divides exactly.
  Value floordiv(Value a, Value b) {
    Value m = L->op("Mod", {a, b}, one(), {Attr::i("fmod", 0)});
    return L->op("Div", {L->op("Sub", {a, m}, one()), b}, one());
  }
  Value atom(std::string_view name);
};
}  // namespace detail

// Shape(x)[start:end] as an int64 tensor of shape [end - start]: Shape's
// start/end attributes from opset 15, Shape then Slice before.
inline Value shape_slice(Lowering& L, Value x, int64_t start, int64_t end) {
  Aval out(dtype::i64, {end - start});
  if (L.opset() >= 15)
    return L.op("Shape", {x}, out, {Attr::i("start", start), Attr::i("end", end)});
  Value all = L.op("Shape", {x}, Aval::of_unknown_shape(dtype::i64));
  return L.op("Slice", {all, i64s(L, {start}), i64s(L, {end})}, out);
}

inline Value detail::DimExprParser::atom(std::string_view name) {
  return L->memoized("jaxonnx.dim:" + std::string(name), [&] {
    Lowering::SymbolOrigin o = L->symbol_origin(name);
    return shape_slice(*L, o.value, o.axis, o.axis + 1);
  });
}

// A reduction `op` (ReduceMax, ReduceMean, ...) of `x` over `axes` (empty:
// all axes) with `keepdims`, giving `out`, in the form the target opset
// allows: axes as an input from opset 18 (ReduceSum: 13), as an attribute
// before.
inline Value reduce_over(Lowering& L, std::string_view op, Value x,
                         const std::vector<int64_t>& axes, bool keepdims, const Aval& out) {
  std::vector<Attr> attrs{Attr::i("keepdims", keepdims ? 1 : 0)};
  if (axes.empty()) return L.op(op, {x}, out, attrs);
  if (L.opset() >= 18 || op == "ReduceSum") return L.op(op, {x, i64s(L, axes)}, out, attrs);
  attrs.push_back(Attr::ints("axes", axes));
  return L.op(op, {x}, out, attrs);
}

// The runtime value of a dim as an int64 tensor of shape [1]. A static dim
// is a constant; a symbolic one is computed from where its symbols entered
// the graph (Shape of that input), once per graph (Lowering::memoized).
inline Value dim_value(Lowering& L, const Dim& d) {
  if (d.is_static()) return i64s(L, {d.value});
  return L.memoized("jaxonnx.dim:" + d.symbol,
                    [&] { return detail::DimExprParser{d.symbol, 0, &L}.parse(); });
}

// A 1-D int64 tensor holding `shape`, symbolic dims computed at runtime.
// Runs of static dims become one constant.
inline Value shape_value(Lowering& L, const Shape& shape) {
  bool all_static = true;
  for (const Dim& d : shape) all_static = all_static && d.is_static();
  if (all_static) {
    std::vector<int64_t> v;
    for (const Dim& d : shape) v.push_back(d.value);
    return i64s(L, v);
  }
  std::vector<Value> parts;
  std::vector<int64_t> run;
  for (const Dim& d : shape) {
    if (d.is_static()) { run.push_back(d.value); continue; }
    if (!run.empty()) { parts.push_back(i64s(L, run)); run.clear(); }
    parts.push_back(dim_value(L, d));
  }
  if (!run.empty()) parts.push_back(i64s(L, run));
  if (parts.size() == 1) return parts[0];
  return L.op("Concat", parts, Aval(dtype::i64, {static_cast<int64_t>(shape.size())}),
              {Attr::i("axis", 0)});
}

// ------------------------------------------------------------------ Reshape --
// The one place that decides Reshape's shape operand. Its codes: 0 copies
// the input's dim at that index (exact wherever the output dim is that dim,
// symbolic or 0 at run time; never with allowzero), -1 infers a dim from the
// element count (exact when every other dim is known and non-zero). A shape
// with a static 0 needs allowzero=1 (opset >= 14), which forbids 0 codes, and
// before opset 14 a detour (detail::reshape_empty). Runtime values of
// symbolic dims come with allowzero=1 too: a dim 0 at run time (B - 1 at
// B = 1) must mean 0, not "copy". Forms: reshape (to a given type), flatten
// (to 1-D), merge_leading (leading dims into rows), reshape_after (the dims
// after some leading ones kept as they are); each gives no node when the
// shapes already agree.

// The number of elements of `s` as one Dim: static when every dim is, else
// a product expression dim_value evaluates ("3*(B)*(T)").
inline Dim dims_product(const Shape& s) {
  int64_t k = 1;
  std::string sym;
  for (const Dim& d : s) {
    if (d.is_static()) k *= d.value;
    else sym += (sym.empty() ? "(" : "*(") + d.symbol + ")";
  }
  if (sym.empty() || k == 0) return Dim(k);
  return Dim::sym(k == 1 ? sym : std::to_string(k) + "*" + sym);
}

// `x` (of type `in`) as one dim of all its elements, typed `out`: shape
// [-1], exact for any rank and size, symbolic or not.
inline Value flatten(Emitter& E, Value x, const Aval& in, const Aval& out) {
  if (!in.unknown_rank && !out.unknown_rank && in.shape == out.shape) return x;
  return E.op("Reshape", {x, i64s(E, {-1})}, out.with_dtype(in.dtype));
}

namespace detail {

// Reshape's shape for `in` to `shape`, per dim: the static size; else, when
// every symbolic dim is `in`'s dim at that index, 0; else, for a single
// symbolic dim among static ones, -1; else (`runtime`) every symbolic dim
// stays, for its runtime value. 0 and -1 are never mixed with runtime values:
// onnxruntime's graph optimizer turns such a mix into a 0/-1 shape, and -1
// next to a copied dim that is 0 at run time (an empty batch) cannot be
// inferred. With a static 0 (`zero_size`) nothing is coded.
struct ReshapeShape {
  Shape target;
  bool zero_size = false, runtime = false;
};
inline ReshapeShape reshape_shape(const Aval& in, const Shape& shape) {
  ReshapeShape r{shape};
  for (const Dim& d : shape) r.zero_size = r.zero_size || (d.is_static() && d.value == 0);
  if (!r.zero_size) {
    size_t symbolic = 0, copied = 0;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i].is_static()) continue;
      ++symbolic;
      copied += !in.unknown_rank && i < in.shape.size() && in.shape[i] == shape[i];
    }
    const bool codes = symbolic > 0 && (copied == symbolic || symbolic == 1);
    for (Dim& d : r.target)
      if (!d.is_static() && codes) d = Dim(copied == symbolic ? 0 : -1);
  }
  for (const Dim& d : r.target) r.runtime = r.runtime || !d.is_static();
  return r;
}

// Reshape below opset 14 to a shape with a static 0 (no allowzero: a 0 in the
// shape would copy the input's dim): x has no elements, so it is reshaped to
// ones with -1 (inferred as 0) at the first static 0, and expanded to the
// shape (`shape_of()`, the shape's value).
template <typename ShapeOf>
Value reshape_empty(Emitter& E, Value x, const Shape& shape, const Aval& result, ShapeOf shape_of) {
  std::vector<int64_t> ones(shape.size(), 1);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i].is_static() && shape[i].value == 0) { ones[i] = -1; break; }
  Shape unit;
  for (int64_t o : ones) unit.push_back(Dim(o < 0 ? 0 : 1));
  Value u = E.op("Reshape", {x, i64s(E, ones)}, result.with_shape(unit));
  return E.op("Expand", {u, shape_of()}, result);
}

// The shape of `s` as a constant (its dims static: sizes or codes).
inline Value static_shape(Emitter& E, const Shape& s) {
  std::vector<int64_t> v;
  for (const Dim& d : s) v.push_back(d.value);
  return i64s(E, v);
}

// x reshaped to `shape` (`r`: reshape_shape of x's type and `shape`), the
// result typed `result`, when that needs no runtime value (a zero size is then
// a static shape); else kNoValue.
inline Value reshape_constant(Emitter& E, Value x, const Shape& shape, const ReshapeShape& r, const Aval& result) {
  if (r.runtime) return kNoValue;
  if (r.zero_size && E.opset() < 14)
    return reshape_empty(E, x, shape, result, [&] { return static_shape(E, shape); });
  std::vector<Attr> attrs;
  if (r.zero_size) attrs.push_back(Attr::i("allowzero", 1));
  return E.op("Reshape", {x, static_shape(E, r.target)}, result, attrs);
}

// reshape_constant, else the shape's runtime value: below opset 14 (no
// allowzero, and a runtime dim may be 0) x is reshaped into max(shape, 1)
// (never 0), its elements padded with zeros up to that size (padding only
// when x is empty), then sliced to the shape.
inline Value reshape_to(Lowering& L, Value x, const Aval& in, const Shape& shape, const Aval& result) {
  const ReshapeShape r = reshape_shape(in, shape);
  Value c = reshape_constant(L, x, shape, r, result);
  if (c != kNoValue) return c;
  if (L.opset() < 14 && r.zero_size)
    return reshape_empty(L, x, shape, result, [&] { return shape_value(L, shape); });
  if (L.opset() < 14) {
    const int64_t R = static_cast<int64_t>(shape.size());
    const Aval i1(dtype::i64, {1}), iR(dtype::i64, {R}), any = Aval::of_unknown_shape(in.dtype);
    Value target = shape_value(L, r.target);
    Value ones = L.op("Max", {target, i64s(L, {1})}, iR);
    Value total = reduce_over(L, "ReduceProd", ones, {0}, true, i1);
    Value flat = flatten(L, x, in, any);
    Value fill = L.op("Expand", {scalar(L, in.dtype, 0), L.op("Sub", {total, shape_slice(L, flat, 0, 1)}, i1)}, any);
    Value grid = L.op("Reshape", {L.op("Concat", {flat, fill}, any, {Attr::i("axis", 0)}), ones}, any);
    std::vector<int64_t> starts(static_cast<size_t>(R), 0), axes;
    for (int64_t i = 0; i < R; ++i) axes.push_back(i);
    return L.op("Slice", {grid, i64s(L, starts), target, i64s(L, axes)}, result);
  }
  return L.op("Reshape", {x, shape_value(L, r.target)}, result, {Attr::i("allowzero", 1)});
}

}  // namespace detail

// `x` (of type `in`, which may be of unknown shape: nothing is copied then)
// reshaped to `out.shape`. Over any Emitter (a rewrite rule too) when the
// shape needs no runtime value; a Lowering computes symbolic dims.
inline Value reshape(Emitter& E, Value x, const Aval& in, const Aval& out) {
  if (!in.unknown_rank && in.shape == out.shape) return x;
  Value r = detail::reshape_constant(E, x, out.shape, detail::reshape_shape(in, out.shape), out.with_dtype(in.dtype));
  if (r == kNoValue)
    throw Error("reshape " + in.str() + " -> " + out.str() + ": the shape needs the runtime value of a symbolic dim");
  return r;
}
inline Value reshape(Lowering& L, Value x, const Aval& in, const Aval& out) {
  if (!in.unknown_rank && in.shape == out.shape) return x;
  return detail::reshape_to(L, x, in, out.shape, out.with_dtype(in.dtype));
}

// `x` (of type `in`) with its first `count` dims merged into one (rows of
// the rest), typed `out` (which may be of unknown shape). Shape [-1, rest]
// when the rest is static and non-zero (-1 is then exact, 0 rows too), else
// reshape's rules.
inline Value merge_leading(Lowering& L, Value x, const Aval& in, size_t count, const Aval& out) {
  if (in.unknown_rank || count > in.shape.size())
    throw Error("merge_leading: " + in.str() + " has no " + std::to_string(count) + " leading dims");
  const Shape lead(in.shape.begin(), in.shape.begin() + static_cast<std::ptrdiff_t>(count));
  const Shape rest(in.shape.begin() + static_cast<std::ptrdiff_t>(count), in.shape.end());
  if (count == 1) return x;
  std::vector<int64_t> codes = {-1};
  for (const Dim& d : rest) codes.push_back(d.is_static() && d.value > 0 ? d.value : 0);
  if (std::find(codes.begin() + 1, codes.end(), int64_t{0}) == codes.end())
    return L.op("Reshape", {x, i64s(L, codes)}, out.with_dtype(in.dtype));
  Shape merged = {dims_product(lead)};
  merged.insert(merged.end(), rest.begin(), rest.end());
  return detail::reshape_to(L, x, in, merged, out.with_dtype(in.dtype));
}

// `x` (of type `in`) reshaped to `out`, whose first `keep` dims are `in`'s:
// those copied (0, static or not: the shape stays one constant whatever the
// batch), the rest static when it is static and non-zero; else reshape's
// rules.
inline Value reshape_after(Lowering& L, Value x, const Aval& in, size_t keep, const Aval& out) {
  if (!in.unknown_rank && in.shape == out.shape) return x;
  std::vector<int64_t> codes(keep, 0);
  bool fixed = !in.unknown_rank && keep <= in.shape.size() && keep <= out.shape.size();
  for (size_t i = 0; fixed && i < out.shape.size(); ++i) {
    const Dim& d = out.shape[i];
    if (i < keep) fixed = d == in.shape[i];
    else if (d.is_static() && d.value > 0) codes.push_back(d.value);
    else fixed = false;
  }
  if (!fixed) return reshape(L, x, in, out);
  return L.op("Reshape", {x, i64s(L, codes)}, out.with_dtype(in.dtype));
}

// `x` (of rank `rank`) padded along one `axis` by `lo` and `hi` elements
// (int64 values of shape [1] in pad_axis_by, integers in pad_axis) with the
// scalar `value`, giving `out`. The pads are full rank with no `axes` input: onnxruntime 1.32's
// transpose optimizer permutes a Pad's pads as if full rank, ignoring `axes`
// (opset 18), and the session fails ("Gather: indices element out of data
// bounds") once a Transpose meets such a Pad. Constant lo/hi give one
// constant; runtime ones a Concat.
inline Value pad_axis_by(Lowering& L, Value x, int64_t rank, int64_t axis, Value lo, Value hi,
                         Value value, const Aval& out) {
  if (axis < 0) axis += rank;
  std::vector<Value> parts;
  auto zeros = [&](int64_t n) { if (n > 0) parts.push_back(i64s(L, std::vector<int64_t>(n, 0))); };
  zeros(axis);
  parts.push_back(lo);
  zeros(rank - 1);
  parts.push_back(hi);
  zeros(rank - 1 - axis);
  Value pads = L.op("Concat", parts, Aval(dtype::i64, {2 * rank}), {Attr::i("axis", 0)});
  return L.op("Pad", {x, pads, value}, out, {Attr::s("mode", "constant")});
}
inline Value pad_axis(Lowering& L, Value x, int64_t rank, int64_t axis, int64_t lo, int64_t hi,
                      Value value, const Aval& out) {
  if (axis < 0) axis += rank;
  std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
  pads[static_cast<size_t>(axis)] = lo;
  pads[static_cast<size_t>(rank + axis)] = hi;
  return L.op("Pad", {x, i64s(L, pads), value}, out, {Attr::s("mode", "constant")});
}

// BitwiseAnd / BitwiseOr / BitwiseXor / BitwiseNot of the integers `ins`
// giving `out`, as L.op would emit it from opset 18 (the ops' first). Before,
// on the unsigned view (uint32, or uint64 for 64-bit types; a narrower
// value's high bits are dropped by the Cast back): not x = ~0 - x; x & y
// from the products of their bits (BitShift, Mod 2 per bit on a trailing axis
// of w bits, shifted back into place and added in log2 w halvings: the bits
// are disjoint); x | y = x + y - (x & y); x ^ y = x + y - 2 (x & y), all
// wrapping modulo 2^w. Any other op is emitted as is (for lowerings that
// pick their combining op at run time).
inline Value bitwise(Lowering& L, std::string_view op, const std::vector<Value>& ins,
                     const Aval& out) {
  if (L.opset() >= 18 || op.substr(0, 7) != "Bitwise") return L.op(op, ins, out);
  const int64_t w = static_cast<int64_t>(8 * dtype::itemsize(out.dtype));
  const int32_t U = w == 64 ? dtype::u64 : dtype::u32;
  const Aval ua = out.with_dtype(U), any = Aval::of_unknown_shape(U);
  auto widen = [&](Value v) { return cast(L, v, L.aval_of(v), U); };
  auto ucon = [&](std::vector<uint64_t> v) -> Value {
    if (U == dtype::u64) return L.constant(v, {static_cast<int64_t>(v.size())});
    std::vector<uint32_t> n(v.begin(), v.end());
    return L.constant(n, {static_cast<int64_t>(n.size())});
  };
  Value x = widen(ins.at(0));
  Value r;
  if (op == "BitwiseNot") {
    uint64_t ones64 = ~uint64_t{0};
    uint32_t ones32 = ~uint32_t{0};
    Value ones = U == dtype::u64 ? L.constant(U, {}, &ones64, 8) : L.constant(U, {}, &ones32, 4);
    r = L.op("Sub", {ones, x}, ua);
    return cast(L, r, ua, out.dtype);
  }
  Value y = widen(ins.at(1));
  std::vector<uint64_t> ks;
  for (int64_t k = 0; k < w; ++k) ks.push_back(static_cast<uint64_t>(k));
  Value shifts = ucon(ks), two = ucon({2});
  auto bits = [&](Value v) {
    Value col = L.op("Unsqueeze", {v, i64s(L, {-1})}, any);
    return L.op("Mod", {L.op("BitShift", {col, shifts}, any, {Attr::s("direction", "RIGHT")}), two},
                any, {Attr::i("fmod", 0)});
  };
  Value both = L.op("Mul", {bits(x), bits(y)}, any);
  Value placed = L.op("BitShift", {both, shifts}, any, {Attr::s("direction", "LEFT")});
  for (int64_t n = w; n > 1; n /= 2) {
    Value axis = i64s(L, {-1});
    Value lo = L.op("Slice", {placed, i64s(L, {0}), i64s(L, {n / 2}), axis}, any);
    Value hi = L.op("Slice", {placed, i64s(L, {n / 2}), i64s(L, {n}), axis}, any);
    placed = L.op("Add", {lo, hi}, any);
  }
  Value conj = L.op("Squeeze", {placed, i64s(L, {-1})}, ua);
  Value sum = L.op("Add", {x, y}, ua);
  if (op == "BitwiseAnd") r = conj;
  else if (op == "BitwiseOr") r = L.op("Sub", {sum, conj}, ua);
  else if (op == "BitwiseXor") r = L.op("Sub", {sum, L.op("Add", {conj, conj}, ua)}, ua);
  else throw Error("bitwise: " + std::string(op) + " is not a bitwise op");
  return cast(L, r, ua, out.dtype);
}

// ScatterND(data, idx, upd) with `reduction` ("none", "add", "mul", "max",
// "min") giving `out`, in the form the opset allows: the attribute from opset
// 16 (add, mul) or 18 (max, min). Before, a Loop over the index tuples in
// order, each gathering the current slice, combining it with its update and
// writing it back, so duplicates combine one after another as in the
// reduction (8- and 16-bit integers combine in int32 before opset 14). The
// index vector's length must be static.
inline Value scatter_nd_reduce(Lowering& L, Value data, Value idx, Value upd, const Aval& out,
                               std::string_view reduction) {
  const bool attr_form = reduction == "none" ||
                         L.opset() >= (reduction == "add" || reduction == "mul" ? 16 : 18);
  if (attr_form) {
    std::vector<Attr> attrs;
    if (reduction != "none") attrs.push_back(Attr::s("reduction", std::string(reduction)));
    return L.op("ScatterND", {data, idx, upd}, out, attrs);
  }
  const char* op = reduction == "add" ? "Add" : reduction == "mul" ? "Mul"
                   : reduction == "max" ? "Max" : "Min";
  const Aval ia = L.aval_of(idx);
  if (ia.unknown_rank || ia.rank() < 1 || !ia.shape.back().is_static())
    throw Error("scatter_nd_reduce: the index vector's length must be static");
  const int64_t q = ia.shape.back().value, nb = ia.rank() - 1;
  const Aval any_i64 = Aval::of_unknown_shape(dtype::i64), any = Aval::of_unknown_shape(out.dtype);
  // idx as [N, q], upd as [N, its slice dims]: N is the product of the index batch dims.
  Value flat_idx = merge_leading(L, idx, ia, static_cast<size_t>(nb), any_i64);
  Value flat_upd = merge_leading(L, upd, L.aval_of(upd), static_cast<size_t>(nb), any);
  Value n = L.op("Squeeze", {shape_slice(L, flat_idx, 0, 1), i64s(L, {0})}, Aval(dtype::i64, {}));
  const int32_t t = out.dtype;
  const bool narrow = (t == dtype::i8 || t == dtype::u8 || t == dtype::i16 || t == dtype::u16) &&
                      L.opset() < 14;
  const Aval wide = Aval::of_unknown_shape(narrow ? dtype::i32 : t);
  Subgraph g = L.begin_subgraph("scatter_" + std::string(reduction) + "_body");
  Value i = g.input(Aval(dtype::i64, {}), "i");
  Value cond = g.input(Aval(dtype::boolean, {}), "cond_in");
  Value acc = g.input(out, "acc");
  Value at = L.op("Unsqueeze", {i, i64s(L, {0})}, Aval(dtype::i64, {1}));
  Value row = L.op("Gather", {flat_idx, at}, any_i64, {Attr::i("axis", 0)});
  Value u = L.op("Gather", {flat_upd, at}, any, {Attr::i("axis", 0)});
  Value cur = L.op("GatherND", {acc, row}, any);
  Value both = L.op(op, {cast(L, cur, any, wide.dtype), cast(L, u, any, wide.dtype)}, wide);
  Value next = L.op("ScatterND", {acc, row, cast(L, both, wide, t)}, out);
  GraphRef body = g.end({cond, next});
  return L.op_n("Loop", {n, scalar(L, dtype::boolean, 1), data}, {out},
                {Attr::graph("body", body)})[0];
}

// The number of Hillis-Steele steps along a dim of size n: ceil(log2 n), or
// 32 for a symbolic n (exact for n < 2^32).
inline int64_t scan_steps(const Dim& n) {
  int64_t steps = 32;
  if (n.is_static()) for (steps = 0; (int64_t{1} << steps) < n.value; ++steps) {}
  return steps;
}

// Hillis-Steele step k of a scan of `x` (aval `a`) along `axis`: x shifted
// by m = min(2^k, n) toward the end (the start when `reverse`), `identity`
// padded in (m, not 2^k, so the padded tensor stays within 2n). `axes` is
// the int64[1] constant {axis}.
inline Value scan_shift(Lowering& L, Value x, const Aval& a, int64_t axis, bool reverse, Value axes,
                        int64_t k, Value identity) {
  const Dim n = a.shape[static_cast<size_t>(axis)];
  const int64_t s = int64_t{1} << k;
  Value m, neg_m, padded;
  const Aval grown = Aval::of_unknown_shape(a.dtype);
  if (n.is_static()) {
    m = i64s(L, {s});
    neg_m = i64s(L, {-s});
    padded = pad_axis(L, x, a.rank(), axis, reverse ? 0 : s, reverse ? s : 0, identity, grown);
  } else {
    m = L.op("Min", {i64s(L, {s}), dim_value(L, n)}, Aval(dtype::i64, {1}));
    Value zero = i64s(L, {0});
    neg_m = L.op("Neg", {m}, Aval(dtype::i64, {1}));
    padded = pad_axis_by(L, x, a.rank(), axis, reverse ? zero : m, reverse ? m : zero, identity, grown);
  }
  return reverse ? L.op("Slice", {padded, m, i64s(L, {INT64_MAX}), axes}, a)
                 : L.op("Slice", {padded, i64s(L, {0}), neg_m, axes}, a);
}

// Inclusive scan of `x` (aval `a`) along `axis` with the associative
// binary ONNX op `op` (e.g. "Mul", "Max"), whose identity is `identity` (a
// scalar of a.dtype): x = op(x, x shifted by 1, 2, 4, ...) (Hillis-Steele;
// Pad with the identity, Slice), scan_steps() steps. Exact for integer ops,
// which wrap.
inline Value inclusive_scan(Lowering& L, const char* op, Value x, const Aval& a, int64_t axis,
                            bool reverse, Value identity) {
  const int64_t steps = scan_steps(a.shape[static_cast<size_t>(axis)]);
  Value axes = i64s(L, {axis});
  for (int64_t k = 0; k < steps; ++k)
    x = L.op(op, {x, scan_shift(L, x, a, axis, reverse, axes, k, identity)}, a);
  return x;
}

}  // namespace jaxonnx::sdk
