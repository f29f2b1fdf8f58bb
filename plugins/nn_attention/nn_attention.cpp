// nn_attention: jax.nn.dot_product_attention (which flax nnx MultiHeadAttention
// calls when it has no dropout), bound through a binding spec (ABI 1.2).
//
// Targets: the default and "portable" get JAX's computation in few standard ops
// (lower_decomposed: Transpose, MatMul, Softmax, MatMul), because onnxruntime's
// own tools misread the standard Attention op (symbolic shape inference applies
// its com.microsoft rule to it; quantize_dynamic turns a top-level one into an
// invalid QAttention; targets.hpp). "onnxruntime-contrib", the opt-in target for
// an onnxruntime session alone, gets one ONNX Attention (opset 23), 1.05-1.2x
// faster on the transformer examples (docs/benchmarks/targets.md).
//
// JAX's layout is (batch, seq, heads, head_dim); Attention's 3-D form takes
// (batch, seq, heads * head_dim) with q_num_heads/kv_num_heads, so the
// operands are reshaped (no data movement) rather than transposed. Where
// Attention does not fit (opset < 23, not float32, dynamic head sizes, a mask
// or bias that is not 4-D) the decomposed form is emitted, and where that does
// not fit either, `reference` (the original call traced) inlined.
//
// Masks: JAX replaces a blocked logit by finfo.min, so a query row the mask
// blocks entirely is the mean of the values. Attention's boolean mask blocks
// with -inf, and onnxruntime (1.31, CPU) gives such a row zeros. So the mask
// reaches Attention as an additive float mask, Where(mask, 0, -1e30): a
// blocked logit becomes logit - 1e30, which rounds to -1e30 for any logit
// below 3.8e22 in magnitude, so a partly blocked row gets exp(...) = 0 there
// as in JAX and a fully blocked row equal logits: the mean of the values.
// Not finfo.min itself: onnxruntime also zeroes a row whose every logit is
// the float's lowest value (tests/python/test_attention_masks.py keeps a
// check that fails if that changes). A bias (T5's relative positions,
// ALiBi) is added to the mask, as JAX adds it to the scaled logits.

// onnxruntime's Attention refuses a batch, query length or key length of 0,
// which JAX defines (an empty result; zeros when no key). A symbolic one is
// checked at run time (empty_guard.hpp: an If returns ConstantOfShape(0) when
// one is 0, else runs Attention, and an exact elementwise barrier follows it
// for OpenVINO's sake). A static 0 gets the decomposed form, which handles
// every size; the reference where even that does not fit.
//
// target="onnxruntime-contrib" (a profile that runs the com.microsoft domain):
// causal self-attention (is_causal, no mask or bias, as many keys as queries,
// float32) is onnxruntime's GroupQueryAttention instead, at any opset (its
// domain is not the default one): 0.4-0.95x the time of Attention(is_causal=1)
// (docs/benchmarks/contrib_ops.md). It takes the key count
// per row (seqlens_k = T - 1) and the total length (T) as int32 inputs, made
// from the symbolic T; it too fails on an empty size (onnxruntime aborts the
// process), so it stays inside the guard.
// It agrees with JAX to rounding and propagates NaN and infinity as JAX does
// (tests/python/test_contrib_target.py). Masked attention over a key/value
// cache (over_a_cache) gets the standard form under that target instead, for
// plugins/cache_attention to make GroupQueryAttention over the cache in place
// (docs/llm.md).
//
// Numerics: agrees with JAX to float rounding on finite inputs, masked rows
// included. An infinite logit at a blocked position stays infinite in the sum
// where JAX replaces it, so the mask form declares finite numerics (not bound
// with fusion="exact").
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

