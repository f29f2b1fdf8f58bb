/* A plugin whose init never returns. The preflight must give up on it (its
 * timeout) and keep it out of the user's process. */
#include <unistd.h>

#include <jaxonnx/plugin_abi.h>

__attribute__((visibility("default"))) const jxo_plugin_desc* jaxonnx_plugin_init_v1(
    const jxo_host* host, jxo_str* error) {
  (void)host;
  (void)error;
  for (;;) sleep(1);
  return 0;
}
