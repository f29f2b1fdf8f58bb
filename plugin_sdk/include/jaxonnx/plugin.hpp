// jaxonnx plugin SDK: a header-only C++17 layer over plugin_abi.h. The one
// include a plugin needs; it brings every SDK header, each owning one idea:
//
//   types.hpp          Error, dtype, Dim / Shape / Aval, Value: the vocabulary
//   param.hpp          Param: typed views of an equation's params
//   attr.hpp           Attr, GraphRef: node attributes
//   emitter.hpp        Emitter: emit a node, make a constant (Lowering and Rewrite are one)
//   lowering.hpp       Lowering, Subgraph: the host calls of one lowering (op-free)
//   idioms.hpp         cast, where, transpose, i64s, scalar, dim_value, shape_value,
//                      reshape, inclusive_scan: ONNX idioms built on Lowering
//   expr.hpp           Expr: elementwise arithmetic over an Emitter, shapes broadcast
//   kernels.hpp        which (op, dtype) pairs onnxruntime runs
//   mesh_axes.hpp      named mesh axes a one-device shard_map binds (collectives)
//   jaxpr_view.hpp     JaxprView: reading a nested jaxpr
//   abstract_eval.hpp  AbstractEval: avals in, avals out
//   rewrite.hpp        Rewrite, RuleRef: rewrite rules (ABI 1.2)
//   registration.hpp   Plugin, Binding, JAXONNX_PLUGIN: the entry point
//
// A lowering is a plain function `void lower(jaxonnx::sdk::Lowering& L)` that
// may throw; the trampolines catch everything at the boundary and turn it
// into a jxo_status, so no exception ever reaches the host.
//
//   JAXONNX_PLUGIN("my_plugin", "1.0.0") {
//     plugin.primitive("my.relu", lower_relu).emits({"Relu"});
//   }
#pragma once

#include "jaxonnx/abstract_eval.hpp"
#include "jaxonnx/attr.hpp"
#include "jaxonnx/emitter.hpp"
#include "jaxonnx/empty_guard.hpp"
#include "jaxonnx/expr.hpp"
#include "jaxonnx/idioms.hpp"
#include "jaxonnx/jaxpr_view.hpp"
#include "jaxonnx/kernels.hpp"
#include "jaxonnx/lowering.hpp"
#include "jaxonnx/mesh_axes.hpp"
#include "jaxonnx/param.hpp"
#include "jaxonnx/plugin_abi.h"
#include "jaxonnx/registration.hpp"
#include "jaxonnx/rewrite.hpp"
#include "jaxonnx/types.hpp"
