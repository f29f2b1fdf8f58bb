/* A plugin whose init dies of SIGSEGV: what a damaged file or a bad pointer in
 * registration does. The preflight must keep it out of the user's process. */
#include <signal.h>

#include <jaxonnx/plugin_abi.h>

__attribute__((visibility("default"))) const jxo_plugin_desc* jaxonnx_plugin_init_v1(
    const jxo_host* host, jxo_str* error) {
  (void)host;
  (void)error;
  raise(SIGSEGV);
  return 0;
}
