// onnx_fusion: rewrite rules (ABI 1.2) that turn the decompositions JAX
// programs lower to into fused ONNX ops, so that a layer norm or softmax
// written in jnp gives the same graph as the library call. The core's fuse
// pass applies them; to_onnx(..., fuse=False) keeps the decompositions.
//
// Numeric policy: a fused op agrees with JAX within float rounding on finite
// inputs (it re-associates, nothing more). Differences on NaN/inf are listed
// in docs/coverage.md (the rules section). Every rule checks onnxruntime's CPU
// kernel table (jaxonnx/kernels.hpp, through plugin.hpp) for the dtype before it fuses.
//
// Rules match from the last node of a chain backwards. Intermediates a rule
// would remove must have no reader outside the chain (otherwise fusing would
// duplicate work rather than save it); every constant must be the one the
// decomposition needs (a softmax over a sum divided by anything but the sum is
// not a softmax).
#include <jaxonnx/plugin.hpp>
#include <jaxonnx/reshape_by_value.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;
using Axes = std::vector<int64_t>;

constexpr int64_t kNone = -1;

bool float_type(const Aval& a) { return a.dtype == dtype::f32 || a.dtype == dtype::f64; }

// Every dim 1: one element, however shaped (a scalar constant broadcast anywhere).
bool all_ones(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](const Dim& d) { return d == Dim(1); });
}

// The other input of binary node `n`, when input `i` is `v`; kNoValue else.
Value other(Rewrite& R, int64_t n, Value v) {
  if (R.input(n, 0) == v) return R.input(n, 1);
  if (R.input(n, 1) == v) return R.input(n, 0);
  return kNoValue;
}

// For a commutative binary node `n` with one operand a constant splat
// satisfying `pred`, the other operand.
template <typename Pred>
Value with_const(Rewrite& R, int64_t n, Pred pred) {
  if (n < 0 || R.num_inputs(n) != 2) return kNoValue;
  for (int k = 0; k < 2; ++k) {
    auto c = R.splat(R.input(n, k));
    if (c && pred(*c)) return R.input(n, 1 - k);
  }
  return kNoValue;
}
Value with_const(Rewrite& R, int64_t n, double want) {
  return with_const(R, n, [want](double c) {
    return std::fabs(c - want) <= 1e-6 * std::max(1.0, std::fabs(want));
  });
}

// Follows single-use Reshape / Unsqueeze / Squeeze back to their source: the
// lowering moves reduced values between keepdims shapes with these.
Value skip_reshapes(Rewrite& R, Value v) {
  for (;;) {
    int64_t n = R.producer(v);
    if (!(R.is(n, "Reshape") || R.is(n, "Unsqueeze") || R.is(n, "Squeeze")) ||
        !R.single_use(v))
      return v;
    v = R.input(n, 0);
  }
}

// `v` is zero everywhere: a zero splat, possibly broadcast (Expand) and reshaped.
bool is_zero(Rewrite& R, Value v) {
  for (;;) {
    if (auto c = R.splat(v)) return *c == 0.0;
    int64_t n = R.producer(v);
    if (!(R.is(n, "Reshape") || R.is(n, "Unsqueeze") || R.is(n, "Expand"))) return false;
    v = R.input(n, 0);
  }
}

// A reduction `op` of x over `axes` (normalized, sorted), at value v.
struct Reduction {
  Value x = kNoValue;
  Axes axes;
};
std::optional<Reduction> reduction(Rewrite& R, Value v, std::string_view op) {
  int64_t n = R.def(v, op);
  if (n < 0) return std::nullopt;
  Reduction r{R.input(n, 0), {}};
  Aval x = R.aval(r.x);
  if (x.rank() < 0) return std::nullopt;
  std::optional<std::vector<int64_t>> axes = R.attr_ints(n, "axes");
  if (!axes && R.num_inputs(n) > 1) {
    auto values = R.constant_values(R.input(n, 1));
    if (!values) return std::nullopt;
    axes = std::vector<int64_t>(values->begin(), values->end());
  }
  if (!axes || axes->empty()) return std::nullopt;  // all axes (or noop_with_empty_axes): not ours
  for (int64_t a : *axes) r.axes.push_back(a < 0 ? a + x.rank() : a);
  std::sort(r.axes.begin(), r.axes.end());
  return r;
}

// `v` has x's shape with `axes` set to 1: a reduction kept for broadcasting.
bool keepdims_of(Rewrite& R, Value v, Value x, const Axes& axes) {
  Aval a = R.aval(v), b = R.aval(x);
  if (a.rank() < 0 || a.rank() != b.rank()) return false;
  for (int64_t i = 0; i < b.rank(); ++i) {
    bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (reduced ? a.shape[i] != Dim(1) : a.shape[i] != b.shape[i]) return false;
  }
  return true;
}

// The static element count of x over `axes`, or -1.
int64_t count_over(Rewrite& R, Value x, const Axes& axes) {
  Aval a = R.aval(x);
  int64_t n = 1;
  for (int64_t i : axes) {
    if (i >= a.rank() || !a.shape[i].is_static()) return -1;
    n *= a.shape[i].value;
  }
  return n;
}

// mean(x) over axes at v: ReduceMean, or ReduceSum divided (or multiplied by
// the reciprocal) by the element count.
std::optional<Reduction> mean(Rewrite& R, Value v) {
  v = skip_reshapes(R, v);
  if (auto r = reduction(R, v, "ReduceMean")) return r;
  int64_t n = R.def(v, "Div");
  Value sum = kNoValue;
  std::optional<double> k;
  if (n >= 0) {
    sum = R.input(n, 0);
    k = R.splat(R.input(n, 1));
    if (k) k = 1.0 / *k;
  } else if ((n = R.def(v, "Mul")) >= 0) {
    for (int i = 0; i < 2 && sum == kNoValue; ++i)
      if ((k = R.splat(R.input(n, i)))) sum = R.input(n, 1 - i);
  }
  if (sum == kNoValue || !k || !R.single_use(sum)) return std::nullopt;
  auto r = reduction(R, skip_reshapes(R, sum), "ReduceSum");
  if (!r) return std::nullopt;
  int64_t count = count_over(R, r->x, r->axes);
  if (count <= 0 || std::fabs(*k * count - 1.0) > 1e-6) return std::nullopt;
  return r;
}

// The factors of a product: values with a power of +1 or -1, and a constant.
struct Factor {
  Value v;
  int power;
};
struct Product {
  std::vector<Factor> factors;
  double scale = 1;
};
// Expands Mul, Div, Neg and Reciprocal nodes read only by the product (the
// root always), folding constant splats into `scale`.
void expand(Rewrite& R, Value v, int power, bool root, Product& p) {
  if (auto c = R.splat(v)) {
    if (*c == 0) { p.scale = 0; return; }
    p.scale *= power > 0 ? *c : 1.0 / *c;
    return;
  }
  int64_t n = R.producer(v);
  bool open = n >= 0 && R.num_outputs(n) == 1 && (root || R.single_use(v));
  if (open && R.is(n, "Mul")) {
    expand(R, R.input(n, 0), power, false, p);
    expand(R, R.input(n, 1), power, false, p);
  } else if (open && R.is(n, "Div")) {
    expand(R, R.input(n, 0), power, false, p);
    expand(R, R.input(n, 1), -power, false, p);
  } else if (open && R.is(n, "Neg")) {
    p.scale = -p.scale;
    expand(R, R.input(n, 0), power, false, p);
  } else if (open && R.is(n, "Reciprocal")) {
    expand(R, R.input(n, 0), -power, false, p);
  } else {
    p.factors.push_back({v, power});
  }
}
Product product(Rewrite& R, Value v) {
  Product p;
  expand(R, v, 1, true, p);
  return p;
}

bool near(double a, double b, double tol = 1e-6) { return std::fabs(a - b) <= tol * std::max(1.0, std::fabs(b)); }

// ------------------------------------------------------------- MatMul+Add --

// Add(MatMul(A, B), C) with A, B 2-D -> Gemm(A, B, C). C must broadcast to
// the [M, N] result one way (Gemm's C is unidirectionally broadcast).
void matmul_add_to_gemm(Rewrite& R) {
  int64_t add = R.root();
  for (int k = 0; k < 2; ++k) {
    Value mm = R.input(add, k), c = R.input(add, 1 - k);
    int64_t m = R.def(mm, "MatMul");
    if (m < 0 || !R.single_use(mm)) continue;
    Value a = R.input(m, 0), b = R.input(m, 1);
    // A quantized weight stays in a MatMul: onnxruntime fuses DequantizeLinear
    // into MatMul (MatMulNBits), never into Gemm (plugins/quantization).
    if (R.def(b, "DequantizeLinear") >= 0) continue;
    Aval ta = R.aval(a), tb = R.aval(b), tc = R.aval(c), out = R.aval(R.output(add));
    if (ta.rank() != 2 || tb.rank() != 2 || tc.rank() < 0 || tc.rank() > 2) continue;
    if (!float_type(out) || tc.dtype != out.dtype || !kernels::has("Gemm", out.dtype)) continue;
    Aval prod = R.aval(mm);
    if (prod.rank() != 2 || out.shape != prod.shape) continue;  // C must not widen the result
    bool fits = true;
    for (int64_t i = 0; i < tc.rank(); ++i) {
      const Dim& d = tc.shape[tc.rank() - 1 - i];
      fits = fits && (d == Dim(1) || d == prod.shape[1 - i]);
    }
    if (!fits) continue;
    R.replace(R.output(add), R.op("Gemm", {a, b, c}, out));
    return;
  }
}

// ----------------------------------------------------------- zero operand --

