// jaxonnx plugin SDK: which (op, dtype) pairs onnxruntime's CPU provider runs.
//
// One table, consulted by the host for every node a plugin emits (a pair with
// no kernel fails the conversion with a message naming it, instead of a model
// that onnxruntime refuses to load) and by plugins to compute such a pair
// exactly in a type that has a kernel (compute_type, then Cast around).
//
// Measured against onnxruntime 1.31 (CPUExecutionProvider, default opset 23;
// Gelu at 20, Swish at 24) by loading one-node models; ops not listed are not
// checked. The dtype is that of the op's type-constrained data operand
// (`data_input`; Where's condition is not one). Header-only, no dependencies:
// the core includes it too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "jaxonnx/plugin_abi.h"

namespace jaxonnx::sdk::kernels {

constexpr uint32_t bit(int32_t t) { return 1u << t; }
constexpr uint32_t kF = bit(JXO_DTYPE_FLOAT32) | bit(JXO_DTYPE_FLOAT64) | bit(JXO_DTYPE_FLOAT16);
constexpr uint32_t kSigned = bit(JXO_DTYPE_INT8) | bit(JXO_DTYPE_INT16) | bit(JXO_DTYPE_INT32) |
                             bit(JXO_DTYPE_INT64);
constexpr uint32_t kUnsigned = bit(JXO_DTYPE_UINT8) | bit(JXO_DTYPE_UINT16) |
                               bit(JXO_DTYPE_UINT32) | bit(JXO_DTYPE_UINT64);
constexpr uint32_t kBool = bit(JXO_DTYPE_BOOL);
constexpr uint32_t kNumeric = kF | kSigned | kUnsigned;
// Max/Min (and Pad) lack 16-bit integers; Where also uint64 and bool.
constexpr uint32_t kMaxMin = kF | bit(JXO_DTYPE_INT8) | bit(JXO_DTYPE_INT32) |
                             bit(JXO_DTYPE_INT64) | bit(JXO_DTYPE_UINT8) | bit(JXO_DTYPE_UINT32) |
                             bit(JXO_DTYPE_UINT64);
constexpr uint32_t kWhere = kF | bit(JXO_DTYPE_INT8) | bit(JXO_DTYPE_INT32) |
                            bit(JXO_DTYPE_INT64) | bit(JXO_DTYPE_UINT8) | bit(JXO_DTYPE_UINT32);

struct Entry {
  std::string_view op;
  uint32_t dtypes;    // bit(dtype) for every dtype with a kernel
  size_t data_input;  // the operand whose dtype selects the kernel
};

inline constexpr Entry kTable[] = {
    {"Abs", kNumeric, 0},
    {"Add", kNumeric, 0},
    {"Ceil", kF, 0},
    {"Cos", kF, 0},
    {"DFT", kF, 0},  // opset 20 and DFT-17; no bfloat16
    {"Div", kNumeric, 0},
    {"Equal", kNumeric | kBool, 0},
    {"Erf", bit(JXO_DTYPE_FLOAT32) | bit(JXO_DTYPE_FLOAT16), 0},
    {"Exp", kF, 0},
    {"Floor", kF, 0},
    {"Gelu", bit(JXO_DTYPE_FLOAT32) | bit(JXO_DTYPE_FLOAT16), 0},
    {"Gemm", bit(JXO_DTYPE_FLOAT32) | bit(JXO_DTYPE_FLOAT64), 0},
    {"Greater", kNumeric, 0},
    {"GreaterOrEqual", kNumeric, 0},
    {"LayerNormalization", kF | bit(JXO_DTYPE_BFLOAT16), 0},
    {"Less", kNumeric, 0},
    {"LessOrEqual", kNumeric, 0},
    {"Log", kF, 0},
    {"LogSoftmax", kF, 0},
    {"Max", kMaxMin, 0},
    {"Min", kMaxMin, 0},
    {"Mul", kNumeric, 0},
    {"Neg", kF | kSigned, 0},
    {"Pad", kMaxMin | kBool, 0},
    {"Pow", kF | bit(JXO_DTYPE_INT32) | bit(JXO_DTYPE_INT64), 0},
    {"RMSNormalization", kF, 0},
    {"Reciprocal", kF, 0},
    {"Relu", kF | bit(JXO_DTYPE_INT8) | bit(JXO_DTYPE_INT32), 0},
    {"Round", kF, 0},
    {"Sigmoid", kF, 0},
    {"Sin", kF, 0},
    {"Softmax", kF, 0},
    {"Sqrt", kF, 0},
    {"Sub", kNumeric, 0},
    {"Swish", kF, 0},
    {"Tanh", kF, 0},
    {"Where", kWhere, 1},
};

inline const Entry* find(std::string_view op) {
  for (const Entry& e : kTable)
    if (e.op == op) return &e;
  return nullptr;
}

// True when onnxruntime's CPU provider runs `op` on `dtype`, or when the table
// does not know `op` (it is not checked).
inline bool has(std::string_view op, int32_t dtype) {
  const Entry* e = find(op);
  return !e || dtype < 0 || dtype >= 32 || (e->dtypes & bit(dtype)) != 0;
}

// The dtype to compute `op` in for data of dtype `t`: `t` when it has a
// kernel, else the first type that holds every value of `t` exactly and has
// one (bool as uint8, 16-bit integers as 32-bit, bfloat16 as float32, ...),
// else JXO_DTYPE_UNDEFINED. `bits_only` ops (selection: Where, Identity) may
// also move uint64 as int64, since a Cast keeps the bits both ways.
inline int32_t compute_type(std::string_view op, int32_t t, bool bits_only = false) {
  if (has(op, t)) return t;
  auto first = [&](std::initializer_list<int32_t> wider) -> int32_t {
    for (int32_t w : wider)
      if (has(op, w)) return w;
    return JXO_DTYPE_UNDEFINED;
  };
  switch (t) {
    case JXO_DTYPE_BOOL: return first({JXO_DTYPE_UINT8, JXO_DTYPE_INT32});
    case JXO_DTYPE_INT8: return first({JXO_DTYPE_INT32, JXO_DTYPE_INT64});
    case JXO_DTYPE_UINT8: return first({JXO_DTYPE_INT32, JXO_DTYPE_INT64});
    case JXO_DTYPE_INT16: return first({JXO_DTYPE_INT32, JXO_DTYPE_INT64});
    case JXO_DTYPE_UINT16: return first({JXO_DTYPE_INT32, JXO_DTYPE_UINT32, JXO_DTYPE_INT64});
    case JXO_DTYPE_INT32: return first({JXO_DTYPE_INT64});
    case JXO_DTYPE_UINT32: return first({JXO_DTYPE_INT64, JXO_DTYPE_UINT64});
    case JXO_DTYPE_UINT64: return bits_only ? first({JXO_DTYPE_INT64}) : JXO_DTYPE_UNDEFINED;
    case JXO_DTYPE_FLOAT16: return first({JXO_DTYPE_FLOAT32, JXO_DTYPE_FLOAT64});
    case JXO_DTYPE_BFLOAT16: return first({JXO_DTYPE_FLOAT32, JXO_DTYPE_FLOAT64});
    case JXO_DTYPE_FLOAT32: return first({JXO_DTYPE_FLOAT64});
    default: return JXO_DTYPE_UNDEFINED;
  }
}

}  // namespace jaxonnx::sdk::kernels
