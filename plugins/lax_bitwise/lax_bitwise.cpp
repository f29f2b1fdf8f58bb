// lax_bitwise: JAX's logical and bitwise integer primitives, and bitcast_convert_type.
//
// not / and / or / xor: on bool, ONNX Not / And / Or / Xor; on integers,
// BitwiseNot / BitwiseAnd / BitwiseOr / BitwiseXor (opset 18), which
// onnxruntime runs for every width, signed and unsigned.
//
// shift_left / shift_right_logical / shift_right_arithmetic: ONNX BitShift is
// unsigned-only (onnxruntime has uint8/32/64 kernels, no uint16) and undefined
// for amounts >= the bit width. XLA defines those: shift_left and
// shift_right_logical give 0, shift_right_arithmetic fills with the sign
// (0 or -1); a negative amount counts as a huge unsigned one. Shifts run on
// the unsigned view (onnxruntime's Cast wraps modulo 2^n, tested), 16-bit
// values through uint32, with the amount clamped below the width and the
// out-of-range lanes zeroed. shift_right_arithmetic of an unsigned type
// shifts its two's complement pattern, as XLA does (uint8 200 >> 1 == 228).
//
// population_count / clz: no ONNX op; SWAR popcount on the unsigned view, and
// clz = width - popcount(x with its top bit smeared rightwards).
//
// bitcast_convert_type: no ONNX op. Integer <-> integer is a wrapping Cast;
// width changes split / join little-endian chunks with BitShift. float32 and
// float64 <-> integer bits are computed exactly with IEEE arithmetic only
// (scaling by a power of two is exact): decoding multiplies the significand by
// 2^exponent taken from two small tables; encoding normalizes |x| into [1, 2)
// by binary steps, which yields the exponent, then reads the mantissa as an
// integer. Zeros of both signs, subnormals and infinities are exact. A NaN's
// sign and payload are not observable in ONNX: every NaN encodes as the
// canonical quiet NaN (0x7FC00000 / 0x7FF8000000000000) and bits of any NaN
// decode to a NaN. float16 and bfloat16 go through float32, which holds each
// of their values exactly: their bits are computed by the same arithmetic with
// their own field widths (float32 -> bits), and bits decode to the float32 of
// the same value, then Cast down (exact: the value is representable). Their
// NaN encodes as the canonical quiet NaN (0x7E00 / 0x7FC0); bits of a NaN
// decode to a NaN with the sign and payload lost. bool is refused.
#include <jaxonnx/plugin.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

int bits_of(int32_t t) { return static_cast<int>(dtype::itemsize(t)) * 8; }

int32_t unsigned_of_width(int bits) {
  switch (bits) {
    case 8: return dtype::u8;
    case 16: return dtype::u16;
    case 32: return dtype::u32;
    default: return dtype::u64;
  }
}

int32_t signed_of_width(int bits) {
  switch (bits) {
    case 8: return dtype::i8;
    case 16: return dtype::i16;
    case 32: return dtype::i32;
    default: return dtype::i64;
  }
}

// The unsigned type onnxruntime's BitShift runs on for a `bits`-wide value
// (it has no uint16 kernel, so 16-bit values widen to uint32).
int32_t shift_type(int bits) { return bits == 16 ? dtype::u32 : unsigned_of_width(bits); }

template <typename T> Value typed_ints(Lowering& L, const std::vector<uint64_t>& v, bool scalar) {
  std::vector<T> data;
  for (uint64_t x : v) data.push_back(static_cast<T>(x));  // keeps the low bits (two's complement)
  std::vector<int64_t> dims;
  if (!scalar) dims.push_back(static_cast<int64_t>(v.size()));
  return L.constant(dtype::of<T>(), dims, data.data(), data.size() * sizeof(T));
}

