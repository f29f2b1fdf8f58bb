// Function calls (jaxonnx.onnx_function). An `onnx_fn::<qualified name>`
// equation carries the traced body of one call and a capture key. The body
// is lowered once per function key -- the primitive, the input avals with
// their symbols, and the capture key -- into a function scope by the same
// plugins as the main graph, and kept in model.functions; every call is a
// node of the function's domain. A call site is structure, not an op, so it
// is the core's, like a subgraph.
#include <algorithm>
#include <cctype>
#include <utility>

#include "lowering.hpp"

namespace jaxonnx {
namespace {

std::string string_param(const Eqn& eqn, const char* key, const std::string& fallback) {
  const Param* p = eqn.params.field(key);
  return p && p->kind == JXO_PARAM_STRING && !p->s.empty() ? p->s : fallback;
}

const ClosedJaxpr& body_of(const Eqn& eqn) {
  const Param* p = eqn.params.field("body");
  if (!p || p->kind != JXO_PARAM_JAXPR || !p->jaxpr)
    throw ConversionError("function call '" + eqn.primitive + "' has no 'body' jaxpr param");
  const Jaxpr& j = p->jaxpr->jaxpr;
  if (j.invars.size() != eqn.inputs.size() || j.outvars.size() != eqn.outputs.size())
    throw ConversionError("function call '" + eqn.primitive + "': its body takes " +
                          std::to_string(j.invars.size()) + " inputs and gives " +
                          std::to_string(j.outvars.size()) + " outputs, the call has " +
                          std::to_string(eqn.inputs.size()) + " and " +
                          std::to_string(eqn.outputs.size()));
  return *p->jaxpr;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

}  // namespace

size_t Converter::lower_function_body(const Eqn& eqn, const std::string& key) {
  const ClosedJaxpr& body = body_of(eqn);
  std::string base = string_param(eqn, "name", eqn.primitive.substr(sizeof(kFunctionPrefix) - 1));
  std::string domain = string_param(eqn, "domain", "custom");
  // Readable and deterministic: MLPBlock, then MLPBlock_2 for a second
  // definition (other shapes, other instance) in the same domain.
  int64_t n = ++function_names_[domain + "\n" + base];
  std::string name = n == 1 ? base : base + "_" + std::to_string(n);

  auto owned = std::make_unique<GraphScope>();
  owned->owned = std::make_shared<ir::Graph>();
  owned->graph = owned->owned.get();
  owned->graph->name = name;
  owned->function = true;
  GraphScope* fs = owned.get();
  open_.push_back(fs);
  scopes_.push_back(std::move(owned));

  // Constants and symbolic dims belong to the function body: it sees no
  // value of its callers.
  auto saved_origins = std::exchange(symbol_origins, {});
  auto saved_literals = std::exchange(literal_cache_, {});
  auto saved_consts = std::exchange(const_cache_, {});

  std::vector<ir::ValueId> ins;
  for (const Atom& in : body.jaxpr.invars) {
    ir::ValueId v = add_input(name + "_in", in.aval);
    ins.push_back(v);
    for (size_t axis = 0; axis < in.aval.dims.size(); ++axis)
      if (is_identifier(in.aval.dims[axis].symbol))
        symbol_origins.emplace(in.aval.dims[axis].symbol,
                               std::make_pair(v, static_cast<int64_t>(axis)));
  }
  std::vector<ir::ValueId> outs = lower_closed(body, ins);
  Scope env;
  end_graph(outs, env);

  symbol_origins = std::move(saved_origins);
  literal_cache_ = std::move(saved_literals);
  const_cache_ = std::move(saved_consts);

  model.functions.push_back({name, domain, fs->owned});
  size_t index = model.functions.size() - 1;
  function_index_.emplace(key, index);
  return index;
}

void Converter::lower_function_call(const Eqn& eqn, Scope& scope) {
  std::string key = eqn.primitive + "\n" + string_param(eqn, "key", "") + "\n";
  for (const Atom& in : eqn.inputs) key += in.aval.str() + ";";
  auto found = function_index_.find(key);
  size_t index = found != function_index_.end() ? found->second : lower_function_body(eqn, key);
  const std::string name = model.functions[index].name;
  const std::string domain = model.functions[index].domain;

  ir::Node call;
  call.op_type = name;
  call.domain = domain;
  for (size_t i = 0; i < eqn.inputs.size(); ++i) {
    ir::ValueId v = atom_value(eqn.inputs[i], scope);
    if (v == ir::kNoValue)
      throw ConversionError("internal error: input " + std::to_string(i) + " of '" +
                            eqn.primitive + "' " + describe(eqn) + " has no value");
    call.inputs.push_back(use(v));
  }
  for (const Atom& out : eqn.outputs) {
    ir::ValueId v = new_value(name, &out.aval);
    call.outputs.push_back(use(v));
    if (!out.dropped) scope.env[out.var] = v;
  }
  call.name = unique_name(name);
  current()->graph->nodes.push_back(std::move(call));
  int64_t& version = model.domain_opsets[domain];
  version = std::max<int64_t>(version, 1);
}

}  // namespace jaxonnx
