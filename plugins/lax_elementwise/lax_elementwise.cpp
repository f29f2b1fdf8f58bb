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

std::string onnx_doc(const std::string& op) {
  return "https://onnx.ai/onnx/operators/onnx__" + op + ".html";
}

Value cast(Lowering& L, Value v, const Aval& from, int32_t to) {
  if (from.dtype == to) return v;
  return L.op("Cast", {v}, from.with_dtype(to), {Attr::i("to", to)});
}

// ------------------------------------------------------- one-op primitives --

// Primitives that are exactly one ONNX op over all operands, whose output is
// the equation's output. Type support matches (JAX only allows float dtypes
// for the transcendental ones, and ONNX's Abs/Sign/Erf/arithmetic accept every
// numeric type JAX does here).
struct OneOp {
  const char* primitive;
  const char* onnx;
};

constexpr OneOp kOneOp[] = {
    {"add", "Add"},       {"sub", "Sub"},   {"div", "Div"},  // integer Div truncates, as lax.div
    {"eq", "Equal"},  // Equal takes bool too
    {"exp", "Exp"},       {"log", "Log"},   {"tanh", "Tanh"},
    {"logistic", "Sigmoid"}, {"sqrt", "Sqrt"}, {"abs", "Abs"},
    {"sign", "Sign"},     {"erf", "Erf"},
};

void lower_one_op(Lowering& L, const char* onnx) {
  L.bind(0, L.op(onnx, L.inputs(), L.out_aval(0)));
}

// mul: `out_dtype` (None unless set) asks for the product in a wider type;
// compute in that type, as XLA does.
void lower_mul(Lowering& L) {
  Aval out = L.out_aval(0);
  std::vector<Value> ins;
  for (size_t i = 0; i < L.num_inputs(); ++i) ins.push_back(cast(L, L.input(i), L.in_aval(i), out.dtype));
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
  Value y = cast(L, L.input(1), L.in_aval(1), x.dtype);
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

// ------------------------------------------------------------- comparisons --

// ONNX Less/Greater/... have no bool inputs; JAX orders False < True, which
// uint8 keeps.
void lower_order(Lowering& L, const char* onnx) {
  std::vector<Value> ins;
  for (size_t i = 0; i < 2; ++i) {
    Aval a = L.in_aval(i);
    Value v = L.input(i);
    ins.push_back(a.dtype == dtype::boolean ? cast(L, v, a, dtype::u8) : v);
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
