// lax_elementwise: JAX's elementwise lax primitives as ONNX elementwise ops.
//
// JAX has already broadcast every operand to the output shape (a scalar
// literal such as `mul a 2.0:f32[]` is the one exception, and ONNX's
// multidirectional broadcasting covers it), and JAX has already promoted all
// operands to one dtype. So most primitives are one ONNX op; the lowerings
// below exist where ONNX types or semantics differ from JAX's.
#include <jaxonnx/plugin.hpp>

#include <cmath>
#include <string>

namespace {

using namespace jaxonnx::sdk;

// ------------------------------------------------------- one-op primitives --

// Primitives that are exactly one ONNX op over all operands, whose output is
// the equation's output. JAX allows only float dtypes for the transcendental
// ones; ONNX's arithmetic, Abs and Sign accept every numeric type JAX does.
struct OneOp {
  const char* primitive;
  const char* onnx;
};

constexpr OneOp kOneOp[] = {
    {"add", "Add"},
    {"sub", "Sub"},
    {"div", "Div"},  // integer Div truncates toward zero, as lax.div does
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

void lower_one_op(Lowering& L, const char* onnx) {
  L.bind(0, L.op(onnx, L.inputs(), L.out_aval(0)));
}

// mul: `out_dtype` (None unless set) asks for the product in a wider type;
// compute in that type, as XLA does.
void lower_mul(Lowering& L) {
  Aval out = L.out_aval(0);
  std::vector<Value> ins;
  for (size_t i = 0; i < L.num_inputs(); ++i) ins.push_back(L.cast(L.input(i), L.in_aval(i), out.dtype));
  L.bind(0, L.op("Mul", ins, out));
}

// neg: ONNX Neg has no unsigned types; JAX wraps around, which 0 - x does too.
void lower_neg(Lowering& L) {
  Aval a = L.in_aval(0);
  Value x = L.input(0);
  if (dtype::is_unsigned_int(a.dtype)) {
    L.bind(0, L.op("Sub", {L.scalar(a.dtype, 0), x}, L.out_aval(0)));
  } else {
    L.bind(0, L.op("Neg", {x}, L.out_aval(0)));
  }
}

// max / min: on bool they are or / and (ONNX Max has no bool). onnxruntime's
// Max/Min propagate NaN like JAX does (tested), so floats need nothing more.
void lower_max_min(Lowering& L, const char* onnx, const char* boolean_op) {
  bool is_bool = L.in_aval(0).dtype == dtype::boolean;
  L.bind(0, L.op(is_bool ? boolean_op : onnx, L.inputs(), L.out_aval(0)));
}

// pow: x is floating; y is floating or integer. XLA converts an integer y to
// x's dtype before power(), so do the same (exact for |y| < 2^24).
void lower_pow(Lowering& L) {
  Aval x = L.in_aval(0);
  Value y = L.cast(L.input(1), L.in_aval(1), x.dtype);
  L.bind(0, L.op("Pow", {L.input(0), y}, L.out_aval(0)));
}

// integer_pow: x ** y for a static int y. JAX expands it into multiplications
// by binary exponentiation (then 1/acc for y < 0); emitting the same Mul chain
// gives bit-identical results, which Pow would not.
void lower_integer_pow(Lowering& L) {
  int64_t y = L.param("y").as_int();
  Aval out = L.out_aval(0);
  Value x = L.input(0);
  if (y == 0) {
    // A ones tensor of x's shape (NaN ** 0 is 1 too, so not x * 0 + 1).
    Value shape = L.op("Shape", {x}, Aval(dtype::i64, {out.rank()}));
    L.bind(0, L.op("Expand", {L.scalar(out.dtype, 1), shape}, out));
    return;
  }
  bool reciprocal = y < 0;
  uint64_t n = reciprocal ? 0 - static_cast<uint64_t>(y) : static_cast<uint64_t>(y);
  Value acc = kNoValue;
  while (n > 0) {
    if (n & 1) acc = acc == kNoValue ? x : L.op("Mul", {acc, x}, out);
    n >>= 1;
    if (n > 0) x = L.op("Mul", {x, x}, out);
  }
  if (reciprocal) acc = L.op("Div", {L.scalar(out.dtype, 1), acc}, out);
  L.bind(0, acc);
}

// rsqrt: 1 / sqrt(x).
void lower_rsqrt(Lowering& L) {
  Aval out = L.out_aval(0);
  L.bind(0, L.op("Reciprocal", {L.op("Sqrt", {L.input(0)}, out)}, out));
}

// erf: Erf. onnxruntime has no float64 Erf kernel, so float64 takes the
// Cephes rational approximations that XLA's own float64 erf uses (error
// ~1 ulp; NaN and +-inf come out as JAX's):
//   |x| < 1: x * T(x^2) / U(x^2)
//   else:    1 - erfc(x), erfc(x) = exp(-x^2) P(|x|)/Q(|x|)  (|x| < 8)
//                                   exp(-x^2) R(|x|)/S(|x|)  (|x| >= 8)
//            0 once exp underflows, 2 - erfc(|x|) for x < 0.
constexpr double kErfT[] = {9.60497373987051638749E0, 9.00260197203842689217E1,
                            2.23200534594684319226E3, 7.00332514112805075473E3,
                            5.55923013010394962768E4};
constexpr double kErfU[] = {1.0, 3.35617141647503099647E1, 5.21357949780152679795E2,
                            4.59432382970980127987E3, 2.26290000613890934246E4,
                            4.92673942608635921086E4};
constexpr double kErfcP[] = {2.46196981473530512524E-10, 5.64189564831068821977E-1,
                             7.46321056442269912687E0,   4.86371970985681366614E1,
                             1.96520832956077098242E2,   5.26445194995477358631E2,
                             9.34528527171957607540E2,   1.02755188689515710272E3,
                             5.57535335369399327526E2};
constexpr double kErfcQ[] = {1.0, 1.32281951154744992508E1, 8.67072140885989742329E1,
                             3.54937778887819891062E2, 9.75708501743205489753E2,
                             1.82390916687909736289E3, 2.24633760818710981792E3,
                             1.65666309194161350182E3, 5.57535340817727675546E2};
constexpr double kErfcR[] = {5.64189583547755073984E-1, 1.27536670759978104416E0,
                             5.01905042251180477414E0,  6.16021097993053585195E0,
                             7.40974269950448939160E0,  2.97886665372100240670E0};
constexpr double kErfcS[] = {1.0, 2.26052863220117276590E0, 9.39603524938001434673E0,
                             1.20489539808096656605E1, 1.70814450747565897222E1,
                             9.60896809063285878198E0, 3.36907645100081516050E0};
constexpr double kMaxLog = 7.09782712893383996843E2;  // log(DBL_MAX)

// Horner: c[0] x^(n-1) + ... + c[n-1].
template <size_t N>
Value polynomial(Lowering& L, Value x, const Aval& a, const double (&c)[N]) {
  Value y = L.scalar(a.dtype, c[0]);
  for (size_t k = 1; k < N; ++k) y = L.op("Add", {L.op("Mul", {y, x}, a), L.scalar(a.dtype, c[k])}, a);
  return y;
}

Value erf_f64(Lowering& L, Value x, const Aval& a) {
  Aval mask = a.with_dtype(dtype::boolean);
  auto k = [&](double v) { return L.scalar(a.dtype, v); };
  Value z = L.op("Mul", {x, x}, a);
  Value small = L.op("Div", {L.op("Mul", {x, polynomial(L, z, a, kErfT)}, a), polynomial(L, z, a, kErfU)}, a);

  Value ax = L.op("Abs", {x}, a);
  Value e = L.op("Exp", {L.op("Neg", {z}, a)}, a);
  Value near = L.op("Div", {polynomial(L, ax, a, kErfcP), polynomial(L, ax, a, kErfcQ)}, a);
  Value far = L.op("Div", {polynomial(L, ax, a, kErfcR), polynomial(L, ax, a, kErfcS)}, a);
  Value erfc = L.op("Mul", {e, L.op("Where", {L.op("Less", {ax, k(8.0)}, mask), near, far}, a)}, a);
  erfc = L.op("Where", {L.op("Greater", {z, k(kMaxLog)}, mask), k(0.0), erfc}, a);
  erfc = L.op("Where", {L.op("Less", {x, k(0.0)}, mask), L.op("Sub", {k(2.0), erfc}, a), erfc}, a);
  Value large = L.op("Sub", {k(1.0), erfc}, a);
  return L.op("Where", {L.op("Less", {ax, k(1.0)}, mask), small, large}, a);
}

void lower_erf(Lowering& L) {
  Aval a = L.in_aval(0);
  Value x = L.input(0);
  L.bind(0, a.dtype == dtype::f64 ? erf_f64(L, x, a) : L.op("Erf", {x}, L.out_aval(0)));
}

// ------------------------------------------------------------- comparisons --

// ONNX Less/Greater/... have no bool inputs; JAX orders False < True, which
// uint8 keeps.
void lower_order(Lowering& L, const char* onnx) {
  std::vector<Value> ins;
  for (size_t i = 0; i < 2; ++i) {
    Aval a = L.in_aval(i);
    Value v = L.input(i);
    ins.push_back(a.dtype == dtype::boolean ? L.cast(v, a, dtype::u8) : v);
  }
  L.bind(0, L.op(onnx, ins, L.out_aval(0)));
}

void lower_ne(Lowering& L) {
  Aval out = L.out_aval(0);
  L.bind(0, L.op("Not", {L.op("Equal", L.inputs(), out)}, out));
}

// ---------------------------------------------------------------- select_n --

// select_n(which, *cases) picks cases[which]. A bool `which` selects between
// two cases; an int32 one among n. For n > 2 this is the same binary tree of
// `which < mid` comparisons that JAX lowers to, so out-of-range indices behave
// the same way too.
Value select_range(Lowering& L, Value which, const Aval& which_aval, const std::vector<Value>& cases,
                   size_t lo, size_t hi, const Aval& out) {
  if (hi - lo == 1) return cases[lo];
  size_t mid = lo + (hi - lo) / 2;
  Value below = L.op("Less", {which, L.scalar(which_aval.dtype, static_cast<double>(mid))},
                     which_aval.with_dtype(dtype::boolean));
  return L.op("Where", {below, select_range(L, which, which_aval, cases, lo, mid, out),
                        select_range(L, which, which_aval, cases, mid, hi, out)},
              out);
}

void lower_select_n(Lowering& L) {
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
    L.bind(0, L.op("Where", {which, cases[1], cases[0]}, out));
  } else {
    L.bind(0, select_range(L, which, which_aval, cases, 0, cases.size(), out));
  }
}

// ------------------------------------------------------------- conversions --

// convert_element_type: Cast. ONNX Cast truncates float -> int toward zero
// and maps float -> bool as x != 0 (NaN -> true), both as JAX does. A change
// of weak_type only (same dtype) is no conversion at all.
void lower_convert_element_type(Lowering& L) {
  Aval in = L.in_aval(0);
  Aval out = L.out_aval(0);
  Value x = L.input(0);
  L.bind(0, in.dtype == out.dtype ? x : L.op("Cast", {x}, out, {Attr::i("to", out.dtype)}));
}

// stop_gradient only matters for differentiation: the value passes through.
void lower_stop_gradient(Lowering& L) { L.bind(0, L.input(0)); }

}  // namespace

