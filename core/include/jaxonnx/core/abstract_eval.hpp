// Abstract evaluation of a plugin primitive (for the Python side's abstract
// eval rules). Implemented in abstract_eval.cpp.
#pragma once

#include <vector>

#include "jaxonnx/core/jaxpr.hpp"
#include "jaxonnx/core/plugin_host.hpp"
#include "jaxonnx/core/types.hpp"

namespace jaxonnx {

// Runs a primitive's abstract-eval callback: avals in, avals out.
std::vector<Aval> abstract_eval(const PrimitiveInfo& primitive, const std::vector<Aval>& inputs,
                                const Param& params);

}  // namespace jaxonnx
