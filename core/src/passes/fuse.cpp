// fuse: applies the rewrite rules plugins declare (ABI 1.2) — the one generic
// pass through which decompositions become fused ONNX ops (MatMul+Add → Gemm,
// JAX's softmax chain → Softmax, ...). It names no op: every pattern and every
// replacement belongs to a plugin's rule.
//
// Needs: topologically sorted; typed values (rules compare types).
// Rewrites: at each node, in order, every rule whose root op it is (plugins in
// registry order, rules in declaration order; rules below their min_opset are
// skipped) gets a read-only view; a rule that matches emits its replacement
// and redirects root outputs to it. The host then inserts the replacement
// before the root and makes the root's readers read the replacement.
// Refuses (the attempt is dropped, the graph untouched): a replacement of a
// different type than the value it replaces, an emitted node reading a value
// defined at or after the root, an op the rule did not declare, a non-default
// domain, a replaced graph output whose replacement is not a node the rule
// emitted.
// Sweeps again while the last sweep rewrote something (a rewrite can make an
// earlier node match).
// Guarantees: no plugin rule matches (tried again on a scratch copy when the
// verifier is on); the invariants (topological order, one definition per
// value, interface values keep their names and types). Matched nodes nobody
// reads any more are left to dce.
#include <algorithm>
#include <cstring>
#include <set>

#include "../abi_read.hpp"
#include "../status.hpp"
#include "fuse_api.hpp"
#include "jaxonnx/core/error.hpp"
#include "jaxonnx/core/passes.hpp"
#include "jaxonnx/core/plugin_host.hpp"
#include "jaxonnx/core/step_log.hpp"

