#include "abi_read.hpp"

#include <cstdint>
#include <vector>

namespace jaxonnx::abi {
namespace {

// The element count of `rank` dims, refusing a negative dim or a count whose
// byte size overflows (checked arithmetic: UBSan flagged the plain product).
size_t checked_elements(const int64_t* dims, int64_t rank, size_t elem, const std::string& what) {
  if (rank < 0) throw InvalidArgument(what + " has a negative rank " + std::to_string(rank));
  if (rank > 0 && !dims)
    throw InvalidArgument(what + " has rank " + std::to_string(rank) + " but no dims");
  uint64_t n = 1;
  for (int64_t k = 0; k < rank; ++k) {
    if (dims[k] < 0) throw InvalidArgument(what + " has a negative dim " + std::to_string(dims[k]));
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(dims[k]), &n))
      throw InvalidArgument(what + "'s dims overflow");
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<uint64_t>(elem), &bytes) ||
      bytes > static_cast<uint64_t>(PTRDIFF_MAX))
    throw InvalidArgument(what + "'s dims overflow");
  return static_cast<size_t>(n);
}

}  // namespace

std::string read_string(jxo_str s, const std::string& what) {
  if (s.size && !s.data)
    throw InvalidArgument(what + " is a NULL pointer with size " + std::to_string(s.size));
  return s.size ? std::string(s.data, s.size) : std::string();
}

Aval read_aval(const jxo_aval* p, const std::string& what) {
  jxo_aval a = read_struct(p, what);
  if (a.rank > 0 && !a.dims)
    throw InvalidArgument(what + " has rank " + std::to_string(a.rank) + " but no dims");
  for (int64_t d = 0; d < a.rank; ++d) {
    read_string(a.dims[d].symbol, what + "'s dim " + std::to_string(d));
    if (!a.dims[d].symbol.size && a.dims[d].value < 0)
      throw InvalidArgument(what + " has a negative dim " + std::to_string(a.dims[d].value));
  }
  if (a.dtype != JXO_DTYPE_UNDEFINED && a.dtype != JXO_DTYPE_STRING && dtype_size(a.dtype) == 0)
    throw InvalidArgument(what + " has unknown dtype " + std::to_string(a.dtype));
  return Aval::from_c(a);
}

std::shared_ptr<const Tensor> read_tensor(const jxo_tensor* p, const std::string& what) {
  if (!p) throw InvalidArgument(what + ": no tensor (NULL)");
  jxo_tensor t = read_struct(p, what);
  size_t elem = dtype_size(t.dtype);
  if (elem == 0) throw InvalidArgument(what + ": unsupported dtype " + std::to_string(t.dtype));
  size_t n = checked_elements(t.dims, t.rank, elem, what);
  if (elem * n != t.nbytes)
    throw InvalidArgument(what + ": " + std::to_string(t.nbytes) + " bytes do not fit a " +
                          dtype_name(t.dtype) + " tensor of " + std::to_string(n) +
                          " elements (" + std::to_string(elem * n) + " bytes)");
  if (t.nbytes && !t.data) throw InvalidArgument(what + ": data is NULL");
  return Tensor::copy_of(t.dtype, std::vector<int64_t>(t.dims, t.dims + t.rank), t.data, t.nbytes);
}

ir::Attribute read_attribute(const jxo_attr* p, const GraphResolver& graph) {
  jxo_attr a = read_struct(p, "an attribute");
  ir::Attribute out;
  out.name = read_string(a.name, "an attribute's name");
  if (out.name.empty()) throw InvalidArgument("an attribute has no name");
  out.type = a.type;
  const std::string what = "attribute '" + out.name + "'";
  auto array = [&](const void* data) {
    if (a.count && !data)
      throw InvalidArgument(what + " has " + std::to_string(a.count) + " entries but a NULL array");
  };
  switch (a.type) {
    case JXO_ATTR_INT: out.i = a.i; break;
    case JXO_ATTR_FLOAT: out.f = a.f; break;
    case JXO_ATTR_STRING: out.s = read_string(a.s, what); break;
    case JXO_ATTR_INTS:
      array(a.ints);
      if (a.count) out.ints.assign(a.ints, a.ints + a.count);
      break;
    case JXO_ATTR_FLOATS:
      array(a.floats);
      if (a.count) out.floats.assign(a.floats, a.floats + a.count);
      break;
    case JXO_ATTR_STRINGS:
      array(a.strings);
      for (size_t k = 0; k < a.count; ++k) out.strings.push_back(read_string(a.strings[k], what));
      break;
    case JXO_ATTR_TENSOR: out.tensor = read_tensor(a.tensor, "tensor " + what); break;
    case JXO_ATTR_GRAPH:
      // Zero when the plugin's jxo_attr ends before `graph` (minor 0).
      if (!a.graph)
        throw InvalidArgument("graph " + what + " has no graph" +
                              (JXO_HAS_FIELD(&a, jxo_attr, graph)
                                   ? std::string()
                                   : " (its jxo_attr predates ABI 1.1, which added graphs)"));
      out.type = ir::kAttrGraph;
      out.graph = graph(a.graph, out.name);
      break;
    default:
      throw InvalidArgument(what + " has unknown type " + std::to_string(a.type));
  }
  return out;
}

NodeRequest read_node(const jxo_node* node_in, const std::string& who, const GraphResolver& graph) {
  if (!node_in) throw InvalidArgument(who + ": no node (NULL)");
  const jxo_node node = read_struct(node_in, who + ": the node");
  NodeRequest out;
  out.op_type = read_string(node.op_type, who + ": op_type");
  if (out.op_type.empty()) throw InvalidArgument(who + ": empty op_type");
  out.where = who + "(" + out.op_type + ")";
  out.domain = read_string(node.domain, out.where + ": domain");
  out.domain_version = node.domain_version;
  if ((node.num_inputs && !node.inputs) || (node.num_attrs && !node.attrs))
    throw InvalidArgument(out.where + ": a NULL input or attribute array");
  for (size_t k = 0; k < node.num_attrs; ++k)
    if (!node.attrs[k])
      throw InvalidArgument(out.where + ": attribute " + std::to_string(k) + " is NULL");
  out.outputs.resize(node.num_outputs);
  for (size_t k = 0; k < node.num_outputs; ++k)
    if (const jxo_aval* t = node.outputs ? node.outputs[k] : nullptr)
      out.outputs[k] = read_aval(t, out.where + ": output " + std::to_string(k));
  out.inputs.assign(node.inputs, node.inputs + node.num_inputs);
  for (size_t k = 0; k < node.num_attrs; ++k) {
    try {
      out.attrs.push_back(read_attribute(node.attrs[k], graph));
    } catch (const HostError& e) {
      throw HostError(e.code, out.where + ": " + e.what());
    }
  }
  return out;
}

}  // namespace jaxonnx::abi
