#include "rewrite.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "onnx_ops.hpp"

namespace jaxonnx::passes {

Uses::Uses(const ir::Graph& g)
    : reads(g.values.size(), 0),
      is_output(g.values.size(), false),
      producer(g.values.size(), -1),
      consumers(g.values.size()) {
  for (ir::ValueId v : g.outputs) is_output[v] = true;
  for (size_t k = 0; k < g.initializers.size(); ++k) initializer.emplace(g.initializers[k].value, k);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const ir::Node& n = g.nodes[k];
    for (ir::ValueId v : n.outputs) producer[v] = static_cast<int64_t>(k);
    auto read = [&](ir::ValueId v) {
      if (v == ir::kNoValue) return;
      ++reads[v];
      consumers[v].push_back(k);
    };
    for (ir::ValueId v : n.inputs) read(v);
    for (ir::ValueId v : ir::captured_inputs(n)) read(v);
  }
}

const Tensor* Uses::constant(const ir::Graph& g, ir::ValueId v) const {
  if (v == ir::kNoValue) return nullptr;
  auto it = initializer.find(v);
  if (it != initializer.end()) return g.initializers[it->second].tensor.get();
  if (producer[v] < 0) return nullptr;
  const ir::Node& n = g.nodes[producer[v]];
  if (onnx_ops::kind(n) != onnx_ops::Op::Constant) return nullptr;
  const ir::Attribute* value = attribute(n, "value");
  return value && value->type == JXO_ATTR_TENSOR ? value->tensor.get() : nullptr;
}

int64_t Uses::first_consumer(const ir::Graph& g, ir::ValueId v) const {
  for (size_t c : consumers[v]) {
    const ir::Node& n = g.nodes[c];
    if (is_erased(n)) continue;
    for (ir::ValueId in : n.inputs)
      if (in == v) return static_cast<int64_t>(c);
    for (ir::ValueId in : ir::captured_inputs(n))
      if (in == v) return static_cast<int64_t>(c);
  }
  return -1;
}

void Uses::grow(const ir::Graph& g) {
  size_t n = g.values.size();
  reads.resize(n, 0);
  is_output.resize(n, false);
  producer.resize(n, -1);
  consumers.resize(n);
}

void Uses::set_input(ir::Graph& g, size_t node, size_t slot, ir::ValueId v) {
  ir::ValueId& in = g.nodes[node].inputs[slot];
  if (in == v) return;
  if (in != ir::kNoValue) --reads[in];
  in = v;
  if (v != ir::kNoValue) {
    ++reads[v];
    consumers[v].push_back(node);
  }
}

void Uses::replace(ir::Graph& g, ir::ValueId from, ir::ValueId to) {
  if (from == to) return;
  std::vector<size_t> readers;
  readers.swap(consumers[from]);
  // A node listed twice finds nothing to change the second time.
  for (size_t c : readers) {
    ir::Node& n = g.nodes[c];
    if (is_erased(n)) continue;
    int count = 0;
    for (ir::ValueId& v : n.inputs)
      if (v == from) v = to, ++count;
    for (ir::Attribute& a : n.attrs)
      if (a.graph)
        for (ir::Capture& cap : a.graph->captures)
          if (cap.outer == from) cap.outer = to, ++count;
    if (!count) continue;
    reads[from] -= count;
    reads[to] += count;
    consumers[to].push_back(c);
  }
}

void Uses::erase(ir::Graph& g, size_t node) {
  ir::Node& n = g.nodes[node];
  for (ir::ValueId v : n.inputs)
    if (v != ir::kNoValue) --reads[v];
  for (ir::ValueId v : ir::captured_inputs(n)) --reads[v];
  for (ir::ValueId v : n.outputs)
    if (producer[v] == static_cast<int64_t>(node)) producer[v] = -1;
  mark_erased(n);
}

void Uses::add_node(const ir::Graph& g, size_t node) {
  const ir::Node& n = g.nodes[node];
  for (ir::ValueId v : n.outputs) producer[v] = static_cast<int64_t>(node);
  for (ir::ValueId v : n.inputs)
    if (v != ir::kNoValue) ++reads[v], consumers[v].push_back(node);
  for (ir::ValueId v : ir::captured_inputs(n)) ++reads[v], consumers[v].push_back(node);
}

bool can_bypass(const ir::Graph& g, const Uses& uses, size_t index, ir::ValueId replacement) {
  ir::ValueId out = g.nodes[index].outputs.at(0);
  return !uses.is_output[out] || (uses.producer[replacement] >= 0 && !uses.is_output[replacement]);
}

bool bypass(ir::Graph& g, Uses& uses, size_t index, ir::ValueId replacement) {
  if (!can_bypass(g, uses, index, replacement)) return false;
  ir::ValueId out = g.nodes[index].outputs.at(0);
  if (!uses.is_output[out]) {
    uses.erase(g, index);
    uses.replace(g, out, replacement);
    return true;
  }
  int64_t maker = uses.producer[replacement];
  uses.erase(g, index);
  for (ir::ValueId& v : g.nodes[maker].outputs)
    if (v == replacement) v = out;
  uses.producer[out] = maker;
  uses.producer[replacement] = -1;
  uses.replace(g, replacement, out);
  return true;
}

