/* A valid shared object that is not a jaxonnx plugin: no entry symbol. */
#include <jaxonnx/plugin_abi.h>

__attribute__((visibility("default"))) int jaxonnx_test_not_a_plugin(void) { return 42; }
