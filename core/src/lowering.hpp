// Private: the lowering state shared by the driver (lowering.cpp) and the
// host function table (host_api.cpp).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "jaxonnx/core/convert_options.hpp"
#include "jaxonnx/core/ir.hpp"
#include "jaxonnx/core/jaxpr.hpp"
#include "jaxonnx/core/plugin_host.hpp"
#include "jaxonnx/targets.hpp"
#include "jaxonnx/core/error.hpp"
#include "status.hpp"

namespace jaxonnx {

class Lowering;

// The var -> value bindings of one jaxpr activation. Values are conversion-
// wide handles (jxo_value), not ir::ValueIds: see Lowering::Handle.
struct Scope {
  std::unordered_map<int64_t, ir::ValueId> env;
  const std::unordered_set<int64_t>* reads = nullptr;  // vars the jaxpr reads
};

// One graph of the model under construction: the main graph, a subgraph
// (an If branch, a Loop body) or a function body. Scopes form a stack while
// open. A function body has no parent: it sees no outer value.
struct GraphScope {
  std::shared_ptr<ir::Graph> owned;  // null for the main graph
  ir::Graph* graph = nullptr;
  GraphScope* parent = nullptr;
  bool function = false;             // a function body (ir::Function)
  const void* opener = nullptr;      // the jxo_lowering that opened it
  bool open = true;
  bool used = false;                 // its jxo_graph handle was consumed
  std::map<std::string, ir::ValueId> memo;        // key -> handle
  std::map<ir::ValueId, ir::ValueId> captured;    // outer handle -> local id
};

class Lowering {
 public:
  Lowering(const Registry& registry, const ConvertOptions& options);

  ir::Model run(const ClosedJaxpr& program);

  // Services the host table forwards to. Every ir::ValueId these take or
  // return is a handle unless it says `local`.
  ir::ValueId new_value(const std::string& hint, const Aval* type);
  // Where a handle lives: its scope and its id in that scope's graph.
  struct Handle {
    GraphScope* scope;
    ir::ValueId local;
  };
  bool valid(ir::ValueId h) const { return h >= 0 && static_cast<size_t>(h) < handles_.size(); }
  ir::Value& value(ir::ValueId h) { return handles_[h].scope->graph->values[handles_[h].local]; }
  GraphScope* scope_of(ir::ValueId h) const { return handles_[h].scope; }
  // The local id of handle `h` in the innermost scope, capturing it through
  // every enclosing scope in between. Throws for a value of a closed scope.
  ir::ValueId use(ir::ValueId h) { return use_in(h, current()); }
  ir::ValueId use_in(ir::ValueId h, GraphScope* s);
  // The scope `h` lives in is the innermost one or encloses it.
  bool visible(ir::ValueId h) const;
  GraphScope* current() const { return open_.back(); }
  GraphScope* root() const { return open_.front(); }
  // The main graph or function body the current scope lies in: where
  // constants go and where symbolic dims are found.
  GraphScope* boundary() const;
  GraphScope* begin_graph(const std::string& name, const void* opener);
  // Closes the innermost scope with `outputs` (handles).
  GraphScope* end_graph(const std::vector<ir::ValueId>& outputs, Scope& env);
  // Closes scopes a lowering left open; returns how many.
  size_t close_abandoned(size_t depth);
  size_t depth() const { return open_.size(); }
  GraphScope* find_graph(const void* handle) const;
  std::string scope_name(const GraphScope* s) const;
  ir::ValueId add_input(const std::string& hint, const Aval& type);
  ir::ValueId constant(std::shared_ptr<const Tensor> tensor, const std::string& hint);
  ir::ValueId atom_value(const Atom& atom, const Scope& scope);
  // Binds output i of `eqn` to handle `v` after checking it against JAX's
  // aval (throws InvalidArgument).
  void bind_output(const Eqn& eqn, Scope& scope, size_t i, ir::ValueId v);
  // The memo of the open scopes: lookups walk outward (kNoValue if absent);
  // stores go to the innermost scope and ignore a value not visible there.
  ir::ValueId memo_get(const std::string& key) const;
  void memo_put(const std::string& key, ir::ValueId v);
  std::vector<ir::ValueId> lower_closed(const ClosedJaxpr& j, const std::vector<ir::ValueId>& ins);
  std::string unique_name(const std::string& hint);
  std::string describe(const Eqn& eqn) const;  // "(inputs: ...) at file:line"
  void stamp_provenance(const Eqn& eqn, const LoadedPlugin& plugin, ir::Graph& graph, size_t first);

  ir::Model model;
  std::map<std::string, std::pair<ir::ValueId, int64_t>> symbol_origins;
  const sdk::targets::Profile& target;  // options.target's profile
  // Each output a widened node cast back (node_builder.cpp), by handle: the
  // wide value it was cast from, which a next widened node reads instead of
  // casting the narrow value up again.
  std::map<ir::ValueId, ir::ValueId> narrowed;
  // Where the conversion report's facts go (ConvertOptions::facts), or null.
  ConversionFacts* facts() const { return options_.facts; }

 private:
  void lower_eqn(const Eqn& eqn, Scope& scope);  // throws EquationError
  void lower_eqn_unchecked(const Eqn& eqn, Scope& scope);
  // An `onnx_fn::` equation (function_lowering.cpp): the body once per key
  // into model.functions, then a call-site node.
  void lower_function_call(const Eqn& eqn, Scope& scope);
  std::vector<std::pair<std::string, ir::ValueId>> function_symbol_sources(const Eqn& eqn);
  size_t lower_function_body(const Eqn& eqn, const std::string& key,
                             const std::vector<std::pair<std::string, ir::ValueId>>& sources);
  void bind_outputs(const Jaxpr& jaxpr, Scope& scope);
  ir::ValueId add_local(GraphScope* s, const std::string& name, const Aval* type);
  ir::ValueId copy_value(ir::ValueId h, Scope& env, int64_t salt);

  const std::unordered_set<int64_t>* reads_of(const Jaxpr& j);

  std::map<const Jaxpr*, std::unordered_set<int64_t>> reads_;
  std::vector<Handle> handles_;
  std::vector<std::unique_ptr<GraphScope>> scopes_;  // every scope of the conversion
  std::vector<GraphScope*> open_;                    // the open stack, main graph first
  int64_t copies_ = 0;                               // synthetic copy equations made

  const Registry& registry_;
  const ConvertOptions& options_;
  std::map<std::string, int64_t> name_counts_;
  std::unordered_set<std::string> taken_names_;
  std::vector<std::string> output_names_;
  std::map<std::string, ir::ValueId> literal_cache_;  // of the current boundary
  std::map<const Tensor*, ir::ValueId> const_cache_;  // of the current boundary
  std::map<std::string, size_t> function_index_;      // function key -> model.functions
  std::map<std::string, int64_t> function_names_;     // domain + base name -> definitions
  std::set<std::string> function_taken_;              // domain + name of each definition
  std::map<const ClosedJaxpr*, std::set<std::string>> body_symbols_;  // symbols a body needs
};

}  // namespace jaxonnx

// The opaque ABI handles, defined host-side.
struct jxo_lowering {
  jaxonnx::Lowering* lowering;
  jaxonnx::Scope* scope;
  const jaxonnx::Eqn* eqn;
  const jaxonnx::PrimitiveInfo* prim;
};

struct jxo_abstract_eval {
  const std::vector<jaxonnx::Aval>* inputs;
  const jaxonnx::Param* params;
  std::vector<jaxonnx::Aval> outputs;
};
