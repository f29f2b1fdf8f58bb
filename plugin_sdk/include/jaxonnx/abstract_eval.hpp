// jaxonnx plugin SDK: AbstractEval, the context of a primitive's abstract
// evaluation (avals and params in, output avals out), which gives JAX the
// shapes of a primitive that only a plugin defines.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "jaxonnx/param.hpp"
#include "jaxonnx/plugin_abi.h"
#include "jaxonnx/types.hpp"

namespace jaxonnx::sdk {

// One abstract evaluation: avals in, avals out.
class AbstractEval {
 public:
  AbstractEval(const jxo_api* api, jxo_abstract_eval* ctx) : api_(api), ctx_(ctx) {}
  size_t num_inputs() const { return api_->ae_num_inputs(ctx_); }
  Aval in_aval(size_t i) const {
    const jxo_aval* a = api_->ae_input_aval(ctx_, i);
    if (!a) throw Error("no input " + std::to_string(i));
    return Aval::from(a);
  }
  Param params() const { return Param(api_, api_->ae_params(ctx_), "params"); }
  Param param(std::string_view name) const { return params().field(name); }
  void add_output(const Aval& a) {
    detail::AvalView v(a);
    detail::check(api_, api_->ae_add_output(ctx_, &v.aval));
  }

 private:
  const jxo_api* api_;
  jxo_abstract_eval* ctx_;
};

using AbstractEvalFn = std::function<void(AbstractEval&)>;

}  // namespace jaxonnx::sdk
