// lax_elementwise: JAX's elementwise lax primitives as ONNX elementwise ops.
//
// JAX has already broadcast every operand to the output shape (a scalar
// literal such as `mul a 2.0:f32[]` is the one exception, and ONNX's
// multidirectional broadcasting covers it), and JAX has already promoted all
// operands to one dtype. So most primitives are one ONNX op; the lowerings
// below exist where ONNX types or semantics differ from JAX's:
//
// - onnxruntime's CPU kernels lack some (op, dtype) pairs: bfloat16 has only
//   Cast, so bfloat16 math runs in float32 and is rounded back (what XLA's CPU
//   backend does too); Max/Min lack int16/uint16 and Where lacks
//   bool/int16/uint16/uint64, which run in a wider type (see compute_type).
// - convert_element_type float -> int saturates and maps NaN to 0 in JAX/XLA;
//   ONNX Cast leaves that undefined (onnxruntime gives INT_MIN), so NaN and
//   the range are guarded explicitly.
// - reduce_precision has no ONNX op: a Cast round trip where that is exact,
//   else Veltkamp splitting (round-to-nearest-even to m bits in float
//   arithmetic) plus XLA's overflow-to-inf and flush-to-zero.
// - bool has no ordering/Max in ONNX; integer_pow is a Mul chain as in JAX.
// - complex operands are carried packed (float[..., 2], jaxonnx/complex.hpp):
//   add/sub/copy work on the packed form as they are; mul, div, pow,
//   integer_pow, neg, abs, exp, log, sqrt, tanh, logistic, sign, rsqrt,
//   eq/ne, select_n and convert_element_type split the parts
//   (complex_* below, jaxonnx/complex_math.hpp). max/min order complex
//   values lexicographically, as JAX does (real part, then imaginary; JAX's
//   lt/le/gt/ge take no complex operands). Other primitives refuse one.
#include <jaxonnx/complex.hpp>
#include <jaxonnx/complex_math.hpp>
#include <jaxonnx/max_min.hpp>
#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>

