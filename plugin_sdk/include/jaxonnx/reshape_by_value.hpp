// A Reshape to a shape a rewrite rule computes at run time from the graph it
// rewrites (Shape, Slice, Gather of an existing Reshape's shape), where the
// static forms of idioms.hpp (reshape, flatten, ...) need a symbolic dim's
// value they cannot compute over a Rewrite. Kept apart from idioms.hpp, which
// every plugin includes, so that only the rules using it rebuild with it.
#pragma once

#include <jaxonnx/emitter.hpp>

namespace jaxonnx::sdk {

// `x` reshaped by `shape` (int64 [rank of out]): literal dims (allowzero=1,
// opset 14 and up), or, with `copies`, a shape whose 0s copy x's dims at the
// same index (the form of a constant shape the lowering coded so). Never -1.
inline Value reshape_by_value(Emitter& E, Value x, Value shape, const Aval& out, bool copies = false) {
  return E.op("Reshape", {x, shape}, out, {Attr::i("allowzero", copies ? 0 : 1)});
}

}  // namespace jaxonnx::sdk