// MatMul(Z, W) or Gemm(Z, W[, C]) with Z zeros broadcast to a runtime shape
// (Expand(0, s) or ConstantOfShape(s): a scan's zero initial state met by the
// recurrent weights) and W a 2-D constant whose every element is finite ->
// zeros of the result's shape (plus C for Gemm, added as Gemm adds it).
// Exact: each product is a signed zero and the sum +0, as JAX's dot (it
// accumulates from +0); an infinite or NaN weight (0 * inf is NaN) keeps the
// product. tract (0.23) fails on a product with a uniform input.
void matmul_of_zeros(Rewrite& R) {
  const int64_t n = R.root();
  const Value out = R.output(n);
  const Aval oa = R.aval(out);
  if (oa.rank() < 1 || !float_type(oa) || !oa.shape.back().is_static()) return;
  const bool gemm = R.is(n, "Gemm");  // the LSTM cell's lowering emits Gemm itself
  if (gemm && (R.attr_int(n, "transA", 0) != 0 || R.attr_float(n, "beta", 1.0) != 1.0 ||
               !std::isfinite(R.attr_float(n, "alpha", 1.0))))
    return;
  const Value z = R.input(n, 0);
  const Aval za = R.aval(z);
  Value shape = kNoValue;  // z's runtime shape
  if (const int64_t e = R.def(z, "Expand"); e >= 0 && R.is_splat(R.input(e, 0), 0.0)) {
    shape = R.input(e, 1);
  } else if (const int64_t c = R.def(z, "ConstantOfShape"); c >= 0) {
    const jxo_attr* value = R.attr(c, "value");
    if (value) return;  // (a value attribute: not read here; JAX's zeros come as Expand)
    shape = R.input(c, 0);
  } else {
    return;
  }
  const Aval sa = R.aval(shape);
  if (za.rank() < 1 || za.dtype != oa.dtype || sa.rank() != 1 || !sa.shape[0].is_static() ||
      sa.shape[0].value != za.rank())
    return;
  const Aval wa = R.aval(R.input(n, 1));
  if (wa.rank() != 2) return;
  auto w = R.constant_values(R.input(n, 1));
  if (!w) return;
  for (double x : *w)
    if (!std::isfinite(x)) return;
  // The result's shape: z's without its last dim, then N.
  const int64_t rank = za.rank();
  Value lead = R.op("Slice", {shape, R.i64s({0}), R.i64s({rank - 1}), R.i64s({0})}, Aval(dtype::i64, {rank - 1}));
  Value out_shape = R.op("Concat", {lead, R.i64s({oa.shape.back().value})}, Aval(dtype::i64, {rank}),
                         {Attr::i("axis", 0)});
  Value zeros = R.op("Expand", {R.scalar(oa.dtype, 0.0), out_shape}, oa);
  if (gemm && R.num_inputs(n) > 2 && R.input(n, 2) != kNoValue)  // + C, as Gemm adds it
    zeros = R.op("Add", {zeros, R.input(n, 2)}, oa);
  R.replace(out, zeros);
}

// --------------------------------------------------------------- Conv bias --

// Add(Transpose(Conv(x, w)), c) with c a constant that varies only along the
// Conv's channels (a flax or equinox Conv's bias, added after the transpose
// back to channels-last) -> Transpose(Conv(x, w, c as [C])). onnxruntime folds
// no Add a Transpose separates from its Conv; Conv's bias input is free.
// Add(Conv(x, w), c) itself (equinox's Conv2d adds a (C, 1, 1) bias to the
// channels-first result) takes the bias the same way.
void conv_bias(Rewrite& R) {
  const int64_t add = R.root();
  for (int k = 0; k < 2; ++k) {
    Value t = R.input(add, k), c = R.input(add, 1 - k);
    const int64_t tr = R.def(t, "Transpose");
    if (!R.single_use(t)) continue;
    Value y = tr >= 0 ? R.input(tr, 0) : t;
    const int64_t conv = R.def(y, "Conv");
    if (conv < 0 || !R.single_use(y) || R.num_inputs(conv) != 2 || R.attr(conv, "auto_pad")) continue;
    const jxo_tensor* bias = R.constant(c);
    const Aval tc = R.aval(c), ty = R.aval(t), out = R.aval(R.output(add)), yc = R.aval(y);
    std::optional<std::vector<int64_t>> perm;
    if (tr >= 0) {
      perm = R.attr_ints(tr, "perm");
    } else if (ty.rank() >= 0) {
      perm = std::vector<int64_t>();
      for (int64_t i = 0; i < ty.rank(); ++i) perm->push_back(i);
    }
    const int64_t rank = ty.rank();
    if (!bias || !float_type(out) || tc.dtype != out.dtype || yc.dtype != out.dtype || rank < 3 ||
        tc.rank() < 1 || tc.rank() > rank || ty.shape != out.shape || !perm ||
        static_cast<int64_t>(perm->size()) != rank || !yc.shape[1].is_static())
      continue;
    // c, aligned to the end, is 1 everywhere but on the axis holding the channels.
    bool fits = true;
    for (int64_t i = 0; i < tc.rank(); ++i) {
      const int64_t axis = rank - tc.rank() + i;
      fits = fits && tc.shape[i] == ((*perm)[axis] == 1 ? yc.shape[1] : Dim(1));
    }
    if (!fits) continue;
    std::vector<Attr> attrs;
    for (const char* name : {"kernel_shape", "strides", "dilations", "pads"})
      if (auto v = R.attr_ints(conv, name)) attrs.push_back(Attr::ints(name, *v));
    attrs.push_back(Attr::i("group", R.attr_int(conv, "group", 1)));
    Value b = R.constant(bias->dtype, {yc.shape[1].value}, bias->data, bias->nbytes);
    Value biased = R.op("Conv", {R.input(conv, 0), R.input(conv, 1), b}, yc, attrs);
    R.replace(R.output(add), tr < 0 ? biased : R.op("Transpose", {biased}, out, {Attr::ints("perm", *perm)}));
    return;
  }
}

// ------------------------------------------------- float64 scales at MatMul --

// onnxruntime 1.31/1.32 (extended level and up) fuses a MatMul with a Mul or
// Div by a one-element constant into FusedMatMul, whose alpha is a float32:
// a float64 scale such as 1/sqrt(8) loses its low bits there, and float64
// attention is off by float32 rounding. Such a scale is therefore given as a
// constant of the MatMul side's last-axis length (equal values, the same
// broadcast), which the fusion does not take. Exact: same values, same op.
// (onnxruntime's main branch fuses only scales float32 holds exactly.)
bool float32_holds(double x) { return static_cast<double>(static_cast<float>(x)) == x; }

// Whether `v` is computed from constants alone (onnxruntime folds it into one).
bool from_constants(Rewrite& R, Value v, int depth = 8) {
  if (R.constant(v)) return true;
  const int64_t p = R.producer(v);
  if (p < 0 || depth == 0 || R.num_inputs(p) == 0) return false;
  for (size_t i = 0; i < R.num_inputs(p); ++i)
    if (!from_constants(R, R.input(p, i), depth - 1)) return false;
  return true;
}

// Scale `c` as a vector of the other operand's last-axis length, when it is a
// one-element float64 value onnxruntime would fold into a float32 alpha
// losing bits (a constant float32 cannot hold, or one computed from constants
// such as sqrt(8.0)); kNoValue otherwise.
Value widened_scale(Rewrite& R, Value c, bool divisor, const Aval& other) {
  const Aval ca = R.aval(c);
  if (ca.dtype != dtype::f64 || ca.rank() < 0 || ca.rank() > 1 || (ca.rank() == 1 && ca.shape[0] != Dim(1)))
    return kNoValue;
  if (other.rank() < 1 || !other.shape.back().is_static() || other.shape.back().value < 2) return kNoValue;
  const int64_t len = other.shape.back().value;
  if (auto v = R.constant_values(c)) {
    const double x = (*v)[0];
    if (float32_holds(x) && float32_holds(divisor ? 1.0 / x : x)) return kNoValue;
    std::vector<double> data(static_cast<size_t>(len), x);
    return R.constant(dtype::f64, {len}, data.data(), data.size() * sizeof(double));
  }
  if (!from_constants(R, c)) return kNoValue;  // a runtime scale: onnxruntime does not fuse it
  // Tile, not Expand: expand_into_broadcast would take an Expand away again.
  Value flat = reshape(R, c, ca, Aval(dtype::f64, {1}));
  return R.op("Tile", {flat, R.i64s({len})}, Aval(dtype::f64, {len}));
}

// Mul/Div(MatMul(a, b), c): the scale after the product.
void f64_scale_after_matmul(Rewrite& R) {
  const int64_t n = R.root();
  const bool div = R.is(n, "Div");
  for (int k = 0; k < (div ? 1 : 2); ++k) {
    Value x = R.input(n, k), c = R.input(n, 1 - k);
    if (R.def(x, "MatMul") < 0) continue;
    Value wide = widened_scale(R, c, div, R.aval(x));
    if (wide == kNoValue) continue;
    Value out = R.output(n);
    R.replace(out, R.op(div ? "Div" : "Mul", k == 0 ? std::vector<Value>{x, wide} : std::vector<Value>{wide, x},
                        R.aval(out)));
    return;
  }
}

// MatMul(Mul/Div(a, c), b): a scale before the product.
void f64_scale_before_matmul(Rewrite& R) {
  const int64_t mm = R.root();
  std::vector<Value> ins = {R.input(mm, 0), R.input(mm, 1)};
  bool changed = false;
  for (Value& in : ins) {
    for (const char* op : {"Mul", "Div"}) {
      const int64_t s = R.def(in, op);
      if (s < 0 || !R.single_use(in)) continue;
      const bool div = std::string_view(op) == "Div";
      for (int k = 0; k < (div ? 1 : 2); ++k) {
        Value x = R.input(s, k), c = R.input(s, 1 - k);
        Value wide = widened_scale(R, c, div, R.aval(x));
        if (wide == kNoValue) continue;
        in = R.op(op, k == 0 ? std::vector<Value>{x, wide} : std::vector<Value>{wide, x}, R.aval(in));
        changed = true;
        break;
      }
    }
  }
  if (changed) R.replace(R.output(mm), R.op("MatMul", ins, R.aval(R.output(mm))));
}

// ---------------------------------------------------------------- Max(x, 0) --

void max0_to_relu(Rewrite& R) {
  int64_t n = R.root();
  if (R.num_inputs(n) != 2) return;
  Value x = with_const(R, n, 0.0);
  Aval out = R.aval(R.output(n));
  if (x == kNoValue || !float_type(out) || !kernels::has("Relu", out.dtype)) return;
  if (R.aval(x).shape != out.shape || R.aval(x).rank() < 0) return;  // 0 must not broadcast x
  R.replace(R.output(n), R.op("Relu", {x}, out));
}

