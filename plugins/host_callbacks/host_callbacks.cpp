// host_callbacks: the primitives that call back into Python at run time.
// An ONNX model cannot run Python, so:
// - debug_print / debug_callback (jax.debug.print, jax.debug.callback) have
//   no outputs and no effect on the result: they lower to nothing. The
//   Python side (jaxonnx/_callbacks.py) warns, naming the user's line.
// - pure_callback / io_callback compute values the model would need from
//   Python: refused with a ConversionError that says why.
#include <jaxonnx/plugin.hpp>

#include <string>

namespace {

using namespace jaxonnx::sdk;

void refuse(Lowering& L) {
  L.fail(std::string(L.primitive()) +
         " calls a Python function while the program runs, and an ONNX model cannot call "
         "Python: compute that value with jax.numpy / lax inside the function, or outside the "
         "model and pass it in as an input");
}

}  // namespace

JAXONNX_PLUGIN("host_callbacks", "0.1.0") {
  for (const char* name : {"debug_print", "debug_callback"})
    plugin.primitive(name, [](Lowering&) {})
        .summary("dropped (no outputs); jaxonnx warns with the user's source line");
  for (const char* name : {"pure_callback", "io_callback"})
    plugin.primitive(name, refuse).summary("unsupported: an ONNX model cannot call Python");
}
