// Checkable statements about one graph: what an optimizer pass needs before
// it runs and guarantees after (Pass::needs / Pass::guarantees). When the IR
// verifier is on (passes::verify_enabled), the pass manager checks a pass's
// needs on every graph before it runs and its guarantees on every graph after,
// and names the pass and the property that failed.
//
// A property looks at one graph, not its subgraphs (the manager visits those,
// as it does for the passes). Structural properties (order, liveness) know no
// op; those about ops ask core/src/passes/onnx_ops.cpp by trait or, when a
// property states that a pass's own rewrite finds nothing more to do, share
// that pass's matcher, so the two cannot drift apart.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "jaxonnx/core/ir.hpp"

namespace jaxonnx {
struct RuleInfo;
}
namespace jaxonnx::sdk::targets {
struct Profile;
}

namespace jaxonnx::passes {

struct Property {
  std::string name;  // "no dead nodes": read in messages, dumps and docs/optimizer.md
  // Empty when the property holds in `graph`, else its first violation
  // ("node #4 Add 'add_2' is dead").
  std::function<std::string(const ir::Graph& graph)> violation;
};
using Properties = std::vector<Property>;

// Structural (properties.cpp).
Property topologically_sorted();   // every node input defined by an earlier node or the graph
Property typed_values();           // every value read or defined has a dtype
Property no_dead_nodes();          // every node has an output a graph output depends on
Property no_unread_initializers();
Property no_unread_captures();
// No node calls one of `functions` (they must outlive the property).
Property no_function_calls(const std::vector<ir::Function>& functions);

// No-op elimination's (noop.cpp): none of these remains where the pass could
// remove it (an interface value it cannot rename keeps its node).
Property no_identity();                // Identity
Property no_same_type_cast();          // Cast to its input's dtype
Property no_identity_transpose();      // Transpose with the identity permutation
Property no_same_type_expand();        // Expand to its input's type
Property no_reshape_round_trip();      // a reshape chain that ends at its start's type
Property no_reshape_of_reshape();      // Reshape (constant shape: no 0, or one its type spells out) reading a reshape

// Transpose folding's (transpose.cpp).
Property no_cancelling_transposes();   // Transpose pairs (across elementwise ops) to merge
Property no_transposes_to_sink();      // elementwise binary op of two equal Transposes
Property no_cast_of_bool_transpose();  // Cast reading a Transpose of bool
Property no_transpose_before_squeeze();  // Squeeze, or Reshape dropping 1s, of a Transpose only it reads

// Constant folding's (fold_constants.cpp).
Property no_foldable_constants();      // within the pass's size caps

// Deduplication's (cse.cpp).
Property no_duplicate_initializers();
Property no_common_subexpressions();   // deterministic default-domain nodes

// Token rows' (rows.cpp).
Property no_rows_to_flatten(int64_t opset);  // a row-wise region with a MatMul still [d0, ..., X]

// The fuse pass's (fuse.cpp): no rule of `rules` applies anywhere.
Property no_rule_matches(std::vector<const RuleInfo*> rules, int64_t opset,
                         const sdk::targets::Profile* target = nullptr);

// The first violated property of `properties` in `graph`: "'no dead nodes':
// node #4 ...", or empty.
std::string first_violation(const Properties& properties, const ir::Graph& graph);

// Names joined by "; " (dumps, docs).
std::string names(const Properties& properties);

}  // namespace jaxonnx::passes