// ------------------------------------------------------------------ softmax --

// m is x's max over one axis, kept for broadcasting; JAX's guard max(-inf, .)
// (the reduction's initial value) may wrap it. Returns the axis or kNone.
int64_t max_over(Rewrite& R, Value m, Value x) {
  Value src = skip_reshapes(R, m);
  if (int64_t g = R.def(src, "Max"); g >= 0 && R.single_use(src)) {
    Value inner = with_const(R, g, [](double c) { return std::isinf(c) && c < 0; });
    if (inner != kNoValue) src = skip_reshapes(R, inner);
  }
  // The lowering's NaN guard (ReduceMax skips NaN, JAX's max does not):
  // Where(ReduceMax(IsNaN(x)), NaN, ReduceMax(x)) over the same axes.
  if (int64_t w = R.def(src, "Where"); w >= 0 && R.single_use(src)) {
    Value any_nan = R.input(w, 0), nan = R.input(w, 1);
    auto nan_value = R.splat(nan);
    auto flags = reduction(R, any_nan, "ReduceMax");
    int64_t isnan = flags ? R.def(flags->x, "IsNaN") : -1;
    auto r = reduction(R, R.input(w, 2), "ReduceMax");
    if (!nan_value || !std::isnan(*nan_value) || isnan < 0 || R.input(isnan, 0) != x || !r ||
        flags->axes != r->axes || !R.single_use(any_nan) || !R.single_use(flags->x))
      return kNone;
    src = R.input(w, 2);
  }
  auto r = reduction(R, src, "ReduceMax");
  if (!r || r->x != x || r->axes.size() != 1 || !R.single_use(src)) return kNone;
  if (!keepdims_of(R, m, x, r->axes)) return kNone;
  return r->axes[0];
}

// x - max(x): the shifted logits, at value d. Returns x and the axis.
std::optional<std::pair<Value, int64_t>> shifted(Rewrite& R, Value d) {
  int64_t sub = R.def(d, "Sub");
  if (sub < 0) return std::nullopt;
  Value x = R.input(sub, 0);
  int64_t axis = max_over(R, R.input(sub, 1), x);
  if (axis == kNone || !R.single_use(R.input(sub, 1))) return std::nullopt;
  return std::make_pair(x, axis);
}

// s = sum(e) over `axis`, kept for broadcasting against e.
bool sum_of(Rewrite& R, Value s, Value e, int64_t axis) {
  Value src = skip_reshapes(R, s);
  auto r = reduction(R, src, "ReduceSum");
  if (!r || r->x != e || r->axes != Axes{axis} || !R.single_use(src)) return false;
  return keepdims_of(R, s, e, r->axes);
}

// exp(x - max(x)) / sum(exp(x - max(x))) -> Softmax(x, axis).
void softmax(Rewrite& R) {
  int64_t div = R.root();
  Value e = R.input(div, 0), s = R.input(div, 1);
  int64_t ex = R.def(e, "Exp");
  if (ex < 0 || R.reads(e) != 2 || !R.single_use(s) || !R.single_use(R.input(ex, 0))) return;
  auto xs = shifted(R, R.input(ex, 0));
  Aval out = R.aval(R.output(div));
  if (!xs || !sum_of(R, s, e, xs->second) || !float_type(out) ||
      !kernels::has("Softmax", out.dtype) || R.aval(xs->first).shape != out.shape)
    return;
  R.replace(R.output(div), R.op("Softmax", {xs->first}, out, {Attr::i("axis", xs->second)}));
}

// (x - max(x)) - log(sum(exp(x - max(x)))) -> LogSoftmax(x, axis). Not in
// float64: onnxruntime's float64 kernel gives a row holding +inf NaN there and
// -inf elsewhere (JAX, and the float32 kernel: a row of NaN), and the rules
// keep JAX's NaN and inf (crisp="exact" relies on it).
void log_softmax(Rewrite& R) {
  int64_t sub = R.root();
  if (R.aval(R.output(sub)).dtype == dtype::f64) return;
  Value d = R.input(sub, 0), l = R.input(sub, 1);
  int64_t lg = R.def(l, "Log");
  if (lg < 0 || R.reads(d) != 2 || !R.single_use(l)) return;
  Value s = R.input(lg, 0);
  Value src = skip_reshapes(R, s);
  auto r = reduction(R, src, "ReduceSum");
  if (!r || !R.single_use(src)) return;
  int64_t ex = R.def(r->x, "Exp");
  if (ex < 0 || R.input(ex, 0) != d || !R.single_use(r->x)) return;
  auto xs = shifted(R, d);
  Aval out = R.aval(R.output(sub));
  if (!xs || r->axes != Axes{xs->second} || !keepdims_of(R, s, r->x, r->axes) ||
      !float_type(out) || !kernels::has("LogSoftmax", out.dtype) ||
      R.aval(xs->first).shape != out.shape)
    return;
  R.replace(R.output(sub), R.op("LogSoftmax", {xs->first}, out, {Attr::i("axis", xs->second)}));
}

// ------------------------------------------------------------------ layout --

// The permutation of a Transpose node (its default: reversed axes).
std::optional<std::vector<int64_t>> perm_of(Rewrite& R, int64_t t, int64_t rank) {
  auto p = R.attr_ints(t, "perm");
  if (!p) {
    p = std::vector<int64_t>();
    for (int64_t i = rank - 1; i >= 0; --i) p->push_back(i);
  }
  if (static_cast<int64_t>(p->size()) != rank) return std::nullopt;
  return p;
}

// Transpose(f(Transpose(y, p), ...), q) with q undoing p, f a graph of
// attribute-free elementwise ops (SiLU's x * sigmoid(x) reads its input
// twice) whose other leaves are constants of one element -> f(y, ...): the
// core folds transpose pairs across chains, not across such diamonds, which
// a Conv (channels first) -> BatchNorm -> SiLU -> Conv in NHWC code leaves
// between each pair of Convs. Every value of f must be read only inside f
// (else the transposed form stays alive and the work doubles). Same ops on
// the same elements: exact.
bool elementwise(std::string_view op) {
  static const char* kOps[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Sigmoid",
                               "Tanh", "Relu", "Exp", "Log", "Neg", "Abs", "Sqrt",
                               "Reciprocal", "Erf", "Softplus", "Sin", "Cos", "Where"};
  for (const char* o : kOps)
    if (op == o) return true;
  return false;
}

void transpose_through_elementwise(Rewrite& R) {
  const int64_t root = R.root();
  Value out = R.output(root), top = R.input(root, 0);
  const Aval oa = R.aval(out);
  const int64_t rank = oa.rank();
  if (rank < 2) return;
  auto q = perm_of(R, root, rank);
  if (!q) return;
  std::map<Value, int> edges;              // reads of each value from inside f (and the root)
  std::map<Value, int64_t> inner;          // value -> its elementwise node
  std::map<Value, Value> leaves;           // a transposed value -> y
  std::vector<Value> stack = {top};
  edges[top] = 1;
  size_t visited = 0;
  while (!stack.empty()) {
    Value v = stack.back();
    stack.pop_back();
    if (inner.count(v) || leaves.count(v)) continue;
    if (++visited > 64) return;  // a bounded walk
    if (const int64_t t = R.def(v, "Transpose"); t >= 0) {
      auto p = perm_of(R, t, rank);
      if (!p || R.aval(R.input(t, 0)).rank() != rank) return;
      bool undone = true;
      for (int64_t i = 0; i < rank; ++i) undone = undone && (*p)[static_cast<size_t>((*q)[i])] == i;
      if (!undone) return;
      leaves[v] = R.input(t, 0);
      continue;
    }
    const int64_t n = R.producer(v);
    if (n < 0 || R.num_outputs(n) != 1 || !R.is(n, R.op_type(n)) || !elementwise(R.op_type(n)) ||
        R.aval(v).rank() != rank)
      return;
    inner[v] = n;
    for (size_t i = 0; i < R.num_inputs(n); ++i) {
      Value in = R.input(n, i);
      const Aval ia = R.aval(in);
      ++edges[in];
      if (R.constant(in)) {  // one element: the same under any permutation
        if (ia.rank() < 0 || ia.rank() > rank || !all_ones(ia.shape)) return;
        continue;
      }
      stack.push_back(in);
    }
  }
  if (leaves.empty()) return;
  for (const auto& [v, count] : edges)
    if ((inner.count(v) || leaves.count(v)) && R.reads(v) != static_cast<size_t>(count)) return;
  std::map<Value, Value> done;
  std::function<Value(Value)> build = [&](Value v) -> Value {
    if (auto l = leaves.find(v); l != leaves.end()) return l->second;
    auto it = inner.find(v);
    if (it == inner.end()) return v;  // a constant
    if (auto d = done.find(v); d != done.end()) return d->second;
    const int64_t n = it->second;
    std::vector<Value> ins;
    for (size_t i = 0; i < R.num_inputs(n); ++i) ins.push_back(build(R.input(n, i)));
    const Aval a = R.aval(v);
    Shape shape;
    for (int64_t i = 0; i < rank; ++i) shape.push_back(a.shape[static_cast<size_t>((*q)[i])]);
    return done[v] = R.op(R.op_type(n), ins, Aval(a.dtype, shape));
  };
  R.replace(out, build(top));
}

