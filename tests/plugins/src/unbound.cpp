// test.unbound emits a node but never binds its output.
#include <jaxonnx/plugin.hpp>

namespace sdk = jaxonnx::sdk;

JAXONNX_PLUGIN("test_unbound", "0.1.0") {
  plugin.primitive("test.unbound", [](sdk::Lowering& L) {
          (void)L.op("Identity", {L.input(0)}, L.out_aval(0));  // and forgets to bind it
        })
      .emits({"Identity"})
      .abstract_eval([](sdk::AbstractEval& A) { A.add_output(A.in_aval(0)); });
}
