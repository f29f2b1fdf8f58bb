// The structural properties: they know no op (properties.hpp).
#include "jaxonnx/core/properties.hpp"

#include "rewrite.hpp"

namespace jaxonnx::passes {
namespace {

std::string node_label(const ir::Graph& g, size_t k) {
  const ir::Node& n = g.nodes[k];
  return "node #" + std::to_string(k) + " " + n.op_type + " '" + n.name + "'";
}

// Values defined by the graph itself rather than by a node.
std::vector<bool> graph_defined(const ir::Graph& g) {
  std::vector<bool> defined(g.values.size(), false);
  for (ir::ValueId v : g.inputs) defined[v] = true;
  for (const ir::Initializer& init : g.initializers) defined[init.value] = true;
  for (const ir::Capture& c : g.captures) defined[c.inner] = true;
  return defined;
}

}  // namespace

Property topologically_sorted() {
  return {"topologically sorted", [](const ir::Graph& g) -> std::string {
            std::vector<bool> defined = graph_defined(g);
            for (size_t k = 0; k < g.nodes.size(); ++k) {
              const ir::Node& n = g.nodes[k];
              for (ir::ValueId v : n.inputs)
                if (v != ir::kNoValue && !defined[v])
                  return node_label(g, k) + " reads '" + g.values[v].name +
                         "' before it is defined";
              for (ir::ValueId v : n.outputs) defined[v] = true;
            }
            return {};
          }};
}

Property typed_values() {
  return {"typed values", [](const ir::Graph& g) -> std::string {
            auto untyped = [&](ir::ValueId v) { return v != ir::kNoValue && !g.values[v].has_type; };
            for (ir::ValueId v : g.inputs)
              if (untyped(v)) return "graph input '" + g.values[v].name + "' has no type";
            for (size_t k = 0; k < g.nodes.size(); ++k) {
              for (ir::ValueId v : g.nodes[k].inputs)
                if (untyped(v)) return node_label(g, k) + " reads '" + g.values[v].name + "', which has no type";
              for (ir::ValueId v : g.nodes[k].outputs)
                if (untyped(v)) return node_label(g, k) + " defines '" + g.values[v].name + "' without a type";
            }
            return {};
          }};
}

Property no_dead_nodes() {
  return {"no dead nodes", [](const ir::Graph& g) -> std::string {
            std::vector<bool> keep = live_nodes(g, nullptr);
            for (size_t k = 0; k < g.nodes.size(); ++k)
              if (!keep[k]) return node_label(g, k) + " is dead: no graph output depends on it";
            return {};
          }};
}

Property no_unread_initializers() {
  return {"no unread initializers", [](const ir::Graph& g) -> std::string {
            std::vector<bool> live;
            live_nodes(g, &live);
            for (const ir::Initializer& init : g.initializers)
              if (!live[init.value])
                return "initializer '" + g.values[init.value].name + "' is read by no live node";
            return {};
          }};
}

Property no_unread_captures() {
  return {"no unread captures", [](const ir::Graph& g) -> std::string {
            std::vector<bool> live;
            live_nodes(g, &live);
            for (const ir::Capture& c : g.captures)
              if (!live[c.inner])
                return "capture '" + g.values[c.inner].name + "' is read by no live node";
            return {};
          }};
}

Property no_function_calls(const std::vector<ir::Function>& functions) {
  return {"no function calls", [&functions](const ir::Graph& g) -> std::string {
            for (size_t k = 0; k < g.nodes.size(); ++k)
              if (ir::called_function(functions, g.nodes[k]))
                return node_label(g, k) + " calls a model function";
            return {};
          }};
}

std::string first_violation(const Properties& properties, const ir::Graph& graph) {
  for (const Property& p : properties)
    if (std::string v = p.violation(graph); !v.empty()) return "'" + p.name + "': " + v;
  return {};
}

std::string names(const Properties& properties) {
  std::string out;
  for (const Property& p : properties) out += (out.empty() ? "" : "; ") + p.name;
  return out.empty() ? "-" : out;
}

}  // namespace jaxonnx::passes