// Softmax / LogSoftmax(e(Transpose(y, p)), axis a), e an optional Mul or Div
// by a one-element constant -> Transpose(Softmax(e(y), axis p[a]), p): the
// Transpose moves below the normalization, where the core's transpose folding
// meets the Transpose that attention written with
// einsum puts after it (scores as (b, q, k, h), softmax over k). Same
// elements, same arithmetic.
void softmax_transpose(Rewrite& R, const char* op) {
  int64_t sm = R.root();
  Value out = R.output(sm);
  Value in = R.input(sm, 0);
  Aval oa = R.aval(out);
  if (oa.rank() < 1 || !R.single_use(in)) return;
  int64_t scale = R.def(in, "Mul");
  if (scale < 0) scale = R.def(in, "Div");
  Value c = kNoValue, t_out = in;
  if (scale >= 0) {
    c = R.input(scale, 1);
    auto v = R.constant_values(c);
    if (!v || v->size() != 1 || R.aval(c).rank() > oa.rank()) return;
    t_out = R.input(scale, 0);
    if (!R.single_use(t_out)) return;
  }
  int64_t t = R.def(t_out, "Transpose");
  if (t < 0) return;
  Value y = R.input(t, 0);
  Aval ya = R.aval(y);
  auto p = perm_of(R, t, oa.rank());
  if (!p || ya.rank() != oa.rank() || ya.dtype != oa.dtype) return;
  int64_t axis = R.attr_int(sm, "axis", -1);
  if (axis < 0) axis += oa.rank();
  if (axis < 0 || axis >= oa.rank()) return;
  Value z = y;
  if (scale >= 0) z = R.op(R.is(scale, "Mul") ? "Mul" : "Div", {y, c}, ya);
  z = R.op(op, {z}, ya, {Attr::i("axis", (*p)[static_cast<size_t>(axis)])});
  R.replace(out, R.op("Transpose", {z}, oa, {Attr::ints("perm", *p)}));
}

// Transpose(Reshape(MatMul(a, b))) whose perm keeps the batch axes and moves
// the product's row axis M last, its column axis N (split or not by the
// Reshape) before it -> the product taken the other way round, MatMul(b', a^T)
// with b' = b's columns in the order the perm gives them, reshaped to the
// Transpose's result. jnp.einsum("bskgd,bktd->bkgst", q, k), the attention
// logits of a grouped-query decoder, is dot_general(k, q) then a Transpose of
// the [.., T, S, G] product: the rewrite moves q and k (T * D elements each
// side) instead of the T * S * G logits, and the core folds the Transpose of
// k into the one that made it. Only where that moves fewer elements: M * N >
// K * (M + N), a symbolic dim counting as large (a sequence length) and a
// symbolic K refusing. Exact: the same products, each summed over K. Not
// where a is a graph output (a KV cache's keys: plugins/cache_attention's form).
double dim_estimate(const Dim& d) { return d.is_static() ? static_cast<double>(d.value) : 1e9; }

Axes first_axes(int64_t n) {
  Axes a;
  for (int64_t i = 0; i < n; ++i) a.push_back(i);
  return a;
}

// How the Reshape's shape reads, for the reshapes that replace it: 1, literal
// dims (a runtime value read with allowzero=1, the lowering's form for
// symbolic dims, whose values JAX knows and never -1; or a constant of
// positive values); 0, a constant whose first `nb` (batch) values may be 0,
// "copy the input's dim" (the lowering's form for a symbolic batch), the
// rest positive; -1, anything else (refused).
int literal_shape(Rewrite& R, int64_t reshape, int64_t nb) {
  if (auto c = R.constant_values(R.input(reshape, 1))) {
    bool copies = false;
    for (size_t i = 0; i < c->size(); ++i) {
      if ((*c)[i] > 0) continue;
      if ((*c)[i] != 0 || static_cast<int64_t>(i) >= nb || R.attr_int(reshape, "allowzero", 0) != 0) return -1;
      copies = true;
    }
    return copies ? 0 : 1;
  }
  return R.attr_int(reshape, "allowzero", 0) == 1 ? 1 : -1;
}

void matmul_transposed_result(Rewrite& R) {
  const int64_t t = R.root();
  Value out = R.output(t);
  Value y = R.input(t, 0);
  if (!R.single_use(y)) return;
  int64_t reshape = R.def(y, "Reshape");
  Value m_out = reshape >= 0 ? R.input(reshape, 0) : y;
  const int64_t mm = R.def(m_out, "MatMul");
  if (mm < 0 || (reshape >= 0 && (!R.single_use(m_out) || R.opset() < 14))) return;
  Value a = R.input(mm, 0), b = R.input(mm, 1);
  // Keys the model returns (a KV cache's present, Concat(past, new)) are left
  // in this form: plugins/cache_attention reads it, and under the contrib
  // target makes the attention GroupQueryAttention over the cache in place.
  if (R.is_graph_output(a)) return;
  const Aval aa = R.aval(a), ba = R.aval(b), ma = R.aval(m_out), ya = R.aval(y), oa = R.aval(out);
  const int64_t r = ma.rank();
  if (r < 3 || aa.rank() != r || ba.rank() != r || !float_type(ma) || ya.rank() < r) return;
  const int64_t nb = r - 2, ry = ya.rank();
  const int literal = reshape >= 0 ? literal_shape(R, reshape, nb) : 1;
  if (literal < 0) return;
  for (int64_t i = 0; i < nb; ++i)  // no broadcasting batch, kept by the Reshape
    if (aa.shape[i] != ba.shape[i] || aa.shape[i] != ma.shape[i] || ya.shape[i] != ma.shape[i]) return;
  const Dim M = aa.shape[nb], K = aa.shape[nb + 1], N = ba.shape[nb + 1];
  if (ya.shape[nb] != M || !K.is_static()) return;  // rows unsplit: (p, m, n) -> (p, m, n1, n2, ..)
  auto p = perm_of(R, t, ry);
  if (!p || (*p)[ry - 1] != nb) return;
  for (int64_t i = 0; i < nb; ++i)
    if ((*p)[i] != i) return;
  const double em = dim_estimate(M), en = dim_estimate(N), ek = dim_estimate(K);
  if (!(em * en > ek * (em + en))) return;
  // The columns in the perm's order, then K: b's columns split as y splits N.
  Axes bperm = first_axes(nb);
  for (int64_t i = nb; i < ry - 1; ++i) bperm.push_back((*p)[i]);  // y's N axes nb+1..ry-1
  bperm.push_back(nb);                                             // K, at y's M position
  Value bs = b;
  Shape bsplit(ba.shape.begin(), ba.shape.begin() + nb + 1);       // [P.., K, N1, N2, ..]
  for (int64_t i = nb + 1; i < ry; ++i) bsplit.push_back(ya.shape[i]);
  Shape moved;
  for (int64_t i : bperm) moved.push_back(bsplit[static_cast<size_t>(i)]);
  Axes at = first_axes(nb);
  at.push_back(nb + 1);
  at.push_back(nb);
  Shape ashape(aa.shape.begin(), aa.shape.begin() + nb);
  ashape.push_back(K);
  ashape.push_back(M);
  Value a_t = R.op("Transpose", {a}, aa.with_shape(ashape), {Attr::ints("perm", at)});
  Value shape_y = reshape >= 0 ? R.input(reshape, 1) : kNoValue;
  // The new shapes from a^T's shape (the batch dims) and the Reshape's shape
  // value (the N split, positive in either form), never from a's or b's: the
  // transpose folding replaces the nodes that made them, which reading their
  // shape would keep.
  Value lead = kNoValue, kdim = R.i64s({K.value}), n = kNoValue;
  auto piece = [&](Value v, int64_t from, int64_t to) {
    return R.op("Slice", {v, R.i64s({from}), R.i64s({to})}, Aval(dtype::i64, {Dim(to - from)}));
  };
  const Aval one(dtype::i64, {Dim(1)});
  if (reshape >= 0) {
    lead = piece(R.op("Shape", {a_t}, Aval(dtype::i64, {Dim(r)})), 0, nb);
    Value split = piece(shape_y, nb + 1, ry);
    bs = reshape_by_value(R, b, R.op("Concat", {lead, kdim, split}, Aval(dtype::i64, {Dim(ry)}), {Attr::i("axis", 0)}),
                          ba.with_shape(bsplit));
    n = piece(shape_y, nb + 1, nb + 2);
    for (int64_t i = nb + 2; i < ry; ++i) n = R.op("Mul", {n, piece(shape_y, i, i + 1)}, one);
  }
  Value bt = R.op("Transpose", {bs}, ba.with_shape(moved), {Attr::ints("perm", bperm)});
  const Aval left = ba.with_shape([&] {
    Shape s(ba.shape.begin(), ba.shape.begin() + nb);
    s.push_back(N);
    s.push_back(K);
    return s;
  }());
  if (reshape >= 0) {  // the columns merged back into N: [P.., N, K]
    Value want = R.op("Concat", {lead, n, kdim}, Aval(dtype::i64, {Dim(r)}), {Attr::i("axis", 0)});
    bt = reshape_by_value(R, bt, want, left);
  }
  Shape zshape(ma.shape.begin(), ma.shape.begin() + nb);
  zshape.push_back(N);
  zshape.push_back(M);
  Value z = R.op("MatMul", {bt, a_t}, ma.with_shape(zshape));
  if (reshape >= 0) {
    // The Transpose's result shape: the Reshape's shape value in the perm's order.
    Value want = R.op("Gather", {shape_y, R.i64s(*p)}, Aval(dtype::i64, {Dim(ry)}), {Attr::i("axis", 0)});
    z = reshape_by_value(R, z, want, oa, literal == 0);  // the perm keeps copies in place
  }
  R.replace(out, z);
}

// ------------------------------------------------- scale through a Reshape --

