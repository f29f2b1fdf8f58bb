// Private: builds the node a plugin's lowering emits (jxo_api.emit_node).
#pragma once

#include <vector>

#include "jaxonnx/core/ir.hpp"
#include "jaxonnx/core/jaxpr.hpp"
#include "jaxonnx/core/plugin_host.hpp"
#include "jaxonnx/plugin_abi.h"

namespace jaxonnx {

class Lowering;

// Reads `node` (through the ABI normalizer), checks its op against the
// default domain's opsets, onnxruntime's CPU kernels and (test builds) the ops
// `prim` declares, resolves its subgraph attributes (each a closed graph of
// the current scope, used once), and appends it to the innermost scope with
// fresh output values, which it returns. Throws HostError (with the status
// code for the plugin) and leaves the graph unchanged on any refusal.
std::vector<ir::ValueId> build_node(Lowering& lowering, const Eqn& eqn, const PrimitiveInfo& prim,
                                    const jxo_node* node);

}  // namespace jaxonnx