namespace jaxonnx {
namespace rewrite_api {
namespace {

std::string str(jxo_str s) { return abi::read_string(s); }
jxo_str view(const std::string& s) { return jxo_str{s.data(), s.size()}; }
jxo_status* fail(const jxo_rewrite* rw, const std::string& msg) {
  return make_status(JXO_INVALID_ARGUMENT, "rule " + rw->rule + ": " + msg);
}

const ir::Node* node_at(const jxo_rewrite* rw, int64_t k) {
  if (!rw || k < 0 || static_cast<size_t>(k) >= rw->graph->nodes.size()) return nullptr;
  const ir::Node& n = rw->graph->nodes[k];
  return passes::is_erased(n) ? nullptr : &n;
}
// A value of the graph as the rule found it (not one made by this attempt).
bool existing(const jxo_rewrite* rw, jxo_value v) {
  return rw && v >= 0 && static_cast<size_t>(v) < rw->values_before;
}
bool made_here(const jxo_rewrite* rw, jxo_value v) {
  return rw && static_cast<size_t>(v) >= rw->values_before &&
         static_cast<size_t>(v) < rw->graph->values.size();
}

}  // namespace

int64_t rw_root(const jxo_rewrite* rw) noexcept { return rw ? static_cast<int64_t>(rw->root) : -1; }
int64_t rw_opset(const jxo_rewrite* rw) noexcept { return rw ? rw->opset : 0; }
int32_t rw_target_supports(const jxo_rewrite* rw, jxo_str feature) noexcept {
  if (!rw || (feature.size && !feature.data)) return 1;
  // No profile: onnxruntime's (the first), which lacks nothing but other domains.
  const sdk::targets::Profile& target = rw->target ? *rw->target : sdk::targets::kProfiles[0];
  return sdk::targets::supports(target, std::string_view(feature.data, feature.size)) ? 1 : 0;
}
int64_t rw_producer(const jxo_rewrite* rw, jxo_value v) noexcept {
  return existing(rw, v) ? rw->uses->producer[v] : -1;
}
jxo_str rw_op_type(const jxo_rewrite* rw, int64_t k) noexcept {
  const ir::Node* n = node_at(rw, k);
  return n ? view(n->op_type) : jxo_str{nullptr, 0};
}
jxo_str rw_domain(const jxo_rewrite* rw, int64_t k) noexcept {
  const ir::Node* n = node_at(rw, k);
  return n ? view(n->domain) : jxo_str{nullptr, 0};
}
size_t rw_num_inputs(const jxo_rewrite* rw, int64_t k) noexcept {
  const ir::Node* n = node_at(rw, k);
  return n ? n->inputs.size() : 0;
}
jxo_value rw_input(const jxo_rewrite* rw, int64_t k, size_t i) noexcept {
  const ir::Node* n = node_at(rw, k);
  return n && i < n->inputs.size() ? n->inputs[i] : JXO_NO_VALUE;
}
size_t rw_num_outputs(const jxo_rewrite* rw, int64_t k) noexcept {
  const ir::Node* n = node_at(rw, k);
  return n ? n->outputs.size() : 0;
}
jxo_value rw_output(const jxo_rewrite* rw, int64_t k, size_t i) noexcept {
  const ir::Node* n = node_at(rw, k);
  return n && i < n->outputs.size() ? n->outputs[i] : JXO_NO_VALUE;
}
const jxo_attr* rw_attr(const jxo_rewrite* rw_c, int64_t k, jxo_str name) noexcept {
  return guarded_value<const jxo_attr*>("rw_attr", nullptr, [&]() -> const jxo_attr* {
  const ir::Node* n = node_at(rw_c, k);
  if (!n) return nullptr;
  auto* rw = const_cast<jxo_rewrite*>(rw_c);  // the view's own storage
  std::string want = str(name);
  for (const ir::Attribute& a : n->attrs) {
    if (a.name != want) continue;
    jxo_attr out{};
    out.struct_size = sizeof(jxo_attr);
    out.name = view(a.name);
    out.type = a.type;
    out.i = a.i;
    out.f = a.f;
    out.s = view(a.s);
    switch (a.type) {
      case JXO_ATTR_INTS: out.ints = a.ints.data(); out.count = a.ints.size(); break;
      case JXO_ATTR_FLOATS: out.floats = a.floats.data(); out.count = a.floats.size(); break;
      case JXO_ATTR_STRINGS: {
        std::vector<jxo_str>& s = rw->strings.emplace_back();
        for (const std::string& x : a.strings) s.push_back(view(x));
        out.strings = s.data();
        out.count = s.size();
        break;
      }
      case JXO_ATTR_TENSOR: out.tensor = a.tensor ? a.tensor->c() : nullptr; break;
      default: break;  // GRAPH: shown with a NULL graph
    }
    rw->attrs.push_back(out);
    return &rw->attrs.back();
  }
  return nullptr;
  });
}
size_t rw_num_reads(const jxo_rewrite* rw, jxo_value v) noexcept {
  if (!existing(rw, v)) return 0;
  return static_cast<size_t>(rw->uses->reads[v]) + (rw->uses->is_output[v] ? 1 : 0);
}
const jxo_aval* rw_value_aval(const jxo_rewrite* rw, jxo_value v) noexcept {
  return guarded_value<const jxo_aval*>("rw_value_aval", nullptr, [&]() -> const jxo_aval* {
    if (!rw || v < 0 || static_cast<size_t>(v) >= rw->graph->values.size()) return nullptr;
    const ir::Value& value = rw->graph->values[v];
    return value.has_type ? value.type.c() : nullptr;
  });
}
const jxo_tensor* rw_value_constant(const jxo_rewrite* rw, jxo_value v) noexcept {
  if (!existing(rw, v)) return nullptr;
  const Tensor* t = rw->uses->constant(*rw->graph, v);
  return t ? t->c() : nullptr;
}

jxo_status* rw_emit_node(jxo_rewrite* rw, const jxo_node* node_in, jxo_value* outputs) noexcept {
  if (!rw || !node_in || !outputs)
    return make_status(JXO_INVALID_ARGUMENT, "rw_emit_node: no rewrite, node or output array");
  try {
    const jxo_node node_copy = abi::read_struct(node_in, "rw_emit_node: the node");
    const jxo_node* node = &node_copy;
    ir::Node n;
    n.op_type = str(node->op_type);
    n.domain = str(node->domain);
    if (n.op_type.empty()) return fail(rw, "rw_emit_node: empty op_type");
    if (!n.domain.empty())
      return fail(rw, "rw_emit_node(" + n.op_type + "): only default-domain nodes can be emitted");
    if (std::find(rw->allowed_ops->begin(), rw->allowed_ops->end(), n.op_type) ==
        rw->allowed_ops->end())
      return fail(rw, "rw_emit_node: op '" + n.op_type +
                          "' is not among the ops the rule declares (.emits)");
    if ((node->num_inputs && !node->inputs) || (node->num_attrs && !node->attrs))
      return fail(rw, "rw_emit_node(" + n.op_type + "): a NULL input or attribute array");
    for (size_t k = 0; k < node->num_inputs; ++k) {
      jxo_value v = node->inputs[k];
      bool ok = v == JXO_NO_VALUE || made_here(rw, v) ||
                (existing(rw, v) && rw->uses->producer[v] < static_cast<int64_t>(rw->root));
      if (!ok)
        return fail(rw, "rw_emit_node(" + n.op_type + "): input " + std::to_string(k) +
                            " is not a value defined before the root node");
      n.inputs.push_back(v == JXO_NO_VALUE ? ir::kNoValue : v);
    }
    auto no_graphs = [&](const jxo_graph*, const std::string& name) -> std::shared_ptr<ir::Graph> {
      throw InvalidArgument("attribute '" + name + "' has a type a rewrite cannot emit");
    };
    for (size_t k = 0; k < node->num_attrs; ++k) {
      try {
        n.attrs.push_back(abi::read_attribute(node->attrs[k], no_graphs));
      } catch (const InvalidArgument& e) {
        return fail(rw, "rw_emit_node(" + n.op_type + "): " + e.what());
      }
    }
    std::vector<std::optional<Aval>> types(node->num_outputs);
    for (size_t k = 0; k < node->num_outputs; ++k)
      if (const jxo_aval* t = node->outputs ? node->outputs[k] : nullptr)
        types[k] = abi::read_aval(t, "rw_emit_node(" + n.op_type + "): output " + std::to_string(k));
    const ir::Node& root = rw->graph->nodes[rw->root];
    std::string base = (root.name.empty() ? std::string("fused") : root.name) + "/f" +
                       std::to_string(rw->nodes.size());
    n.name = base;
    for (size_t k = 0; k < node->num_outputs; ++k) {
      ir::ValueId v = rw->graph->add_value(base + "_" + std::to_string(k));
      if (types[k] && types[k]->dtype != JXO_DTYPE_UNDEFINED) {
        rw->graph->values[v].has_type = true;
        rw->graph->values[v].type = *types[k];
      }
      n.outputs.push_back(v);
      outputs[k] = v;
    }
    rw->nodes.push_back(std::move(n));
    return nullptr;
  } catch (...) {
    return status_from_current_exception("rw_emit_node");
  }
}

jxo_status* rw_constant(jxo_rewrite* rw, const jxo_tensor* t, jxo_value* out) noexcept {
  if (!rw || !t || !out)
    return make_status(JXO_INVALID_ARGUMENT, "rw_constant: no rewrite, tensor or output");
  try {
    std::shared_ptr<const Tensor> tensor;
    try {
      tensor = abi::read_tensor(t, "rw_constant");
    } catch (const InvalidArgument& e) {
      return fail(rw, e.what());
    }
    const ir::Node& root = rw->graph->nodes[rw->root];
    ir::ValueId v = rw->graph->add_value((root.name.empty() ? std::string("fused") : root.name) +
                                         "/c" + std::to_string(rw->initializers.size()));
    std::vector<Dim> dims;
    for (int64_t d : tensor->dims) dims.push_back(Dim{d, ""});
    rw->graph->values[v].has_type = true;
    rw->graph->values[v].type = Aval(tensor->dtype, dims);
    rw->initializers.push_back(ir::Initializer{v, tensor, nullptr});
    *out = v;
    return nullptr;
  } catch (...) {
    return status_from_current_exception("rw_constant");
  }
}

jxo_status* rw_replace(jxo_rewrite* rw, jxo_value from, jxo_value to) noexcept {
  return guarded("rw_replace", [&]() -> jxo_status* {
  if (!rw) return make_status(JXO_INVALID_ARGUMENT, "rw_replace: no rewrite");
  const ir::Node& root = rw->graph->nodes[rw->root];
  if (std::find(root.outputs.begin(), root.outputs.end(), from) == root.outputs.end())
    return fail(rw, "rw_replace: the value replaced is not an output of the root node");
  if (!made_here(rw, to) &&
      !(existing(rw, to) && rw->uses->producer[to] < static_cast<int64_t>(rw->root)))
    return fail(rw, "rw_replace: the replacement is not a value defined before the root node");
  ir::Value& a = rw->graph->values[from];
  ir::Value& b = rw->graph->values[to];
  if (!b.has_type && a.has_type) {
    b.has_type = true;
    b.type = a.type;
  }
  if (a.has_type && !passes::same_type(a, b))
    return fail(rw, "rw_replace: the replacement is " + b.type.str() + ", the value replaced " +
                        a.type.str());
  for (const auto& r : rw->replaced)
    if (r.first == from) return fail(rw, "rw_replace: that output is already replaced");
  rw->replaced.emplace_back(from, to);
  return nullptr;
  });
}

}  // namespace rewrite_api

namespace passes {
namespace {

class Fuse : public Pass {
 public:
  Fuse(std::vector<const RuleInfo*> rules, int64_t opset, const sdk::targets::Profile* target)
      : rules_(rules), opset_(opset), target_(target) {
    for (const RuleInfo* r : rules)
      if (r->min_opset <= opset) by_root_[r->root_op].push_back(r);
  }
  const char* name() const override { return "fuse"; }
  Properties needs() const override { return {topologically_sorted(), typed_values()}; }
  Properties guarantees() const override { return {no_rule_matches(rules_, opset_, target_)}; }

