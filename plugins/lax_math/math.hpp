// lax_math's shared vocabulary: Ops (elementwise ops in one working dtype,
// jaxonnx/expr.hpp, with the Lowering at hand), the lowering drivers that
// cast to and from that dtype, and the functions each file of the plugin
// defines for the registration in lax_math.cpp:
//   elementary.cpp         atan family, hyperbolics, rounding, cbrt, nextafter
//   special_functions.cpp  erfc, erf_inv, lgamma / digamma, zeta / polygamma,
//                          igamma / igammac, regularized_incomplete_beta
//   complex_lowerings.cpp  complex operands: the complex_math.hpp dispatch,
//                          sin / cos, square, complex / real / imag / conj, atan2
#pragma once

#include <jaxonnx/expr.hpp>
#include <jaxonnx/plugin.hpp>
#include <jaxonnx/special.hpp>

#include <cstdint>
#include <limits>
#include <vector>

namespace lax_math {

using namespace jaxonnx::sdk;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kPi = 3.14159265358979323846;
constexpr double kLn2 = 0.693147180559945309417;

// Elementwise ops in one floating working dtype (jaxonnx/expr.hpp), with the
// Lowering at hand for what is not elementwise (casts, Loops, shapes).
struct Ops : Expr {
  Lowering& L;
  Ops(Lowering& l, int32_t dt) : Expr(l, dt), L(l) {}
};

using special::expm1;
using special::log1p;
using special::poly;

using Fn1 = Value (*)(Ops&, Value);
using Fn2 = Value (*)(Ops&, Value, Value);

// float16/bfloat16 compute in float32 (few of these ops have half kernels,
// and XLA upcasts these functions too); the result is cast back.
int32_t working_dtype(int32_t t);
void require_float(Lowering& L, int32_t t);
// fn of input 0 (input 0 and 1) in the working dtype, bound to output 0;
// `expand`: both operands expanded to the result's shape first.
void lower_unary(Lowering& L, Fn1 fn);
void lower_binary(Lowering& L, Fn2 fn, bool expand = false);

// elementary.cpp: the float64 builds of one-op functions (onnxruntime has no
// float64 kernel for them), the other elementary functions, by arity.
Value atan_f64(Ops&, Value), asin_f64(Ops&, Value), acos_f64(Ops&, Value), tan_f64(Ops&, Value),
    cosh_f64(Ops&, Value), sinh_f64(Ops&, Value), asinh_f64(Ops&, Value), acosh_f64(Ops&, Value),
    atanh_f64(Ops&, Value);
Value round_away(Ops&, Value), cbrt(Ops&, Value), exp2(Ops&, Value), expm1_signed(Ops&, Value),
    log1p_signed(Ops&, Value);
Value atan2(Ops&, Value y, Value x), nextafter(Ops&, Value x, Value y), nextafter_f16(Ops&, Value x, Value y),
    nextafter_bf16(Ops&, Value x, Value y);

// special_functions.cpp, by arity; betainc lowers its three operands itself.
Value erfc(Ops&, Value), erf_f64(Ops&, Value), erf_inv(Ops&, Value), lgamma(Ops&, Value),
    digamma(Ops&, Value);
Value zeta(Ops&, Value x, Value q), polygamma(Ops&, Value n, Value x), igamma(Ops&, Value a, Value x),
    igammac(Ops&, Value a, Value x);
void lower_betainc(Lowering& L);

// complex_lowerings.cpp: lowerings of complex operands.
void lower_complex_unary(Lowering& L), lower_complex_sin_cos(Lowering& L, bool sin), lower_square(Lowering& L),
    lower_complex(Lowering& L), lower_real_imag(Lowering& L), lower_conj(Lowering& L), lower_atan2(Lowering& L);

}  // namespace lax_math
