// The conversion pipeline: ClosedJaxpr -> IR (through the plugins) -> passes
// -> ONNX bytes.
#pragma once

#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "jaxonnx/core/ir.hpp"
#include "jaxonnx/core/jaxpr.hpp"
#include "jaxonnx/core/plugin_host.hpp"

namespace jaxonnx {

constexpr int64_t kMinOpset = 18;

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

// Which initializers export_onnx writes as external data (onnx's
// data_location = EXTERNAL) instead of inside the model.
struct ExternalDataOptions {
  enum Mode { kNever, kAuto, kAlways, kInline };
  // kAuto: only when the model would not fit protobuf's 2 GB otherwise.
  // kInline: as kAlways, for a caller that puts the tensors back into its own
  // ModelProto (so the 2 GB limit still applies): they cross without copies.
  Mode mode = kNever;
  uint64_t threshold = 1024;  // main-graph initializers of at least this many bytes
  std::string location;       // the data file's name, relative to the model's folder
  bool per_tensor = false;    // one file per tensor, named location + "." + tensor name
};

// One external data file: the tensors it holds and where. It keeps them alive,
// so it can be written after the model it came from is gone.
struct DataFile {
  struct Piece {
    std::shared_ptr<const Tensor> tensor;
    uint64_t offset;
  };
  std::string location;
  uint64_t size = 0;
  std::vector<Piece> pieces;
  // Streams the tensors' own memory to `fd` (zero padding between them).
  // `written` (may be null) is called with the bytes written so far.
  void write_to(int fd, const std::function<void(uint64_t)>& written = {}) const;
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
  // With optimize, also apply the plugins' rewrite rules (fused ops such as
  // Gemm, Softmax, LayerNormalization). Off keeps JAX's exact decompositions.
  bool fuse = true;
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

// Serializes to an ONNX ModelProto (IR version 10). Large initializers go to
// `data_files` as `external` says; throws ConversionError (naming the external
// data option) when the model would still be over protobuf's 2 GB limit.
std::string export_onnx(const ir::Model& model, const ExternalDataOptions& external = {},
                        std::vector<DataFile>* data_files = nullptr);

// lower_to_ir, then passes::optimize (or only prune when !options.optimize),
// then export_onnx.
std::string convert(const ClosedJaxpr& program, const Registry& registry,
                    const ConvertOptions& options);

// Runs a primitive's abstract-eval callback: avals in, avals out.
std::vector<Aval> abstract_eval(const PrimitiveInfo& primitive, const std::vector<Aval>& inputs,
                                const Param& params);

}  // namespace jaxonnx
