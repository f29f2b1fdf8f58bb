// No-op elimination: nodes whose output equals one of their inputs' values.
// Needs: topologically sorted; typed values (as the lowering stamps them,
// JAX's avals), which say when a Reshape, Expand or Squeeze/Unsqueeze chain
// changes nothing.
// Rewrites:
//   Identity(x)                              -> x
//   Cast(x, to=dtype of x)                   -> x
//   Transpose(x, perm=identity)              -> x
//   Expand(x, s) of x's own type             -> x
//   a chain of Reshape/Squeeze/Unsqueeze/Flatten from x back to x's type -> x
//     (these keep row-major order, so equal shapes mean equal tensors;
//      this is how Squeeze/Unsqueeze pairs cancel)
//   Reshape(<any of those>(x), s)            -> Reshape(x, s), s a constant
//     without 0 (a 0 copies a dim of the data input, which would change);
//     with a 0, Reshape(x, s') where s' is the output's type as a constant
//     (-1 for its one symbolic dim, none 0)
// Refuses: a graph output whose replacement is not made by a node of the
// same graph (graph input, initializer, capture, another output): the
// node then stays, since an interface value cannot be renamed.
// Guarantees: none of the above patterns remains where it could be removed:
// no Identity, no same-type Cast, no identity Transpose, no same-type Expand,
// no reshape round trip, no Reshape of a reshape.
#include <algorithm>

#include "jaxonnx/core/passes.hpp"
#include "onnx_ops.hpp"
#include "rewrite.hpp"

namespace jaxonnx::passes {
namespace {

using onnx_ops::Op;

bool identity_perm(const ir::Node& n, const ir::Value& input) {
  const ir::Attribute* perm = attribute(n, "perm");
  if (!perm) return input.has_type && input.type.known_rank && input.type.dims.size() <= 1;
  for (size_t k = 0; k < perm->ints.size(); ++k)
    if (perm->ints[k] != static_cast<int64_t>(k)) return false;
  return true;
}

// How far back a reshape chain is searched for a value of the output's type:
// bounded so a long Squeeze/Unsqueeze chain stays linear.
constexpr int kMaxReshapeHops = 64;

// The value node `k` (Identity, Cast, Transpose or Expand) always equals when
// it is a no-op of its kind, else kNoValue.
ir::ValueId noop_of(const ir::Graph& g, const ir::Node& n, Op kind) {
  if (onnx_ops::kind(n) != kind || n.outputs.size() != 1 || n.inputs.empty() ||
      n.inputs[0] == ir::kNoValue)
    return ir::kNoValue;
  const ir::Value &in = g.values[n.inputs[0]], &out = g.values[n.outputs[0]];
  bool noop = false;
  switch (kind) {
    case Op::Identity: noop = true; break;
    case Op::Cast: {
      const ir::Attribute* to = attribute(n, "to");
      noop = to && in.has_type && to->i == in.type.dtype;
      break;
    }
    case Op::Transpose: noop = identity_perm(n, in); break;
    case Op::Expand: noop = same_type(in, out); break;
    default: break;
  }
  return noop ? n.inputs[0] : ir::kNoValue;
}

// For a reshape `n`: the nearest value back along its chain of reshapes that
// has its output's type (the chain is then a round trip), else kNoValue.
ir::ValueId round_trip_start(const ir::Graph& g, const Uses& uses, const ir::Node& n) {
  if (!onnx_ops::is_layout_preserving_reshape(n) || n.outputs.size() != 1 || n.inputs.empty() ||
      n.inputs[0] == ir::kNoValue)
    return ir::kNoValue;
  const ir::Value& out = g.values[n.outputs[0]];
  ir::ValueId v = n.inputs[0];
  for (int hops = 0; hops < kMaxReshapeHops; ++hops) {
    if (same_type(g.values[v], out)) return v;
    int64_t p = uses.producer[v];
    if (p < 0 || !onnx_ops::is_layout_preserving_reshape(g.nodes[p])) break;
    v = g.nodes[p].inputs[0];
  }
  return ir::kNoValue;
}

// The output type of Reshape node `n` as a constant shape that copies no
// dim of its data input (shape_codes), or empty.
std::vector<int64_t> own_shape(const ir::Graph& g, const ir::Node& n) {
  const ir::Value& out = g.values[n.outputs[0]];
  if (!out.has_type || !out.type.known_rank) return {};
  return shape_codes(out.type.dims);
}

// For Reshape(r(x), s), r a reshape and s a constant: r's node, when s has
// no 0 or the output type gives a shape without one (own_shape; *reshape_to
// receives it then, else stays empty).
int64_t collapsible_reshape(const ir::Graph& g, const Uses& uses, const ir::Node& n,
                            std::vector<int64_t>* reshape_to = nullptr) {
  if (onnx_ops::kind(n) != Op::Reshape || n.inputs.size() != 2 || n.outputs.size() != 1 ||
      n.inputs[0] == ir::kNoValue)
    return -1;
  int64_t p = uses.producer[n.inputs[0]];
  if (p < 0 || !onnx_ops::is_layout_preserving_reshape(g.nodes[p])) return -1;
  const Tensor* shape = uses.constant(g, n.inputs[1]);
  std::vector<int64_t> dims;
  if (!shape || !to_ints(*shape, &dims)) return -1;
  const ir::Attribute* allowzero = attribute(n, "allowzero");
  if ((allowzero && allowzero->i != 0) || std::find(dims.begin(), dims.end(), 0) == dims.end())
    return p;  // no 0, or a 0 that is a 0 rather than a copy
  std::vector<int64_t> own = own_shape(g, n);
  if (own.empty()) return -1;
  if (reshape_to) *reshape_to = std::move(own);
  return p;
}

class NoOpElimination : public Pass {
 public:
  const char* name() const override { return "noop"; }
  Properties needs() const override { return {topologically_sorted(), typed_values()}; }
  Properties guarantees() const override {
    return {no_identity(),           no_same_type_cast(),     no_identity_transpose(),
            no_same_type_expand(),   no_reshape_round_trip(), no_reshape_of_reshape()};
  }

