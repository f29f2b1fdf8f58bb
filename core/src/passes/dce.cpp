// Dead-code elimination.
// Needs: topologically sorted.
// Guarantees: no dead nodes (every node has an output that a graph output
// depends on; a subgraph capture counts as a read by the node holding the
// subgraph), no unread initializers, no unread captures. Graph inputs stay even when unused:
// they are the model's (or the If/Loop body's) signature.
#include "jaxonnx/core/passes.hpp"
#include "rewrite.hpp"

namespace jaxonnx::passes {
namespace {

class DeadCodeElimination : public Pass {
 public:
  const char* name() const override { return "dce"; }
  Properties needs() const override { return {topologically_sorted()}; }
  Properties guarantees() const override {
    return {no_dead_nodes(), no_unread_initializers(), no_unread_captures()};
  }

  bool run(ir::Graph& g) override {
    std::vector<bool> live;
    std::vector<bool> keep = live_nodes(g, &live);
    size_t before = g.nodes.size() + g.initializers.size() + g.captures.size();
    std::vector<ir::Node> nodes;
    nodes.reserve(g.nodes.size());
    for (size_t k = 0; k < g.nodes.size(); ++k)
      if (keep[k]) nodes.push_back(std::move(g.nodes[k]));
    g.nodes = std::move(nodes);
    std::vector<ir::Initializer> inits;
    for (ir::Initializer& init : g.initializers)
      if (live[init.value]) inits.push_back(std::move(init));
    g.initializers = std::move(inits);
    std::vector<ir::Capture> captures;
    for (const ir::Capture& c : g.captures)
      if (live[c.inner]) captures.push_back(c);
    g.captures = std::move(captures);
    return g.nodes.size() + g.initializers.size() + g.captures.size() != before;
  }
};

}  // namespace

std::unique_ptr<Pass> dead_code_elimination() { return std::make_unique<DeadCodeElimination>(); }

}  // namespace jaxonnx::passes
