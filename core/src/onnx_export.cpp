// IR -> onnx.ModelProto bytes (IR version 10). Output order follows the IR,
// so the same IR always gives the same bytes. Large initializers can instead
// be laid out in external data files (written later from the tensors' own
// memory, see DataFile::write_to), which is also how models past protobuf's
// 2 GB limit are written.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <set>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "jaxonnx/core/onnx_export.hpp"
#include "jaxonnx/core/error.hpp"
#include "onnx.pb.h"
#include "passes/onnx_ops.hpp"

namespace jaxonnx {
namespace {

constexpr int64_t kIrVersion = 10;

void set_type(onnx::ValueInfoProto* vi, const ir::Value& v) {
  vi->set_name(v.name);
  if (!v.has_type) return;
  onnx::TypeProto_Tensor* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(v.type.dtype);
  if (!v.type.known_rank) return;
  onnx::TensorShapeProto* shape = tt->mutable_shape();
  for (const Dim& d : v.type.dims) {
    onnx::TensorShapeProto_Dimension* dim = shape->add_dim();
    if (d.is_static()) dim->set_dim_value(d.value);
    else dim->set_dim_param(d.symbol);
  }
}

// Main-graph initializers from this size on are not copied into the protobuf
// message: serialize() writes their bytes between its pieces.
constexpr uint64_t kSpliceFrom = 1024;

constexpr uint64_t kProtobufLimit = INT_MAX;  // protobuf refuses messages from 2 GB on
// kAuto keeps a model whole up to this many tensor bytes, leaving room for the graph.
constexpr uint64_t kAutoLimit = kProtobufLimit - (uint64_t{256} << 20);

// The tensor as the file stores it: a 4-bit one (one element per byte in
// memory, its value in the low nibble) packed two per byte, low nibble first,
// as ONNX stores INT4/UINT4; any other the same tensor.
std::shared_ptr<const Tensor> as_stored(const std::shared_ptr<const Tensor>& src) {
  if (src->dtype != JXO_DTYPE_INT4 && src->dtype != JXO_DTYPE_UINT4) return src;
  const size_t n = static_cast<size_t>(src->num_elements());
  auto bytes = std::make_shared<std::vector<uint8_t>>((n + 1) / 2, 0);
  const auto* in = static_cast<const uint8_t*>(src->data);
  for (size_t i = 0; i < n; ++i) (*bytes)[i / 2] |= static_cast<uint8_t>((in[i] & 0x0f) << (4 * (i % 2)));
  auto out = std::make_shared<Tensor>();
  out->dtype = src->dtype;
  out->dims = src->dims;
  out->data = bytes->data();
  out->nbytes = bytes->size();
  out->owner = bytes;
  return out;
}

// `src` already as the file stores it (as_stored).
void write_tensor(onnx::TensorProto* t, const Tensor& src, const std::string& name) {
  if (!name.empty()) t->set_name(name);
  t->set_data_type(src.dtype);
  for (int64_t d : src.dims) t->add_dims(d);
  t->set_raw_data(src.data, src.nbytes);
}

void set_tensor(onnx::TensorProto* t, const Tensor& src, const std::string& name) {
  if (src.dtype != JXO_DTYPE_INT4 && src.dtype != JXO_DTYPE_UINT4) return write_tensor(t, src, name);
  // Not owned here: the view lives only for this call.
  write_tensor(t, *as_stored(std::shared_ptr<const Tensor>(&src, [](const Tensor*) {})), name);
}

void add_entry(onnx::TensorProto* t, const char* key, const std::string& value) {
  onnx::StringStringEntryProto* e = t->add_external_data();
  e->set_key(key);
  e->set_value(value);
}

// A tensor whose bytes live in `file` at `offset`.
void set_external_tensor(onnx::TensorProto* t, const std::shared_ptr<const Tensor>& src,
                         const std::string& name, DataFile& file) {
  // Page-aligned large tensors can be memory-mapped by a runtime.
  uint64_t align = src->nbytes >= (uint64_t{1} << 20) ? 4096 : 64;
  uint64_t offset = (file.size + align - 1) / align * align;
  file.pieces.push_back({src, offset});
  file.size = offset + src->nbytes;
  t->set_name(name);
  t->set_data_type(src->dtype);
  for (int64_t d : src->dims) t->add_dims(d);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  add_entry(t, "location", file.location);
  add_entry(t, "offset", std::to_string(offset));
  add_entry(t, "length", std::to_string(src->nbytes));
}

// A tensor name as a file name: [A-Za-z0-9._-] kept, anything else '_'.
std::string file_safe(const std::string& name) {
  std::string out = name;
  for (char& c : out)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  return out;
}

// Every tensor byte the model holds (initializers and tensor attributes, subgraphs included).
uint64_t tensor_bytes(const ir::Graph& g) {
  uint64_t total = 0;
  for (const ir::Initializer& init : g.initializers) total += init.tensor->nbytes;
  for (const ir::Node& n : g.nodes)
    for (const ir::Attribute& a : n.attrs) {
      if (a.tensor) total += a.tensor->nbytes;
      if (a.graph) total += tensor_bytes(*a.graph);
    }
  return total;
}

std::string gigabytes(uint64_t bytes) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.2f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

[[noreturn]] void too_large(uint64_t bytes) {
  throw ConversionError(
      "the model is " + gigabytes(bytes) + ", over protobuf's 2 GB limit for one ONNX model: "
      "write its weights as external data, with return_mode=\"file\" (weights go beside "
      "output_path) or external_data=jaxonnx.ExternalData(folder=...) for \"proto\"/\"bytes\"");
}

using Names = std::vector<std::string>;
void set_node(onnx::NodeProto* node, const ir::Node& n, const Names& names);

// Where the main graph's large initializers go (null: nowhere, all embedded).
struct External {
  const ExternalDataOptions& options;
  std::vector<DataFile>& files;
  std::set<std::string> used;  // per-tensor file names taken

