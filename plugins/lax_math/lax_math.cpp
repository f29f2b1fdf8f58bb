// lax_math: JAX's transcendental, rounding and float binary math primitives
// that lax_elementwise does not cover, as ONNX elementwise ops.
//
// Where ONNX has the function (Sin, Floor, Atan, Mod, ...) it is one node.
// Where it does not (expm1, log1p, cbrt, exp2, erfc, erf_inv, lgamma,
// digamma, atan2, nextafter) the function is built from elementwise ops with
// the algorithms XLA uses (Kahan's expm1/log1p, Cephes erfc, Giles' erf_inv,
// Lanczos lgamma/digamma), so results agree with JAX to a few ulp.
//
// onnxruntime (CPU) has no float64 kernels for Tan, Asin, Acos, Atan, Sinh,
// Cosh, Asinh, Acosh, Atanh: float64 takes identities over ops it does have
// (Sin, Cos, Exp, Log, Sqrt) and Cephes' double atan, keeping f64 precision.
// float16/bfloat16 compute in float32 and cast back, as XLA does.
//
// JAX-vs-ONNX semantics handled (each tested):
//  * round: AWAY_FROM_ZERO (lax.round's default) is Round (half to even)
//    corrected on exact halves; TO_NEAREST_EVEN (jnp.round) is Round.
//  * rem: C fmod (sign of the dividend) is Mod(fmod=1). For integers XLA
//    defines x rem 0 = x and INT_MIN rem -1 = 0, where C's % traps: the
//    divisor is made safe first.
//  * clamp: min(max(x, lo), hi) with NaN-propagating Max/Min (ONNX Clip
//    ignores NaN bounds), lo/hi may be scalars.
//  * atan2 / signed zeros and infinities, nextafter without a bitcast, odd
//    functions keeping -0, erf_inv(+-1) = +-inf, digamma poles = NaN.
//  * complex operands: complex_lowerings.cpp.
//
// This file holds the registration: the table of one-op functions (with their
// float64 builds, elementary.cpp), the integer-capable lowerings (round,
// is_finite, rem, clamp) and every primitive's .emits; the function builds
// are in elementary.cpp and special_functions.cpp (math.hpp lists them).
#include "math.hpp"

#include <jaxonnx/complex.hpp>
#include <jaxonnx/complex_math.hpp>
#include <jaxonnx/max_min.hpp>

#include <string>
#include <utility>
#include <vector>