// Where Attention does not fit but the operands are plain float32/float64
// heads: JAX's own computation in few ops, which every runtime and tool runs
// and which handles every size (an empty key set gives zeros, as in JAX):
// logits = MatMul(q, k^T) * scale (+ bias), masked by Where(mask, logits,
// -0.7 max) as JAX masks, Softmax, MatMul with v. Returns false (nothing
// emitted) where it does not fit.
//
// Grouped-query attention (N query heads over K < N key/value heads, N a
// multiple of K; JAX's query head n reads key head n / (N / K)): the query
// heads of one key head are merged into the MatMul's rows, [B, K, (N/K)*T, D]
// (a Reshape of [B, N, T, D], no data moved), so the keys and values are
// neither repeated nor transposed per group, and the logits come out
// [B, K, (N/K)*T, S] = [B, N, T, S] for the mask and the Softmax. Inlining
// JAX's own GQA instead transposes the [.., T, S] logits twice per layer and
// keeps its softmax unfused (docs/benchmarks/prefill.md).
bool lower_decomposed(Lowering& L) {
  Aval q = L.in_aval(0), k = L.in_aval(1), v = L.in_aval(2);
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4 || (q.dtype != dtype::f32 && q.dtype != dtype::f64) ||
      k.dtype != q.dtype || v.dtype != q.dtype || k.shape[2] != v.shape[2] || !q.shape[3].is_static())
    return false;
  int64_t group = 1;  // query heads per key/value head
  if (q.shape[2] != k.shape[2]) {
    if (!q.shape[2].is_static() || !k.shape[2].is_static() || k.shape[2].value <= 0 ||
        q.shape[2].value % k.shape[2].value != 0)
      return false;
    group = q.shape[2].value / k.shape[2].value;
  }
  const bool has_bias = L.param("has_bias").as_bool(), has_mask = L.param("has_mask").as_bool();
  for (size_t i = 3; i < L.num_inputs(); ++i)
    if (L.in_aval(i).rank() != 4) return false;
  const Dim B = q.shape[0], T = q.shape[1], N = q.shape[2], S = k.shape[1], KV = k.shape[2];
  Value qt = transpose(L, L.input(0), q, {0, 2, 1, 3});
  Value kt = transpose(L, L.input(1), k, {0, 2, 3, 1});
  Value vt = transpose(L, L.input(2), v, {0, 2, 1, 3});
  Aval logits_aval = q.with_shape({B, N, T, S});
  // Grouped: the group's query heads as rows (see above); heads merged and
  // split back by Reshapes of contiguous axes.
  const Dim rows = group == 1 ? T : dims_product({Dim(group), T});
  const Aval grouped_logits = q.with_shape({B, KV, rows, S});
  auto to_groups = [&](Value x, const Aval& a) {
    return group == 1 ? x : reshape(L, x, a, a.with_shape({B, KV, rows, a.shape[3]}));
  };
  auto from_groups = [&](Value x, const Aval& a, const Aval& out) {
    return group == 1 ? x : reshape(L, x, a, out);
  };
  const double scale = L.param("scale").is_none() ? 1.0 / std::sqrt(static_cast<double>(q.shape[3].value))
                                                  : L.param("scale").as_float();
  // The scale right at the MatMul, where onnx_fusion's float64 scale rule sees it.
  Value logits = from_groups(
      L.op("Mul", {L.op("MatMul", {to_groups(qt, q.with_shape({B, N, T, q.shape[3]})), kt}, grouped_logits),
                   scalar(L, q.dtype, scale)},
           grouped_logits),
      grouped_logits, logits_aval);
  if (has_bias) logits = L.op("Add", {logits, L.input(3)}, logits_aval);
  Value allowed = has_mask ? L.input(L.num_inputs() - 1) : kNoValue;
  if (L.param("is_causal").as_bool()) {
    // tril(ones(T, S)): query i sees keys 0..i.
    Aval rows(dtype::i64, {T, Dim(1)}), cols(dtype::i64, {Dim(1), S});
    auto range = [&](const Dim& n, const Aval& a) {
      Value r = L.op("Range", {scalar(L, dtype::i64, 0), L.op("Squeeze", {dim_value(L, n)}, Aval(dtype::i64, {})),
                              scalar(L, dtype::i64, 1)},
                     Aval(dtype::i64, {n}));
      return reshape(L, r, Aval(dtype::i64, {n}), a);
    };
    Value causal = L.op("GreaterOrEqual", {range(T, rows), range(S, cols)}, Aval(dtype::boolean, {T, S}));
    if (allowed == kNoValue) {
      allowed = causal;
    } else {
      const Aval m = L.in_aval(L.num_inputs() - 1);
      allowed = L.op("And", {allowed, causal}, m.with_shape({m.shape[0], m.shape[1], T, S}));
    }
  }
  if (allowed != kNoValue) {
    const double large_negative = -0.7 * 3.4028234663852886e38;  // JAX: -0.7 * float32 max
    logits = L.op("Where", {allowed, logits, scalar(L, q.dtype, large_negative)}, logits_aval);
  }
  Value probs = L.op("Softmax", {logits}, logits_aval, {Attr::i("axis", -1)});
  const Aval grouped_out = v.with_shape({B, KV, rows, v.shape[3]});
  Value o = from_groups(L.op("MatMul", {to_groups(probs, logits_aval), vt}, grouped_out), grouped_out,
                        v.with_shape({B, N, T, v.shape[3]}));
  L.bind(0, transpose(L, o, v.with_shape({B, N, T, v.shape[3]}), {0, 2, 1, 3}));
  return true;
}

