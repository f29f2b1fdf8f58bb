// jaxonnx plugin SDK: named mesh axes. A collective (psum(x, "data"),
// all_gather, axis_index) names axes that an enclosing shard_map binds to its
// mesh. An ONNX model runs on one device, so a shard_map lowers only when each
// axis it makes manual has size 1; it then records those axes here and inlines
// its body, where a collective over them is the identity (a sum, gather or
// permutation over one device). A collective over an axis no such shard_map
// bound (a real multi-device axis, pmap's) has no ONNX form: require() says so.
// The record lives in the lowering's per-graph memo, so any plugin reads it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jaxonnx/idioms.hpp"
#include "jaxonnx/lowering.hpp"
#include "jaxonnx/param.hpp"
#include "jaxonnx/plugin_abi.h"
#include "jaxonnx/types.hpp"

namespace jaxonnx::sdk::mesh_axes {

inline std::string memo_key(std::string_view name) { return "jaxonnx.mesh_axis:" + std::string(name); }

// Records the size-1 mesh axis `name` as bound for the lowerings that follow.
inline void bind_unit(Lowering& L, std::string_view name) { L.memo_store(memo_key(name), i64s(L, {1})); }

inline bool is_bound(const Lowering& L, std::string_view name) {
  return L.memo_lookup(memo_key(name)) != kNoValue;
}

// The axis names of a collective's param: a name, or a list of names (and, for
// psum and friends, positional int axes, which are skipped here).
inline std::vector<std::string> names(const Param& p) {
  std::vector<std::string> out;
  if (p.kind() == JXO_PARAM_STRING) return {p.as_string()};
  if (p.kind() != JXO_PARAM_LIST) return out;
  for (const Param& item : p.items())
    if (item.kind() == JXO_PARAM_STRING) out.push_back(item.as_string());
  return out;
}

// Fails unless every axis named by `p` is a bound (size-1) mesh axis.
inline void require(const Lowering& L, const Param& p) {
  for (const std::string& name : names(p)) {
    if (is_bound(L, name)) continue;
    L.fail(std::string(L.primitive()) + " over the named axis '" + name +
           "': a collective across devices has no ONNX form (an ONNX model runs on one "
           "device); it converts only inside a shard_map over a mesh whose axis '" + name +
           "' has size 1");
  }
}

}  // namespace jaxonnx::sdk::mesh_axes