// Mul/Div(Reshape(MatMul(a, b)), c), c a one-element constant -> Reshape(
// Mul/Div(MatMul(a, b), c)): the scale moves to the product, where onnxruntime
// fuses it into the MatMul (FusedMatMul's alpha; it fuses no scale a Reshape
// separates from the product). Einsum attention, `einsum(q, k) / sqrt(d)`,
// reaches the fuse stage as matmul_transposed_result's Reshape(MatMul) with
// the Div after the Reshape; jax.nn.dot_product_attention scales at the
// product. The MatMul and the Reshape must have no other reader (onnxruntime
// fuses only a product read by the scale alone). Same op on the same
// elements: exact.
void scale_before_reshape(Rewrite& R) {
  const int64_t n = R.root();
  const bool div = R.is(n, "Div");
  if (R.opset() < 14) return;  // reshape_by_value's allowzero
  for (int k = 0; k < (div ? 1 : 2); ++k) {
    Value y = R.input(n, k), c = R.input(n, 1 - k);
    const int64_t reshape = R.def(y, "Reshape");
    if (reshape < 0 || !R.single_use(y)) continue;
    Value m = R.input(reshape, 0);
    if (R.def(m, "MatMul") < 0 || !R.single_use(m) || R.is_graph_output(m)) continue;
    const Aval ma = R.aval(m), ca = R.aval(c), out = R.aval(R.output(n));
    if (!float_type(ma) || ca.dtype != ma.dtype || ca.rank() < 0 || ca.rank() > ma.rank()) continue;
    if (!R.splat(c)) continue;  // a constant (onnxruntime fuses no runtime scale)
    if (!all_ones(ca.shape) || out.shape != R.aval(y).shape) continue;  // c must not widen the result
    Value scaled = R.op(div ? "Div" : "Mul", k == 0 ? std::vector<Value>{m, c} : std::vector<Value>{c, m}, ma);
    // The same shape value, read the same way (0 copies the dim at its index, as before).
    R.replace(R.output(n), reshape_by_value(R, scaled, R.input(reshape, 1), out,
                                            R.attr_int(reshape, "allowzero", 0) == 0));
    return;
  }
}

// -------------------------------------------------------- additive mask --

// A masked logit's fill: -inf, or a value so large that adding any logit
// below 2^67 in magnitude to it gives it back (float32 2^96; JAX's
// finfo.min and dot_product_attention's -0.7 * float32 max qualify, -1e9
// does not).
bool absorbing_fill(double x) { return std::isinf(x) ? x < 0 : x <= -std::ldexp(1.0, 120); }

// Ops that move or broadcast elements without computing on them.
bool layout_op(Rewrite& R, int64_t p) {
  return R.is(p, "Transpose") || R.is(p, "Reshape") || R.is(p, "Squeeze") || R.is(p, "Unsqueeze") ||
         R.is(p, "Expand");
}

// Whether `v` is a graph output, or one moved by layout ops (the keys^T
// jax.nn.dot_product_attention's lowering multiplies by).
bool returned(Rewrite& R, Value v) {
  for (int depth = 0; depth < 8; ++depth) {
    if (R.is_graph_output(v)) return true;
    const int64_t p = R.producer(v);
    if (!layout_op(R, p)) return false;
    v = R.input(p, 0);
  }
  return false;
}

// Whether `s` (logits, through scales, a soft cap, Transposes and reshapes)
// is a product with keys the model returns (a KV cache's present):
// plugins/cache_attention reads that attention's Where under the contrib
// target, so where_fill_to_add leaves it.
bool logits_of_returned_keys(Rewrite& R, Value s) {
  for (int depth = 0; depth < 16; ++depth) {
    const int64_t p = R.producer(s);
    if (R.is(p, "MatMul")) return returned(R, R.input(p, 0)) || returned(R, R.input(p, 1));
    if (layout_op(R, p) || R.is(p, "Tanh")) {
      s = R.input(p, 0);
    } else if (R.is(p, "Mul") || R.is(p, "Div")) {
      s = R.splat(R.input(p, 0)) ? R.input(p, 1) : R.input(p, 0);
    } else {
      return false;
    }
  }
  return false;
}

// Where(m, s, f) (or Where(m, f, s)) with f an absorbing fill (above) and the
// condition m broadcast over an axis of s -> Add(s, Where(m, 0, f)): the mask
// as an additive bias over m's smaller shape (which the deduplication shares
// between the layers that read one mask) plus an Add over the logits.
// onnxruntime's Where kernel broadcasting m over the heads takes 3-4x an
// Add's time on this CPU (Llama prefill, T = 512, batch 4, 2 threads: 56
// against 15 ms over four layers), and attention written with
// jnp.where(mask, s, finfo.min) or dot_product_attention's boolean mask pays
// it in every layer. Values: s + 0 is s, s + f is f (above). Differs where a
// masked s is NaN or inf (NaN or inf here, f in JAX) and on s = -0.0 kept
// (+0.0 here).
void where_fill_to_add(Rewrite& R) {
  const int64_t n = R.root();
  Value out = R.output(n);
  const Aval oa = R.aval(out);
  if (!float_type(oa) || oa.rank() < 1 || !kernels::has("Add", oa.dtype)) return;
  Value cond = R.input(n, 0);
  const Aval ma = R.aval(cond);
  if (ma.dtype != dtype::boolean || ma.rank() < 0 || ma.rank() > oa.rank()) return;
  // m broadcasts over an axis of the result: its bias is smaller than the logits.
  bool smaller = false;
  const int64_t lead = oa.rank() - ma.rank();
  for (int64_t i = 0; i < oa.rank(); ++i) {
    const Dim md = i < lead ? Dim(1) : ma.shape[static_cast<size_t>(i - lead)];
    smaller = smaller || (md == Dim(1) && oa.shape[static_cast<size_t>(i)] != Dim(1));
  }
  if (!smaller) return;
  for (int k = 1; k <= 2; ++k) {
    Value s = R.input(n, k), f = R.input(n, 3 - k);
    const Aval sa = R.aval(s), fa = R.aval(f);
    auto fill = R.splat(f);
    if (!fill || !absorbing_fill(*fill) || sa.shape != oa.shape || sa.dtype != oa.dtype ||
        fa.dtype != oa.dtype || fa.rank() < 0 || fa.rank() > ma.rank())
      continue;
    if (!all_ones(fa.shape) || logits_of_returned_keys(R, s)) continue;
    Value zero = R.scalar(oa.dtype, 0.0);
    Value bias = R.op("Where", k == 1 ? std::vector<Value>{cond, zero, f} : std::vector<Value>{cond, f, zero},
                      ma.with_dtype(oa.dtype));
    R.replace(out, R.op("Add", {s, bias}, oa));
    return;
  }
}

// The multidirectional broadcast of `shapes`, or nullopt where two dims
// differ and neither is 1.
std::optional<Shape> broadcast(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, Dim(1));
  for (const Shape& s : shapes)
    for (size_t i = 0; i < s.size(); ++i) {
      Dim& o = out[rank - s.size() + i];
      const Dim& d = s[i];
      if (d == Dim(1) || d == o) continue;
      if (o == Dim(1)) o = d;
      else return std::nullopt;
    }
  return out;
}

// A broadcasting op (Where, Add, Sub, Mul, Div) reading Expand(x, shape) ->
// the op reading x, when its output keeps its type: the op broadcasts
// itself, so the Expand (and the Shape arithmetic that sized it for a
// symbolic batch) only copies. jnp.where(mask, scores, -1e9) with a constant
// (q, k) mask expands both the mask and the fill to the scores' shape.
void expand_into_broadcast(Rewrite& R) {
  int64_t n = R.root();
  Value out = R.output(n);
  Aval oa = R.aval(out);
  if (oa.rank() < 0) return;
  std::vector<Value> ins;
  std::vector<Shape> shapes;
  bool changed = false;
  for (size_t k = 0; k < R.num_inputs(n); ++k) {
    Value v = R.input(n, k);
    int64_t e = R.def(v, "Expand");
    if (e >= 0 && R.aval(R.input(e, 0)).rank() >= 0 &&
        R.aval(R.input(e, 0)).dtype == R.aval(v).dtype) {
      v = R.input(e, 0);
      changed = true;
    }
    Aval a = R.aval(v);
    if (a.rank() < 0) return;
    ins.push_back(v);
    shapes.push_back(a.shape);
  }
  auto b = broadcast(shapes);
  if (!changed || !b || *b != oa.shape) return;
  std::vector<Attr> attrs;
  R.replace(out, R.op(R.is(n, "Where") ? "Where" : R.is(n, "Add") ? "Add"
                      : R.is(n, "Sub") ? "Sub" : R.is(n, "Mul") ? "Mul" : "Div",
                      ins, oa));
}

// Where with a constant condition that is true (false) everywhere -> its
// second (third) input, when that already has the output's type: the other
// branch is never read.
void where_constant_condition(Rewrite& R) {
  int64_t n = R.root();
  Value out = R.output(n);
  if (R.aval(R.input(n, 0)).dtype != dtype::boolean) return;
  auto cond = R.splat(R.input(n, 0));
  if (!cond) return;
  Value pick = R.input(n, *cond != 0 ? 1 : 2);
  Aval a = R.aval(out), b = R.aval(pick);
  if (a.rank() < 0 || a.dtype != b.dtype || a.shape != b.shape) return;
  R.replace(out, pick);
}

// ------------------------------------------------------------ normalizations --

// The trailing-axes normalization facts a product shows.
struct Norm {
  Value x = kNoValue;
  Axes axes;
  double eps = 0;
  bool centered = false;  // layer norm (else rms norm)
  std::vector<Value> scales;
};

bool trailing(const Axes& axes, int64_t rank) {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != rank - static_cast<int64_t>(axes.size()) + static_cast<int64_t>(i)) return false;
  return !axes.empty();
}

// x*x (Mul of one value with itself, or Pow(x, 2)): x, else kNoValue.
Value squared(Rewrite& R, Value v) {
  if (int64_t n = R.def(v, "Mul"); n >= 0 && R.input(n, 0) == R.input(n, 1)) return R.input(n, 0);
  if (int64_t n = R.def(v, "Pow"); n >= 0 && R.splat(R.input(n, 1)) == 2.0) return R.input(n, 0);
  return kNoValue;
}

// c == x - mean(x) over `axes` (kept for broadcasting); x returned.
std::optional<Reduction> centered(Rewrite& R, Value c) {
  int64_t sub = R.def(c, "Sub");
  if (sub < 0) return std::nullopt;
  Value x = R.input(sub, 0), m = R.input(sub, 1);
  auto r = mean(R, m);
  if (!r || r->x != x || !keepdims_of(R, m, x, r->axes)) return std::nullopt;
  return r;
}

// v without a max(0, .) clamp (Max with 0, or the Relu that became), and
// without reshapes; kNoValue for a Max with another constant.
Value unclamped(Rewrite& R, Value v) {
  v = skip_reshapes(R, v);
  if (int64_t g = R.def(v, "Relu"); g >= 0) return skip_reshapes(R, R.input(g, 0));
  if (int64_t g = R.def(v, "Max"); g >= 0) {
    Value inner = with_const(R, g, 0.0);
    return inner == kNoValue ? kNoValue : skip_reshapes(R, inner);
  }
  return v;
}