// An integer constant of dtype `dt` holding the low bits of `v` (rank 0 when
// `scalar`, else 1-D). sdk::scalar goes through double, which would round
// 64-bit masks.
Value int_const(Lowering& L, int32_t dt, const std::vector<uint64_t>& v, bool scalar) {
  switch (dt) {
    case dtype::i8: return typed_ints<int8_t>(L, v, scalar);
    case dtype::i16: return typed_ints<int16_t>(L, v, scalar);
    case dtype::i32: return typed_ints<int32_t>(L, v, scalar);
    case dtype::i64: return typed_ints<int64_t>(L, v, scalar);
    case dtype::u8: return typed_ints<uint8_t>(L, v, scalar);
    case dtype::u16: return typed_ints<uint16_t>(L, v, scalar);
    case dtype::u32: return typed_ints<uint32_t>(L, v, scalar);
    case dtype::u64: return typed_ints<uint64_t>(L, v, scalar);
    default: L.fail(std::string("no integer constant of dtype ") + dtype::name(dt));
  }
}
Value int_scalar(Lowering& L, int32_t dt, uint64_t v) { return int_const(L, dt, {v}, true); }

Value shift(Lowering& L, Value x, Value amount, const Aval& out, const char* direction) {
  return L.op("BitShift", {x, amount}, out, {Attr::s("direction", direction)});
}

// x (aval a, an integer) as the unsigned BitShift type of its width,
// zero-extended (int16 goes through uint16 so it does not sign-extend).
Value unsigned_view(Lowering& L, Value x, const Aval& a) {
  int n = bits_of(a.dtype);
  Value u = cast(L, x, a, unsigned_of_width(n));
  return cast(L, u, a.with_dtype(unsigned_of_width(n)), shift_type(n));
}

// Where(cond, v, 0). onnxruntime's Where has no uint64 kernel: multiply by the
// 0/1 mask there instead.
Value zero_unless(Lowering& L, Value cond, const Aval& cond_aval, Value v, const Aval& a) {
  if (a.dtype == dtype::u64)
    return L.op("Mul", {v, cast(L, cond, cond_aval, dtype::u64)}, a);
  return L.op("Where", {cond, v, int_scalar(L, a.dtype, 0)}, a);
}

// ------------------------------------------------------- logical / bitwise --

void lower_logical(Lowering& L, const char* logical, const char* bitwise) {
  Aval out = L.out_aval(0);
  L.bind(0, out.dtype == dtype::boolean ? L.op(logical, L.inputs(), out)
                                         : jaxonnx::sdk::bitwise(L, bitwise, L.inputs(), out));
}

// ------------------------------------------------------------------ shifts --

// shift_left / shift_right_logical: BitShift on the unsigned view by
// min(s, n - 1), then 0 where s (as unsigned) >= n.
void lower_logical_shift(Lowering& L, const char* direction) {
  Aval xa = L.in_aval(0), sa = L.in_aval(1), out = L.out_aval(0);
  int n = bits_of(out.dtype);
  int32_t W = shift_type(n);
  Value x = unsigned_view(L, L.input(0), xa);
  // A direct Cast suffices for the amount: sign extension keeps a negative
  // amount >= n, and zero extension keeps an unsigned one.
  Value s = cast(L, L.input(1), sa, W);
  Aval swa = sa.with_dtype(W), ra = out.with_dtype(W), in_range_aval = sa.with_dtype(dtype::boolean);
  Value in_range = L.op("Less", {s, int_scalar(L, W, n)}, in_range_aval);
  Value amount = L.op("Min", {s, int_scalar(L, W, n - 1)}, swa);
  Value r = shift(L, x, amount, ra, direction);
  r = zero_unless(L, in_range, in_range_aval, r, ra);
  L.bind(0, cast(L, r, ra, out.dtype));  // truncating back to n bits wraps like XLA
}

// shift_right_arithmetic on the signed view: with fill = (x < 0 ? -1 : 0),
// x >> s == fill ^ ((x ^ fill) >>> s). x ^ fill is nonnegative, so its
// logical shift by n - 1 is already 0: clamping the amount gives XLA's sign
// fill for out-of-range amounts without a mask.
void lower_shift_right_arithmetic(Lowering& L) {
  Aval xa = L.in_aval(0), sa = L.in_aval(1), out = L.out_aval(0);
  int n = bits_of(out.dtype);
  int32_t S = signed_of_width(n), W = shift_type(n);
  Aval xs_aval = xa.with_dtype(S), neg_aval = xa.with_dtype(dtype::boolean);
  Value x = cast(L, L.input(0), xa, S);  // unsigned types shift their two's complement pattern
  Value neg = L.op("Less", {x, int_scalar(L, S, 0)}, neg_aval);
  Value fill = L.op("Neg", {cast(L, neg, neg_aval, S)}, xs_aval);
  Value t = cast(L, bitwise(L, "BitwiseXor", {x, fill}, xs_aval), xs_aval, W);
  Value s = cast(L, L.input(1), sa, W);
  Value amount = L.op("Min", {s, int_scalar(L, W, n - 1)}, sa.with_dtype(W));
  Value r = cast(L, shift(L, t, amount, out.with_dtype(W), "RIGHT"), out.with_dtype(W), S);
  r = bitwise(L, "BitwiseXor", {r, fill}, out.with_dtype(S));
  L.bind(0, cast(L, r, out.with_dtype(S), out.dtype));
}

