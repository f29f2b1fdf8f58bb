// Function inlining (opt-in): every call of a model function becomes a copy
// of the callee's body, so the passes see and optimize across the old
// boundary.
// Needs: model.functions ordered callees before callers; the IR invariants.
// Guarantees: no node calls a model function; model.functions is empty.
// Copied values and nodes are named "<call node>/<name in the body>", so
// names stay unique and say where they came from. The call's outputs keep
// their values (and names), so the graph's interface never changes.
#include <map>
#include <memory>
#include <string>

#include "jaxonnx/core/error.hpp"
#include "jaxonnx/core/passes.hpp"

namespace jaxonnx::passes {
namespace {

// A deep copy of subgraph `g` with every value renamed `prefix + name`; its
// captures' outer values are mapped through `outer`.
std::shared_ptr<ir::Graph> clone(const ir::Graph& g, const std::string& prefix,
                                 const std::vector<ir::ValueId>& outer) {
  auto copy = std::make_shared<ir::Graph>(g);
  copy->name = prefix + g.name;
  for (ir::Value& v : copy->values) v.name = prefix + v.name;
  for (ir::Capture& c : copy->captures) c.outer = outer.at(c.outer);
  std::vector<ir::ValueId> identity(copy->values.size());
  for (size_t k = 0; k < identity.size(); ++k) identity[k] = static_cast<ir::ValueId>(k);
  for (ir::Node& n : copy->nodes) {
    n.name = prefix + n.name;
    for (ir::Attribute& a : n.attrs)
      if (a.graph) a.graph = clone(*a.graph, prefix, identity);
  }
  return copy;
}

// Replaces the call `call` of `g` by `body`'s nodes, appended to `out`.
void splice(ir::Graph& g, const ir::Node& call, const ir::Graph& body, std::vector<ir::Node>& out) {
  const std::string prefix = call.name + "/";
  std::vector<ir::ValueId> map(body.values.size(), ir::kNoValue);
  for (size_t k = 0; k < body.inputs.size() && k < call.inputs.size(); ++k)
    map[body.inputs[k]] = call.inputs[k];
  for (size_t k = 0; k < body.outputs.size(); ++k) {
    if (map[body.outputs[k]] != ir::kNoValue)
      throw ConversionError("cannot inline function call '" + call.name +
                            "': its output " + std::to_string(k) +
                            " is an input or a repeated output of the body");
    map[body.outputs[k]] = call.outputs[k];
  }
  auto fresh = [&](ir::ValueId v) {
    if (map[v] == ir::kNoValue) {
      map[v] = g.add_value(prefix + body.values[v].name);
      g.values[map[v]].has_type = body.values[v].has_type;
      g.values[map[v]].type = body.values[v].type;
    }
    return map[v];
  };
  for (const ir::Initializer& init : body.initializers)
    g.initializers.push_back({fresh(init.value), init.tensor, init.graph});
  for (const ir::Node& n : body.nodes) {
    ir::Node copy = n;
    copy.name = prefix + n.name;
    for (ir::ValueId& v : copy.inputs)
      if (v != ir::kNoValue) v = map.at(v);
    for (ir::ValueId& v : copy.outputs) v = fresh(v);
    for (ir::Attribute& a : copy.attrs)
      if (a.graph) a.graph = clone(*a.graph, prefix, map);
    out.push_back(std::move(copy));
  }
}

void inline_calls(ir::Graph& g, const std::vector<ir::Function>& functions) {
  std::vector<ir::Node> nodes;
  nodes.reserve(g.nodes.size());
  for (ir::Node& n : g.nodes) {
    for (ir::Attribute& a : n.attrs)
      if (a.graph) inline_calls(*a.graph, functions);
    const ir::Function* f = ir::called_function(functions, n);
    if (f) splice(g, n, *f->body, nodes);
    else nodes.push_back(std::move(n));
  }
  g.nodes = std::move(nodes);
}

}  // namespace

void inline_functions(ir::Model& model) {
  if (model.functions.empty()) return;
  // Callees come first, so each body is call-free before a caller copies it.
  for (ir::Function& f : model.functions) inline_calls(*f.body, model.functions);
  inline_calls(model.graph, model.functions);
  ir::drop_uncalled_functions(model);
}

}  // namespace jaxonnx::passes