  // One sweep in node (topological) order with the use lists kept current:
  // a node's producers are final when it is reached, so each node is tried
  // until it no longer changes and never again (linear in the graph).
  bool run(ir::Graph& g) override {
    Uses uses(g);
    bool changed = false;
    for (size_t k = 0; k < g.nodes.size(); ++k)
      while (!is_erased(g.nodes[k]) && rewrite_at(g, uses, k)) changed = true;
    erase_marked(g);
    return changed;
  }

 private:
  static bool rewrite_at(ir::Graph& g, Uses& uses, size_t k) {
    const ir::Node& n = g.nodes[k];
    for (Op kind : {Op::Identity, Op::Cast, Op::Transpose, Op::Expand}) {
      ir::ValueId x = noop_of(g, n, kind);
      if (x != ir::kNoValue) return bypass(g, uses, k, x);
    }
    // A round trip through reshapes; else Reshape(reshape(x), s) -> Reshape(x, s).
    ir::ValueId start = round_trip_start(g, uses, n);
    if (start != ir::kNoValue && bypass(g, uses, k, start)) return true;
    std::vector<int64_t> own;
    int64_t p = collapsible_reshape(g, uses, n, &own);
    if (p < 0) return false;
    if (!own.empty())  // the shape copied dims of r's output: spell them out
      uses.set_input(g, k, 1, add_ints(g, g.values[n.outputs[0]].name + "/shape", own, &uses));
    uses.set_input(g, k, 0, g.nodes[p].inputs[0]);
    return true;
  }
};

// "No <kind> no-op that bypass() would remove."
Property no_removable(const char* name, Op kind) {
  return {name, [kind](const ir::Graph& g) -> std::string {
            Uses uses(g);
            for (size_t k = 0; k < g.nodes.size(); ++k) {
              ir::ValueId x = noop_of(g, g.nodes[k], kind);
              if (x != ir::kNoValue && can_bypass(g, uses, k, x))
                return "node #" + std::to_string(k) + " '" + g.nodes[k].name + "' is a no-op";
            }
            return {};
          }};
}

}  // namespace

std::unique_ptr<Pass> no_op_elimination() { return std::make_unique<NoOpElimination>(); }

Property no_identity() { return no_removable("no Identity", Op::Identity); }
Property no_same_type_cast() { return no_removable("no same-type Cast", Op::Cast); }
Property no_identity_transpose() { return no_removable("no identity Transpose", Op::Transpose); }
Property no_same_type_expand() { return no_removable("no same-type Expand", Op::Expand); }

Property no_reshape_round_trip() {
  return {"no reshape round trip", [](const ir::Graph& g) -> std::string {
            Uses uses(g);
            for (size_t k = 0; k < g.nodes.size(); ++k) {
              ir::ValueId start = round_trip_start(g, uses, g.nodes[k]);
              if (start != ir::kNoValue && can_bypass(g, uses, k, start))
                return "node #" + std::to_string(k) + " '" + g.nodes[k].name +
                       "' reshapes '" + g.values[start].name + "' back to its own type";
            }
            return {};
          }};
}

Property no_reshape_of_reshape() {
  return {"no Reshape of a reshape", [](const ir::Graph& g) -> std::string {
            Uses uses(g);
            for (size_t k = 0; k < g.nodes.size(); ++k)
              if (int64_t p = collapsible_reshape(g, uses, g.nodes[k]); p >= 0)
                return "node #" + std::to_string(k) + " '" + g.nodes[k].name + "' reshapes the "
                       "output of node #" + std::to_string(p) + " '" + g.nodes[p].name + "'";
            return {};
          }};
}

}  // namespace jaxonnx::passes
