/* A plugin as it was built against an older ABI minor: OLD_MINOR 0 (ABI 1.0)
 * or 1 (ABI 1.1). It does not use the current header's structs for what it
 * hands the host: it declares them as that minor laid them out, with that
 * minor's struct_size, and places each one at the very end of a page whose
 * next page is inaccessible, so a host that reads a single byte past a
 * struct's size crashes the test instead of reading garbage.
 *   test.old_leaky(x)  -> LeakyRelu(x, alpha=0.25)        (a FLOAT attribute)
 *   test.old_scale(x)  -> Mul(x, 2.0)                      (a constant)
 *   test.old_if(x)     -> If(true, then: Neg(x), else: Identity(x))  (ABI 1.1: GRAPH attributes)
 * Plain C. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jaxonnx/plugin_abi.h>

#ifndef OLD_MINOR
#error "build with -DOLD_MINOR=0 or 1"
#endif

#define S(lit) {lit, sizeof(lit) - 1}

/* -- the structs as ABI 1.OLD_MINOR laid them out -- */

typedef struct {
  uint32_t struct_size;
  jxo_str name;
  int32_t type;
  int64_t i;
  double f;
  jxo_str s;
  const int64_t* ints;
  const double* floats;
  const jxo_str* strings;
  size_t count;
  const jxo_tensor* tensor;
#if OLD_MINOR >= 1
  const jxo_graph* graph;
#endif
} old_attr;

typedef struct {
  uint32_t struct_size;
  jxo_str name;
  jxo_lower_fn lower;
  jxo_abstract_eval_fn abstract_eval;
  void* user_data;
  const jxo_str* onnx_ops;
  size_t num_onnx_ops;
  jxo_str doc_url;
  jxo_str summary;
} old_primitive_desc; /* minors 0 and 1: no binding specs */

typedef struct {
  uint32_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  jxo_str name;
  jxo_str version;
  jxo_str sdk_version;
  const old_primitive_desc* const* primitives;
  size_t num_primitives;
} old_plugin_desc; /* minors 0 and 1: no rewrite rules */

/* The jxo_node, jxo_aval and jxo_tensor of minor 0 are today's. */

/* `size` bytes ending exactly where an inaccessible page begins. */
static void* at_page_end(size_t size) {
  long page = sysconf(_SC_PAGESIZE);
  char* p = (char*)mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == (char*)MAP_FAILED) return NULL;
  if (mprotect(p + page, (size_t)page, PROT_NONE) != 0) return NULL;
  return p + page - size;
}

/* A copy of `src` (size bytes) at a page end; never freed (one per call site). */
static void* guarded_copy(const void* src, size_t size) {
  void* p = at_page_end(size);
  if (p) memcpy(p, src, size);
  return p;
}

static jxo_status* error(const jxo_api* api, const char* msg) {
  jxo_str m;
  m.data = msg;
  m.size = strlen(msg);
  return api->status_create(m);
}

/* Emits op_type(inputs) with one output typed like input 0, attributes as
 * given (already at page ends). */
static jxo_status* emit(const jxo_api* api, jxo_lowering* ctx, const char* op,
                        const jxo_value* inputs, size_t num_inputs,
                        const old_attr* const* attrs, size_t num_attrs, jxo_value* out) {
  jxo_node node;
  jxo_node* n;
  const jxo_aval* outs[1];
  outs[0] = (const jxo_aval*)guarded_copy(api->input_aval(ctx, 0), sizeof(jxo_aval));
  memset(&node, 0, sizeof node);
  node.struct_size = sizeof node;
  node.op_type.data = op;
  node.op_type.size = strlen(op);
  node.inputs = inputs;
  node.num_inputs = num_inputs;
  node.outputs = outs;
  node.num_outputs = 1;
  node.attrs = (const jxo_attr* const*)attrs;
  node.num_attrs = num_attrs;
  n = (jxo_node*)guarded_copy(&node, sizeof node);
  if (!n || !outs[0]) return error(api, "old_layouts: mmap failed");
  return api->emit_node(ctx, n, out);
}

static jxo_status* lower_leaky(const jxo_api* api, jxo_lowering* ctx, void* ud) {
  old_attr a;
  const old_attr* attrs[1];
  jxo_value x = JXO_NO_VALUE, y = JXO_NO_VALUE;
  jxo_status* s = api->input(ctx, 0, &x);
  (void)ud;
  if (s) return s;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.name.data = "alpha";
  a.name.size = 5;
  a.type = JXO_ATTR_FLOAT;
  a.f = 0.25;
  attrs[0] = (const old_attr*)guarded_copy(&a, sizeof a);
  s = emit(api, ctx, "LeakyRelu", &x, 1, attrs, 1, &y);
  return s ? s : api->bind_output(ctx, 0, y);
}

static jxo_status* lower_scale(const jxo_api* api, jxo_lowering* ctx, void* ud) {
  static const float two = 2.0f;
  jxo_tensor t;
  jxo_value in[2] = {JXO_NO_VALUE, JXO_NO_VALUE}, y = JXO_NO_VALUE;
  jxo_status* s = api->input(ctx, 0, &in[0]);
  (void)ud;
  if (s) return s;
  memset(&t, 0, sizeof t);
  t.struct_size = sizeof t;
  t.dtype = JXO_DTYPE_FLOAT32;
  t.rank = 0;
  t.data = &two;
  t.nbytes = sizeof two;
  s = api->constant(ctx, (const jxo_tensor*)guarded_copy(&t, sizeof t), &in[1]);
  if (s) return s;
  s = emit(api, ctx, "Mul", in, 2, NULL, 0, &y);
  return s ? s : api->bind_output(ctx, 0, y);
}

