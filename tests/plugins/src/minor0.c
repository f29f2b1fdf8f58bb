/* A plugin built against ABI 1.0: its descriptor says minor 0, it asks the
 * host for the minor-0 table, and its attributes are the minor-0 jxo_attr (no
 * `graph` field: struct_size ends at `tensor`). The bytes after its
 * struct_size are garbage on purpose; the host must not read them.
 *   test.old_attr(x)        -> Identity(x) with an INT attribute
 *   test.old_graph_attr(x)  -> a GRAPH attribute in a minor-0 jxo_attr: refused
 * Plain C. */
#include <string.h>

#include <jaxonnx/plugin_abi.h>

#define S(lit) {lit, sizeof(lit) - 1}

/* jxo_attr as ABI 1.0 laid it out, followed by garbage where 1.1 has `graph`. */
typedef struct {
  jxo_attr attr; /* only the first offsetof(jxo_attr, graph) bytes are "ours" */
} old_attr_storage;

static jxo_status* emit(const jxo_api* api, jxo_lowering* ctx, int32_t type) {
  old_attr_storage st;
  const jxo_attr* attrs[1];
  const jxo_aval* outs[1];
  jxo_value in = JXO_NO_VALUE, out = JXO_NO_VALUE;
  jxo_node node;
  jxo_status* s = api->input(ctx, 0, &in);
  if (s) return s;
  memset(&st, 0xAB, sizeof st); /* garbage everywhere, `graph` included */
  st.attr.struct_size = (uint32_t)offsetof(jxo_attr, graph);
  st.attr.name.data = "level";
  st.attr.name.size = 5;
  st.attr.type = type;
  st.attr.i = 7;
  st.attr.count = 0;
  attrs[0] = &st.attr;
  outs[0] = api->input_aval(ctx, 0);
  memset(&node, 0, sizeof node);
  node.struct_size = sizeof node;
  node.op_type.data = "Identity";
  node.op_type.size = 8;
  node.inputs = &in;
  node.num_inputs = 1;
  node.outputs = outs;
  node.num_outputs = 1;
  node.attrs = attrs;
  node.num_attrs = 1;
  s = api->emit_node(ctx, &node, &out);
  if (s) return s;
  return api->bind_output(ctx, 0, out);
}

static jxo_status* lower_old_attr(const jxo_api* api, jxo_lowering* ctx, void* ud) {
  (void)ud;
  return emit(api, ctx, JXO_ATTR_INT);
}
static jxo_status* lower_old_graph_attr(const jxo_api* api, jxo_lowering* ctx, void* ud) {
  (void)ud;
  return emit(api, ctx, 5 /* JXO_ATTR_GRAPH, which minor 0 did not have */);
}

static const jxo_str kOps[] = {S("Identity")};
static const jxo_primitive_desc kOld = {sizeof(jxo_primitive_desc), S("test.old_attr"),
                                        lower_old_attr, 0, 0, kOps, 1, S(""), S("")};
static const jxo_primitive_desc kOldGraph = {sizeof(jxo_primitive_desc), S("test.old_graph_attr"),
                                             lower_old_graph_attr, 0, 0, kOps, 1, S(""), S("")};
static const jxo_primitive_desc* const kPrims[] = {&kOld, &kOldGraph};
/* The descriptor as a minor-0 build had it: it ends at num_primitives, and
 * whatever lies beyond (garbage here) is not the host's to read. */
static const jxo_plugin_desc kDesc = {offsetof(jxo_plugin_desc, rules), JXO_ABI_MAJOR, 0,
                                      S("test_minor0"), S("1.0.0"), S("c"), kPrims, 2,
                                      (const jxo_rule_desc* const*)16, 12345};

__attribute__((visibility("default"))) const jxo_plugin_desc* jaxonnx_plugin_init_v1(
    const jxo_host* host, jxo_str* error) {
  static const char bad[] = "test_minor0: the host does not serve ABI 1.0";
  if (!host || host->abi_major != JXO_ABI_MAJOR || !host->get_api(0)) {
    error->data = bad;
    error->size = sizeof(bad) - 1;
    return 0;
  }
  return &kDesc;
}
