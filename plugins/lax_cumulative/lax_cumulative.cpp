// lax_cumulative: cumsum / cumprod / cummax / cummin / cumlogsumexp (params
// `axis`, `reverse`) as ONNX CumSum or a log-depth scan.
//
// cumsum is CumSum (axis as an input, exclusive=0, reverse as given).
//
// ONNX has no cumulative product / max / min / logsumexp. Those are
// Hillis-Steele inclusive scans along the axis: y = combine(y, y shifted by
// 1, 2, 4, ...), the shift a Pad with the combine's identity and a Slice.
// ceil(log2 n) steps for a static n, 32 for a symbolic n (exact for
// n < 2^32); O(n) memory (each step holds two tensors of x's size).
// - cumprod: Mul (SDK Lowering::inclusive_scan). Integers wrap: types
//   without onnxruntime kernels (all but int32/int64) run in int64, which
//   truncates to the same bits. Floats multiply in a different association
//   than JAX's sequential product: equal within float rounding.
// - cummax/cummin: Max/Min with identity -inf/+inf or the integer type's
//   limit. onnxruntime's elementwise Max/Min propagate NaN, so once a NaN
//   is seen the running value stays NaN, as in JAX (tested). Max/Min lack
//   16-bit and uint64 kernels (and Pad int16): those widen to int32, or map
//   uint64 onto int64 by flipping the top bit (order kept).
// - cumlogsumexp: combine(a, b) = max + log(1 + exp(min - max)), with
//   min - max taken as 0 where min == max so that -inf/-inf gives -inf and
//   +inf/+inf gives +inf; 1000.0 does not overflow. f16/bf16 run in f32.
// - complex operands (carried as float[..., 2], jaxonnx/complex.hpp): cumsum
//   sums the packed form; cumprod scans the parts with the complex product
//   (identity 1 + 0i); cummax/cummin with the lexicographic order JAX uses
//   (real part, then imaginary; identity -inf/+inf in both parts). JAX has
//   no complex cumlogsumexp.
#include <jaxonnx/complex.hpp>
#include <jaxonnx/max_min.hpp>
#include <jaxonnx/plugin.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
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
  return bitwise(L, "BitwiseXor", {x, L.constant(std::vector<uint64_t>{uint64_t{1} << 63}, {})}, u64);
}
Value to_order(Lowering& L, Value x, const Aval& in) {
  if (in.dtype == dtype::u64) return cast(L, flip_top_bit(L, x, in), in, dtype::i64);
  return cast(L, x, in, order_dtype(in.dtype));
}
Value from_order(Lowering& L, Value x, const Aval& in) {
  Aval w = in.with_dtype(order_dtype(in.dtype));
  if (in.dtype == dtype::u64) return flip_top_bit(L, cast(L, x, w, dtype::u64), in);
  return cast(L, x, w, in.dtype);
}

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

// CumSum-11 (before opset 14) has no float16: it sums in float32 then.
Value cumsum(Lowering& L, Value x, const Aval& a, int64_t axis, bool reverse) {
  const int32_t c = a.dtype == dtype::f16 && L.opset() < 14 ? dtype::f32 : a.dtype;
  Value r = L.op("CumSum", {cast(L, x, a, c), scalar(L, dtype::i64, static_cast<double>(axis))},
                 a.with_dtype(c), {Attr::i("exclusive", 0), Attr::i("reverse", reverse ? 1 : 0)});
  return cast(L, r, a.with_dtype(c), a.dtype);
}

// ------------------------------------------------------------------ cumsum --

void lower_cumsum(Lowering& L) {
  Aval in = L.in_aval(0);
  Params p = cum_params(L, in);
  if (complex::is(in.dtype)) {
    // Carried packed (jaxonnx/complex.hpp): summing along a logical axis sums
    // each part.
    L.bind(0, cumsum(L, L.input(0), complex::packed(in), p.axis, p.reverse));
    return;
  }
  int32_t w = wrap_dtype(in.dtype);
  Value r = cumsum(L, cast(L, L.input(0), in, w), in.with_dtype(w), p.axis, p.reverse);
  L.bind(0, cast(L, r, in.with_dtype(w), in.dtype));
}

