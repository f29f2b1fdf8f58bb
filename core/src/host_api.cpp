// The jxo_api table: the host functions plugins call. Each one converts and
// forwards to the Converter. Every entry point is noexcept and runs its body
// guarded (status.hpp): nothing thrown here crosses into a plugin.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>

#include "abi_read.hpp"
#include "lowering.hpp"
#include "status.hpp"
#include "onnx_schema.hpp"
#include "jaxonnx/kernels.hpp"
#include "passes/fuse_api.hpp"

namespace jaxonnx {
namespace {

std::string str(jxo_str s) { return abi::read_string(s); }
jxo_str view(const std::string& s) { return jxo_str{s.data(), s.size()}; }

// Most failures of a host call are the caller's arguments.
jxo_status* fail(const std::string& msg, int32_t code = JXO_INVALID_ARGUMENT) {
  return make_status(code, msg);
}

const Param* P(const jxo_param* p) { return reinterpret_cast<const Param*>(p); }
const jxo_param* C(const Param* p) { return reinterpret_cast<const jxo_param*>(p); }
const ClosedJaxpr* J(const jxo_jaxpr* j) { return reinterpret_cast<const ClosedJaxpr*>(j); }

bool valid_value(const jxo_lowering* ctx, jxo_value v) { return ctx->conv->valid(v); }

jxo_str str_or(jxo_str s, const char* fallback) {
  return s.size ? s : jxo_str{fallback, std::strlen(fallback)};
}

constexpr jxo_str kEmpty{nullptr, 0};

// -- status
jxo_status* status_create(jxo_str message) noexcept {
  return guarded("status_create", [&] { return make_status(JXO_ERROR, str(message)); });
}
jxo_status* status_create_with_code(int32_t code, jxo_str message) noexcept {
  return guarded("status_create_with_code", [&] { return make_status(code, str(message)); });
}
jxo_str status_message(const jxo_status* s) noexcept { return s ? view(s->message) : kEmpty; }
int32_t status_code(const jxo_status* s) noexcept { return s ? s->code : JXO_OK; }
void status_release(jxo_status* s) noexcept { release_status(s); }

// -- the equation
jxo_str primitive(const jxo_lowering* ctx) noexcept { return view(ctx->eqn->primitive); }
size_t num_inputs(const jxo_lowering* ctx) noexcept { return ctx->eqn->inputs.size(); }
size_t num_outputs(const jxo_lowering* ctx) noexcept { return ctx->eqn->outputs.size(); }
// Avals build their C view on first use, which allocates.
const jxo_aval* input_aval(const jxo_lowering* ctx, size_t i) noexcept {
  return guarded_value<const jxo_aval*>("input_aval", nullptr, [&] {
    return i < ctx->eqn->inputs.size() ? ctx->eqn->inputs[i].aval.c() : nullptr;
  });
}
const jxo_aval* output_aval(const jxo_lowering* ctx, size_t i) noexcept {
  return guarded_value<const jxo_aval*>("output_aval", nullptr, [&] {
    return i < ctx->eqn->outputs.size() ? ctx->eqn->outputs[i].aval.c() : nullptr;
  });
}
const jxo_param* params(const jxo_lowering* ctx) noexcept { return C(&ctx->eqn->params); }
const jxo_tensor* input_literal(const jxo_lowering* ctx, size_t i) noexcept {
  if (i >= ctx->eqn->inputs.size() || !ctx->eqn->inputs[i].is_literal()) return nullptr;
  return ctx->eqn->inputs[i].literal->c();
}

jxo_status* input(jxo_lowering* ctx, size_t i, jxo_value* out) noexcept {
  return guarded("input", [&]() -> jxo_status* {
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

jxo_status* bind_output(jxo_lowering* ctx, size_t i, jxo_value v) noexcept {
  return guarded("bind_output", [&]() -> jxo_status* {
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
    if (value.has_type && value.type.dtype != out.aval.dtype)
      return fail("output " + std::to_string(i) + " was bound to a " +
                  dtype_name(value.type.dtype) + " value, but JAX's output is " + out.aval.str());
    if (value.has_type && !same_shape(value.type, out.aval))
      return fail("output " + std::to_string(i) + " was bound to value '" + value.name +
                  "' declared " + value.type.str() + ", but JAX's output is " + out.aval.str());
    if (!value.has_type) {
      value.has_type = true;
      value.type = out.aval;
    }
    if (!out.dropped) ctx->scope->env[out.var] = v;
    return nullptr;
  });
}

// -- the IR
const jxo_aval* value_aval(const jxo_lowering* ctx, jxo_value v) noexcept;

// The node's ops against onnxruntime's kernel table (kernels.hpp), and, in test
// builds, against the ops the primitive declares (.emits): a model that
// onnxruntime cannot load, or undocumented coverage, fails here instead.
std::string unsupported(jxo_lowering* ctx, const jxo_node* node, const std::string& op,
                        const std::vector<Aval>& types, const std::vector<bool>& typed) {
  if (node->domain.size) return "";
#ifdef JAXONNX_CHECK_EMITS
  const std::vector<std::string>& declared = ctx->prim->onnx_ops;
  if (std::find(declared.begin(), declared.end(), op) == declared.end())
    return "emit_node: op '" + op + "' is not among the ops '" + ctx->prim->name +
           "' declares (.emits)";
#endif
  const sdk::kernels::Entry* entry = sdk::kernels::find(op);
  if (!entry) return "";
  int32_t dtype = JXO_DTYPE_UNDEFINED;
  if (entry->data_input < node->num_inputs && node->inputs[entry->data_input] != JXO_NO_VALUE)
    if (const jxo_aval* t = value_aval(ctx, node->inputs[entry->data_input])) dtype = t->dtype;
  if (dtype == JXO_DTYPE_UNDEFINED && !types.empty() && typed[0]) dtype = types[0].dtype;
  if (dtype == JXO_DTYPE_UNDEFINED || sdk::kernels::has(op, dtype)) return "";
  return "emit_node: onnxruntime's CPU provider has no " + op + " kernel for " +
         dtype_name(dtype) + " (jaxonnx/kernels.hpp); compute it in a supported type "
         "(kernels::compute_type) and cast around";
}

jxo_status* emit_node(jxo_lowering* ctx, const jxo_node* node_in, jxo_value* outputs) noexcept {
  return guarded("emit_node", [&]() -> jxo_status* {
    Converter& conv = *ctx->conv;
    if (!node_in) return fail("emit_node: no node (NULL)");
    const jxo_node node_copy = abi::read_struct(node_in, "emit_node: the node");
    const jxo_node* node = &node_copy;
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
                        ", but the model targets opset " + std::to_string(conv.model.opset),
                    JXO_UNSUPPORTED_OPSET);
    }
    if ((node->num_inputs && !node->inputs) || (node->num_attrs && !node->attrs))
      return fail("emit_node(" + n.op_type + "): a NULL input or attribute array");
    if (!outputs) return fail("emit_node(" + n.op_type + "): no array for the output handles");
    for (size_t k = 0; k < node->num_attrs; ++k)
      if (!node->attrs[k])
        return fail("emit_node(" + n.op_type + "): attribute " + std::to_string(k) + " is NULL");
    std::vector<Aval> types(node->num_outputs);
    std::vector<bool> typed(node->num_outputs, false);
    for (size_t k = 0; k < node->num_outputs; ++k) {
      const jxo_aval* t = node->outputs ? node->outputs[k] : nullptr;
      if (!t) continue;
      types[k] = abi::read_aval(t, "emit_node(" + n.op_type + "): output " + std::to_string(k));
      typed[k] = true;
    }
    if (std::string why = unsupported(ctx, node, n.op_type, types, typed); !why.empty())
      return fail(why, JXO_ERROR);
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
    // A graph attribute names a closed subgraph opened in this scope, used once.
    std::vector<GraphScope*> graphs;
    auto resolve = [&](const jxo_graph* handle, const std::string& name) {
      const std::string what = "graph attribute '" + name + "'";
      GraphScope* g = conv.find_graph(handle);
      if (!g) throw InvalidArgument(what + " is not a graph handle");
      if (g->open)
        throw InvalidArgument(what + ": " + conv.scope_name(g) +
                              " is still open (call graph_end first)");
      if (g->used || std::find(graphs.begin(), graphs.end(), g) != graphs.end())
        throw InvalidArgument(what + ": " + conv.scope_name(g) +
                              " was already used by another node; a graph handle is used once");
      if (g->parent != conv.current())
        throw InvalidArgument(what + ": " + conv.scope_name(g) + " was opened in " +
                              conv.scope_name(g->parent) +
                              ", not in the scope the node is emitted in");
      graphs.push_back(g);
      return g->owned;
    };
    for (size_t k = 0; k < node->num_attrs; ++k) {
      try {
        n.attrs.push_back(abi::read_attribute(node->attrs[k], resolve));
      } catch (const std::exception& e) {
        return fail("emit_node(" + n.op_type + "): " + e.what());
      }
    }
    // Only now, with every check passed, are the subgraphs consumed.
    for (GraphScope* g : graphs) g->used = true;
    for (size_t k = 0; k < node->num_outputs; ++k) {
      ir::ValueId v = conv.new_value(ctx->eqn->primitive, typed[k] ? &types[k] : nullptr);
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

jxo_status* constant(jxo_lowering* ctx, const jxo_tensor* t, jxo_value* out) noexcept {
  return guarded("constant", [&]() -> jxo_status* {
    if (!out) return fail("constant: no place for the value handle (NULL)");
    *out = ctx->conv->constant(abi::read_tensor(t, "constant"), "const");
    return nullptr;
  });
}

const jxo_aval* value_aval(const jxo_lowering* ctx, jxo_value v) noexcept {
  return guarded_value<const jxo_aval*>("value_aval", nullptr, [&]() -> const jxo_aval* {
    if (!valid_value(ctx, v)) return nullptr;
    const ir::Value& value = ctx->conv->value(v);
    return value.has_type ? value.type.c() : nullptr;
  });
}

jxo_status* symbol_origin(jxo_lowering* ctx, jxo_str symbol, jxo_value* value,
                          int64_t* axis) noexcept {
  return guarded("symbol_origin", [&]() -> jxo_status* {
    std::string name = str(symbol);
    auto it = ctx->conv->symbol_origins.find(name);
    if (it == ctx->conv->symbol_origins.end())
      return fail("symbolic dim '" + name + "' is not a whole dim of any graph input", JXO_ERROR);
    *value = it->second.first;
    *axis = it->second.second;
    return nullptr;
  });
}

// Per graph scope: lookups walk outward through the open scopes. A failed
// lookup answers "absent", a failed store stores nothing (and both are noted).
void memo_get(const jxo_lowering* ctx, jxo_str key, jxo_value* out) noexcept {
  if (!out) return;
  *out = guarded_value<jxo_value>("memo_get", JXO_NO_VALUE, [&] {
    std::string k = str(key);
    for (const GraphScope* s = ctx->conv->current(); s; s = s->parent) {
      auto it = s->memo.find(k);
      if (it != s->memo.end()) return it->second;
    }
    return JXO_NO_VALUE;
  });
}
void memo_put(jxo_lowering* ctx, jxo_str key, jxo_value v) noexcept {
  guarded_value<int>("memo_put", 0, [&] {
    if (valid_value(ctx, v) && ctx->conv->visible(v)) ctx->conv->current()->memo[str(key)] = v;
    return 0;
  });
}

jxo_status* lower_jaxpr(jxo_lowering* ctx, const jxo_jaxpr* j, const jxo_value* ins, size_t n_in,
                        jxo_value* outs, size_t n_out) noexcept {
  return guarded("lower_jaxpr", [&]() -> jxo_status* {
    const ClosedJaxpr* cj = J(j);
    if (!cj) return fail("lower_jaxpr: no jaxpr");
    if (n_in != cj->jaxpr.invars.size() || n_out != cj->jaxpr.outvars.size())
      return fail("lower_jaxpr: the jaxpr takes " + std::to_string(cj->jaxpr.invars.size()) +
                  " inputs and gives " + std::to_string(cj->jaxpr.outvars.size()) +
                  " outputs; got " + std::to_string(n_in) + " and " + std::to_string(n_out));
    if ((n_in && !ins) || (n_out && !outs)) return fail("lower_jaxpr: a NULL value array");
    std::vector<ir::ValueId> in(ins, ins + n_in);
    for (size_t k = 0; k < n_in; ++k)
      if (!valid_value(ctx, in[k])) return fail("lower_jaxpr: input " + std::to_string(k) + " is not a valid value");
    // A failing equation inside throws EquationError: JXO_NESTED_FAILURE.
    std::vector<ir::ValueId> result = ctx->conv->lower_closed(*cj, in);
    for (size_t k = 0; k < n_out; ++k) outs[k] = result[k];
    return nullptr;
  });
}

int64_t opset(const jxo_lowering* ctx) noexcept { return ctx->conv->model.opset; }

// -- subgraphs (minor 1)
jxo_status* graph_begin(jxo_lowering* ctx, jxo_str name) noexcept {
  return guarded("graph_begin", [&]() -> jxo_status* {
    ctx->conv->begin_graph(str(name), ctx);
    return nullptr;
  });
}

jxo_status* graph_add_input(jxo_lowering* ctx, jxo_str name, const jxo_aval* aval,
                            jxo_value* out) noexcept {
  return guarded("graph_add_input", [&]() -> jxo_status* {
    if (!ctx->conv->current()->parent)
      return fail("graph_add_input: no subgraph is open (call graph_begin first)");
    if (!aval || !out) return fail("graph_add_input: no aval or no place for the value (NULL)");
    *out = ctx->conv->add_input(str(name), abi::read_aval(aval, "graph_add_input: the aval"));
    return nullptr;
  });
}

jxo_status* graph_end(jxo_lowering* ctx, const jxo_value* outputs, size_t n,
                      const jxo_graph** graph) noexcept {
  return guarded("graph_end", [&]() -> jxo_status* {
    Converter& conv = *ctx->conv;
    GraphScope* s = conv.current();
    if (!s->parent) return fail("graph_end: no subgraph is open");
    if ((n && !outputs) || !graph) return fail("graph_end: a NULL output array or graph pointer");
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
    } catch (const EquationError&) {
      throw;  // a copy's lowering failed: JXO_NESTED_FAILURE
    } catch (const ConversionError& e) {
      return fail("graph_end(" + conv.scope_name(s) + "): " + e.what());
    }
    return nullptr;
  });
}

int32_t output_used(const jxo_lowering* ctx, size_t i) noexcept {
  if (i >= ctx->eqn->outputs.size()) return 1;
  const Atom& out = ctx->eqn->outputs[i];
  if (out.dropped) return 0;
  return !ctx->scope->reads || ctx->scope->reads->count(out.var) ? 1 : 0;
}

const jxo_aval* jaxpr_input_aval(const jxo_jaxpr* j, size_t i) noexcept {
  return guarded_value<const jxo_aval*>("jaxpr_input_aval", nullptr, [&] {
    return j && i < J(j)->jaxpr.invars.size() ? J(j)->jaxpr.invars[i].aval.c() : nullptr;
  });
}
const jxo_aval* jaxpr_output_aval(const jxo_jaxpr* j, size_t i) noexcept {
  return guarded_value<const jxo_aval*>("jaxpr_output_aval", nullptr, [&] {
    return j && i < J(j)->jaxpr.outvars.size() ? J(j)->jaxpr.outvars[i].aval.c() : nullptr;
  });
}
// The index of `a` among the jaxpr's invars, or -1.
int64_t invar_index(const jxo_jaxpr* j, const Atom& a) {
  if (a.is_literal()) return -1;
  const std::vector<Atom>& in = J(j)->jaxpr.invars;
  for (size_t k = 0; k < in.size(); ++k)
    if (in[k].var == a.var) return static_cast<int64_t>(k);
  return -1;
}
int64_t jaxpr_output_source(const jxo_jaxpr* j, size_t i) noexcept {
  if (!j || i >= J(j)->jaxpr.outvars.size()) return -1;
  return invar_index(j, J(j)->jaxpr.outvars[i]);
}
int32_t jaxpr_depends(const jxo_jaxpr* j, size_t output, size_t input) noexcept {
  // On failure "may depend": the conservative answer.
  return guarded_value<int32_t>("jaxpr_depends", 1, [&]() -> int32_t {
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
  });
}

// -- params
int32_t param_kind(const jxo_param* p) noexcept { return p ? P(p)->kind : JXO_PARAM_NONE; }
int64_t param_int(const jxo_param* p) noexcept { return p ? P(p)->i : 0; }
double param_float(const jxo_param* p) noexcept {
  if (!p) return 0;
  return P(p)->kind == JXO_PARAM_INT ? static_cast<double>(P(p)->i) : P(p)->f;
}
jxo_str param_string(const jxo_param* p) noexcept { return p ? view(P(p)->s) : jxo_str{nullptr, 0}; }
size_t param_size(const jxo_param* p) noexcept { return p ? P(p)->items.size() : 0; }
const jxo_param* param_at(const jxo_param* p, size_t i) noexcept {
  return p && i < P(p)->items.size() ? C(&P(p)->items[i]) : nullptr;
}
jxo_str param_key(const jxo_param* p, size_t i) noexcept {
  return p && i < P(p)->keys.size() ? view(P(p)->keys[i]) : jxo_str{nullptr, 0};
}
const jxo_param* param_field(const jxo_param* p, jxo_str key) noexcept {
  return p ? C(P(p)->field(std::string_view(key.data ? key.data : "", key.size))) : nullptr;
}
const jxo_jaxpr* param_jaxpr(const jxo_param* p) noexcept {
  return p && P(p)->jaxpr ? reinterpret_cast<const jxo_jaxpr*>(P(p)->jaxpr.get()) : nullptr;
}
size_t jaxpr_num_inputs(const jxo_jaxpr* j) noexcept { return j ? J(j)->jaxpr.invars.size() : 0; }
size_t jaxpr_num_outputs(const jxo_jaxpr* j) noexcept { return j ? J(j)->jaxpr.outvars.size() : 0; }

// -- abstract eval
size_t ae_num_inputs(const jxo_abstract_eval* ctx) noexcept { return ctx->inputs->size(); }
const jxo_aval* ae_input_aval(const jxo_abstract_eval* ctx, size_t i) noexcept {
  return guarded_value<const jxo_aval*>("ae_input_aval", nullptr, [&] {
    return i < ctx->inputs->size() ? (*ctx->inputs)[i].c() : nullptr;
  });
}
const jxo_param* ae_params(const jxo_abstract_eval* ctx) noexcept { return C(ctx->params); }
jxo_status* ae_add_output(jxo_abstract_eval* ctx, const jxo_aval* aval) noexcept {
  return guarded("ae_add_output", [&]() -> jxo_status* {
    if (!aval) return fail("ae_add_output: no aval (NULL)");
    ctx->outputs.push_back(abi::read_aval(aval, "ae_add_output: the aval"));
    return nullptr;
  });
}
size_t jaxpr_num_eqns(const jxo_jaxpr* j) noexcept { return j ? J(j)->jaxpr.eqns.size() : 0; }
const Eqn* eqn_at(const jxo_jaxpr* j, size_t k) {
  return j && k < J(j)->jaxpr.eqns.size() ? &J(j)->jaxpr.eqns[k] : nullptr;
}
jxo_str jaxpr_eqn_primitive(const jxo_jaxpr* j, size_t k) noexcept {
  const Eqn* e = eqn_at(j, k);
  return e ? view(e->primitive) : jxo_str{nullptr, 0};
}
const jxo_param* jaxpr_eqn_params(const jxo_jaxpr* j, size_t k) noexcept {
  const Eqn* e = eqn_at(j, k);
  return e ? C(&e->params) : nullptr;
}
size_t jaxpr_eqn_num_inputs(const jxo_jaxpr* j, size_t k) noexcept {
  const Eqn* e = eqn_at(j, k);
  return e ? e->inputs.size() : 0;
}
int64_t jaxpr_eqn_input_source(const jxo_jaxpr* j, size_t k, size_t i) noexcept {
  const Eqn* e = eqn_at(j, k);
  return e && i < e->inputs.size() ? invar_index(j, e->inputs[i]) : -1;
}
int64_t jaxpr_output_eqn(const jxo_jaxpr* j, size_t i) noexcept {
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
    // minor 3
    status_create_with_code, status_code,
};

const jxo_api* get_api(uint32_t minor) noexcept { return minor <= JXO_ABI_MINOR ? &kApi : nullptr; }

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
  FaultScope faults;
  jxo_status* status = prim.abstract_eval(&kApi, &ctx, prim.user_data);
  std::optional<Failure> fault = faults.take();
  if (status || fault) {
    std::string msg = status ? take_status(status).message : "";
    if (fault) msg = fault->message + (msg.empty() ? "" : "; then: " + msg);
    std::string avals;
    for (size_t i = 0; i < inputs.size(); ++i) avals += (i ? ", " : "") + inputs[i].str();
    throw ConversionError("plugin '" + prim.plugin->name + "' failed the abstract eval of '" +
                          prim.name + "' (inputs: " + avals + "): " + msg);
  }
  return std::move(ctx.outputs);
}

}  // namespace jaxonnx
