// What a conversion is asked to do (ConvertOptions) and what it reports of
// its time (PhaseTimes): the options every stage of converter.hpp reads, in
// a header of their own so that a stage needs not see the whole pipeline.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "jaxonnx/core/conversion_facts.hpp"
#include "jaxonnx/core/onnx_export.hpp"

namespace jaxonnx {

// Seconds spent in each phase of convert(), for benchmarks.
struct PhaseTimes {
  double lower = 0;   // lower_to_ir: every equation through its plugin
  double passes = 0;  // the optimizer (or prune)
  double export_onnx = 0;
  std::vector<std::pair<std::string, double>> per_pass;  // summed over rounds and graphs, pipeline order
};

struct ConvertOptions {
  // The default-domain opset the model declares. From kMinOpset (converter.hpp)
  // up the plugins lower at it; below, convert() lowers at kMinOpset and
  // declares this one when every operator kept its form.
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
  // all but approximate ones, kApproximate all, kExact those exact on NaN and
  // infinity too, kNone none. The Python side applies the same choice to
  // binding specs (to_onnx fusion=).
  enum class Fusion { kFast, kExact, kNone, kApproximate };
  Fusion fusion = Fusion::kFast;
  // The target profile (jaxonnx/targets.hpp) by name; lowerings and rules ask
  // it what the runtime has, and the host refuses the ops it refuses.
  std::string target = "onnxruntime";
  // When non-empty, the optimizer writes the graph around every pass run here.
  std::string dump_ir_dir;
  // When set, convert() fills it.
  PhaseTimes* times = nullptr;
  // When set, convert() records there what it did (conversion_facts.hpp),
  // for the conversion report; the model is the same either way.
  ConversionFacts* facts = nullptr;
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

}  // namespace jaxonnx
