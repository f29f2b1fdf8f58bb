// lax_cumulative: cumsum / cumprod / cummax / cummin / cumlogsumexp (params
// `axis`, `reverse`) as ONNX CumSum or a masked pairwise reduction.
//
// cumsum is CumSum (axis as an input, exclusive=0, reverse as given).
//
// ONNX has no cumulative product / max / min / logsumexp, and no Loop is
// available to plugins yet. Those are built exactly, for static and symbolic
// lengths n along the axis, from the n x n pairwise tensor
//   P[.., i, j, ..] = x[.., j, ..] if j <= i (j >= i when reverse) else fill
// reduced over j with ReduceProd / ReduceMax / ReduceMin. The mask comes from
// Range(0, n) compared with itself. This costs O(n^2) memory and work along
// the axis (times the other dims): fine for moderate n, a Loop would be
// O(n) once the ABI offers subgraphs.
//
// Semantics kept from JAX:
// - cummax/cummin: once a NaN is seen the running value stays NaN, while
//   onnxruntime's ReduceMax/ReduceMin skip NaN; a running "NaN seen" flag
//   (CumSum of IsNaN) restores it. The fill of masked-out cells is x[i] itself
//   (always part of the prefix), so no dtype-specific identity is needed.
// - cumlogsumexp: computed as m + log(sum(exp(x_j - m))) with m the running
//   max, so 1000.0 does not overflow; m is replaced by 0 where it is +-inf or
//   NaN so that all -inf gives -inf, +inf gives +inf and NaN gives NaN.
// - integer cumsum/cumprod wrap: types without onnxruntime kernels (all but
//   int32/int64) are computed in int64, which truncates to the same bits.
//   onnxruntime's integer ReduceProd goes through double and saturates, so an
//   integer cumprod is instead a log-depth scan of Mul (Hillis-Steele):
//   y *= y shifted by 1, 2, 4, ... along the axis (Pad with 1s, then Slice).
//   ceil(log2 n) steps for a static n; for a symbolic n, 32 steps, exact for
//   n < 2^32.
#include <jaxonnx/plugin.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

// The dtype a wrapping sum/product of `t` is computed in: onnxruntime's CumSum
// and ReduceProd have int32/int64/float kernels only.
int32_t wrap_dtype(int32_t t) {
  if (t == dtype::i32 || t == dtype::i64 || t == dtype::f32 || t == dtype::f64 || t == dtype::f16)
    return t;
  if (t == dtype::bf16) return dtype::f32;
  return dtype::i64;
}

// The dtype an order-based reduction of `t` runs in: onnxruntime's ReduceMax /
// ReduceMin lack int16/uint16/uint32/uint64 kernels; widening keeps the order.
// uint64 becomes int64 after flipping its top bit (see to_order).
int32_t order_dtype(int32_t t) {
  switch (t) {
    case dtype::i16: case dtype::u16: return dtype::i32;
    case dtype::u32: case dtype::u64: return dtype::i64;
    case dtype::bf16: return dtype::f32;
    default: return t;
  }
}

// x (of type `in`) in order_dtype, and back. Flipping the top bit maps uint64
// [0, 2^64) onto int64 [-2^63, 2^63) monotonically.
Value flip_top_bit(Lowering& L, Value x, const Aval& u64) {
  return L.op("BitwiseXor", {x, L.constant(std::vector<uint64_t>{uint64_t{1} << 63}, {})}, u64);
}
Value to_order(Lowering& L, Value x, const Aval& in) {
  if (in.dtype == dtype::u64) return L.cast(flip_top_bit(L, x, in), in, dtype::i64);
  return L.cast(x, in, order_dtype(in.dtype));
}
Value from_order(Lowering& L, Value x, const Aval& in) {
  Aval w = in.with_dtype(order_dtype(in.dtype));
  if (in.dtype == dtype::u64) return flip_top_bit(L, L.cast(x, w, dtype::u64), in);
  return L.cast(x, w, in.dtype);
}

Shape inserted(Shape s, int64_t at, Dim d) {
  s.insert(s.begin() + at, d);
  return s;
}

// The pairwise layout of one cumulative equation: x of rank r, cumulative
// axis a, turned into [.., i, j, ..] with i at a and j at a + 1.
struct Pairwise {
  Lowering& L;
  Aval in;
  int64_t axis;
  bool reverse;
  Value mask;  // bool [n, n, 1, ...] broadcasting against [.., n, n, ..]

