// The conversion pipeline: ClosedJaxpr -> IR (through the plugins) -> passes
// -> ONNX bytes (onnx_export.hpp). Implemented in converter.cpp; the lowering
// driver behind lower_to_ir is core/src/lowering.cpp.
#pragma once

#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "jaxonnx/core/convert_options.hpp"
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
// then export_onnx. Below kMinOpset the program is lowered at kMinOpset and the
// model declares options.opset when every default-domain operator it uses has
// the same form there (onnx_schema.hpp), else a ConversionError names each
// operator and the opset its form needs.
std::string convert(const ClosedJaxpr& program, const Registry& registry,
                    const ConvertOptions& options);
// convert's bytes in pieces (onnx_export.hpp), the large weights not copied yet.
SerializedModel convert_serialized(const ClosedJaxpr& program, const Registry& registry,
                                   const ConvertOptions& options);

}  // namespace jaxonnx
