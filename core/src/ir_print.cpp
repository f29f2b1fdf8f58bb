// ir::to_text: a stable, readable listing of a graph for IR dumps and tests.
// Values appear by name (a capture under its outer value's name, as the
// exporter writes it); tensors of up to 16 elements show their contents.
#include <cstring>
#include <sstream>

#include "jaxonnx/core/ir.hpp"

namespace jaxonnx::ir {
namespace {

using Names = std::vector<std::string>;

void print_graph(std::ostringstream& o, const Graph& g, const Names* outer, int indent);

std::string type_of(const Value& v) { return v.has_type ? v.type.str() : "?"; }

void print_tensor(std::ostringstream& o, const Tensor& t) {
  o << dtype_name(t.dtype) << "[";
  for (size_t k = 0; k < t.dims.size(); ++k) o << (k ? "," : "") << t.dims[k];
  o << "]";
  int64_t n = t.num_elements();
  if (n > 16 || (t.dtype != JXO_DTYPE_INT64 && t.dtype != JXO_DTYPE_INT32 &&
                 t.dtype != JXO_DTYPE_FLOAT32 && t.dtype != JXO_DTYPE_FLOAT64)) {
    o << " <" << t.nbytes << " bytes>";
    return;
  }
  o << " = {";
  for (int64_t k = 0; k < n; ++k) {
    o << (k ? ", " : "");
    const char* p = static_cast<const char*>(t.data);
    switch (t.dtype) {
      case JXO_DTYPE_INT64: { int64_t v; std::memcpy(&v, p + 8 * k, 8); o << v; break; }
      case JXO_DTYPE_INT32: { int32_t v; std::memcpy(&v, p + 4 * k, 4); o << v; break; }
      case JXO_DTYPE_FLOAT32: { float v; std::memcpy(&v, p + 4 * k, 4); o << v; break; }
      default: { double v; std::memcpy(&v, p + 8 * k, 8); o << v; break; }
    }
  }
  o << "}";
}

void print_attr(std::ostringstream& o, const Attribute& a, const Names& names, int indent) {
  o << a.name << "=";
  switch (a.type) {
    case JXO_ATTR_INT: o << a.i; break;
    case JXO_ATTR_FLOAT: o << a.f; break;
    case JXO_ATTR_STRING: o << '"' << a.s << '"'; break;
    case JXO_ATTR_INTS:
      o << "[";
      for (size_t k = 0; k < a.ints.size(); ++k) o << (k ? "," : "") << a.ints[k];
      o << "]";
      break;
    case JXO_ATTR_FLOATS:
      o << "[";
      for (size_t k = 0; k < a.floats.size(); ++k) o << (k ? "," : "") << a.floats[k];
      o << "]";
      break;
    case JXO_ATTR_STRINGS:
      o << "[";
      for (size_t k = 0; k < a.strings.size(); ++k) o << (k ? "," : "") << '"' << a.strings[k] << '"';
      o << "]";
      break;
    case JXO_ATTR_TENSOR: print_tensor(o, *a.tensor); break;
    case kAttrGraph: o << "\n"; print_graph(o, *a.graph, &names, indent + 4); break;
    default: o << "<type " << a.type << ">";
  }
}

void print_graph(std::ostringstream& o, const Graph& g, const Names* outer, int indent) {
  Names names;
  for (const Value& v : g.values) names.push_back(v.name);
  for (const Capture& c : g.captures)
    names[c.inner] = outer && c.outer >= 0 && static_cast<size_t>(c.outer) < outer->size()
                         ? (*outer)[c.outer] : "<outer " + std::to_string(c.outer) + ">";
  std::string pad(indent, ' ');
  auto list = [&](const std::vector<ValueId>& vs) {
    std::string s;
    for (size_t k = 0; k < vs.size(); ++k)
      s += (k ? ", " : "") + names[vs[k]] + ": " + type_of(g.values[vs[k]]);
    return s;
  };
  o << pad << "graph " << g.name << " (" << list(g.inputs) << ") -> (" << list(g.outputs) << ")\n";
  for (const Capture& c : g.captures) o << pad << "  capture " << names[c.inner] << "\n";
  for (const Initializer& init : g.initializers) {
    o << pad << "  init " << names[init.value] << ": ";
    print_tensor(o, *init.tensor);
    o << "\n";
  }
  for (const Node& n : g.nodes) {
    o << pad << "  ";
    for (size_t k = 0; k < n.outputs.size(); ++k)
      o << (k ? ", " : "") << names[n.outputs[k]] << ": " << type_of(g.values[n.outputs[k]]);
    o << " = " << (n.domain.empty() ? "" : n.domain + ".") << n.op_type << "(";
    for (size_t k = 0; k < n.inputs.size(); ++k)
      o << (k ? ", " : "") << (n.inputs[k] == kNoValue ? "_" : names[n.inputs[k]]);
    o << ")";
    for (size_t k = 0; k < n.attrs.size(); ++k) {
      o << (k ? ", " : " {");
      print_attr(o, n.attrs[k], names, indent);
    }
    if (!n.attrs.empty()) o << "}";
    o << "  # " << n.name << "\n";
  }
}

}  // namespace

std::string to_text(const Graph& graph) {
  std::ostringstream o;
  print_graph(o, graph, nullptr, 0);
  return o.str();
}

}  // namespace jaxonnx::ir