// ------------------------------------------------------ popcount / clz --

// SWAR population count of the unsigned BitShift-typed value x (aval a).
Value popcount(Lowering& L, Value x, const Aval& a) {
  int n = bits_of(a.dtype);
  auto c = [&](uint64_t v) { return int_scalar(L, a.dtype, v); };
  auto band = [&](Value v, uint64_t mask) { return bitwise(L, "BitwiseAnd", {v, c(mask)}, a); };
  auto shr = [&](Value v, int k) { return shift(L, v, c(static_cast<uint64_t>(k)), a, "RIGHT"); };
  // Counts of 2-bit, then 4-bit, then 8-bit fields.
  x = L.op("Sub", {x, band(shr(x, 1), 0x5555555555555555ull)}, a);
  x = L.op("Add", {band(x, 0x3333333333333333ull), band(shr(x, 2), 0x3333333333333333ull)}, a);
  x = band(L.op("Add", {x, shr(x, 4)}, a), 0x0F0F0F0F0F0F0F0Full);
  // Sum the bytes into the top byte (the multiply wraps modulo 2^n).
  if (n > 8) x = shr(L.op("Mul", {x, c(0x0101010101010101ull)}, a), n - 8);
  return x;
}

// The unsigned type bit counts run in: shift_type, but uint32 for 8-bit
// values before opset 14 (Add/Sub/Mul have no uint8 form there); the
// zero-extended value has the same bits.
int32_t count_type(Lowering& L, int n) {
  int32_t W = shift_type(n);
  return W == dtype::u8 && L.opset() < 14 ? dtype::u32 : W;
}

Value counted_view(Lowering& L, Value x, const Aval& a) {
  int n = bits_of(a.dtype);
  return cast(L, unsigned_view(L, x, a), a.with_dtype(shift_type(n)), count_type(L, n));
}

void lower_population_count(Lowering& L) {
  Aval a = L.in_aval(0), out = L.out_aval(0);
  Aval wa = a.with_dtype(count_type(L, bits_of(a.dtype)));
  Value r = popcount(L, counted_view(L, L.input(0), a), wa);
  L.bind(0, cast(L, r, wa, out.dtype));
}

// clz(x) = n - popcount(x | x >> 1 | x >> 2 | ...): smearing sets every bit
// below the leading one. Zero-extended 16-bit values have nothing above bit 15.
void lower_clz(Lowering& L) {
  Aval a = L.in_aval(0), out = L.out_aval(0);
  int n = bits_of(a.dtype);
  Aval wa = a.with_dtype(count_type(L, n));
  Value x = counted_view(L, L.input(0), a);
  for (int k = 1; k < n; k *= 2)
    x = bitwise(L, "BitwiseOr", {x, shift(L, x, int_scalar(L, wa.dtype, k), wa, "RIGHT")}, wa);
  Value r = L.op("Sub", {int_scalar(L, wa.dtype, n), popcount(L, x, wa)}, wa);
  L.bind(0, cast(L, r, wa, out.dtype));
}

// ---------------------------------------------------------------- bitcast --

struct FloatFormat {
  int bits, mbits, bias;
  int emax() const { return (1 << (bits - 1 - mbits)) - 1; }  // the all-ones exponent
};

FloatFormat format_of(int32_t t) {
  switch (t) {
    case dtype::f16: return {16, 10, 15};
    case dtype::bf16: return {16, 7, 127};
    case dtype::f32: return {32, 23, 127};
    default: return {64, 52, 1023};
  }
}

