// A plugin that loads fine but whose lowering of test.abort aborts (SIGABRT),
// on the test equation it declares. test.passes, declared first, passes its
// test equation, and test.declines fails its with an error status (a bug the
// preflight reports, but no reason to keep the plugin out). Built with
// JXO_TEST_NO_ABORT it is the "declining" plugin: the first two only.
#include <cstdlib>

#include <jaxonnx/plugin.hpp>

namespace sdk = jaxonnx::sdk;

namespace {

void same_aval(sdk::AbstractEval& A) { A.add_output(A.in_aval(0)); }

void lower_identity(sdk::Lowering& L) {
  L.bind(0, L.op("Identity", {L.input(0)}, L.out_aval(0)));
}

void lower_declines(sdk::Lowering&) { throw sdk::Error("test.declines: declining on purpose"); }

void lower_abort(sdk::Lowering&) { std::abort(); }

}  // namespace

#ifdef JXO_TEST_NO_ABORT
#define JXO_TEST_NAME "test_declining"
#else
#define JXO_TEST_NAME "test_abort"
#endif

JAXONNX_PLUGIN(JXO_TEST_NAME, "0.0.1") {
  plugin.primitive("test.passes", lower_identity)
      .emits({"Identity"})
      .abstract_eval(same_aval)
      .test({sdk::Aval(sdk::dtype::f32, {3})});
  plugin.primitive("test.declines", lower_declines)
      .emits({"Identity"})
      .abstract_eval(same_aval)
      .test({sdk::Aval(sdk::dtype::f32, {3})});
#ifndef JXO_TEST_NO_ABORT
  plugin.primitive("test.abort", lower_abort)
      .emits({"Identity"})
      .abstract_eval(same_aval)
      .test({sdk::Aval(sdk::dtype::i32, {2, 2})});
#endif
}