// The smallest (max) or largest (min) value of order dtype `t`: Max's / Min's identity.
Value extreme(Lowering& L, int32_t t, bool smallest) {
  switch (t) {
    case dtype::f32: case dtype::f64: return scalar(L, t, smallest ? -INFINITY : INFINITY);
#define JXO_LIMIT(DT, T) \
    case DT: return L.constant(std::vector<T>{smallest ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max()}, {});
    JXO_LIMIT(dtype::i8, int8_t) JXO_LIMIT(dtype::i32, int32_t) JXO_LIMIT(dtype::i64, int64_t)
    JXO_LIMIT(dtype::u8, uint8_t)
#undef JXO_LIMIT
    case dtype::boolean: return scalar(L, t, smallest ? 0 : 1);
    default: throw Error(std::string("lax_cumulative: no order identity for ") + dtype::name(t));
  }
}

// ----------------------------------------------------------------- cumprod --

// Hillis-Steele step k along the scan's axis (idioms.hpp's scan_shift).
Value shifted(Lowering& L, Value x, const Aval& a, const Params& p, Value axes, int64_t k, Value identity) {
  return scan_shift(L, x, a, p.axis, p.reverse, axes, k, identity);
}

void lower_complex_cumprod(Lowering& L, const Aval& in, const Params& p) {
  const Aval a = complex::part(in);
  complex::Parts z = complex::split(L, L.input(0), in);
  Value axes = i64s(L, {p.axis}), one = scalar(L, a.dtype, 1), zero = scalar(L, a.dtype, 0);
  for (int64_t k = 0, n = scan_steps(in.shape[static_cast<size_t>(p.axis)]); k < n; ++k)
    z = complex::mul(L, z, {shifted(L, z.re, a, p, axes, k, one), shifted(L, z.im, a, p, axes, k, zero)}, a);
  L.bind(0, complex::pack(L, z, in));
}

void lower_cumprod(Lowering& L) {
  Aval in = L.in_aval(0);
  Params p = cum_params(L, in);
  if (complex::is(in.dtype)) return lower_complex_cumprod(L, in, p);
  int32_t w = wrap_dtype(in.dtype);
  Aval wa = in.with_dtype(w);
  Value x = cast(L, L.input(0), in, w);
  L.bind(0, cast(L, inclusive_scan(L, "Mul", x, wa, p.axis, p.reverse, scalar(L, w, 1)), wa, in.dtype));
}

// ---------------------------------------------------------- cummax/cummin --

// Lexicographic cummax/cummin of a complex operand: each step keeps the
// running value unless the shifted one is larger (smaller).
void lower_complex_cumextremum(Lowering& L, const Aval& in, const Params& p, bool is_max) {
  const Aval a = complex::part(in), mask = a.with_dtype(dtype::boolean);
  const char* beats = is_max ? "Greater" : "Less";
  complex::Parts z = complex::split(L, L.input(0), in);
  Value axes = i64s(L, {p.axis}), identity = scalar(L, a.dtype, is_max ? -INFINITY : INFINITY);
  for (int64_t k = 0, n = scan_steps(in.shape[static_cast<size_t>(p.axis)]); k < n; ++k) {
    complex::Parts s{shifted(L, z.re, a, p, axes, k, identity), shifted(L, z.im, a, p, axes, k, identity)};
    Value take = L.op("Or", {L.op(beats, {s.re, z.re}, mask),
                             L.op("And", {L.op("Equal", {s.re, z.re}, mask), L.op(beats, {s.im, z.im}, mask)}, mask)},
                      mask);
    z = {L.op("Where", {take, s.re, z.re}, a), L.op("Where", {take, s.im, z.im}, a)};
  }
  L.bind(0, complex::pack(L, z, in));
}

