// Lowerings that throw; the SDK trampoline must turn each into a status.
//   test.throw        throws std::runtime_error
//   test.throw_other  throws an int (not a std::exception)
#include <stdexcept>

#include <jaxonnx/plugin.hpp>

namespace sdk = jaxonnx::sdk;

namespace {
void same_aval(sdk::AbstractEval& A) { A.add_output(A.in_aval(0)); }
}  // namespace

JAXONNX_PLUGIN("test_throwing", "0.1.0") {
  plugin.primitive("test.throw", [](sdk::Lowering&) {
          throw std::runtime_error("test.throw: std::runtime_error from the plugin");
        })
      .abstract_eval(same_aval);
  plugin.primitive("test.throw_other", [](sdk::Lowering&) { throw 42; })
      .abstract_eval(same_aval);
}
