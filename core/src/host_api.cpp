// The jxo_api table: the host functions plugins call. Each one converts and
// forwards to the Converter; nothing thrown here may cross into a plugin.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>

#include "lowering.hpp"
#include "onnx_schema.hpp"
#include "jaxonnx/kernels.hpp"
#include "passes/fuse_api.hpp"

namespace jaxonnx {
namespace {

std::string str(jxo_str s) {
  if (s.size && !s.data)
    throw std::runtime_error("a string argument is a NULL pointer with size " +
                             std::to_string(s.size));
  return s.size ? std::string(s.data, s.size) : std::string();
}
jxo_str view(const std::string& s) { return jxo_str{s.data(), s.size()}; }

jxo_status* fail(std::string msg) { return new jxo_status{std::move(msg)}; }

// The element count of `rank` dims, refusing a negative dim or a count whose
// byte size overflows (checked arithmetic: UBSan flagged the plain product).
size_t checked_elements(const int64_t* dims, int64_t rank, size_t elem, const std::string& what) {
  if (rank < 0) throw std::runtime_error(what + " has a negative rank " + std::to_string(rank));
  if (rank > 0 && !dims) throw std::runtime_error(what + " has rank " + std::to_string(rank) +
                                                   " but no dims");
  uint64_t n = 1;
  for (int64_t k = 0; k < rank; ++k) {
    if (dims[k] < 0)
      throw std::runtime_error(what + " has a negative dim " + std::to_string(dims[k]));
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(dims[k]), &n))
      throw std::runtime_error(what + "'s dims overflow");
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<uint64_t>(elem), &bytes) ||
      bytes > static_cast<uint64_t>(PTRDIFF_MAX))
    throw std::runtime_error(what + "'s dims overflow");
  return static_cast<size_t>(n);
}

// A tensor a plugin hands over (constant() or a tensor attribute): a known
// dtype, dims that are sizes, and exactly the bytes those dims need.
std::shared_ptr<const Tensor> checked_tensor(const jxo_tensor* t, const std::string& what) {
  if (!t) throw std::runtime_error(what + ": no tensor (NULL)");
  size_t elem = dtype_size(t->dtype);
  if (elem == 0) throw std::runtime_error(what + ": unsupported dtype " + std::to_string(t->dtype));
  size_t n = checked_elements(t->dims, t->rank, elem, what);
  if (elem * n != t->nbytes)
    throw std::runtime_error(what + ": " + std::to_string(t->nbytes) + " bytes do not fit a " +
                             dtype_name(t->dtype) + " tensor of " + std::to_string(n) +
                             " elements (" + std::to_string(elem * n) + " bytes)");
  if (t->nbytes && !t->data) throw std::runtime_error(what + ": data is NULL");
  return Tensor::copy_of(t->dtype, std::vector<int64_t>(t->dims, t->dims + t->rank), t->data,
                         t->nbytes);
}

// Runs `body`, turning any exception into a status.
template <typename F>
jxo_status* guarded(F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return fail(e.what());
  } catch (...) {
    return fail("unknown error in the jaxonnx host");
  }
}

const Param* P(const jxo_param* p) { return reinterpret_cast<const Param*>(p); }
const jxo_param* C(const Param* p) { return reinterpret_cast<const jxo_param*>(p); }
const ClosedJaxpr* J(const jxo_jaxpr* j) { return reinterpret_cast<const ClosedJaxpr*>(j); }

bool valid_value(const jxo_lowering* ctx, jxo_value v) { return ctx->conv->valid(v); }

jxo_str str_or(jxo_str s, const char* fallback) {
  return s.size ? s : jxo_str{fallback, std::strlen(fallback)};
}

// -- status
jxo_status* status_create(jxo_str message) { return fail(str(message)); }
jxo_str status_message(const jxo_status* s) { return s ? view(s->message) : jxo_str{nullptr, 0}; }
void status_release(jxo_status* s) { delete s; }