void lower_cumextremum(Lowering& L, bool is_max) {
  Aval in = L.in_aval(0);
  Params p = cum_params(L, in);
  if (complex::is(in.dtype)) return lower_complex_cumextremum(L, in, p, is_max);
  int32_t w = order_dtype(in.dtype);
  if (in.dtype == dtype::f16) w = dtype::f32;  // Pad has no float16 kernel
  if (in.dtype == dtype::boolean) w = dtype::u8;
  Aval wa = in.with_dtype(w);
  Value x = in.dtype == dtype::f16 || in.dtype == dtype::boolean ? cast(L, L.input(0), in, w)
                                                                  : to_order(L, L.input(0), in);
  // max_min.hpp: int64 (and uint64 in its order) picks with Where, not onnxruntime's faulty int64 Max/Min.
  Value r = inclusive_max_min_scan(L, is_max, x, wa, p.axis, p.reverse, extreme(L, w, is_max));
  if (in.dtype == dtype::f16 || in.dtype == dtype::boolean) {
    L.bind(0, cast(L, r, wa, in.dtype));
    return;
  }
  L.bind(0, from_order(L, r, in));
}

// ------------------------------------------------------------ cumlogsumexp --

// logaddexp of a and b (aval `a`), exact at infinities (see the header).
Value logaddexp(Lowering& L, Value x, Value y, const Aval& a) {
  const Aval b = a.with_dtype(dtype::boolean);
  Value hi = L.op("Max", {x, y}, a), lo = L.op("Min", {x, y}, a);
  Value d = L.op("Where", {L.op("Equal", {hi, lo}, b), scalar(L, a.dtype, 0), L.op("Sub", {lo, hi}, a)}, a);
  Value l = L.op("Log", {L.op("Add", {scalar(L, a.dtype, 1), L.op("Exp", {d}, a)}, a)}, a);
  return L.op("Add", {hi, l}, a);
}

void lower_cumlogsumexp(Lowering& L) {
  Aval in = L.in_aval(0);
  if (!dtype::is_float(in.dtype))
    L.fail(std::string("cumlogsumexp takes a floating operand, got ") + dtype::name(in.dtype));
  Params p = cum_params(L, in);
  // f16/bf16 accumulate in float32.
  int32_t w = (in.dtype == dtype::f64) ? dtype::f64 : dtype::f32;
  Aval wa = in.with_dtype(w);
  Value x = cast(L, L.input(0), in, w);
  // The Hillis-Steele steps of Lowering::inclusive_scan, with logaddexp as
  // the combine (several ops, so not a single ONNX op type).
  Value axes = i64s(L, {p.axis}), identity = scalar(L, w, -INFINITY);
  for (int64_t k = 0, n = scan_steps(in.shape[static_cast<size_t>(p.axis)]); k < n; ++k)
    x = logaddexp(L, x, shifted(L, x, wa, p, axes, k, identity), wa);
  L.bind(0, cast(L, x, wa, in.dtype));
}

}  // namespace

JAXONNX_PLUGIN("lax_cumulative", "0.1.0") {
  plugin.primitive("cumsum", lower_cumsum).emits({"CumSum", "Cast"}).doc(onnx_doc("CumSum"));
  plugin.primitive("cumprod", lower_cumprod)
      .emits({"Pad", "Slice", "Mul", "Concat", "Neg", "Cast",
              "Gather", "Unsqueeze", "Sub", "Add"})  // complex: the parts' product
      .emits_shape_ops()
      .summary("log-depth scan of Mul (Pad, Slice); complex: of the complex product");
  plugin.primitive("cummax", [](Lowering& L) { lower_cumextremum(L, true); })
      .emits({"Pad", "Slice", "Max", "Concat", "Neg", "Cast", "BitwiseXor",
              "Gather", "Unsqueeze", "Greater", "Equal", "And", "Or", "Where"})  // complex: lexicographic
      .emits_shape_ops()
      .summary("log-depth scan of Max (Pad, Slice)");
  plugin.primitive("cummin", [](Lowering& L) { lower_cumextremum(L, false); })
      .emits({"Pad", "Slice", "Min", "Concat", "Neg", "Cast", "BitwiseXor",
              "Gather", "Unsqueeze", "Less", "Equal", "And", "Or", "Where"})  // complex: lexicographic
      .emits_shape_ops()
      .summary("log-depth scan of Min (Pad, Slice)");
  plugin.primitive("cumlogsumexp", lower_cumlogsumexp)
      .emits({"Pad", "Slice", "Max", "Min", "Equal", "Sub", "Where", "Exp", "Add", "Log", "Concat", "Neg",
              "Cast"})
      .emits_shape_ops()
      .summary("log-depth scan of logaddexp (Pad, Slice)");
}
