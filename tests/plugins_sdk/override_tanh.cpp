// override_tanh: claims JAX's tanh, which the bundled lax_elementwise plugin
// also lowers, to test that a user can choose which plugin wins. It lowers
// tanh(x) as 2 * Sigmoid(2x) - 1 so the choice shows in the graph.
#include <jaxonnx/plugin.hpp>

using namespace jaxonnx::sdk;

static void lower(Lowering& L) {
  Aval out = L.out_aval(0);
  Value two = scalar(L, out.dtype, 2.0);
  Value s = L.op("Sigmoid", {L.op("Mul", {L.input(0), two}, out)}, out);
  L.bind(0, L.op("Sub", {L.op("Mul", {s, two}, out), scalar(L, out.dtype, 1.0)}, out));
}

JAXONNX_PLUGIN("override_tanh", "1.0.0") {
  plugin.primitive("tanh", lower).emits({"Mul", "Sigmoid", "Sub"}).summary("2*sigmoid(2x) - 1");
}