// -- the equation
jxo_str primitive(const jxo_lowering* ctx) { return view(ctx->eqn->primitive); }
size_t num_inputs(const jxo_lowering* ctx) { return ctx->eqn->inputs.size(); }
size_t num_outputs(const jxo_lowering* ctx) { return ctx->eqn->outputs.size(); }
const jxo_aval* input_aval(const jxo_lowering* ctx, size_t i) {
  return i < ctx->eqn->inputs.size() ? ctx->eqn->inputs[i].aval.c() : nullptr;
}
const jxo_aval* output_aval(const jxo_lowering* ctx, size_t i) {
  return i < ctx->eqn->outputs.size() ? ctx->eqn->outputs[i].aval.c() : nullptr;
}
const jxo_param* params(const jxo_lowering* ctx) { return C(&ctx->eqn->params); }
const jxo_tensor* input_literal(const jxo_lowering* ctx, size_t i) {
  if (i >= ctx->eqn->inputs.size() || !ctx->eqn->inputs[i].is_literal()) return nullptr;
  return ctx->eqn->inputs[i].literal->c();
}

jxo_status* input(jxo_lowering* ctx, size_t i, jxo_value* out) {
  return guarded([&]() -> jxo_status* {
    if (i >= ctx->eqn->inputs.size())
      return fail("input " + std::to_string(i) + " out of range (the equation has " +
                  std::to_string(ctx->eqn->inputs.size()) + ")");
    ir::ValueId v = ctx->conv->atom_value(ctx->eqn->inputs[i], *ctx->scope);
    if (v == ir::kNoValue) return fail("input " + std::to_string(i) + " has no value");
    *out = v;
    return nullptr;
  });
}

// A declared type agrees with JAX's aval: same rank, equal static dims. A
// symbolic dim may be spelled differently ("2*B", "B*2") or be a static dim
// the plugin could not know, so only static-vs-static disagreements count.
bool same_shape(const Aval& declared, const Aval& jax) {
  if (!declared.known_rank || !jax.known_rank) return true;
  if (declared.dims.size() != jax.dims.size()) return false;
  for (size_t k = 0; k < jax.dims.size(); ++k)
    if (declared.dims[k].is_static() && jax.dims[k].is_static() &&
        declared.dims[k].value != jax.dims[k].value)
      return false;
  return true;
}

jxo_status* bind_output(jxo_lowering* ctx, size_t i, jxo_value v) {
  return guarded([&]() -> jxo_status* {
    if (i >= ctx->eqn->outputs.size())
      return fail("output " + std::to_string(i) + " out of range (the equation has " +
                  std::to_string(ctx->eqn->outputs.size()) + ")");
    if (!valid_value(ctx, v)) return fail("bind_output got an invalid value handle");
    if (!ctx->conv->visible(v))
      return fail("output " + std::to_string(i) + " was bound to value '" +
                  ctx->conv->value(v).name + "' of " +
                  ctx->conv->scope_name(ctx->conv->scope_of(v)) +
                  ", which is closed or does not enclose the equation's scope");
    const Atom& out = ctx->eqn->outputs[i];
    ir::Value& value = ctx->conv->value(v);
    // A complex output is carried packed: float[..., 2] (types.hpp).
    const Aval want = packed(out.aval);
    const std::string jax = out.aval.str() +
                            (want.dtype != out.aval.dtype ? ", carried as " + want.str() : "");
    if (value.has_type && value.type.dtype != want.dtype)
      return fail("output " + std::to_string(i) + " was bound to a " +
                  dtype_name(value.type.dtype) + " value, but JAX's output is " + jax);
    if (value.has_type && !same_shape(value.type, want))
      return fail("output " + std::to_string(i) + " was bound to value '" + value.name +
                  "' declared " + value.type.str() + ", but JAX's output is " + jax);
    if (!value.has_type) {
      value.has_type = true;
      value.type = want;
    }
    if (!out.dropped) ctx->scope->env[out.var] = v;
    return nullptr;
  });
}

