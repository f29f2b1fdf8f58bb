// jaxonnx plugin SDK: the empty result of an op whose result has a static
// dim of 0. JAX defines such results where the op's ONNX form cannot run or
// would compute a negative dim: a convolution whose dilated kernel is larger
// than its padded input, eig/eigh of 0x0 matrices. (A dim that may be 0 only
// at run time is empty_guard.hpp's.) Included on its own.
#ifndef JAXONNX_SDK_EMPTY_RESULT_HPP
#define JAXONNX_SDK_EMPTY_RESULT_HPP

#include "jaxonnx/idioms.hpp"
#include "jaxonnx/lowering.hpp"

#include <cstdint>
#include <vector>

namespace jaxonnx::sdk {

// A static 0 among the dims of `a`.
inline bool has_static_zero(const Aval& a) {
  for (const Dim& d : a.shape)
    if (d.is_static() && d.value == 0) return true;
  return false;
}

// A value of aval `a` (a static 0 among its dims) with no elements: a
// constant when every dim is static, else a scalar 0 expanded to the runtime
// shape (the symbolic dims of `a` computed as shape_value does).
inline Value empty_of(Lowering& L, const Aval& a) {
  bool all_static = true;
  std::vector<int64_t> dims;
  for (const Dim& d : a.shape) {
    all_static = all_static && d.is_static();
    dims.push_back(d.is_static() ? d.value : 1);
  }
  if (all_static) {
    const char none = 0;  // a non-null pointer to no bytes
    return L.constant(a.dtype, dims, &none, 0);
  }
  return L.op("Expand", {scalar(L, a.dtype, 0), shape_value(L, a.shape)}, a);
}

}  // namespace jaxonnx::sdk

#endif  // JAXONNX_SDK_EMPTY_RESULT_HPP