bool is_half(int32_t t) { return t == dtype::f16 || t == dtype::bf16; }

// A 1-D float constant of dtype t (float32 or float64).
Value float_table(Lowering& L, int32_t t, const std::vector<double>& v) {
  if (t == dtype::f64) return L.constant(v, {static_cast<int64_t>(v.size())});
  std::vector<float> f(v.begin(), v.end());  // exact: every entry is a float32 power of two
  return L.constant(f, {static_cast<int64_t>(f.size())});
}

// The float of dtype F (float32 or float64) whose bits in format f (F's own,
// or a 16-bit format when F is float32) are the unsigned integer u (aval a,
// uint32 or uint64): sign * significand * 2^(max(e, 1) - bias - mbits), with the
// implicit leading 1 only when e > 0. The significand converts exactly, and
// multiplying by exact powers of two is exact when the result is
// representable, which it is (subnormals included).
Value float_from_bits(Lowering& L, Value u, const Aval& a, int32_t F, FloatFormat f) {
  int32_t W = a.dtype;
  Aval fa = a.with_dtype(F), ia = a.with_dtype(dtype::i64), ba = a.with_dtype(dtype::boolean);
  Value e = bitwise(L, "BitwiseAnd", {shift(L, u, int_scalar(L, W, f.mbits), a, "RIGHT"), int_scalar(L, W, f.emax())}, a);
  Value m = bitwise(L, "BitwiseAnd", {u, int_scalar(L, W, (uint64_t{1} << f.mbits) - 1)}, a);
  Value ei = cast(L, e, a, dtype::i64);
  Value mf = cast(L, m, a, F);
  Value normal = L.op("Greater", {ei, int_scalar(L, dtype::i64, 0)}, ba);
  Value sig = L.op("Where", {normal, L.op("Add", {mf, scalar(L, F, std::ldexp(1.0, f.mbits))}, fa), mf}, fa);
  // 2^(j + 1 - bias - mbits) with j = max(e, 1) - 1, as 2^(j % 64) * 2^(64 (j / 64) + 1 - bias - mbits):
  // two small tables, multiplied in this order so the first product stays exact.
  Value j = L.op("Sub", {L.op("Max", {ei, int_scalar(L, dtype::i64, 1)}, ia), int_scalar(L, dtype::i64, 1)}, ia);
  std::vector<double> lo, hi;
  for (int k = 0; k < 64; ++k) lo.push_back(std::ldexp(1.0, k));
  for (int h = 0; h <= (f.emax() - 1) / 64; ++h) hi.push_back(std::ldexp(1.0, 64 * h + 1 - f.bias - f.mbits));
  Value lo_j = L.op("Gather", {float_table(L, F, lo), bitwise(L, "BitwiseAnd", {j, int_scalar(L, dtype::i64, 63)}, ia)}, fa);
  Value hi_j = L.op("Gather", {float_table(L, F, hi), L.op("Div", {j, int_scalar(L, dtype::i64, 64)}, ia)}, fa);
  Value v = L.op("Mul", {L.op("Mul", {sig, lo_j}, fa), hi_j}, fa);
  // The all-ones exponent: infinity, or NaN when the mantissa is nonzero.
  Value special = L.op("Equal", {ei, int_scalar(L, dtype::i64, static_cast<uint64_t>(f.emax()))}, ba);
  Value is_inf = L.op("Equal", {m, int_scalar(L, W, 0)}, ba);
  Value inf_or_nan = L.op("Where", {is_inf, scalar(L, F, INFINITY), scalar(L, F, NAN)}, fa);
  v = L.op("Where", {special, inf_or_nan, v}, fa);
  // The sign by a factor of -1 or 1: onnxruntime's Where turns a selected -0.0 into +0.0 (tested).
  Value neg = L.op("GreaterOrEqual", {u, int_scalar(L, W, uint64_t{1} << (f.bits - 1))}, ba);
  return L.op("Mul", {v, L.op("Where", {neg, scalar(L, F, -1.0), scalar(L, F, 1.0)}, fa)}, fa);
}

