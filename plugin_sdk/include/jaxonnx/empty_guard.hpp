// jaxonnx plugin SDK: an op that refuses a dim of 0, skipped at run time when
// one is 0. onnxruntime's fused kernels (Attention, GroupNormalization) fail on
// an empty batch or sequence that JAX defines, and a symbolic dim may be 0.
//
// The guard is an If on the smallest of the symbolic sizes: one branch gives
// the empty result, the other runs the op (about 2.5 us per call in
// onnxruntime). Not padding to one row and cropping back: that copies the
// operands and the result (about 5% of a ViT at batch 1), and a top-level
// standard Attention is rewritten by onnxruntime's quantize_dynamic into an
// invalid com.microsoft QAttention, which an If branch keeps it from.
//
// OpenVINO (2026.4, CPU) reads garbage when an If's dynamic-shape output
// feeds a MatMul, directly or through a Reshape (a wrong answer, different on
// every run). An elementwise node after the If keeps its memory apart: the
// result plus a constant -0.0 along one static axis, which is the result for
// every float (NaN, infinities and signed zeros included). OpenVINO folds away
// a scalar -0.0 or a Mul by 1, which therefore do not help.
#ifndef JAXONNX_SDK_EMPTY_GUARD_HPP
#define JAXONNX_SDK_EMPTY_GUARD_HPP

#include "jaxonnx/idioms.hpp"
#include "jaxonnx/lowering.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace jaxonnx::sdk {

// `run()`'s value (of aval `out`), or `if_empty()`'s where one of `sizes` is 0
// at run time. Each callback emits its branch's nodes; the static sizes must
// be nonzero (a static 0 is the caller's to lower another way). No If where
// every size is static. `name` names the two branches.
inline Value unless_empty(Lowering& L, const std::vector<Dim>& sizes, const Aval& out, const std::string& name,
                          const std::function<Value()>& if_empty, const std::function<Value()>& run) {
  std::vector<Value> runtime;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (!sizes[i].is_static() && std::find(sizes.begin(), sizes.begin() + i, sizes[i]) == sizes.begin() + i)
      runtime.push_back(dim_value(L, sizes[i]));
  if (runtime.empty()) return run();
  Value all = runtime.size() == 1 ? runtime[0]
                                  : L.op("Concat", runtime, Aval(dtype::i64, {static_cast<int64_t>(runtime.size())}),
                                         {Attr::i("axis", 0)});
  // The smallest size, as the scalar If takes (a dim value has shape [1]).
  Value smallest = L.op("ReduceMin", {all}, Aval(dtype::i64, {}), {Attr::i("keepdims", 0)});
  Value empty = L.op("Equal", {smallest, scalar(L, dtype::i64, 0)}, Aval(dtype::boolean, {}));
  Subgraph then_g = L.begin_subgraph(name + "_empty");
  GraphRef t = then_g.end({if_empty()});
  Subgraph else_g = L.begin_subgraph(name);
  GraphRef e = else_g.end({run()});
  Value y = L.op_n("If", {empty}, {out}, {Attr::graph("then_branch", t), Attr::graph("else_branch", e)})[0];
  // The OpenVINO barrier (see the header): -0.0 along the last static axis.
  // (float32 and float64: the dtypes of the guarded ops.)
  if (out.dtype != dtype::f32 && out.dtype != dtype::f64) return y;
  for (size_t k = out.shape.size(); k-- > 0;) {
    if (!out.shape[k].is_static()) continue;
    std::vector<int64_t> dims(out.shape.size() - k, 1);
    dims[0] = out.shape[k].value;
    const size_t n = static_cast<size_t>(dims[0]);
    Value neg_zeros = out.dtype == dtype::f32 ? L.constant(std::vector<float>(n, -0.0f), dims)
                                              : L.constant(std::vector<double>(n, -0.0), dims);
    return L.op("Add", {y, neg_zeros}, out);
  }
  return y;
}

}  // namespace jaxonnx::sdk

#endif  // JAXONNX_SDK_EMPTY_GUARD_HPP
