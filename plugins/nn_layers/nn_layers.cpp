// nn_layers: flax nnx layers and flax pooling, bound through binding specs
// (ABI 1.2) so that each call is the ONNX op made for it:
//   nnx.Linear        -> Gemm (2-D input) or MatMul + Add  (and linen.Dense,
//                        nnx.LinearGeneral over the last axis)
//   nnx.LayerNorm     -> LayerNormalization (opset 17)     (and linen.LayerNorm)
//   nnx.RMSNorm       -> RMSNormalization (opset 23)
//   nnx.BatchNorm     -> BatchNormalization (inference mode; and linen.BatchNorm)
//   nnx.GroupNorm     -> GroupNormalization (opset 21)
//   max_pool/avg_pool -> MaxPool / AveragePool (NHWC inside one Transpose pair,
//                        which the optimizer folds against a Conv's; max_pool
//                        also through flax.linen.pooling.pool)
//   nnx.Embed         -> Clip + Gather (not with crisp="exact", see lower_embed)
//   nnx.LSTMCell      -> two Gemms for all gates (and OptimizedLSTMCell)
//   equinox.nn Linear, LayerNorm, RMSNorm, GroupNorm (per example, usually
//                     under vmap) -> Gemm / MatMul + Add, LayerNormalization,
//                     RMSNormalization (+ Add), GroupNormalization
// The equation carries `reference`, the original call traced as a function
// of the operands; it is inlined where the op does not fit (older opset, a
// dtype onnxruntime has no kernel of the op for, an unusual configuration).
//
// Numerics: each agrees with JAX to float rounding on finite inputs. MaxPool
// differs on NaN: onnxruntime's MaxPool skips a NaN that is not the first
// element of a window, JAX's max propagates it, so max_pool is bound only
// without crisp="exact".
#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

void lower_reference(Lowering& L) {
  std::vector<Value> outs = L.inline_jaxpr(L.param("reference").as_jaxpr(), L.inputs());
  for (size_t i = 0; i < outs.size(); ++i) L.bind(i, outs[i]);
}

bool is_f32_or_f64(int32_t t) { return t == dtype::f32 || t == dtype::f64; }

// All inputs float32 or all float64.
bool same_float_inputs(const Lowering& L) {
  int32_t t = L.in_aval(0).dtype;
  if (!is_f32_or_f64(t)) return false;
  for (size_t i = 1; i < L.num_inputs(); ++i)
    if (L.in_aval(i).dtype != t) return false;
  return true;
}

// y = x @ kernel (+ bias) over the last axis of x: Gemm for a 2-D x, else
// MatMul (+ Add). A kernel (in, out...) of LinearGeneral is used flattened to
// (in, prod(out)) (the optimizer folds that Reshape of a constant) and the
// result reshaped to (..., out...); a following Reshape that merges the out
// dims again (Attention's) then folds away.
//
// With the param `transposed_kernel` (equinox Linear: weight (out, in)), the
// kernel is 2-D (out, in): Gemm with transB, else a Transpose (of a constant:
// folded) and MatMul.
void lower_linear(Lowering& L) {
  Aval x = L.in_aval(0), w = L.in_aval(1);
  if (!same_float_inputs(L) || x.rank() < 1 || w.rank() < 2 || !w.is_static())
    return lower_reference(L);
  const bool bias = L.num_inputs() == 3;
  if (L.has_param("transposed_kernel") && L.param("transposed_kernel").as_bool()) {
    if (w.rank() != 2 || (bias && L.in_aval(2).rank() != 1)) return lower_reference(L);
    Aval out = L.out_aval(0);
    Value y;
    if (x.rank() == 2) {
      std::vector<Value> ins = {L.input(0), L.input(1)};
      if (bias) ins.push_back(L.input(2));
      y = L.op("Gemm", ins, out, {Attr::i("transB", 1)});
    } else {
      Value wt = transpose(L, L.input(1), w, {1, 0});
      y = L.op("MatMul", {L.input(0), wt}, out);
      if (bias) y = L.op("Add", {y, L.input(2)}, out);
    }
    return L.bind(0, y);
  }
  if (bias && L.in_aval(2).rank() != w.rank() - 1) return lower_reference(L);
  int64_t n = 1;
  for (size_t i = 1; i < w.shape.size(); ++i) n *= w.shape[i].value;
  Value wv = L.input(1), bv = bias ? L.input(2) : kNoValue;
  if (w.rank() > 2) {
    wv = reshape(L, wv, w, w.with_shape({w.shape[0], Dim(n)}));
    if (bias) bv = reshape(L, bv, L.in_aval(2), L.in_aval(2).with_shape({Dim(n)}));
  }
  Aval out = L.out_aval(0);
  Shape flat_shape = x.shape;
  flat_shape.back() = Dim(n);
  Aval flat = out.with_shape(flat_shape);
  Value y;
  if (x.rank() == 2) {
    std::vector<Value> ins = {L.input(0), wv};
    if (bias) ins.push_back(bv);
    y = L.op("Gemm", ins, flat);
  } else {
    y = L.op("MatMul", {L.input(0), wv}, flat);
    if (bias) y = L.op("Add", {y, bv}, flat);
  }
  if (w.rank() > 2) {
    y = reshape(L, y, flat, out);
  }
  L.bind(0, y);
}