  // The first node of `scratch` where a rule applies ("node #3 Add 'n3', rule
  // ..."), or empty. A match is committed: `scratch` is a copy to throw away.
  std::string first_match(ir::Graph& scratch) {
    Uses uses(scratch);
    for (size_t k = 0; k < scratch.nodes.size(); ++k) {
      const ir::Node& n = scratch.nodes[k];
      auto it = n.domain.empty() ? by_root_.find(n.op_type) : by_root_.end();
      if (it == by_root_.end()) continue;
      std::string where = "node #" + std::to_string(k) + " " + n.op_type + " '" + n.name + "'";
      size_t inserted = 0;
      for (const RuleInfo* rule : it->second)
        if (attempt(scratch, uses, k, *rule, &inserted))
          return "rule '" + rule->name + "' of plugin '" + rule->plugin->name + "' matches at " +
                 where;
    }
    return {};
  }

  // Sweeps until no rule applies: a rewrite can make an earlier node match
  // (a statistic two normalizations read becomes single-use once the later
  // one is fused), and the pass guarantees that none does. A sweep that
  // changes nothing is the last; a match needs a rewrite since the sweep
  // before, so this is one extra linear sweep in the common case.
  bool run(ir::Graph& g) override {
    if (by_root_.empty()) return false;
    bool changed = false;
    for (int k = 0; k < kMaxSweeps && sweep(g); ++k) changed = true;
    return changed;
  }

