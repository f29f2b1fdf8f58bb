// Private: the lowering state shared by the driver (lowering.cpp) and the
// host function table (host_api.cpp).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "jaxonnx/core/converter.hpp"
#include "jaxonnx/core/error.hpp"

namespace jaxonnx {

class Converter;

// The var -> value bindings of one jaxpr activation.
struct Scope {
  std::unordered_map<int64_t, ir::ValueId> env;
};

class Converter {
 public:
  Converter(const Registry& registry, const ConvertOptions& options);

  ir::Model run(const ClosedJaxpr& program);

  // Services the host table forwards to.
  ir::ValueId new_value(const std::string& hint, const Aval* type);
  ir::ValueId constant(std::shared_ptr<const Tensor> tensor, const std::string& hint);
  ir::ValueId atom_value(const Atom& atom, const Scope& scope);
  std::vector<ir::ValueId> lower_closed(const ClosedJaxpr& j, const std::vector<ir::ValueId>& ins);
  std::string unique_name(const std::string& hint);
  std::string describe(const Eqn& eqn) const;  // "(inputs: ...) at file:line"

  ir::Model model;
  std::map<std::string, std::pair<ir::ValueId, int64_t>> symbol_origins;
  std::map<std::string, ir::ValueId> memo;
  // An error raised inside a nested lowering, re-raised as-is when the
  // plugin that asked for the nesting gives up.
  std::optional<ConversionError> pending;

 private:
  void lower_eqn(const Eqn& eqn, Scope& scope);
  void bind_outputs(const Jaxpr& jaxpr, Scope& scope);

  const Registry& registry_;
  const ConvertOptions& options_;
  std::map<std::string, int64_t> name_counts_;
  std::vector<std::string> output_names_;
  std::map<std::string, ir::ValueId> literal_cache_;
  std::map<const Tensor*, ir::ValueId> const_cache_;
};

}  // namespace jaxonnx

// The opaque ABI handles, defined host-side.
struct jxo_lowering {
  jaxonnx::Converter* conv;
  jaxonnx::Scope* scope;
  const jaxonnx::Eqn* eqn;
  const jaxonnx::PrimitiveInfo* prim;
};

struct jxo_abstract_eval {
  const std::vector<jaxonnx::Aval>* inputs;
  const jaxonnx::Param* params;
  std::vector<jaxonnx::Aval> outputs;
};

struct jxo_status {
  std::string message;
};
