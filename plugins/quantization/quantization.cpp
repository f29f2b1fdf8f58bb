// quantization: rewrite rules that keep a weight-quantized model's weights
// quantized in the file. A JAX program with int8/int4 weights (qwix's PTQ, or
// the hand-written `w_q.astype(f32) * scale`) dequantizes them in the graph:
// Cast(w_q) times a constant scale (per tensor, per channel, or per block
// after a Reshape that splits one axis into (blocks, block)), then a dot. The
// lowering gives Cast + Mul (+ Reshapes) + MatMul; these rules make that
//   DequantizeLinear(w_q, scale, axis[, block_size]) -> MatMul
// with w_q an int8/int4 initializer (ONNX packs int4 two per byte), and,
// where the target runs onnxruntime's com.microsoft domain and the weight is
// int4, one
//   com.microsoft.MatMulNBits(x, packed w_q, scales)
// (block_size a power of two >= 16, codes unsigned around the default zero
// point 2^(bits-1)) at float32 compute. Under fusion="approximate" (opt-in)
// int4 and int8 weights become MatMulNBits with accuracy_level 4 instead:
// onnxruntime's int8-activation kernel, 3-4x faster and ~5e-3 off JAX
// (matmul_nbits_int8_activations; docs/quantization.md).
//
// Rules, not a lowering: the pattern spans four primitives lowered by three
// plugins (convert_element_type, mul, reshape, dot_general), and it is the
// same pattern whoever wrote it; the fuse pass sees it whole.
// Targets: DequantizeLinear where the target runs it well (portable). The
// onnxruntime targets lack it (targets.hpp, dequantize_weights: 20-90x slower
// than the float32 weight onnxruntime folds Cast + Mul into at load), so there
// Cast + Mul stays, but for the int4 weights MatMulNBits takes. Opsets: per
// tensor / per axis int8 from opset 13 (the portable target's 17); int4 and
// blocked scales need opset 21. Below 21 an int4 weight is widened to int8
// (int4_below_opset_21: the file is ~1/4 of float32 instead of ~1/7) and a
// blocked scale stays Cast + Mul over the int8 initializer.
//
// Numerics: DequantizeLinear computes (w_q - 0) * scale in float, the same
// one rounding as Cast + Mul (exact); MatMulNBits at float32 compute
// dequantizes the same values and sums in its own order (within rounding on
// finite inputs); at accuracy_level 4 it rounds x to int8 (approximate).
#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;
using Dims = std::vector<int64_t>;

bool quantized_storage(int32_t t) { return t == dtype::i8 || t == dtype::u8 || dtype::is_4bit(t); }

std::optional<Dims> static_dims(const Aval& a) {
  if (a.unknown_rank) return std::nullopt;
  Dims out;
  for (const Dim& d : a.shape) {
    if (!d.is_static()) return std::nullopt;
    out.push_back(d.value);
  }
  return out;
}

