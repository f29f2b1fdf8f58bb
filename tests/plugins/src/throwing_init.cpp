// A C++ plugin whose entry point lets an exception escape (no SDK layer to
// catch it): the host must skip it with a diagnostic, not terminate.
#include <jaxonnx/plugin_abi.h>

#include <stdexcept>

extern "C" __attribute__((visibility("default"))) const jxo_plugin_desc* jaxonnx_plugin_init_v1(
    const jxo_host*, jxo_str*) {
  throw std::runtime_error("throwing_init: init throws on purpose");
}
