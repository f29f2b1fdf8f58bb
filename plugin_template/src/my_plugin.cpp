// my_plugin.softsign: x / (1 + |x|), which is ONNX Softsign.
// https://onnx.ai/onnx/operators/onnx__Softsign.html
// onnxruntime implements Softsign for float32 only, so other float types get the
// same formula in three ops (the jaxonnx.testing float64 variants caught this).
#include <jaxonnx/plugin.hpp>

using namespace jaxonnx::sdk;

// Shapes for JAX: elementwise, so the output is the input's dtype and shape
// (symbolic dims included). jaxonnx.primitive calls this while tracing.
static void abstract_eval(AbstractEval& A) {
  if (A.num_inputs() != 1) throw Error("my_plugin.softsign takes one operand");
  Aval x = A.in_aval(0);
  if (!dtype::is_float(x.dtype))
    throw Error("my_plugin.softsign needs a floating operand, got " + x.str());
  A.add_output(x);
}

// The ONNX it becomes: one Softsign node (float32), else Div(x, Add(1, Abs(x))).
static void lower(Lowering& L) {
  Aval out = L.out_aval(0);
  Value x = L.input(0);
  if (out.dtype == dtype::f32) return L.bind(0, L.op("Softsign", {x}, out));
  Value denom = L.op("Add", {scalar(L, out.dtype, 1.0), L.op("Abs", {x}, out)}, out);
  L.bind(0, L.op("Div", {x, denom}, out));
}

JAXONNX_PLUGIN("my_plugin", "0.1.0") {
  plugin.primitive("my_plugin.softsign", lower)
      .abstract_eval(abstract_eval)
      .emits({"Softsign", "Abs", "Add", "Div"})  // every ONNX op the lowering may emit
      .doc("https://onnx.ai/onnx/operators/onnx__Softsign.html")
      .summary("x / (1 + |x|)")
      // The preflight's test equations: jaxonnx runs the abstract eval and the
      // lowering on these in a child process before it loads this file into a
      // user's process, so a crash there costs a warning, not the process.
      .test({Aval(dtype::f32, {2, 8})})
      .test({Aval(dtype::f64, {Dim::sym("B"), 3})});
}
