// jaxonnx plugin SDK: elementwise Max and Min that are right on every dtype.
// onnxruntime 1.31's int64 Max and Min (elementwise, like its ReduceMax and
// ReduceMin) compare the low words as signed when the high words are equal:
// max(3, 2**31) is 3 (tests/python/test_onnxruntime_workarounds.py). Its
// Greater, Less and Where are right, so int64 picks with those. Small
// non-negative int64 values (indices, sizes) never meet the fault, so index
// arithmetic keeps Max/Min. Included on its own.
#ifndef JAXONNX_SDK_MAX_MIN_HPP
#define JAXONNX_SDK_MAX_MIN_HPP

#include "jaxonnx/idioms.hpp"
#include "jaxonnx/lowering.hpp"

#include <cstdint>

namespace jaxonnx::sdk {

// Max (is_max) or Min of a and b, giving `out`: the op itself, but
// Where(Greater/Less(a, b), a, b) for int64. NaN: Max/Min propagate it, as
// JAX does; the int64 form has none to propagate.
inline Value max_or_min(Lowering& L, bool is_max, Value a, Value b, const Aval& out) {
  if (out.dtype != dtype::i64) return L.op(is_max ? "Max" : "Min", {a, b}, out);
  Value pick_a = L.op(is_max ? "Greater" : "Less", {a, b}, out.with_dtype(dtype::boolean));
  return L.op("Where", {pick_a, a, b}, out);
}

// inclusive_scan (idioms.hpp) with max_or_min as its op.
inline Value inclusive_max_min_scan(Lowering& L, bool is_max, Value x, const Aval& a, int64_t axis, bool reverse,
                                    Value identity) {
  const int64_t steps = scan_steps(a.shape[static_cast<size_t>(axis)]);
  Value axes = i64s(L, {axis});
  for (int64_t k = 0; k < steps; ++k)
    x = max_or_min(L, is_max, x, scan_shift(L, x, a, axis, reverse, axes, k, identity), a);
  return x;
}

}  // namespace jaxonnx::sdk

#endif  // JAXONNX_SDK_MAX_MIN_HPP