 private:
  static constexpr int kMaxSweeps = 16;  // against rules that would undo each other forever

  bool sweep(ir::Graph& g) {
    bool changed = false;
    size_t k = 0;
    std::unique_ptr<Uses> uses;
    while (k < g.nodes.size()) {
      auto it = g.nodes[k].domain.empty() ? by_root_.find(g.nodes[k].op_type) : by_root_.end();
      if (it == by_root_.end()) {
        ++k;
        continue;
      }
      if (!uses) uses = std::make_unique<Uses>(g);
      bool applied = false;
      size_t before = g.nodes.size();
      size_t inserted = 0;
      for (const RuleInfo* rule : it->second)
        if ((applied = attempt(g, *uses, k, *rule, &inserted))) {
          rule->applied->fetch_add(1, std::memory_order_relaxed);
          break;
        }
      if (!applied) {
        ++k;
        continue;
      }
      // The root (now unread, or erased when it defined a graph output) and
      // whatever only it read are dead; dce removes them, so the next match
      // sees true read counts. Removed nodes lie at or before the root, so
      // the replacement now starts at or after k - removed: go on from there
      // (its nodes may be roots of further rules).
      changed = true;
      erase_marked(g);
      dead_code_elimination()->run(g);
      uses.reset();
      size_t removed = before + inserted - g.nodes.size();
      k = k > removed ? k - removed : 0;
    }
    return changed;
  }

