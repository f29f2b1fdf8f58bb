/* A plugin built against a newer minor than the host serves. Plain C. */
#include <string.h>

#include <jaxonnx/plugin_abi.h>

static jxo_status* lower(const jxo_api* api, jxo_lowering* ctx, void* user_data) {
  static const char msg[] = "never lowered";
  (void)ctx;
  (void)user_data;
  jxo_str s = {msg, sizeof(msg) - 1};
  return api->status_create(s);
}

#define S(lit) {lit, sizeof(lit) - 1}

static const jxo_primitive_desc kPrim = {
    sizeof(jxo_primitive_desc), S("test.newer"), lower, 0, 0, 0, 0, S(""), S("")};
static const jxo_primitive_desc* const kPrims[] = {&kPrim};
static const jxo_plugin_desc kDesc = {sizeof(jxo_plugin_desc), JXO_ABI_MAJOR, JXO_ABI_MINOR + 1,
                                      S("test_newer_minor"), S("9.9.9"), S("test"), kPrims, 1};

__attribute__((visibility("default"))) const jxo_plugin_desc* jaxonnx_plugin_init_v1(
    const jxo_host* host, jxo_str* error) {
  (void)host;
  (void)error;
  return &kDesc;
}