namespace lax_math {

int32_t working_dtype(int32_t t) { return t == dtype::f16 || t == dtype::bf16 ? dtype::f32 : t; }

void require_float(Lowering& L, int32_t t) {
  if (!dtype::is_float(t))
    L.fail(std::string(L.primitive()) + " takes floating operands, got " + dtype::name(t));
}

void lower_unary(Lowering& L, Fn1 fn) {
  Aval in = L.in_aval(0), out = L.out_aval(0);
  if (complex::is(in.dtype)) return lower_complex_unary(L);
  require_float(L, in.dtype);
  Ops o{L, working_dtype(in.dtype)};
  Value y = fn(o, cast(L, L.input(0), in, o.t));
  L.bind(0, cast(L, y, L.aval_of(y), out.dtype));
}

void lower_binary(Lowering& L, Fn2 fn, bool expand) {
  Aval a = L.in_aval(0), b = L.in_aval(1), out = L.out_aval(0);
  require_float(L, a.dtype);
  Ops o{L, working_dtype(a.dtype)};
  Value x = cast(L, L.input(0), a, o.t), y = cast(L, L.input(1), b, o.t);
  if (expand) {
    // Operands broadcast against each other ((1, 20) and (20, 20)) brought
    // to the result's shape: a masked Loop's carried state keeps one shape.
    if (a.shape != out.shape) x = L.op("Expand", {x, shape_value(L, out.shape)}, out.with_dtype(o.t));
    if (b.shape != out.shape) y = L.op("Expand", {y, shape_value(L, out.shape)}, out.with_dtype(o.t));
  }
  Value r = fn(o, x, y);
  L.bind(0, cast(L, r, L.aval_of(r), out.dtype));
}

// One-op functions by dtype: the ONNX op where onnxruntime has a kernel for
// the working dtype, else (float64) the identity-based build.
struct Unary {
  const char* primitive;
  const char* onnx;  // the op for float32 (and float64 when f64 is null)
  Fn1 f64;           // float64 replacement, or null
  std::vector<const char*> f64_ops;
};

// Ops the shared helpers emit, for .emits().
#define LOG1P_OPS "Add", "Sub", "Mul", "Div", "Log", "Equal", "Where"
#define ATAN_OPS "Abs", "Greater", "Less", "Where", "Div", "Sub", "Add", "Mul", "Or"
// copysign
#define SIGN_OPS "Abs", "Less", "Div", "Or", "Where", "Mul"

const Unary kUnary[] = {
    {"sin", "Sin", nullptr, {"Gather", "Exp", "Neg", "Mul", "Add", "Sub", "Abs", "Less", "Where",
                             "Cos", "Unsqueeze", "Concat"}},  // complex operands
    {"erf", "Erf", erf_f64, {"Abs", "Mul", "Add", "Sub", "Div", "Neg", "Exp", "Less", "Greater", "Where"}},
    {"cos", "Cos", nullptr, {"Gather", "Exp", "Neg", "Mul", "Add", "Sub", "Abs", "Less", "Where",
                             "Sin", "Unsqueeze", "Concat"}},  // complex operands
    {"floor", "Floor", nullptr, {}},
    {"ceil", "Ceil", nullptr, {}},
    {"tan", "Tan", tan_f64, {"Sin", "Cos", "Div"}},
    {"atan", "Atan", atan_f64, {ATAN_OPS}},
    {"asin", "Asin", asin_f64, {ATAN_OPS, "Sqrt"}},
    {"acos", "Acos", acos_f64, {ATAN_OPS, "Sqrt", "Equal"}},
    {"sinh", "Sinh", sinh_f64, {"Exp", "Log", "Sub", "Add", "Equal", SIGN_OPS}},
    {"cosh", "Cosh", cosh_f64, {"Exp", "Abs", "Sub", "Add", "Div"}},
    {"asinh", "Asinh", asinh_f64, {LOG1P_OPS, SIGN_OPS, "Sqrt", "Greater"}},
    {"acosh", "Acosh", acosh_f64, {LOG1P_OPS, "Sqrt", "Greater"}},
    {"atanh", "Atanh", atanh_f64, {LOG1P_OPS, SIGN_OPS}},
};

void lower_table_unary(Lowering& L, const Unary& u) {
  Aval in = L.in_aval(0);
  if (complex::is(in.dtype) && (u.onnx == std::string("Sin") || u.onnx == std::string("Cos")))
    return lower_complex_sin_cos(L, u.onnx == std::string("Sin"));
  if (complex::is(in.dtype)) return lower_complex_unary(L);
  require_float(L, in.dtype);
  if (in.dtype == dtype::f64 && u.f64) {
    lower_unary(L, u.f64);
    return;
  }
  int32_t t = working_dtype(in.dtype);
  Value y = L.op(u.onnx, {cast(L, L.input(0), in, t)}, in.with_dtype(t));
  L.bind(0, cast(L, y, in.with_dtype(t), in.dtype));
}

// round: rounding_method 0 = AWAY_FROM_ZERO, 1 = TO_NEAREST_EVEN.
void lower_round(Lowering& L) {
  int64_t method = L.param("rounding_method").as_int();
  if (method == 1) {
    lower_unary(L, [](Ops& o, Value x) { return o.f("Round", {x}); });
  } else if (method == 0) {
    lower_unary(L, round_away);
  } else {
    L.fail("round: unsupported rounding_method " + std::to_string(method));
  }
}

// is_finite: |x| < inf, false for NaN.
void lower_is_finite(Lowering& L) {
  lower_unary(L, [](Ops& o, Value x) { return o.lt(o.abs(x), o.k(kInf)); });
}

// rem: sign of the dividend. Floats: Mod(fmod=1) (x rem 0 = NaN, x rem inf =
// x, as JAX). Integers: XLA gives x rem 0 = x and INT_MIN rem -1 = 0, where
// C's % traps; since x rem y == x rem |y| for truncated remainders, divide by
// |y| (Abs(INT_MIN) wraps to INT_MIN, still a safe divisor) or by 1 for y == 0.
// onnxruntime's integer Mod(fmod=1) goes through double fmod, inexact beyond
// 2^53: 64-bit integers take x - (x / d) * d (Div truncates) instead.
void lower_rem(Lowering& L) {
  Aval a = L.in_aval(0), b = L.in_aval(1), out = L.out_aval(0);
  const Attr fmod = Attr::i("fmod", 1);
  if (dtype::is_float(a.dtype)) {
    lower_binary(L, [](Ops& o, Value x, Value y) { return o.op("Mod", {x, y}, o.t, {Attr::i("fmod", 1)}); });
    return;
  }
  Value x = L.input(0), y = L.input(1);
  Aval mask = b.with_dtype(dtype::boolean);
  Value zero = L.op("Equal", {y, scalar(L, b.dtype, 0)}, mask);
  Value d = dtype::is_signed_int(b.dtype) ? L.op("Abs", {y}, b) : y;
  d = where(L, zero, scalar(L, b.dtype, 1), d, b);
  Value r = dtype::itemsize(out.dtype) == 8
                ? L.op("Sub", {x, L.op("Mul", {L.op("Div", {x, d}, out), d}, out)}, out)
                : L.op("Mod", {x, d}, out, {fmod});
  L.bind(0, where(L, zero, x, r, out));
}

// clamp(lo, x, hi) = min(max(x, lo), hi), as XLA: NaN in any operand gives
// NaN, lo > hi gives hi. Not Clip: onnxruntime's Clip ignores NaN bounds.
// Max/Min have no 16-bit integer kernels in onnxruntime (int32 holds them);
// on bool, max/min are or/and.
void lower_clamp(Lowering& L) {
  Aval lo = L.in_aval(0), x = L.in_aval(1), hi = L.in_aval(2), out = L.out_aval(0);
  // JAX's clamp of complex values follows neither the lexicographic order of
  // its max/min nor the real parts alone (clamp(0, 1+2j, 1+1j) is 1+2j).
  if (complex::is(x.dtype)) L.fail("clamp of complex operands is not lowered (XLA's order for it is unspecified)");
  if (x.dtype == dtype::boolean) {
    Value m = L.op("Or", {L.input(1), L.input(0)}, out);
    L.bind(0, L.op("And", {m, L.input(2)}, out));
    return;
  }
  int32_t t = x.dtype == dtype::i16 || x.dtype == dtype::u16 ? dtype::i32 : working_dtype(x.dtype);
  Aval w = out.with_dtype(t);
  // max_or_min: Max/Min, but Where for int64 (onnxruntime's int64 Max/Min compare wrongly).
  Value m = max_or_min(L, true, cast(L, L.input(1), x, t), cast(L, L.input(0), lo, t), w);
  Value r = max_or_min(L, false, m, cast(L, L.input(2), hi, t), w);
  L.bind(0, cast(L, r, w, out.dtype));
}

// Registers a primitive; `ops` may repeat (the helpers' op lists overlap),
// each is declared once.
Plugin::PrimitiveRef add(Plugin& plugin, const char* name, LowerFn fn, std::vector<const char*> ops,
                         const char* doc_op, std::string summary = "") {
  auto ref = plugin.primitive(name, std::move(fn));
  std::vector<std::string> seen;
  for (const char* op : ops) {
    bool dup = false;
    for (const std::string& s : seen) dup = dup || s == op;
    if (!dup) { seen.emplace_back(op); ref.emits({op}); }
  }
  if (doc_op) ref.doc(onnx_doc(doc_op));
  if (!summary.empty()) ref.summary(std::move(summary));
  return ref;
}

void lower_nextafter(Lowering& L) {
  int32_t t = L.in_aval(0).dtype;
  if (!dtype::is_float(t)) L.fail(std::string("nextafter takes floats, got ") + dtype::name(t));
  lower_binary(L, t == dtype::f16 ? nextafter_f16 : t == dtype::bf16 ? nextafter_bf16 : nextafter);
}

}  // namespace lax_math

