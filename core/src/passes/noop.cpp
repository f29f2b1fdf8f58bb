// No-op elimination: nodes whose output equals one of their inputs' values.
// Needs: value types as the lowering stamps them (JAX's avals), which say
// when a Reshape, Expand or Squeeze/Unsqueeze chain changes nothing.
// Rewrites:
//   Identity(x)                              -> x
//   Cast(x, to=dtype of x)                   -> x
//   Transpose(x, perm=identity)              -> x
//   Expand(x, s) of x's own type             -> x
//   a chain of Reshape/Squeeze/Unsqueeze/Flatten from x back to x's type -> x
//     (these keep row-major order, so equal shapes mean equal tensors;
//      this is how Squeeze/Unsqueeze pairs cancel)
//   Reshape(<any of those>(x), s)            -> Reshape(x, s), s a constant
//     without 0 (a 0 copies a dim of the data input, which would change)
// Refuses: a graph output whose replacement is not made by a node of the
// same graph (graph input, initializer, capture, another output): the
// node then stays, since an interface value cannot be renamed.
// Guarantees: none of the above patterns remains where it could be removed.
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

class NoOpElimination : public Pass {
 public:
  const char* name() const override { return "noop"; }
  const char* needs() const override { return "value types are JAX's avals"; }
  const char* guarantees() const override {
    return "no Identity, same-type Cast/Expand, identity Transpose, or shape-preserving "
           "reshape chain that could be bypassed; Reshape reads past other reshapes";
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
  // How far back a reshape chain is searched for a value of the output's
  // type: bounded so a long Squeeze/Unsqueeze chain stays linear.
  static constexpr int kMaxReshapeHops = 64;

  static bool rewrite_at(ir::Graph& g, Uses& uses, size_t k) {
    ir::Node& n = g.nodes[k];
    if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0] == ir::kNoValue) return false;
    ir::ValueId x = n.inputs[0], y = n.outputs[0];
    const ir::Value &in = g.values[x], &out = g.values[y];
    switch (onnx_ops::kind(n)) {
      case Op::Identity:
        if (bypass(g, uses, k, x)) return true;
        break;
      case Op::Cast: {
        const ir::Attribute* to = attribute(n, "to");
        if (to && in.has_type && to->i == in.type.dtype && bypass(g, uses, k, x)) return true;
        break;
      }
      case Op::Transpose:
        if (identity_perm(n, in) && bypass(g, uses, k, x)) return true;
        break;
      case Op::Expand:
        if (same_type(in, out) && bypass(g, uses, k, x)) return true;
        break;
      default:
        break;
    }
    if (!onnx_ops::is_layout_preserving_reshape(n)) return false;
    // Walk back through reshapes to a value of the output's type.
    ir::ValueId v = x;
    for (int hops = 0; hops < kMaxReshapeHops; ++hops) {
      if (same_type(g.values[v], out)) {
        if (bypass(g, uses, k, v)) return true;
        break;
      }
      int64_t p = uses.producer[v];
      if (p < 0 || !onnx_ops::is_layout_preserving_reshape(g.nodes[p])) break;
      v = g.nodes[p].inputs[0];
    }
    // Reshape(reshape(x), s) -> Reshape(x, s).
    int64_t p = uses.producer[x];
    if (onnx_ops::kind(n) == Op::Reshape && n.inputs.size() == 2 && p >= 0 &&
        onnx_ops::is_layout_preserving_reshape(g.nodes[p])) {
      const Tensor* shape = uses.constant(g, n.inputs[1]);
      std::vector<int64_t> dims;
      if (!shape || !to_ints(*shape, &dims)) return false;
      for (int64_t d : dims)
        if (d == 0) return false;
      uses.set_input(g, k, 0, g.nodes[p].inputs[0]);
      return true;
    }
    return false;
  }
};

}  // namespace

std::unique_ptr<Pass> no_op_elimination() { return std::make_unique<NoOpElimination>(); }

}  // namespace jaxonnx::passes
