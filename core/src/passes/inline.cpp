// Function inlining (opt-in): every call of a model function becomes a copy
// of the callee's body, so the passes see and optimize across the old
// boundary.
// A pass run once over every function body, callees first, then the main
// graph (inline_functions); the manager visits subgraphs.
// Needs: topologically sorted; model.functions ordered callees before callers.
// Guarantees: no function calls; inline_functions then drops every function.
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

class Inlining : public Pass {
 public:
  explicit Inlining(const std::vector<ir::Function>& functions) : functions_(functions) {}
  const char* name() const override { return "inline"; }
  Properties needs() const override { return {topologically_sorted()}; }
  Properties guarantees() const override { return {no_function_calls(functions_)}; }

  bool run(ir::Graph& g) override {
    std::vector<ir::Node> nodes;
    nodes.reserve(g.nodes.size());
    bool changed = false;
    for (ir::Node& n : g.nodes) {
      const ir::Function* f = ir::called_function(functions_, n);
      if (f) splice(g, n, *f->body, nodes);
      else nodes.push_back(std::move(n));
      changed = changed || f;
    }
    g.nodes = std::move(nodes);
    return changed;
  }

 private:
  const std::vector<ir::Function>& functions_;
};

}  // namespace

std::unique_ptr<Pass> inlining(const std::vector<ir::Function>& functions) {
  return std::make_unique<Inlining>(functions);
}

void inline_functions(ir::Model& model) {
  if (model.functions.empty()) return;
  // Callees come first, so each body is call-free before a caller copies it.
  Pipeline pipeline;
  pipeline.push_back(inlining(model.functions));
  ManagerOptions once;
  once.max_rounds = 1;
  PassManager manager(std::move(pipeline), once);
  for (ir::Function& f : model.functions) manager.run(*f.body);
  manager.run(model.graph);
  ir::drop_uncalled_functions(model);
}

}  // namespace jaxonnx::passes
