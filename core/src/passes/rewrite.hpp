// Graph surgery shared by the passes: who reads a value, replacing a value
// everywhere it is read (node inputs and subgraph captures), dropping a node
// whose output equals another value, and reading constants.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "jaxonnx/core/ir.hpp"

namespace jaxonnx::passes {

// One graph's def-use structure. Built once per pass run (linear), then kept
// current by the rewrites below that take a non-const Uses (set_input,
// replace, erase, bypass), so a pass never rebuilds it after a rewrite and
// stays linear in the graph. Node indices stay stable: erased nodes are
// only marked until erase_marked at the end of the pass, and a pass that
// needs a new node reuses an erased node's slot.
struct Uses {
  explicit Uses(const ir::Graph& graph);

  // How many times a value is read: node inputs plus captures of subgraphs
  // attached to this graph's nodes (a capture is a read by that node).
  std::vector<int> reads;
  std::vector<bool> is_output;    // a graph output
  std::vector<int64_t> producer;  // index of the defining node, or -1
  // Consumer node indices, once per read, in node order.
  std::vector<std::vector<size_t>> consumers;
  std::map<ir::ValueId, size_t> initializer;  // value -> index in graph.initializers

  // Read exactly once, by a node, and not part of the graph's interface: a
  // rewrite may change it without anyone else noticing.
  bool single_consumer(ir::ValueId v) const { return reads[v] == 1 && !is_output[v]; }
  // The first live node reading `v` (consumers may hold stale entries: nodes
  // since erased or rewired), or -1.
  int64_t first_consumer(const ir::Graph& graph, ir::ValueId v) const;

  // The graph gained values since: make room for them (unread, no producer).
  void grow(const ir::Graph& graph);
  // Node `node`'s input `slot` now reads `v`.
  void set_input(ir::Graph& graph, size_t node, size_t slot, ir::ValueId v);
  // Every read of `from` (node inputs, captures) now reads `to`; graph
  // outputs are left alone. Costs what `from`'s readers are, not the graph.
  void replace(ir::Graph& graph, ir::ValueId from, ir::ValueId to);
  // Marks node `node` erased and forgets its reads and definitions.
  void erase(ir::Graph& graph, size_t node);
  // Node `node` now defines its outputs (after a rewrite moved outputs
  // between nodes or into a reused slot) and reads its inputs.
  void add_node(const ir::Graph& graph, size_t node);
  // The tensor of an initializer or of a Constant node's `value`, else null.
  const Tensor* constant(const ir::Graph& graph, ir::ValueId v) const;
};

// Every read of `from` by this graph's nodes and their subgraphs' captures
// now reads `to`. Graph outputs are left alone.
void replace_reads(ir::Graph& graph, ir::ValueId from, ir::ValueId to);

// Node `index` has one output that always equals `replacement`; remove the
// node. When that output is a graph output, its name must survive, so the
// node defining `replacement` is made to define the output instead; that is
// refused (returns false, nothing changed) when `replacement` is not made by
// a node of this graph or is itself a graph output.
bool bypass(ir::Graph& graph, const Uses& uses, size_t index, ir::ValueId replacement);
// Whether bypass() would remove node `index` (false: it would refuse).
bool can_bypass(const ir::Graph& graph, const Uses& uses, size_t index, ir::ValueId replacement);
// The same, keeping `uses` current.
bool bypass(ir::Graph& graph, Uses& uses, size_t index, ir::ValueId replacement);

// Marks a node for removal (passes erase in bulk, keeping indices stable).
void mark_erased(ir::Node& node);
bool is_erased(const ir::Node& node);
// Removes the marked nodes; returns how many.
size_t erase_marked(ir::Graph& graph);

// Applies `rewrite_one` (one rewrite, marking what it removes; false when
// there is none left) until it finds nothing, erasing after each: a rewrite
// can invalidate the use counts the next one reads. True if anything changed.
template <typename RewriteOne>
bool rewrite_to_fixed_point(ir::Graph& graph, RewriteOne rewrite_one) {
  bool changed = false;
  while (rewrite_one(graph)) {
    erase_marked(graph);
    changed = true;
  }
  return changed;
}

// A copy of `graph` whose subgraphs are copies too (a plain copy shares
// them), for a property that tries a rewrite and throws the result away.
ir::Graph scratch_copy(const ir::Graph& graph);

// A new value named `name` of type `type`.
ir::ValueId add_typed_value(ir::Graph& graph, std::string name, const Aval& type);

// `dims` as Reshape's constant shape that copies no dim of its data input:
// the static dims, -1 for at most one symbolic dim; empty when there are more
// symbolic dims or a static 0 (which Reshape would read as a copy).
std::vector<int64_t> shape_codes(const std::vector<Dim>& dims);

// A new int64 initializer of `ints` (shape [ints.size()]) named `name`;
// `uses`, when given, learns of it (a pass keeping its use lists current).
ir::ValueId add_ints(ir::Graph& graph, std::string name, const std::vector<int64_t>& ints,
                     Uses* uses = nullptr);

// Both typed, same dtype, same rank and same dims (symbols compared by name,
// as JAX names equal sizes alike).
bool same_type(const ir::Value& a, const ir::Value& b);

// The attribute `name` of `node`, or null.
const ir::Attribute* attribute(const ir::Node& node, const char* name);

// Integer elements of an int32/int64 tensor; false for other dtypes.
bool to_ints(const Tensor& t, std::vector<int64_t>* out);

// Which nodes some graph output depends on (a node holding a subgraph reads the
// values its captures stand for); `live_values`, if given, receives which values
// are read. DCE removes the rest, and its guarantee checks with the same walk.
std::vector<bool> live_nodes(const ir::Graph& g, std::vector<bool>* live_values = nullptr);

}  // namespace jaxonnx::passes