using namespace lax_math;

JAXONNX_PLUGIN("lax_math", "0.1.0") {
  for (const Unary& u : kUnary) {
    const Unary* e = &u;
    std::vector<const char*> ops = {u.onnx, "Cast"};
    ops.insert(ops.end(), u.f64_ops.begin(), u.f64_ops.end());
    auto ref = add(plugin, u.primitive, [e](Lowering& L) { lower_table_unary(L, *e); }, ops, u.onnx,
                   u.f64 ? std::string(u.onnx) + "; float64 built from other ops (onnxruntime has no float64 " +
                               u.onnx + ")"
                         : "");
    if (complex::function(u.primitive)) complex::emits_functions(ref);
  }
  auto unary = [](Fn1 fn) { return [fn](Lowering& L) { lower_unary(L, fn); }; };
  add(plugin, "round", lower_round, {"Round", "Sub", "Abs", "Equal", "Sign", "Mul", "Where", "Cast"},
      "Round", "Round (half to even); half away from zero corrects exact halves");
  add(plugin, "is_finite", lower_is_finite, {"Abs", "Less", "Cast"}, "Less", "|x| < inf");
  complex::emits_functions(add(plugin, "exp2", unary(exp2), {"Pow", "Cast"}, "Pow", "Pow(2, x)"));
  add(plugin, "cbrt", unary(cbrt), {"Pow", SIGN_OPS, "Cast"}, "Pow", "sign(x) |x|^(1/3)");
  complex::emits_functions(add(plugin, "expm1", unary(expm1_signed), {"Exp", "Log", "Sub", "Equal", SIGN_OPS, "Cast"}, "Exp",
      "Kahan's expm1 from Exp and Log"));
  complex::emits_functions(add(plugin, "log1p", unary(log1p_signed), {LOG1P_OPS, SIGN_OPS, "Cast"}, "Log",
      "Kahan's log1p from Log"));
  add(plugin, "erfc", unary(erfc),
      {"Abs", "Mul", "Add", "Sub", "Div", "Neg", "Exp", "Less", "Greater", "Where", "Cast"}, "Exp",
      "XLA's (Cephes) rational approximations of erf/erfc");
  add(plugin, "erf_inv", unary(erf_inv), {LOG1P_OPS, SIGN_OPS, "Neg", "Sqrt", "Cast"}, "Log",
      "Giles' erfinv polynomials, as XLA");
  add(plugin, "lgamma", unary(lgamma),
      {LOG1P_OPS, "Neg", "Less", "Greater", "Abs", "Floor", "Sin", "Cast"}, "Log",
      "Lanczos approximation with reflection, as XLA");
  add(plugin, "zeta", [](Lowering& L) { lower_binary(L, zeta); },
      {"Pow", "Neg", "Add", "Sub", "Mul", "Div", "Floor", "Equal", "Less", "LessOrEqual", "And", "Not",
       "Where", "Cast"},
      "Pow", "Hurwitz zeta by Euler-Maclaurin summation, as Cephes");
  add(plugin, "polygamma", [](Lowering& L) { lower_binary(L, polygamma); },
      {"Pow", "Neg", "Add", "Sub", "Mul", "Div", "Floor", "Equal", "Less", "LessOrEqual", "And", "Not",
       "Or", "Exp", "Log", "Greater", "Abs", "Sin", "Cos", "Where", "Cast"},
      "Pow", "(-1)^(n+1) n! zeta(n+1, x); digamma for n = 0");
  for (auto [name, fn] : {std::pair<const char*, Fn2>{"igamma", igamma}, {"igammac", igammac}})
    add(plugin, name, [fn = fn](Lowering& L) { lower_binary(L, fn, /*expand=*/true); },
        {"Loop", "ReduceMax", "Expand", LOG1P_OPS, "IsNaN", "Or", "And", "Not", "Less", "Greater",
         "GreaterOrEqual", "Abs", "Floor", "Sin", "Neg", "Exp", "Cast", "Shape", "Concat"},
        "Loop", "Cephes' series / continued fraction in masked Loops, as JAX");
  add(plugin, "regularized_incomplete_beta", lower_betainc,
      {"Loop", "ReduceMax", "Expand", LOG1P_OPS, "IsNaN", "Or", "And", "Not", "Less", "Greater",
       "GreaterOrEqual", "Abs", "Floor", "Sin", "Neg", "Exp", "Mod", "Cast", "Shape", "Concat"},
      "Loop", "Lentz's continued fraction in a Loop, as JAX");
  add(plugin, "digamma", unary(digamma),
      {LOG1P_OPS, "Neg", "Less", "LessOrEqual", "And", "Abs", "Floor", "Sin", "Cos", "Cast"}, "Log",
      "Lanczos approximation with reflection, as XLA");
  auto atan2_prim = add(plugin, "atan2", lower_atan2,
      {"Atan", ATAN_OPS, "Max", "Min", "Equal", "Cast", "Expand", "Pad"}, "Atan",
      "Atan of min(|x|,|y|)/max(|x|,|y|) and the octant; float64 via Cephes atan; "
      "complex: -i log((x + iy) / sqrt(x^2 + y^2))");
  complex::emits_functions(atan2_prim);
  atan2_prim.emits_shape_ops();  // complex: a literal operand expanded
  add(plugin, "nextafter", lower_nextafter, {"Sign", "Sub", "Add", "LessOrEqual", "Equal", "Cast", SIGN_OPS},
      "Add", "exact float arithmetic (ONNX has no bitcast)");
  add(plugin, "rem", lower_rem, {"Mod", "Equal", "Abs", "Where", "Div", "Mul", "Sub", "Cast"}, "Mod",
      "Mod(fmod=1); integer divisors made safe");
  add(plugin, "clamp", lower_clamp, {"Max", "Min", "Or", "And", "Cast", "Greater", "Less", "Where"}, "Max",
      "Min(Max(x, lo), hi); int64 through Where");
  add(plugin, "square", lower_square, {"Mul", "Gather", "Sub", "Add", "Unsqueeze", "Concat"}, "Mul",
      "x * x (complex: the product of the packed parts)");
  add(plugin, "complex", lower_complex, {"Expand", "Unsqueeze", "Concat", "Shape", "Concat", "Add", "Sub", "Mul", "Neg", "Mod", "Div", "Max", "Min"}, "Concat",
      "packs re and im as float[..., 2]");
  add(plugin, "real", lower_real_imag, {"Gather"}, "Gather", "[..., 0] of the packed form");
  add(plugin, "imag", lower_real_imag, {"Gather"}, "Gather", "[..., 1] of the packed form");
  add(plugin, "conj", lower_conj, {"Mul", "Cast", "Unsqueeze", "Pad"}, "Mul",
      "packed form times [1, -1]; a real operand gets a zero imaginary part");
}