namespace {

using namespace jaxonnx::sdk;

// ------------------------------------------------------- kernel coverage --

// The dtype onnxruntime (CPU) runs `op` in at `opset` for operands of dtype
// `t`: `t` itself, or an exact widening where it has no kernel for `t` or the
// opset's form does not allow it (kernels.hpp; before opset 14 Add/Sub/Mul/Div
// have no 8- and 16-bit integer forms, and the Cast back wraps as XLA does).
int32_t compute_type(std::string_view op, int32_t t, int64_t opset = 23) {
  if (op == "Cast" || op == "Identity") return t;
  // bfloat16: the host computes a node without a kernel in float32 and reads a
  // chain of such nodes wide (kernels.hpp), so emit it as it is.
  if (t == dtype::bf16) return t;
  int32_t c = kernels::compute_type(op, t, /*bits_only=*/op == "Where", opset);
  return c == JXO_DTYPE_UNDEFINED ? t : c;
}

// `op` over `ins` whose data operands (from index `first_data` on; Where's
// condition is not one) have dtype `t`, giving `out`; run in compute_type.
Value emit(Lowering& L, const char* op, std::vector<Value> ins, int32_t t, const Aval& out,
           size_t first_data = 0) {
  int32_t c = compute_type(op, t, L.opset());
  if (c == t) return L.op(op, ins, out);
  for (size_t i = first_data; i < ins.size(); ++i) ins[i] = cast(L, ins[i], L.aval_of(ins[i]), c);
  if (out.dtype != t) return L.op(op, ins, out);
  return cast(L, L.op(op, ins, out.with_dtype(c)), out.with_dtype(c), t);
}

// Input i, upcast from bfloat16 to float32 for lowerings that compute in
// float32 throughout (then `narrow` rounds the result back).
Value input_f32_if_bf16(Lowering& L, size_t i, Aval* a) {
  *a = L.in_aval(i);
  Value v = L.input(i);
  if (a->dtype != dtype::bf16) return v;
  v = cast(L, v, *a, dtype::f32);
  *a = a->with_dtype(dtype::f32);
  return v;
}
Value narrow(Lowering& L, Value v, const Aval& computed, int32_t to) { return cast(L, v, computed, to); }

// The largest / smallest value of integer dtype `t`, as a scalar of `t`.
template <typename T> Value int_scalar(Lowering& L, T v) {
  return L.constant(std::vector<T>{v}, std::vector<int64_t>{});
}
Value int_limit(Lowering& L, int32_t t, bool max) {
  switch (t) {
#define JXO_LIMIT(DT, T) case DT: return int_scalar<T>(L, max ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min());
    JXO_LIMIT(dtype::i8, int8_t) JXO_LIMIT(dtype::i16, int16_t) JXO_LIMIT(dtype::i32, int32_t)
    JXO_LIMIT(dtype::i64, int64_t) JXO_LIMIT(dtype::u8, uint8_t) JXO_LIMIT(dtype::u16, uint16_t)
    JXO_LIMIT(dtype::u32, uint32_t) JXO_LIMIT(dtype::u64, uint64_t)
#undef JXO_LIMIT
    default: throw Error(std::string("no integer limits for ") + dtype::name(t));
  }
}

// ------------------------------------------------------- one-op primitives --

// Primitives that are exactly one ONNX op over all operands, whose output is
// the equation's output. JAX allows only float dtypes for the transcendental
// ones; ONNX's arithmetic, Abs and Sign accept every numeric type JAX does
// except bfloat16 (run in float32, see compute_type). Abs(INT_MIN) wraps to
// INT_MIN in both (tested).
struct OneOp {
  const char* primitive;
  const char* onnx;
};

constexpr OneOp kOneOp[] = {
    {"add", "Add"},
    {"sub", "Sub"},
    {"eq", "Equal"},  // Equal takes bool too
    {"exp", "Exp"},
    {"log", "Log"},
    {"tanh", "Tanh"},
    {"logistic", "Sigmoid"},
    {"sqrt", "Sqrt"},
    {"abs", "Abs"},
    {"sign", "Sign"},  // Sign(NaN) is NaN in onnxruntime, as in JAX (tested)
    // copy: JAX's explicit copy. The core also routes a graph output that is
    // a graph input or a constant through it: each output needs its own node.
    {"copy", "Identity"},
};

// ------------------------------------------------------------------ complex --

// Whether the equation reads or makes a complex value.
bool has_complex(Lowering& L) {
  for (size_t i = 0; i < L.num_inputs(); ++i) if (complex::is(L.in_aval(i).dtype)) return true;
  return complex::is(L.out_aval(0).dtype);
}

[[noreturn]] void complex_refused(Lowering& L) {
  L.fail("'" + std::string(L.primitive()) + "' on complex operands is not lowered by "
         "lax_elementwise (complex64/complex128 values are carried as float[..., 2]; supported: "
         "add, sub, mul, div, pow, integer_pow, neg, abs, exp, log, sqrt, tanh, logistic, sign, "
         "rsqrt, eq, ne, max, min, select_n, convert_element_type, copy)");
}

// The unary/binary complex primitives over the parts. The packed form is
// elementwise-compatible for add/sub/copy (a rank-0 operand, packed [2],
// still broadcasts), so those are one op.
void lower_complex_elementwise(Lowering& L) {
  std::string_view prim = L.primitive();
  Aval out = L.out_aval(0);
  Aval a = L.in_aval(0);
  if (prim == "add" || prim == "sub" || prim == "copy") {
    const char* op = prim == "add" ? "Add" : prim == "sub" ? "Sub" : "Identity";
    std::vector<Value> ins;
    for (size_t i = 0; i < L.num_inputs(); ++i)
      ins.push_back(complex::is(L.in_aval(i).dtype)
                        ? L.input(i)
                        : complex::from_real(L, L.input(i), L.in_aval(i), out.with_shape(L.in_aval(i).shape)));
    L.bind(0, L.op(op, ins, complex::packed(out)));
    return;
  }
  if (prim == "eq" || prim == "ne") {
    // Equal on the packed form, then both parts equal.
    Aval c = a.with_shape(out.shape).with_dtype(a.dtype);
    complex::Parts x = complex::operand(L, 0, c), y = complex::operand(L, 1, c);
    Value re = L.op("Equal", {x.re, y.re}, out), im = L.op("Equal", {x.im, y.im}, out);
    Value eq = L.op("And", {re, im}, out);
    L.bind(0, prim == "eq" ? eq : L.op("Not", {eq}, out));
    return;
  }
  if (!complex::is(out.dtype) && prim != "abs") complex_refused(L);
  Aval p = complex::part(prim == "abs" ? a : out);
  Aval c = prim == "abs" ? a : out;
  complex::Parts x = complex::operand(L, 0, c.with_shape(L.in_aval(0).shape));
  if (prim == "abs") { L.bind(0, complex::abs(L, x, p)); return; }
  complex::Parts r;
  if (prim == "neg") r = complex::neg(L, x, p);
  else if (complex::Function fn = complex::function(prim)) r = fn(L, x, p);  // exp, log, tanh, ...
  else if (prim == "mul" || prim == "div") {
    complex::Parts y = complex::operand(L, 1, out.with_shape(L.in_aval(1).shape));
    r = prim == "mul" ? complex::mul(L, x, y, p) : complex::div(L, x, y, p);
  } else {
    complex_refused(L);
  }
  L.bind(0, complex::pack(L, r, out));
}

// select_n on complex cases: the predicate gets a trailing 1 to broadcast
// over the packed parts; an integer predicate picks among n cases by the
// same tree as the real lowering (select_range, below).
Value select_range(Lowering& L, Value which, const Aval& which_aval, const std::vector<Value>& cases,
                   size_t lo, size_t hi, const Aval& out);

void lower_complex_select_n(Lowering& L) {
  Aval which = L.in_aval(0), out = L.out_aval(0);
  if (L.num_inputs() == 2) { L.bind(0, L.input(1)); return; }
  if (L.num_inputs() < 2) L.fail("select_n needs at least one case");
  if (which.dtype == dtype::boolean && L.num_inputs() != 3)
    L.fail("select_n with a bool predicate takes exactly two cases");
  Shape s = which.shape;
  s.push_back(Dim(1));
  Aval w_aval(which.dtype, s);
  Value w = L.op("Unsqueeze", {L.input(0), i64s(L, {-1})}, w_aval);
  if (which.dtype == dtype::boolean) {
    L.bind(0, L.op("Where", {w, L.input(2), L.input(1)}, complex::packed(out)));
    return;
  }
  std::vector<Value> cases;
  for (size_t i = 1; i < L.num_inputs(); ++i) cases.push_back(L.input(i));
  L.bind(0, select_range(L, w, w_aval, cases, 0, cases.size(), complex::packed(out)));
}

Value float_to_int(Lowering& L, Value x, Aval f, const Aval& out);  // conversions, below

// convert_element_type to or from complex: real -> complex pads a zero
// imaginary part; complex -> real keeps the real part (as JAX does); complex
// -> complex casts the parts.
void lower_complex_convert(Lowering& L) {
  Aval in = L.in_aval(0), out = L.out_aval(0);
  if (!complex::is(in.dtype)) {
    L.bind(0, complex::from_real(L, L.input(0), in, out));
  } else if (complex::is(out.dtype)) {
    L.bind(0, cast(L, L.input(0), complex::packed(in), complex::part_dtype(out.dtype)));
  } else {
    Value re = complex::split(L, L.input(0), in).re;
    Aval p = complex::part(in);
    // To an integer: the real part converts as a float does (saturating, NaN -> 0).
    if (dtype::is_int(out.dtype)) { L.bind(0, float_to_int(L, re, p, out)); return; }
    if (out.dtype != dtype::boolean) { L.bind(0, cast(L, re, p, out.dtype)); return; }
    // bool(z) is z != 0: either part nonzero.
    Value im = complex::split(L, L.input(0), in).im;
    Value zero = scalar(L, p.dtype, 0);
    L.bind(0, L.op("Or", {L.op("Not", {L.op("Equal", {re, zero}, out)}, out),
                          L.op("Not", {L.op("Equal", {im, zero}, out)}, out)}, out));
  }
}

void lower_one_op(Lowering& L, const char* onnx) {
  if (has_complex(L)) return lower_complex_elementwise(L);
  L.bind(0, emit(L, onnx, L.inputs(), L.in_aval(0).dtype, L.out_aval(0)));
}

// mul: `out_dtype` (None unless set) asks for the product in a wider type;
// compute in that type, as XLA does.
void lower_mul(Lowering& L) {
  if (has_complex(L)) return lower_complex_elementwise(L);
  Aval out = L.out_aval(0);
  std::vector<Value> ins;
  for (size_t i = 0; i < L.num_inputs(); ++i) ins.push_back(cast(L, L.input(i), L.in_aval(i), out.dtype));
  L.bind(0, emit(L, "Mul", ins, out.dtype, out));
}

// neg: ONNX Neg has no unsigned types; JAX wraps around, which 0 - x does too.
void lower_neg(Lowering& L) {
  if (has_complex(L)) return lower_complex_elementwise(L);
  Aval a = L.in_aval(0);
  Value x = L.input(0);
  if (dtype::is_unsigned_int(a.dtype)) {
    L.bind(0, emit(L, "Sub", {scalar(L, a.dtype, 0), x}, a.dtype, L.out_aval(0)));
  } else {
    L.bind(0, emit(L, "Neg", {x}, a.dtype, L.out_aval(0)));
  }
}

// div: floats are one Div. Integer Div truncates toward zero as lax.div
// does, but onnxruntime traps (SIGFPE, or an error) where XLA defines a
// result: x / 0 = -1 (all bits set, so the maximum for unsigned) and
// INT_MIN / -1 = INT_MIN (wraps). The divisor is made safe (0, and -1 for
// signed types, become 1) and those results are selected afterwards; 0 - q
// wraps INT_MIN to itself as XLA does.
void lower_div(Lowering& L) {
  if (has_complex(L)) return lower_complex_elementwise(L);
  Aval b = L.in_aval(1), out = L.out_aval(0);
  int32_t t = L.in_aval(0).dtype;
  if (!dtype::is_int(t)) {
    L.bind(0, emit(L, "Div", L.inputs(), t, out));
    return;
  }
  Value x = L.input(0), y = L.input(1);
  Aval mask = b.with_dtype(dtype::boolean);
  Value zero = L.op("Equal", {y, scalar(L, t, 0)}, mask);
  Value unsafe = zero, minus_one = kNoValue;
  if (dtype::is_signed_int(t)) {
    minus_one = L.op("Equal", {y, scalar(L, t, -1)}, mask);
    unsafe = L.op("Or", {zero, minus_one}, mask);
  }
  Value q = emit(L, "Div", {x, where(L, unsafe, scalar(L, t, 1), y, b)}, t, out);
  if (minus_one != kNoValue)
    q = where(L, minus_one, emit(L, "Sub", {scalar(L, t, 0), q}, t, out), q, out);
  Value all_ones = dtype::is_signed_int(t) ? scalar(L, t, -1) : int_limit(L, t, true);
  L.bind(0, where(L, zero, all_ones, q, out));
}

// max / min: on bool they are or / and (ONNX Max has no bool). onnxruntime's
// Max/Min propagate NaN like JAX does, from either operand (tested), so
// floats need nothing more.
// Complex x `onnx` y (Less/Greater) in JAX's lexicographic order: the real
// parts decide unless equal, then the imaginary parts do.
Value complex_order(Lowering& L, const char* onnx, const Aval& out_mask) {
  Aval c = L.in_aval(0).with_dtype(complex::is(L.in_aval(0).dtype) ? L.in_aval(0).dtype : L.in_aval(1).dtype);
  complex::Parts x = complex::operand(L, 0, c.with_shape(L.in_aval(0).shape));
  complex::Parts y = complex::operand(L, 1, c.with_shape(L.in_aval(1).shape));
  Value strict = L.op(onnx, {x.re, y.re}, out_mask);
  Value tie = L.op("And", {L.op("Equal", {x.re, y.re}, out_mask), L.op(onnx, {x.im, y.im}, out_mask)}, out_mask);
  return L.op("Or", {strict, tie}, out_mask);
}

// max/min of complex values: the lexicographically larger/smaller operand.
void lower_complex_max_min(Lowering& L, bool is_max) {
  Aval out = L.out_aval(0), mask = out.with_dtype(dtype::boolean);
  Value pick_x = complex_order(L, is_max ? "Greater" : "Less", mask);
  Shape one = out.shape;
  one.push_back(Dim(1));
  Value w = L.op("Unsqueeze", {pick_x, i64s(L, {-1})}, Aval(dtype::boolean, one));
  std::vector<Value> v;
  for (size_t i = 0; i < 2; ++i) {
    Aval a = L.in_aval(i);
    v.push_back(complex::is(a.dtype) ? L.input(i) : complex::from_real(L, L.input(i), a, out.with_shape(a.shape)));
  }
  L.bind(0, L.op("Where", {w, v[0], v[1]}, complex::packed(out)));
}

void lower_max_min(Lowering& L, const char* onnx, const char* boolean_op) {
  if (has_complex(L)) return lower_complex_max_min(L, onnx == std::string("Max"));
  int32_t t = L.in_aval(0).dtype;
  if (t == dtype::boolean) L.bind(0, L.op(boolean_op, L.inputs(), L.out_aval(0)));
  // int64: onnxruntime's Max/Min compare wrongly (max_or_min picks with Where).
  else if (t == dtype::i64) L.bind(0, max_or_min(L, onnx == std::string("Max"), L.input(0), L.input(1), L.out_aval(0)));
  else L.bind(0, emit(L, onnx, L.inputs(), t, L.out_aval(0)));
}

// pow: x is floating; y is floating or integer. XLA converts an integer y to
// x's dtype before power(), so do the same (exact for |y| < 2^24).
void lower_pow(Lowering& L) {
  if (has_complex(L)) {
    // x ** y = exp(y log x) on the principal branch, as XLA computes it for
    // complex operands (0 ** y is then exp(-inf + ...) = 0 for Re y > 0).
    Aval out = L.out_aval(0);
    if (!complex::is(out.dtype)) complex_refused(L);
    Aval p = complex::part(out);
    complex::Parts x = complex::operand(L, 0, out.with_shape(L.in_aval(0).shape));
    complex::Parts y = complex::operand(L, 1, out.with_shape(L.in_aval(1).shape));
    complex::Parts lx = complex::log(L, x, complex::part(out.with_shape(L.in_aval(0).shape)));
    L.bind(0, complex::pack(L, complex::exp(L, complex::mul(L, y, lx, p), p), out));
    return;
  }
  Aval x = L.in_aval(0);
  Value y = cast(L, L.input(1), L.in_aval(1), x.dtype);
  L.bind(0, emit(L, "Pow", {L.input(0), y}, x.dtype, L.out_aval(0)));
}

// integer_pow: x ** y for a static int y. JAX expands it into multiplications
// by binary exponentiation (then 1/acc for y < 0); emitting the same Mul chain
// gives bit-identical results, which Pow would not.
// Complex x: the same binary exponentiation with complex products.
void lower_complex_integer_pow(Lowering& L) {
  int64_t y = L.param("y").as_int();
  Aval a = L.in_aval(0);
  Aval p = complex::part(a);
  complex::Parts x = complex::split(L, L.input(0), a);
  complex::Parts one{L.op("Add", {L.op("Mul", {x.re, scalar(L, p.dtype, 0)}, p), scalar(L, p.dtype, 1)}, p),
                     L.op("Mul", {x.re, scalar(L, p.dtype, 0)}, p)};
  uint64_t n = y < 0 ? 0 - static_cast<uint64_t>(y) : static_cast<uint64_t>(y);
  complex::Parts acc = one;
  bool first = true;
  while (n > 0) {
    if (n & 1) { acc = first ? x : complex::mul(L, acc, x, p); first = false; }
    n >>= 1;
    if (n > 0) x = complex::mul(L, x, x, p);
  }
  if (y < 0) acc = complex::div(L, one, acc, p);
  L.bind(0, complex::pack(L, acc, a));
}

void lower_integer_pow(Lowering& L) {
  if (has_complex(L)) return lower_complex_integer_pow(L);
  int64_t y = L.param("y").as_int();
  int32_t result_dtype = L.out_aval(0).dtype;
  Aval out;
  Value x = input_f32_if_bf16(L, 0, &out);
  if (y == 0) {
    // A ones tensor of x's shape (NaN ** 0 is 1 too, so not x * 0 + 1).
    Value shape = L.op("Shape", {x}, Aval(dtype::i64, {out.rank()}));
    L.bind(0, narrow(L, L.op("Expand", {scalar(L, out.dtype, 1), shape}, out), out, result_dtype));
    return;
  }
  bool reciprocal = y < 0;
  uint64_t n = reciprocal ? 0 - static_cast<uint64_t>(y) : static_cast<uint64_t>(y);
  Value acc = kNoValue;
  while (n > 0) {
    if (n & 1) acc = acc == kNoValue ? x : emit(L, "Mul", {acc, x}, out.dtype, out);
    n >>= 1;
    if (n > 0) x = emit(L, "Mul", {x, x}, out.dtype, out);
  }
  if (reciprocal) acc = emit(L, "Div", {scalar(L, out.dtype, 1), acc}, out.dtype, out);
  L.bind(0, narrow(L, acc, out, result_dtype));
}

// rsqrt: 1 / sqrt(x).
void lower_rsqrt(Lowering& L) {
  if (has_complex(L)) return lower_complex_elementwise(L);
  Aval a;
  Value x = input_f32_if_bf16(L, 0, &a);
  L.bind(0, narrow(L, L.op("Reciprocal", {L.op("Sqrt", {x}, a)}, a), a, L.out_aval(0).dtype));
}

// ------------------------------------------------------------- comparisons --

// ONNX Less/Greater/... have no bool inputs; JAX orders False < True, which
// uint8 keeps.
void lower_order(Lowering& L, const char* onnx) {
  if (has_complex(L)) complex_refused(L);
  std::vector<Value> ins;
  int32_t t = L.in_aval(0).dtype;
  for (size_t i = 0; i < 2; ++i) {
    Aval a = L.in_aval(i);
    Value v = L.input(i);
    ins.push_back(a.dtype == dtype::boolean ? cast(L, v, a, dtype::u8) : v);
  }
  L.bind(0, emit(L, onnx, ins, t == dtype::boolean ? dtype::u8 : t, L.out_aval(0)));
}

void lower_ne(Lowering& L) {
  if (has_complex(L)) return lower_complex_elementwise(L);
  Aval out = L.out_aval(0);
  L.bind(0, L.op("Not", {emit(L, "Equal", L.inputs(), L.in_aval(0).dtype, out)}, out));
}

// ---------------------------------------------------------------- select_n --

// select_n(which, *cases) picks cases[which]. A bool `which` selects between
// two cases; an int32 one among n. For n > 2 this is the same binary tree of
// `which < mid` comparisons that JAX lowers to (n - 1 Where nodes, depth
// ceil(log2 n)), so out-of-range indices behave the same way too. One case
// is bound directly: no node.
Value select_range(Lowering& L, Value which, const Aval& which_aval, const std::vector<Value>& cases,
                   size_t lo, size_t hi, const Aval& out) {
  if (hi - lo == 1) return cases[lo];
  size_t mid = lo + (hi - lo) / 2;
  Value below = L.op("Less", {which, scalar(L, which_aval.dtype, static_cast<double>(mid))},
                     which_aval.with_dtype(dtype::boolean));
  return emit(L, "Where", {below, select_range(L, which, which_aval, cases, lo, mid, out),
                           select_range(L, which, which_aval, cases, mid, hi, out)},
              out.dtype, out, 1);
}

void lower_select_n(Lowering& L) {
  if (complex::is(L.out_aval(0).dtype)) return lower_complex_select_n(L);
  Aval which_aval = L.in_aval(0);
  Value which = L.input(0);
  std::vector<Value> cases;
  for (size_t i = 1; i < L.num_inputs(); ++i) cases.push_back(L.input(i));
  Aval out = L.out_aval(0);
  if (cases.empty()) L.fail("select_n needs at least one case");
  if (cases.size() == 1) {
    L.bind(0, cases[0]);
  } else if (which_aval.dtype == dtype::boolean) {
    if (cases.size() != 2) L.fail("select_n with a bool predicate takes exactly two cases");
    L.bind(0, emit(L, "Where", {which, cases[1], cases[0]}, out.dtype, out, 1));
  } else {
    L.bind(0, select_range(L, which, which_aval, cases, 0, cases.size(), out));
  }
}

// ------------------------------------------------------------- conversions --

// convert_element_type: Cast. ONNX Cast truncates float -> int toward zero
// and maps float/int -> bool as x != 0 (NaN -> true), both as JAX does, and
// wraps int -> narrower int as JAX does. Out of range float -> int is
// undefined in ONNX (onnxruntime gives INT_MIN) but saturates in XLA, with
// NaN -> 0, so that case clamps first (float_to_int). weak_type and sharding
// do not change values: a same-dtype conversion emits nothing.
//
// Known difference: float64 -> float16/bfloat16 is rounded twice by
// onnxruntime (via float32), so a value just off a tie can round the other
// way (at most one unit in the last place).
Value float_to_int(Lowering& L, Value x, Aval f, const Aval& out) {
  // float16/bfloat16 go through float32 (exact): Clip/IsNaN have no
  // bfloat16 kernel and float16 cannot hold the int32/int64 bounds.
  if (f.dtype == dtype::f16 || f.dtype == dtype::bf16) {
    x = cast(L, x, f, dtype::f32);
    f = f.with_dtype(dtype::f32);
  }
  Aval mask = f.with_dtype(dtype::boolean);
  bool is_signed = dtype::is_signed_int(out.dtype);
  int value_bits = static_cast<int>(dtype::itemsize(out.dtype)) * 8 - (is_signed ? 1 : 0);
  int significand = f.dtype == dtype::f64 ? 53 : 24;
  double top = std::ldexp(1.0, value_bits);  // 2^bits: the first value past the range
  double lo = is_signed ? -top : 0.0;        // a power of two: exact
  bool max_exact = value_bits <= significand;
  // Largest float below 2^bits: the int max itself when exact.
  double hi = max_exact ? top - 1.0 : top - std::ldexp(1.0, value_bits - significand);
  x = L.op("Where", {L.op("IsNaN", {x}, mask), scalar(L, f.dtype, 0.0), x}, f);
  Value y = L.op("Cast", {L.op("Clip", {x, scalar(L, f.dtype, lo), scalar(L, f.dtype, hi)}, f)}, out,
                 {Attr::i("to", out.dtype)});
  if (max_exact) return y;
  // The int max is not a float of this type: values at or past 2^bits take it.
  Value over = L.op("GreaterOrEqual", {x, scalar(L, f.dtype, top)}, mask);
  return emit(L, "Where", {over, int_limit(L, out.dtype, true), y}, out.dtype, out, 1);
}

void lower_convert_element_type(Lowering& L) {
  if (has_complex(L)) return lower_complex_convert(L);
  Aval in = L.in_aval(0);
  Aval out = L.out_aval(0);
  Value x = L.input(0);
  if (dtype::is_float(in.dtype) && dtype::is_int(out.dtype)) {
    L.bind(0, float_to_int(L, x, in, out));
  } else {
    L.bind(0, cast(L, x, in, out.dtype));
  }
}

// ------------------------------------------------------- reduce_precision --

// reduce_precision(x, exponent_bits=e, mantissa_bits=m) rounds x to the
// nearest value (ties to even) of a float format with e exponent and m
// mantissa bits, stored back in x's dtype, as XLA defines it:
//   - the mantissa is rounded at bit m of x's own format (so subnormals of x
//     keep a fixed quantum 2^(emin_x - m));
//   - when e is narrower than x's exponent, results past the format's max
//     become +-inf and results below its smallest normal become +-0 (XLA
//     flushes the narrow format's subnormals);
//   - NaN stays NaN.
// float32 to (8, 7) is exactly Cast to bfloat16 and back, and float32 to
// (5, 10) is Cast to float16 and back plus the flush (Cast keeps float16
// subnormals); onnxruntime's Casts round to nearest even (tested). Otherwise
// Veltkamp splitting rounds in float arithmetic: c = x * (2^s + 1),
// hi = c - (c - x) is x rounded to nearest-even on p - s bits.
struct FloatFormat { int exponent_bits, mantissa_bits; };
FloatFormat format_of(int32_t t) {
  switch (t) {
    case dtype::f64: return {11, 52};
    case dtype::f32: return {8, 23};
    case dtype::f16: return {5, 10};
    case dtype::bf16: return {8, 7};
    default: throw Error(std::string("reduce_precision: no float format for ") + dtype::name(t));
  }
}

Value cast_round_trip(Lowering& L, Value x, const Aval& a, int32_t via) {
  return cast(L, cast(L, x, a, via), a.with_dtype(via), a.dtype);
}

Value reduce_precision_general(Lowering& L, Value x, Aval a, FloatFormat src, int e, int m) {
  int32_t result_dtype = a.dtype;
  if (a.dtype == dtype::f16 || a.dtype == dtype::bf16) {  // exact in float32, and it has kernels
    x = cast(L, x, a, dtype::f32);
    a = a.with_dtype(dtype::f32);
  }
  Aval mask = a.with_dtype(dtype::boolean);
  auto k = [&](double v) { return scalar(L, a.dtype, v); };
  int p = a.dtype == dtype::f64 ? 53 : 24;  // significand bits of the compute type
  int src_emax = (1 << (src.exponent_bits - 1)) - 1, src_emin = 1 - src_emax;
  bool narrower = e < src.exponent_bits;
  Value ax = L.op("Abs", {x}, a);

  Value hi = x;
  if (m < src.mantissa_bits) {
    int s = p - 1 - m;
    // Scale huge values down so x * (2^s + 1) stays finite (powers of two: exact).
    // Only needed without exponent narrowing: else such values become inf.
    bool scale = !narrower && src_emax + s + 2 > (p == 53 ? 1023 : 127);
    Value factor = kNoValue;
    Value xs = x;
    if (scale) {
      Value big = L.op("GreaterOrEqual", {ax, k(std::ldexp(1.0, src_emax - s - 1))}, mask);
      factor = L.op("Where", {big, k(std::ldexp(1.0, -(s + 2))), k(1.0)}, a);
      xs = L.op("Mul", {x, factor}, a);
    }
    Value c = L.op("Mul", {xs, k(std::ldexp(1.0, s) + 1.0)}, a);
    hi = L.op("Sub", {c, L.op("Sub", {c, xs}, a)}, a);
    if (scale) hi = L.op("Div", {hi, factor}, a);
    if (!narrower) {
      // Subnormals of x's format round at the fixed quantum q = 2^(emin - m):
      // Round(x / q) * q, scaling by powers of two (exact). Round is
      // half-to-even. (The (x + C) - C trick is broken by onnxruntime's
      // graph optimizer.)
      // (Two factors each way: 2^(m - emin) itself is past the max.)
      Value up = L.op("Mul", {L.op("Mul", {x, k(std::ldexp(1.0, -src_emin))}, a), k(std::ldexp(1.0, m))}, a);
      Value fixed = L.op("Mul", {L.op("Mul", {L.op("Round", {up}, a), k(std::ldexp(1.0, -m))}, a),
                                 k(std::ldexp(1.0, src_emin))}, a);
      Value tiny = L.op("Less", {ax, k(std::ldexp(1.0, src_emin))}, mask);
      hi = L.op("Where", {tiny, fixed, hi}, a);
    }
  }
  // Overflow: |x| at or past the midpoint between the max and 2^(emax + 1)
  // rounds to inf (the max has an odd mantissa, so the tie goes up). This
  // also maps +-inf, which Veltkamp turns into NaN, back to +-inf.
  int emax = narrower ? (1 << (e - 1)) - 1 : src_emax;
  Value inf = L.op("Mul", {x, k(std::numeric_limits<double>::infinity())}, a);
  Value over = L.op("GreaterOrEqual", {ax, k(std::ldexp(2.0 - std::ldexp(1.0, -(m + 1)), emax))}, mask);
  if (narrower) {
    // Underflow: results below the smallest normal 2^(1 - emax) flush to +-0;
    // x rounds up to it from 2^(1 - emax) * (1 - 2^-(m + 2)) on.
    Value under = L.op("Less", {ax, k(std::ldexp(1.0 - std::ldexp(1.0, -(m + 2)), 1 - emax))}, mask);
    hi = L.op("Where", {under, L.op("Mul", {x, k(0.0)}, a), hi}, a);
  }
  hi = L.op("Where", {over, inf, hi}, a);
  return cast(L, hi, a, result_dtype);
}

void lower_reduce_precision(Lowering& L) {
  if (has_complex(L)) complex_refused(L);
  Aval a = L.in_aval(0);
  Value x = L.input(0);
  int64_t e = L.param("exponent_bits").as_int(), m = L.param("mantissa_bits").as_int();
  if (e < 2) L.fail("reduce_precision: exponent_bits=" + std::to_string(e) + " is not supported (need >= 2)");
  if (m < 0) L.fail("reduce_precision: mantissa_bits=" + std::to_string(m) + " must be >= 0");
  FloatFormat src = format_of(a.dtype);
  if (e >= src.exponent_bits && m >= src.mantissa_bits) { L.bind(0, x); return; }
  if (a.dtype == dtype::f32 && e == 8 && m == 7) { L.bind(0, cast_round_trip(L, x, a, dtype::bf16)); return; }
  if (a.dtype == dtype::f32 && e == 5 && m == 10) {
    // Float16 keeps subnormals that XLA flushes: zero |x| < 2^-14 (1 - 2^-12),
    // which rounds below float16's smallest normal 2^-14.
    Value r = cast_round_trip(L, x, a, dtype::f16);
    Aval mask = a.with_dtype(dtype::boolean);
    Value under = L.op("Less", {L.op("Abs", {x}, a), scalar(L, a.dtype, std::ldexp(1.0 - std::ldexp(1.0, -12), -14))}, mask);
    L.bind(0, L.op("Where", {under, L.op("Mul", {x, scalar(L, a.dtype, 0.0)}, a), r}, a));
    return;
  }
  L.bind(0, reduce_precision_general(L, x, a, src, static_cast<int>(std::min<int64_t>(e, src.exponent_bits)),
                                     static_cast<int>(std::min<int64_t>(m, src.mantissa_bits))));
}

// stop_gradient only matters for differentiation: the value passes through.
void lower_stop_gradient(Lowering& L) { L.bind(0, L.input(0)); }

}  // namespace

