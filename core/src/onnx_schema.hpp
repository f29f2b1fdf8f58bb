// What the host knows of the default ONNX domain, to refuse a node no runtime
// could run. The table is generated at build time from the onnx Python
// package's schemas (core/CMakeLists.txt), like onnx.proto; core/ itself
// names no op.
#pragma once

#include <cstdint>
#include <string>

namespace jaxonnx {

// The opset in which `op_type` first appeared in the default domain, or 0
// when the default domain has no such operator.
int64_t onnx_op_since(const std::string& op_type);

}  // namespace jaxonnx