// -- the IR
ir::Attribute to_attribute(const jxo_attr& a, Converter& conv, std::vector<GraphScope*>& graphs) {
  ir::Attribute out;
  out.name = str(a.name);
  if (out.name.empty()) throw std::runtime_error("an attribute has no name");
  out.type = a.type;
  auto array = [&](const void* p) {
    if (a.count && !p)
      throw std::runtime_error("attribute '" + out.name + "' has " + std::to_string(a.count) +
                               " entries but a NULL array");
  };
  switch (a.type) {
    case JXO_ATTR_INT: out.i = a.i; break;
    case JXO_ATTR_FLOAT: out.f = a.f; break;
    case JXO_ATTR_STRING: out.s = str(a.s); break;
    case JXO_ATTR_INTS: array(a.ints); if (a.count) out.ints.assign(a.ints, a.ints + a.count); break;
    case JXO_ATTR_FLOATS:
      array(a.floats);
      if (a.count) out.floats.assign(a.floats, a.floats + a.count);
      break;
    case JXO_ATTR_STRINGS:
      array(a.strings);
      for (size_t k = 0; k < a.count; ++k) out.strings.push_back(str(a.strings[k]));
      break;
    case JXO_ATTR_TENSOR:
      out.tensor = checked_tensor(a.tensor, "tensor attribute '" + out.name + "'");
      break;
    case JXO_ATTR_GRAPH: {
      // A plugin built against minor 0 has no `graph` field: read it as absent.
      const jxo_graph* handle = JXO_HAS_FIELD(&a, jxo_attr, graph) ? a.graph : nullptr;
      if (!handle)
        throw std::runtime_error("graph attribute '" + out.name + "' has no graph" +
                                 (JXO_HAS_FIELD(&a, jxo_attr, graph)
                                      ? std::string()
                                      : " (its jxo_attr predates ABI 1.1, which added graphs)"));
      GraphScope* g = conv.find_graph(handle);
      if (!g) throw std::runtime_error("graph attribute '" + out.name + "' is not a graph handle");
      if (g->open)
        throw std::runtime_error("graph attribute '" + out.name + "': " + conv.scope_name(g) +
                                 " is still open (call graph_end first)");
      if (g->used || std::find(graphs.begin(), graphs.end(), g) != graphs.end())
        throw std::runtime_error("graph attribute '" + out.name + "': " + conv.scope_name(g) +
                                 " was already used by another node; a graph handle is used once");
      if (g->parent != conv.current())
        throw std::runtime_error("graph attribute '" + out.name + "': " + conv.scope_name(g) +
                                 " was opened in " + conv.scope_name(g->parent) +
                                 ", not in the scope the node is emitted in");
      out.type = ir::kAttrGraph;
      out.graph = g->owned;
      graphs.push_back(g);
      break;
    }
    default:
      throw std::runtime_error("attribute '" + out.name + "' has unknown type " +
                               std::to_string(a.type));
  }
  return out;
}

const jxo_aval* value_aval(const jxo_lowering* ctx, jxo_value v);

// The node's ops against onnxruntime's kernel table (kernels.hpp), and, in test
// builds, against the ops the primitive declares (.emits): a model that
// onnxruntime cannot load, or undocumented coverage, fails here instead.
std::string unsupported(jxo_lowering* ctx, const jxo_node* node, const std::string& op) {
  if (node->domain.size) return "";
#ifdef JAXONNX_CHECK_EMITS
  const std::vector<std::string>& declared = ctx->prim->onnx_ops;
  if (std::find(declared.begin(), declared.end(), op) == declared.end())
    return "emit_node: op '" + op + "' is not among the ops '" + ctx->prim->name +
           "' declares (.emits)";
#endif
  const sdk::kernels::Entry* entry = sdk::kernels::find(op);
  if (!entry) return "";
  const jxo_aval* t = nullptr;
  if (entry->data_input < node->num_inputs && node->inputs[entry->data_input] != JXO_NO_VALUE)
    t = value_aval(ctx, node->inputs[entry->data_input]);
  if (!t && node->num_outputs && node->outputs) t = node->outputs[0];
  if (!t || sdk::kernels::has(op, t->dtype)) return "";
  return "emit_node: onnxruntime's CPU provider has no " + op + " kernel for " +
         dtype_name(t->dtype) + " (jaxonnx/kernels.hpp); compute it in a supported type "
         "(kernels::compute_type) and cast around";
}

