// The conversion pipeline: ClosedJaxpr -> IR (through the plugins) -> passes
// -> ONNX bytes (onnx_export.hpp). Implemented in converter.cpp; the lowering
// driver behind lower_to_ir is core/src/lowering.cpp.
#pragma once

#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "jaxonnx/core/ir.hpp"
#include "jaxonnx/core/jaxpr.hpp"
#include "jaxonnx/core/onnx_export.hpp"
#include "jaxonnx/core/plugin_host.hpp"
#include "jaxonnx/targets.hpp"

namespace jaxonnx {

// The oldest default-domain opset the plugins lower to; each picks the form
// of an op this opset allows (api->opset), or a decomposition.
constexpr int64_t kMinOpset = 13;

// A primitive named `onnx_fn::<qualified name>` (jaxonnx.onnx_function) is a
// function call: the core lowers its `body` param once per key into
// model.functions and emits a call-site node (docs/functions.md).
constexpr char kFunctionPrefix[] = "onnx_fn::";

// Seconds spent in each phase of convert(), for benchmarks.
struct PhaseTimes {
  double lower = 0;   // lower_to_ir: every equation through its plugin
  double passes = 0;  // the optimizer (or prune)
  double export_onnx = 0;
  std::vector<std::pair<std::string, double>> per_pass;  // summed over rounds, pipeline order
};

struct ConvertOptions {
  int64_t opset = 23;
  std::string model_name = "jax_model";
  std::vector<std::string> input_names;   // default in_0, in_1, ...
  std::vector<std::string> output_names;  // default out_0, out_1, ...
  // Turns an Eqn::source handle into "file:line (function)"; may be empty.
  std::function<std::string(int64_t)> describe_source;
  std::string producer_version;
  // When set, every node an equation's lowering adds to its graph gets
  // metadata pkg.jaxonnx.primitive and pkg.jaxonnx.plugin, plus the pairs this
  // returns for the equation's source handle (its call site, say).
  std::function<std::vector<std::pair<std::string, std::string>>(int64_t)> provenance;
  // Run the optimizer (passes.hpp) after lowering. Off, the model is the raw
  // lowering with only dead code removed.
  bool optimize = true;
  // Which of the plugins' rewrite rules the optimizer applies (fused ops such
  // as Gemm, Softmax, LayerNormalization), by their declared numerics: kFast
  // all, kExact those exact on NaN and infinity too, kNone none. The Python
  // side applies the same choice to binding specs (to_onnx fusion=).
  enum class Fusion { kFast, kExact, kNone };
  Fusion fusion = Fusion::kFast;
  // The target profile (jaxonnx/targets.hpp) by name; lowerings and rules ask
  // it what the runtime has, and the host refuses the ops it refuses.
  std::string target = "onnxruntime";
  // When non-empty, the optimizer writes the graph around every pass run here.
  std::string dump_ir_dir;
  // When set, convert() fills it.
  PhaseTimes* times = nullptr;
  // Replace every function call by its body before the passes
  // (passes::inline_functions), for whole-graph optimization.
  bool inline_functions = false;
  // When set, called between equations and between passes; it may throw to
  // abandon the conversion (the Python binding raises KeyboardInterrupt).
  std::function<void()> poll;
  ExternalDataOptions external_data;
  // The files the external data go to; must be set unless external_data.mode is kNever.
  std::vector<DataFile>* data_files = nullptr;
};

// Lowers every equation through the plugin that claims its primitive.
// Throws ConversionError with a complete message on any failure.
ir::Model lower_to_ir(const ClosedJaxpr& program, const Registry& registry,
                      const ConvertOptions& options);

// Dead-code elimination alone (passes::dead_code_elimination) over `graph`
// and its subgraphs: nodes no output depends on, unread initializers and
// captures.
void prune(ir::Graph& graph);
// prune over the main graph and every function body, then drops the
// functions no graph calls any more.
void prune(ir::Model& model);

// The profile of the target `name`, or a ConversionError naming the targets.
const sdk::targets::Profile& target_profile(const std::string& name);

// lower_to_ir, then passes::optimize (or only prune when !options.optimize),
// then export_onnx.
std::string convert(const ClosedJaxpr& program, const Registry& registry,
                    const ConvertOptions& options);

}  // namespace jaxonnx