int64_t product(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

Dims tensor_dims(const jxo_tensor* t) { return Dims(t->dims, t->dims + t->rank); }

// A float32 constant's elements.
std::optional<std::vector<float>> f32_values(Rewrite& R, Value v) {
  const jxo_tensor* t = R.constant(v);
  if (!t || t->dtype != dtype::f32) return std::nullopt;
  std::vector<float> out(t->nbytes / 4);
  if (!out.empty()) std::memcpy(out.data(), t->data, out.size() * 4);
  return out;
}

// A quantized weight as a dequantization reads it: `v` is Cast(w) to
// float32, w a constant of int8/uint8/int4/uint4, possibly through one
// Reshape of the cast value (qwix casts, then splits an axis into blocks).
// `dims` is the shape `v` gives those elements (row-major, so a Reshape only
// renames them).
struct Weight {
  Value w;
  const jxo_tensor* data;
  Dims dims;
};

std::optional<Weight> quantized_weight(Rewrite& R, Value v) {
  if (!R.single_use(v)) return std::nullopt;
  Value c = v;
  if (int64_t rs = R.def(v, "Reshape"); rs >= 0) {
    c = R.input(rs, 0);
    if (!R.single_use(c)) return std::nullopt;
  }
  int64_t cast = R.def(c, "Cast");
  if (cast < 0 || R.aval(c).dtype != dtype::f32) return std::nullopt;
  Value w = R.input(cast, 0);
  const jxo_tensor* t = R.constant(w);
  auto dims = static_dims(R.aval(v));
  if (!t || !quantized_storage(t->dtype) || !dims || product(*dims) != product(tensor_dims(t)))
    return std::nullopt;
  return Weight{w, t, *dims};
}

// The weight as a constant of `dims` (the same value when it has them).
Value weight_as(Rewrite& R, const Weight& q, const Dims& dims) {
  if (tensor_dims(q.data) == dims) return q.w;
  return R.constant(q.data->dtype, dims, q.data->data, q.data->nbytes);
}

// The operands of Mul `mul` as (quantized weight, float32 scale constant).
std::optional<std::pair<Weight, Value>> weight_times_scale(Rewrite& R, int64_t mul) {
  if (R.num_inputs(mul) != 2 || R.aval(R.output(mul)).dtype != dtype::f32) return std::nullopt;
  for (size_t k = 0; k < 2; ++k) {
    Value s = R.input(mul, 1 - k);
    const jxo_tensor* st = R.constant(s);
    if (!st || st->dtype != dtype::f32) continue;
    if (auto q = quantized_weight(R, R.input(mul, k))) {
      if (static_cast<size_t>(st->rank) > q->dims.size()) return std::nullopt;
      return std::make_pair(*q, s);
    }
  }
  return std::nullopt;
}

// The scale's dims right-aligned to rank `rank` (leading 1s), when each is 1
// or the weight's (the scale does not broadcast the weight).
std::optional<Dims> scale_dims(const jxo_tensor* st, const Dims& weight) {
  Dims sd(weight.size() - static_cast<size_t>(st->rank), 1);
  for (int64_t k = 0; k < st->rank; ++k) sd.push_back(st->dims[k]);
  for (size_t j = 0; j < sd.size(); ++j)
    if (sd[j] != 1 && sd[j] != weight[j]) return std::nullopt;
  return sd;
}

// Whether to make DequantizeLinear of a weight of `storage`: the opset must
// carry the type, and the target run the standard form well, or (int4 where
// onnxruntime's com.microsoft domain runs) matmul_nbits take it over. Else the
// Cast + Mul stays, which onnxruntime folds into a float32 weight at load
// (targets.hpp, dequantize_weights).
bool opset_carries(Rewrite& R, int32_t storage) {
  if (dtype::is_4bit(storage) && R.opset() < 21) return false;
  return R.target_supports("dequantize_weights") ||
         (storage == dtype::i4 && R.target_supports("com.microsoft"));
}

// Mul(Cast(w_q), scale), the scale one value or varying along one axis ->
// DequantizeLinear(w_q, scale[, axis]).
void dequantize_per_axis(Rewrite& R) {
  const int64_t mul = R.root();
  auto m = weight_times_scale(R, mul);
  if (!m || !opset_carries(R, m->first.data->dtype)) return;
  const Weight& q = m->first;
  const jxo_tensor* st = R.constant(m->second);
  auto sd = scale_dims(st, q.dims);
  if (!sd) return;
  std::vector<int64_t> axes;
  for (size_t j = 0; j < sd->size(); ++j)
    if ((*sd)[j] != 1) axes.push_back(static_cast<int64_t>(j));
  if (axes.size() > 1) return;
  const float* s = static_cast<const float*>(st->data);
  Value scale;
  std::vector<Attr> attrs;
  if (axes.empty()) {
    scale = R.constant(dtype::f32, {}, s, 4);
  } else {
    const int64_t a = axes[0];
    scale = R.constant(dtype::f32, {q.dims[a]}, s, static_cast<size_t>(q.dims[a]) * 4);
    attrs.push_back(Attr::i("axis", a));
  }
  Aval out = R.aval(R.output(mul));
  R.replace(R.output(mul), R.op("DequantizeLinear", {weight_as(R, q, q.dims), scale}, out, attrs));
}

// Reshape(Mul(Cast(w_q) as [.., n_blocks, block, ..], scale [.., n_blocks, 1, ..]))
// merging the two axes back -> DequantizeLinear(w_q, scale, axis, block_size)
// (opset 21). The scale is spelled out along axes it broadcast over, as the
// blocked form wants it (the weight's shape, the blocked axis divided).
void dequantize_blocked(Rewrite& R) {
  const int64_t rs = R.root();
  Value mv = R.input(rs, 0);
  const int64_t mul = R.def(mv, "Mul");
  if (mul < 0 || !R.single_use(mv)) return;
  auto m = weight_times_scale(R, mul);
  auto e = static_dims(R.aval(R.output(rs)));
  if (!m || !e || !opset_carries(R, m->first.data->dtype)) return;
  const Weight& q = m->first;
  const Dims& d = q.dims;
  const jxo_tensor* st = R.constant(m->second);
  auto sd = scale_dims(st, d);
  if (!sd || d.size() < 2 || e->size() != d.size() - 1) return;
  // The merged axis a: e = d with d[a], d[a + 1] joined; the scale constant along the block.
  int64_t a = -1;
  for (size_t k = 0; k + 1 < d.size() && a < 0; ++k) {
    bool same = (*e)[k] == d[k] * d[k + 1] && (*sd)[k + 1] == 1 && d[k + 1] > 1;
    for (size_t j = 0; j < e->size() && same; ++j)
      if (j != k) same = (*e)[j] == d[j < k ? j : j + 1];
    if (same) a = static_cast<int64_t>(k);
  }
  if (a < 0) return;
  const int64_t block = d[a + 1];
  Dims sdims = *e;
  sdims[a] = d[a];
  // Scale element at index i of `sdims`: the scale's at i with 0 inserted at
  // a + 1, 0 wherever the scale has size 1.
  Dims sstride(sd->size(), 0);
  for (int64_t j = static_cast<int64_t>(sd->size()) - 1, stride = 1; j >= 0; --j) {
    sstride[j] = (*sd)[j] == 1 ? 0 : stride;
    stride *= (*sd)[j];
  }
  const float* s = static_cast<const float*>(st->data);
  std::vector<float> full(static_cast<size_t>(product(sdims)));
  Dims idx(sdims.size(), 0);
  for (float& x : full) {
    int64_t at = 0;
    for (size_t j = 0; j < idx.size(); ++j) at += idx[j] * sstride[static_cast<int64_t>(j) <= a ? j : j + 1];
    x = s[at];
    for (size_t j = idx.size(); j-- > 0;) {
      if (++idx[j] < sdims[j]) break;
      idx[j] = 0;
    }
  }
  Value scale = R.constant(dtype::f32, sdims, full.data(), full.size() * 4);
  Aval out = R.aval(R.output(rs));
  R.replace(R.output(rs), R.op("DequantizeLinear", {weight_as(R, q, *e), scale}, out,
                               {Attr::i("axis", a), Attr::i("block_size", block)}));
}

// Reshape of a weight scaled along one run of axes -> DequantizeLinear per
// axis of the reshaped weight, when the run becomes one axis of the output:
//   Reshape(Cast(w_q) [.., a.., ..] * scale full over the run a.., 1 elsewhere)
//   Reshape(DequantizeLinear(w_q, scale, axis))
// (an nnx.Einsum kernel [in, heads, head] with a per-(heads, head) scale,
// flattened to [in, heads * head] for the MatMul; or [heads, head, out]
// flattened to [heads * head, out]).
void dequantize_reshaped(Rewrite& R) {
  const int64_t rs = R.root();
  Value in = R.input(rs, 0);
  auto e = static_dims(R.aval(R.output(rs)));
  if (!e || !R.single_use(in) || R.aval(R.output(rs)).dtype != dtype::f32) return;
  Dims d;
  Value w;
  const jxo_tensor* wt = nullptr;
  std::vector<float> scale;
  int64_t first = 0, last = -1;  // the scaled run of axes of d (empty: one scale)
  if (int64_t mul = R.def(in, "Mul"); mul >= 0) {
    auto m = weight_times_scale(R, mul);
    if (!m) return;
    d = m->first.dims;
    w = m->first.w;
    wt = m->first.data;
    const jxo_tensor* st = R.constant(m->second);
    auto sd = scale_dims(st, d);
    if (!sd) return;
    for (int64_t j = 0; j < static_cast<int64_t>(d.size()); ++j)
      if ((*sd)[j] != 1) {
        if (last < 0) first = j;
        else if (j != last + 1) return;  // not one run
        last = j;
      }
    const float* p = static_cast<const float*>(st->data);
    scale.assign(p, p + st->nbytes / 4);
  } else if (int64_t dq = R.def(in, "DequantizeLinear"); dq >= 0) {
    if ((R.num_inputs(dq) > 2 && R.input(dq, 2) != kNoValue) || R.attr_int(dq, "block_size", 0) > 0) return;
    w = R.input(dq, 0);
    wt = R.constant(w);
    auto sv = f32_values(R, R.input(dq, 1));
    if (!wt || !sv || !R.single_use(w)) return;
    d = tensor_dims(wt);
    scale = *sv;
    if (R.constant(R.input(dq, 1))->rank > 0) {
      first = last = R.attr_int(dq, "axis", 1) < 0 ? R.attr_int(dq, "axis", 1) + static_cast<int64_t>(d.size())
                                                  : R.attr_int(dq, "axis", 1);
    }
  } else {
    return;
  }
  if (!quantized_storage(wt->dtype) || !opset_carries(R, wt->dtype)) return;
  if (last >= 0 && last - first < 1 && R.def(in, "Mul") >= 0) return;  // dequantize_per_axis's
  int64_t before = 1, run = 1;
  for (int64_t j = 0; j < first; ++j) before *= d[j];
  for (int64_t j = first; j <= last; ++j) run *= d[j];
  std::vector<Attr> attrs;
  if (last >= 0) {
    int64_t axis = -1;
    for (int64_t j = 0, prefix = 1; j < static_cast<int64_t>(e->size()) && axis < 0; prefix *= (*e)[j], ++j)
      if (prefix == before && (*e)[j] == run) axis = j;
    if (axis < 0 || static_cast<int64_t>(scale.size()) != run) return;
    attrs.push_back(Attr::i("axis", axis));
  } else if (scale.size() != 1) {
    return;
  }
  Value sv = last >= 0 ? R.constant(dtype::f32, {run}, scale.data(), scale.size() * 4)
                       : R.constant(dtype::f32, {}, scale.data(), 4);
  Value wq = tensor_dims(wt) == *e ? w : R.constant(wt->dtype, *e, wt->data, wt->nbytes);
  R.replace(R.output(rs), R.op("DequantizeLinear", {wq, sv}, R.aval(R.output(rs)), attrs));
}

// Transpose(DequantizeLinear(w_q, scale)) of constants -> DequantizeLinear of
// the transposed constants (the fold pass moves their elements once, at
// export): a weight stored [out, in] and contracted on its last axis.
void dequantize_transposed(Rewrite& R) {
  const int64_t tr = R.root();
  Value in = R.input(tr, 0);
  const int64_t dq = R.def(in, "DequantizeLinear");
  if (dq < 0 || !R.single_use(in)) return;
  if (R.num_inputs(dq) > 2 && R.input(dq, 2) != kNoValue) return;
  Value w = R.input(dq, 0), s = R.input(dq, 1);
  const jxo_tensor* wt = R.constant(w);
  const jxo_tensor* st = R.constant(s);
  if (!wt || !st || !R.single_use(w) || !R.single_use(s)) return;
  const int64_t rank = wt->rank;
  Dims perm(static_cast<size_t>(rank));
  for (int64_t k = 0; k < rank; ++k) perm[k] = rank - 1 - k;
  if (auto p = R.attr_ints(tr, "perm")) perm = *p;
  if (static_cast<int64_t>(perm.size()) != rank) return;
  int64_t axis = R.attr_int(dq, "axis", 1);
  if (axis < 0) axis += rank;
  const int64_t block = R.attr_int(dq, "block_size", 0);
  int64_t new_axis = -1;
  for (int64_t k = 0; k < rank; ++k)
    if (perm[k] == axis) new_axis = k;
  if (new_axis < 0) return;
  auto moved = [&](Value v, const jxo_tensor* t) {
    Shape dims;
    for (int64_t k : perm) dims.push_back(Dim(t->dims[k]));
    return R.op("Transpose", {v}, Aval(t->dtype, dims), {Attr::ints("perm", perm)});
  };
  std::vector<Attr> attrs;
  if (st->rank > 0) attrs.push_back(Attr::i("axis", new_axis));
  if (block > 0) attrs.push_back(Attr::i("block_size", block));
  Value scale = block > 0 ? moved(s, st) : s;
  Aval out = R.aval(R.output(tr));
  R.replace(R.output(tr), R.op("DequantizeLinear", {moved(w, wt), scale}, out, attrs));
}

// Below opset 21 ONNX has no 4-bit type: Cast(w) of an int4 / uint4 constant
// reads the same values widened to int8 / uint8.
void int4_below_opset_21(Rewrite& R) {
  if (R.opset() >= 21) return;
  const int64_t cast = R.root();
  const jxo_tensor* t = R.constant(R.input(cast, 0));
  if (!t || !dtype::is_4bit(t->dtype)) return;
  const bool is_signed = t->dtype == dtype::i4;
  std::vector<uint8_t> wide(t->nbytes);
  const auto* p = static_cast<const uint8_t*>(t->data);
  for (size_t k = 0; k < wide.size(); ++k)
    wide[k] = is_signed ? static_cast<uint8_t>(static_cast<int8_t>(static_cast<uint8_t>(p[k] << 4)) >> 4)
                        : static_cast<uint8_t>(p[k] & 0x0f);
  Value w = R.constant(is_signed ? dtype::i8 : dtype::u8, tensor_dims(t), wide.data(), wide.size());
  Aval out = R.aval(R.output(cast));
  R.replace(R.output(cast), R.op("Cast", {w}, out, {Attr::i("to", out.dtype)}));
}

// Gemm(a, DequantizeLinear(..)[, c]) -> MatMul (+ Add): onnxruntime fuses a
// DequantizeLinear into the MatMul after it (MatMulNBits, at load), never into
// a Gemm, where the weight is dequantized at every run (~100x slower on a
// model of 4M weights, benchmarks/quantized.py); and matmul_nbits reads a
// MatMul. A Linear on 2-D input lowers to Gemm.
void gemm_of_dequantized(Rewrite& R) {
  const int64_t g = R.root();
  Value a = R.input(g, 0), b = R.input(g, 1);
  Value c = R.num_inputs(g) > 2 ? R.input(g, 2) : kNoValue;
  if (R.def(b, "DequantizeLinear") < 0 || R.attr_int(g, "transA", 0) != 0 ||
      R.attr_float(g, "alpha", 1.0) != 1.0 || R.attr_float(g, "beta", 1.0) != 1.0)
    return;
  Aval out = R.aval(R.output(g));
  Value w = b;
  if (R.attr_int(g, "transB", 0) != 0) {
    Aval tb = R.aval(b);
    if (tb.rank() != 2) return;
    w = R.op("Transpose", {b}, Aval(tb.dtype, {tb.shape[1], tb.shape[0]}), {Attr::ints("perm", {1, 0})});
  }
  Value y = R.op("MatMul", {a, w}, out);
  if (c != kNoValue) y = R.op("Add", {y, c}, out);
  R.replace(R.output(g), y);
}

// A weight product's B as MatMulNBits reads it: signed integer codes [K, N]
// (int4 or int8 elements, one per byte as the SDK hands a constant over,
// row-major; stored [N, K] when `transposed`), and float32 scales per tensor
// (1), per column (N) or per block of `block` rows along K ([K / block, N]
// row-major).
struct NBitsWeight {
  const jxo_tensor* codes;
  int64_t K, N, bits;
  std::vector<float> scale;
  int64_t block;  // > 0: blocked along K
  bool transposed = false;
};

// B = DequantizeLinear(w_q [K, N] constant, scale) without zero point: per
// tensor, per column (axis 1), or blocked along K (axis 0, block_size).
std::optional<NBitsWeight> from_dequantize(Rewrite& R, Value b) {
  const int64_t dq = R.def(b, "DequantizeLinear");
  if (dq < 0 || !R.single_use(b) || (R.num_inputs(dq) > 2 && R.input(dq, 2) != kNoValue)) return std::nullopt;
  const jxo_tensor* wt = R.constant(R.input(dq, 0));
  auto scale = f32_values(R, R.input(dq, 1));
  if (!wt || !scale || wt->rank != 2 || (wt->dtype != dtype::i4 && wt->dtype != dtype::i8)) return std::nullopt;
  const int64_t K = wt->dims[0], N = wt->dims[1];
  const int64_t st_rank = R.constant(R.input(dq, 1))->rank;
  int64_t axis = R.attr_int(dq, "axis", 1);
  if (axis < 0) axis += 2;
  const int64_t block = R.attr_int(dq, "block_size", 0);
  NBitsWeight w{wt, K, N, wt->dtype == dtype::i4 ? 4 : 8, *scale, 0};
  if (block > 0) {  // scale [K / block, N]
    if (axis != 0) return std::nullopt;
    w.block = block;
  } else if (!(st_rank == 0 || (axis == 1 && static_cast<int64_t>(scale->size()) == N))) {
    return std::nullopt;
  }
  return w;
}

// B = Cast(w_q [K, N]) * scale [N] or [1, N] or one value, or
// Reshape(Cast(w_q [K / bs, bs, N]) * scale [K / bs, 1, N]) to [K, N], or
// Transpose(Cast(w_q [N, K]) * scale [N, 1] or one value) (a weight stored
// [out, in]): the program's own dequantization, which the onnxruntime targets
// keep for an int8 weight (Cast + Mul folds into float32 at load).
std::optional<NBitsWeight> from_cast_mul(Rewrite& R, Value b) {
  if (!R.single_use(b)) return std::nullopt;
  if (const int64_t tr = R.def(b, "Transpose"); tr >= 0) {
    auto perm = R.attr_ints(tr, "perm");
    Value mv = R.input(tr, 0);
    const int64_t mul = R.def(mv, "Mul");
    auto e = static_dims(R.aval(b));
    if ((perm && *perm != Dims{1, 0}) || mul < 0 || !R.single_use(mv) || !e || e->size() != 2) return std::nullopt;
    auto m = weight_times_scale(R, mul);
    if (!m || (m->first.data->dtype != dtype::i4 && m->first.data->dtype != dtype::i8) ||
        m->first.dims != Dims{(*e)[1], (*e)[0]})
      return std::nullopt;
    const jxo_tensor* st = R.constant(m->second);
    auto sd = scale_dims(st, m->first.dims);
    if (!sd || (*sd)[1] != 1) return std::nullopt;  // per row of [N, K]: per column of B
    const auto* sv = static_cast<const float*>(st->data);
    NBitsWeight w{m->first.data, (*e)[0], (*e)[1], m->first.data->dtype == dtype::i4 ? 4 : 8,
                  std::vector<float>(sv, sv + st->nbytes / 4), 0, true};
    return w;
  }
  Value mv = b;
  const int64_t rs = R.def(b, "Reshape");
  if (rs >= 0) {
    mv = R.input(rs, 0);
    if (!R.single_use(mv)) return std::nullopt;
  }
  const int64_t mul = R.def(mv, "Mul");
  auto e = static_dims(R.aval(b));
  if (mul < 0 || !e || e->size() != 2) return std::nullopt;
  auto m = weight_times_scale(R, mul);
  if (!m || (m->first.data->dtype != dtype::i4 && m->first.data->dtype != dtype::i8)) return std::nullopt;
  const Weight& q = m->first;
  const jxo_tensor* st = R.constant(m->second);
  auto sd = scale_dims(st, q.dims);
  if (!sd) return std::nullopt;
  const int64_t K = (*e)[0], N = (*e)[1];
  const auto* sv = static_cast<const float*>(st->data);
  NBitsWeight w{q.data, K, N, q.data->dtype == dtype::i4 ? 4 : 8, {}, 0};
  const size_t count = st->nbytes / 4;
  if (rs < 0 && q.dims == *e && (*sd)[0] == 1) {  // per tensor or per column
    w.scale.assign(sv, sv + count);
    return w;
  }
  if (rs >= 0 && q.dims.size() == 3 && q.dims[0] * q.dims[1] == K && q.dims[2] == N && (*sd)[1] == 1 &&
      (*sd)[0] == q.dims[0] && (*sd)[2] == N) {  // blocks of q.dims[1] rows
    w.scale.assign(sv, sv + count);
    w.block = q.dims[1];
    return w;
  }
  return std::nullopt;
}

// MatMul(x, B) -> com.microsoft.MatMulNBits(x, packed codes, scales) at
// `accuracy_level` (0: float32 compute, 4: int8 activations). Its B is uint8
// [N, n_blocks, block_size * bits / 8], each column's codes along K, low
// nibble first for 4 bits, stored as w_q + 2^(bits-1) (the default zero
// point), padding past K at the zero point; scales [N, n_blocks]. A
// per-tensor or per-column scale is repeated over blocks of 128 along K (fewer
// when K is smaller), a block larger than 256 (onnxruntime refuses the model)
// is cut into blocks of 256 with its scale repeated: the same products. False
// when B's blocks are not a power of two from 16.
bool emit_nbits(Rewrite& R, const NBitsWeight& w, int64_t accuracy_level) {
  const int64_t mm = R.root();
  Value x = R.input(mm, 0);
  Aval xa = R.aval(x);
  if (xa.dtype != dtype::f32 || xa.unknown_rank || xa.rank() < 2) return false;
  const int64_t K = w.K, N = w.N, bits = w.bits;
  int64_t bs = w.block;
  if (bs > 0) {
    if (bs < 16 || (bs & (bs - 1))) return false;
    bs = std::min<int64_t>(bs, 256);
  } else {
    bs = 16;
    while (bs < 128 && bs < K) bs *= 2;
  }
  const int64_t zp = int64_t{1} << (bits - 1);
  const int64_t nb = (K + bs - 1) / bs, blob = bs * bits / 8;
  std::vector<uint8_t> packed(static_cast<size_t>(N * nb * blob), 0);
  std::vector<float> scales(static_cast<size_t>(N * nb));
  const auto* raw = static_cast<const uint8_t*>(w.codes->data);  // one element per byte
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < nb * bs; ++k) {
      int64_t q = 0;
      if (k < K) {
        const uint8_t r = raw[w.transposed ? n * K + k : k * N + n];
        q = bits == 8 ? static_cast<int8_t>(r) : static_cast<int8_t>(static_cast<uint8_t>(r << 4)) >> 4;
      }
      const auto code = static_cast<uint8_t>(q + zp);
      const size_t at = static_cast<size_t>((n * nb + k / bs) * blob);
      if (bits == 8) packed[at + k % bs] = code;
      else packed[at + (k % bs) / 2] |= static_cast<uint8_t>(code << (4 * (k % 2)));
    }
    for (int64_t j = 0; j < nb; ++j)
      scales[n * nb + j] = w.block > 0           ? w.scale[(j * bs / w.block) * N + n]
                           : w.scale.size() == 1 ? w.scale[0]
                                                 : w.scale[n];
  }
  Value bq = R.constant(dtype::u8, {N, nb, blob}, packed.data(), packed.size());
  Value sc = R.constant(dtype::f32, {N, nb}, scales.data(), scales.size() * 4);
  std::vector<Attr> attrs = {Attr::i("K", K), Attr::i("N", N), Attr::i("bits", bits), Attr::i("block_size", bs)};
  if (accuracy_level != 0) attrs.push_back(Attr::i("accuracy_level", accuracy_level));
  Aval out = R.aval(R.output(mm));
  R.replace(R.output(mm), R.domain_op("com.microsoft", "MatMulNBits", {x, bq, sc}, out, attrs));
  return true;
}

