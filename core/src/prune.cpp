// Dead-code pruning: keep what the graph outputs depend on, in subgraphs too.
// Pre: nodes are in topological order (the lowering emits them so).
// Post: every node has a live output; every initializer is read; every
// subgraph capture is read inside its subgraph.
#include <vector>

#include "jaxonnx/core/converter.hpp"

namespace jaxonnx {

void prune(ir::Graph& g) {
  std::vector<bool> live(g.values.size(), false);
  for (ir::ValueId v : g.outputs) live[v] = true;
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t k = g.nodes.size(); k-- > 0;) {
    ir::Node& n = g.nodes[k];
    for (ir::ValueId v : n.outputs) keep[k] = keep[k] || live[v];
    if (!keep[k]) continue;
    for (ir::Attribute& a : n.attrs)
      if (a.graph) prune(*a.graph);  // first: it may read fewer outer values after
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue) live[v] = true;
    for (ir::ValueId v : ir::captured_inputs(n)) live[v] = true;
  }
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
}

}  // namespace jaxonnx
