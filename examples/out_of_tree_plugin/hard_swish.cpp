// example.hard_swish: x * relu6(x + 3) / 6, which is ONNX HardSwish
// (alpha = 1/6, beta = 0.5: x * max(0, min(1, x/6 + 1/2))).
// https://onnx.ai/onnx/operators/onnx__HardSwish.html
#include <jaxonnx/plugin.hpp>

using namespace jaxonnx::sdk;

// Elementwise: the output has the input's dtype and shape, symbolic dims included.
static void abstract_eval(AbstractEval& A) {
  if (A.num_inputs() != 1) throw Error("example.hard_swish takes one operand");
  Aval x = A.in_aval(0);
  if (!dtype::is_float(x.dtype))
    throw Error("example.hard_swish needs a floating operand, got " + x.str());
  A.add_output(x);
}

static void lower(Lowering& L) {
  L.bind(0, L.op("HardSwish", {L.input(0)}, L.out_aval(0)));
}

JAXONNX_PLUGIN("example_hard_swish", "1.0.0") {
  plugin.primitive("example.hard_swish", lower)
      .abstract_eval(abstract_eval)
      .emits({"HardSwish"})
      .doc("https://onnx.ai/onnx/operators/onnx__HardSwish.html")
      .summary("x * relu6(x + 3) / 6");
}
