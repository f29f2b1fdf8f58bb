#include "node_builder.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include "abi_read.hpp"
#include "jaxonnx/kernels.hpp"
#include "lowering.hpp"
#include "onnx_schema.hpp"
#include "passes/onnx_ops.hpp"

namespace jaxonnx {
namespace {

// The node's op against the target profile and, in test builds, against the
// ops the primitive declares (.emits): a model its target cannot run, or
// undocumented coverage, fails here instead.
std::string unsupported(Lowering& lowering, const PrimitiveInfo& prim, const std::string& domain,
                        const std::string& op) {
  if (!domain.empty() && domain != "ai.onnx") {
    // A model for another target must not need onnxruntime's contrib ops; a
    // third-party plugin's own domain passes (targets.hpp, refuses_domain).
    if (!sdk::targets::refuses_domain(lowering.target, domain)) {
#ifdef JAXONNX_CHECK_EMITS
      const std::string qualified = domain + "." + op;
      if (std::find(prim.onnx_ops.begin(), prim.onnx_ops.end(), qualified) == prim.onnx_ops.end())
        return "emit_node: op '" + qualified + "' is not among the ops '" + prim.name +
               "' declares (.emits)";
#endif
      return "";
    }
    if (ConversionFacts* facts = lowering.facts())
      ++facts->refused_nodes[{prim.plugin->name, prim.name, domain + "." + op}];
    std::string allowing;
    for (const sdk::targets::Profile& p : sdk::targets::kProfiles)
      if (sdk::targets::allows_domain(p, domain))
        allowing += (allowing.empty() ? "" : ", ") + std::string("\"") + std::string(p.name) + "\"";
    return "emit_node: the target \"" + std::string(lowering.target.name) + "\" refuses " + op +
           " of domain " + domain + " (its profile runs no operator of that domain; targets that do: " +
           allowing + "); lower it another way where target_supports(\"" + domain + "\") is false";
  }
  if (const sdk::targets::Lack* lack = sdk::targets::lack(lowering.target, op); lack && lack->refused) {
    if (ConversionFacts* facts = lowering.facts()) ++facts->refused_nodes[{prim.plugin->name, prim.name, op}];
    return "emit_node: the target \"" + std::string(lowering.target.name) + "\" refuses " + op +
           " (" + std::string(lack->why) + "); lower it another way where "
           "target_supports(\"" + op + "\") is false";
  }
#ifdef JAXONNX_CHECK_EMITS
  if (std::find(prim.onnx_ops.begin(), prim.onnx_ops.end(), op) == prim.onnx_ops.end())
    return "emit_node: op '" + op + "' is not among the ops '" + prim.name + "' declares (.emits)";
#else
  (void)prim;
#endif
  return "";
}

// Widening: where the node's dtype for a type constraint has no onnxruntime CPU
// kernel (bfloat16 MatMul) or is not one ONNX allows (int16 ReduceMax), the
// node computes in the narrowest exact widening that runs (kernels.hpp): each
// input bound to that constraint is cast up, each such output is computed
// wide and cast back. Exact but for the one rounding back, as JAX itself rounds
// a bfloat16 dot's float32 accumulation. Only constraints some input carries
// are widened: an output typed by an attribute alone (Cast's `to`) keeps it.
struct Widening {
  const sdk::kernels::Form* form = nullptr;
  int32_t from[4] = {}, to[4] = {};
  bool any() const { return to[0] || to[1] || to[2] || to[3]; }
  int32_t input(size_t k) const { return wide(form->inputs, k); }
  int32_t output(size_t k) const { return wide(form->outputs, k); }

