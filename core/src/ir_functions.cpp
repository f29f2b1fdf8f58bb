// Model-local functions in the IR: finding a call's callee and dropping the
// functions nothing calls.
#include <set>
#include <string>
#include <utility>

#include "jaxonnx/core/ir.hpp"

namespace jaxonnx::ir {
namespace {

using Key = std::pair<std::string, std::string>;  // domain, name

// Every (domain, op_type) a node of `g` or of its subgraphs uses.
void collect_ops(const Graph& g, std::set<Key>& out) {
  for (const Node& n : g.nodes) {
    out.emplace(n.domain, n.op_type);
    for (const Attribute& a : n.attrs)
      if (a.graph) collect_ops(*a.graph, out);
  }
}

}  // namespace

const Function* called_function(const std::vector<Function>& functions, const Node& node) {
  if (node.domain.empty() || node.domain == "ai.onnx") return nullptr;
  for (const Function& f : functions)
    if (f.name == node.op_type && f.domain == node.domain) return &f;
  return nullptr;
}

void drop_uncalled_functions(Model& model) {
  if (model.functions.empty()) return;
  std::set<Key> used;
  collect_ops(model.graph, used);
  // Callers come after their callees: walk back so a kept caller marks its
  // callees before they are visited.
  std::vector<bool> keep(model.functions.size(), false);
  for (size_t k = model.functions.size(); k-- > 0;) {
    const Function& f = model.functions[k];
    keep[k] = used.count({f.domain, f.name}) > 0;
    if (keep[k]) collect_ops(*f.body, used);
  }
  std::set<std::string> function_domains, node_domains;
  std::vector<Function> kept;
  for (size_t k = 0; k < model.functions.size(); ++k) {
    function_domains.insert(model.functions[k].domain);
    if (keep[k]) kept.push_back(std::move(model.functions[k]));
  }
  model.functions = std::move(kept);
  for (const Key& op : used) node_domains.insert(op.first);
  for (const std::string& d : function_domains)
    if (!node_domains.count(d)) model.domain_opsets.erase(d);
}

}  // namespace jaxonnx::ir
