// Private: the rewrite view the fuse pass shows a plugin's rule (ABI 1.2), and
// the host functions over it, which host_api.cpp puts into the jxo_api table.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "jaxonnx/core/conversion_facts.hpp"
#include "jaxonnx/core/ir.hpp"
#include "jaxonnx/plugin_abi.h"
#include "jaxonnx/targets.hpp"
#include "rewrite.hpp"

// One attempt of one rule at one root node. Nothing touches the graph until
// the pass commits it.
struct jxo_rewrite {
  jaxonnx::ir::Graph* graph = nullptr;
  const jaxonnx::passes::Uses* uses = nullptr;
  size_t root = 0;
  // Where each node stands (the fuse pass appends new nodes and links them in
  // before their root): order[a] < order[b] iff a comes first. Null: index order.
  const std::vector<int64_t>* order = nullptr;
  int64_t opset = 0;
  const jaxonnx::sdk::targets::Profile* target = nullptr;  // null: onnxruntime's
  const std::vector<std::string>* allowed_ops = nullptr;  // the rule's declared ops
  std::string rule;  // "plugin/rule", for messages
  // When set, the rule's questions to the target are recorded there (the
  // conversion report), under rule_plugin and rule_name.
  jaxonnx::ConversionFacts* facts = nullptr;
  std::string rule_plugin, rule_name;
  // The attempt's work: nodes to insert before the root, initializers to add,
  // root outputs to redirect. Their values are appended to graph->values and
  // popped again if the attempt is dropped.
  std::vector<jaxonnx::ir::Node> nodes;
  std::vector<jaxonnx::ir::Initializer> initializers;
  std::vector<std::pair<jaxonnx::ir::ValueId, jaxonnx::ir::ValueId>> replaced;
  size_t values_before = 0;
  // Storage for what the view hands out (valid during the callback).
  std::deque<jxo_attr> attrs;
  std::deque<std::vector<jxo_str>> strings;
};

namespace jaxonnx::rewrite_api {
int64_t rw_root(const jxo_rewrite* rw) noexcept;
int64_t rw_opset(const jxo_rewrite* rw) noexcept;
int32_t rw_target_supports(const jxo_rewrite* rw, jxo_str feature) noexcept;
int64_t rw_producer(const jxo_rewrite* rw, jxo_value v) noexcept;
jxo_str rw_op_type(const jxo_rewrite* rw, int64_t node) noexcept;
jxo_str rw_domain(const jxo_rewrite* rw, int64_t node) noexcept;
size_t rw_num_inputs(const jxo_rewrite* rw, int64_t node) noexcept;
jxo_value rw_input(const jxo_rewrite* rw, int64_t node, size_t i) noexcept;
size_t rw_num_outputs(const jxo_rewrite* rw, int64_t node) noexcept;
jxo_value rw_output(const jxo_rewrite* rw, int64_t node, size_t i) noexcept;
const jxo_attr* rw_attr(const jxo_rewrite* rw, int64_t node, jxo_str name) noexcept;
size_t rw_num_reads(const jxo_rewrite* rw, jxo_value v) noexcept;
const jxo_aval* rw_value_aval(const jxo_rewrite* rw, jxo_value v) noexcept;
const jxo_tensor* rw_value_constant(const jxo_rewrite* rw, jxo_value v) noexcept;
jxo_status* rw_emit_node(jxo_rewrite* rw, const jxo_node* node, jxo_value* outputs) noexcept;
jxo_status* rw_constant(jxo_rewrite* rw, const jxo_tensor* tensor, jxo_value* out) noexcept;
jxo_status* rw_replace(jxo_rewrite* rw, jxo_value root_output, jxo_value value) noexcept;
int32_t rw_is_output(const jxo_rewrite* rw, jxo_value v) noexcept;
}  // namespace jaxonnx::rewrite_api