// ONNX's epsilon attributes are float32: in float64 that rounds eps (1e-5 by
// 2.5e-8 relative), which shows in rows whose variance is near eps or below.
// A layer or RMS norm of k * x with epsilon e computes
// (x - mean) / sqrt(var + e / k^2) (its statistics scale by k and k^2), so
// e = float32(4 eps), k = sqrt(e / eps) make e / k^2 == eps to float64
// rounding. k is near 2, not 1: onnxruntime drops a Mul by what float32
// rounds to 1 (ORT_ENABLE_BASIC). The input to normalize and the epsilon,
// or {kNoValue, 0} when float32 cannot stand for eps (the reference lowers).
struct NormInput {
  Value x;
  double epsilon;
};
NormInput eps_exact_input(Lowering& L, Value x, const Aval& a, double eps) {
  if (a.dtype != dtype::f64 || static_cast<double>(static_cast<float>(eps)) == eps) return {x, eps};
  const float e = static_cast<float>(4 * eps);
  if (!(e > 0) || !std::isfinite(e)) return {kNoValue, 0};
  const double k = std::sqrt(static_cast<double>(e) / eps);
  return {L.op("Mul", {x, scalar(L, dtype::f64, k)}, a), static_cast<double>(e)};
}

// Normalization over the last axis: LayerNormalization (x, scale[, bias]) or
// RMSNormalization (x, scale).
void lower_last_axis_norm(Lowering& L, const char* op, int64_t min_opset) {
  Aval x = L.in_aval(0);
  if (L.opset() < min_opset || !same_float_inputs(L) || x.rank() < 1) return lower_reference(L);
  for (size_t i = 1; i < L.num_inputs(); ++i)
    if (L.in_aval(i).rank() != 1) return lower_reference(L);
  NormInput n = eps_exact_input(L, L.input(0), x, L.param("epsilon").as_float());
  if (n.x == kNoValue) return lower_reference(L);
  std::vector<Value> ins = L.inputs();
  ins[0] = n.x;
  L.bind(0, L.op(op, ins, L.out_aval(0), {Attr::i("axis", -1), Attr::f("epsilon", n.epsilon)}));
}

// RMSNormalization (x, scale) over the last axis, and equinox's optional
// bias (a third operand) added after it (ONNX's op has no bias input).
void lower_rms_norm(Lowering& L) {
  if (L.num_inputs() < 3) return lower_last_axis_norm(L, "RMSNormalization", 23);
  Aval x = L.in_aval(0);
  if (L.opset() < 23 || !same_float_inputs(L) || x.rank() < 1) return lower_reference(L);
  for (size_t i = 1; i < L.num_inputs(); ++i)
    if (L.in_aval(i).rank() != 1) return lower_reference(L);
  NormInput n = eps_exact_input(L, L.input(0), x, L.param("epsilon").as_float());
  if (n.x == kNoValue) return lower_reference(L);
  Value y = L.op("RMSNormalization", {n.x, L.input(1)}, L.out_aval(0),
                 {Attr::i("axis", -1), Attr::f("epsilon", n.epsilon)});
  L.bind(0, L.op("Add", {y, L.input(2)}, L.out_aval(0)));
}

// NHWC <-> NCHW permutations for a rank-r tensor with channels last.
std::vector<int64_t> to_channels_first(int64_t r) {
  std::vector<int64_t> p = {0, r - 1};
  for (int64_t i = 1; i < r - 1; ++i) p.push_back(i);
  return p;
}
std::vector<int64_t> to_channels_last(int64_t r) {
  std::vector<int64_t> p = {0};
  for (int64_t i = 2; i < r; ++i) p.push_back(i);
  p.push_back(1);
  return p;
}

Shape permuted(const Shape& s, const std::vector<int64_t>& perm) {
  Shape out;
  for (int64_t p : perm) out.push_back(s[static_cast<size_t>(p)]);
  return out;
}

