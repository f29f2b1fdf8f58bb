// jaxonnx plugin SDK: Emitter, what expression code needs of the context it
// writes into: emit a default-domain node with one output, make a constant,
// read a value's type and the target opset. Lowering (lowering.hpp) and
// Rewrite (rewrite.hpp) both implement it, so math written over an Emitter
// (expr.hpp, special.hpp, idioms.hpp's Emitter forms) serves a lowering and
// a rewrite rule alike. Also the one filling of the C
// node and tensor structs both contexts hand the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "jaxonnx/attr.hpp"
#include "jaxonnx/plugin_abi.h"
#include "jaxonnx/types.hpp"

namespace jaxonnx::sdk {

namespace detail {
struct NodeView;
}

class Emitter {
 public:
  // Emits `op_type` (default domain) with one output of type `out` (an
  // undefined dtype leaves the type to the host).
  inline Value op(std::string_view op_type, const std::vector<Value>& ins, const Aval& out,
                  const std::vector<Attr>& attrs = {});
  // A constant tensor (copied by the host).
  Value constant(int32_t dt, const std::vector<int64_t>& dims, const void* data, size_t nbytes) {
    jxo_tensor t{sizeof(jxo_tensor), dt, static_cast<int64_t>(dims.size()), dims.data(), data, nbytes};
    Value v = kNoValue;
    make_constant(t, &v);
    return v;
  }
  // The type of a value the host knows (dtype undefined when it does not).
  virtual Aval aval_of(Value v) const = 0;
  // The target default-domain opset (an op's form can depend on it).
  virtual int64_t opset() const = 0;

 protected:
  Emitter() = default;
  Emitter(const Emitter&) = default;
  Emitter& operator=(const Emitter&) = default;
  ~Emitter() = default;

  // The host calls: emit `node` (`outs` has a slot per output), make a constant.
  virtual void emit(const jxo_node& node, Value* outs) = 0;
  virtual void make_constant(const jxo_tensor& t, Value* out) = 0;
};

namespace detail {

// The C struct of a node to emit, with the views of its output types and
// attributes it points into; alive while this lives.
struct NodeView {
  std::vector<Aval> avals;  // copies: AvalView points into their symbol strings
  std::vector<std::unique_ptr<AvalView>> views;
  std::vector<const jxo_aval*> outs;
  std::vector<const jxo_attr*> attrs;
  jxo_node node{};

  // An output type of undefined dtype is left to the host to infer.
  NodeView(std::string_view op_type, const std::vector<Value>& ins, const std::vector<Aval>& out_avals,
           const std::vector<Attr>& attr_list, std::string_view domain = {}, int64_t domain_version = 0)
      : avals(out_avals) {
    for (const Aval& a : avals) {
      views.push_back(std::make_unique<AvalView>(a));
      outs.push_back(a.dtype == JXO_DTYPE_UNDEFINED ? nullptr : &views.back()->aval);
    }
    for (const Attr& a : attr_list) attrs.push_back(a.c());
    node.struct_size = sizeof(jxo_node);
    node.op_type = to_jxo(op_type);
    node.domain = to_jxo(domain);
    node.domain_version = domain_version;
    node.inputs = ins.data();
    node.num_inputs = ins.size();
    node.outputs = outs.data();
    node.num_outputs = outs.size();
    node.attrs = attrs.data();
    node.num_attrs = attrs.size();
  }
  NodeView(const NodeView&) = delete;
  NodeView& operator=(const NodeView&) = delete;
};

}  // namespace detail

inline Value Emitter::op(std::string_view op_type, const std::vector<Value>& ins, const Aval& out,
                         const std::vector<Attr>& attrs) {
  detail::NodeView n(op_type, ins, {out}, attrs);
  Value result = kNoValue;
  emit(n.node, &result);
  return result;
}

}  // namespace jaxonnx::sdk