// The ops the complex lowerings may emit (complex.hpp's idioms).
void emits_complex(Plugin::PrimitiveRef& p) {
  p.emits({"Gather", "Unsqueeze", "Concat", "Pad", "Cast", "Add", "Sub", "Mul", "Div", "Neg", "Abs",
           "Max", "Min", "Sqrt", "Equal", "Or", "And", "Not", "Where", "Exp", "Log", "Cos", "Sin",
           "Atan", "Greater", "GreaterOrEqual", "Less", "IsInf", "Identity"});
}

JAXONNX_PLUGIN("lax_elementwise", "0.1.0") {
  for (const OneOp& e : kOneOp) {
    const char* onnx = e.onnx;
    auto prim = plugin.primitive(e.primitive, [onnx](Lowering& L) { lower_one_op(L, onnx); });
    prim.emits({onnx}).doc(onnx_doc(onnx));
    emits_complex(prim);
    if (compute_type(onnx, dtype::bf16) != dtype::bf16) prim.emits({"Cast"});  // bfloat16 via float32
  }
  {
    auto prim = plugin.primitive("div", lower_div)
      .emits({"Div", "Equal", "Or", "Where", "Sub", "Cast"})
      .doc(onnx_doc("Div"))
      .summary("Div; integer divisors 0 and -1 are made safe and give XLA's results");
    emits_complex(prim);
  }
  {
    auto prim = plugin.primitive("mul", lower_mul).emits({"Mul", "Cast"}).doc(onnx_doc("Mul"));
    emits_complex(prim);
  }
  {
    auto prim = plugin.primitive("neg", lower_neg).emits({"Neg", "Sub", "Cast"}).doc(onnx_doc("Neg"));
    emits_complex(prim);
  }
  {
    auto prim = plugin.primitive("max", [](Lowering& L) { lower_max_min(L, "Max", "Or"); })
      .emits({"Max", "Or", "Cast"})
      .doc(onnx_doc("Max"));
    emits_complex(prim);
  }
  {
    auto prim = plugin.primitive("min", [](Lowering& L) { lower_max_min(L, "Min", "And"); })
      .emits({"Min", "And", "Cast"})
      .doc(onnx_doc("Min"));
    emits_complex(prim);
  }
  {
    auto prim = plugin.primitive("pow", lower_pow).emits({"Pow", "Cast"}).doc(onnx_doc("Pow"));
    emits_complex(prim);
  }
  {
    auto prim = plugin.primitive("integer_pow", lower_integer_pow)
      .emits({"Mul", "Div", "Shape", "Expand", "Cast"})
      .doc(onnx_doc("Mul"))
      .summary("binary exponentiation by Mul, as JAX expands it");
    emits_complex(prim);
  }
  {
    auto prim = plugin.primitive("rsqrt", lower_rsqrt).emits({"Sqrt", "Reciprocal", "Cast"}).doc(onnx_doc("Reciprocal"));
    emits_complex(prim);
  }

  struct Cmp { const char* primitive; const char* onnx; };
  for (Cmp c : {Cmp{"lt", "Less"}, Cmp{"le", "LessOrEqual"},
                Cmp{"gt", "Greater"}, Cmp{"ge", "GreaterOrEqual"}}) {
    const char* onnx = c.onnx;
    plugin.primitive(c.primitive, [onnx](Lowering& L) { lower_order(L, onnx); })
        .emits({onnx, "Cast"})
        .doc(onnx_doc(onnx));
  }
  {
    auto prim = plugin.primitive("ne", lower_ne).emits({"Equal", "Not", "Cast"}).doc(onnx_doc("Equal"));
    emits_complex(prim);
  }

  {
    auto prim = plugin.primitive("select_n", lower_select_n).emits({"Where", "Less", "Cast"}).doc(onnx_doc("Where"));
    emits_complex(prim);
  }
  {
    auto prim = plugin.primitive("convert_element_type", lower_convert_element_type)
      .emits({"Cast", "IsNaN", "Where", "Clip", "GreaterOrEqual"})
      .doc(onnx_doc("Cast"));
    emits_complex(prim);
  }
  plugin.primitive("reduce_precision", lower_reduce_precision)
      .emits({"Cast", "Abs", "Less", "GreaterOrEqual", "Mul", "Sub", "Div", "Round", "Where"})
      .doc(onnx_doc("Cast"))
      .summary("Cast round trip (bfloat16/float16) or Veltkamp rounding, with XLA's overflow and flush");
  plugin.primitive("stop_gradient", lower_stop_gradient)
      .emits({})
      .summary("binds its input: no node");
}