  Pairwise(Lowering& L_, const Aval& in_, int64_t axis_, bool reverse_)
      : L(L_), in(in_), axis(axis_), reverse(reverse_) {
    const Dim n = in.shape[static_cast<size_t>(axis)];
    Value len = n.is_static() ? L.scalar(dtype::i64, static_cast<double>(n.value))
                              : L.op("Squeeze", {L.dim_value(n), L.i64s({0})}, Aval(dtype::i64, {}));
    Value r = L.op("Range", {L.scalar(dtype::i64, 0), len, L.scalar(dtype::i64, 1)},
                   Aval(dtype::i64, {n}));
    Value col = L.op("Unsqueeze", {r, L.i64s({1})}, Aval(dtype::i64, {n, 1}));
    // mask[i, j] = j <= i (prefix) or j >= i (suffix when reverse).
    mask = L.op(reverse ? "GreaterOrEqual" : "LessOrEqual", {r, col}, Aval(dtype::boolean, {n, n}));
    std::vector<int64_t> trailing;
    for (int64_t k = axis + 1; k < in.rank(); ++k) trailing.push_back(k - axis + 1);
    if (!trailing.empty()) {
      Shape s = {n, n};
      s.resize(2 + trailing.size(), Dim(1));
      mask = L.op("Unsqueeze", {mask, L.i64s(trailing)}, Aval(dtype::boolean, s));
    }
  }

  Shape pair_shape() const { return inserted(in.shape, axis, in.shape[static_cast<size_t>(axis)]); }
  // v as the j operand [.., 1, n, ..] or the i operand [.., n, 1, ..].
  Value as_j(Value v, int32_t dt) {
    return L.op("Unsqueeze", {v, L.i64s({axis})}, Aval(dt, inserted(in.shape, axis, 1)));
  }
  Value as_i(Value v, int32_t dt) {
    return L.op("Unsqueeze", {v, L.i64s({axis + 1})}, Aval(dt, inserted(in.shape, axis + 1, 1)));
  }
  // Where(mask, vj, fill) over the pairwise shape.
  Value select(Value vj, Value fill, int32_t dt) {
    return L.op("Where", {mask, vj, fill}, Aval(dt, pair_shape()));
  }
  // Reduces the pairwise tensor over j back to x's shape.
  Value reduce_j(const char* op, Value p, int32_t dt) {
    return L.op(op, {p, L.i64s({axis + 1})}, Aval(dt, in.shape), {Attr::i("keepdims", 0)});
  }
};

struct Params {
  int64_t axis;
  bool reverse;
};

Params cum_params(Lowering& L, const Aval& in) {
  int64_t axis = L.param("axis").as_int();
  if (axis < 0) axis += in.rank();
  if (axis < 0 || axis >= in.rank())
    L.fail("param 'axis' = " + std::to_string(axis) + " is out of range for rank " +
           std::to_string(in.rank()));
  return {axis, L.param("reverse").as_bool()};
}

Value cumsum(Lowering& L, Value x, const Aval& a, int64_t axis, bool reverse) {
  return L.op("CumSum", {x, L.scalar(dtype::i64, static_cast<double>(axis))}, a,
              {Attr::i("exclusive", 0), Attr::i("reverse", reverse ? 1 : 0)});
}

// ------------------------------------------------------------------ cumsum --

void lower_cumsum(Lowering& L) {
  Aval in = L.in_aval(0);
  Params p = cum_params(L, in);
  int32_t w = wrap_dtype(in.dtype);
  Value r = cumsum(L, L.cast(L.input(0), in, w), in.with_dtype(w), p.axis, p.reverse);
  L.bind(0, L.cast(r, in.with_dtype(w), in.dtype));
}

// ----------------------------------------------------------------- cumprod --

void lower_cumprod(Lowering& L) {
  Aval in = L.in_aval(0);
  Params p = cum_params(L, in);
  int32_t w = wrap_dtype(in.dtype);
  Value x = L.cast(L.input(0), in, w);
  if (dtype::is_int(in.dtype)) {
    Aval wa = in.with_dtype(w);
    L.bind(0, L.cast(L.inclusive_scan("Mul", x, wa, p.axis, p.reverse, L.scalar(w, 1)), wa, in.dtype));
    return;
  }
  Pairwise pw(L, in, p.axis, p.reverse);
  Value prod = pw.reduce_j("ReduceProd", pw.select(pw.as_j(x, w), L.scalar(w, 1), w), w);
  L.bind(0, L.cast(prod, in.with_dtype(w), in.dtype));
}

// ---------------------------------------------------------- cummax/cummin --

