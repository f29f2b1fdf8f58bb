// The pass manager: runs a pipeline over a graph and all its subgraphs until
// nothing changes or the round cap is reached, optionally dumping the graph
// around every pass run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "jaxonnx/core/error.hpp"
#include "jaxonnx/core/passes.hpp"

namespace jaxonnx::passes {
namespace {

// Innermost graphs first: a subgraph that stops capturing a value makes
// that value free for the enclosing graph's passes in the same round.
bool run_everywhere(Pass& pass, ir::Graph& g) {
  bool changed = false;
  for (ir::Node& n : g.nodes)
    for (ir::Attribute& a : n.attrs)
      if (a.graph) changed = run_everywhere(pass, *a.graph) || changed;
  return pass.run(g) || changed;
}

// The first graph, innermost first as the passes visit them, where one of
// `properties` does not hold: "graph 'body': 'no dead nodes': node #3 ...".
std::string violation_everywhere(const Properties& properties, const ir::Graph& g) {
  for (const ir::Node& n : g.nodes)
    for (const ir::Attribute& a : n.attrs)
      if (a.graph)
        if (std::string v = violation_everywhere(properties, *a.graph); !v.empty()) return v;
  std::string v = first_violation(properties, g);
  return v.empty() ? v : "graph '" + g.name + "': " + v;
}

// Nodes in `g` and every graph nested in its nodes.
int64_t node_count(const ir::Graph& g) {
  int64_t n = static_cast<int64_t>(g.nodes.size());
  for (const ir::Node& node : g.nodes)
    for (const ir::Attribute& a : node.attrs)
      if (a.graph) n += node_count(*a.graph);
  return n;
}

}  // namespace

PassManager::PassManager(Pipeline pipeline, ManagerOptions options)
    : pipeline_(std::move(pipeline)), options_(std::move(options)) {}

int PassManager::run(ir::Graph& graph) {
  auto dump = [&](int round, const char* when, const Pass& pass) {
    if (options_.dump_dir.empty()) return;
    std::filesystem::create_directories(options_.dump_dir);
    char file[160];
    std::snprintf(file, sizeof file, "%03d_r%d_%s_%s.txt", dumps_++, round, when, pass.name());
    std::filesystem::path path = std::filesystem::path(options_.dump_dir) / file;
    std::ofstream out(path, std::ios::binary);
    out << "# " << pass.name() << " needs: " << names(pass.needs()) << "\n# " << pass.name()
        << " guarantees: " << names(pass.guarantees()) << "\n"
        << ir::to_text(graph);
    if (!out) throw ConversionError("cannot write the IR dump " + path.string());
  };
  // Each pass's seconds and the nodes it removed: one entry per pass however
  // many graphs this manager runs over (function bodies, then the main graph).
  auto entries = [&](auto& all, auto zero) {
    std::vector<size_t> at;  // per pipeline pass, its index in `all`
    for (const std::unique_ptr<Pass>& pass : pipeline_) {
      auto it = std::find_if(all.begin(), all.end(), [&](const auto& e) { return e.first == pass->name(); });
      at.push_back(static_cast<size_t>(it - all.begin()));
      if (it == all.end()) all.emplace_back(pass->name(), zero);
    }
    return at;
  };
  std::vector<std::pair<std::string, double>>* seconds = options_.pass_seconds;
  std::vector<size_t> timed, removed;
  if (seconds) timed = entries(*seconds, 0.0);
  if (options_.facts) removed = entries(options_.facts->pass_nodes_removed, int64_t{0});
  for (int round = 1; round <= options_.max_rounds; ++round) {
    bool changed = false;
    for (size_t k = 0; k < pipeline_.size(); ++k) {
      const Pass& pass = *pipeline_[k];
      if (options_.poll) options_.poll();
      const bool checked = verify_enabled();
      const std::string which =
          "pass '" + std::string(pass.name()) + "' (round " + std::to_string(round) + ")";
      if (checked)
        if (std::string unmet = violation_everywhere(pass.needs(), graph); !unmet.empty())
          throw ConversionError("internal error: " + which + " needs what does not hold before it "
                                "runs: " + unmet + " (a jaxonnx bug; please report it)");
      dump(round, "before", pass);
      auto start = std::chrono::steady_clock::now();
      const int64_t nodes_before = removed.empty() ? 0 : node_count(graph);
      changed = run_everywhere(*pipeline_[k], graph) || changed;
      if (!removed.empty())
        options_.facts->pass_nodes_removed[removed[k]].second += nodes_before - node_count(graph);
      if (checked) {
        verify(graph, "after " + which);
        if (std::string unmet = violation_everywhere(pass.guarantees(), graph); !unmet.empty())
          throw ConversionError("internal error: " + which + " broke its guarantee: " + unmet +
                                " (a jaxonnx bug; please report it)");
      }
      if (seconds)
        (*seconds)[timed[k]].second +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      dump(round, "after", pass);
    }
    if (!changed) return round;
  }
  return options_.max_rounds;
}

namespace {
// Where the fuse pass goes: after the passes that tidy what it matches, before
// rows (which flattens what it fused) and dce (which removes what it leaves unread).
Pipeline::iterator before_rows(Pipeline& p) {
  return std::find_if(p.begin(), p.end(), [](const std::unique_ptr<Pass>& pass) {
    return std::string(pass->name()) == "rows";
  });
}
}  // namespace

Pipeline default_pipeline(int64_t opset) {
  Pipeline p;
  p.push_back(no_op_elimination());
  p.push_back(transpose_folding());
  p.push_back(constant_folding());
  p.push_back(deduplication());
  p.push_back(token_rows(opset));
  p.push_back(dead_code_elimination());
  return p;
}

Pipeline all_passes() {
  static const std::vector<ir::Function> kNoFunctions;
  Pipeline p = default_pipeline();
  p.insert(before_rows(p), fuse({}, 0));
  p.push_back(inlining(kNoFunctions));
  return p;
}

// Each function body is optimized on its own, then the main graph; a call
// site is an opaque node of the function's domain everywhere. Functions no
// call reaches any more are dropped.
void optimize(ir::Model& model, const ManagerOptions& options) {
  Pipeline pipeline = default_pipeline(model.opset);
  if (!options.rules.empty())
    pipeline.insert(before_rows(pipeline),
                    fuse(options.rules, model.opset, options.target, options.facts));
  PassManager manager(std::move(pipeline), options);
  for (ir::Function& f : model.functions) manager.run(*f.body);
  manager.run(model.graph);
  ir::drop_uncalled_functions(model);
}

}  // namespace jaxonnx::passes
