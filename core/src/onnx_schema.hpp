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

// The opset that introduced the form `op_type` has at `opset` (its schema's
// since_version there), or 0 when the default domain has no such operator at
// `opset`. Two opsets give one op the same form when this agrees.
int64_t onnx_op_form(const std::string& op_type, int64_t opset);

}  // namespace jaxonnx
