#include "onnx_schema.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace jaxonnx {
namespace {

struct Entry {
  const char* name;
  int64_t since;
};

// {name, first opset}, sorted by name (generated from onnx.defs).
constexpr Entry kOps[] = {
#include "onnx_op_table.inc"
};

}  // namespace

int64_t onnx_op_since(const std::string& op_type) {
  auto it = std::lower_bound(std::begin(kOps), std::end(kOps), op_type,
                             [](const Entry& e, const std::string& s) { return e.name < s; });
  return it != std::end(kOps) && op_type == it->name ? it->since : 0;
}

}  // namespace jaxonnx