  DataFile& file_for(const std::string& tensor_name) {
    if (!options.per_tensor) {
      if (files.empty()) files.push_back(DataFile{options.location, 0, {}});
      return files.front();
    }
    std::string base = options.location + "." + file_safe(tensor_name), loc = base;
    for (int k = 1; !used.insert(loc).second; ++k) loc = base + "_" + std::to_string(k);
    files.push_back(DataFile{loc, 0, {}});
    return files.back();
  }
};

// Per initializer of the main graph, the tensor whose bytes serialize() puts
// in place of its raw_data (null: written by protobuf).
using Spliced = std::vector<std::shared_ptr<const Tensor>>;

void set_graph(onnx::GraphProto* graph, const ir::Graph& g, const Names* outer,
               External* external = nullptr, Spliced* spliced = nullptr);

void set_attribute(onnx::AttributeProto* a, const ir::Attribute& src, const Names& names) {
  a->set_name(src.name);
  a->set_type(static_cast<onnx::AttributeProto_AttributeType>(src.type));
  switch (src.type) {
    case JXO_ATTR_INT: a->set_i(src.i); break;
    case JXO_ATTR_FLOAT: a->set_f(static_cast<float>(src.f)); break;
    case JXO_ATTR_STRING: a->set_s(src.s); break;
    case JXO_ATTR_INTS: for (int64_t v : src.ints) a->add_ints(v); break;
    case JXO_ATTR_FLOATS: for (double v : src.floats) a->add_floats(static_cast<float>(v)); break;
    case JXO_ATTR_STRINGS: for (const std::string& v : src.strings) a->add_strings(v); break;
    case JXO_ATTR_TENSOR: set_tensor(a->mutable_t(), *src.tensor, ""); break;
    case ir::kAttrGraph: set_graph(a->mutable_g(), *src.graph, &names); break;
    default: throw ConversionError("attribute '" + src.name + "' has an unknown type");
  }
}

// Writes `g`; `outer` holds the enclosing graph's value names (null for the
// main graph). A captured value is written under its outer value's name.
void set_graph(onnx::GraphProto* graph, const ir::Graph& g, const Names* outer,
               External* external, Spliced* spliced) {
  Names names;
  names.reserve(g.values.size());
  for (const ir::Value& v : g.values) names.push_back(v.name);
  for (const ir::Capture& c : g.captures) names[c.inner] = outer->at(c.outer);
  auto typed = [&](onnx::ValueInfoProto* vi, ir::ValueId v) {
    set_type(vi, g.values[v]);
    vi->set_name(names[v]);
  };

  graph->set_name(g.name);
  for (ir::ValueId v : g.inputs) typed(graph->add_input(), v);
  for (ir::ValueId v : g.outputs) typed(graph->add_output(), v);
  for (const ir::Initializer& init : g.initializers) {
    const std::string& name = names[init.value];
    const std::shared_ptr<const Tensor> tensor = as_stored(init.tensor);
    if (external && tensor->nbytes >= std::max<uint64_t>(external->options.threshold, 1)) {
      set_external_tensor(graph->add_initializer(), tensor, name, external->file_for(name));
    } else if (spliced && tensor->nbytes >= kSpliceFrom) {
      onnx::TensorProto* t = graph->add_initializer();
      t->set_name(name);
      t->set_data_type(tensor->dtype);
      for (int64_t d : tensor->dims) t->add_dims(d);
      spliced->resize(static_cast<size_t>(graph->initializer_size()));
      spliced->back() = tensor;
    } else {
      write_tensor(graph->add_initializer(), *tensor, name);
    }
  }
  if (spliced) spliced->resize(static_cast<size_t>(graph->initializer_size()));

  std::set<ir::ValueId> interface(g.outputs.begin(), g.outputs.end());
  for (const ir::Node& n : g.nodes) set_node(graph->add_node(), n, names);
  // Intermediate types, in node order.
  for (const ir::Node& n : g.nodes)
    for (ir::ValueId v : n.outputs)
      if (g.values[v].has_type && !interface.count(v)) typed(graph->add_value_info(), v);
}

void set_node(onnx::NodeProto* node, const ir::Node& n, const Names& names) {
  node->set_name(n.name);
  node->set_op_type(n.op_type);
  if (!n.domain.empty()) node->set_domain(n.domain);
  for (ir::ValueId v : n.inputs) node->add_input(v == ir::kNoValue ? "" : names[v]);
  for (ir::ValueId v : n.outputs) node->add_output(names[v]);
  for (const ir::Attribute& a : n.attrs) set_attribute(node->add_attribute(), a, names);
  for (const auto& [key, value] : n.metadata) {
    onnx::StringStringEntryProto* prop = node->add_metadata_props();
    prop->set_key(key);
    prop->set_value(value);
  }
}

void collect_domains(const ir::Graph& g, std::set<std::string>& out) {
  for (const ir::Node& n : g.nodes) {
    if (!n.domain.empty() && n.domain != "ai.onnx") out.insert(n.domain);
    for (const ir::Attribute& a : n.attrs)
      if (a.graph) collect_domains(*a.graph, out);
  }
}

// A FunctionProto holds no initializers: the body's are written as Constant
// nodes ahead of its nodes. Types go to value_info (IR version 10).
void set_function(onnx::FunctionProto* f, const ir::Function& fn, const ir::Model& model) {
  const ir::Graph& g = *fn.body;
  Names names;
  names.reserve(g.values.size());
  for (const ir::Value& v : g.values) names.push_back(v.name);
  f->set_name(fn.name);
  f->set_domain(fn.domain);
  for (ir::ValueId v : g.inputs) f->add_input(names[v]);
  for (ir::ValueId v : g.outputs) f->add_output(names[v]);
  onnx::OperatorSetIdProto* op = f->add_opset_import();
  op->set_domain("");
  op->set_version(model.opset);
  std::set<std::string> domains;
  collect_domains(g, domains);
  for (const std::string& d : domains) {
    auto it = model.domain_opsets.find(d);
    onnx::OperatorSetIdProto* custom = f->add_opset_import();
    custom->set_domain(d);
    custom->set_version(it == model.domain_opsets.end() ? 1 : it->second);
  }
  for (const ir::Initializer& init : g.initializers) {
    onnx::NodeProto* node = f->add_node();
    node->set_name(names[init.value]);
    node->set_op_type(passes::onnx_ops::op_name(passes::onnx_ops::Op::Constant));
    node->add_output(names[init.value]);
    onnx::AttributeProto* a = node->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    set_tensor(a->mutable_t(), *init.tensor, "");
  }
  for (const ir::Node& n : g.nodes) set_node(f->add_node(), n, names);
  for (ir::ValueId v : g.inputs) set_type(f->add_value_info(), g.values[v]);
  for (ir::ValueId v : g.outputs) set_type(f->add_value_info(), g.values[v]);
  std::set<ir::ValueId> interface(g.outputs.begin(), g.outputs.end());
  for (const ir::Node& n : g.nodes)
    for (ir::ValueId v : n.outputs)
      if (g.values[v].has_type && !interface.count(v)) set_type(f->add_value_info(), g.values[v]);
}

}  // namespace

void DataFile::write_to(int fd, const std::function<void(uint64_t)>& written) const {
  static const char kZeros[4096] = {};
  uint64_t pos = 0;
  auto put = [&](const char* p, uint64_t n) {
    while (n > 0) {
      ssize_t k = ::write(fd, p, std::min<uint64_t>(n, uint64_t{1} << 26));
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) throw ConversionError("writing the external data file '" + location + "' failed: " +
                                       std::strerror(errno));
      p += k;
      n -= static_cast<uint64_t>(k);
      pos += static_cast<uint64_t>(k);
      if (written) written(pos);
    }
  };
  for (const Piece& piece : pieces) {
    while (pos < piece.offset) put(kZeros, std::min<uint64_t>(piece.offset - pos, sizeof kZeros));
    put(static_cast<const char*>(piece.tensor->data), piece.tensor->nbytes);
  }
}

