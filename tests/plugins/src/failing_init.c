/* A plugin whose init refuses: returns NULL with an error message. */
#include <jaxonnx/plugin_abi.h>

__attribute__((visibility("default"))) const jxo_plugin_desc* jaxonnx_plugin_init_v1(
    const jxo_host* host, jxo_str* error) {
  static const char msg[] = "failing_init: cannot start on purpose";
  (void)host;
  error->data = msg;
  error->size = sizeof(msg) - 1;
  return 0;
}
