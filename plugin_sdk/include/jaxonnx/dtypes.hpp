// The one table of element types, read by the core, the Python binding and
// the SDK: the ABI number (ONNX's TensorProto number), the name NumPy and JAX
// give it, the bytes per element, and whether jaxonnx exports it (ONNX carries
// it and onnxruntime runs it; complex travels packed as float[..., 2]). Header-only: plugins link nothing of the core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "jaxonnx/plugin_abi.h"

namespace jaxonnx::dtypes {

struct Info {
  int32_t code;      // JXO_DTYPE_*
  const char* name;  // NumPy's name
  size_t itemsize;   // 0: not a fixed-size element (string)
  bool exported;     // a model jaxonnx writes may hold it
};

inline constexpr Info kTable[] = {
    {JXO_DTYPE_FLOAT32, "float32", 4, true},       {JXO_DTYPE_FLOAT64, "float64", 8, true},
    {JXO_DTYPE_FLOAT16, "float16", 2, true},       {JXO_DTYPE_BFLOAT16, "bfloat16", 2, true},
    {JXO_DTYPE_INT8, "int8", 1, true},             {JXO_DTYPE_INT16, "int16", 2, true},
    {JXO_DTYPE_INT32, "int32", 4, true},           {JXO_DTYPE_INT64, "int64", 8, true},
    {JXO_DTYPE_UINT8, "uint8", 1, true},           {JXO_DTYPE_UINT16, "uint16", 2, true},
    {JXO_DTYPE_UINT32, "uint32", 4, true},         {JXO_DTYPE_UINT64, "uint64", 8, true},
    {JXO_DTYPE_BOOL, "bool", 1, true},             {JXO_DTYPE_COMPLEX64, "complex64", 8, true},
    {JXO_DTYPE_COMPLEX128, "complex128", 16, true}, {JXO_DTYPE_STRING, "string", 0, false},
    // One byte per element in memory (ml_dtypes' layout), two per byte in the file.
    {JXO_DTYPE_INT4, "int4", 1, true},             {JXO_DTYPE_UINT4, "uint4", 1, true},
};

// The entry of a JXO_DTYPE_* number, or nullptr.
constexpr const Info* find(int32_t code) {
  for (const Info& d : kTable)
    if (d.code == code) return &d;
  return nullptr;
}

// The entry of a NumPy dtype name ("float32"), or nullptr.
constexpr const Info* find(std::string_view name) {
  for (const Info& d : kTable)
    if (name == d.name) return &d;
  return nullptr;
}

}  // namespace jaxonnx::dtypes