void replace_reads(ir::Graph& g, ir::ValueId from, ir::ValueId to) {
  for (ir::Node& n : g.nodes) {
    if (is_erased(n)) continue;
    for (ir::ValueId& v : n.inputs)
      if (v == from) v = to;
    for (ir::Attribute& a : n.attrs)
      if (a.graph)
        for (ir::Capture& c : a.graph->captures)
          if (c.outer == from) c.outer = to;
  }
}

bool bypass(ir::Graph& g, const Uses& uses, size_t index, ir::ValueId replacement) {
  if (!can_bypass(g, uses, index, replacement)) return false;
  ir::Node& node = g.nodes[index];
  ir::ValueId out = node.outputs.at(0);
  if (!uses.is_output[out]) {
    mark_erased(node);
    replace_reads(g, out, replacement);
    return true;
  }
  int64_t maker = uses.producer[replacement];
  mark_erased(node);
  for (ir::ValueId& v : g.nodes[maker].outputs)
    if (v == replacement) v = out;
  replace_reads(g, replacement, out);
  return true;
}

void mark_erased(ir::Node& node) {
  node.op_type.clear();
  node.inputs.clear();
  node.outputs.clear();
  node.attrs.clear();
}

bool is_erased(const ir::Node& node) { return node.op_type.empty(); }

size_t erase_marked(ir::Graph& g) {
  size_t before = g.nodes.size();
  std::vector<ir::Node> kept;
  kept.reserve(before);
  for (ir::Node& n : g.nodes)
    if (!is_erased(n)) kept.push_back(std::move(n));
  g.nodes = std::move(kept);
  return before - g.nodes.size();
}

ir::ValueId add_typed_value(ir::Graph& g, std::string name, const Aval& type) {
  ir::ValueId v = g.add_value(std::move(name));
  g.values[v].has_type = true;
  g.values[v].type = type;
  return v;
}

std::vector<int64_t> shape_codes(const std::vector<Dim>& dims) {
  std::vector<int64_t> codes;
  int symbolic = 0;
  for (const Dim& d : dims) {
    if (d.is_static() && d.value <= 0) return {};
    symbolic += d.is_static() ? 0 : 1;
    codes.push_back(d.is_static() ? d.value : -1);
  }
  if (symbolic > 1) return {};
  return codes;
}

ir::ValueId add_ints(ir::Graph& g, std::string name, const std::vector<int64_t>& ints, Uses* uses) {
  const int64_t n = static_cast<int64_t>(ints.size());
  ir::ValueId v = add_typed_value(g, std::move(name), Aval(JXO_DTYPE_INT64, {Dim{n, {}}}));
  g.initializers.push_back({v, Tensor::copy_of(JXO_DTYPE_INT64, {n}, ints.data(), ints.size() * sizeof(int64_t)),
                            nullptr});
  if (uses) {
    uses->grow(g);
    uses->initializer.emplace(v, g.initializers.size() - 1);
  }
  return v;
}

ir::Graph scratch_copy(const ir::Graph& g) {
  ir::Graph copy = g;
  for (ir::Node& n : copy.nodes)
    for (ir::Attribute& a : n.attrs)
      if (a.graph) a.graph = std::make_shared<ir::Graph>(scratch_copy(*a.graph));
  return copy;
}

bool same_type(const ir::Value& a, const ir::Value& b) {
  return a.has_type && b.has_type && a.type.dtype == b.type.dtype && a.type.known_rank &&
         b.type.known_rank && a.type.dims == b.type.dims;
}

const ir::Attribute* attribute(const ir::Node& node, const char* name) {
  for (const ir::Attribute& a : node.attrs)
    if (a.name == name) return &a;
  return nullptr;
}

bool to_ints(const Tensor& t, std::vector<int64_t>* out) {
  int64_t n = t.num_elements();
  out->assign(static_cast<size_t>(n), 0);
  if (t.dtype == JXO_DTYPE_INT64 && t.nbytes == n * sizeof(int64_t)) {
    if (n > 0) std::memcpy(out->data(), t.data, t.nbytes);  // an empty vector's data() is null
    return true;
  }
  if (t.dtype == JXO_DTYPE_INT32 && t.nbytes == n * sizeof(int32_t)) {
    const auto* p = static_cast<const int32_t*>(t.data);
    for (int64_t k = 0; k < n; ++k) (*out)[k] = p[k];
    return true;
  }
  return false;
}

// Which nodes some graph output depends on (a node holding a subgraph reads
// the values its captures stand for).
std::vector<bool> live_nodes(const ir::Graph& g, std::vector<bool>* live_values) {
  std::vector<bool> live(g.values.size(), false), keep(g.nodes.size(), false);
  for (ir::ValueId v : g.outputs) live[v] = true;
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const ir::Node& n = g.nodes[k];
    for (ir::ValueId v : n.outputs) keep[k] = keep[k] || live[v];
    if (!keep[k]) continue;
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue) live[v] = true;
    for (ir::ValueId v : ir::captured_inputs(n)) live[v] = true;
  }
  if (live_values) *live_values = std::move(live);
  return keep;
}

}  // namespace jaxonnx::passes