 private:
  int32_t wide(std::string_view binding, size_t k) const {
    int c = sdk::kernels::constraint_of(binding, k);
    return c < 0 ? 0 : to[c];
  }
};

Widening plan_widening(Lowering& lowering, const PrimitiveInfo& prim, const abi::NodeRequest& req) {
  Widening w;
  if (!req.domain.empty() && req.domain != "ai.onnx") return w;
  w.form = sdk::kernels::form(req.op_type, lowering.model.opset);
  if (!w.form) return w;
  for (int c = 0; c < 4; ++c) {
    int32_t dtype = JXO_DTYPE_UNDEFINED;
    bool carried = false;
    for (size_t k = 0; k < req.inputs.size(); ++k) {
      jxo_value v = req.inputs[k];
      if (v == JXO_NO_VALUE || sdk::kernels::constraint_of(w.form->inputs, k) != c) continue;
      carried = true;
      if (!dtype && lowering.valid(v) && lowering.value(v).has_type) dtype = lowering.value(v).type.dtype;
    }
    for (size_t k = 0; !dtype && k < req.outputs.size(); ++k)
      if (req.outputs[k] && sdk::kernels::constraint_of(w.form->outputs, k) == c) dtype = req.outputs[k]->dtype;
    if (!dtype || sdk::kernels::runs(*w.form, c, dtype)) continue;
    const int32_t to = carried ? sdk::kernels::widening(*w.form, c, dtype) : JXO_DTYPE_UNDEFINED;
    if (!to) {
      const bool valid = w.form->onnx[c] & sdk::kernels::bit(dtype);
      throw HostError(JXO_ERROR, "emit_node: " + req.op_type + " (opset " +
                                     std::to_string(lowering.model.opset) + ") on " + dtype_name(dtype) +
                                     (valid ? " has no onnxruntime CPU kernel" : " is not valid ONNX") +
                                     " and no exact wider type has one (jaxonnx/kernels.hpp); compute "
                                     "it in another type and cast around");
    }
    w.from[c] = dtype;
    w.to[c] = to;
    if (ConversionFacts* facts = lowering.facts())
      ++facts->widened[{prim.plugin->name, prim.name, req.op_type, dtype_name(dtype), dtype_name(to)}];
  }
  return w;
}

// A value like `like` (its type, if it has one) but of `dtype`.
ir::ValueId retyped(Lowering& lowering, const std::string& hint, const ir::Value* like, int32_t dtype) {
  std::optional<Aval> type;
  if (like && like->has_type) {
    type = like->type;
    type->dtype = dtype;
  }
  return lowering.new_value(hint, type ? &*type : nullptr);
}

// Emits out = Cast(in) to `dtype` in the current scope.
void emit_cast(Lowering& lowering, ir::ValueId in, ir::ValueId out, int32_t dtype) {
  ir::Node n;
  n.op_type = passes::onnx_ops::op_name(passes::onnx_ops::Op::Cast);
  n.name = lowering.unique_name(n.op_type);
  n.inputs.push_back(lowering.use(in));
  n.outputs.push_back(lowering.use(out));
  ir::Attribute to;
  to.name = "to";
  to.type = JXO_ATTR_INT;
  to.i = dtype;
  n.attrs.push_back(std::move(to));
  lowering.current()->graph->nodes.push_back(std::move(n));
}

}  // namespace

std::vector<ir::ValueId> build_node(Lowering& lowering, const Eqn& eqn, const PrimitiveInfo& prim,
                                    const jxo_node* node_in) {
  // A graph attribute names a closed subgraph opened in this scope, used once.
  std::vector<GraphScope*> graphs;
  auto resolve = [&](const jxo_graph* handle, const std::string& name) {
    const std::string what = "graph attribute '" + name + "'";
    GraphScope* g = lowering.find_graph(handle);
    if (!g) throw InvalidArgument(what + " is not a graph handle");
    if (g->open)
      throw InvalidArgument(what + ": " + lowering.scope_name(g) +
                            " is still open (call graph_end first)");
    if (g->used || std::find(graphs.begin(), graphs.end(), g) != graphs.end())
      throw InvalidArgument(what + ": " + lowering.scope_name(g) +
                            " was already used by another node; a graph handle is used once");
    if (g->parent != lowering.current())
      throw InvalidArgument(what + ": " + lowering.scope_name(g) + " was opened in " +
                            lowering.scope_name(g->parent) +
                            ", not in the scope the node is emitted in");
    graphs.push_back(g);
    return g->owned;
  };
  abi::NodeRequest req = abi::read_node(node_in, "emit_node", resolve);
  const std::string& where = req.where;
  ir::Node n;
  n.op_type = req.op_type;
  n.domain = req.domain;
  if (n.domain.empty() || n.domain == "ai.onnx") {
    int64_t since = onnx_op_since(n.op_type);
    if (since == 0)
      throw InvalidArgument("emit_node: '" + n.op_type + "' is not an operator of the default "
                            "ONNX domain (a custom op needs its own domain)");
    if (since > lowering.model.opset)
      throw HostError(JXO_UNSUPPORTED_OPSET,
                      "emit_node: '" + n.op_type + "' exists from opset " +
                          std::to_string(since) + ", but the model targets opset " +
                          std::to_string(lowering.model.opset));
  }
  // No ONNX value is complex: a lowering that declares one has met a
  // complex operand it does not handle.
  for (size_t k = 0; k < req.outputs.size(); ++k)
    if (req.outputs[k] && packed(*req.outputs[k]).dtype != req.outputs[k]->dtype)
      throw InvalidArgument(where + ": output " + std::to_string(k) + " is declared " +
                            req.outputs[k]->str() + ", but complex values are carried as " +
                            packed(*req.outputs[k]).str() +
                            " (jaxonnx/complex.hpp); this lowering does not handle complex operands");
  if (std::string why = unsupported(lowering, prim, n.domain, n.op_type); !why.empty())
    throw HostError(JXO_ERROR, why);
  for (size_t k = 0; k < req.inputs.size(); ++k) {
    jxo_value v = req.inputs[k];
    if (v != JXO_NO_VALUE && !lowering.valid(v))
      throw InvalidArgument(where + ": input " + std::to_string(k) + " is not a valid value handle");
  }
  const Widening widening = plan_widening(lowering, prim, req);
  for (size_t k = 0; k < req.inputs.size(); ++k) {
    jxo_value v = req.inputs[k];
    try {
      if (v != JXO_NO_VALUE && widening.any() && widening.input(k)) {
        // A value a widened node computed wide and rounded: read the wide one
        // (one rounding fewer, as XLA keeps excess precision on CPU).
        auto it = lowering.narrowed.find(v);
        const ir::Value* wide_value = it != lowering.narrowed.end() ? &lowering.value(it->second) : nullptr;
        if (wide_value && lowering.visible(it->second) && wide_value->has_type &&
            wide_value->type.dtype == widening.input(k)) {
          v = it->second;
        } else {
          ir::ValueId wide = retyped(lowering, eqn.primitive, &lowering.value(v), widening.input(k));
          emit_cast(lowering, v, wide, widening.input(k));
          v = wide;
        }
      }
      n.inputs.push_back(v == JXO_NO_VALUE ? ir::kNoValue : lowering.use(v));
    } catch (const ConversionError& e) {
      throw InvalidArgument(where + ": input " + std::to_string(k) + ": " + e.what());
    }
  }
  n.attrs = std::move(req.attrs);
  // Only now, with every check passed, are the subgraphs consumed.
  for (GraphScope* g : graphs) g->used = true;
  std::vector<ir::ValueId> made;
  std::vector<std::pair<ir::ValueId, size_t>> narrow;  // (wide value, output index) to cast back
  for (size_t k = 0; k < req.outputs.size(); ++k) {
    const Aval* declared = req.outputs[k] ? &*req.outputs[k] : nullptr;
    ir::ValueId v = lowering.new_value(eqn.primitive, declared);
    made.push_back(v);
    if (widening.any() && widening.output(k)) {
      v = retyped(lowering, eqn.primitive, &lowering.value(v), widening.output(k));
      narrow.emplace_back(v, k);
    }
    n.outputs.push_back(lowering.use(v));
  }
  n.name = lowering.unique_name(n.op_type);
  if (!n.domain.empty()) {
    int64_t& version = lowering.model.domain_opsets[n.domain];
    version = std::max<int64_t>(version, req.domain_version > 0 ? req.domain_version : 1);
  }
  lowering.current()->graph->nodes.push_back(std::move(n));
  for (const auto& [wide, k] : narrow) {
    emit_cast(lowering, wide, made[k], widening.from[sdk::kernels::constraint_of(widening.form->outputs, k)]);
    lowering.narrowed[made[k]] = wide;
  }
  return made;
}

}  // namespace jaxonnx