// var(x) over `axes`: mean((x - mean x)^2), or JAX's fast form
// max(0, mean(x^2) - mean(x)^2) (the max optional).
bool variance(Rewrite& R, Value v, Value x, const Axes& axes) {
  v = unclamped(R, v);
  if (v == kNoValue) return false;
  auto r = mean(R, v);
  if (!r || r->axes != axes) return false;
  Value sq = squared(R, r->x);
  if (sq != kNoValue) {  // mean((x - mean x)^2)
    auto c = centered(R, sq);
    return c && c->x == x && c->axes == axes;
  }
  return false;
}
bool fast_variance(Rewrite& R, Value v, Value x, const Axes& axes) {
  v = unclamped(R, v);
  if (v == kNoValue) return false;
  int64_t sub = R.def(v, "Sub");
  if (sub < 0) return false;
  auto ex2 = mean(R, R.input(sub, 0));
  Value m2 = squared(R, R.input(sub, 1));
  if (!ex2 || ex2->axes != axes || squared(R, ex2->x) != x || m2 == kNoValue) return false;
  auto m = mean(R, m2);
  return m && m->x == x && m->axes == axes;
}

// o == var + eps (or mean(x^2) + eps for rms norm); returns eps.
std::optional<double> plus_eps(Rewrite& R, Value o, std::function<bool(Value)> stat) {
  o = skip_reshapes(R, o);
  int64_t add = R.def(o, "Add");
  if (add < 0) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    auto eps = R.splat(R.input(add, 1 - k));
    if (eps && *eps >= 0 && stat(R.input(add, k))) return *eps;
  }
  return std::nullopt;
}

// A product of (x - mean x), 1/sqrt(var + eps) and per-feature scales, or of
// x, 1/sqrt(mean(x^2) + eps) and scales.
std::optional<Norm> norm_product(Rewrite& R, Value v) {
  Product p = product(R, v);
  if (!near(p.scale, 1.0)) return std::nullopt;
  Norm n;
  Value inv = kNoValue, data = kNoValue;
  for (const Factor& f : p.factors) {
    int64_t sq = f.power < 0 ? R.def(f.v, "Sqrt") : -1;
    if (sq >= 0 && inv == kNoValue) { inv = R.input(sq, 0); continue; }
    if (f.power < 0) return std::nullopt;
    n.scales.push_back(f.v);
  }
  if (inv == kNoValue) return std::nullopt;
  // The data factor is the one the statistic is about.
  for (size_t k = 0; k < n.scales.size() && data == kNoValue; ++k) {
    Value c = n.scales[k];
    if (auto r = centered(R, c)) {
      Value x = r->x;
      Axes axes = r->axes;
      auto eps = plus_eps(R, inv, [&](Value s) {
        return variance(R, s, x, axes) || fast_variance(R, s, x, axes);
      });
      if (eps) { n = Norm{x, axes, *eps, true, {}}; data = c; }
    } else {
      Value x = c;
      // rms: x, or x - 0 (what JAX's rms norm does before its statistic).
      if (int64_t s = R.def(c, "Sub"); s >= 0 && is_zero(R, R.input(s, 1))) x = R.input(s, 0);
      Axes axes;
      auto eps = plus_eps(R, inv, [&](Value s) {
        auto m = mean(R, s);
        if (!m || squared(R, m->x) != x) return false;
        axes = m->axes;
        return true;
      });
      if (eps) { n = Norm{x, axes, *eps, false, {}}; data = c; }
    }
  }
  if (data == kNoValue || !keepdims_of(R, inv, n.x, n.axes)) return std::nullopt;
  for (const Factor& f : p.factors)
    if (f.power > 0 && f.v != data) n.scales.push_back(f.v);
  return n;
}

// `v` broadcasts over x's batch axes only and matches its trailing `axes`:
// leading dims 1, then the feature dims.
bool feature_shaped(Rewrite& R, Value v, const Aval& x, const Axes& axes) {
  Aval a = R.aval(v);
  if (a.dtype != x.dtype || a.rank() < static_cast<int64_t>(axes.size()) || a.rank() > x.rank())
    return false;
  for (int64_t i = 0; i < a.rank(); ++i) {
    int64_t xi = x.rank() - a.rank() + i;
    bool feature = std::find(axes.begin(), axes.end(), xi) != axes.end();
    if (feature ? a.shape[i] != x.shape[xi] : a.shape[i] != Dim(1)) return false;
  }
  return true;
}

// A per-feature parameter `v` of a normalization over x's trailing `axes`, as
// a value of the normalized shape: a constant re-shaped, or a value already
// of that shape.
std::optional<Value> feature_param(Rewrite& R, Value v, const Aval& x, const Axes& axes) {
  std::vector<int64_t> dims;
  for (int64_t a : axes) {
    if (!x.shape[a].is_static()) return std::nullopt;
    dims.push_back(x.shape[a].value);
  }
  if (!feature_shaped(R, v, x, axes)) return std::nullopt;
  if (R.aval(v).shape.size() == axes.size()) return v;
  const jxo_tensor* t = R.constant(v);
  if (!t) return std::nullopt;
  return R.constant(t->dtype, dims, t->data, t->nbytes);
}

Value ones(Rewrite& R, const Aval& x, const Axes& axes) {
  std::vector<int64_t> dims;
  int64_t count = 1;
  for (int64_t a : axes) {
    dims.push_back(x.shape[a].value);
    count *= x.shape[a].value;
  }
  if (x.dtype == dtype::f64) {
    std::vector<double> one(static_cast<size_t>(count), 1.0);
    return R.constant(x.dtype, dims, one.data(), one.size() * 8);
  }
  std::vector<float> one(static_cast<size_t>(count), 1.0f);
  return R.constant(x.dtype, dims, one.data(), one.size() * 4);
}

// Emits the normalization of `n` with an optional bias; true when it did.
bool emit_norm(Rewrite& R, const Norm& n, Value bias, Value replaced) {
  Aval x = R.aval(n.x), out = R.aval(replaced);
  const char* op = n.centered ? "LayerNormalization" : "RMSNormalization";
  if (!float_type(x) || x.shape != out.shape || !trailing(n.axes, x.rank()) ||
      n.scales.size() > 1 || !kernels::has(op, x.dtype))
    return false;
  if (!n.centered && (R.opset() < 23 || bias != kNoValue)) return false;
  if (n.centered && R.opset() < 17) return false;
  for (int64_t a : n.axes)
    if (!x.shape[a].is_static()) return false;
  Value scale = kNoValue;
  if (!n.scales.empty()) {
    auto s = feature_param(R, n.scales[0], x, n.axes);
    if (!s) return false;
    scale = *s;
  }
  Value b = kNoValue;
  if (bias != kNoValue) {
    auto s = feature_param(R, bias, x, n.axes);
    if (!s) return false;
    b = *s;
  }
  // ONNX's epsilon is a float32 attribute: in float64, an eps it rounds is
  // kept exact by normalizing k * x with epsilon e = float32(4 eps),
  // k = sqrt(e / eps) (the op's statistics scale by k and k^2: it computes
  // var + e / k^2 == var + eps). k is near 2, not 1: onnxruntime drops a Mul
  // by what float32 rounds to 1.
  Value xin = n.x;
  double epsilon = n.eps;
  if (x.dtype == dtype::f64 && static_cast<double>(static_cast<float>(n.eps)) != n.eps) {
    const float e = static_cast<float>(4 * n.eps);
    if (!(e > 0) || !std::isfinite(e)) return false;
    epsilon = static_cast<double>(e);
    xin = R.op("Mul", {n.x, R.scalar(dtype::f64, std::sqrt(epsilon / n.eps))}, x);
  }
  if (scale == kNoValue) scale = ones(R, x, n.axes);
  std::vector<Value> ins = {xin, scale};
  if (b != kNoValue) ins.push_back(b);
  std::vector<Attr> attrs = {Attr::i("axis", n.axes.front()), Attr::f("epsilon", epsilon)};
  R.replace(replaced, R.op(op, ins, out, attrs));
  return true;
}

// The product rooted here: (x - mean) * rsqrt(var + eps) [* scale], or the
// division by sqrt(var + eps), or the rms form.
void normalization(Rewrite& R) {
  Value v = R.output(R.root());
  if (auto n = norm_product(R, v)) emit_norm(R, *n, kNoValue, v);
}

// The elements of constant `c` as one value per normalized feature (x's
// trailing `axes`), when c broadcasts over x without widening it: a splat of
// any such shape, or a per-feature tensor (leading dims 1).
std::optional<std::vector<double>> per_feature(Rewrite& R, Value c, const Aval& x, const Axes& axes) {
  auto values = R.constant_values(c);
  Aval a = R.aval(c);
  if (!values || a.dtype != x.dtype || a.rank() < 0 || a.rank() > x.rank()) return std::nullopt;
  size_t count = 1;
  for (int64_t ax : axes) count *= static_cast<size_t>(x.shape[ax].value);
  if (all_ones(a.shape)) return std::vector<double>(count, values->at(0));  // a scalar, however shaped
  if (!feature_shaped(R, c, x, axes) || values->size() != count) return std::nullopt;
  return values;
}

Value feature_constant(Rewrite& R, const Aval& x, const Axes& axes, const std::vector<double>& v) {
  std::vector<int64_t> dims;
  for (int64_t a : axes) dims.push_back(x.shape[a].value);
  if (x.dtype == dtype::f64) return R.constant(x.dtype, dims, v.data(), v.size() * 8);
  std::vector<float> f(v.begin(), v.end());
  return R.constant(x.dtype, dims, f.data(), f.size() * 4);
}

