// call: primitives that only wrap a nested jaxpr — jit, closed calls,
// custom derivatives, rematerialization. For export they are transparent:
// the nested jaxpr is lowered inline with the equation's inputs and its
// outputs become the equation's outputs, so no ONNX node is emitted here
// (the nested equations emit their own).
//
// The rules (custom_jvp / custom_vjp), policies (remat) and shardings
// (jit) only matter for differentiation or placement, which an exported
// inference graph does not do.
//
// The same goes for the value-preserving markers optimization_barrier,
// device_put (placement / scheduling hints; sharding annotations are
// lax_sharding's), name (checkpoint_name, a remat tag) and tie(x, y) = y:
// each output is bound to its input, no node. (The core adds an Identity
// only where such a value is itself a graph output.) empty /
// empty2 make uninitialized arrays; XLA's CPU backend fills them with zeros,
// and so do we (ConstantOfShape, symbolic dims computed at runtime).
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

// n operands -> the same n values.
void lower_passthrough(Lowering& L) {
  if (L.num_inputs() != L.num_outputs())
    L.fail(std::string(L.primitive()) + ": " + std::to_string(L.num_inputs()) + " operands but " +
           std::to_string(L.num_outputs()) + " results");
  for (size_t i = 0; i < L.num_inputs(); ++i) L.bind(i, L.input(i));
}

// tie(x, y) -> y: orders x before y for the compiler; the value is y.
void lower_tie(Lowering& L) { L.bind(0, L.input(L.num_inputs() - 1)); }

// empty(shape, dtype) / empty2(dtype): zeros of the output aval.
void lower_empty(Lowering& L) {
  Aval out = L.out_aval(0);
  // onnxruntime's ConstantOfShape has no bfloat16: fill float32 and Cast.
  int32_t fill = out.dtype == dtype::bf16 ? dtype::f32 : out.dtype;
  std::vector<char> zero(dtype::itemsize(fill), 0);
  Value z = L.op("ConstantOfShape", {shape_value(L, out.shape)}, out.with_dtype(fill),
                 {Attr::tensor("value", fill, {1}, zero.data(), zero.size())});
  L.bind(0, cast(L, z, out.with_dtype(fill), out.dtype));
}

}  // namespace

JAXONNX_PLUGIN("call", "0.1.0") {
  for (const CallPrimitive& c : kCalls) {
    const char* param = c.jaxpr_param;
    plugin.primitive(c.primitive, [param](Lowering& L) { lower_inline(L, param); })
        .emits({})
        .summary(c.summary);
  }
  // name: jax.ad_checkpoint.checkpoint_name, a tag for remat policies.
  for (const char* p : {"optimization_barrier", "device_put", "name"}) {
    plugin.primitive(p, lower_passthrough).emits({}).summary("binds each operand to its result: no node");
  }
  plugin.primitive("tie", lower_tie).emits({}).summary("tie(x, y) is y: no node");
  for (const char* p : {"empty", "empty2"}) {
    plugin.primitive(p, lower_empty)
        .emits({"ConstantOfShape", "Cast"})
        .emits_shape_ops()
        .doc(onnx_doc("ConstantOfShape"))
        .summary("uninitialized in JAX; zeros here, as on XLA's CPU backend");
  }
}
