// Built twice (dup_a, dup_b) into one folder: both claim test.identity.
#include <jaxonnx/plugin.hpp>

#ifndef JXO_TEST_DUP_NAME
#error "define JXO_TEST_DUP_NAME"
#endif

namespace sdk = jaxonnx::sdk;

JAXONNX_PLUGIN(JXO_TEST_DUP_NAME, "0.0.1") {
  plugin.primitive("test.identity", [](sdk::Lowering& L) {
          L.bind(0, L.op("Identity", {L.input(0)}, L.out_aval(0)));
        })
      .emits({"Identity"})
      .abstract_eval([](sdk::AbstractEval& A) { A.add_output(A.in_aval(0)); });
}