// A single-use LayerNormalization / RMSNormalization at `p`, with x's axes.
int64_t norm_node(Rewrite& R, Value p, Aval* x, Axes* axes) {
  int64_t n = R.def(p, "LayerNormalization");
  if (n < 0) n = R.def(p, "RMSNormalization");
  if (n < 0 || !R.single_use(p)) return -1;
  *x = R.aval(R.input(n, 0));
  int64_t axis = R.attr_int(n, "axis", -1);
  if (axis < 0) axis += x->rank();
  axes->clear();
  for (int64_t a = axis; a < x->rank(); ++a) axes->push_back(a);
  for (int64_t a : *axes)
    if (!x->shape[a].is_static()) return -1;
  return n;
}

// Re-emits normalization node `n` with new scale and bias (kNoValue: none).
void re_emit(Rewrite& R, int64_t n, Value scale, Value bias, Value replaced) {
  std::vector<Value> ins = {R.input(n, 0), scale};
  if (bias != kNoValue) ins.push_back(bias);
  std::vector<Attr> attrs = {Attr::i("axis", R.attr_int(n, "axis", -1)),
                             Attr::f("epsilon", R.attr_float(n, "epsilon", 1e-5))};
  R.replace(replaced, R.op(R.op_type(n), ins, R.aval(replaced), attrs));
}

// norm + bias: a LayerNormalization takes the bias (added to its own when it
// has one and both are constants).
void normalization_bias(Rewrite& R) {
  int64_t add = R.root();
  for (int k = 0; k < 2; ++k) {
    Value p = R.input(add, k), c = R.input(add, 1 - k);
    if (!R.single_use(p)) continue;
    if (auto n = norm_product(R, p); n && n->centered) {  // a product not fused yet
      if (emit_norm(R, *n, c, R.output(add))) return;
      continue;
    }
    Aval x;
    Axes axes;
    int64_t n = norm_node(R, p, &x, &axes);
    if (n < 0 || !R.is(n, "LayerNormalization") || R.aval(R.output(add)).shape != x.shape) continue;
    Value bias = kNoValue;
    if (R.num_inputs(n) < 3 || R.input(n, 2) == kNoValue) {
      if (auto v = per_feature(R, c, x, axes)) bias = feature_constant(R, x, axes, *v);
      else if (auto f = feature_param(R, c, x, axes)) bias = *f;
    } else {
      auto old = R.constant_values(R.input(n, 2));
      auto v = per_feature(R, c, x, axes);
      if (!old || !v || old->size() != v->size()) continue;
      for (size_t i = 0; i < v->size(); ++i) (*v)[i] += (*old)[i];
      bias = feature_constant(R, x, axes, *v);
    }
    if (bias == kNoValue) continue;
    re_emit(R, n, R.input(n, 1), bias, R.output(add));
    return;
  }
}

// norm * k for a constant per-feature (or splat) k: the scale (and bias) take it.
void normalization_scale(Rewrite& R) {
  int64_t mul = R.root();
  for (int k = 0; k < 2; ++k) {
    Value p = R.input(mul, k), c = R.input(mul, 1 - k);
    Aval x;
    Axes axes;
    int64_t n = norm_node(R, p, &x, &axes);
    if (n < 0 || R.aval(R.output(mul)).shape != x.shape) continue;
    auto factor = per_feature(R, c, x, axes);
    auto scale = R.constant_values(R.input(n, 1));
    if (!factor || !scale || scale->size() != factor->size()) continue;
    for (size_t i = 0; i < scale->size(); ++i) (*scale)[i] *= (*factor)[i];
    Value bias = kNoValue;
    if (R.num_inputs(n) > 2 && R.input(n, 2) != kNoValue) {
      auto b = R.constant_values(R.input(n, 2));
      if (!b || b->size() != factor->size()) continue;
      for (size_t i = 0; i < b->size(); ++i) (*b)[i] *= (*factor)[i];
      bias = feature_constant(R, x, axes, *b);
    }
    re_emit(R, n, feature_constant(R, x, axes, *scale), bias, R.output(mul));
    return;
  }
}

// ------------------------------------------------------------- batch norm --

// The per-channel vector `v` (computed from constants; dims 1 but its last,
// which is `c`) as a (c,) value, else kNoValue.
Value channel_vector(Rewrite& R, Value v, int64_t c, int64_t rank, int32_t dt) {
  const Aval a = R.aval(v);
  if (a.dtype != dt || a.rank() < 1 || a.rank() > rank || !from_constants(R, v)) return kNoValue;
  for (int64_t i = 0; i + 1 < a.rank(); ++i)
    if (a.shape[i] != Dim(1)) return kNoValue;
  if (a.shape.back() != Dim(c)) return kNoValue;
  return reshape(R, v, a, Aval(dt, {Dim(c)}));
}

// (x - m) * k + b with m, k, b per-channel vectors over x's last axis computed
// from constants (an inference batch norm written out, as linen's BatchNorm
// and hand-written `(x - mean) * rsqrt(var + eps) * scale + bias` trace:
// k = rsqrt(var + eps) * scale) -> BatchNormalization(mean m, scale k, bias b,
// var 1, epsilon 0), where the channels are axis 1: x of rank 2, or x a
// Transpose of a channels-first value y (a Conv's result moved to
// channels-last), which the op then reads, Transposed after it; onnxruntime
// then folds it into the Conv. Rounding only: the op computes (x - m) / sqrt(1)
// * k + b.
void batch_norm_affine(Rewrite& R) {
  const int64_t add = R.root();
  const Value out = R.output(add);
  const Aval oa = R.aval(out);
  if (!float_type(oa) || oa.rank() < 2 || !oa.shape.back().is_static()) return;
  const int64_t rank = oa.rank(), c = oa.shape.back().value;
  for (int k = 0; k < 2; ++k) {
    Value prod = R.input(add, k);
    const int64_t mul = R.def(prod, "Mul");
    if (mul < 0 || !R.single_use(prod)) continue;
    for (int j = 0; j < 2; ++j) {
      Value centered = R.input(mul, j);
      const int64_t sub = R.def(centered, "Sub");
      if (sub < 0 || !R.single_use(centered)) continue;
      Value x = R.input(sub, 0);
      const Aval xa = R.aval(x);
      if (xa.shape != oa.shape || xa.dtype != oa.dtype) continue;
      const Value m = channel_vector(R, R.input(sub, 1), c, rank, oa.dtype);
      if (m == kNoValue) continue;
      const Value kk = channel_vector(R, R.input(mul, 1 - j), c, rank, oa.dtype);
      if (kk == kNoValue) continue;
      const Value b = channel_vector(R, R.input(add, 1 - k), c, rank, oa.dtype);
      if (b == kNoValue) continue;
      // Where the channels are axis 1.
      Value y = x;
      std::optional<std::vector<int64_t>> perm;
      if (rank > 2) {
        const int64_t t = R.def(x, "Transpose");
        if (t < 0 || !R.single_use(x)) continue;
        perm = perm_of(R, t, rank);
        if (!perm || perm->back() != 1) continue;
        y = R.input(t, 0);
      }
      std::vector<double> one(static_cast<size_t>(c), 1.0);
      Value var = feature_constant(R, Aval(oa.dtype, {Dim(c)}), {0}, one);
      const Aval ya = R.aval(y);
      Value bn = R.op("BatchNormalization", {y, kk, b, m, var}, ya, {Attr::f("epsilon", 0.0)});
      R.replace(out, perm ? R.op("Transpose", {bn}, oa, {Attr::ints("perm", *perm)}) : bn);
      return;
    }
  }
}

// --------------------------------------------------------------------- gelu --

// `v` is `k * x` for the given k (within float32 rounding).
bool scaled(Rewrite& R, Value v, Value x, double k) {
  Product p = product(R, v);
  return p.factors.size() == 1 && p.factors[0].v == x && p.factors[0].power == 1 &&
         near(p.scale, k, 1e-6);
}

// The gate of gelu over x: 1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)) gives
// "tanh"; 1 + erf(x / sqrt(2)) or 1 - erf(-x / sqrt(2)) (JAX's erfc form
// after lowering) gives "none"; else empty.
std::string gelu_gate(Rewrite& R, Value g, Value x) {
  int64_t n = R.def(g, "Add");
  int sign = 1;
  Value t = kNoValue;
  if (n >= 0 && R.single_use(g)) {
    t = with_const(R, n, 1.0);
  } else if ((n = R.def(g, "Sub")) >= 0 && R.single_use(g) && R.splat(R.input(n, 0)) == 1.0) {
    t = R.input(n, 1);
    sign = -1;
  }
  if (t == kNoValue || !R.single_use(t)) return "";
  if (int64_t e = R.def(t, "Erf"); e >= 0) {
    return scaled(R, R.input(e, 0), x, sign * M_SQRT1_2) ? "none" : "";
  }
  int64_t th = R.def(t, "Tanh");
  if (th < 0 || sign != 1) return "";
  Product p = product(R, R.input(th, 0));
  if (p.factors.size() != 1 || !near(p.scale, std::sqrt(2.0 / M_PI))) return "";
  Value inner = p.factors[0].v;
  int64_t add = R.def(inner, "Add");
  if (add < 0 || !R.single_use(inner)) return "";
  Value cube = other(R, add, x);
  if (cube == kNoValue) return "";
  Product c = product(R, cube);
  if (!near(c.scale, 0.044715, 1e-5)) return "";
  int count = 0;
  for (const Factor& f : c.factors) {
    if (f.v == x && f.power == 1) { ++count; continue; }
    int64_t sq = R.def(f.v, "Mul");
    if (sq >= 0 && R.input(sq, 0) == x && R.input(sq, 1) == x && R.single_use(f.v) && f.power == 1) {
      count += 2;
      continue;
    }
    int64_t pw = R.def(f.v, "Pow");
    if (pw >= 0 && R.input(pw, 0) == x && R.splat(R.input(pw, 1)) == 3.0 && f.power == 1) {
      count += 3;
      continue;
    }
    return "";
  }
  return count == 3 ? "tanh" : "";
}

