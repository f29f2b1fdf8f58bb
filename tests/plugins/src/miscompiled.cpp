// The "miscompiled" test plugin: a lowering that is deliberately wrong, for
// jaxonnx.first_divergence to find.
//   test.negate(x)  -> Identity(x)   (JAX's impl, defined by the test, negates)
#include <jaxonnx/plugin.hpp>

namespace sdk = jaxonnx::sdk;

namespace {

void same_aval(sdk::AbstractEval& A) {
  if (A.num_inputs() != 1) throw sdk::Error("expects exactly one input");
  A.add_output(A.in_aval(0));
}

void lower_wrongly(sdk::Lowering& L) {
  L.bind(0, L.op("Identity", {L.input(0)}, L.out_aval(0)));
}

}  // namespace

JAXONNX_PLUGIN("test_miscompiled", "0.0.1") {
  plugin.primitive("test.negate", lower_wrongly)
      .emits({"Identity"})
      .summary("claims to negate; lowers to Identity (wrong on purpose)")
      .abstract_eval(same_aval);
}
