// The lowering driver: walks a closed jaxpr and hands each equation to the
// plugin that claims its primitive, with guardrails around every call.
#include "lowering.hpp"
#include "jaxonnx/core/converter.hpp"

#include <cctype>
#include <cstdint>
#include <set>

#include "plugin_call.hpp"

namespace jaxonnx {
namespace {

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

std::string join_avals(const std::vector<Atom>& atoms) {
  std::string s;
  for (size_t i = 0; i < atoms.size(); ++i) s += (i ? ", " : "") + atoms[i].aval.str();
  return s.empty() ? "none" : s;
}

std::string literal_key(const Tensor& t) {
  std::string key(reinterpret_cast<const char*>(&t.dtype), sizeof(t.dtype));
  for (int64_t d : t.dims) key.append(reinterpret_cast<const char*>(&d), sizeof(d));
  key += '|';
  key.append(static_cast<const char*>(t.data), t.nbytes);
  return key;
}

}  // namespace

Lowering::Lowering(const Registry& registry, const ConvertOptions& options)
    : target(target_profile(options.target)), registry_(registry), options_(options) {
  auto root = std::make_unique<GraphScope>();
  root->graph = &model.graph;
  open_.push_back(root.get());
  scopes_.push_back(std::move(root));
}

// -- graph scopes

ir::ValueId Lowering::add_local(GraphScope* s, const std::string& name, const Aval* type) {
  ir::ValueId local = s->graph->add_value(name);
  if (type && type->dtype != JXO_DTYPE_UNDEFINED) {
    s->graph->values[local].has_type = true;
    s->graph->values[local].type = *type;
  }
  handles_.push_back({s, local});
  return static_cast<ir::ValueId>(handles_.size() - 1);
}

std::string Lowering::scope_name(const GraphScope* s) const {
  if (s->function) return "function '" + s->graph->name + "'";
  return s->parent ? "subgraph '" + s->graph->name + "'" : "the main graph";
}

GraphScope* Lowering::boundary() const {
  GraphScope* s = current();
  while (s->parent) s = s->parent;
  return s;
}

bool Lowering::visible(ir::ValueId h) const {
  const GraphScope* owner = handles_[h].scope;
  for (const GraphScope* s = current(); s; s = s->parent)
    if (s == owner) return s->open;
  return false;
}

ir::ValueId Lowering::use_in(ir::ValueId h, GraphScope* s) {
  const Handle& where = handles_[h];
  if (where.scope == s) return where.local;
  if (!s->parent) {
    throw ConversionError("value '" + value(h).name + "' belongs to " + scope_name(where.scope) +
                          (where.scope->open ? "" : ", which is closed") + "; only values of " +
                          scope_name(s) + " can be used there");
  }
  bool enclosing = false;
  for (const GraphScope* p = s->parent; p; p = p->parent) enclosing = enclosing || p == where.scope;
  if (!enclosing || !where.scope->open)
    throw ConversionError("value '" + value(h).name + "' belongs to " + scope_name(where.scope) +
                          (where.scope->open ? "" : ", which is already closed") +
                          ", not to a scope enclosing " + scope_name(s) +
                          "; a value computed inside one subgraph cannot be used by another");
  auto it = s->captured.find(h);
  if (it != s->captured.end()) return it->second;
  ir::ValueId outer = use_in(h, s->parent);
  const ir::Value& v = value(h);
  ir::ValueId inner = s->graph->add_value(v.name);
  s->graph->values[inner].has_type = v.has_type;
  s->graph->values[inner].type = v.type;
  s->graph->captures.push_back({inner, outer});
  s->captured.emplace(h, inner);
  return inner;
}

GraphScope* Lowering::begin_graph(const std::string& name, const void* opener) {
  auto s = std::make_unique<GraphScope>();
  s->owned = std::make_shared<ir::Graph>();
  s->graph = s->owned.get();
  s->graph->name = unique_name(name.empty() ? std::string("subgraph") : name);
  s->parent = current();
  s->opener = opener;
  open_.push_back(s.get());
  scopes_.push_back(std::move(s));
  return open_.back();
}

ir::ValueId Lowering::add_input(const std::string& hint, const Aval& type) {
  GraphScope* s = current();
  Aval ir_type = packed(type);  // a complex input is carried packed
  ir::ValueId h = add_local(s, unique_name(hint.empty() ? std::string("in") : hint), &ir_type);
  s->graph->inputs.push_back(handles_[h].local);
  return h;
}

// A fresh value equal to `h`, made by lowering JAX's `copy` primitive through
// the registry (the core names no op).
ir::ValueId Lowering::copy_value(ir::ValueId h, Scope& env, int64_t salt) {
  const ir::Value& v = value(h);
  if (!v.has_type)
    throw ConversionError("subgraph output '" + v.name + "' has no known type");
  Atom in;
  in.var = INT64_MAX / 2 + 2 * salt;  // beyond any imported var id
  in.aval = v.type;
  Atom out = in;
  out.var = in.var + 1;
  env.env[in.var] = h;
  Eqn copy;
  copy.primitive = "copy";
  copy.inputs = {in};
  copy.outputs = {out};
  copy.params.kind = JXO_PARAM_RECORD;
  lower_eqn(copy, env);
  ir::ValueId result = env.env[out.var];
  env.env.erase(in.var);
  env.env.erase(out.var);
  return result;
}

GraphScope* Lowering::end_graph(const std::vector<ir::ValueId>& outputs, Scope& env) {
  GraphScope* s = current();
  std::set<ir::ValueId> made, taken;
  for (const ir::Node& n : s->graph->nodes)
    for (ir::ValueId v : n.outputs) made.insert(v);
  std::vector<ir::ValueId> locals;
  for (ir::ValueId h : outputs) {
    ir::ValueId local = use(h);
    if (!made.count(local) || taken.count(local)) local = use(copy_value(h, env, ++copies_));
    if (!s->graph->values[local].has_type)
      throw ConversionError("output '" + s->graph->values[local].name + "' of " + scope_name(s) +
                            " has no known type");
    taken.insert(local);
    locals.push_back(local);
  }
  s->graph->outputs = std::move(locals);
  s->open = false;
  s->memo.clear();
  open_.pop_back();
  return s;
}

size_t Lowering::close_abandoned(size_t depth) {
  size_t n = 0;
  while (open_.size() > depth) {
    open_.back()->open = false;
    open_.back()->memo.clear();
    open_.pop_back();
    ++n;
  }
  return n;
}

GraphScope* Lowering::find_graph(const void* handle) const {
  for (const auto& s : scopes_)
    if (static_cast<const void*>(s.get()) == handle && s->parent) return s.get();
  return nullptr;
}

const std::unordered_set<int64_t>* Lowering::reads_of(const Jaxpr& j) {
  auto it = reads_.find(&j);
  if (it != reads_.end()) return &it->second;
  std::unordered_set<int64_t>& r = reads_[&j];
  for (const Eqn& e : j.eqns)
    for (const Atom& a : e.inputs)
      if (!a.is_literal()) r.insert(a.var);
  for (const Atom& a : j.outvars)
    if (!a.is_literal()) r.insert(a.var);
  return &r;
}

// A name no other value, node or graph has: `hint`, else hint_1, hint_2, ...
// skipping any taken, since a user's name (an input called "add_1") may look
// like a generated one.
std::string Lowering::unique_name(const std::string& hint) {
  int64_t& n = name_counts_[hint];
  std::string name = hint;
  while (taken_names_.count(name)) name = hint + "_" + std::to_string(++n);
  taken_names_.insert(name);
  return name;
}

ir::ValueId Lowering::new_value(const std::string& hint, const Aval* type) {
  return add_local(current(), unique_name(hint), type);
}

ir::ValueId Lowering::constant(std::shared_ptr<const Tensor> tensor, const std::string& hint) {
  tensor = packed(std::move(tensor));  // a complex constant is carried packed
  std::vector<Dim> dims;
  for (int64_t d : tensor->dims) dims.push_back(Dim{d, {}});
  Aval type(tensor->dtype, std::move(dims));
  // Constants live in the main graph or function body; subgraphs capture them.
  GraphScope* home = boundary();
  ir::ValueId v = add_local(home, unique_name(hint), &type);
  home->graph->initializers.push_back({handles_[v].local, std::move(tensor)});
  return v;
}

ir::ValueId Lowering::atom_value(const Atom& atom, const Scope& scope) {
  if (atom.is_literal()) {
    std::string key = literal_key(*atom.literal);
    auto it = literal_cache_.find(key);
    if (it != literal_cache_.end()) return it->second;
    ir::ValueId v = constant(atom.literal, "literal");
    literal_cache_.emplace(std::move(key), v);
    return v;
  }
  auto it = scope.env.find(atom.var);
  return it == scope.env.end() ? ir::kNoValue : it->second;
}

// A declared type agrees with JAX's aval: same rank, equal static dims. A
// symbolic dim may be spelled differently ("2*B", "B*2") or be a static dim
// the plugin could not know, so only static-vs-static disagreements count.
static bool same_shape(const Aval& declared, const Aval& jax) {
  if (!declared.known_rank || !jax.known_rank) return true;
  if (declared.dims.size() != jax.dims.size()) return false;
  for (size_t k = 0; k < jax.dims.size(); ++k)
    if (declared.dims[k].is_static() && jax.dims[k].is_static() &&
        declared.dims[k].value != jax.dims[k].value)
      return false;
  return true;
}

void Lowering::bind_output(const Eqn& eqn, Scope& scope, size_t i, ir::ValueId v) {
  const std::string what = "output " + std::to_string(i);
  if (i >= eqn.outputs.size())
    throw InvalidArgument(what + " out of range (the equation has " +
                          std::to_string(eqn.outputs.size()) + ")");
  if (!valid(v)) throw InvalidArgument("bind_output got an invalid value handle");
  if (!visible(v))
    throw InvalidArgument(what + " was bound to value '" + value(v).name + "' of " +
                          scope_name(scope_of(v)) +
                          ", which is closed or does not enclose the equation's scope");
  const Atom& out = eqn.outputs[i];
  ir::Value& bound = value(v);
  // A complex output is carried packed: float[..., 2] (types.hpp).
  const Aval want = packed(out.aval);
  const std::string jax =
      out.aval.str() + (want.dtype != out.aval.dtype ? ", carried as " + want.str() : "");
  if (bound.has_type && bound.type.dtype != want.dtype)
    throw InvalidArgument(what + " was bound to a " + dtype_name(bound.type.dtype) +
                          " value, but JAX's output is " + jax);
  if (bound.has_type && !same_shape(bound.type, want))
    throw InvalidArgument(what + " was bound to value '" + bound.name + "' declared " +
                          bound.type.str() + ", but JAX's output is " + jax);
  if (!bound.has_type) {
    bound.has_type = true;
    bound.type = want;
  }
  if (!out.dropped) scope.env[out.var] = v;
}

ir::ValueId Lowering::memo_get(const std::string& key) const {
  for (const GraphScope* s = current(); s; s = s->parent) {
    auto it = s->memo.find(key);
    if (it != s->memo.end()) return it->second;
  }
  return ir::kNoValue;
}

void Lowering::memo_put(const std::string& key, ir::ValueId v) {
  if (valid(v) && visible(v)) current()->memo[key] = v;
}

std::string Lowering::describe(const Eqn& eqn) const {
  std::string s = "(inputs: " + join_avals(eqn.inputs) + ")";
  if (options_.describe_source && eqn.source >= 0) {
    try {
      std::string where = options_.describe_source(eqn.source);
      if (!where.empty()) s += " at " + where;
    } catch (...) {
      // A source line is a courtesy; never let it hide the real error.
    }
  }
  return s;
}

// Nodes of a nested equation (a scan body's, say) are stamped by their own
// lower_eqn first; a key already set is kept.
void Lowering::stamp_provenance(const Eqn& eqn, const LoadedPlugin& plugin, ir::Graph& graph,
                                 size_t first) {
  std::vector<std::pair<std::string, std::string>> props = {
      {"pkg.jaxonnx.primitive", eqn.primitive}, {"pkg.jaxonnx.plugin", plugin.name}};
  if (eqn.source >= 0) {
    auto more = options_.provenance(eqn.source);
    props.insert(props.end(), more.begin(), more.end());
  }
  // Nodes a lowering put straight into the subgraphs it built count as its own.
  std::function<void(ir::Node&)> stamp = [&](ir::Node& node) {
    for (const auto& [key, value] : props) {
      bool set = false;
      for (const auto& kv : node.metadata) set = set || kv.first == key;
      if (!set) node.metadata.emplace_back(key, value);
    }
    for (ir::Attribute& a : node.attrs)
      if (a.graph)
        for (ir::Node& inner : a.graph->nodes) stamp(inner);
  };
  for (size_t i = first; i < graph.nodes.size(); ++i) stamp(graph.nodes[i]);
}

// Every failure of an equation's lowering is an EquationError: its message is
// complete, and a plugin that asked for this lowering (lower_jaxpr) gets it as
// JXO_NESTED_FAILURE, to pass on unchanged.
void Lowering::lower_eqn(const Eqn& eqn, Scope& scope) {
  try {
    lower_eqn_unchecked(eqn, scope);
  } catch (const EquationError&) {
    throw;
  } catch (const ConversionError& e) {
    throw EquationError(e.what());
  }
}

void Lowering::lower_eqn_unchecked(const Eqn& eqn, Scope& scope) {
  if (eqn.primitive.rfind(kFunctionPrefix, 0) == 0) {
    if (options_.facts) ++options_.facts->lowered[{eqn.primitive, ""}];  // the core's own
    return lower_function_call(eqn, scope);
  }
  const PrimitiveInfo* prim = registry_.find(eqn.primitive);
  if (!prim) {
    std::string dirs;
    for (const std::string& d : registry_.dirs()) dirs += "\n    " + d;
    std::string skipped;
    for (const Diagnostic& d : registry_.diagnostics())
      skipped += "\n    " + d.path + ": " + d.reason;
    throw ConversionError("no plugin lowers the JAX primitive '" + eqn.primitive + "' " +
                          describe(eqn) + ".\n  Plugin folders searched:" +
                          (dirs.empty() ? std::string(" none") : dirs) +
                          (skipped.empty() ? "" : "\n  Files skipped:" + skipped) +
                          "\n  Add a plugin that claims '" + eqn.primitive +
                          "' to one of these folders, JAXONNX_PLUGIN_PATH or plugin_dirs=.");
  }
  const LoadedPlugin& plugin = *prim->plugin;
  for (size_t i = 0; i < eqn.inputs.size(); ++i)
    if (!eqn.inputs[i].is_literal() && atom_value(eqn.inputs[i], scope) == ir::kNoValue)
      throw ConversionError("internal error: input " + std::to_string(i) + " of '" +
                            eqn.primitive + "' " + describe(eqn) + " has no value before lowering");

  jxo_lowering frame{this, &scope, &eqn, prim};
  size_t depth_before = depth();
  ir::Graph* graph = current()->graph;
  size_t nodes_before = graph->nodes.size();
  std::optional<Failure> failure = call_plugin("lower", plugin.name, eqn.primitive, [&] {
    return prim->lower(host_api(), &frame, prim->user_data);
  });
  if (size_t left = close_abandoned(depth_before); left && !failure)
    failure = Failure{JXO_ERROR, std::to_string(left) +
                                     " subgraph scope(s) opened by graph_begin were never closed "
                                     "with graph_end"};
  if (failure) {
    if (failure->code == JXO_NESTED_FAILURE) throw EquationError(failure->message);
    std::string hint;
    if (failure->code == JXO_UNSUPPORTED_OPSET)
      hint = " (the model targets opset " + std::to_string(model.opset) +
             "; a newer opset may lower it)";
    if (failure->code == JXO_INVALID_ARGUMENT)
      hint = " (the plugin called the host with an argument it cannot use: a bug in plugin '" +
             plugin.name + "')";
    throw ConversionError("plugin '" + plugin.name + "' failed to lower '" + eqn.primitive + "' " +
                          describe(eqn) + ": " + failure->message + hint);
  }
  if (options_.provenance) stamp_provenance(eqn, plugin, *graph, nodes_before);
  if (options_.facts) ++options_.facts->lowered[{eqn.primitive, plugin.name}];
  for (size_t i = 0; i < eqn.outputs.size(); ++i) {
    const Atom& out = eqn.outputs[i];
    bool used = !out.dropped && (!scope.reads || scope.reads->count(out.var));
    if (used && scope.env.find(out.var) == scope.env.end())
      throw ConversionError("plugin '" + plugin.name + "' lowered '" + eqn.primitive + "' " +
                            describe(eqn) + " but left output " + std::to_string(i) + " (" +
                            out.aval.str() + ") unbound; a lowering must bind every output");
  }
}

std::vector<ir::ValueId> Lowering::lower_closed(const ClosedJaxpr& j,
                                                 const std::vector<ir::ValueId>& ins) {
  Scope scope;
  scope.reads = reads_of(j.jaxpr);
  for (size_t i = 0; i < j.jaxpr.invars.size(); ++i) scope.env[j.jaxpr.invars[i].var] = ins[i];
  for (size_t i = 0; i < j.jaxpr.constvars.size(); ++i) {
    const Tensor* key = j.consts[i].get();
    auto it = const_cache_.find(key);
    ir::ValueId v = it != const_cache_.end() ? it->second : constant(j.consts[i], "const");
    const_cache_[key] = v;
    scope.env[j.jaxpr.constvars[i].var] = v;
  }
  for (const Eqn& eqn : j.jaxpr.eqns) lower_eqn(eqn, scope);
  std::vector<ir::ValueId> outs;
  for (const Atom& a : j.jaxpr.outvars) outs.push_back(atom_value(a, scope));
  return outs;
}

ir::Model Lowering::run(const ClosedJaxpr& program) {
  const Jaxpr& jaxpr = program.jaxpr;
  model.opset = options_.opset;
  model.graph.name = options_.model_name;
  model.producer_version = options_.producer_version;
  if (options_.opset < kMinOpset)
    throw ConversionError("opset " + std::to_string(options_.opset) +
                          " is not supported; jaxonnx lowers to opset " + std::to_string(kMinOpset) +
                          " or newer");

  auto name_of = [](const std::vector<std::string>& names, size_t i, const char* prefix) {
    return i < names.size() && !names[i].empty() ? names[i] : prefix + std::to_string(i);
  };
  // Reserve the interface names so no intermediate value takes one; the
  // user's own names first, so a generated name (in_0, add_1) never takes
  // one of them.
  auto given = [](const std::vector<std::string>& names, size_t i) {
    return i < names.size() && !names[i].empty();
  };
  std::vector<std::string> in_names(jaxpr.invars.size());
  output_names_.resize(jaxpr.outvars.size());
  for (int user = 1; user >= 0; --user) {
    for (size_t i = 0; i < jaxpr.invars.size(); ++i)
      if (given(options_.input_names, i) == bool(user))
        in_names[i] = unique_name(name_of(options_.input_names, i, "in_"));
    for (size_t i = 0; i < jaxpr.outvars.size(); ++i)
      if (given(options_.output_names, i) == bool(user))
        output_names_[i] = unique_name(name_of(options_.output_names, i, "out_"));
  }

  std::vector<ir::ValueId> ins;
  for (size_t i = 0; i < jaxpr.invars.size(); ++i) {
    const Aval& aval = jaxpr.invars[i].aval;
    Aval ir_type = packed(aval);  // a complex input is a float[..., 2] model input
    ir::ValueId v = add_local(root(), in_names[i], &ir_type);
    model.graph.inputs.push_back(handles_[v].local);
    ins.push_back(v);
    for (size_t axis = 0; axis < aval.dims.size(); ++axis)
      if (is_identifier(aval.dims[axis].symbol))
        symbol_origins.emplace(aval.dims[axis].symbol,
                               std::make_pair(v, static_cast<int64_t>(axis)));
  }

  Scope scope;
  scope.reads = reads_of(jaxpr);
  for (size_t i = 0; i < jaxpr.invars.size(); ++i) scope.env[jaxpr.invars[i].var] = ins[i];
  for (size_t i = 0; i < jaxpr.constvars.size(); ++i)
    scope.env[jaxpr.constvars[i].var] = constant(program.consts[i], "const");
  for (const Eqn& eqn : jaxpr.eqns) {
    if (options_.poll) options_.poll();  // top level only: never inside a plugin's call
    lower_eqn(eqn, scope);
  }
  bind_outputs(jaxpr, scope);
  return std::move(model);
}

// Each graph output must be a distinct value made by a node. An output that is
// an input, a constant, or a repeat goes through the plugin that lowers JAX's
// own `copy` primitive, so the core stays free of op names.
void Lowering::bind_outputs(const Jaxpr& jaxpr, Scope& scope) {
  std::set<ir::ValueId> taken(model.graph.inputs.begin(), model.graph.inputs.end());
  for (const ir::Initializer& init : model.graph.initializers) taken.insert(init.value);
  for (size_t i = 0; i < jaxpr.outvars.size(); ++i) {
    const Atom& out = jaxpr.outvars[i];
    ir::ValueId v = out.is_literal() ? ir::kNoValue : use(atom_value(out, scope));
    if (out.is_literal() || taken.count(v)) {
      Eqn copy;
      copy.primitive = "copy";
      copy.inputs = {out};
      Atom fresh;
      fresh.var = INT64_MAX - static_cast<int64_t>(i);  // beyond any imported var id
      fresh.aval = out.aval;
      copy.outputs = {fresh};
      copy.params.kind = JXO_PARAM_RECORD;
      lower_eqn(copy, scope);
      v = use(scope.env[fresh.var]);
    }
    taken.insert(v);
    ir::Value& value = model.graph.values[v];
    value.name = output_names_[i];
    value.has_type = true;
    value.type = packed(out.aval);  // JAX's aval is the contract for outputs (complex packed)
    model.graph.outputs.push_back(v);
  }
}

}  // namespace jaxonnx
