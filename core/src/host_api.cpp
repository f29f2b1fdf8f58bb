// The jxo_api table: the host functions plugins call. Each one only
// translates: it converts the C arguments, forwards to the Lowering (or the
// node builder, the jaxpr queries, the fuse pass's rewrite view) and converts
// the answer back. Every entry point is noexcept and runs its body guarded
// (status.hpp): nothing thrown here crosses into a plugin.
#include <algorithm>
#include <cstdint>

#include "abi_read.hpp"
#include "lowering.hpp"
#include "node_builder.hpp"
#include "status.hpp"
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

bool valid_value(const jxo_lowering* ctx, jxo_value v) { return ctx->lowering->valid(v); }

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
    ir::ValueId v = ctx->lowering->atom_value(ctx->eqn->inputs[i], *ctx->scope);
    if (v == ir::kNoValue) return fail("input " + std::to_string(i) + " has no value");
    *out = v;
    return nullptr;
  });
}

jxo_status* bind_output(jxo_lowering* ctx, size_t i, jxo_value v) noexcept {
  return guarded("bind_output", [&]() -> jxo_status* {
    ctx->lowering->bind_output(*ctx->eqn, *ctx->scope, i, v);
    return nullptr;
  });
}

// -- the IR
const jxo_aval* value_aval(const jxo_lowering* ctx, jxo_value v) noexcept;

jxo_status* emit_node(jxo_lowering* ctx, const jxo_node* node, jxo_value* outputs) noexcept {
  return guarded("emit_node", [&]() -> jxo_status* {
    if (!outputs) return fail("emit_node: no array for the output handles (NULL)");
    std::vector<ir::ValueId> made = build_node(*ctx->lowering, *ctx->eqn, *ctx->prim, node);
    std::copy(made.begin(), made.end(), outputs);
    return nullptr;
  });
}

jxo_status* constant(jxo_lowering* ctx, const jxo_tensor* t, jxo_value* out) noexcept {
  return guarded("constant", [&]() -> jxo_status* {
    if (!out) return fail("constant: no place for the value handle (NULL)");
    *out = ctx->lowering->constant(abi::read_tensor(t, "constant"), "const");
    return nullptr;
  });
}

const jxo_aval* value_aval(const jxo_lowering* ctx, jxo_value v) noexcept {
  return guarded_value<const jxo_aval*>("value_aval", nullptr, [&]() -> const jxo_aval* {
    if (!valid_value(ctx, v)) return nullptr;
    const ir::Value& value = ctx->lowering->value(v);
    return value.has_type ? value.type.c() : nullptr;
  });
}

jxo_status* symbol_origin(jxo_lowering* ctx, jxo_str symbol, jxo_value* value,
                          int64_t* axis) noexcept {
  return guarded("symbol_origin", [&]() -> jxo_status* {
    if (!value || !axis) return fail("symbol_origin: no place for the value or axis (NULL)");
    std::string name = str(symbol);
    auto it = ctx->lowering->symbol_origins.find(name);
    if (it == ctx->lowering->symbol_origins.end())
      return fail("symbolic dim '" + name + "' is not a whole dim of any graph input", JXO_ERROR);
    *value = it->second.first;
    *axis = it->second.second;
    return nullptr;
  });
}

// A failed lookup answers "absent", a failed store stores nothing (both noted).
void memo_get(const jxo_lowering* ctx, jxo_str key, jxo_value* out) noexcept {
  if (!out) return;
  *out = guarded_value<jxo_value>("memo_get", JXO_NO_VALUE,
                                  [&] { return ctx->lowering->memo_get(str(key)); });
}
void memo_put(jxo_lowering* ctx, jxo_str key, jxo_value v) noexcept {
  guarded_value<int>("memo_put", 0, [&] {
    ctx->lowering->memo_put(str(key), v);
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
    std::vector<ir::ValueId> result = ctx->lowering->lower_closed(*cj, in);
    for (size_t k = 0; k < n_out; ++k) outs[k] = result[k];
    return nullptr;
  });
}

int64_t opset(const jxo_lowering* ctx) noexcept { return ctx->lowering->model.opset; }
jxo_str target(const jxo_lowering* ctx) noexcept {
  const std::string_view name = ctx->lowering->target.name;
  return {name.data(), name.size()};
}
int32_t target_supports(const jxo_lowering* ctx, jxo_str feature) noexcept {
  if (feature.size && !feature.data) return 1;
  const std::string_view asked(feature.data, feature.size);
  const bool yes = sdk::targets::supports(ctx->lowering->target, asked);
  if (ConversionFacts* facts = ctx->lowering->facts())  // the conversion report's
    ++facts->target_asked[{"lower", ctx->prim->plugin->name, ctx->prim->name, std::string(asked), yes}];
  return yes ? 1 : 0;
}

// -- subgraphs (minor 1)
jxo_status* graph_begin(jxo_lowering* ctx, jxo_str name) noexcept {
  return guarded("graph_begin", [&]() -> jxo_status* {
    ctx->lowering->begin_graph(str(name), ctx);
    return nullptr;
  });
}

jxo_status* graph_add_input(jxo_lowering* ctx, jxo_str name, const jxo_aval* aval,
                            jxo_value* out) noexcept {
  return guarded("graph_add_input", [&]() -> jxo_status* {
    if (!ctx->lowering->current()->parent)
      return fail("graph_add_input: no subgraph is open (call graph_begin first)");
    if (!aval || !out) return fail("graph_add_input: no aval or no place for the value (NULL)");
    *out = ctx->lowering->add_input(str(name), abi::read_aval(aval, "graph_add_input: the aval"));
    return nullptr;
  });
}

jxo_status* graph_end(jxo_lowering* ctx, const jxo_value* outputs, size_t n,
                      const jxo_graph** graph) noexcept {
  return guarded("graph_end", [&]() -> jxo_status* {
    Lowering& conv = *ctx->lowering;
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
int64_t jaxpr_output_source(const jxo_jaxpr* j, size_t i) noexcept {
  if (!j || i >= J(j)->jaxpr.outvars.size()) return -1;
  return J(j)->jaxpr.invar_index(J(j)->jaxpr.outvars[i]);
}
int32_t jaxpr_depends(const jxo_jaxpr* j, size_t output, size_t input) noexcept {
  // On failure "may depend": the conservative answer.
  return guarded_value<int32_t>("jaxpr_depends", 1, [&]() -> int32_t {
    return j && J(j)->jaxpr.depends(output, input) ? 1 : 0;
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
  return e && i < e->inputs.size() ? J(j)->jaxpr.invar_index(e->inputs[i]) : -1;
}
int64_t jaxpr_output_eqn(const jxo_jaxpr* j, size_t i) noexcept {
  return j ? J(j)->jaxpr.output_eqn(i) : -1;
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
    // minor 5
    target, target_supports, rewrite_api::rw_target_supports,
    // minor 7
    rewrite_api::rw_is_output,
};

const jxo_api* get_api(uint32_t minor) noexcept { return minor <= JXO_ABI_MINOR ? &kApi : nullptr; }

const char kHostVersion[] = "jaxonnx host ABI 1";
const jxo_host kHost = {sizeof(jxo_host), JXO_ABI_MAJOR, get_api,
                        {kHostVersion, sizeof(kHostVersion) - 1}};

}  // namespace

const jxo_api* host_api() { return &kApi; }
const jxo_host* host_info() { return &kHost; }

}  // namespace jaxonnx
