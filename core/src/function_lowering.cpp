// Function calls (jaxonnx.onnx_function). An `onnx_fn::<qualified name>`
// equation carries the traced body of one call and a capture key. The body
// is lowered once per function key -- the primitive, the input avals with
// their symbols, and the capture key -- into a function scope by the same
// plugins as the main graph, and kept in model.functions; every call is a
// node of the function's domain. A call site is structure, not an op, so it
// is the core's, like a subgraph.
// A function body sees no outer value: its constants are its own
// initializers (Constant nodes on export), and a symbol it needs that is no
// whole dim of its inputs comes in through an extra input, the tensor that
// carries the symbol where the function is called.
#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "lowering.hpp"
#include "jaxonnx/core/converter.hpp"

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

// The symbol names in a dim expression ("2*B + T" -> B, T; function names
// such as floordiv come along and are never found as origins).
void add_names(const std::string& expr, std::set<std::string>& out) {
  for (size_t i = 0; i < expr.size();) {
    unsigned char c = static_cast<unsigned char>(expr[i]);
    if (!std::isalpha(c) && c != '_') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[j])) || expr[j] == '_')) ++j;
    out.insert(expr.substr(i, j - i));
    i = j;
  }
}

void add_names(const Aval& a, std::set<std::string>& out) {
  for (const Dim& d : a.dims)
    if (!d.is_static()) add_names(d.symbol, out);
}

void add_names(const Jaxpr& j, std::set<std::string>& out);

void add_names(const Param& p, std::set<std::string>& out) {
  if (p.kind == JXO_PARAM_SYMBOL) add_names(p.s, out);
  if (p.jaxpr) add_names(p.jaxpr->jaxpr, out);
  for (const Param& item : p.items) add_names(item, out);
}

// Every symbol a lowering of `j` may ask the runtime value of.
void add_names(const Jaxpr& j, std::set<std::string>& out) {
  for (const Eqn& e : j.eqns) {
    for (const Atom& a : e.inputs) add_names(a.aval, out);
    for (const Atom& a : e.outputs) add_names(a.aval, out);
    add_names(e.params, out);
  }
  for (const Atom& a : j.outvars) add_names(a.aval, out);
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

}  // namespace

// The symbols the body needs that are no whole dim of its inputs but have an
// origin where it is called: each such origin value becomes an extra input
// of the function, so the body finds the symbol's runtime value there.
std::vector<std::pair<std::string, ir::ValueId>> Lowering::function_symbol_sources(
    const Eqn& eqn) {
  const ClosedJaxpr& body = body_of(eqn);
  auto [cached, fresh] = body_symbols_.try_emplace(&body);
  std::set<std::string>& needed = cached->second;
  if (fresh) {
    add_names(body.jaxpr, needed);
    for (const Atom& in : body.jaxpr.invars)
      for (const Dim& d : in.aval.dims) needed.erase(d.symbol);
  }
  std::vector<std::pair<std::string, ir::ValueId>> sources;
  for (const std::string& name : needed) {
    auto it = symbol_origins.find(name);
    if (it != symbol_origins.end()) sources.emplace_back(name, it->second.first);
  }
  return sources;
}

size_t Lowering::lower_function_body(const Eqn& eqn, const std::string& key,
                                      const std::vector<std::pair<std::string, ir::ValueId>>& sources) {
  const ClosedJaxpr& body = body_of(eqn);
  std::string base = string_param(eqn, "name", eqn.primitive.substr(sizeof(kFunctionPrefix) - 1));
  std::string domain = string_param(eqn, "domain", "custom");
  // Readable and deterministic: MLPBlock, then MLPBlock_2 for a second
  // definition (other shapes, other instance) in the same domain.
  std::string name;
  do {
    int64_t n = ++function_names_[domain + "\n" + base];
    name = n == 1 ? base : base + "_" + std::to_string(n);
  } while (!function_taken_.insert(domain + "\n" + name).second);

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
  std::map<ir::ValueId, ir::ValueId> source_inputs;  // caller's value -> extra input
  for (const auto& [symbol, outer] : sources) {
    auto [it, fresh] = source_inputs.emplace(outer, ir::kNoValue);
    if (fresh) it->second = add_input(name + "_" + symbol + "_source", value(outer).type);
    symbol_origins.emplace(symbol, std::make_pair(it->second, saved_origins.at(symbol).second));
  }
  try {
    std::vector<ir::ValueId> outs = lower_closed(body, ins);
    Scope env;
    end_graph(outs, env);
  } catch (const ConversionError& e) {
    throw ConversionError(std::string(e.what()) + "\n  inside the body of function '" + name +
                          "' (" + eqn.primitive + ") called " + describe(eqn));
  }

  symbol_origins = std::move(saved_origins);
  literal_cache_ = std::move(saved_literals);
  const_cache_ = std::move(saved_consts);

  model.functions.push_back({name, domain, fs->owned});
  size_t index = model.functions.size() - 1;
  function_index_.emplace(key, index);
  return index;
}

void Lowering::lower_function_call(const Eqn& eqn, Scope& scope) {
  std::string key = eqn.primitive + "\n" + string_param(eqn, "key", "") + "\n";
  for (const Atom& in : eqn.inputs) key += in.aval.str() + ";";
  std::vector<std::pair<std::string, ir::ValueId>> sources = function_symbol_sources(eqn);
  std::vector<ir::ValueId> extra;  // one per distinct source value, in order
  for (const auto& [symbol, outer] : sources) {
    key += "|" + symbol + ":" + value(outer).type.str() + "@" +
           std::to_string(symbol_origins.at(symbol).second);
    if (std::find(extra.begin(), extra.end(), outer) == extra.end()) extra.push_back(outer);
  }
  auto found = function_index_.find(key);
  size_t index =
      found != function_index_.end() ? found->second : lower_function_body(eqn, key, sources);
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
  for (ir::ValueId v : extra) call.inputs.push_back(use(v));
  for (const Atom& out : eqn.outputs) {
    Aval ir_type = packed(out.aval);  // complex outputs are carried packed
    ir::ValueId v = new_value(name, &ir_type);
    call.outputs.push_back(use(v));
    if (!out.dropped) scope.env[out.var] = v;
  }
  call.name = unique_name(name);
  current()->graph->nodes.push_back(std::move(call));
  int64_t& version = model.domain_opsets[domain];
  version = std::max<int64_t>(version, 1);
}

}  // namespace jaxonnx