void SerializedModel::copy_to(char* out) const {
  for (const Piece& p : pieces) {
    if (p.tensor) {
      if (p.tensor->nbytes) std::memcpy(out, p.tensor->data, p.tensor->nbytes);
      out += p.tensor->nbytes;
    } else {
      std::memcpy(out, p.text.data(), p.text.size());
      out += p.text.size();
    }
  }
}

std::string SerializedModel::str() const {
  std::string out(size, '\0');
  copy_to(out.data());
  return out;
}

namespace {

void put_varint(std::string& s, uint64_t v) {
  for (; v >= 0x80; v >>= 7) s.push_back(static_cast<char>((v & 0x7f) | 0x80));
  s.push_back(static_cast<char>(v));
}

uint64_t varint_size(uint64_t v) {
  uint64_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

// The key of a length-delimited field (wire type 2).
char key(int field) { return static_cast<char>(field << 3 | 2); }

constexpr int kModelGraph = 7, kGraphInitializer = 5, kTensorRawData = 9;

// `m` serialized as protobuf would, field by field in number order, but with
// the bytes of each tensor in `spliced` as its initializer's raw_data (the last
// field such a TensorProto has): ModelProto fields 1-6, graph (7) = [node (1),
// name (2)], initializers (5), [input (11), output (12), value_info (13)], then
// opset_import (8) and functions (25).
SerializedModel splice(onnx::ModelProto& m, const Spliced& spliced) {
  onnx::GraphProto* graph = m.mutable_graph();
  onnx::ModelProto after_graph;
  after_graph.mutable_opset_import()->Swap(m.mutable_opset_import());
  after_graph.mutable_functions()->Swap(m.mutable_functions());
  onnx::GraphProto after_inits;
  after_inits.mutable_input()->Swap(graph->mutable_input());
  after_inits.mutable_output()->Swap(graph->mutable_output());
  after_inits.mutable_value_info()->Swap(graph->mutable_value_info());
  google::protobuf::RepeatedPtrField<onnx::TensorProto> inits;
  inits.Swap(graph->mutable_initializer());
  const std::string graph_head = graph->SerializeAsString();
  m.clear_graph();

  SerializedModel out;
  std::string text = m.SerializeAsString();
  auto flush = [&] {
    out.size += text.size();
    out.pieces.push_back({std::move(text), nullptr});
    text.clear();
  };
  std::vector<std::string> bodies;
  bodies.reserve(static_cast<size_t>(inits.size()));
  uint64_t graph_size = graph_head.size();
  for (int i = 0; i < inits.size(); ++i) {
    bodies.push_back(inits.Get(i).SerializeAsString());
    uint64_t n = bodies.back().size();
    if (const Tensor* t = spliced[static_cast<size_t>(i)].get())
      n += 1 + varint_size(t->nbytes) + t->nbytes;
    graph_size += 1 + varint_size(n) + n;
  }
  const std::string graph_tail = after_inits.SerializeAsString();
  graph_size += graph_tail.size();

  text.push_back(key(kModelGraph));
  put_varint(text, graph_size);
  text += graph_head;
  for (int i = 0; i < inits.size(); ++i) {
    const std::shared_ptr<const Tensor>& t = spliced[static_cast<size_t>(i)];
    const std::string& body = bodies[static_cast<size_t>(i)];
    text.push_back(key(kGraphInitializer));
    put_varint(text, body.size() + (t ? 1 + varint_size(t->nbytes) + t->nbytes : 0));
    text += body;
    if (!t) continue;
    text.push_back(key(kTensorRawData));
    put_varint(text, t->nbytes);
    flush();
    out.size += t->nbytes;
    out.pieces.push_back({std::string(), t});
  }
  text += graph_tail;
  text += after_graph.SerializeAsString();
  flush();
  return out;
}

}  // namespace

SerializedModel serialize_onnx(const ir::Model& model, const ExternalDataOptions& external_options,
                               std::vector<DataFile>* data_files) {
  onnx::ModelProto m;
  m.set_ir_version(kIrVersion);
  m.set_producer_name("jaxonnx");
  m.set_producer_version(model.producer_version);
  onnx::OperatorSetIdProto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(model.opset);
  // A node a rewrite rule emitted may be of a domain no lowering used (version 1).
  std::map<std::string, int64_t> domains(model.domain_opsets.begin(), model.domain_opsets.end());
  std::set<std::string> in_graph;
  collect_domains(model.graph, in_graph);
  for (const std::string& d : in_graph) domains.emplace(d, 1);
  for (const auto& [domain, version] : domains) {
    onnx::OperatorSetIdProto* d = m.add_opset_import();
    d->set_domain(domain);
    d->set_version(version);
  }

  uint64_t total = tensor_bytes(model.graph);
  using Options = ExternalDataOptions;
  bool to_files = external_options.mode == Options::kAlways ||
                  external_options.mode == Options::kInline ||
                  (external_options.mode == Options::kAuto && total > kAutoLimit);
  bool whole = !to_files || external_options.mode == Options::kInline;
  if (whole && total > kProtobufLimit) too_large(total);  // before copying any of it
  if (to_files && !data_files) throw ConversionError("external data needs a list of data files");
  if (data_files) data_files->clear();
  Spliced spliced;
  if (to_files) {
    External external{external_options, *data_files, {}};
    set_graph(m.mutable_graph(), model.graph, nullptr, &external);
  } else {
    set_graph(m.mutable_graph(), model.graph, nullptr, nullptr, &spliced);
  }
  for (const ir::Function& fn : model.functions) set_function(m.add_functions(), fn, model);

  const bool splicing = std::any_of(spliced.begin(), spliced.end(), [](const auto& t) { return t; });
  SerializedModel out;
  if (splicing) {
    out = splice(m, spliced);
  } else {
    if (m.ByteSizeLong() > kProtobufLimit) too_large(m.ByteSizeLong());
    std::string bytes;
    if (!m.SerializeToString(&bytes)) throw ConversionError("serializing the ONNX model failed");
    out.size = bytes.size();
    out.pieces.push_back({std::move(bytes), nullptr});
  }
  if (out.size > kProtobufLimit) too_large(out.size);
  return out;
}

std::string export_onnx(const ir::Model& model, const ExternalDataOptions& external_options,
                        std::vector<DataFile>* data_files) {
  return serialize_onnx(model, external_options, data_files).str();
}

}  // namespace jaxonnx