#if OLD_MINOR >= 1
/* One branch: Neg(x) or Identity(x), reading x from the enclosing graph. */
static jxo_status* branch(const jxo_api* api, jxo_lowering* ctx, jxo_value x, int negate,
                          const jxo_graph** g) {
  jxo_value y = JXO_NO_VALUE;
  jxo_status* s = api->graph_begin(ctx, negate ? (jxo_str)S("then") : (jxo_str)S("else"));
  if (s) return s;
  if ((s = emit(api, ctx, negate ? "Neg" : "Identity", &x, 1, NULL, 0, &y))) return s;
  return api->graph_end(ctx, &y, 1, g);
}

static jxo_status* lower_if(const jxo_api* api, jxo_lowering* ctx, void* ud) {
  static const uint8_t yes = 1;
  jxo_tensor t;
  old_attr a[2];
  const old_attr* attrs[2];
  const jxo_graph* g[2] = {0, 0};
  jxo_value x = JXO_NO_VALUE, c = JXO_NO_VALUE, y = JXO_NO_VALUE;
  jxo_status* s = api->input(ctx, 0, &x);
  int k;
  (void)ud;
  if (s) return s;
  if ((s = branch(api, ctx, x, 1, &g[0])) || (s = branch(api, ctx, x, 0, &g[1]))) return s;
  memset(&t, 0, sizeof t);
  t.struct_size = sizeof t;
  t.dtype = JXO_DTYPE_BOOL;
  t.data = &yes;
  t.nbytes = 1;
  if ((s = api->constant(ctx, &t, &c))) return s;
  for (k = 0; k < 2; ++k) {
    memset(&a[k], 0, sizeof a[k]);
    a[k].struct_size = sizeof a[k];
    a[k].name.data = k == 0 ? "then_branch" : "else_branch";
    a[k].name.size = 11;
    a[k].type = JXO_ATTR_GRAPH;
    a[k].graph = g[k];
    attrs[k] = (const old_attr*)guarded_copy(&a[k], sizeof a[k]);
  }
  s = emit(api, ctx, "If", &c, 1, attrs, 2, &y);
  return s ? s : api->bind_output(ctx, 0, y);
}
#endif

static const jxo_str kLeakyOps[] = {S("LeakyRelu")};
static const jxo_str kScaleOps[] = {S("Mul")};
static const jxo_str kIfOps[] = {S("If"), S("Neg"), S("Identity")};

static const old_plugin_desc* describe(void) {
  old_primitive_desc p[3];
  const old_primitive_desc** table;
  old_plugin_desc d;
  size_t n = OLD_MINOR >= 1 ? 3 : 2, k;
  memset(p, 0, sizeof p);
  for (k = 0; k < n; ++k) p[k].struct_size = sizeof p[k];
  p[0].name = (jxo_str)S("test.old_leaky");
  p[0].lower = lower_leaky;
  p[0].onnx_ops = kLeakyOps;
  p[0].num_onnx_ops = 1;
  p[1].name = (jxo_str)S("test.old_scale");
  p[1].lower = lower_scale;
  p[1].onnx_ops = kScaleOps;
  p[1].num_onnx_ops = 1;
#if OLD_MINOR >= 1
  p[2].name = (jxo_str)S("test.old_if");
  p[2].lower = lower_if;
  p[2].onnx_ops = kIfOps;
  p[2].num_onnx_ops = 3;
#else
  (void)kIfOps;
#endif
  table = (const old_primitive_desc**)at_page_end(n * sizeof *table);
  if (!table) return NULL;
  for (k = 0; k < n; ++k) table[k] = (const old_primitive_desc*)guarded_copy(&p[k], sizeof p[k]);
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.abi_major = JXO_ABI_MAJOR;
  d.abi_minor = OLD_MINOR;
  d.name = OLD_MINOR >= 1 ? (jxo_str)S("test_abi_1_1") : (jxo_str)S("test_abi_1_0");
  d.version = (jxo_str)S("1.0.0");
  d.sdk_version = (jxo_str)S("c");
  d.primitives = table;
  d.num_primitives = n;
  return (const old_plugin_desc*)guarded_copy(&d, sizeof d);
}

__attribute__((visibility("default"))) const jxo_plugin_desc* jaxonnx_plugin_init_v1(
    const jxo_host* host, jxo_str* error_out) {
  static const char bad[] = "old_layouts: the host does not speak ABI major 1";
  static const char no_memory[] = "old_layouts: mmap failed";
  static const old_plugin_desc* desc = NULL;
  if (!host || host->abi_major != JXO_ABI_MAJOR) {
    error_out->data = bad;
    error_out->size = sizeof(bad) - 1;
    return NULL;
  }
  if (!desc) desc = describe();
  if (!desc) {
    error_out->data = no_memory;
    error_out->size = sizeof(no_memory) - 1;
    return NULL;
  }
  return (const jxo_plugin_desc*)desc;
}