// MatMul(x, DequantizeLinear(w_q [K, N], scale)) of an int4 constant, the
// scale per tensor, per output column (axis 1) or per block of a power-of-two
// size >= 16 along K (axis 0) -> com.microsoft.MatMulNBits, float32 compute
// (no accuracy_level): JAX's products summed in another order. int4 only:
// onnxruntime 1.31 runs bits 8 at float32 compute by dequantizing the whole
// weight at every run (32 ms against float32's 0.16 ms for [1, 1024] x
// [1024, 2816]; benchmarks/matmul_nbits.py), where Cast + Mul folds into a
// float32 weight at load.
void matmul_nbits(Rewrite& R) {
  auto w = from_dequantize(R, R.input(R.root(), 1));
  if (w && w->bits == 4) emit_nbits(R, *w, 0);
}

// The same with int8 activations (MatMulNBits accuracy_level 4: onnxruntime
// rounds x to int8 per block of K and sums in int32), for int4 and int8
// weights, the int8 ones read from the program's Cast + Mul: 3.4-4x faster
// decode than float32 compute (docs/llm.md), about 5e-3 of the output's scale
// off JAX. Only
// under fusion="approximate".
void matmul_nbits_int8_activations(Rewrite& R) {
  Value b = R.input(R.root(), 1);
  auto w = from_dequantize(R, b);
  if (!w) w = from_cast_mul(R, b);
  if (w) emit_nbits(R, *w, 4);
}

}  // namespace

