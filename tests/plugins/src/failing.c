/* test.fail: its lowering returns an error status made with the host's
 * status_create. Plain C, no SDK layer. */
#include <jaxonnx/plugin_abi.h>

#define S(lit) {lit, sizeof(lit) - 1}

static jxo_status* lower_fail(const jxo_api* api, jxo_lowering* ctx, void* user_data) {
  jxo_str msg = S("test.fail: refusing on purpose");
  (void)ctx;
  (void)user_data;
  return api->status_create(msg);
}

static jxo_status* same_aval(const jxo_api* api, jxo_abstract_eval* ctx, void* user_data) {
  const jxo_aval* in = api->ae_input_aval(ctx, 0);
  (void)user_data;
  if (!in) {
    jxo_str msg = S("test.fail expects one input");
    return api->status_create(msg);
  }
  return api->ae_add_output(ctx, in);
}

static const jxo_str kOps[] = {S("Identity")};
static const jxo_primitive_desc kPrim = {
    sizeof(jxo_primitive_desc), S("test.fail"), lower_fail, same_aval, 0, kOps, 1, S(""),
    S("always fails")};
static const jxo_primitive_desc* const kPrims[] = {&kPrim};
static const jxo_plugin_desc kDesc = {sizeof(jxo_plugin_desc), JXO_ABI_MAJOR, JXO_ABI_MINOR,
                                      S("test_failing"), S("0.1.0"), S("c"), kPrims, 1};

__attribute__((visibility("default"))) const jxo_plugin_desc* jaxonnx_plugin_init_v1(
    const jxo_host* host, jxo_str* error) {
  static const char bad[] = "test_failing: host has another ABI major";
  if (!host || host->abi_major != JXO_ABI_MAJOR || !host->get_api(JXO_ABI_MINOR)) {
    error->data = bad;
    error->size = sizeof(bad) - 1;
    return 0;
  }
  return &kDesc;
}