// The bits in format f (a's own, or a 16-bit format holding x's values when a
// is float32) of float x (aval a, float32 or float64) in the low bits of an
// int64 (for float64, its two's complement view).
//
// Work in float64 (float32 -> float64 is exact) on |x|. First lift |x| to
// >= 1, then binary steps scale it down into [1, 2); E + offset is the
// exponent e they took out. Normal: mantissa = (|x| 2^-e - 1) 2^mbits,
// biased exponent e + bias. Subnormal (e < 1 - bias) and zero: mantissa =
// |x| 2^(bias - 1 + mbits), biased exponent 0. Every step is exact: the factors and
// thresholds are powers of two and nothing leaves float64's range.
Value float_to_bits(Lowering& L, Value x, const Aval& a, FloatFormat f) {
  const int32_t D = dtype::f64, I = dtype::i64;
  Aval da = a.with_dtype(D), ia = a.with_dtype(I), ba = a.with_dtype(dtype::boolean);
  Value ax = L.op("Abs", {x}, a);
  Value ad0 = cast(L, ax, a, D);
  Value ad = ad0, E = kNoValue;
  // One step: where cond, ad *= 2^scale and E += de.
  auto step = [&](Value cond, int scale, int64_t de) {
    ad = L.op("Where", {cond, L.op("Mul", {ad, scalar(L, D, std::ldexp(1.0, scale))}, da), ad}, da);
    Value de_v = int_scalar(L, I, static_cast<uint64_t>(de));
    E = E == kNoValue ? L.op("Where", {cond, de_v, int_scalar(L, I, 0)}, ia)
                      : L.op("Where", {cond, L.op("Add", {E, de_v}, ia), E}, ia);
  };
  int need = f.bias - 1 + f.mbits;  // the smallest subnormal is 2^-need
  int offset = 0, bound = 0;        // after the lift, |x| < 2^bound
  if (a.dtype == dtype::f32) {
    // Every float32 times 2^149 is a float64 in [1, 2^277) (float16: 2^24
    // into [1, 2^40); bfloat16: 2^133 into [1, 2^261)).
    ad = L.op("Mul", {ad0, scalar(L, D, std::ldexp(1.0, need))}, da);
    offset = -need;
    bound = f.emax() - f.bias + need;
  } else {
    // 2^1074 is no float64: below 1, lift by 2^1023, then by 2^52 if still
    // below 1 (from [2^-1074, 2^-1023)); |x| stays below 2^1024.
    step(L.op("Less", {ad, scalar(L, D, 1.0)}, ba), 1023, -1023);
    step(L.op("Less", {ad, scalar(L, D, 1.0)}, ba), need - 1023 + 1, -(need - 1023 + 1));
    bound = f.emax() - f.bias;
  }
  // Down: floor(log2 |x|) < bound, so steps 2^k .. 1 with 2^(k+1) >= bound reach [1, 2).
  int top = 1;
  while (top * 2 < bound) top *= 2;
  for (int s = top; s >= 1; s /= 2)
    step(L.op("GreaterOrEqual", {ad, scalar(L, D, std::ldexp(1.0, s))}, ba), -s, s);

  Value finite = L.op("Less", {ax, scalar(L, a.dtype, INFINITY)}, ba);  // false for inf and NaN
  Value normal = L.op("GreaterOrEqual", {E, int_scalar(L, I, static_cast<uint64_t>(1 - f.bias - offset))}, ba);
  Value m_normal = L.op("Mul", {L.op("Sub", {ad, scalar(L, D, 1.0)}, da), scalar(L, D, std::ldexp(1.0, f.mbits))}, da);
  int k1 = need / 2, k2 = need - k1;  // 2^1074 is not a float64: two exact scalings
  Value m_sub = L.op("Mul", {L.op("Mul", {ad0, scalar(L, D, std::ldexp(1.0, k1))}, da), scalar(L, D, std::ldexp(1.0, k2))}, da);
  Value m = L.op("Where", {normal, m_normal, m_sub}, da);
  m = cast(L, L.op("Where", {finite, m, scalar(L, D, 0.0)}, da), da, I);
  Value isnan = L.op("IsNaN", {x}, ba);
  m = L.op("Where", {isnan, int_scalar(L, I, uint64_t{1} << (f.mbits - 1)), m}, ia);  // the quiet bit
  Value e = L.op("Where", {normal, L.op("Add", {E, int_scalar(L, I, static_cast<uint64_t>(f.bias + offset))}, ia), int_scalar(L, I, 0)}, ia);
  e = L.op("Where", {finite, e, int_scalar(L, I, static_cast<uint64_t>(f.emax()))}, ia);
  // Negative: x < 0, or x is -0.0 (1 / -0.0 == -inf).
  Value zero = scalar(L, a.dtype, 0.0);
  Value recip = L.op("Div", {scalar(L, a.dtype, 1.0), x}, a);
  Value neg = L.op("Or", {L.op("Less", {x, zero}, ba), L.op("Less", {recip, zero}, ba)}, ba);
  Value sign = L.op("Where", {neg, int_scalar(L, I, uint64_t{1} << (f.bits - 1)), int_scalar(L, I, 0)}, ia);
  Value e_bits = L.op("Mul", {e, int_scalar(L, I, uint64_t{1} << f.mbits)}, ia);
  return L.op("Add", {L.op("Add", {sign, e_bits}, ia), m}, ia);  // disjoint bits: no carries
}