JAXONNX_PLUGIN("lax_elementwise", "0.1.0") {
  for (const OneOp& e : kOneOp) {
    const char* onnx = e.onnx;
    plugin.primitive(e.primitive, [onnx](Lowering& L) { lower_one_op(L, onnx); })
        .emits({onnx})
        .doc(onnx_doc(onnx));
  }
  plugin.primitive("mul", lower_mul).emits({"Mul", "Cast"}).doc(onnx_doc("Mul"));
  plugin.primitive("neg", lower_neg).emits({"Neg", "Sub"}).doc(onnx_doc("Neg"));
  plugin.primitive("max", [](Lowering& L) { lower_max_min(L, "Max", "Or"); })
      .emits({"Max", "Or"})
      .doc(onnx_doc("Max"));
  plugin.primitive("min", [](Lowering& L) { lower_max_min(L, "Min", "And"); })
      .emits({"Min", "And"})
      .doc(onnx_doc("Min"));
  plugin.primitive("pow", lower_pow).emits({"Pow", "Cast"}).doc(onnx_doc("Pow"));
  plugin.primitive("integer_pow", lower_integer_pow)
      .emits({"Mul", "Div", "Shape", "Expand"})
      .doc(onnx_doc("Mul"))
      .summary("binary exponentiation by Mul, as JAX expands it");
  plugin.primitive("erf", lower_erf)
      .emits({"Erf", "Mul", "Add", "Sub", "Div", "Abs", "Neg", "Exp", "Less", "Greater", "Where"})
      .doc(onnx_doc("Erf"))
      .summary("Erf; float64 as XLA's rational approximation (onnxruntime has no float64 Erf)");
  plugin.primitive("rsqrt", lower_rsqrt).emits({"Sqrt", "Reciprocal"}).doc(onnx_doc("Reciprocal"));

  struct Cmp { const char* primitive; const char* onnx; };
  for (Cmp c : {Cmp{"lt", "Less"}, Cmp{"le", "LessOrEqual"},
                Cmp{"gt", "Greater"}, Cmp{"ge", "GreaterOrEqual"}}) {
    const char* onnx = c.onnx;
    plugin.primitive(c.primitive, [onnx](Lowering& L) { lower_order(L, onnx); })
        .emits({onnx, "Cast"})
        .doc(onnx_doc(onnx));
  }
  plugin.primitive("ne", lower_ne).emits({"Equal", "Not"}).doc(onnx_doc("Equal"));

  plugin.primitive("select_n", lower_select_n).emits({"Where", "Less"}).doc(onnx_doc("Where"));
  plugin.primitive("convert_element_type", lower_convert_element_type)
      .emits({"Cast"})
      .doc(onnx_doc("Cast"));
  plugin.primitive("stop_gradient", lower_stop_gradient)
      .emits({})
      .summary("binds its input: no node");
}
