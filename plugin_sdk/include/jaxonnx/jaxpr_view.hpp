// jaxonnx plugin SDK: JaxprView, a read-only view of a nested closed jaxpr (a
// loop body, a branch, a reduction's combiner): its avals, which outputs pass
// inputs through or depend on them, and its equations (ABI 1.1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "jaxonnx/param.hpp"
#include "jaxonnx/plugin_abi.h"
#include "jaxonnx/types.hpp"

namespace jaxonnx::sdk {

// A read-only view of a nested closed jaxpr (ABI 1.1 introspection).
class JaxprView {
 public:
  JaxprView(const jxo_api* api, const jxo_jaxpr* j) : api_(api), j_(j) {
    if (!JXO_HAS_FIELD(api_, jxo_api, jaxpr_output_eqn))
      throw Error("this host does not serve jaxpr introspection (jaxonnx ABI 1.1)");
    if (!j_) throw Error("no jaxpr");
  }
  const jxo_jaxpr* get() const { return j_; }
  size_t num_inputs() const { return api_->jaxpr_num_inputs(j_); }
  size_t num_outputs() const { return api_->jaxpr_num_outputs(j_); }
  Aval in_aval(size_t i) const { return Aval::from(api_->jaxpr_input_aval(j_, i)); }
  Aval out_aval(size_t i) const { return Aval::from(api_->jaxpr_output_aval(j_, i)); }
  // The invar index outvar i is directly, or -1.
  int64_t output_source(size_t i) const { return api_->jaxpr_output_source(j_, i); }
  // Whether outvar `out` may depend on invar `in`.
  bool depends(size_t out, size_t in) const { return api_->jaxpr_depends(j_, out, in) != 0; }

  // The equations, in order.
  size_t num_eqns() const { return api_->jaxpr_num_eqns(j_); }
  std::string_view eqn_primitive(size_t k) const { return from_jxo(api_->jaxpr_eqn_primitive(j_, k)); }
  Param eqn_params(size_t k) const {
    return Param(api_, api_->jaxpr_eqn_params(j_, k), "eqn " + std::to_string(k) + " params");
  }
  size_t eqn_num_inputs(size_t k) const { return api_->jaxpr_eqn_num_inputs(j_, k); }
  // The invar index input i of equation k is directly, or -1.
  int64_t eqn_input_source(size_t k, size_t i) const { return api_->jaxpr_eqn_input_source(j_, k, i); }
  // The equation producing outvar i, or -1.
  int64_t output_eqn(size_t i) const { return api_->jaxpr_output_eqn(j_, i); }

  // The primitive combining accumulator and element in a reduction body
  // (lax.reduce, reduce_window): outvar k is one two-input equation over
  // invars k and n + k, in either order. Empty when it is anything else.
  std::string_view combiner(size_t k, size_t n) const {
    int64_t e = output_eqn(k);
    if (e < 0 || eqn_num_inputs(e) != 2) return {};
    int64_t a = eqn_input_source(e, 0), b = eqn_input_source(e, 1);
    const int64_t acc = static_cast<int64_t>(k), elem = static_cast<int64_t>(n + k);
    bool wired = (a == acc && b == elem) || (a == elem && b == acc);
    return wired ? eqn_primitive(e) : std::string_view();
  }

 private:
  const jxo_api* api_;
  const jxo_jaxpr* j_;
};

}  // namespace jaxonnx::sdk
