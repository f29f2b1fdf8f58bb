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
// before the root and makes the root's readers read the replacement. A rule
// may also hand a graph output an earlier node defines to an emitted node
// (ABI 1.7: a fused op whose extra outputs are the model's, as an attention
// op's updated cache): the emitted node defines it under its name, and the
// earlier node's readers keep its value under another name.
// Refuses (the attempt is dropped, the graph untouched): a replacement of a
// different type than the value it replaces, an emitted node reading a value
// defined at or after the root, an op the rule did not declare (another
// domain's op is declared as "domain.op"), a domain the target does not run,
// a replaced graph output whose replacement is not a node the rule emitted.
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
#include "../plugin_call.hpp"
#include "../status.hpp"
#include "fuse_api.hpp"
#include "node_order.hpp"
#include "jaxonnx/core/error.hpp"
#include "jaxonnx/core/passes.hpp"
#include "jaxonnx/core/plugin_host.hpp"

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
// A value that exists and is defined before the root (or by no node).
bool defined_before_root(const jxo_rewrite* rw, jxo_value v) {
  if (!existing(rw, v)) return false;
  int64_t p = rw->uses->producer[v];
  if (p < 0) return true;
  return rw->order ? (*rw->order)[p] < (*rw->order)[rw->root] : p < static_cast<int64_t>(rw->root);
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
  const std::string_view asked(feature.data, feature.size);
  const bool yes = sdk::targets::supports(target, asked);
  if (rw->facts)
    ++rw->facts->target_asked[{"rule", rw->rule_plugin, rw->rule_name, std::string(asked), yes}];
  return yes ? 1 : 0;
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
    auto no_graphs = [&](const jxo_graph*, const std::string& name) -> std::shared_ptr<ir::Graph> {
      throw InvalidArgument("attribute '" + name + "' has a type a rewrite cannot emit");
    };
    abi::NodeRequest req;
    try {
      req = abi::read_node(node_in, "rw_emit_node", no_graphs);
    } catch (const InvalidArgument& e) {
      return fail(rw, e.what());
    }
    // Another domain's op (ABI 1.6) is declared qualified ("com.microsoft.MatMulNBits"); the
    // rule was selected only if the target runs every domain it declares (converter.cpp).
    const bool other_domain = !req.domain.empty() && req.domain != "ai.onnx";
    const std::string declared = other_domain ? req.domain + "." + req.op_type : req.op_type;
    const sdk::targets::Profile& target = rw->target ? *rw->target : sdk::targets::kProfiles[0];
    if (other_domain && sdk::targets::refuses_domain(target, req.domain))
      return fail(rw, req.where + ": the target does not run domain " + req.domain);
    if (std::find(rw->allowed_ops->begin(), rw->allowed_ops->end(), declared) ==
        rw->allowed_ops->end())
      return fail(rw, "rw_emit_node: op '" + declared +
                          "' is not among the ops the rule declares (.emits)");
    ir::Node n;
    n.op_type = req.op_type;
    if (other_domain) n.domain = req.domain;
    for (size_t k = 0; k < req.inputs.size(); ++k) {
      jxo_value v = req.inputs[k];
      if (v != JXO_NO_VALUE && !made_here(rw, v) && !defined_before_root(rw, v))
        return fail(rw, req.where + ": input " + std::to_string(k) +
                            " is not a value defined before the root node");
      n.inputs.push_back(v == JXO_NO_VALUE ? ir::kNoValue : v);
    }
    n.attrs = std::move(req.attrs);
    const ir::Node& root = rw->graph->nodes[rw->root];
    std::string base = (root.name.empty() ? std::string("fused") : root.name) + "/f" +
                       std::to_string(rw->nodes.size());
    n.name = base;
    for (size_t k = 0; k < req.outputs.size(); ++k) {
      ir::ValueId v = rw->graph->add_value(base + "_" + std::to_string(k));
      if (req.outputs[k] && req.outputs[k]->dtype != JXO_DTYPE_UNDEFINED) {
        rw->graph->values[v].has_type = true;
        rw->graph->values[v].type = *req.outputs[k];
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
  if (std::find(root.outputs.begin(), root.outputs.end(), from) == root.outputs.end()) {
    // Minor 7: a graph output an earlier node defines; an emitted node takes it over.
    if (!existing(rw, from) || !rw->uses->is_output[from] || rw->uses->producer[from] < 0 ||
        !defined_before_root(rw, from))
      return fail(rw, "rw_replace: the value replaced is neither an output of the root node nor a "
                      "graph output defined before it");
    if (!made_here(rw, to))
      return fail(rw, "rw_replace: a graph output defined before the root must be replaced by an "
                      "output of a node the rule emitted");
  }
  if (!made_here(rw, to) && !defined_before_root(rw, to))
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

int32_t rw_is_output(const jxo_rewrite* rw, jxo_value v) noexcept {
  return existing(rw, v) && rw->uses->is_output[v] ? 1 : 0;
}

}  // namespace rewrite_api

namespace passes {
namespace {

class Fuse : public Pass {
 public:
  Fuse(std::vector<const RuleInfo*> rules, int64_t opset, const sdk::targets::Profile* target,
       ConversionFacts* facts = nullptr)
      : rules_(rules), opset_(opset), target_(target), facts_(facts) {
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
    NodeOrder order(scratch.nodes.size());
    for (size_t k = 0; k < scratch.nodes.size(); ++k) {
      const ir::Node& n = scratch.nodes[k];
      auto it = n.domain.empty() ? by_root_.find(n.op_type) : by_root_.end();
      if (it == by_root_.end()) continue;
      std::string where = "node #" + std::to_string(k) + " " + n.op_type + " '" + n.name + "'";
      for (const RuleInfo* rule : it->second)
        if (attempt(scratch, uses, order, k, *rule))
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
    // Rules read true read counts: no dead reader may count.
    dead_code_elimination()->run(g);
    bool changed = false;
    for (int k = 0; k < kMaxSweeps && sweep(g); ++k) changed = true;
    return changed;
  }

 private:
  static constexpr int kMaxSweeps = 16;  // against rules that would undo each other forever

  // One pass over the nodes in order. A match costs what it touches: the
  // replacement is appended to g.nodes and linked in before its root, the
  // root and what only it read are erased as their reads drop to none, and
  // the use lists follow each change. g.nodes takes the new order at the end.
  bool sweep(ir::Graph& g) {
    bool changed = false;
    Uses uses(g);
    NodeOrder order(g.nodes.size());
    size_t k = order.head();
    while (k != NodeOrder::kNone) {
      auto it = g.nodes[k].domain.empty() ? by_root_.find(g.nodes[k].op_type) : by_root_.end();
      if (it == by_root_.end()) {
        k = order.next(k);
        continue;
      }
      size_t first_new = g.nodes.size();
      bool applied = false;
      for (const RuleInfo* rule : it->second)
        if ((applied = attempt(g, uses, order, k, *rule))) {
          rule->applied->fetch_add(1, std::memory_order_relaxed);
          if (facts_) ++facts_->rules_fired[{rule->plugin->name, rule->name}];
          break;
        }
      if (!applied) {
        k = order.next(k);
        continue;
      }
      changed = true;
      k = erase_dead(g, uses, order, k, first_new);
    }
    std::vector<ir::Node> nodes;
    nodes.reserve(g.nodes.size());
    for (size_t n : order.sequence()) nodes.push_back(std::move(g.nodes[n]));
    g.nodes = std::move(nodes);
    if (changed) dead_code_elimination()->run(g);  // initializers only the matches read
    return changed;
  }

  // After a match at `root` whose replacement is nodes first_new.. of g:
  // erases the root (its outputs now unread, or detached when it defined a
  // graph output) and, transitively, every node only erased nodes read, as dce
  // would. Returns the node to go on from: the replacement's nodes may be
  // roots of further rules, and so may the node before them, whose read
  // counts dropped (dce used to be run here and the sweep stepped back by
  // the number of nodes it removed after the root's position).
  size_t erase_dead(ir::Graph& g, Uses& uses, NodeOrder& order, size_t root, size_t first_new) {
    size_t end_new = g.nodes.size();
    size_t after = order.next(root);
    auto dead = [&](size_t n) {
      for (ir::ValueId v : g.nodes[n].outputs)
        if (uses.reads[v] > 0 || uses.is_output[v]) return false;
      return true;
    };
    size_t stepped_back = 0;  // the root and replacement nodes erased
    std::vector<size_t> work;
    for (size_t n = first_new; n < end_new; ++n) work.push_back(n);
    work.push_back(root);
    while (!work.empty()) {
      size_t n = work.back();
      work.pop_back();
      if (is_erased(g.nodes[n]) || !dead(n)) continue;
      if (n == root || n >= first_new) ++stepped_back;
      std::vector<ir::ValueId> reads = g.nodes[n].inputs;
      for (ir::ValueId v : ir::captured_inputs(g.nodes[n])) reads.push_back(v);
      uses.erase(g, n);
      order.unlink(n);
      for (ir::ValueId v : reads)
        if (v != ir::kNoValue && uses.producer[v] >= 0)
          work.push_back(static_cast<size_t>(uses.producer[v]));
    }
    size_t k = after;
    for (size_t n = end_new; n-- > first_new;)
      if (!is_erased(g.nodes[n])) k = n;
    if (!is_erased(g.nodes[root])) k = k == after ? root : k;
    for (; stepped_back > 0; --stepped_back) {
      size_t p = k == NodeOrder::kNone ? order.tail() : order.prev(k);
      if (p == NodeOrder::kNone) break;
      k = p;
    }
    return k;
  }

  bool attempt(ir::Graph& g, Uses& uses, NodeOrder& order, size_t k, const RuleInfo& rule) {
    jxo_rewrite rw;
    rw.graph = &g;
    rw.uses = &uses;
    rw.root = k;
    rw.order = &order.keys();
    rw.opset = opset_;
    rw.target = target_;
    rw.allowed_ops = &rule.onnx_ops;
    rw.rule = "'" + rule.name + "' of plugin '" + rule.plugin->name + "'";
    if (facts_) {
      rw.facts = facts_;
      rw.rule_plugin = rule.plugin->name;
      rw.rule_name = rule.name;
    }
    rw.values_before = g.values.size();
    std::optional<Failure> failure = call_plugin("rule", rule.plugin->name, rule.name, [&] {
      return rule.rewrite(host_api(), &rw, rule.user_data);
    });
    if (failure) {
      drop(g, rw);
      throw ConversionError("the rewrite rule " + rw.rule + " failed at node '" +
                            g.nodes[k].name + "' (" + g.nodes[k].op_type + "): " + failure->message);
    }
    if (rw.replaced.empty() || !commit(g, uses, order, rw)) {
      drop(g, rw);
      return false;
    }
    return true;
  }

  static void drop(ir::Graph& g, const jxo_rewrite& rw) {
    while (g.values.size() > rw.values_before) g.values.pop_back();
  }

  static bool commit(ir::Graph& g, Uses& uses, NodeOrder& order, jxo_rewrite& rw) {
    const size_t root = rw.root;
    auto of_root = [&](ir::ValueId v) {
      const auto& outs = g.nodes[root].outputs;
      return std::find(outs.begin(), outs.end(), v) != outs.end();
    };
    bool defines_output = false;
    for (const auto& [from, to] : rw.replaced)
      defines_output = defines_output || (uses.is_output[from] && of_root(from));
    // A graph output an earlier node defined (minor 7) must be taken over by
    // an emitted node's output of its own, and no emitted node may read the
    // value it had (its readers keep that value under another name).
    for (const auto& [from, to] : rw.replaced) {
      if (of_root(from)) continue;
      if (!emitted(rw, to)) return false;
      for (const auto& r : rw.replaced)
        if (r.second == to && r.first != from) return false;
      for (const ir::Node& n : rw.nodes)
        if (std::find(n.inputs.begin(), n.inputs.end(), from) != n.inputs.end()) return false;
    }
    if (defines_output) {
      // A graph output keeps its value and name: the emitted node that makes
      // the replacement defines it instead, and the root goes. Every other
      // output of the root must then be replaced or unread.
      for (ir::ValueId out : g.nodes[root].outputs) {
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
    // A graph output an earlier node defined (minor 7): that node now defines
    // a fresh value its readers read, and the emitted node defines the output.
    for (const auto& [from, to] : rw.replaced) {
      if (of_root(from)) continue;
      const int64_t maker = uses.producer[from];
      ir::ValueId kept = g.add_value(g.values[from].name + "/read");
      g.values[kept].has_type = g.values[from].has_type;
      g.values[kept].type = g.values[from].type;
      uses.grow(g);
      for (ir::ValueId& v : g.nodes[maker].outputs)
        if (v == from) v = kept;
      uses.producer[kept] = maker;
      uses.producer[from] = -1;
      uses.replace(g, from, kept);
    }
    uses.grow(g);
    for (const auto& [from, to] : rw.replaced) {
      if (!uses.is_output[from]) continue;
      for (ir::Node& n : rw.nodes) {
        for (ir::ValueId& v : n.outputs)
          if (v == to) v = from;
        for (ir::ValueId& v : n.inputs)
          if (v == to) v = from;
      }
    }
    // The root's outputs are now defined by emitted nodes (or unread):
    // detach them; erase_dead then erases the root.
    if (defines_output) g.nodes[root].outputs.clear();
    size_t first = g.nodes.size();
    for (ir::Node& n : rw.nodes) g.nodes.push_back(std::move(n));
    order.insert_before(root, first, rw.nodes.size());
    for (size_t n = first; n < g.nodes.size(); ++n) uses.add_node(g, n);
    for (const auto& [from, to] : rw.replaced)
      if (!uses.is_output[from]) uses.replace(g, from, to);
    for (ir::Initializer& init : rw.initializers) {
      uses.initializer.emplace(init.value, g.initializers.size());
      g.initializers.push_back(std::move(init));
    }
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
  ConversionFacts* facts_;  // null: record nothing (the guarantee's scratch runs)
  std::map<std::string, std::vector<const RuleInfo*>> by_root_;
};

}  // namespace

std::unique_ptr<Pass> fuse(std::vector<const RuleInfo*> rules, int64_t opset,
                           const sdk::targets::Profile* target, ConversionFacts* facts) {
  return std::make_unique<Fuse>(std::move(rules), opset, target, facts);
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
