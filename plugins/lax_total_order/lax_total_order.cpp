// lax_total_order: lt_to / le_to / eq_to, JAX's comparisons in the IEEE total
// order (what jnp.searchsorted, jnp.interp and jnp.digitize compare with).
//
// Integers and bool order as usual (Less / LessOrEqual / Equal; bool via
// uint8, which keeps False < True). Floats order
//   -inf < ... < -0.0 < +0.0 < ... < +inf < NaN,
// so -0.0 and +0.0 differ and NaN equals NaN:
//   lt_to(x, y) = x < y
//               | (x == y & 1/x < 1/y)       -- only (-0.0, +0.0): -inf < +inf
//               | (!isnan(x) & isnan(y))
//   le_to(x, y) = !lt_to(y, x),  eq_to(x, y) = !lt_to(x, y) & !lt_to(y, x).
// Known difference: XLA puts a NaN with its sign bit set below -inf; ONNX
// (<= opset 23) cannot read a NaN's sign bit, so every NaN ranks above +inf
// (as in lax_sort's top_k).  float16/bfloat16 compare in float32 (exact).
#include <jaxonnx/plugin.hpp>

#include <string>

namespace {

using namespace jaxonnx::sdk;

enum class Cmp { Lt, Le, Eq };

// lt_to over floats of aval `a` (float32/float64).
Value float_lt(Lowering& L, Value x, Value y, const Aval& a) {
  const Aval b = a.with_dtype(dtype::boolean);
  Value lt = L.op("Less", {x, y}, b);
  Value zeros = L.op("And", {L.op("Equal", {x, y}, b),
                             L.op("Less", {L.op("Reciprocal", {x}, a), L.op("Reciprocal", {y}, a)}, b)},
                     b);
  Value nan = L.op("And", {L.op("Not", {L.op("IsNaN", {x}, b)}, b), L.op("IsNaN", {y}, b)}, b);
  return L.op("Or", {L.op("Or", {lt, zeros}, b), nan}, b);
}

void lower(Lowering& L, Cmp cmp) {
  const Aval a = L.in_aval(0), out = L.out_aval(0);
  Value x = L.input(0), y = L.input(1);
  if (dtype::is_float(a.dtype)) {
    const int32_t c = a.dtype == dtype::f64 ? dtype::f64 : dtype::f32;
    const Aval ca = a.with_dtype(c);
    x = cast(L, x, a, c);
    y = cast(L, y, L.in_aval(1), c);
    switch (cmp) {
      case Cmp::Lt: L.bind(0, float_lt(L, x, y, ca)); return;
      case Cmp::Le: L.bind(0, L.op("Not", {float_lt(L, y, x, ca)}, out)); return;
      case Cmp::Eq:
        L.bind(0, L.op("Not", {L.op("Or", {float_lt(L, x, y, ca), float_lt(L, y, x, ca)}, out)}, out));
        return;
    }
  }
  if (a.dtype == dtype::boolean && cmp != Cmp::Eq) {
    x = cast(L, x, a, dtype::u8);
    y = cast(L, y, L.in_aval(1), dtype::u8);
  }
  const char* op = cmp == Cmp::Lt ? "Less" : cmp == Cmp::Le ? "LessOrEqual" : "Equal";
  L.bind(0, L.op(op, {x, y}, out));
}

}  // namespace

JAXONNX_PLUGIN("lax_total_order", "0.1.0") {
  plugin.primitive("lt_to", [](Lowering& L) { lower(L, Cmp::Lt); })
      .emits({"Less", "Equal", "Reciprocal", "IsNaN", "Not", "And", "Or", "Cast"})
      .summary("x < y in the IEEE total order (-0.0 < +0.0, NaN above +inf)");
  plugin.primitive("le_to", [](Lowering& L) { lower(L, Cmp::Le); })
      .emits({"Less", "LessOrEqual", "Equal", "Reciprocal", "IsNaN", "Not", "And", "Or", "Cast"})
      .summary("x <= y in the IEEE total order: not lt_to(y, x)");
  plugin.primitive("eq_to", [](Lowering& L) { lower(L, Cmp::Eq); })
      .emits({"Less", "Equal", "Reciprocal", "IsNaN", "Not", "And", "Or", "Cast"})
      .summary("x == y in the IEEE total order (-0.0 != +0.0, NaN == NaN)");
}