JAXONNX_PLUGIN("quantization", "0.1.0") {
  plugin.rule("dequantize_per_axis", "Mul", dequantize_per_axis)
      .exact()
      .emits({"DequantizeLinear"})
      .summary("Cast(w_q) * scale, w_q an int8/uint8 (int4/uint4 from opset 21) constant and the "
               "float32 scale one value or varying along one axis -> DequantizeLinear(w_q, scale, "
               "axis): the weight stays quantized in the file");
  plugin.rule("dequantize_blocked", "Reshape", dequantize_blocked)
      .exact()
      .min_opset(21)
      .emits({"DequantizeLinear"})
      .summary("Reshape(Cast(w_q) split into [.., blocks, block, ..] * scale [.., blocks, 1, ..]) "
               "merging the split back -> DequantizeLinear(w_q, scale, axis, block_size)");
  plugin.rule("dequantize_reshaped", "Reshape", dequantize_reshaped)
      .exact()
      .emits({"DequantizeLinear"})
      .summary("Reshape of Cast(w_q) * scale (the scale full over one run of axes) or of a "
               "per-axis DequantizeLinear, the run becoming one axis -> DequantizeLinear per axis "
               "of the reshaped weight (an nnx.Einsum kernel flattened for its MatMul)");
  plugin.rule("dequantize_transposed", "Transpose", dequantize_transposed)
      .exact()
      .emits({"DequantizeLinear", "Transpose"})
      .summary("Transpose(DequantizeLinear(w_q, scale)) of constants -> DequantizeLinear of the "
               "transposed constants (folded at export): a weight stored [out, in]");
  plugin.rule("int4_below_opset_21", "Cast", int4_below_opset_21)
      .exact()
      .emits({"Cast"})
      .summary("below opset 21 (no 4-bit type): Cast of an int4/uint4 constant -> Cast of it "
               "widened to int8/uint8");
  plugin.rule("gemm_of_dequantized", "Gemm", gemm_of_dequantized)
      .exact()
      .emits({"MatMul", "Add", "Transpose"})
      .summary("Gemm(a, DequantizeLinear(..)[, c]) -> MatMul(a, ..) (+ c): onnxruntime fuses a "
               "DequantizeLinear into a MatMul at load, and into no Gemm");
  // Before matmul_nbits (rules at one node run in declaration order): under
  // fusion="approximate" it takes the MatMul first.
  plugin.rule("matmul_nbits_int8_activations", "MatMul", matmul_nbits_int8_activations)
      .approximate("int8 activations (MatMulNBits accuracy_level 4: onnxruntime rounds x to int8 "
                   "per block of K): about 5e-3 of the output's largest magnitude off JAX's "
                   "quantized program (benchmarks/matmul_nbits.py); NaN and infinity in x not checked")
      .emits({"com.microsoft.MatMulNBits"})
      .summary("fusion=\"approximate\" only: MatMul(x, dequantized w_q [K, N]), w_q an int4 or int8 "
               "constant (DequantizeLinear, or the program's Cast + Mul), the scale per tensor, per "
               "column or per power-of-two block from 16 along K -> com.microsoft.MatMulNBits "
               "with accuracy_level 4 (int8 activations): the fast kernel, not JAX's numerics");
  plugin.rule("matmul_nbits", "MatMul", matmul_nbits)
      .finite("onnxruntime's MatMulNBits kernel dequantizes the same values and sums in its own "
              "order; NaN and infinity in x are not checked against MatMul")
      .emits({"com.microsoft.MatMulNBits"})
      .summary("MatMul(x, DequantizeLinear(w_q [K, N], scale)), w_q int4 and the scale per "
               "tensor, per column or per power-of-two block >= 16 along K -> "
               "com.microsoft.MatMulNBits (targets that run com.microsoft)");
}
