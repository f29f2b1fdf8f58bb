// If merging: the Ifs of a graph that test one condition value become one If
// around everything downstream of them. Each branch holds a copy of that
// region in which every merged If is replaced by its own branch of the same
// side (then by then, else by else): the condition is the same value, so the
// same side is taken everywhere.
// Why: a runtime pays per If (onnxruntime an executor frame per run, tract
// stops at a model's second If, giving every one the same name), and jaxonnx's
// empty-size guards (empty_guard.hpp) put an If on one condition around
// every attention of a model.
// Needs: topologically sorted.
// Rewrites: a group of two or more Ifs on one condition value whose region
// (the Ifs and every node that reads, directly or through a subgraph
// capture, a value the region defines) holds no other If and defines a
// graph output. The region's nodes leave the graph; one If, named after the
// group's first with "+merged", placed after every other node (which the
// region may read, and which never read the region), defines the region's
// graph outputs. Branch values and nodes are named
// "<If>/then/<name>" and "<If>/else/<name>"; outer values the region reads
// are captured.
// Guarantees: no If group that the pass would merge.
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "jaxonnx/core/passes.hpp"
#include "onnx_ops.hpp"
#include "rewrite.hpp"

namespace jaxonnx::passes {
namespace {

bool is_if(const ir::Node& n) { return onnx_ops::kind(n) == onnx_ops::Op::If; }

const ir::Graph* branch_of(const ir::Node& node, const char* side) {
  const ir::Attribute* a = attribute(node, side);
  return a && a->graph ? a->graph.get() : nullptr;
}

// One mergeable group: its Ifs and the region's nodes, in graph order.
struct Group {
  std::vector<size_t> region;
  std::set<size_t> ifs;
  std::vector<ir::ValueId> outputs;  // graph outputs the region defines, in order, once each
};

// The first group of `g` the pass merges, if any.
std::optional<Group> find_group(const ir::Graph& g) {
  std::map<ir::ValueId, std::vector<size_t>> by_condition;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (is_if(g.nodes[k]) && !g.nodes[k].inputs.empty() && branch_of(g.nodes[k], "then_branch") &&
        branch_of(g.nodes[k], "else_branch"))
      by_condition[g.nodes[k].inputs[0]].push_back(k);
  std::vector<std::vector<size_t>> candidates;
  for (auto& [cond, ks] : by_condition)
    if (ks.size() >= 2) candidates.push_back(ks);
  // Deterministic: the group whose first If comes first.
  std::sort(candidates.begin(), candidates.end());
  for (const std::vector<size_t>& ks : candidates) {
    Group group;
    group.ifs.insert(ks.begin(), ks.end());
    std::vector<bool> defined(g.values.size(), false);
    bool other_if = false;
    for (size_t k = ks.front(); k < g.nodes.size() && !other_if; ++k) {
      const ir::Node& n = g.nodes[k];
      bool in = group.ifs.count(k) > 0;
      for (ir::ValueId v : n.inputs) in = in || (v != ir::kNoValue && defined[v]);
      for (ir::ValueId v : ir::captured_inputs(n)) in = in || defined[v];
      if (!in) continue;
      if (is_if(n) && !group.ifs.count(k)) other_if = true;
      group.region.push_back(k);
      for (ir::ValueId v : n.outputs) defined[v] = true;
    }
    if (other_if) continue;
    std::set<ir::ValueId> seen;
    for (ir::ValueId v : g.outputs)
      if (defined[v] && seen.insert(v).second) group.outputs.push_back(v);
    if (!group.outputs.empty()) return group;
  }
  return std::nullopt;
}

// One side of the merged If: the region of `g` with each If of the group
// replaced by its `side` branch.
class BranchBuilder {
 public:
  BranchBuilder(const ir::Graph& g, const Group& group, const char* side, std::string prefix)
      : g_(g), group_(group), side_(side), prefix_(std::move(prefix)),
        branch_(std::make_shared<ir::Graph>()) {
    branch_->name = prefix_ + side_;
  }

  std::shared_ptr<ir::Graph> build() {
    for (size_t k : group_.region) {
      const ir::Node& n = g_.nodes[k];
      if (group_.ifs.count(k)) inline_branch(n, *branch_of(n, side_));
      else copy_node(n);
    }
    for (ir::ValueId v : group_.outputs) branch_->outputs.push_back(read(v));
    return branch_;
  }

 private:
  // Value `v` of g as this branch reads it: the region's copy, or a capture.
  ir::ValueId read(ir::ValueId v) {
    if (v == ir::kNoValue) return v;
    if (auto it = local_.find(v); it != local_.end()) return it->second;
    ir::ValueId inner = fresh(g_.values[v]);
    branch_->captures.push_back({inner, v});
    local_[v] = inner;
    return inner;
  }

