#include "onnx_schema.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace jaxonnx {
namespace {

constexpr size_t kMaxForms = 16;  // an operator's forms (Constant has 10 in onnx 1.19)

struct Entry {
  const char* name;
  int16_t since[kMaxForms];  // the opsets its form changed in, ascending, then zeros
};

// Sorted by name (generated from onnx.defs by core/onnx_op_table.py).
constexpr Entry kOps[] = {
#include "onnx_op_table.inc"
};

const Entry* find(const std::string& op_type) {
  auto it = std::lower_bound(std::begin(kOps), std::end(kOps), op_type,
                             [](const Entry& e, const std::string& s) { return e.name < s; });
  return it != std::end(kOps) && op_type == it->name ? it : nullptr;
}

}  // namespace

int64_t onnx_op_since(const std::string& op_type) {
  const Entry* e = find(op_type);
  return e ? e->since[0] : 0;
}

int64_t onnx_op_form(const std::string& op_type, int64_t opset) {
  const Entry* e = find(op_type);
  int64_t form = 0;
  for (size_t i = 0; e && i < kMaxForms && e->since[i] != 0 && e->since[i] <= opset; ++i)
    form = e->since[i];
  return form;
}

}  // namespace jaxonnx
