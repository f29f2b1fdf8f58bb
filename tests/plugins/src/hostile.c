/* Careless-plugin cases for the host's validation (plain C, no SDK layer).
 * Each primitive's lowering makes one mistake the host must refuse with a
 * message naming the plugin, instead of emitting an invalid model or
 * crashing. Every primitive takes one float32 input and gives one output of
 * the same type.
 *   hostile.unknown_op    emits "NotAnOnnxOp" in the default domain
 *   hostile.wrong_shape   binds an output declared (7,) for a (2, 3) aval
 *   hostile.tensor_bytes  a tensor attribute with 3 bytes for a float32[2]
 *   hostile.negative_dim  a constant with a dim of -1
 *   hostile.overflow_dim  a constant whose dims overflow int64
 *   hostile.null_node     emit_node(NULL)
 * Built with -DHOSTILE_NULL_NAME it is instead a plugin whose descriptor's
 * name is a NULL pointer with a nonzero size. */
#include <jaxonnx/plugin_abi.h>
#include <stddef.h>

#define S(lit) {lit, sizeof(lit) - 1}

static jxo_status* emit(const jxo_api* api, jxo_lowering* ctx, const char* op, size_t op_len,
                        const jxo_attr* attr, const jxo_aval* out_aval, int bind) {
  jxo_value in = JXO_NO_VALUE, out = JXO_NO_VALUE;
  jxo_status* st = api->input(ctx, 0, &in);
  if (st) return st;
  jxo_node node = {0};
  const jxo_attr* attrs[1] = {attr};
  const jxo_aval* outs[1] = {out_aval ? out_aval : api->output_aval(ctx, 0)};
  node.struct_size = sizeof node;
  node.op_type.data = op;
  node.op_type.size = op_len;
  node.inputs = &in;
  node.num_inputs = 1;
  node.outputs = outs;
  node.num_outputs = 1;
  node.attrs = attr ? attrs : NULL;
  node.num_attrs = attr ? 1 : 0;
  st = api->emit_node(ctx, &node, &out);
  if (st) return st;
  return bind ? api->bind_output(ctx, 0, out) : NULL;
}

static jxo_status* unknown_op(const jxo_api* api, jxo_lowering* ctx, void* u) {
  (void)u;
  return emit(api, ctx, "NotAnOnnxOp", 11, NULL, NULL, 1);
}

static jxo_status* wrong_shape(const jxo_api* api, jxo_lowering* ctx, void* u) {
  jxo_dim dims[1] = {{7, {0, 0}}};
  jxo_aval bad = {sizeof(jxo_aval), JXO_DTYPE_FLOAT32, 1, dims};
  (void)u;
  return emit(api, ctx, "Relu", 4, NULL, &bad, 1);
}

static jxo_status* tensor_bytes(const jxo_api* api, jxo_lowering* ctx, void* u) {
  static const int64_t dims[1] = {2};
  static const char bytes[3] = {0, 0, 0};
  jxo_tensor t = {sizeof(jxo_tensor), JXO_DTYPE_FLOAT32, 1, dims, bytes, 3};
  jxo_attr a = {0};
  (void)u;
  a.struct_size = sizeof a;
  a.name.data = "value";
  a.name.size = 5;
  a.type = JXO_ATTR_TENSOR;
  a.tensor = &t;
  return emit(api, ctx, "Relu", 4, &a, NULL, 1);
}

static jxo_status* make_constant(const jxo_api* api, jxo_lowering* ctx, const int64_t* dims,
                                 int64_t rank, size_t nbytes) {
  static const char data[16] = {0};
  jxo_tensor t = {sizeof(jxo_tensor), JXO_DTYPE_FLOAT32, rank, dims, data, nbytes};
  jxo_value v = JXO_NO_VALUE;
  jxo_status* st = api->constant(ctx, &t, &v);
  if (st) return st;
  return api->bind_output(ctx, 0, v);
}

static jxo_status* negative_dim(const jxo_api* api, jxo_lowering* ctx, void* u) {
  static const int64_t dims[2] = {-1, -4};  /* (-1) * (-4) * 4 bytes = 16 */
  (void)u;
  return make_constant(api, ctx, dims, 2, 16);
}

static jxo_status* overflow_dim(const jxo_api* api, jxo_lowering* ctx, void* u) {
  /* 2^62 * 2^62 wraps to 0 in int64 arithmetic (signed overflow). */
  static const int64_t dims[2] = {(int64_t)1 << 62, (int64_t)1 << 62};
  (void)u;
  return make_constant(api, ctx, dims, 2, 0);
}

static jxo_status* null_node(const jxo_api* api, jxo_lowering* ctx, void* u) {
  jxo_value out = JXO_NO_VALUE;
  (void)u;
  return api->emit_node(ctx, NULL, &out);
}

static jxo_status* same_aval(const jxo_api* api, jxo_abstract_eval* ctx, void* u) {
  (void)u;
  return api->ae_add_output(ctx, api->ae_input_aval(ctx, 0));
}

/* Declared, so that the host's own validation (not the test builds' .emits
 * check) is what refuses each mistake. */
static const jxo_str kOps[] = {S("Relu"), S("Constant"), S("Identity"), S("NotAnOnnxOp")};
#define PRIM(var, name, fn)                                                                  \
  static const jxo_primitive_desc var = {sizeof(jxo_primitive_desc), S(name), fn, same_aval, \
                                         0, kOps, 4, S(""), S("")}
PRIM(kUnknownOp, "hostile.unknown_op", unknown_op);
PRIM(kWrongShape, "hostile.wrong_shape", wrong_shape);
PRIM(kTensorBytes, "hostile.tensor_bytes", tensor_bytes);
PRIM(kNegativeDim, "hostile.negative_dim", negative_dim);
PRIM(kOverflowDim, "hostile.overflow_dim", overflow_dim);
PRIM(kNullNode, "hostile.null_node", null_node);
static const jxo_primitive_desc* const kPrims[] = {&kUnknownOp,   &kWrongShape,  &kTensorBytes,
                                                   &kNegativeDim, &kOverflowDim, &kNullNode};

#ifdef HOSTILE_NULL_NAME
static const jxo_plugin_desc kDesc = {sizeof(jxo_plugin_desc), JXO_ABI_MAJOR, JXO_ABI_MINOR,
                                      {NULL, 7}, S("0.1.0"), S("c"), kPrims, 6};
#else
static const jxo_plugin_desc kDesc = {sizeof(jxo_plugin_desc), JXO_ABI_MAJOR, JXO_ABI_MINOR,
                                      S("test_hostile"), S("0.1.0"), S("c"), kPrims, 6};
#endif

__attribute__((visibility("default"))) const jxo_plugin_desc* jaxonnx_plugin_init_v1(
    const jxo_host* host, jxo_str* error) {
  (void)host;
  (void)error;
  return &kDesc;
}
