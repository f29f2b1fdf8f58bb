// What one conversion did, for the conversion report (to_onnx report=):
// which plugin lowered each primitive, which rewrite rules fired, what the
// target profile answered and refused, and the node counts around the
// optimizer. Filled by convert() when ConvertOptions::facts is set; gathering
// them never changes the model.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace jaxonnx {

struct ConversionFacts {
  // (primitive, plugin name) -> equations lowered. A function call site
  // (onnx_fn::...) is lowered by the core: plugin "" there. An equation of a
  // function body counts once per body, however often the function is called.
  std::map<std::pair<std::string, std::string>, int64_t> lowered;
  // (plugin, rule) -> times the fuse pass applied the rule.
  std::map<std::pair<std::string, std::string>, int64_t> rules_fired;
  // A question a lowering or rule asked the target profile (target_supports):
  // (asker: "lower" or "rule", plugin, primitive or rule, feature, answer) -> times asked.
  std::map<std::tuple<std::string, std::string, std::string, std::string, bool>, int64_t> target_asked;
  // Nodes the host refused for the target: (plugin, primitive, op) -> times.
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> refused_nodes;
  // Nodes the host computed in a wider type, onnxruntime having no kernel for
  // theirs (kernels.hpp): (plugin, primitive, op, from dtype, to dtype) -> nodes.
  std::map<std::tuple<std::string, std::string, std::string, std::string, std::string>, int64_t> widened;
  // Rewrite rules left out because they may emit an op the target refuses:
  // (plugin, rule, the op).
  std::vector<std::tuple<std::string, std::string, std::string>> rules_skipped;
  // Nodes per op type ("domain:op" outside the default domain), counted over
  // the main graph, its subgraphs and the function bodies: right after
  // lowering, and in the model exported.
  std::map<std::string, int64_t> nodes_lowered;
  std::map<std::string, int64_t> nodes_final;
  // Per optimizer pass, in pipeline order: nodes it removed (negative: added),
  // summed over rounds and graphs.
  std::vector<std::pair<std::string, int64_t>> pass_nodes_removed;
};

}  // namespace jaxonnx