// Keys that hold the queries' own tokens after a symbolic number of others
// (P + S keys for S queries, the dims spelled "P + S"): attention over a
// key/value cache, as a decoder step writes it.
bool over_a_cache(const Dim& queries, const Dim& keys) {
  if (queries.is_static() || keys.is_static()) return false;
  std::vector<std::string> terms;
  size_t start = 0;
  for (size_t i = 0; i <= keys.symbol.size(); ++i)
    if (i == keys.symbol.size() || keys.symbol[i] == '+') {
      std::string t = keys.symbol.substr(start, i - start);
      t.erase(0, t.find_first_not_of(' '));
      t.erase(t.find_last_not_of(' ') + 1);
      terms.push_back(t);
      start = i + 1;
    }
  return terms.size() > 1 && std::count(terms.begin(), terms.end(), queries.symbol) == 1 &&
         keys.symbol.find('-') == std::string::npos;
}

void lower_attention(Lowering& L) {
  Aval q = L.in_aval(0), k = L.in_aval(1), v = L.in_aval(2);
  // Masked attention over a cache under the contrib target: the standard form,
  // which plugins/cache_attention reads (it proves the mask is genai's and the
  // keys the cache the step returns) and turns into GroupQueryAttention over
  // the cache in place. The Attention op would sit inside the guard for empty
  // sizes (an If), where no rewrite rule sees it. Where cache_attention does not
  // fire, this form runs as the default target's does.
  if (L.target_supports("com.microsoft") && L.param("has_mask").as_bool() && !L.param("has_bias").as_bool() &&
      !L.param("is_causal").as_bool() && q.rank() == 4 && k.rank() == 4 && over_a_cache(q.shape[1], k.shape[1]) &&
      lower_decomposed(L))
    return;
  bool fits = q.dtype == dtype::f32 && k.dtype == q.dtype && v.dtype == q.dtype && q.rank() == 4 &&
              k.rank() == 4 && v.rank() == 4;
  if (fits)
    for (const Aval* a : {&q, &k, &v})
      fits = fits && a->shape[2].is_static() && a->shape[3].is_static();
  // Operands after q, k, v: the bias and the mask, in that order, each when bound.
  const bool has_bias = L.param("has_bias").as_bool(), has_mask = L.param("has_mask").as_bool();
  // onnxruntime's GroupQueryAttention (see the header), at any opset: its
  // domain is not the default one.
  const bool gqa = fits && L.target_supports("com.microsoft") && L.param("is_causal").as_bool() && !has_bias &&
                   !has_mask && q.shape[1] == k.shape[1] && q.shape[2].value % k.shape[2].value == 0 &&
                   q.shape[3] == k.shape[3] && k.shape[3] == v.shape[3] && k.shape[2] == v.shape[2];
  fits = fits && (gqa || (L.opset() >= 23 && L.target_supports("Attention")));
  for (size_t i = 3; i < L.num_inputs(); ++i) {
    Aval m = L.in_aval(i);
    const bool is_mask = has_mask && i + 1 == L.num_inputs();
    fits = fits && m.rank() == 4 && m.dtype == (is_mask ? dtype::boolean : q.dtype);
  }
  std::vector<Dim> sizes = {q.shape[0], q.shape[1], k.shape[0], k.shape[1]};
  if (fits)
    for (const Dim& d : sizes) fits = fits && d != Dim(0) && (d.is_static() || L.target_supports("if_guard"));
  if (!fits) {
    if (!lower_decomposed(L)) lower_reference(L);
    return;
  }

  const int64_t heads = q.shape[2].value, kv_heads = k.shape[2].value;
  // Heads and head dim merged; batch and seq kept as they are, symbolic or not.
  auto merge = [&](size_t i, const Aval& a) {
    const int64_t width = a.shape[2].value * a.shape[3].value;
    return reshape_after(L, L.input(i), a, 2, a.with_shape({a.shape[0], a.shape[1], width}));
  };
  std::vector<Value> ins = {merge(0, q), merge(1, k), merge(2, v)};
  if (has_bias || has_mask) {
    // The additive mask (see the header): bias + Where(mask, 0, -1e30).
    Value additive = kNoValue;
    if (has_mask) {
      Aval m = L.in_aval(L.num_inputs() - 1);
      additive = L.op("Where", {L.input(L.num_inputs() - 1), scalar(L, q.dtype, 0.0),
                                scalar(L, q.dtype, -1e30)},
                      m.with_dtype(q.dtype));
    }
    if (has_bias) {
      Aval b = L.in_aval(3);
      if (additive == kNoValue) {
        additive = L.input(3);
      } else {
        Aval m = L.aval_of(additive);
        Shape s(4);
        for (size_t d = 0; d < 4; ++d) s[d] = b.shape[d] == Dim(1) ? m.shape[d] : b.shape[d];
        additive = L.op("Add", {L.input(3), additive}, b.with_shape(s));
      }
    }
    // A bias of finfo.min (an additive mask written in JAX) must not reach
    // Attention as the float's lowest value, which onnxruntime turns into a
    // zero row: below -1e30 every bias is clamped to -1e30 (exp of either is
    // 0 beside any unmasked logit; a row of them is the mean, as in JAX).
    if (has_bias)
      additive = L.op("Max", {additive, scalar(L, q.dtype, -1e30)}, L.aval_of(additive));
    // onnxruntime 1.31's Attention does not broadcast the mask over the query
    // and key lengths (a BERT padding mask, (B, 1, 1, S), fails to run): it
    // gets them spelled out.
    Aval m = L.aval_of(additive);
    if (m.shape[2] != q.shape[1] || m.shape[3] != k.shape[1]) {
      Shape full = {Dim(1), Dim(1), q.shape[1], k.shape[1]};
      additive = L.op("Expand", {additive, shape_value(L, full)},
                      m.with_shape({m.shape[0], m.shape[1], q.shape[1], k.shape[1]}));
    }
    ins.push_back(additive);
  }
  const Aval out = L.out_aval(0);
  const Aval out3 = out.with_shape({out.shape[0], out.shape[1], out.shape[2].value * out.shape[3].value});
  auto group_query_attention = [&] {
    const Dim B = q.shape[0], T = q.shape[1];
    Value before, total;  // T - 1 as int32 [1], T as an int32 scalar
    if (T.is_static()) {
      before = L.constant(std::vector<int32_t>{static_cast<int32_t>(T.value - 1)}, {1});
      total = L.constant(std::vector<int32_t>{static_cast<int32_t>(T.value)}, {});
    } else {
      Value t = dim_value(L, T);  // int64 [1]
      before = L.op("Cast", {L.op("Sub", {t, i64s(L, {1})}, Aval(dtype::i64, {Dim(1)}))},
                    Aval(dtype::i32, {Dim(1)}), {Attr::i("to", dtype::i32)});
      total = L.op("Cast", {L.op("Squeeze", {t}, Aval(dtype::i64, {}))}, Aval(dtype::i32, {}),
                   {Attr::i("to", dtype::i32)});
    }
    Value seqlens = L.op("Expand", {before, dim_value(L, B)}, Aval(dtype::i32, {B}));
    std::vector<Attr> gattrs = {Attr::i("num_heads", heads), Attr::i("kv_num_heads", kv_heads)};
    if (!L.param("scale").is_none()) gattrs.push_back(Attr::f("scale", L.param("scale").as_float()));
    return L.op_n("GroupQueryAttention", {ins[0], ins[1], ins[2], kNoValue, kNoValue, seqlens, total}, {out3},
                  gattrs, "com.microsoft", 1)[0];
  };
  std::vector<Attr> attrs = {Attr::i("q_num_heads", heads), Attr::i("kv_num_heads", kv_heads),
                             Attr::i("is_causal", L.param("is_causal").as_bool() ? 1 : 0)};
  if (!L.param("scale").is_none()) attrs.push_back(Attr::f("scale", L.param("scale").as_float()));
  const float zero = 0.0f;  // an explicit value: tract types a value-less ConstantOfShape as float64
  Value y = unless_empty(
      L, sizes, out3, "attention",
      [&] {
        return L.op("ConstantOfShape", {shape_value(L, out3.shape)}, out3,
                    {Attr::tensor("value", dtype::f32, {1}, &zero, sizeof zero)});
      },
      [&] { return gqa ? group_query_attention() : L.op("Attention", ins, out3, attrs); });
  L.bind(0, reshape_after(L, y, out3, 2, out));
}