// 0.5 * x * gate(x) in any association -> Gelu(x, approximate).
void gelu(Rewrite& R) {
  Value root = R.output(R.root());
  Product p = product(R, root);
  Aval out = R.aval(root);
  if (p.factors.size() != 2 || !near(p.scale, 0.5) || !float_type(out) ||
      !kernels::has("Gelu", out.dtype))
    return;
  for (int k = 0; k < 2; ++k) {
    Value x = p.factors[k].v, g = p.factors[1 - k].v;
    if (p.factors[0].power != 1 || p.factors[1].power != 1 || R.aval(x).shape != out.shape) continue;
    std::string approx = gelu_gate(R, g, x);
    if (approx.empty()) continue;
    R.replace(root, R.op("Gelu", {x}, out, {Attr::s("approximate", approx)}));
    return;
  }
}

// ------------------------------------------------------------------- swish --

// x * sigmoid(x) -> Swish(x) (alpha 1), where the opset has Swish (24).
void swish(Rewrite& R) {
  int64_t mul = R.root();
  Aval out = R.aval(R.output(mul));
  if (!float_type(out) || !kernels::has("Swish", out.dtype)) return;
  for (int k = 0; k < 2; ++k) {
    Value x = R.input(mul, k), s = R.input(mul, 1 - k);
    int64_t sg = R.def(s, "Sigmoid");
    if (sg < 0 || R.input(sg, 0) != x || !R.single_use(s) || R.aval(x).shape != out.shape) continue;
    R.replace(R.output(mul), R.op("Swish", {x}, out));
    return;
  }
}

}  // namespace

JAXONNX_PLUGIN("onnx_fusion", "0.1.0") {
  plugin.rule("where_constant_condition", "Where", where_constant_condition)
      .exact()
      .summary("Where with a constant all-true (all-false) condition -> the branch it picks, "
               "when that has the output's type");
  for (const char* root : {"Where", "Add", "Sub", "Mul", "Div"})
    plugin.rule(std::string("expand_into_broadcast_") + root, root, expand_into_broadcast)
        .exact()
        .emits({"Where", "Add", "Sub", "Mul", "Div"})
        .summary(std::string(root) + " reading Expand(x) -> " + root +
                 " reading x, when its output keeps its shape (the op broadcasts itself)");
  plugin.rule("transpose_through_elementwise", "Transpose", transpose_through_elementwise)
      .exact()
      .emits({"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Sigmoid", "Tanh", "Relu", "Exp",
              "Log", "Neg", "Abs", "Sqrt", "Reciprocal", "Erf", "Softplus", "Sin", "Cos", "Where"})
      .summary("Transpose(f(Transpose(y, p)), q), q undoing p, f elementwise ops reading the "
               "transposed value more than once (SiLU: x * sigmoid(x)) and one-element "
               "constants -> f(y); exact");
  for (const char* root : {"Softmax", "LogSoftmax"})
    plugin.rule(std::string("transpose_below_") + root, root,
                [root](Rewrite& R) { softmax_transpose(R, root); })
        .exact()
        .emits({root, "Transpose", "Mul", "Div"})
        .summary(std::string(root) + "(Transpose(y) [times or over a constant]) -> Transpose(" +
                 root + "(y [times or over it])) on the permuted axis, so that it meets the "
                 "Transpose after it (attention written with einsum)");
  plugin.rule("matmul_transposed_result", "Transpose", matmul_transposed_result)
      .exact()
      .emits({"MatMul", "Transpose", "Reshape", "Shape", "Slice", "Concat", "Gather", "Mul"})
      .summary("Transpose(Reshape(MatMul(a, b))) moving the product's rows last (einsum attention "
               "logits: dot_general(k, q) then a Transpose) -> MatMul(b', a^T) reshaped, the operands "
               "moved instead of the product where that moves fewer elements");
  for (const char* root : {"Mul", "Div"})
    plugin.rule(std::string("scale_before_reshape_") + root, root, scale_before_reshape)
        .exact()
        .emits({root, "Reshape"})
        .summary(std::string(root) + "(Reshape(MatMul(a, b)), c), c a one-element constant -> "
                 "Reshape(" + root + "(MatMul(a, b), c)): the scale at the product, where "
                 "onnxruntime fuses it into the MatMul (einsum attention's / sqrt(d))");
  plugin.rule("where_fill_to_add", "Where", where_fill_to_add)
      .finite("a masked logit that is NaN or inf gives NaN or inf where JAX gives the fill; "
              "-0.0 kept gives +0.0")
      .emits({"Where", "Add"})
      .summary("Where(m, s, -inf or the lowest finite value), m broadcast over an axis of s "
               "(an attention mask over the heads) -> Add(s, Where(m, 0, fill)): an additive "
               "mask over m's shape, shared by the layers, and an Add, which onnxruntime runs "
               "3-4x faster than a broadcasting Where");
  for (const char* root : {"MatMul", "Gemm"})
    plugin.rule(std::string("matmul_of_zeros_") + root, root, matmul_of_zeros)
        .exact()
        .emits({"Expand", "Slice", "Concat", "Add"})
        .summary(std::string(root) + " of zeros broadcast to a runtime shape (Expand of 0: a scan's "
                 "zero initial state) and finite constant weights -> zeros of its shape (plus C for "
                 "Gemm); tract fails on the product, which is +0 in JAX for finite weights");
  plugin.rule("matmul_add_to_gemm", "Add", matmul_add_to_gemm)
      .exact()
      .emits({"Gemm"})
      .summary("MatMul(A, B) + C with 2-D A, B and C broadcasting one way -> Gemm (not when B "
               "is a DequantizeLinear: see the quantization plugin)");
  plugin.rule("conv_bias", "Add", conv_bias)
      .exact()
      .emits({"Conv", "Transpose"})
      .summary("Transpose(Conv(x, w)) + c, c constant along the channels only -> "
               "Transpose(Conv(x, w, c)): the bias inside the Conv (a flax Conv's bias after the "
               "transpose back to channels-last; equinox's (C, 1, 1) bias without one)");
  for (const char* root : {"Mul", "Div"})
    plugin.rule(std::string("f64_scale_after_matmul_") + root, root, f64_scale_after_matmul)
        .exact()
        .emits({root, "Tile", "Reshape"})
        .summary("a float64 MatMul times or over a one-element constant float32 cannot hold -> "
                 "the same with the constant as a vector: onnxruntime 1.31/1.32 would fuse it "
                 "into FusedMatMul's float32 alpha");
  plugin.rule("f64_scale_before_matmul", "MatMul", f64_scale_before_matmul)
      .exact()
      .emits({"MatMul", "Mul", "Div", "Tile", "Reshape"})
      .summary("a float64 MatMul of an operand scaled by a one-element constant float32 cannot "
               "hold -> the scale as a vector (see f64_scale_after_matmul)");
  plugin.rule("batch_norm_affine", "Add", batch_norm_affine)
      .exact()
      .emits({"BatchNormalization", "Transpose", "Reshape"})
      .summary("(x - m) * k + b with per-channel m, k, b computed from constants (an inference "
               "batch norm written out: linen's BatchNorm traced, or by hand) -> "
               "BatchNormalization (var 1, epsilon 0) where the channels are axis 1: a 2-D x, or "
               "x the channels-last Transpose of a Conv's result (onnxruntime then folds it into "
               "the Conv)");
  plugin.rule("max0_to_relu", "Max", max0_to_relu)
      .finite("Relu(-0.0) is -0.0 where JAX gives 0.0")
      .emits({"Relu"})
      .summary("Max(x, 0) -> Relu. Signed zero: Relu(-0.0) is -0.0 where JAX gives 0.0; "
               "NaN and inf as JAX");
  plugin.rule("softmax", "Div", softmax)
      .exact()
      .emits({"Softmax"})
      .summary("exp(x - max x) / sum exp(x - max x) over one axis (with JAX's -inf initial and "
               "the lowering's NaN guard) -> Softmax. A row holding NaN or inf gives NaN, as in JAX");
  plugin.rule("log_softmax", "Sub", log_softmax)
      .exact()
      .emits({"LogSoftmax"})
      .summary("(x - max x) - log(sum exp(x - max x)) over one axis -> LogSoftmax, float32 "
               "only (onnxruntime's float64 kernel gives a row holding +inf NaN there and -inf "
               "elsewhere). A row holding NaN or inf gives NaN, as in JAX");
  for (const char* root : {"Mul", "Div"})
    plugin.rule(std::string("normalization_") + root, root, normalization)
        .exact()
        .emits({"LayerNormalization", "RMSNormalization", "Mul"})
        .min_opset(17)
        .summary("(x - mean) / sqrt(var + eps) * scale over trailing axes (var as mean((x - "
                 "mean)^2) or JAX's max(0, mean(x^2) - mean^2)) -> LayerNormalization (opset 17); "
                 "x / sqrt(mean(x^2) + eps) * scale -> RMSNormalization (opset 23). onnxruntime "
                 "computes var as mean((x - mean)^2): where JAX's fast form cancels "
                 "catastrophically the fused op is the more accurate. float64: of x times a "
                 "constant, which keeps an epsilon float32 would round exact. NaN/inf rows give "
                 "NaN, as in JAX");
  plugin.rule("normalization_bias", "Add", normalization_bias)
      .exact()
      .emits({"LayerNormalization", "Mul"})
      .min_opset(17)
      .summary("a layer norm plus a per-feature bias -> LayerNormalization with B");
  plugin.rule("normalization_scale", "Mul", normalization_scale)
      .exact()
      .emits({"LayerNormalization", "RMSNormalization"})
      .min_opset(17)
      .summary("a normalization times a constant per-feature factor -> its scale (and bias) "
               "times the factor");
  plugin.rule("gelu", "Mul", gelu)
      .exact()
      .emits({"Gelu"})
      .min_opset(20)
      .summary("0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) or 0.5 x (1 + erf(x/sqrt 2)) -> "
               "Gelu (float32; onnxruntime has no float64 Gelu). NaN and inf as JAX. JAX's exact "
               "gelu lowers erfc as a polynomial, which this rule does not match");
  plugin.rule("swish", "Mul", swish)
      .finite("onnxruntime's Swish, like its Sigmoid, is accurate in the absolute, not the "
              "relative, sense for tiny results (x far below 0)")
      .emits({"Swish"})
      .min_opset(24)
      .summary("x * sigmoid(x) -> Swish (opset 24). Like onnxruntime's Sigmoid, accurate in the "
               "absolute, not the relative, sense for tiny results (x far below 0)");
}