jxo_status* emit_node(jxo_lowering* ctx, const jxo_node* node, jxo_value* outputs) {
  return guarded([&]() -> jxo_status* {
    Converter& conv = *ctx->conv;
    if (!node) return fail("emit_node: no node (NULL)");
    ir::Node n;
    n.op_type = str(node->op_type);
    if (n.op_type.empty()) return fail("emit_node: empty op_type");
    n.domain = str(node->domain);
    if (n.domain.empty() || n.domain == "ai.onnx") {
      int64_t since = onnx_op_since(n.op_type);
      if (since == 0)
        return fail("emit_node: '" + n.op_type + "' is not an operator of the default ONNX "
                    "domain (a custom op needs its own domain)");
      if (since > conv.model.opset)
        return fail("emit_node: '" + n.op_type + "' exists from opset " + std::to_string(since) +
                    ", but the model targets opset " + std::to_string(conv.model.opset));
    }
    if ((node->num_inputs && !node->inputs) || (node->num_attrs && !node->attrs))
      return fail("emit_node(" + n.op_type + "): a NULL input or attribute array");
    if (!outputs) return fail("emit_node(" + n.op_type + "): no array for the output handles");
    for (size_t k = 0; k < node->num_attrs; ++k)
      if (!node->attrs[k])
        return fail("emit_node(" + n.op_type + "): attribute " + std::to_string(k) + " is NULL");
    if (std::string why = unsupported(ctx, node, n.op_type); !why.empty()) return fail(why);
    for (size_t k = 0; k < node->num_inputs; ++k) {
      jxo_value v = node->inputs[k];
      if (v != JXO_NO_VALUE && !valid_value(ctx, v))
        return fail("emit_node(" + n.op_type + "): input " + std::to_string(k) +
                    " is not a valid value handle");
      try {
        n.inputs.push_back(v == JXO_NO_VALUE ? ir::kNoValue : conv.use(v));
      } catch (const ConversionError& e) {
        return fail("emit_node(" + n.op_type + "): input " + std::to_string(k) + ": " + e.what());
      }
    }
    std::vector<GraphScope*> graphs;
    for (size_t k = 0; k < node->num_attrs; ++k) {
      try {
        n.attrs.push_back(to_attribute(*node->attrs[k], conv, graphs));
      } catch (const std::exception& e) {
        return fail("emit_node(" + n.op_type + "): " + e.what());
      }
    }
    // Only now, with every check passed, are the subgraphs consumed.
    for (GraphScope* g : graphs) g->used = true;
    std::vector<Aval> types(node->num_outputs);
    for (size_t k = 0; k < node->num_outputs; ++k) {
      const jxo_aval* t = node->outputs ? node->outputs[k] : nullptr;
      if (!t) continue;
      std::string what = "emit_node(" + n.op_type + "): output " + std::to_string(k);
      if (t->rank > 0 && !t->dims) return fail(what + " has rank " + std::to_string(t->rank) +
                                                " but no dims");
      for (int64_t d = 0; d < t->rank; ++d)
        if (!t->dims[d].symbol.size && t->dims[d].value < 0)
          return fail(what + " has a negative dim " + std::to_string(t->dims[d].value));
      types[k] = Aval::from_c(*t);
      if (types[k].dtype != JXO_DTYPE_UNDEFINED && dtype_size(types[k].dtype) == 0 &&
          types[k].dtype != JXO_DTYPE_STRING)
        return fail(what + " has unknown dtype " + std::to_string(types[k].dtype));
      // No ONNX value is complex: a lowering that declares one has met a
      // complex operand it does not handle.
      if (packed(types[k]).dtype != types[k].dtype)
        return fail(what + " is declared " + types[k].str() + ", but complex values are carried "
                    "as " + packed(types[k]).str() + " (jaxonnx/complex.hpp); this lowering "
                    "does not handle complex operands");
    }
    for (size_t k = 0; k < node->num_outputs; ++k) {
      const jxo_aval* t = node->outputs ? node->outputs[k] : nullptr;
      const Aval& type = types[k];
      ir::ValueId v = conv.new_value(ctx->eqn->primitive, t ? &type : nullptr);
      n.outputs.push_back(conv.use(v));
      outputs[k] = v;
    }
    n.name = conv.unique_name(n.op_type);
    if (!n.domain.empty()) {
      int64_t& version = conv.model.domain_opsets[n.domain];
      version = std::max<int64_t>(version, node->domain_version > 0 ? node->domain_version : 1);
    }
    conv.current()->graph->nodes.push_back(std::move(n));
    return nullptr;
  });
}