// One spec per combination of the optional bias and mask: a primitive's
// operands are fixed, and the params tell the lowering which it has.
Binding attention(bool bias, bool mask) {
  Binding b("jax.nn.dot_product_attention");
  b.operand("query").operand("key").operand("value");
  if (bias) b.operand("bias").when("bias is not None");
  else b.when("bias is None");
  // An infinite logit at a blocked position stays infinite in the sum (JAX
  // replaces it): not bound with crisp="exact".
  if (mask)
    b.operand("mask").when("mask is not None").when("not is_causal")
        .finite("an infinite logit at a masked position stays infinite in the sum (JAX replaces it)");
  else
    b.when("mask is None").exact();
  b.param("scale", "scale")
      .param("is_causal", "is_causal")
      .param("has_bias", bias ? "True" : "False")
      .param("has_mask", mask ? "True" : "False")
      .when("query.ndim == 4")
      .when("query_seq_lengths is None")
      .when("key_value_seq_lengths is None")
      .when("local_window_size is None")
      .when("not return_residual")
      .when("implementation is None or implementation == 'xla'");
  return b;
}

}  // namespace

JAXONNX_PLUGIN("nn_attention", "0.1.0") {
  plugin.primitive("jaxonnx.nn.dot_product_attention", lower_attention)
      .emits({"Attention", "Reshape", "Where", "Add", "Max", "Expand", "If", "ConstantOfShape", "Shape", "Concat",
              "ReduceMin", "Equal", "Transpose", "MatMul", "Mul", "Softmax", "Range", "Squeeze",
              "GreaterOrEqual", "And", "Sub", "Cast", "com.microsoft.GroupQueryAttention"})
      .doc(onnx_doc("Attention"))
      .summary("jax.nn.dot_product_attention (4-D) as MatMul/Softmax/MatMul, or (target=\"onnxruntime-contrib\") "
               "as Attention (opset 23); a boolean mask "
               "(with any bias) becomes one additive mask, so fully masked rows are the mean "
               "of the values as in JAX; an infinite logit at a masked position stays infinite, "
               "so the mask form is not bound with crisp=\"exact\"; target=\"onnxruntime-contrib\": causal "
               "self-attention as com.microsoft GroupQueryAttention, masked attention over a cache in the "
               "standard form (for cache_attention)")
      .binds(attention(false, false))
      .binds(attention(false, true))
      .binds(attention(true, false))
      .binds(attention(true, true));
}