bool bitcastable(int32_t t) { return dtype::is_int(t) || dtype::is_float(t); }

// x's bits as the unsigned integer of its width.
Value to_bits(Lowering& L, Value x, const Aval& a) {
  int32_t U = unsigned_of_width(bits_of(a.dtype));
  if (dtype::is_int(a.dtype)) return cast(L, x, a, U);
  if (is_half(a.dtype)) {
    Value xf = cast(L, x, a, dtype::f32);  // exact
    return cast(L, float_to_bits(L, xf, a.with_dtype(dtype::f32), format_of(a.dtype)), a.with_dtype(dtype::i64), U);
  }
  return cast(L, float_to_bits(L, x, a, format_of(a.dtype)), a.with_dtype(dtype::i64), U);
}

// The value of dtype `to` whose bits are the unsigned integer u (aval a, same width).
Value from_bits(Lowering& L, Value u, const Aval& a, int32_t to) {
  if (dtype::is_int(to)) return cast(L, u, a, to);
  if (is_half(to)) {
    // onnxruntime's BitShift has no uint16 kernel: decode in uint32 into float32, then Cast down (exact).
    Aval wa = a.with_dtype(dtype::u32);
    Value v = float_from_bits(L, cast(L, u, a, dtype::u32), wa, dtype::f32, format_of(to));
    return cast(L, v, a.with_dtype(dtype::f32), to);
  }
  return float_from_bits(L, u, a, to, format_of(to));
}

// bitcast_convert_type[new_dtype]: same width is elementwise. Wide -> narrow
// appends an axis of the chunks, least significant first (XLA's CPU layout);
// narrow -> wide joins that last axis back.
void lower_bitcast_convert_type(Lowering& L) {
  Aval in = L.in_aval(0), out = L.out_aval(0);
  Value x = L.input(0);
  if (in.dtype == out.dtype) {
    L.bind(0, x);
    return;
  }
  for (int32_t t : {in.dtype, out.dtype})
    if (!bitcastable(t))
      L.fail(std::string("bitcast_convert_type from ") + dtype::name(in.dtype) + " to new_dtype=" +
             dtype::name(out.dtype) + " is not supported (" + dtype::name(t) +
             "); supported: integers and floats");
  int bi = bits_of(in.dtype), bo = bits_of(out.dtype);
  int32_t Ui = unsigned_of_width(bi), Uo = unsigned_of_width(bo);
  Value u = to_bits(L, x, in);
  if (bi == bo) {
    L.bind(0, from_bits(L, u, in.with_dtype(Ui), out.dtype));
    return;
  }
  std::vector<uint64_t> amounts;
  if (bi > bo) {
    for (int k = 0; k < bi / bo; ++k) amounts.push_back(static_cast<uint64_t>(k * bo));
    int32_t W = shift_type(bi);
    Value w = cast(L, u, in.with_dtype(Ui), W);
    Shape col_shape = in.shape;
    col_shape.push_back(Dim(1));
    Value col = L.op("Unsqueeze", {w, i64s(L, {-1})}, Aval(W, col_shape));
    Value chunks = shift(L, col, int_const(L, W, amounts, false), out.with_dtype(W), "RIGHT");
    Value pieces = cast(L, chunks, out.with_dtype(W), Uo);  // truncates to the low bo bits
    L.bind(0, from_bits(L, pieces, out.with_dtype(Uo), out.dtype));
    return;
  }
  for (int k = 0; k < bo / bi; ++k) amounts.push_back(static_cast<uint64_t>(k * bi));
  // Shift each chunk into place in uint64 and or them together (their bits
  // are disjoint). Not ReduceSum: onnxruntime's int64 sum is not exact.
  Aval wide = in.with_dtype(dtype::u64), joined_aval = out.with_dtype(dtype::u64);
  Value w = cast(L, u, in.with_dtype(Ui), dtype::u64);
  Value placed = shift(L, w, int_const(L, dtype::u64, amounts, false), wide, "LEFT");
  Value joined = kNoValue;
  for (size_t k = 0; k < amounts.size(); ++k) {
    Value chunk = L.op("Gather", {placed, int_scalar(L, dtype::i64, k)}, joined_aval, {Attr::i("axis", -1)});
    joined = k == 0 ? chunk : bitwise(L, "BitwiseOr", {joined, chunk}, joined_aval);
  }
  Value bits = cast(L, joined, joined_aval, Uo);
  L.bind(0, from_bits(L, bits, out.with_dtype(Uo), out.dtype));
}

}  // namespace

