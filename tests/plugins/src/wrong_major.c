/* A plugin for a future ABI major: it exports only jaxonnx_plugin_init_v2.
 * Plain C against plugin_abi.h. */
#include <jaxonnx/plugin_abi.h>

__attribute__((visibility("default"))) const void* jaxonnx_plugin_init_v2(const void* host,
                                                                           jxo_str* error) {
  static const char msg[] = "never called by a v1 host";
  (void)host;
  if (error) {
    error->data = msg;
    error->size = sizeof(msg) - 1;
  }
  return 0;
}