jxo_status* constant(jxo_lowering* ctx, const jxo_tensor* t, jxo_value* out) {
  return guarded([&]() -> jxo_status* {
    if (!out) return fail("constant: no place for the value handle (NULL)");
    *out = ctx->conv->constant(checked_tensor(t, "constant"), "const");
    return nullptr;
  });
}

const jxo_aval* value_aval(const jxo_lowering* ctx, jxo_value v) {
  if (!valid_value(ctx, v)) return nullptr;
  const ir::Value& value = ctx->conv->value(v);
  return value.has_type ? value.type.c() : nullptr;
}

jxo_status* symbol_origin(jxo_lowering* ctx, jxo_str symbol, jxo_value* value, int64_t* axis) {
  return guarded([&]() -> jxo_status* {
    std::string name = str(symbol);
    auto it = ctx->conv->symbol_origins.find(name);
    if (it == ctx->conv->symbol_origins.end())
      return fail("symbolic dim '" + name + "' is not a whole dim of any graph input");
    *value = it->second.first;
    *axis = it->second.second;
    return nullptr;
  });
}

// Per graph scope: lookups walk outward through the open scopes.
void memo_get(const jxo_lowering* ctx, jxo_str key, jxo_value* out) {
  *out = JXO_NO_VALUE;
  std::string k = str(key);
  for (const GraphScope* s = ctx->conv->current(); s; s = s->parent) {
    auto it = s->memo.find(k);
    if (it != s->memo.end()) {
      *out = it->second;
      return;
    }
  }
}
void memo_put(jxo_lowering* ctx, jxo_str key, jxo_value v) {
  if (valid_value(ctx, v) && ctx->conv->visible(v)) ctx->conv->current()->memo[str(key)] = v;
}

jxo_status* lower_jaxpr(jxo_lowering* ctx, const jxo_jaxpr* j, const jxo_value* ins, size_t n_in,
                        jxo_value* outs, size_t n_out) {
  return guarded([&]() -> jxo_status* {
    const ClosedJaxpr* cj = J(j);
    if (!cj) return fail("lower_jaxpr: no jaxpr");
    if (n_in != cj->jaxpr.invars.size() || n_out != cj->jaxpr.outvars.size())
      return fail("lower_jaxpr: the jaxpr takes " + std::to_string(cj->jaxpr.invars.size()) +
                  " inputs and gives " + std::to_string(cj->jaxpr.outvars.size()) +
                  " outputs; got " + std::to_string(n_in) + " and " + std::to_string(n_out));
    std::vector<ir::ValueId> in(ins, ins + n_in);
    for (size_t k = 0; k < n_in; ++k)
      if (!valid_value(ctx, in[k])) return fail("lower_jaxpr: input " + std::to_string(k) + " is not a valid value");
    try {
      std::vector<ir::ValueId> result = ctx->conv->lower_closed(*cj, in);
      for (size_t k = 0; k < n_out; ++k) outs[k] = result[k];
    } catch (const ConversionError& e) {
      ctx->conv->pending = e;
      return fail(e.what());
    }
    return nullptr;
  });
}