JAXONNX_PLUGIN("lax_bitwise", "0.1.0") {
  plugin.primitive("not", [](Lowering& L) { lower_logical(L, "Not", "BitwiseNot"); })
      .emits({"Not", "BitwiseNot"})
      .doc(onnx_doc("BitwiseNot"));
  plugin.primitive("and", [](Lowering& L) { lower_logical(L, "And", "BitwiseAnd"); })
      .emits({"And", "BitwiseAnd"})
      .doc(onnx_doc("BitwiseAnd"));
  plugin.primitive("or", [](Lowering& L) { lower_logical(L, "Or", "BitwiseOr"); })
      .emits({"Or", "BitwiseOr"})
      .doc(onnx_doc("BitwiseOr"));
  plugin.primitive("xor", [](Lowering& L) { lower_logical(L, "Xor", "BitwiseXor"); })
      .emits({"Xor", "BitwiseXor"})
      .doc(onnx_doc("BitwiseXor"));
  plugin.primitive("shift_left", [](Lowering& L) { lower_logical_shift(L, "LEFT"); })
      .emits({"BitShift", "Cast", "Less", "Min", "Where", "Mul"})
      .doc(onnx_doc("BitShift"));
  plugin.primitive("shift_right_logical", [](Lowering& L) { lower_logical_shift(L, "RIGHT"); })
      .emits({"BitShift", "Cast", "Less", "Min", "Where", "Mul"})
      .doc(onnx_doc("BitShift"));
  plugin.primitive("shift_right_arithmetic", lower_shift_right_arithmetic)
      .emits({"BitShift", "Cast", "Less", "Neg", "BitwiseXor", "Min"})
      .doc(onnx_doc("BitShift"));
  plugin.primitive("population_count", lower_population_count)
      .emits({"BitShift", "BitwiseAnd", "Sub", "Add", "Mul", "Cast"})
      .doc("SWAR bit count with BitShift / BitwiseAnd / Add / Mul (no ONNX op)");
  plugin.primitive("clz", lower_clz)
      .emits({"BitShift", "BitwiseOr", "BitwiseAnd", "Sub", "Add", "Mul", "Cast"})
      .doc("width - popcount(x smeared right), with BitShift / BitwiseOr (no ONNX op)");
  plugin.primitive("bitcast_convert_type", lower_bitcast_convert_type)
      .emits({"Cast", "BitShift", "BitwiseAnd", "BitwiseOr", "Unsqueeze", "Greater", "GreaterOrEqual",
              "Less", "Equal", "Or", "Where", "Max", "Add", "Sub", "Mul", "Div", "Abs", "Gather",
              "IsNaN"})
      .doc("Reinterprets bits: Cast for integers, exact IEEE arithmetic for floats (no ONNX op)");
}
