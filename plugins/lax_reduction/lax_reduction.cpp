// lax_reduction: reduce_sum / reduce_max / reduce_min / argmax as ONNX
// ReduceSum / ReduceMax / ReduceMin / ArgMax.
//
// From opset 18 every Reduce* op takes its axes as an int64 input tensor; JAX
// drops the reduced axes, so keepdims=0. An empty axes tuple is the identity
// in JAX but "reduce everything" in ONNX, so it emits no node at all.
//
// NaN: JAX's max/min reductions and argmax propagate NaN (argmax returns the
// index of the first NaN), while onnxruntime's ReduceMax/ReduceMin/ArgMax
// skip NaNs. For floating inputs a NaN mask restores JAX's answer.
#include <jaxonnx/plugin.hpp>

#include <cmath>
#include <string>

namespace {

using namespace jaxonnx::sdk;

// The shape `in` has after reducing `axes` away (keepdims=0).
Shape reduced_shape(const Shape& in, const std::vector<int64_t>& axes) {
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    bool reduced = false;
    for (int64_t a : axes) reduced |= a == static_cast<int64_t>(i);
    if (!reduced) out.push_back(in[i]);
  }
  return out;
}

Value reduce(Lowering& L, const char* op, Value x, const std::vector<int64_t>& axes, const Aval& out) {
  return L.op(op, {x, L.i64s(axes)}, out, {Attr::i("keepdims", 0)});
}

// ReduceMax/ReduceMin over bool: accepted from opset 20; before that, through
// uint8 (max = any, min = all).
Value reduce_bool(Lowering& L, const char* op, Value x, const Aval& in, const std::vector<int64_t>& axes) {
  Aval out(dtype::boolean, reduced_shape(in.shape, axes));
  if (L.opset() >= 20) return reduce(L, op, x, axes, out);
  Value r = reduce(L, op, L.cast(x, in, dtype::u8), axes, out.with_dtype(dtype::u8));
  return L.op("Cast", {r}, out, {Attr::i("to", dtype::boolean)});
}

// ------------------------------------------------------------------ reduce --

void lower_reduce_sum(Lowering& L) {
  Aval in = L.in_aval(0);
  std::vector<int64_t> axes = L.axes_param("axes", in.rank());
  Value x = L.input(0);
  L.bind(0, axes.empty() ? x : reduce(L, "ReduceSum", x, axes, L.out_aval(0)));
}

// reduce_max / reduce_min. For floats: Where(any(IsNaN(x)), NaN, Reduce(x)).
void lower_reduce_extremum(Lowering& L, const char* op) {
  Aval in = L.in_aval(0);
  Aval out = L.out_aval(0);
  std::vector<int64_t> axes = L.axes_param("axes", in.rank());
  Value x = L.input(0);
  if (axes.empty()) {
    L.bind(0, x);
    return;
  }
  if (in.dtype == dtype::boolean) {
    L.bind(0, reduce_bool(L, op, x, in, axes));
    return;
  }
  Value r = reduce(L, op, x, axes, out);
  if (dtype::is_float(in.dtype)) {
    Value isnan = L.op("IsNaN", {x}, in.with_dtype(dtype::boolean));
    Value any_nan = reduce_bool(L, "ReduceMax", isnan, in.with_dtype(dtype::boolean), axes);
    r = L.op("Where", {any_nan, L.scalar(out.dtype, NAN), r}, out);
  }
  L.bind(0, r);
}

// ------------------------------------------------------------------ argmax --

// argmax(x, axes=(k,), index_dtype): ArgMax keeps the first of equal maxima,
// as JAX does, and yields int64. A NaN wins in JAX: when a slice holds one,
// the answer is ArgMax of the NaN mask (its first true).
void lower_argmax(Lowering& L) {
  Aval in = L.in_aval(0);
  Aval out = L.out_aval(0);
  std::vector<int64_t> axes = L.axes_param("axes", in.rank());
  if (axes.size() != 1) L.fail("argmax reduces exactly one axis, got " + std::to_string(axes.size()));
  const std::vector<Attr> attrs = {Attr::i("axis", axes[0]), Attr::i("keepdims", 0)};
  Aval index = out.with_dtype(dtype::i64);

  Value x = L.input(0);
  if (in.dtype == dtype::boolean) x = L.cast(x, in, dtype::u8);  // ArgMax has no bool
  Value r = L.op("ArgMax", {x}, index, attrs);
  if (dtype::is_float(in.dtype)) {
    Aval mask = in.with_dtype(dtype::boolean);
    Value isnan = L.op("IsNaN", {x}, mask);
    Value first_nan = L.op("ArgMax", {L.cast(isnan, mask, dtype::u8)}, index, attrs);
    Value any_nan = reduce_bool(L, "ReduceMax", isnan, mask, axes);
    r = L.op("Where", {any_nan, first_nan, r}, index);
  }
  L.bind(0, L.cast(r, index, out.dtype));
}

}  // namespace

JAXONNX_PLUGIN("lax_reduction", "0.1.0") {
  plugin.primitive("reduce_sum", lower_reduce_sum).emits({"ReduceSum"}).doc(onnx_doc("ReduceSum"));
  plugin.primitive("reduce_max", [](Lowering& L) { lower_reduce_extremum(L, "ReduceMax"); })
      .emits({"ReduceMax", "IsNaN", "Where", "Cast"})
      .doc(onnx_doc("ReduceMax"));
  plugin.primitive("reduce_min", [](Lowering& L) { lower_reduce_extremum(L, "ReduceMin"); })
      .emits({"ReduceMin", "ReduceMax", "IsNaN", "Where", "Cast"})
      .doc(onnx_doc("ReduceMin"));
  plugin.primitive("argmax", lower_argmax)
      .emits({"ArgMax", "IsNaN", "ReduceMax", "Where", "Cast"})
      .doc(onnx_doc("ArgMax"));
}
