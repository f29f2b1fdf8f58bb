// The conversion pipeline (converter.hpp): lowering through the plugins
// (lowering.cpp), the optimizer or pruning, and the export.
#include "jaxonnx/core/converter.hpp"

#include <chrono>

#include "jaxonnx/core/passes.hpp"
#include "lowering.hpp"

namespace jaxonnx {
namespace {

// The rules the fuse pass may apply: by the fusion option's numerics, and
// none that may emit an op the target refuses or an op of a domain it does
// not run.
std::vector<const RuleInfo*> selected_rules(const Registry& registry, const ConvertOptions& options,
                                           const sdk::targets::Profile& profile) {
  std::vector<const RuleInfo*> out;
  if (options.fusion == ConvertOptions::Fusion::kNone) return out;
  for (const RuleInfo* r : registry.rules()) {
    if (options.fusion == ConvertOptions::Fusion::kExact && r->numerics != JXO_NUMERICS_EXACT) continue;
    bool refused = false;
    for (const std::string& op : r->onnx_ops) {
      const sdk::targets::Lack* lack = sdk::targets::lack(profile, op);
      refused = refused || (lack && lack->refused);
      // A domain-qualified op ("com.microsoft.X") of a domain the target does not run.
      const size_t dot = op.rfind('.');
      refused = refused || (dot != std::string::npos &&
                            sdk::targets::refuses_domain(profile, std::string_view(op).substr(0, dot)));
    }
    if (!refused) out.push_back(r);
  }
  return out;
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
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  PhaseTimes ignored;
  PhaseTimes& times = options.times ? *options.times : ignored;
  auto start = Clock::now();
  ir::Model model = lower_to_ir(program, registry, options);
  if (passes::verify_enabled()) passes::verify(model.graph, "after lowering");
  times.lower = since(start);
  start = Clock::now();
  if (options.inline_functions) passes::inline_functions(model);
  if (options.optimize) {
    passes::ManagerOptions passes_options;
    passes_options.dump_dir = options.dump_ir_dir;
    passes_options.pass_seconds = &times.per_pass;
    passes_options.poll = options.poll;
    passes_options.target = &target_profile(options.target);
    passes_options.rules = selected_rules(registry, options, *passes_options.target);
    passes::optimize(model, passes_options);
  } else {
    prune(model);
  }
  times.passes = since(start);
  start = Clock::now();
  std::string bytes = export_onnx(model, options.external_data, options.data_files);
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
