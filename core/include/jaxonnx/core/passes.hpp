// Structure-only IR passes and the manager that runs them.
//
// A pass rewrites one ir::Graph. It knows no plugin; the little ONNX op
// knowledge passes need (which ops are elementwise, which are no-ops under
// what condition) lives in one table, core/src/passes/onnx_ops.cpp.
//
// Every pass relies on, and preserves, the IR invariants the lowering
// establishes:
//   - nodes are in topological order;
//   - every value is defined once (graph input, initializer, node output, or a
//     capture in a subgraph);
//   - graph inputs and outputs keep their values and names (a pass never
//     removes, renames or retypes an interface value);
//   - a node holding a subgraph reads every captured outer value.
// and a pass never changes what the model computes.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "jaxonnx/core/conversion_facts.hpp"
#include "jaxonnx/core/ir.hpp"
#include "jaxonnx/core/properties.hpp"  // also declares RuleInfo and targets::Profile

namespace jaxonnx::passes {

class Pass {
 public:
  virtual ~Pass() = default;
  // A short identifier, used in dump file names ("dce", "transpose", ...).
  virtual const char* name() const = 0;
  // What the pass relies on beyond the invariants above, and what holds in
  // every graph it ran on afterwards, as checkable properties
  // (properties.hpp). When the IR verifier is on, the manager checks needs()
  // on every graph before the pass runs and guarantees() after, naming the
  // pass and the property that does not hold; dumps and docs/optimizer.md
  // print their names.
  virtual Properties needs() const = 0;
  virtual Properties guarantees() const = 0;
  // Rewrites `graph` (not its subgraphs: the manager visits those). Returns
  // whether anything changed.
  virtual bool run(ir::Graph& graph) = 0;
};

using Pipeline = std::vector<std::unique_ptr<Pass>>;

// One pass each; default_pipeline() is all of them in the order they help
// each other most (cheap cancellations first, cleanup last).
std::unique_ptr<Pass> no_op_elimination();
std::unique_ptr<Pass> transpose_folding();
std::unique_ptr<Pass> constant_folding();
std::unique_ptr<Pass> deduplication();
// Token rows for a model of `opset` (a runtime shape needs Reshape's
// allowzero, opset 14); see rows.cpp.
std::unique_ptr<Pass> token_rows(int64_t opset = 23);
std::unique_ptr<Pass> dead_code_elimination();
Pipeline default_pipeline(int64_t opset = 23);
// Applies plugins' rewrite rules (ABI 1.2) for the target `opset` and
// profile (null: onnxruntime's, which lacks no op and runs no other domain); see fuse.cpp.
// `facts`, when set, receives the rules applied and their questions to the target.
std::unique_ptr<Pass> fuse(std::vector<const RuleInfo*> rules, int64_t opset,
                           const sdk::targets::Profile* target = nullptr,
                           ConversionFacts* facts = nullptr);
// Replaces every call of one of `functions` (which must outlive the pass) by
// a copy of the callee's body; see inline_functions below.
std::unique_ptr<Pass> inlining(const std::vector<ir::Function>& functions);
// Every pass, for documentation: the default pipeline, fuse (without rules)
// and inlining (without functions).
Pipeline all_passes();

struct ManagerOptions {
  // A round runs every pass once over every graph; rounds repeat until no
  // pass changes anything, at most this many times.
  int max_rounds = 8;
  // When non-empty, the folder receives NNN_r<round>_{before,after}_<pass>.txt
  // with the model's graph printed by ir::to_text around every pass run.
  std::string dump_dir;
  // When set, receives each pass's seconds, summed over rounds and graphs.
  std::vector<std::pair<std::string, double>>* pass_seconds = nullptr;
  // When set, called before every pass run; it may throw to stop.
  std::function<void()> poll;
  // Plugins' rewrite rules: when any, optimize() runs the fuse pass before dce.
  std::vector<const RuleInfo*> rules;
  // The target profile the rules ask about (rw_target_supports); null: all.
  const sdk::targets::Profile* target = nullptr;
  // When set, receives the rules applied, their questions to the target and
  // the nodes each pass removed (pass_nodes_removed; a count per pass run).
  ConversionFacts* facts = nullptr;
};

class PassManager {
 public:
  PassManager(Pipeline pipeline, ManagerOptions options = {});
  // Runs the pipeline to a fixed point over `graph` and every graph nested in
  // its nodes' subgraph attributes (innermost first, so a subgraph that stops
  // capturing a value frees it before its parent is cleaned). Nodes of other
  // domains, such as function call sites, are opaque to every pass. Returns
  // the number of rounds run.
  int run(ir::Graph& graph);

 private:
  Pipeline pipeline_;
  ManagerOptions options_;
  int dumps_ = 0;
};

// Checks the IR invariants above (and that attributes are well formed and
// elementwise ops' declared shapes follow from their inputs') over `graph`
// and its subgraphs; throws ConversionError naming `where` ("after lowering",
// "after pass 'cse'") on the first violation.
void verify(const ir::Graph& graph, const std::string& where);
// Whether conversions verify the IR after lowering and after every pass:
// always in debug builds, else when JAXONNX_VERIFY_IR is set (the test suite
// sets it).
bool verify_enabled();

// The default pipeline over every function body and the model's graph.
void optimize(ir::Model& model, const ManagerOptions& options = {});

// Opt-in (ConvertOptions::inline_functions): runs the inlining pass over the
// function bodies (callees first) and the main graph, then drops the
// functions no call reaches any more: all of them (passes/inline.cpp).
void inline_functions(ir::Model& model);

}  // namespace jaxonnx::passes