int64_t opset(const jxo_lowering* ctx) { return ctx->conv->model.opset; }

// -- subgraphs (minor 1)
jxo_status* graph_begin(jxo_lowering* ctx, jxo_str name) {
  return guarded([&]() -> jxo_status* {
    ctx->conv->begin_graph(str(name), ctx);
    return nullptr;
  });
}

jxo_status* graph_add_input(jxo_lowering* ctx, jxo_str name, const jxo_aval* aval,
                            jxo_value* out) {
  return guarded([&]() -> jxo_status* {
    if (!ctx->conv->current()->parent)
      return fail("graph_add_input: no subgraph is open (call graph_begin first)");
    if (!aval) return fail("graph_add_input: no aval");
    *out = ctx->conv->add_input(str(name), Aval::from_c(*aval));
    return nullptr;
  });
}

jxo_status* graph_end(jxo_lowering* ctx, const jxo_value* outputs, size_t n,
                      const jxo_graph** graph) {
  return guarded([&]() -> jxo_status* {
    Converter& conv = *ctx->conv;
    GraphScope* s = conv.current();
    if (!s->parent) return fail("graph_end: no subgraph is open");
    if (s->opener != ctx)
      return fail("graph_end: the innermost open scope, " + conv.scope_name(s) +
                  ", was opened by another lowering; scopes nest like brackets");
    std::vector<ir::ValueId> outs;
    for (size_t k = 0; k < n; ++k) {
      if (!valid_value(ctx, outputs[k]))
        return fail("graph_end: output " + std::to_string(k) + " is not a valid value handle");
      outs.push_back(outputs[k]);
    }
    try {
      GraphScope* done = conv.end_graph(outs, *ctx->scope);
      *graph = reinterpret_cast<const jxo_graph*>(done);
    } catch (const ConversionError& e) {
      if (conv.pending) return fail(e.what());
      return fail("graph_end(" + conv.scope_name(s) + "): " + e.what());
    }
    return nullptr;
  });
}

int32_t output_used(const jxo_lowering* ctx, size_t i) {
  if (i >= ctx->eqn->outputs.size()) return 1;
  const Atom& out = ctx->eqn->outputs[i];
  if (out.dropped) return 0;
  return !ctx->scope->reads || ctx->scope->reads->count(out.var) ? 1 : 0;
}

const jxo_aval* jaxpr_input_aval(const jxo_jaxpr* j, size_t i) {
  return j && i < J(j)->jaxpr.invars.size() ? J(j)->jaxpr.invars[i].aval.c() : nullptr;
}
const jxo_aval* jaxpr_output_aval(const jxo_jaxpr* j, size_t i) {
  return j && i < J(j)->jaxpr.outvars.size() ? J(j)->jaxpr.outvars[i].aval.c() : nullptr;
}
// The index of `a` among the jaxpr's invars, or -1.
int64_t invar_index(const jxo_jaxpr* j, const Atom& a) {
  if (a.is_literal()) return -1;
  const std::vector<Atom>& in = J(j)->jaxpr.invars;
  for (size_t k = 0; k < in.size(); ++k)
    if (in[k].var == a.var) return static_cast<int64_t>(k);
  return -1;
}
int64_t jaxpr_output_source(const jxo_jaxpr* j, size_t i) {
  if (!j || i >= J(j)->jaxpr.outvars.size()) return -1;
  return invar_index(j, J(j)->jaxpr.outvars[i]);
}
int32_t jaxpr_depends(const jxo_jaxpr* j, size_t output, size_t input) {
  if (!j) return 0;
  const Jaxpr& jp = J(j)->jaxpr;
  if (output >= jp.outvars.size() || input >= jp.invars.size()) return 0;
  if (jp.outvars[output].is_literal()) return 0;
  // Forward taint from the input through the equations.
  std::set<int64_t> tainted{jp.invars[input].var};
  for (const Eqn& e : jp.eqns) {
    bool hit = false;
    for (const Atom& a : e.inputs) hit = hit || (!a.is_literal() && tainted.count(a.var));
    if (hit)
      for (const Atom& a : e.outputs) tainted.insert(a.var);
  }
  return tainted.count(jp.outvars[output].var) ? 1 : 0;
}

