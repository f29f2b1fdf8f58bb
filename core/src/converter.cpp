// The conversion pipeline (converter.hpp): lowering through the plugins
// (lowering.cpp), the optimizer or pruning, and the export.
#include "jaxonnx/core/converter.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "jaxonnx/core/passes.hpp"
#include "lowering.hpp"
#include "onnx_schema.hpp"

namespace jaxonnx {
namespace {

// The rules the fuse pass may apply: by the fusion option's numerics, and
// none that may emit an op the target refuses or an op of a domain it does
// not run.
std::vector<const RuleInfo*> selected_rules(const Registry& registry, const ConvertOptions& options,
                                           const sdk::targets::Profile& profile,
                                           ConversionFacts* facts) {
  std::vector<const RuleInfo*> out;
  if (options.fusion == ConvertOptions::Fusion::kNone) return out;
  for (const RuleInfo* r : registry.rules()) {
    if (options.fusion == ConvertOptions::Fusion::kExact && r->numerics != JXO_NUMERICS_EXACT) continue;
    if (options.fusion != ConvertOptions::Fusion::kApproximate && r->numerics == JXO_NUMERICS_APPROXIMATE)
      continue;
    bool refused = false;
    for (const std::string& op : r->onnx_ops) {
      const sdk::targets::Lack* lack = sdk::targets::lack(profile, op);
      // A domain-qualified op ("com.microsoft.X") of a domain the target does not run.
      const size_t dot = op.rfind('.');
      const bool refuses = (lack && lack->refused) ||
                           (dot != std::string::npos &&
                            sdk::targets::refuses_domain(profile, std::string_view(op).substr(0, dot)));
      if (refuses && !refused && facts) facts->rules_skipped.emplace_back(r->plugin->name, r->name, op);
      refused = refused || refuses;
    }
    if (!refused) out.push_back(r);
  }
  return out;
}

// Nodes per op type ("domain:op" outside the default domain) of `g` and its subgraphs.
void count_ops(const ir::Graph& g, std::map<std::string, int64_t>& out) {
  for (const ir::Node& n : g.nodes) {
    ++out[n.domain.empty() || n.domain == "ai.onnx" ? n.op_type : n.domain + ":" + n.op_type];
    for (const ir::Attribute& a : n.attrs)
      if (a.graph) count_ops(*a.graph, out);
  }
}

void count_ops(const ir::Model& model, std::map<std::string, int64_t>& out) {
  count_ops(model.graph, out);
  for (const ir::Function& f : model.functions) count_ops(*f.body, out);
}

void default_domain_ops(const ir::Graph& g, std::set<std::string>& out) {
  for (const ir::Node& n : g.nodes) {
    if (n.domain.empty() || n.domain == "ai.onnx") out.insert(n.op_type);
    for (const ir::Attribute& a : n.attrs)
      if (a.graph) default_domain_ops(*a.graph, out);
  }
}

// Opsets below kMinOpset: `model`, lowered at kMinOpset, is declared at
// `opset` when every default-domain operator it uses (in subgraphs and
// function bodies too) has there the form it has at kMinOpset; otherwise a
// ConversionError names each operator and the opset its form needs.
void declare_older_opset(ir::Model& model, int64_t opset) {
  std::set<std::string> ops;
  default_domain_ops(model.graph, ops);
  for (const ir::Function& f : model.functions) default_domain_ops(*f.body, ops);
  std::vector<std::pair<int64_t, std::string>> need;  // (the opset its form needs, op)
  for (const std::string& op : ops) {
    const int64_t emitted = onnx_op_form(op, kMinOpset);
    if (onnx_op_form(op, opset) != emitted) need.emplace_back(emitted, op);
  }
  if (!need.empty()) {
    std::sort(need.begin(), need.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    std::string listed;
    for (const auto& [since, op] : need)
      listed += (listed.empty() ? "" : ", ") + op + " (opset " + std::to_string(since) + ")";
    const std::string at = "opset " + std::to_string(opset);
    throw ConversionError(at + ": this model needs operators in forms newer than " + at + ": " +
                          listed + "; pass opset=" + std::to_string(need.front().first) +
                          " or newer (" + std::to_string(kMinOpset) +
                          " is the oldest jaxonnx lowers to; below it a model converts only when "
                          "every operator kept its form)");
  }
  model.opset = opset;
}

}  // namespace

const sdk::targets::Profile& target_profile(const std::string& name) {
  const sdk::targets::Profile* p = sdk::targets::find(name);
  if (!p) {
    std::string known;
    for (const sdk::targets::Profile& q : sdk::targets::kProfiles)
      known += (known.empty() ? "" : ", ") + std::string("\"") + std::string(q.name) + "\"";
    throw ConversionError("unknown target \"" + name + "\"; the targets are " + known);
  }
  return *p;
}

ir::Model lower_to_ir(const ClosedJaxpr& program, const Registry& registry,
                      const ConvertOptions& options) {
  Lowering conv(registry, options);
  return conv.run(program);
}

std::string convert(const ClosedJaxpr& program, const Registry& registry,
                    const ConvertOptions& options) {
  return convert_serialized(program, registry, options).str();
}

SerializedModel convert_serialized(const ClosedJaxpr& program, const Registry& registry,
                                   const ConvertOptions& options) {
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  PhaseTimes ignored;
  PhaseTimes& times = options.times ? *options.times : ignored;
  auto start = Clock::now();
  ir::Model model;
  if (options.opset < kMinOpset) {  // lowered at kMinOpset, declared at options.opset
    ConvertOptions lowered = options;
    lowered.opset = kMinOpset;
    model = lower_to_ir(program, registry, lowered);
  } else {
    model = lower_to_ir(program, registry, options);
  }
  if (passes::verify_enabled()) passes::verify(model.graph, "after lowering");
  if (options.facts) count_ops(model, options.facts->nodes_lowered);
  times.lower = since(start);
  start = Clock::now();
  if (options.inline_functions) passes::inline_functions(model);
  if (options.optimize) {
    passes::ManagerOptions passes_options;
    passes_options.dump_dir = options.dump_ir_dir;
    passes_options.pass_seconds = &times.per_pass;
    passes_options.poll = options.poll;
    passes_options.target = &target_profile(options.target);
    passes_options.rules = selected_rules(registry, options, *passes_options.target, options.facts);
    passes_options.facts = options.facts;
    passes::optimize(model, passes_options);
  } else {
    prune(model);
  }
  times.passes = since(start);
  if (options.opset < kMinOpset) declare_older_opset(model, options.opset);
  if (options.facts) count_ops(model, options.facts->nodes_final);
  start = Clock::now();
  SerializedModel bytes = serialize_onnx(model, options.external_data, options.data_files);
  times.export_onnx = since(start);
  return bytes;
}


void prune(ir::Graph& graph) {
  passes::Pipeline dce;
  dce.push_back(passes::dead_code_elimination());
  passes::PassManager(std::move(dce)).run(graph);
}

void prune(ir::Model& model) {
  for (ir::Function& f : model.functions) prune(*f.body);
  prune(model.graph);
  ir::drop_uncalled_functions(model);
}

}  // namespace jaxonnx
