#include "node_builder.hpp"

#include <algorithm>
#include <string>

#include "abi_read.hpp"
#include "jaxonnx/kernels.hpp"
#include "lowering.hpp"
#include "onnx_schema.hpp"

namespace jaxonnx {
namespace {

// The node's op against onnxruntime's kernel table (kernels.hpp), and, in test
// builds, against the ops the primitive declares (.emits): a model that
// onnxruntime cannot load, or undocumented coverage, fails here instead.
// `out0` is the declared dtype of output 0 (undefined when not declared).
std::string unsupported(Lowering& lowering, const PrimitiveInfo& prim, const std::string& domain,
                        const std::vector<jxo_value>& inputs, const std::string& op, int32_t out0) {
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
  const sdk::kernels::Entry* entry = sdk::kernels::find(op);
  if (!entry) return "";
  int32_t dtype = JXO_DTYPE_UNDEFINED;
  if (entry->data_input < inputs.size()) {
    jxo_value v = inputs[entry->data_input];
    if (v != JXO_NO_VALUE && lowering.valid(v) && lowering.value(v).has_type)
      dtype = lowering.value(v).type.dtype;
  }
  if (dtype == JXO_DTYPE_UNDEFINED) dtype = out0;
  if (dtype == JXO_DTYPE_UNDEFINED || sdk::kernels::has(op, dtype)) return "";
  return "emit_node: onnxruntime's CPU provider has no " + op + " kernel for " +
         dtype_name(dtype) + " (jaxonnx/kernels.hpp); compute it in a supported type "
         "(kernels::compute_type) and cast around";
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
  int32_t out0 = !req.outputs.empty() && req.outputs[0] ? req.outputs[0]->dtype : JXO_DTYPE_UNDEFINED;
  if (std::string why = unsupported(lowering, prim, n.domain, req.inputs, n.op_type, out0); !why.empty())
    throw HostError(JXO_ERROR, why);
  for (size_t k = 0; k < req.inputs.size(); ++k) {
    jxo_value v = req.inputs[k];
    if (v != JXO_NO_VALUE && !lowering.valid(v))
      throw InvalidArgument(where + ": input " + std::to_string(k) + " is not a valid value handle");
    try {
      n.inputs.push_back(v == JXO_NO_VALUE ? ir::kNoValue : lowering.use(v));
    } catch (const ConversionError& e) {
      throw InvalidArgument(where + ": input " + std::to_string(k) + ": " + e.what());
    }
  }
  n.attrs = std::move(req.attrs);
  // Only now, with every check passed, are the subgraphs consumed.
  for (GraphScope* g : graphs) g->used = true;
  std::vector<ir::ValueId> made;
  for (size_t k = 0; k < req.outputs.size(); ++k) {
    ir::ValueId v = lowering.new_value(eqn.primitive, req.outputs[k] ? &*req.outputs[k] : nullptr);
    n.outputs.push_back(lowering.use(v));
    made.push_back(v);
  }
  n.name = lowering.unique_name(n.op_type);
  if (!n.domain.empty()) {
    int64_t& version = lowering.model.domain_opsets[n.domain];
    version = std::max<int64_t>(version, req.domain_version > 0 ? req.domain_version : 1);
  }
  lowering.current()->graph->nodes.push_back(std::move(n));
  return made;
}

}  // namespace jaxonnx
