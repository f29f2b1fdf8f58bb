// call: primitives that only wrap a nested jaxpr — jit, closed calls,
// custom derivatives, rematerialization. For export they are transparent:
// the nested jaxpr is lowered inline with the equation's inputs and its
// outputs become the equation's outputs, so no ONNX node is emitted here
// (the nested equations emit their own).
//
// The rules (custom_jvp / custom_vjp), policies (remat) and shardings
// (jit) only matter for differentiation or placement, which an exported
// inference graph does not do.
#include <jaxonnx/plugin.hpp>

#include <string>

namespace {

using namespace jaxonnx::sdk;

// Inlines the jaxpr held by param `name` (a ClosedJaxpr or an open Jaxpr).
// Its invars take the equation's inputs in order; for custom_jvp_call and
// custom_vjp_call the first `num_consts` inputs are constants that the
// jaxpr takes as leading invars too.
void lower_inline(Lowering& L, const char* name) {
  const jxo_jaxpr* jaxpr = L.param(name).as_jaxpr();
  size_t expected = L.api()->jaxpr_num_inputs(jaxpr);
  if (expected != L.num_inputs())
    L.fail("param '" + std::string(name) + "' takes " + std::to_string(expected) + " inputs, the equation has " +
           std::to_string(L.num_inputs()));
  std::vector<Value> outs = L.inline_jaxpr(jaxpr, L.inputs());
  if (outs.size() != L.num_outputs())
    L.fail("param '" + std::string(name) + "' gives " + std::to_string(outs.size()) + " outputs, the equation has " +
           std::to_string(L.num_outputs()));
  for (size_t i = 0; i < outs.size(); ++i) L.bind(i, outs[i]);
}

struct CallPrimitive {
  const char* primitive;
  const char* jaxpr_param;
  const char* summary;
};

constexpr CallPrimitive kCalls[] = {
    {"jit", "jaxpr", "jax.jit: inlined"},
    {"pjit", "jaxpr", "jax.jit in older JAX: inlined"},
    {"closed_call", "call_jaxpr", "inlined"},
    {"call", "call_jaxpr", "jax.core.call_p: inlined"},
    {"core_call", "call_jaxpr", "jax.core.call_p in older JAX: inlined"},
    {"custom_jvp_call", "call_jaxpr", "the primal jaxpr, inlined; the JVP rule is dropped"},
    {"custom_vjp_call", "call_jaxpr", "the primal jaxpr, inlined; the fwd/bwd rules are dropped"},
    {"remat2", "jaxpr", "jax.checkpoint / jax.remat: inlined"},
};

}  // namespace

JAXONNX_PLUGIN("call", "0.1.0") {
  for (const CallPrimitive& c : kCalls) {
    const char* param = c.jaxpr_param;
    plugin.primitive(c.primitive, [param](Lowering& L) { lower_inline(L, param); })
        .emits({})
        .summary(c.summary);
  }
}
