// jaxonnx plugin SDK: Attr, one ONNX node attribute owning its data (ints,
// floats, strings, tensors, subgraphs), and GraphRef, a finished subgraph.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "jaxonnx/plugin_abi.h"
#include "jaxonnx/types.hpp"

namespace jaxonnx::sdk {

// A finished subgraph (from Subgraph::end), to pass once to Attr::graph.
struct GraphRef {
  const jxo_graph* handle = nullptr;
};

// One node attribute, owning its data.
class Attr {
 public:
  static Attr i(std::string name, int64_t v) { Attr a(std::move(name), JXO_ATTR_INT); a.c_.i = v; return a; }
  static Attr f(std::string name, double v) { Attr a(std::move(name), JXO_ATTR_FLOAT); a.c_.f = v; return a; }
  static Attr s(std::string name, std::string v) {
    Attr a(std::move(name), JXO_ATTR_STRING);
    a.str_ = std::move(v);
    return a;
  }
  static Attr ints(std::string name, std::vector<int64_t> v) {
    Attr a(std::move(name), JXO_ATTR_INTS);
    a.ints_ = std::move(v);
    return a;
  }
  static Attr floats(std::string name, std::vector<double> v) {
    Attr a(std::move(name), JXO_ATTR_FLOATS);
    a.floats_ = std::move(v);
    return a;
  }
  // A tensor attribute (e.g. ConstantOfShape's value). `data` is copied.
  static Attr tensor(std::string name, int32_t dt, std::vector<int64_t> dims, const void* data,
                     size_t nbytes) {
    Attr a(std::move(name), JXO_ATTR_TENSOR);
    a.tensor_dims_ = std::move(dims);
    a.bytes_.assign(static_cast<const char*>(data), static_cast<const char*>(data) + nbytes);
    a.tensor_.struct_size = sizeof(jxo_tensor);
    a.tensor_.dtype = dt;
    return a;
  }

  // A subgraph attribute (If then_branch/else_branch, Loop body). The handle
  // is consumed by the node this attribute is emitted with.
  static Attr graph(std::string name, GraphRef g) {
    if (!g.handle) throw Error("graph attribute '" + name + "' has no graph");
    Attr a(std::move(name), JXO_ATTR_GRAPH);
    a.c_.graph = g.handle;
    return a;
  }

  // Fills pointers into this object; valid while it is alive and unmoved.
  const jxo_attr* c() const {
    c_.struct_size = sizeof(jxo_attr);
    c_.name = to_jxo(name_);
    c_.s = to_jxo(str_);
    c_.ints = ints_.data();
    c_.floats = floats_.data();
    c_.count = c_.type == JXO_ATTR_INTS ? ints_.size() : floats_.size();
    if (c_.type == JXO_ATTR_TENSOR) {
      tensor_.rank = static_cast<int64_t>(tensor_dims_.size());
      tensor_.dims = tensor_dims_.data();
      tensor_.data = bytes_.data();
      tensor_.nbytes = bytes_.size();
      c_.tensor = &tensor_;
    }
    return &c_;
  }

 private:
  Attr(std::string name, int32_t type) : name_(std::move(name)) { c_.type = type; }
  std::string name_, str_;
  std::vector<int64_t> ints_, tensor_dims_;
  std::vector<double> floats_;
  std::vector<char> bytes_;
  mutable jxo_tensor tensor_{};
  mutable jxo_attr c_{};
};

}  // namespace jaxonnx::sdk