// Inference batch norm, channels last: (x - mean) / sqrt(var + eps) * scale + bias.
// In float64 an eps that float32 (the attribute's type) rounds is made exact
// through the variance: var + (eps - eps32), plus the op's eps32.
void lower_batch_norm(Lowering& L) {
  Aval x = L.in_aval(0);
  if (!same_float_inputs(L) || x.rank() < 2) return lower_reference(L);
  const double eps = L.param("epsilon").as_float();
  const float e32 = static_cast<float>(eps);
  Value var = L.input(4);
  if (x.dtype == dtype::f64 && static_cast<double>(e32) != eps) {
    if (!std::isfinite(e32)) return lower_reference(L);
    var = L.op("Add", {var, scalar(L, dtype::f64, eps - static_cast<double>(e32))}, L.in_aval(4));
  }
  Value xv = L.input(0);
  auto in = to_channels_first(x.rank());
  Value xt = transpose(L, xv, x, in);
  Aval t_aval = x.with_shape(permuted(x.shape, in));
  Value y = L.op("BatchNormalization", {xt, L.input(1), L.input(2), L.input(3), var}, t_aval,
                 {Attr::f("epsilon", eps)});
  L.bind(0, transpose(L, y, t_aval, to_channels_last(x.rank())));
}

// GroupNorm, channels last, statistics over every axis but the batch (axis 0)
// within each group: GroupNormalization (opset 21: per-channel scale, bias).
//
// With the param `example_rank` (equinox GroupNorm: called per example on
// (channels, ...), usually under jax.vmap), x is channels first already: one
// batch dim leading (x.rank() == example_rank + 1) is GroupNormalization's
// layout; an unbatched call or more batch dims lower the reference.
//
// onnxruntime's GroupNormalization (its function body reshapes to (N, G, -1))
// fails on a batch of 0, which JAX defines (an empty result): a symbolic batch
// is checked at run time (empty_guard.hpp: an If gives the empty input back,
// else runs the op); a static 0, or a target without guard Ifs
// (target="portable"), lowers the reference.
Value group_normalization(Lowering& L, Value xt, const Aval& t_aval) {
  std::vector<Attr> attrs = {Attr::i("num_groups", L.param("num_groups").as_int()),
                             Attr::f("epsilon", L.param("epsilon").as_float())};
  return unless_empty(L, {t_aval.shape[0]}, t_aval, "group_norm", [&] { return xt; },
                      [&] { return L.op("GroupNormalization", {xt, L.input(1), L.input(2)}, t_aval, attrs); });
}

void lower_group_norm(Lowering& L) {
  Aval x = L.in_aval(0);
  if (L.opset() < 21 || x.dtype != dtype::f32 || !same_float_inputs(L) || x.rank() < 3 ||
      x.shape[0] == Dim(0) || (!x.shape[0].is_static() && !L.target_supports("if_guard")))
    return lower_reference(L);
  if (L.has_param("example_rank")) {
    if (x.rank() != L.param("example_rank").as_int() + 1) return lower_reference(L);
    return L.bind(0, group_normalization(L, L.input(0), L.out_aval(0)));
  }
  auto in = to_channels_first(x.rank());
  Value xt = transpose(L, L.input(0), x, in);
  Aval t_aval = x.with_shape(permuted(x.shape, in));
  Value y = group_normalization(L, xt, t_aval);
  L.bind(0, transpose(L, y, t_aval, to_channels_last(x.rank())));
}

// flax max_pool / avg_pool on (batch, spatial..., features).
void lower_pool(Lowering& L, bool max) {
  Aval x = L.in_aval(0);
  std::vector<int64_t> window = L.param("window").as_ints();
  const int64_t n = static_cast<int64_t>(window.size());
  bool typed = max ? is_f32_or_f64(x.dtype) : x.dtype == dtype::f32;
  if (!typed || x.rank() != n + 2) return lower_reference(L);
  std::vector<int64_t> strides(static_cast<size_t>(n), 1);
  if (!L.param("strides").is_none()) strides = L.param("strides").as_ints();
  if (static_cast<int64_t>(strides.size()) != n) return lower_reference(L);
  // ONNX pads: all the starts, then all the ends.
  std::vector<int64_t> pads(static_cast<size_t>(2 * n), 0);
  bool same_upper = false;  // JAX's SAME over a symbolic extent: ONNX computes the pads
  Param padding = L.param("padding");
  if (padding.kind() == JXO_PARAM_STRING) {
    std::string mode = padding.as_string();
    if (mode == "SAME") {
      for (int64_t i = 0; i < n; ++i) {
        const Dim& d = x.shape[static_cast<size_t>(i + 1)];
        // JAX pads the odd element at the end, as SAME_UPPER does.
        if (!d.is_static()) { same_upper = true; break; }
        int64_t s = strides[i], out = (d.value + s - 1) / s;
        int64_t total = std::max<int64_t>((out - 1) * s + window[i] - d.value, 0);
        pads[i] = total / 2;
        pads[n + i] = total - total / 2;
      }
    } else if (mode != "VALID") {
      return lower_reference(L);
    }
  } else if (padding.kind() == JXO_PARAM_LIST && static_cast<int64_t>(padding.size()) == n) {
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> lo_hi = padding[i].as_ints();
      if (lo_hi.size() != 2 || lo_hi[0] < 0 || lo_hi[1] < 0) return lower_reference(L);
      pads[i] = lo_hi[0];
      pads[n + i] = lo_hi[1];
    }
  } else {
    return lower_reference(L);
  }
  auto in = to_channels_first(x.rank());
  Value xt = transpose(L, L.input(0), x, in);
  Aval out = L.out_aval(0);
  Aval t_out = out.with_shape(permuted(out.shape, in));
  std::vector<Attr> attrs = {Attr::ints("kernel_shape", window), Attr::ints("strides", strides)};
  attrs.push_back(same_upper ? Attr::s("auto_pad", "SAME_UPPER") : Attr::ints("pads", pads));
  if (!max)
    attrs.push_back(Attr::i("count_include_pad", L.param("count_include_pad").as_bool() ? 1 : 0));
  Value y = L.op(max ? "MaxPool" : "AveragePool", {xt}, t_out, attrs);
  L.bind(0, transpose(L, y, t_out, to_channels_last(x.rank())));
}

