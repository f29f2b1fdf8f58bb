#include "plugin_descriptor.hpp"

#include "abi_read.hpp"
#include "jaxonnx/core/error.hpp"
#include "utf8.hpp"

namespace jaxonnx {
namespace {

std::string str(jxo_str s) { return s.size && s.data ? std::string(s.data, s.size) : std::string(); }

// A string a plugin hands over in its descriptor: a NULL pointer with a
// nonzero size, or bytes that are not UTF-8, make the plugin invalid.
std::string checked_str(jxo_str s, const std::string& what) {
  if (s.size && !s.data) throw PluginLoadError(what + " is a NULL pointer with size " +
                                               std::to_string(s.size));
  std::string out = str(s);
  if (!is_utf8(out)) throw PluginLoadError(what + " is not UTF-8");
  return out;
}

// A descriptor struct through the host's one reader (abi_read.hpp), which
// copies it to its struct_size; a struct too small to be any minor's is invalid.
template <typename T>
T read_desc(const T* p, const std::string& what) {
  try {
    return abi::read_struct(p, what);
  } catch (const InvalidArgument& e) {
    throw PluginLoadError(std::string(e.what()) + " (truncated descriptor)");
  }
}

std::vector<std::string> strs(const jxo_str* v, size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back(str(v[i]));
  return out;
}

// A declared numerics (ABI 1.5), checked: a value this host does not know is
// an error (a newer plugin would have been refused by its minor).
int32_t numerics(int32_t v, const std::string& where) {
  if (v != JXO_NUMERICS_UNDECLARED && v != JXO_NUMERICS_FINITE && v != JXO_NUMERICS_EXACT &&
      v != JXO_NUMERICS_APPROXIMATE)
    throw PluginLoadError(where + " declares numerics " + std::to_string(v) +
                          ", which is not a JXO_NUMERICS_* value");
  return v;
}

// A binding spec's copy; `where` names it in errors.
BindingSpec binding(const jxo_binding* bp, const std::string& where) {
  const jxo_binding bc = read_desc(bp, where + "'s binding spec");
  const jxo_binding* b = &bc;
  BindingSpec spec;
  spec.target = str(b->target);
  spec.operands = strs(b->operands, b->num_operands);
  spec.params = strs(b->params, b->num_params);
  spec.when = strs(b->when, b->num_when);
  spec.leading_dims_operands = b->leading_dims_operands;
  spec.numerics = numerics(b->numerics, where + "'s binding spec for " + spec.target);
  spec.numerics_note = str(b->numerics_note);
  if (spec.target.find('.') == std::string::npos)
    throw PluginLoadError(where + " has a binding spec whose target '" + spec.target +
                          "' is not a dotted path (module.attribute)");
  for (const std::string& p : spec.params)
    if (p.find('=') == std::string::npos)
      throw PluginLoadError(where + " has a binding param '" + p + "' that is not name=expression");
  return spec;
}

// A primitive's test equation #k (ABI 1.4); `where` names the primitive in errors.
TestEqn test_eqn(const jxo_test_eqn* tp, const std::string& where, size_t k,
                 const PrimitiveInfo& info) {
  const std::string what = where + "'s test equation #" + std::to_string(k);
  const jxo_test_eqn t = read_desc(tp, what);
  auto avals = [&](const jxo_aval* const* v, size_t n, const char* kind) {
    if (n && !v) throw PluginLoadError(what + " lists " + kind + "s but no table");
    std::vector<Aval> out;
    for (size_t i = 0; i < n; ++i) {
      std::string name = what + "'s " + kind + " #" + std::to_string(i);
      try {
        out.push_back(abi::read_aval(v[i], name));
      } catch (const InvalidArgument& e) {
        throw PluginLoadError(e.what());
      }
      if (!out.back().known_rank || out.back().dtype == JXO_DTYPE_UNDEFINED)
        throw PluginLoadError(name + " needs a dtype and a rank");
    }
    return out;
  };
  TestEqn eqn{avals(t.inputs, t.num_inputs, "input"), avals(t.outputs, t.num_outputs, "output")};
  if (eqn.outputs.empty() && !info.abstract_eval)
    throw PluginLoadError(what + " gives no outputs and the primitive has no abstract eval to "
                                 "compute them");
  return eqn;
}

}  // namespace

LoadedPlugin describe_plugin(const std::string& path, const jxo_plugin_desc* dp) {
  const jxo_plugin_desc dc = read_desc(dp, "its descriptor");
  const jxo_plugin_desc* d = &dc;
  LoadedPlugin p;
  p.path = path;
  p.abi_major = d->abi_major;
  p.abi_minor = d->abi_minor;
  p.name = checked_str(d->name, "its name");
  p.version = checked_str(d->version, "its version");
  p.sdk_version = checked_str(d->sdk_version, "its SDK version");
  if (d->abi_major != JXO_ABI_MAJOR)
    throw PluginLoadError("it was built for jaxonnx ABI " + std::to_string(d->abi_major) + "." +
                          std::to_string(d->abi_minor) + "; this host speaks ABI major " +
                          std::to_string(JXO_ABI_MAJOR));
  if (d->abi_minor > JXO_ABI_MINOR)
    throw PluginLoadError("plugin '" + p.name + "' needs jaxonnx ABI 1." +
                          std::to_string(d->abi_minor) + "; this host serves ABI 1.0 to 1." +
                          std::to_string(JXO_ABI_MINOR) + " (upgrade jaxonnx)");
  if (p.name.empty()) throw PluginLoadError("its descriptor has no name");
  if (d->num_primitives && !d->primitives)
    throw PluginLoadError("it declares " + std::to_string(d->num_primitives) +
                          " primitives but no primitive table");
  for (size_t i = 0; i < d->num_primitives; ++i) {
    const jxo_primitive_desc pc = read_desc(d->primitives[i], "primitive #" + std::to_string(i));
    const jxo_primitive_desc* pd = &pc;
    PrimitiveInfo info;
    const std::string what = "primitive #" + std::to_string(i);
    info.name = checked_str(pd->name, what + "'s name");
    info.lower = pd->lower;
    info.abstract_eval = pd->abstract_eval;
    info.user_data = pd->user_data;
    if (info.name.empty() || !info.lower)
      throw PluginLoadError("primitive #" + std::to_string(i) + " has no name or no lowering");
    // Fields past the plugin's struct_size read as zero: no ops, no binding specs.
    if (pd->num_onnx_ops && !pd->onnx_ops)
      throw PluginLoadError(what + " ('" + info.name + "') lists ONNX ops but no table");
    for (size_t k = 0; k < pd->num_onnx_ops; ++k)
      info.onnx_ops.push_back(checked_str(pd->onnx_ops[k], what + "'s ONNX op"));
    info.doc_url = checked_str(pd->doc_url, what + "'s doc URL");
    info.summary = checked_str(pd->summary, what + "'s summary");
    if (pd->num_bindings && !pd->bindings)
      throw PluginLoadError(what + " ('" + info.name + "') lists binding specs but no table");
    for (size_t k = 0; k < pd->num_bindings; ++k)
      info.bindings.push_back(binding(pd->bindings[k], "primitive '" + info.name + "'"));
    if (pd->num_test_eqns && !pd->test_eqns)
      throw PluginLoadError(what + " ('" + info.name + "') lists test equations but no table");
    for (size_t k = 0; k < pd->num_test_eqns; ++k)
      info.tests.push_back(test_eqn(pd->test_eqns[k], "primitive '" + info.name + "'", k, info));
    p.primitives.push_back(std::move(info));
  }
  {  // ABI 1.2: rewrite rules (none in an older descriptor: read as zero)
    if (d->num_rules && !d->rules)
      throw PluginLoadError("its descriptor lists rewrite rules but no table");
    for (size_t i = 0; i < d->num_rules; ++i) {
      const jxo_rule_desc rc = read_desc(d->rules[i], "rewrite rule #" + std::to_string(i));
      const jxo_rule_desc* rd = &rc;
      RuleInfo rule;
      rule.name = checked_str(rd->name, "rewrite rule #" + std::to_string(i) + "'s name");
      rule.root_op = checked_str(rd->root_op, "rewrite rule #" + std::to_string(i) + "'s root op");
      rule.rewrite = rd->rewrite;
      rule.user_data = rd->user_data;
      if (rule.name.empty() || rule.root_op.empty() || !rule.rewrite)
        throw PluginLoadError("rewrite rule #" + std::to_string(i) +
                              " has no name, root op or callback");
      rule.min_opset = rd->min_opset;
      std::string what = "rewrite rule '" + rule.name + "'";
      if (rd->num_onnx_ops && !rd->onnx_ops)
        throw PluginLoadError(what + " lists ONNX ops but no table");
      for (size_t k = 0; k < rd->num_onnx_ops; ++k)
        rule.onnx_ops.push_back(checked_str(rd->onnx_ops[k], what + "'s ONNX op"));
      rule.summary = checked_str(rd->summary, what + "'s summary");
      rule.numerics = numerics(rd->numerics, what);
      rule.numerics_note = checked_str(rd->numerics_note, what + "'s numerics note");
      p.rules.push_back(std::move(rule));
    }
  }
  return p;
}

}  // namespace jaxonnx