  // A name of this branch: the copies of two Ifs' branches may share names.
  std::string unique(std::set<std::string>& taken, const std::string& name) {
    std::string out = prefix_ + name;
    for (int k = 1; !taken.insert(out).second; ++k) out = prefix_ + name + "_" + std::to_string(k);
    return out;
  }

  ir::ValueId fresh(const ir::Value& like) {
    ir::ValueId v = branch_->add_value(unique(value_names_, like.name));
    branch_->values[v].has_type = like.has_type;
    branch_->values[v].type = like.type;
    return v;
  }

  void copy_node(const ir::Node& n) {
    ir::Node copy = n;
    copy.name = unique(node_names_, n.name);
    for (ir::ValueId& v : copy.inputs) v = read(v);
    for (ir::Attribute& a : copy.attrs)
      if (a.graph) a.graph = clone_subgraph(*a.graph, prefix_, [&](ir::ValueId v) { return read(v); });
    for (ir::ValueId& v : copy.outputs) {
      ir::ValueId made = fresh(g_.values[v]);
      local_[v] = made;
      v = made;
    }
    branch_->nodes.push_back(std::move(copy));
  }

  // The If `node` replaced by `body`'s nodes; its outputs become the body's.
  void inline_branch(const ir::Node& node, const ir::Graph& body) {
    std::vector<ir::ValueId> map(body.values.size(), ir::kNoValue);
    for (const ir::Capture& c : body.captures) map[c.inner] = read(c.outer);
    auto mapped = [&](ir::ValueId v) {
      if (v == ir::kNoValue) return v;
      if (map[v] == ir::kNoValue) map[v] = fresh(body.values[v]);
      return map[v];
    };
    for (const ir::Initializer& init : body.initializers)
      branch_->initializers.push_back({mapped(init.value), init.tensor, init.graph});
    for (const ir::Node& n : body.nodes) {
      ir::Node copy = n;
      copy.name = unique(node_names_, n.name);
      for (ir::ValueId& v : copy.inputs) v = mapped(v);
      for (ir::ValueId& v : copy.outputs) v = mapped(v);
      for (ir::Attribute& a : copy.attrs)
        if (a.graph) a.graph = clone_subgraph(*a.graph, prefix_, mapped);
      branch_->nodes.push_back(std::move(copy));
    }
    for (size_t i = 0; i < node.outputs.size() && i < body.outputs.size(); ++i)
      local_[node.outputs[i]] = mapped(body.outputs[i]);
  }

  const ir::Graph& g_;
  const Group& group_;
  const char* side_;
  std::string prefix_;
  std::shared_ptr<ir::Graph> branch_;
  std::map<ir::ValueId, ir::ValueId> local_;
  std::set<std::string> value_names_, node_names_;
};

class MergeIfs : public Pass {
 public:
  const char* name() const override { return "merge_ifs"; }
  Properties needs() const override { return {topologically_sorted()}; }
  Properties guarantees() const override { return {no_mergeable_ifs()}; }

  bool run(ir::Graph& g) override {
    bool changed = false;
    while (std::optional<Group> group = find_group(g)) {
      merge(g, *group);
      changed = true;
    }
    return changed;
  }

 private:
  static void merge(ir::Graph& g, const Group& group) {
    const std::string name = g.nodes[*group.ifs.begin()].name + "+merged";
    ir::Node merged;
    merged.name = name;
    merged.op_type = onnx_ops::op_name(onnx_ops::Op::If);
    merged.inputs = {g.nodes[*group.ifs.begin()].inputs[0]};
    merged.outputs = group.outputs;
    for (const char* side : {"then_branch", "else_branch"}) {
      ir::Attribute a;
      a.name = side;
      a.type = JXO_ATTR_GRAPH;
      a.graph = BranchBuilder(g, group, side, name + "/" + std::string(side, 4) + "/").build();
      merged.attrs.push_back(std::move(a));
    }
    // The region reads values that nodes between its own define, and no node
    // outside it reads the region: the If goes after every other node.
    std::set<size_t> region(group.region.begin(), group.region.end());
    std::vector<ir::Node> nodes;
    nodes.reserve(g.nodes.size() - region.size() + 1);
    for (size_t k = 0; k < g.nodes.size(); ++k)
      if (!region.count(k)) nodes.push_back(std::move(g.nodes[k]));
    nodes.push_back(std::move(merged));
    g.nodes = std::move(nodes);
  }
};

}  // namespace

std::unique_ptr<Pass> if_merging() { return std::make_unique<MergeIfs>(); }

Property no_mergeable_ifs() {
  return {"no mergeable Ifs", [](const ir::Graph& g) -> std::string {
            std::optional<Group> group = find_group(g);
            if (!group) return {};
            return "node '" + g.nodes[*group->ifs.begin()].name + "' and " +
                   std::to_string(group->ifs.size() - 1) +
                   " more If(s) test one condition and could be one If";
          }};
}

}  // namespace jaxonnx::passes