// nnx.Embed: the rows of the table at the indices. ONNX Gather reads a
// negative index from the end, as jnp.take does; Clip keeps every index
// inside [-N, N - 1] (onnxruntime fails on one outside). jnp.take's default
// mode ("fill") gives a NaN row for an index out of range, Clip the first or
// last row: so Embed is bound only without crisp="exact". Against the exact
// lowering (normalize, clamp, Gather, then a range test and Where on the
// rows) this saves about ten small nodes per table.
void lower_embed(Lowering& L) {
  Aval idx = L.in_aval(0), table = L.in_aval(1);
  if ((idx.dtype != dtype::i32 && idx.dtype != dtype::i64) || table.rank() < 1 ||
      !table.shape[0].is_static() || table.shape[0].value < 1)
    return lower_reference(L);
  const int64_t n = table.shape[0].value;
  Value i = L.op("Clip", {L.input(0), scalar(L, idx.dtype, static_cast<double>(-n)),
                          scalar(L, idx.dtype, static_cast<double>(n - 1))}, idx);
  L.bind(0, L.op("Gather", {L.input(1), i}, L.out_aval(0), {Attr::i("axis", 0)}));
}

// One step of an nnx LSTMCell (eight Linears; the input ones without bias)
// or OptimizedLSTMCell (one input and one hidden Linear of 4 * hidden
// features, gates i, f, g, o), on 2-D inputs: all four gates from two Gemms,
// z = x @ Wx + (h @ Wh + b), in place of eight Gemms and four Adds. In an
// nnx.RNN that is the body of the scan's Loop, run once per step. The
// LSTMCell's kernels are concatenated as i, f, o, g so that one Sigmoid and
// one Tanh cover the gates. Operands: c, h, x, then the LSTMCell's kernels
// ii, if, ig, io, hi, hf, hg, ho and biases hi, hf, hg, ho, or the
// OptimizedLSTMCell's dense_i kernel, dense_h kernel and bias. Outputs:
// new c, new h, new h (the cell's ((c, h), h)). The same arithmetic in the
// same order as the cell's.
void lower_lstm_cell(Lowering& L) {
  const size_t n = L.num_inputs();
  const bool cell8 = n == 15, fused = n == 6;
  if ((!cell8 && !fused) || !same_float_inputs(L) || L.num_outputs() != 3) return lower_reference(L);
  Aval c = L.in_aval(0), h = L.in_aval(1), x = L.in_aval(2);
  if (c.rank() != 2 || h.rank() != 2 || x.rank() != 2 || c.shape != h.shape) return lower_reference(L);
  for (size_t i = 3; i < n; ++i)
    if (!L.in_aval(i).is_static()) return lower_reference(L);
  const Dim batch = x.shape[0];
  const int64_t in = L.in_aval(3).shape[0].value;
  const int64_t hid = cell8 ? L.in_aval(3).shape[1].value : L.in_aval(3).shape[1].value / 4;
  if (!h.shape[1].is_static() || h.shape[1].value != hid || !x.shape[1].is_static() ||
      x.shape[1].value != in)
    return lower_reference(L);
  const int32_t t = x.dtype;
  Value wx, wh, b;
  if (cell8) {
    auto cat = [&](size_t i, size_t f, size_t g, size_t o, const Shape& whole, int64_t axis) {
      return L.op("Concat", {L.input(i), L.input(f), L.input(o), L.input(g)}, Aval(t, whole),
                  {Attr::i("axis", axis)});
    };
    wx = cat(3, 4, 5, 6, {Dim(in), Dim(4 * hid)}, 1);
    wh = cat(7, 8, 9, 10, {Dim(hid), Dim(4 * hid)}, 1);
    b = cat(11, 12, 13, 14, {Dim(4 * hid)}, 0);
  } else {
    Aval ki = L.in_aval(3), kh = L.in_aval(4), bh = L.in_aval(5);
    if (ki.shape[1].value != 4 * hid || kh.rank() != 2 || kh.shape[0].value != hid ||
        kh.shape[1].value != 4 * hid || bh.rank() != 1 || bh.shape[0].value != 4 * hid)
      return lower_reference(L);
    wx = L.input(3);
    wh = L.input(4);
    b = L.input(5);
  }
  Aval gates(t, {batch, Dim(4 * hid)}), one(t, {batch, Dim(hid)});
  Value z = L.op("Gemm", {L.input(2), wx, L.op("Gemm", {L.input(1), wh, b}, gates)}, gates);
  Value i, f, g, o;
  if (cell8) {  // i, f, o | g
    std::vector<Value> parts = L.op_n("Split", {z, i64s(L, {3 * hid, hid})},
                                      {Aval(t, {batch, Dim(3 * hid)}), one}, {Attr::i("axis", 1)});
    Value s = L.op("Sigmoid", {parts[0]}, Aval(t, {batch, Dim(3 * hid)}));
    std::vector<Value> ifo = L.op_n("Split", {s, i64s(L, {hid, hid, hid})}, {one, one, one},
                                    {Attr::i("axis", 1)});
    i = ifo[0];
    f = ifo[1];
    o = ifo[2];
    g = L.op("Tanh", {parts[1]}, one);
  } else {  // i, f, g, o
    std::vector<Value> parts = L.op_n("Split", {z, i64s(L, {hid, hid, hid, hid})},
                                      {one, one, one, one}, {Attr::i("axis", 1)});
    i = L.op("Sigmoid", {parts[0]}, one);
    f = L.op("Sigmoid", {parts[1]}, one);
    g = L.op("Tanh", {parts[2]}, one);
    o = L.op("Sigmoid", {parts[3]}, one);
  }
  Value new_c = L.op("Add", {L.op("Mul", {f, L.input(0)}, one), L.op("Mul", {i, g}, one)}, one);
  Value new_h = L.op("Mul", {o, L.op("Tanh", {new_c}, one)}, one);
  L.bind(0, new_c);
  L.bind(1, new_h);
  L.bind(2, new_h);
}

