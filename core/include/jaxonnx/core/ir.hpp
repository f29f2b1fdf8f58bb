// The in-memory ONNX IR the lowering builds and the exporter serializes.
// Values are referenced by index; names are fixed when values are made.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jaxonnx/core/types.hpp"

namespace jaxonnx::ir {

using ValueId = int64_t;
constexpr ValueId kNoValue = -1;

// Attribute::type of a subgraph attribute (ONNX AttributeProto::GRAPH).
constexpr int32_t kAttrGraph = 5;

struct Graph;

struct Value {
  std::string name;
  bool has_type = false;
  Aval type;
};

struct Attribute {
  std::string name;
  int32_t type = 0;  // JXO_ATTR_*
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  std::shared_ptr<const Tensor> tensor;
  std::shared_ptr<Graph> graph;  // JXO_ATTR_GRAPH: an If branch or a Loop/Scan body
};

struct Node {
  std::string name, op_type, domain;
  std::vector<ValueId> inputs;  // kNoValue for a skipped optional input
  std::vector<ValueId> outputs;
  std::vector<Attribute> attrs;
  // ONNX metadata_props, written as given (provenance: ConvertOptions::provenance).
  std::vector<std::pair<std::string, std::string>> metadata;
};

struct Initializer {
  ValueId value;
  std::shared_ptr<const Tensor> tensor;
  std::shared_ptr<Graph> graph;  // JXO_ATTR_GRAPH: an If branch or a Loop/Scan body
};

// A subgraph's use of a value of the enclosing graph (ONNX outer scope).
// `inner` is a value of the subgraph that no node or input defines there;
// `outer` is the value of the directly enclosing graph it stands for (itself
// possibly a capture of the graph around that). The exporter writes `inner`
// under `outer`'s name, so passes may rewrite `outer` freely; they must treat
// a node holding a subgraph as reading every captured `outer`.
struct Capture {
  ValueId inner;
  ValueId outer;
};

struct Graph {
  std::string name;
  std::deque<Value> values;  // a deque: Value addresses stay valid as values are added
  std::vector<Node> nodes;
  std::vector<ValueId> inputs, outputs;
  std::vector<Initializer> initializers;
  std::vector<Capture> captures;  // empty for the main graph

  ValueId add_value(std::string name) {
    values.push_back(Value{std::move(name), false, {}});
    return static_cast<ValueId>(values.size() - 1);
  }
};

// The outer values a node reads through its subgraph attributes.
inline std::vector<ValueId> captured_inputs(const Node& node) {
  std::vector<ValueId> out;
  for (const Attribute& a : node.attrs)
    if (a.graph)
      for (const Capture& c : a.graph->captures) out.push_back(c.outer);
  return out;
}

// A deterministic, readable listing of `graph` and its subgraphs (values by
// name, small constants by content), for dumps and tests.
std::string to_text(const Graph& graph);

// A model-local function (an ONNX FunctionProto): `body`'s inputs and outputs
// are its signature, and a node with op_type `name` in `domain` calls it.
// The body is an ordinary graph, so passes run inside it; it captures
// nothing, and its initializers are written as Constant nodes (a
// FunctionProto holds none).
struct Function {
  std::string name, domain;
  std::shared_ptr<Graph> body;
};

// The function a node calls, or null for an op.
const Function* called_function(const std::vector<Function>& functions, const Node& node);

struct Model {
  Graph graph;
  std::vector<Function> functions;  // callees before callers
  int64_t opset = 23;
  std::map<std::string, int64_t> domain_opsets;  // custom domains used
  std::string producer_version;
};

// Drops the functions the main graph no longer calls (directly, through its
// subgraphs or through other functions), and the domains no node uses any
// more.
void drop_uncalled_functions(Model& model);

}  // namespace jaxonnx::ir