  bool attempt(ir::Graph& g, const Uses& uses, size_t k, const RuleInfo& rule, size_t* inserted) {
    jxo_rewrite rw;
    rw.graph = &g;
    rw.uses = &uses;
    rw.root = k;
    rw.opset = opset_;
    rw.target = target_;
    rw.allowed_ops = &rule.onnx_ops;
    rw.rule = "'" + rule.name + "' of plugin '" + rule.plugin->name + "'";
    rw.values_before = g.values.size();
    FaultScope faults;
    log_step("rule", rule.plugin->name, rule.name);
    jxo_status* status = rule.rewrite(host_api(), &rw, rule.user_data);
    log_step("done", rule.plugin->name, rule.name);
    std::optional<Failure> fault = faults.take();
    if (status || fault) {
      std::string msg = status ? take_status(status).message : "";
      if (fault) msg = fault->message + (msg.empty() ? "" : "; then: " + msg);
      drop(g, rw);
      throw ConversionError("the rewrite rule " + rw.rule + " failed at node '" +
                            g.nodes[k].name + "' (" + g.nodes[k].op_type + "): " + msg);
    }
    *inserted = rw.nodes.size();
    if (rw.replaced.empty() || !commit(g, uses, rw)) {
      drop(g, rw);
      return false;
    }
    return true;
  }

  static void drop(ir::Graph& g, const jxo_rewrite& rw) {
    while (g.values.size() > rw.values_before) g.values.pop_back();
  }

  static bool commit(ir::Graph& g, const Uses& uses, jxo_rewrite& rw) {
    ir::Node& root = g.nodes[rw.root];
    bool defines_output = false;
    for (const auto& [from, to] : rw.replaced) defines_output = defines_output || uses.is_output[from];
    if (defines_output) {
      // A graph output keeps its value and name: the emitted node that makes
      // the replacement defines it instead, and the root goes. Every other
      // output of the root must then be replaced or unread.
      for (ir::ValueId out : root.outputs) {
        bool replaced = false;
        for (const auto& r : rw.replaced) replaced = replaced || r.first == out;
        if (!replaced && (uses.reads[out] > 0 || uses.is_output[out])) return false;
      }
      for (const auto& [from, to] : rw.replaced) {
        if (!uses.is_output[from]) continue;
        if (!emitted(rw, to)) return false;
        for (const auto& r : rw.replaced)
          if (r.second == to && r.first != from) return false;
      }
    }
    for (const auto& [from, to] : rw.replaced) {
      if (uses.is_output[from]) {
        for (ir::Node& n : rw.nodes) {
          for (ir::ValueId& v : n.outputs)
            if (v == to) v = from;
          for (ir::ValueId& v : n.inputs)
            if (v == to) v = from;
        }
      } else {
        replace_reads(g, from, to);
      }
    }
    if (defines_output) {
      // The root's outputs are now defined by emitted nodes (or unread):
      // detach them before the root is erased.
      root.outputs.clear();
      mark_erased(root);
    }
    for (ir::Initializer& init : rw.initializers) g.initializers.push_back(std::move(init));
    g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(rw.root),
                   std::make_move_iterator(rw.nodes.begin()), std::make_move_iterator(rw.nodes.end()));
    return true;
  }

  static bool emitted(const jxo_rewrite& rw, ir::ValueId v) {
    for (const ir::Node& n : rw.nodes)
      for (ir::ValueId o : n.outputs)
        if (o == v) return true;
    return false;
  }

  std::vector<const RuleInfo*> rules_;
  int64_t opset_;
  const sdk::targets::Profile* target_;
  std::map<std::string, std::vector<const RuleInfo*>> by_root_;
};

}  // namespace

std::unique_ptr<Pass> fuse(std::vector<const RuleInfo*> rules, int64_t opset,
                           const sdk::targets::Profile* target) {
  return std::make_unique<Fuse>(std::move(rules), opset, target);
}

// The pass's own attempts, on a scratch copy.
Property no_rule_matches(std::vector<const RuleInfo*> rules, int64_t opset,
                         const sdk::targets::Profile* target) {
  return {"no plugin rule matches", [rules, opset, target](const ir::Graph& g) -> std::string {
            ir::Graph scratch = scratch_copy(g);
            return Fuse(rules, opset, target).first_match(scratch);
          }};
}

}  // namespace passes
}  // namespace jaxonnx