void lower_cumextremum(Lowering& L, const char* op) {
  Aval in = L.in_aval(0);
  Params p = cum_params(L, in);
  int32_t w = order_dtype(in.dtype);
  Aval wa = in.with_dtype(w);
  Pairwise pw(L, in, p.axis, p.reverse);
  Value x = to_order(L, L.input(0), in);
  Value r = pw.reduce_j(op, pw.select(pw.as_j(x, w), pw.as_i(x, w), w), w);
  if (dtype::is_float(in.dtype)) {
    // NaN seen so far (in the scan direction) -> NaN.
    Aval flags = in.with_dtype(dtype::boolean);
    Value isnan = L.cast(L.op("IsNaN", {x}, flags), flags, dtype::i32);
    Value seen = L.op("Greater", {cumsum(L, isnan, in.with_dtype(dtype::i32), p.axis, p.reverse),
                                  L.scalar(dtype::i32, 0)}, flags);
    r = L.op("Where", {seen, L.scalar(w, NAN), r}, wa);
  }
  L.bind(0, from_order(L, r, in));
}

// ------------------------------------------------------------ cumlogsumexp --

void lower_cumlogsumexp(Lowering& L) {
  Aval in = L.in_aval(0);
  if (!dtype::is_float(in.dtype))
    L.fail(std::string("cumlogsumexp takes a floating operand, got ") + dtype::name(in.dtype));
  Params p = cum_params(L, in);
  // f16/bf16 accumulate in float32.
  int32_t w = (in.dtype == dtype::f64) ? dtype::f64 : dtype::f32;
  Aval wa = in.with_dtype(w);
  Aval pair(w, inserted(in.shape, p.axis, in.shape[static_cast<size_t>(p.axis)]));
  Pairwise pw(L, in, p.axis, p.reverse);
  Value x = L.cast(L.input(0), in, w);
  Value xj = pw.as_j(x, w);
  // Running max m; use 0 where m is not finite (m - m is 0 only for finite m).
  Value m = pw.reduce_j("ReduceMax", pw.select(xj, pw.as_i(x, w), w), w);
  Value finite =
      L.op("Equal", {L.op("Sub", {m, m}, wa), L.scalar(w, 0)}, in.with_dtype(dtype::boolean));
  Value shift = L.op("Where", {finite, m, L.scalar(w, 0)}, wa);
  Value e = L.op("Exp", {L.op("Sub", {xj, pw.as_i(shift, w)}, pair)}, pair);
  Value sum = pw.reduce_j("ReduceSum", pw.select(e, L.scalar(w, 0), w), w);
  Value r = L.op("Add", {L.op("Log", {sum}, wa), shift}, wa);
  L.bind(0, L.cast(r, wa, in.dtype));
}

}  // namespace

JAXONNX_PLUGIN("lax_cumulative", "0.1.0") {
  plugin.primitive("cumsum", lower_cumsum).emits({"CumSum", "Cast"}).doc(onnx_doc("CumSum"));
  plugin.primitive("cumprod", lower_cumprod)
      .emits({"Range", "Unsqueeze", "Squeeze", "LessOrEqual", "GreaterOrEqual", "Where", "ReduceProd",
              "Pad", "Slice", "Mul", "Concat", "Neg", "Cast"})
      .emits_shape_ops()
      .doc(onnx_doc("ReduceProd"));
  plugin.primitive("cummax", [](Lowering& L) { lower_cumextremum(L, "ReduceMax"); })
      .emits({"Range", "Unsqueeze", "Squeeze", "LessOrEqual", "GreaterOrEqual", "Where", "ReduceMax",
              "IsNaN", "CumSum", "Greater", "Cast", "BitwiseXor"})
      .emits_shape_ops()
      .doc(onnx_doc("ReduceMax"));
  plugin.primitive("cummin", [](Lowering& L) { lower_cumextremum(L, "ReduceMin"); })
      .emits({"Range", "Unsqueeze", "Squeeze", "LessOrEqual", "GreaterOrEqual", "Where", "ReduceMin",
              "IsNaN", "CumSum", "Greater", "Cast", "BitwiseXor"})
      .emits_shape_ops()
      .doc(onnx_doc("ReduceMin"));
  plugin.primitive("cumlogsumexp", lower_cumlogsumexp)
      .emits({"Range", "Unsqueeze", "Squeeze", "LessOrEqual", "GreaterOrEqual", "Where", "ReduceMax",
              "ReduceSum", "Equal", "Sub", "Exp", "Log", "Add", "Cast"})
      .emits_shape_ops()
      .doc(onnx_doc("ReduceLogSumExp"));
}