// -- params
int32_t param_kind(const jxo_param* p) { return p ? P(p)->kind : JXO_PARAM_NONE; }
int64_t param_int(const jxo_param* p) { return p ? P(p)->i : 0; }
double param_float(const jxo_param* p) {
  if (!p) return 0;
  return P(p)->kind == JXO_PARAM_INT ? static_cast<double>(P(p)->i) : P(p)->f;
}
jxo_str param_string(const jxo_param* p) { return p ? view(P(p)->s) : jxo_str{nullptr, 0}; }
size_t param_size(const jxo_param* p) { return p ? P(p)->items.size() : 0; }
const jxo_param* param_at(const jxo_param* p, size_t i) {
  return p && i < P(p)->items.size() ? C(&P(p)->items[i]) : nullptr;
}
jxo_str param_key(const jxo_param* p, size_t i) {
  return p && i < P(p)->keys.size() ? view(P(p)->keys[i]) : jxo_str{nullptr, 0};
}
const jxo_param* param_field(const jxo_param* p, jxo_str key) {
  return p ? C(P(p)->field(std::string_view(key.data ? key.data : "", key.size))) : nullptr;
}
const jxo_jaxpr* param_jaxpr(const jxo_param* p) {
  return p && P(p)->jaxpr ? reinterpret_cast<const jxo_jaxpr*>(P(p)->jaxpr.get()) : nullptr;
}
size_t jaxpr_num_inputs(const jxo_jaxpr* j) { return j ? J(j)->jaxpr.invars.size() : 0; }
size_t jaxpr_num_outputs(const jxo_jaxpr* j) { return j ? J(j)->jaxpr.outvars.size() : 0; }

// -- abstract eval
size_t ae_num_inputs(const jxo_abstract_eval* ctx) { return ctx->inputs->size(); }
const jxo_aval* ae_input_aval(const jxo_abstract_eval* ctx, size_t i) {
  return i < ctx->inputs->size() ? (*ctx->inputs)[i].c() : nullptr;
}
const jxo_param* ae_params(const jxo_abstract_eval* ctx) { return C(ctx->params); }
jxo_status* ae_add_output(jxo_abstract_eval* ctx, const jxo_aval* aval) {
  return guarded([&]() -> jxo_status* {
    if (!aval) return fail("ae_add_output: no aval");
    ctx->outputs.push_back(Aval::from_c(*aval));
    return nullptr;
  });
}
size_t jaxpr_num_eqns(const jxo_jaxpr* j) { return j ? J(j)->jaxpr.eqns.size() : 0; }
const Eqn* eqn_at(const jxo_jaxpr* j, size_t k) {
  return j && k < J(j)->jaxpr.eqns.size() ? &J(j)->jaxpr.eqns[k] : nullptr;
}
jxo_str jaxpr_eqn_primitive(const jxo_jaxpr* j, size_t k) {
  const Eqn* e = eqn_at(j, k);
  return e ? view(e->primitive) : jxo_str{nullptr, 0};
}
const jxo_param* jaxpr_eqn_params(const jxo_jaxpr* j, size_t k) {
  const Eqn* e = eqn_at(j, k);
  return e ? C(&e->params) : nullptr;
}
size_t jaxpr_eqn_num_inputs(const jxo_jaxpr* j, size_t k) {
  const Eqn* e = eqn_at(j, k);
  return e ? e->inputs.size() : 0;
}
int64_t jaxpr_eqn_input_source(const jxo_jaxpr* j, size_t k, size_t i) {
  const Eqn* e = eqn_at(j, k);
  return e && i < e->inputs.size() ? invar_index(j, e->inputs[i]) : -1;
}
int64_t jaxpr_output_eqn(const jxo_jaxpr* j, size_t i) {
  if (!j || i >= J(j)->jaxpr.outvars.size()) return -1;
  const Atom& out = J(j)->jaxpr.outvars[i];
  if (out.is_literal()) return -1;
  const std::vector<Eqn>& eqns = J(j)->jaxpr.eqns;
  for (size_t k = 0; k < eqns.size(); ++k)
    for (const Atom& o : eqns[k].outputs)
      if (o.var == out.var) return static_cast<int64_t>(k);
  return -1;
}

