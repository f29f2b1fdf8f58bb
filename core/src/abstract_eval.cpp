// Drives a primitive's abstract-eval callback: the avals in, the host table,
// and what the callback added (or its failure, named) out.
#include "jaxonnx/core/abstract_eval.hpp"

#include <optional>
#include <string>

#include "jaxonnx/core/error.hpp"
#include "lowering.hpp"
#include "plugin_call.hpp"

namespace jaxonnx {

std::vector<Aval> abstract_eval(const PrimitiveInfo& prim, const std::vector<Aval>& inputs,
                                const Param& params) {
  if (!prim.abstract_eval)
    throw ConversionError("plugin '" + prim.plugin->name + "' declares no abstract eval for '" +
                          prim.name + "'");
  jxo_abstract_eval ctx{&inputs, &params, {}};
  std::optional<Failure> failure = call_plugin("abstract_eval", prim.plugin->name, prim.name, [&] {
    return prim.abstract_eval(host_api(), &ctx, prim.user_data);
  });
  if (failure) {
    std::string avals;
    for (size_t i = 0; i < inputs.size(); ++i) avals += (i ? ", " : "") + inputs[i].str();
    throw ConversionError("plugin '" + prim.plugin->name + "' failed the abstract eval of '" +
                          prim.name + "' (inputs: " + avals + "): " + failure->message);
  }
  return std::move(ctx.outputs);
}

}  // namespace jaxonnx
