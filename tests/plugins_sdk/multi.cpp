// sdk.pos_neg: two outputs, relu(x) and relu(-x), for jaxonnx.primitive's
// multiple_results.
#include <jaxonnx/plugin.hpp>

using namespace jaxonnx::sdk;

static void abstract_eval(AbstractEval& A) {
  if (A.num_inputs() != 1) throw Error("sdk.pos_neg takes one operand");
  Aval x = A.in_aval(0);
  if (!dtype::is_float(x.dtype)) throw Error("sdk.pos_neg needs a floating operand, got " + x.str());
  A.add_output(x);
  A.add_output(x);
}

static void lower(Lowering& L) {
  Aval out = L.out_aval(0);
  Value x = L.input(0);
  L.bind(0, L.op("Relu", {x}, out));
  L.bind(1, L.op("Relu", {L.op("Neg", {x}, out)}, out));
}

JAXONNX_PLUGIN("sdk_multi", "1.0.0") {
  plugin.primitive("sdk.pos_neg", lower)
      .abstract_eval(abstract_eval)
      .emits({"Relu", "Neg"})
      .summary("(relu(x), relu(-x))");
}