const jxo_api kApi = {
    sizeof(jxo_api), JXO_ABI_MINOR,
    status_create, status_message, status_release,
    primitive, num_inputs, num_outputs, input_aval, output_aval, params, input_literal, input,
    bind_output,
    emit_node, constant, value_aval, symbol_origin, memo_get, memo_put, lower_jaxpr, opset,
    param_kind, param_int, param_float, param_string, param_size, param_at, param_key,
    param_field, param_jaxpr, jaxpr_num_inputs, jaxpr_num_outputs,
    ae_num_inputs, ae_input_aval, ae_params, ae_add_output,
    graph_begin, graph_add_input, graph_end, output_used,
    jaxpr_input_aval, jaxpr_output_aval, jaxpr_output_source, jaxpr_depends,
    jaxpr_num_eqns, jaxpr_eqn_primitive, jaxpr_eqn_params, jaxpr_eqn_num_inputs,
    jaxpr_eqn_input_source, jaxpr_output_eqn,
    // minor 2: the rewrite view, served by the fuse pass (passes/fuse.cpp)
    rewrite_api::rw_root, rewrite_api::rw_opset, rewrite_api::rw_producer,
    rewrite_api::rw_op_type, rewrite_api::rw_domain, rewrite_api::rw_num_inputs,
    rewrite_api::rw_input, rewrite_api::rw_num_outputs, rewrite_api::rw_output,
    rewrite_api::rw_attr, rewrite_api::rw_num_reads, rewrite_api::rw_value_aval,
    rewrite_api::rw_value_constant, rewrite_api::rw_emit_node, rewrite_api::rw_constant,
    rewrite_api::rw_replace,
};

const jxo_api* get_api(uint32_t minor) { return minor <= JXO_ABI_MINOR ? &kApi : nullptr; }

const char kHostVersion[] = "jaxonnx host ABI 1";
const jxo_host kHost = {sizeof(jxo_host), JXO_ABI_MAJOR, get_api,
                        {kHostVersion, sizeof(kHostVersion) - 1}};

}  // namespace

const jxo_api* host_api() { return &kApi; }
const jxo_host* host_info() { return &kHost; }

std::vector<Aval> abstract_eval(const PrimitiveInfo& prim, const std::vector<Aval>& inputs,
                                const Param& params) {
  if (!prim.abstract_eval)
    throw ConversionError("plugin '" + prim.plugin->name + "' declares no abstract eval for '" +
                          prim.name + "'");
  jxo_abstract_eval ctx{&inputs, &params, {}};
  jxo_status* status = prim.abstract_eval(&kApi, &ctx, prim.user_data);
  if (status) {
    std::string msg = status->message;
    delete status;
    std::string avals;
    for (size_t i = 0; i < inputs.size(); ++i) avals += (i ? ", " : "") + inputs[i].str();
    throw ConversionError("plugin '" + prim.plugin->name + "' failed the abstract eval of '" +
                          prim.name + "' (inputs: " + avals + "): " + msg);
  }
  return std::move(ctx.outputs);
}

}  // namespace jaxonnx
