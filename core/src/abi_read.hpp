// Private: the one place the host reads what a plugin hands over. Every struct
// that crosses starts with struct_size and only grows at the end (ABI rule 2),
// so read_struct copies the bytes the plugin's layout has into a
// zero-initialised struct of the current layout: a field the plugin's minor
// did not have reads as its default (zero: absent, empty, NULL), and no byte
// past struct_size is ever touched. The readers below build the core's own
// types from those copies and refuse what cannot be used (InvalidArgument).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "jaxonnx/core/ir.hpp"
#include "jaxonnx/core/types.hpp"
#include "jaxonnx/plugin_abi.h"
#include "status.hpp"

namespace jaxonnx::abi {

// The smallest layout of each struct the host accepts (its first minor's, or
// the fields the host cannot do without), and its name for messages.
template <typename T> struct Layout;
#define JXO_LAYOUT(T, last_required_field)                                               \
  template <> struct Layout<T> {                                                         \
    static constexpr size_t min_size =                                                   \
        offsetof(T, last_required_field) + sizeof(((T*)nullptr)->last_required_field);   \
    static constexpr const char* name = #T;                                              \
  }
JXO_LAYOUT(jxo_aval, dims);
JXO_LAYOUT(jxo_tensor, nbytes);
JXO_LAYOUT(jxo_attr, tensor);                   // minor 0; `graph` came in minor 1
JXO_LAYOUT(jxo_node, num_attrs);
JXO_LAYOUT(jxo_binding, leading_dims_operands);
JXO_LAYOUT(jxo_primitive_desc, user_data);      // the ops, doc and summary may be absent
JXO_LAYOUT(jxo_rule_desc, user_data);
JXO_LAYOUT(jxo_plugin_desc, num_primitives);    // minor 0; rules came in minor 2
JXO_LAYOUT(jxo_test_eqn, num_outputs);          // minor 4
#undef JXO_LAYOUT

// `*p` as the current layout: the first min(struct_size, sizeof(T)) bytes
// copied, the rest zero. struct_size keeps the plugin's value, so that
// JXO_HAS_FIELD on the copy still tells which fields the plugin had.
template <typename T>
T read_struct(const T* p, const std::string& what) {
  if (!p) throw InvalidArgument(what + " is NULL");
  uint32_t size = 0;
  std::memcpy(&size, p, sizeof size);  // struct_size leads every such struct
  if (size < Layout<T>::min_size)
    throw InvalidArgument(what + " is a " + Layout<T>::name + " of struct_size " +
                          std::to_string(size) + ", smaller than its first layout (" +
                          std::to_string(Layout<T>::min_size) + " bytes)");
  T out{};
  std::memcpy(static_cast<void*>(&out), static_cast<const void*>(p),
              std::min<size_t>(size, sizeof(T)));
  return out;
}

// A string a plugin passes: a NULL pointer with a nonzero size is refused.
std::string read_string(jxo_str s, const std::string& what = "a string argument");

// An aval a plugin passes (node outputs, subgraph inputs, abstract-eval
// outputs): dims present for its rank, static dims not negative, a known dtype
// (or undefined).
Aval read_aval(const jxo_aval* a, const std::string& what);

// A tensor a plugin passes (constants, tensor attributes): a known dtype, dims
// that are sizes, and exactly the bytes those dims need. Copies the data.
std::shared_ptr<const Tensor> read_tensor(const jxo_tensor* t, const std::string& what);

// A node attribute. A GRAPH attribute's handle (NULL when the plugin's
// jxo_attr predates minor 1) is resolved by `graph`, which throws when the
// caller takes no subgraphs.
using GraphResolver = std::function<std::shared_ptr<ir::Graph>(const jxo_graph* handle,
                                                                const std::string& name)>;
ir::Attribute read_attribute(const jxo_attr* a, const GraphResolver& graph);

// A node a plugin emits (a lowering's emit_node, a rule's rw_emit_node), read
// but not yet placed: what each caller checks further (where inputs may come
// from, which ops and domains it takes) and does with it is its own. Messages
// begin "<who>(<op_type>)"; graph attributes go through `graph`.
struct NodeRequest {
  std::string op_type;
  std::string domain;
  int64_t domain_version = 0;
  std::vector<jxo_value> inputs;                // as given; JXO_NO_VALUE: an omitted input
  std::vector<ir::Attribute> attrs;
  std::vector<std::optional<Aval>> outputs;     // the declared aval, if any
  std::string where;                            // "<who>(<op_type>)", for the caller's messages
};
NodeRequest read_node(const jxo_node* node, const std::string& who, const GraphResolver& graph);

}  // namespace jaxonnx::abi
