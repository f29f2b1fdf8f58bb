// nn_attention: jax.nn.dot_product_attention (which flax nnx MultiHeadAttention
// calls when it has no dropout) as one ONNX Attention (opset 23), bound
// through a binding spec (ABI 1.2).
//
// JAX's layout is (batch, seq, heads, head_dim); Attention's 3-D form takes
// (batch, seq, heads * head_dim) with q_num_heads/kv_num_heads, so the
// operands are reshaped (no data movement) rather than transposed. The mask is
// a boolean (true = attend) broadcastable to (batch, heads, q_seq, kv_seq),
// as in both. The equation carries `reference`, the original call traced,
// inlined where Attention does not fit (opset < 23, not float32, dynamic head
// sizes, a non-boolean or non-4-D mask).
//
// onnxruntime's Attention refuses a batch, query length or key length of 0,
// which JAX defines (an empty result; zeros when no key). A symbolic one is
// therefore checked at run time: an If returns ConstantOfShape(0) when one is
// 0 (about 2.5 us per call on CPU), else runs Attention; a static 0 inlines
// the reference.
//
// Numerics: agrees with JAX to float rounding whenever a query row attends to
// at least one key. A row the mask blocks entirely differs: JAX gives the mean
// of the values (every logit is the same large negative number), Attention a
// NaN row. The mask form is therefore not bound with crisp="exact".
#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

void lower_reference(Lowering& L) {
  std::vector<Value> outs = L.inline_jaxpr(L.param("reference").as_jaxpr(), L.inputs());
  for (size_t i = 0; i < outs.size(); ++i) L.bind(i, outs[i]);
}

void lower_attention(Lowering& L) {
  Aval q = L.in_aval(0), k = L.in_aval(1), v = L.in_aval(2);
  bool fits = L.opset() >= 23 && q.dtype == dtype::f32 && k.dtype == q.dtype &&
              v.dtype == q.dtype && q.rank() == 4 && k.rank() == 4 && v.rank() == 4;
  if (fits)
    for (const Aval* a : {&q, &k, &v})
      fits = fits && a->shape[2].is_static() && a->shape[3].is_static();
  const bool masked = L.num_inputs() == 4;
  if (fits && masked) {
    Aval m = L.in_aval(3);
    fits = m.dtype == dtype::boolean && m.rank() == 4;
  }
  std::vector<Dim> sizes = {q.shape[0], q.shape[1], k.shape[0], k.shape[1]};
  if (fits)
    for (const Dim& d : sizes) fits = fits && d != Dim(0);
  if (!fits) return lower_reference(L);

  const int64_t heads = q.shape[2].value, kv_heads = k.shape[2].value;
  // Reshape: 0 keeps batch and seq, symbolic or not. Not -1 for the last
  // dim: it cannot be inferred next to a dim that is 0 at run time.
  auto merge = [&](size_t i, const Aval& a) {
    const int64_t width = a.shape[2].value * a.shape[3].value;
    return L.op("Reshape", {L.input(i), i64s(L, {0, 0, width})}, a.with_shape({a.shape[0], a.shape[1], width}));
  };
  std::vector<Value> ins = {merge(0, q), merge(1, k), merge(2, v)};
  if (masked) ins.push_back(L.input(3));
  std::vector<Attr> attrs = {Attr::i("q_num_heads", heads), Attr::i("kv_num_heads", kv_heads),
                             Attr::i("is_causal", L.param("is_causal").as_bool() ? 1 : 0)};
  if (!L.param("scale").is_none()) attrs.push_back(Attr::f("scale", L.param("scale").as_float()));
  Aval out = L.out_aval(0);
  Aval out3 = out.with_shape({out.shape[0], out.shape[1], out.shape[2].value * out.shape[3].value});
  std::vector<Value> runtime_sizes;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (!sizes[i].is_static() && std::find(sizes.begin(), sizes.begin() + i, sizes[i]) == sizes.begin() + i)
      runtime_sizes.push_back(dim_value(L, sizes[i]));
  Value y;
  if (runtime_sizes.empty()) {
    y = L.op("Attention", ins, out3, attrs);
  } else {
    Value all = runtime_sizes.size() == 1
                    ? runtime_sizes[0]
                    : L.op("Concat", runtime_sizes, Aval(dtype::i64, {static_cast<int64_t>(runtime_sizes.size())}),
                           {Attr::i("axis", 0)});
    // The smallest size, as the scalar If takes (a dim value has shape [1]).
    Value smallest = L.op("ReduceMin", {all}, Aval(dtype::i64, {}), {Attr::i("keepdims", 0)});
    Value empty = L.op("Equal", {smallest, scalar(L, dtype::i64, 0)}, Aval(dtype::boolean, {}));
    Subgraph then_g = L.begin_subgraph("attention_empty");
    GraphRef t = then_g.end({L.op("ConstantOfShape", {shape_value(L, out3.shape)}, out3)});
    Subgraph else_g = L.begin_subgraph("attention");
    GraphRef e = else_g.end({L.op("Attention", ins, out3, attrs)});
    y = L.op_n("If", {empty}, {out3}, {Attr::graph("then_branch", t), Attr::graph("else_branch", e)})[0];
  }
  L.bind(0, L.op("Reshape", {y, i64s(L, {0, 0, out.shape[2].value, out.shape[3].value})}, out));
}

Binding attention(bool masked) {
  Binding b("jax.nn.dot_product_attention");
  b.operand("query").operand("key").operand("value");
  if (masked) b.operand("mask").when("mask is not None").when("not is_causal").when("not jaxonnx_exact");
  else b.when("mask is None");
  b.param("scale", "scale")
      .param("is_causal", "is_causal")
      .when("bias is None")
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
      .emits({"Attention", "Reshape", "If", "ConstantOfShape", "Shape", "Concat", "ReduceMin", "Equal"})
      .doc(onnx_doc("Attention"))
      .summary("jax.nn.dot_product_attention (4-D, no bias) as Attention (opset 23); "
               "a fully masked row gives NaN (JAX: the mean of the values), so the "
               "mask form is not bound with crisp=\"exact\"")
      .binds(attention(false))
      .binds(attention(true));
}