// The guards every nnx normalization shares: flax's own arithmetic, no mask,
// no cross-device statistics, the last axis.
Binding nnx_norm(const std::string& cls, const char* axes_attr) {
  Binding b("flax.nnx." + cls + ".__call__");
  b.exact();
  b.operand("x", Binding::kLeadingDims)
      .param("epsilon", "self.epsilon")
      .when("mask is None")
      .when("self.dtype is None")
      .when("self.axis_name is None")
      .when(std::string("self.") + axes_attr + " in (-1, (-1,))");
  return b;
}

}  // namespace

JAXONNX_PLUGIN("nn_layers", "0.1.0") {
  auto linear = [](bool bias) {
    Binding b("flax.nnx.Linear.__call__");
    b.exact();
    b.operand("inputs", Binding::kLeadingDims).operand("self.kernel[...]");
    if (bias) b.operand("self.bias[...]");
    b.when(bias ? "self.bias is not None" : "self.bias is None")
        .when("out_sharding is None")
        .when("self.dtype is None")
        .when("self.preferred_element_type is None")
        .when("self.dot_general.__name__ == 'dot_general'")
        .when("self.dot_general.__module__ == 'jax._src.lax.lax'");
    return b;
  };
  // flax linen: the params live in the bound module's variables (absent while
  // initializing, when the original runs and creates them).
  auto linen_param = [](const char* name) {
    return std::string("self.variables['params']['") + name + "']";
  };
  auto dense = [&](bool bias) {
    Binding b("flax.linen.Dense.__call__");
    b.exact();
    b.operand("inputs", Binding::kLeadingDims).operand(linen_param("kernel"));
    if (bias) b.operand(linen_param("bias"));
    b.when("'params' in self.variables")
        .when("'kernel' in self.variables['params']")
        .when(bias ? "self.use_bias" : "not self.use_bias")
        .when("self.dtype is None")
        .when("self.dot_general is None")
        .when("self.dot_general_cls is None");
    return b;
  };
  // nnx.LinearGeneral over the last axis (MultiHeadAttention's projections).
  auto linear_general = [](bool bias) {
    Binding b("flax.nnx.LinearGeneral.__call__");
    b.exact();
    b.operand("inputs", Binding::kLeadingDims).operand("self.kernel[...]");
    if (bias) b.operand("self.bias[...]");
    b.when(bias ? "self.bias is not None" : "self.bias is None")
        .when("self.axis in (-1, (-1,))")
        .when("not self.batch_axis")
        .when("out_sharding is None")
        .when("self.dtype is None")
        .when("self.preferred_element_type is None")
        .when("self.dot_general_cls is None")
        .when("self.dot_general is None or (self.dot_general.__name__ == 'dot_general' and "
              "self.dot_general.__module__ == 'jax._src.lax.lax')");
    return b;
  };
  // equinox Linear: called per example (x of shape (in,), usually under
  // jax.vmap, which binds the primitive again with the batch dim leading),
  // weight (out, in). The "scalar" feature modes reshape around the product.
  auto eqx_linear = [](bool bias) {
    Binding b("equinox.nn.Linear.__call__");
    b.exact();
    b.operand("x", Binding::kLeadingDims).operand("self.weight");
    if (bias) b.operand("self.bias");
    b.param("transposed_kernel", "True")
        .when(bias ? "self.bias is not None" : "self.bias is None")
        .when("self.in_features != 'scalar'")
        .when("self.out_features != 'scalar'")
        .when("x.ndim == 1");
    return b;
  };
  plugin.primitive("jaxonnx.nn.linear", lower_linear)
      .emits({"Gemm", "MatMul", "Add", "Reshape", "Transpose"})
      .doc(onnx_doc("Gemm"))
      .summary("flax nnx Linear, LinearGeneral (last axis) / linen Dense / equinox Linear as "
               "Gemm (2-D input) or MatMul + Add")
      .binds(eqx_linear(true))
      .binds(eqx_linear(false))
      .binds(linear_general(true))
      .binds(linear_general(false))
      .binds(linear(true))
      .binds(linear(false))
      .binds(dense(true))
      .binds(dense(false));

  Binding embed("flax.nnx.Embed.__call__");
  embed.operand("inputs", Binding::kLeadingDims)
      .operand("self.embedding[...]")
      .finite("an index out of range gives the first or last row; JAX gives a NaN row")
      .when("out_sharding is None")
      .when("self.num_embeddings > 1")
      .when("self.dtype == self.embedding.dtype")
      .when("self.promote_dtype.__name__ == 'promote_dtype'")
      .when("self.promote_dtype.__module__ == 'flax.nnx.nn.dtypes'");
  plugin.primitive("jaxonnx.nn.embed", lower_embed)
      .emits({"Clip", "Gather"})
      .doc(onnx_doc("Gather"))
      .summary("flax nnx Embed as Clip + Gather; an index out of range gives the first "
               "or last row (JAX: a NaN row), so not bound with crisp=\"exact\"")
      .binds(embed);

  // nnx LSTMCell / OptimizedLSTMCell with sigmoid gates and tanh activations.
  auto lstm_cell = [](bool cell8) {
    Binding b(cell8 ? "flax.nnx.LSTMCell.__call__" : "flax.nnx.OptimizedLSTMCell.__call__");
    b.exact();
    b.operand("carry[0]").operand("carry[1]").operand("inputs");
    if (cell8) {
      for (const char* k : {"ii", "if_", "ig", "io", "hi", "hf", "hg", "ho"})
        b.operand(std::string("self.") + k + ".kernel[...]");
      for (const char* k : {"hi", "hf", "hg", "ho"})
        b.operand(std::string("self.") + k + ".bias[...]");
      for (const char* k : {"ii", "if_", "ig", "io"})
        b.when(std::string("self.") + k + ".bias is None");
    } else {
      b.operand("self.dense_i.kernel[...]")
          .operand("self.dense_h.kernel[...]")
          .operand("self.dense_h.bias[...]")
          .when("self.dense_i.bias is None");
    }
    b.when("self.__module__ == 'flax.nnx.nn.recurrent'")
        .when("self.gate_fn.__name__ == 'sigmoid'")
        .when("self.gate_fn.__module__ == 'jax._src.nn.functions'")
        .when("self.activation_fn.__name__ == 'tanh'")
        .when("self.activation_fn.__module__ == 'jax.numpy'")
        .when("self.dtype is None")
        .when("self.promote_dtype.__name__ == 'promote_dtype'")
        .when("self.promote_dtype.__module__ == 'flax.nnx.nn.dtypes'")
        .when("len(carry) == 2")
        .when("inputs.ndim == 2");
    return b;
  };
  plugin.primitive("jaxonnx.nn.lstm_cell", lower_lstm_cell)
      .emits({"Gemm", "Concat", "Split", "Sigmoid", "Tanh", "Mul", "Add"})
      .doc(onnx_doc("Gemm"))
      .summary("one step of a flax nnx LSTMCell / OptimizedLSTMCell (sigmoid, tanh; 2-D "
               "input) as two Gemms for all gates, one Split, the gate activations")
      .binds(lstm_cell(true))
      .binds(lstm_cell(false));

  auto layer_norm = [](bool bias) {
    Binding b = nnx_norm("LayerNorm", "reduction_axes");
    b.when("self.feature_axes in (-1, (-1,))").when("self.scale is not None");
    b.operand("self.scale[...]");
    if (bias) b.operand("self.bias[...]");
    b.when(bias ? "self.bias is not None" : "self.bias is None");
    return b;
  };
  auto linen_layer_norm = [&](bool bias) {
    Binding b("flax.linen.LayerNorm.__call__");
    b.exact();
    b.operand("x", Binding::kLeadingDims).operand(linen_param("scale"));
    if (bias) b.operand(linen_param("bias"));
    b.param("epsilon", "self.epsilon")
        .when("'params' in self.variables")
        .when("'scale' in self.variables['params']")
        .when("self.use_scale")
        .when(bias ? "self.use_bias" : "not self.use_bias")
        .when("mask is None")
        .when("self.dtype is None")
        .when("self.axis_name is None")
        .when("self.reduction_axes in (-1, (-1,))")
        .when("self.feature_axes in (-1, (-1,))");
    return b;
  };
  // equinox LayerNorm / RMSNorm: called per example, normalizing over all of
  // x (x.shape == self.shape); bound for a 1-D shape (the last axis; under
  // jax.vmap the batch dims lead). Without `state` only: with it the call
  // returns (out, state); equinox's default is a bare object(), told apart by
  // its type's name.
  auto eqx_norm = [](const std::string& cls, bool bias) {
    Binding b("equinox.nn." + cls + ".__call__");
    b.exact();
    b.operand("x", Binding::kLeadingDims).operand("self.weight");
    if (bias) b.operand("self.bias");
    b.param("epsilon", "self.eps")
        .when("type(state).__name__ == 'object'")
        .when("len(self.shape) == 1")
        .when("x.shape == self.shape")
        .when("self.use_weight")
        .when(bias ? "self.use_bias" : "not self.use_bias");
    return b;
  };
  plugin.primitive("jaxonnx.nn.layer_norm",
                   [](Lowering& L) { lower_last_axis_norm(L, "LayerNormalization", 17); })
      .emits({"LayerNormalization", "Mul"})
      .doc(onnx_doc("LayerNormalization"))
      .summary("flax nnx / linen LayerNorm over the last axis, equinox LayerNorm of a 1-D "
               "shape as LayerNormalization (float64: of x times a constant, which keeps an "
               "epsilon float32 would round exact)")
      .binds(eqx_norm("LayerNorm", true))
      .binds(eqx_norm("LayerNorm", false))
      .binds(layer_norm(true))
      .binds(layer_norm(false))
      .binds(linen_layer_norm(true))
      .binds(linen_layer_norm(false));

  plugin.primitive("jaxonnx.nn.rms_norm", lower_rms_norm)
      .emits({"RMSNormalization", "Add", "Mul"})
      .doc(onnx_doc("RMSNormalization"))
      .summary("flax nnx RMSNorm over the last axis, equinox RMSNorm of a 1-D shape as "
               "RMSNormalization (opset 23; equinox's bias: an Add after it; float64: of x "
               "times a constant, as LayerNorm)")
      .binds(eqx_norm("RMSNorm", true))
      .binds(eqx_norm("RMSNorm", false))
      .binds(nnx_norm("RMSNorm", "reduction_axes")
                 .when("self.feature_axes in (-1, (-1,))")
                 .when("self.scale is not None")
                 .operand("self.scale[...]"));

  // flax linen BatchNorm in inference mode: the statistics live in the bound
  // module's batch_stats (linen's merge_param: exactly one of the call's flag
  // and the attribute is set).
  Binding linen_batch_norm("flax.linen.BatchNorm.__call__");
  linen_batch_norm.exact()
      .operand("x", Binding::kLeadingDims)
      .operand(linen_param("scale"))
      .operand(linen_param("bias"))
      .operand("self.variables['batch_stats']['mean']")
      .operand("self.variables['batch_stats']['var']")
      .param("epsilon", "self.epsilon")
      .when("(use_running_average is None and self.use_running_average is True) or "
            "(use_running_average is True and self.use_running_average is None)")
      .when("'params' in self.variables")
      .when("'batch_stats' in self.variables")
      .when("'scale' in self.variables['params']")
      .when("'bias' in self.variables['params']")
      .when("self.use_scale")
      .when("self.use_bias")
      .when("mask is None")
      .when("self.dtype is None")
      .when("self.axis_name is None")
      .when("self.axis in (-1, (-1,))");
  plugin.primitive("jaxonnx.nn.batch_norm", lower_batch_norm)
      .emits({"BatchNormalization", "Transpose", "Add"})
      .doc(onnx_doc("BatchNormalization"))
      .summary("flax nnx / linen BatchNorm in inference mode as BatchNormalization (float64: "
               "the variance plus what float32 rounds off epsilon)")
      .binds(linen_batch_norm)
      .binds(nnx_norm("BatchNorm", "axis")
                 .when("use_running_average or (use_running_average is None and "
                       "self.use_running_average)")
                 .when("self.scale is not None")
                 .when("self.bias is not None")
                 .operand("self.scale[...]")
                 .operand("self.bias[...]")
                 .operand("self.mean[...]")
                 .operand("self.var[...]"));

  Binding group_norm("flax.nnx.GroupNorm.__call__");
  group_norm.exact();
  group_norm.operand("x")
      .operand("self.scale[...]")
      .operand("self.bias[...]")
      .param("epsilon", "self.epsilon")
      .param("num_groups", "self.num_groups")
      .when("mask is None")
      .when("self.dtype is None")
      .when("self.axis_name is None")
      .when("self.reduction_axes is None")
      .when("self.scale is not None")
      .when("self.bias is not None")
      .when("self.num_groups * self.group_size == x.shape[-1]");
  Binding eqx_group_norm("equinox.nn.GroupNorm.__call__");
  eqx_group_norm.exact();
  eqx_group_norm.operand("x", Binding::kLeadingDims)
      .operand("self.weight")
      .operand("self.bias")
      .param("epsilon", "self.eps")
      .param("num_groups", "self.groups")
      .param("example_rank", "x.ndim")
      .when("type(state).__name__ == 'object'")
      .when("self.channelwise_affine")
      .when("x.ndim >= 2")
      .when("x.shape[0] == self.weight.shape[0]")
      .when("x.shape[0] % self.groups == 0");
  plugin.primitive("jaxonnx.nn.group_norm", lower_group_norm)
      .emits({"GroupNormalization", "Transpose", "If", "Equal", "ReduceMin", "Add", "Shape"})
      .emits_shape_ops()
      .doc(onnx_doc("GroupNormalization"))
      .summary("flax nnx GroupNorm, equinox GroupNorm (one vmapped batch dim) as "
               "GroupNormalization (opset 21; inside an If on a symbolic batch, which "
               "onnxruntime's op refuses to be 0)")
      .binds(group_norm)
      .binds(eqx_group_norm);

  for (bool max : {true, false}) {
    const char* fn = max ? "max_pool" : "avg_pool";
    auto ref = plugin.primitive(std::string("jaxonnx.nn.") + fn,
                                [max](Lowering& L) { lower_pool(L, max); })
                   .emits({max ? "MaxPool" : "AveragePool", "Transpose"})
                   .doc(onnx_doc(max ? "MaxPool" : "AveragePool"))
                   .summary(std::string("flax ") + fn + " as " + (max ? "MaxPool" : "AveragePool") +
                            (max ? " (skips NaN; not bound with crisp=\"exact\"; the max of "
                                   "0.0 and -0.0 is the first of them, JAX: 0.0)" : ""));
    for (const char* ns : {"flax.nnx.", "flax.linen."}) {
      Binding b(std::string(ns) + fn);
      b.operand("inputs")
          .param("window", "tuple(window_shape)")
          .param("strides", "strides")
          .param("padding", "padding");
      if (max) b.finite("MaxPool skips NaN; the max of 0.0 and -0.0 is the first of them (JAX: 0.0)");
      else b.exact().param("count_include_pad", "count_include_pad");
      ref.binds(b);
    }
    // flax's max_pool reached through a reference stored before conversion
    // (`pool = nnx.max_pool`, a functools.partial of it in an nnx.Sequential)
    // is not the patched attribute, but it calls the generic `pool` by its
    // module-global name, which the window patches: max windows bind here.
    // (avg_pool's sum windows stay lax's: AveragePool measured slower than
    // the slices in onnxruntime, see plugins/lax_window.)
    if (max) {
      Binding b("flax.linen.pooling.pool");
      b.operand("inputs")
          .param("window", "tuple(window_shape)")
          .param("strides", "strides")
          .param("padding", "padding")
          .finite("MaxPool skips NaN; the max of 0.0 and -0.0 is the first of them (JAX: 0.0)")
          .when("reduce_fn.__name__ == 'max'")
          .when("reduce_fn.__module__ in ('jax.lax', 'jax._src.lax.lax')")
          .when("float(init) == -float('inf')");
      ref.binds(b);
    }
  }
}
