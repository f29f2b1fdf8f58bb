// Token rows: a value [d0, ..., dk, X] (rank >= 3) that only row-wise ops
// compute and read is computed as [d0*...*dk, X] instead, so that every MatMul
// by a 2-D weight in it is a 2-D MatMul, which onnxruntime fuses with its bias
// Add into one Gemm when it loads the model (a 3-D one it runs as MatMul then
// Add: 0.91-0.94x the transformers' latency, docs/benchmarks/graph_variants.md).
// Needs: topologically sorted; typed values (the leading dims decide which
// values belong together).
// Row-wise ops (onnx_ops.cpp): MatMul(a, w) with w 2-D; elementwise unary
// ops; elementwise binary ops whose operands are each of the output's shape
// or broadcast along the last axis alone (rank <= 1, or a constant whose
// other dims are 1, stored again as [X]); LayerNormalization,
// RMSNormalization, Softmax and LogSoftmax over the last axis.
// A region is a set of such nodes joined by the values they read and write,
// all with the same leading dims; a region is flattened when it holds a
// MatMul read only by an Add (the pair onnxruntime fuses; elsewhere the
// Reshapes would only add nodes), but for a MatMul that writes a graph output
// (an LM head), which keeps the output's shape. Each value entering a region is reshaped
// to [-1, X] once; each region value read outside it (another op, a
// subgraph, a graph output) is reshaped back, under its own name, right after
// its node: to a constant shape where at most one leading dim is symbolic (-1
// stands for it; noop then merges these Reshapes with the ones around them,
// attention's heads), else to the shape of a value entering the region, read
// at run time (Shape, and Slice + Concat where its last dim differs; one per
// region and width).
// Refuses: a static dim of 0 among the leading dims or X (-1 would be
// ambiguous); nodes of other domains; values of unknown rank.
// Guarantees: no region left that this pass would flatten.
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "jaxonnx/core/passes.hpp"
#include "onnx_ops.hpp"
#include "rewrite.hpp"

namespace jaxonnx::passes {
namespace {

using onnx_ops::Op;

// [d0, ..., dk, X] with k >= 1, X static and positive, no static 0.
bool is_rows(const ir::Value& v) {
  if (!v.has_type || !v.type.known_rank || v.type.dims.size() < 3) return false;
  for (const Dim& d : v.type.dims)
    if (d.is_static() && d.value <= 0) return false;
  return v.type.dims.back().is_static();
}

std::vector<Dim> leading(const ir::Value& v) {
  return std::vector<Dim>(v.type.dims.begin(), v.type.dims.end() - 1);
}

// How a row-wise node reads each input: as rows (flattened with the output),
// as is (a weight, a value broadcast along the last axis), or as a constant
// to store again as its last axis alone.
enum class Read { Rows, AsIs, RowConstant };

// The way `n` reads its inputs if it is row-wise over its output's rows, else
// an empty vector.
std::vector<Read> row_wise(const ir::Graph& g, const Uses& uses, const ir::Node& n) {
  if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0] == ir::kNoValue) return {};
  const ir::Value& out = g.values[n.outputs[0]];
  if (!is_rows(out)) return {};
  const size_t rank = out.type.dims.size();
  auto same_rows = [&](ir::ValueId v) {
    if (v == ir::kNoValue || !is_rows(g.values[v])) return false;
    const ir::Value& in = g.values[v];
    return in.type.dims.size() == rank && leading(in) == leading(out);
  };
  auto rank_at_most_1 = [&](ir::ValueId v) {
    return v != ir::kNoValue && g.values[v].has_type && g.values[v].type.known_rank &&
           g.values[v].type.dims.size() <= 1;
  };
  std::vector<Read> reads(n.inputs.size(), Read::AsIs);
  if (onnx_ops::kind(n) == Op::MatMul) {
    ir::ValueId w = n.inputs.size() == 2 ? n.inputs[1] : ir::kNoValue;
    if (!same_rows(n.inputs[0]) || w == ir::kNoValue || !g.values[w].has_type ||
        !g.values[w].type.known_rank || g.values[w].type.dims.size() != 2)
      return {};
    reads[0] = Read::Rows;
    return reads;
  }
  if (onnx_ops::is_elementwise_unary(n)) {
    if (!same_rows(n.inputs[0]) || g.values[n.inputs[0]].type.dims != out.type.dims) return {};
    reads[0] = Read::Rows;
    return reads;
  }
  if (onnx_ops::is_last_axis_normalization(n)) {
    const ir::Attribute* axis = attribute(n, "axis");
    const int64_t a = axis ? axis->i : -1;
    if ((a != -1 && a != static_cast<int64_t>(rank) - 1) || !same_rows(n.inputs[0]) ||
        g.values[n.inputs[0]].type.dims != out.type.dims)
      return {};
    reads[0] = Read::Rows;
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (n.inputs[i] != ir::kNoValue && !rank_at_most_1(n.inputs[i])) return {};
    return reads;
  }
  if (!onnx_ops::is_elementwise_binary(n)) return {};
  bool any_rows = false;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    ir::ValueId v = n.inputs[i];
    if (same_rows(v) && g.values[v].type.dims == out.type.dims) {
      reads[i] = Read::Rows;
      any_rows = true;
    } else if (rank_at_most_1(v)) {
      reads[i] = Read::AsIs;
    } else if (v != ir::kNoValue && uses.constant(g, v) && g.values[v].has_type &&
               g.values[v].type.known_rank && g.values[v].type.dims.size() <= rank) {
      // A constant broadcast along the last axis alone: all other dims 1.
      const std::vector<Dim>& d = g.values[v].type.dims;
      for (size_t k = 0; k + 1 < d.size(); ++k)
        if (!(d[k] == Dim{1, {}})) return {};
      reads[i] = Read::RowConstant;
    } else {
      return {};
    }
  }
  return any_rows ? reads : std::vector<Read>{};
}

// Union-find over value ids.
struct Regions {
  std::vector<size_t> parent;
  explicit Regions(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), size_t{0}); }
  size_t find(size_t v) {
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
  }
  void join(size_t a, size_t b) {
    a = find(a), b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);  // the smallest id leads: deterministic
  }
};

// A row-wise node to flatten: how it reads its inputs, and its region (the
// leading value id of its values' union).
struct Flat {
  std::vector<Read> reads;
  size_t region = 0;
};

// The row-wise nodes to flatten, by index, in a model of `opset`.
std::map<size_t, Flat> flattenable(const ir::Graph& g, const Uses& uses, int64_t opset) {
  std::map<size_t, Flat> nodes;
  Regions regions(g.values.size());
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const ir::Node& n = g.nodes[k];
    if (is_erased(n)) continue;
    std::vector<Read> reads = row_wise(g, uses, n);
    if (reads.empty()) continue;
    for (size_t i = 0; i < reads.size(); ++i)
      if (reads[i] == Read::Rows) regions.join(static_cast<size_t>(n.inputs[i]), static_cast<size_t>(n.outputs[0]));
    nodes.emplace(k, Flat{std::move(reads)});
  }
  // A region is worth its Reshapes when it holds a MatMul whose one reader
  // is an Add (a bias or a residual: onnxruntime's Gemm takes either as C).
  // With two symbolic leading dims its way back needs a shape read at run
  // time, which may hold a 0: Reshape's allowzero, from opset 14.
  std::set<size_t> worth;
  for (const auto& [k, flat] : nodes) {
    const ir::ValueId out = g.nodes[k].outputs[0];
    const bool runtime_shape = shape_codes(g.values[out].type.dims).empty();  // two symbolic dims
    if (onnx_ops::kind(g.nodes[k]) != Op::MatMul || !uses.single_consumer(out) || (runtime_shape && opset < 14))
      continue;
    const size_t add = uses.consumers[out].front();
    if (nodes.count(add) && onnx_ops::kind(g.nodes[add]) == Op::Add)
      worth.insert(regions.find(static_cast<size_t>(out)));
  }
  // A MatMul writing a graph output (an LM head's logits) stays in the
  // output's shape: on rows its result would reach the output through a
  // Reshape, which onnxruntime runs as a copy of the largest tensor of a
  // prefill (a Reshape between two nodes costs nothing), and no Add follows it
  // to fuse. It reads its input reshaped back from the region.
  for (auto it = nodes.begin(); it != nodes.end();) {
    const ir::Node& n = g.nodes[it->first];
    it->second.region = regions.find(static_cast<size_t>(n.outputs[0]));
    const bool head = onnx_ops::kind(n) == Op::MatMul && uses.is_output[n.outputs[0]];
    it = worth.count(it->second.region) && !head ? std::next(it) : nodes.erase(it);
  }
  return nodes;
}

class TokenRows : public Pass {
 public:
  explicit TokenRows(int64_t opset) : opset_(opset) {}
  const char* name() const override { return "rows"; }
  Properties needs() const override { return {topologically_sorted(), typed_values()}; }
  Properties guarantees() const override { return {no_rows_to_flatten(opset_)}; }

  bool run(ir::Graph& g) override {
    Uses uses(g);
    std::map<size_t, Flat> flat = flattenable(g, uses, opset_);
    if (flat.empty()) return false;
    std::map<ir::ValueId, ir::ValueId> rows;       // a value -> its [R, X] form
    std::map<ir::ValueId, ir::ValueId> row_of;     // a constant -> its [X] form
    std::map<size_t, ir::ValueId> anchor;          // a region -> a value entering it
    std::map<std::pair<size_t, int64_t>, ir::ValueId> shapes;  // (region, X) -> [d0..dk, X] at run time
    std::map<size_t, ir::ValueId> anchor_shape;                // a region -> Shape(its anchor)
    std::vector<ir::Node> nodes;
    nodes.reserve(g.nodes.size() + 2 * flat.size());
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      auto it = flat.find(k);
      if (it == flat.end()) {
        nodes.push_back(std::move(g.nodes[k]));
        continue;
      }
      ir::Node n = std::move(g.nodes[k]);
      const ir::ValueId out = n.outputs[0];
      const size_t region = it->second.region;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const Read read = it->second.reads[i];
        if (read == Read::Rows) {
          if (!rows.count(n.inputs[i])) anchor.emplace(region, n.inputs[i]);  // entering the region
          n.inputs[i] = rows_of(g, n.inputs[i], rows, nodes);
        } else if (read == Read::RowConstant) {
          n.inputs[i] = last_axis_constant(g, uses, n.inputs[i], row_of);
        }
      }
      if (onnx_ops::is_last_axis_normalization(n))  // axis rank - 1 is 1 on rows: say -1
        for (ir::Attribute& a : n.attrs)
          if (a.name == "axis") a.i = -1;
      n.outputs[0] = add_typed_value(g, g.values[out].name + "/rows", rows_type(g.values[out]));
      rows[out] = n.outputs[0];
      nodes.push_back(std::move(n));
      // Read outside the region (another node, a subgraph, a graph output):
      // back to its own shape and name.
      bool outside = uses.is_output[out];
      for (size_t c : uses.consumers[out]) outside = outside || !flat.count(c);
      if (!outside) continue;
      const std::vector<Dim>& dims = g.values[out].type.dims;
      if (std::vector<int64_t> codes = shape_codes(dims); !codes.empty()) {
        nodes.push_back(reshape_to(g, rows[out], add_ints(g, g.values[out].name + "/shape", codes), out));
        continue;
      }
      auto key = std::make_pair(region, dims.back().value);
      if (!shapes.count(key)) {
        const ir::ValueId a = anchor.at(region);
        if (!anchor_shape.count(region)) anchor_shape[region] = shape_of(g, a, nodes);
        shapes[key] = runtime_shape(g, a, anchor_shape[region], dims, nodes);
      }
      ir::Node back = reshape_to(g, rows[out], shapes[key], out);
      ir::Attribute allowzero{"allowzero", JXO_ATTR_INT};  // a 0 read at run time is a 0
      allowzero.i = 1;
      back.attrs.push_back(allowzero);
      nodes.push_back(std::move(back));
    }
    g.nodes = std::move(nodes);
    return true;
  }

 private:
  // [R, X] with R the leading dims' product: static, or an expression of
  // their symbols ("(B)*(T)", "3*(B)"), as the plugin SDK's dims_product writes it.
  static Aval rows_type(const ir::Value& v) {
    int64_t k = 1;
    std::string sym;
    for (const Dim& d : leading(v)) {
      if (d.is_static()) k *= d.value;
      else sym += (sym.empty() ? "(" : "*(") + d.symbol + ")";
    }
    Dim r = sym.empty() ? Dim{k, {}} : Dim{0, k == 1 ? sym : std::to_string(k) + "*" + sym};
    return Aval(v.type.dtype, {r, v.type.dims.back()});
  }

  static ir::Node node(ir::Graph& g, Op op, std::vector<ir::ValueId> inputs, ir::ValueId out) {
    ir::Node n;
    n.name = g.values[out].name + "/" + onnx_ops::op_name(op);
    n.op_type = onnx_ops::op_name(op);
    n.inputs = std::move(inputs);
    n.outputs = {out};
    return n;
  }

  static ir::Node reshape_to(ir::Graph& g, ir::ValueId x, ir::ValueId shape, ir::ValueId to) {
    return node(g, Op::Reshape, {x, shape}, to);
  }

  static ir::ValueId int64_value(ir::Graph& g, const std::string& name, int64_t n) {
    return add_typed_value(g, name, Aval(JXO_DTYPE_INT64, {Dim{n, {}}}));
  }

  // Shape(anchor), emitted once per region.
  static ir::ValueId shape_of(ir::Graph& g, ir::ValueId anchor, std::vector<ir::Node>& nodes) {
    ir::ValueId shape = int64_value(g, g.values[anchor].name + "/rows_shape",
                                    static_cast<int64_t>(g.values[anchor].type.dims.size()));
    nodes.push_back(node(g, Op::Shape, {anchor}, shape));
    return shape;
  }

  // `dims` ([d0, ..., dk, X], two or more d symbolic) at run time, from
  // `anchor`, a value entering the region ([d0, ..., dk, Y]) whose Shape is
  // `shape`: that when Y is X, else Concat(Slice(shape, 0, k + 1), [X]).
  static ir::ValueId runtime_shape(ir::Graph& g, ir::ValueId anchor, ir::ValueId shape,
                                   const std::vector<Dim>& dims, std::vector<ir::Node>& nodes) {
    const int64_t rank = static_cast<int64_t>(dims.size()), x = dims.back().value;
    if (g.values[anchor].type.dims.back() == dims.back()) return shape;
    const std::string base = g.values[anchor].name + "/rows_shape_" + std::to_string(x);
    ir::ValueId lead = int64_value(g, base + "/lead", rank - 1);
    nodes.push_back(node(g, Op::Slice, {shape, add_ints(g, base + "/start", {0}),
                                        add_ints(g, base + "/end", {rank - 1})}, lead));
    ir::ValueId out = int64_value(g, base, rank);
    ir::Node concat = node(g, Op::Concat, {lead, add_ints(g, base + "/x", {x})}, out);
    ir::Attribute axis{"axis", JXO_ATTR_INT};
    axis.i = 0;
    concat.attrs.push_back(axis);
    nodes.push_back(std::move(concat));
    return out;
  }

  // `v` as rows: the region's own, else (a value entering it) reshaped once.
  static ir::ValueId rows_of(ir::Graph& g, ir::ValueId v, std::map<ir::ValueId, ir::ValueId>& rows,
                             std::vector<ir::Node>& nodes) {
    if (auto it = rows.find(v); it != rows.end()) return it->second;
    ir::ValueId r = add_typed_value(g, g.values[v].name + "/rows", rows_type(g.values[v]));
    // [R, X], or [-1, X] where R is a product of symbols
    nodes.push_back(reshape_to(g, v, add_ints(g, g.values[r].name + "/shape", shape_codes(g.values[r].type.dims)), r));
    return rows[v] = r;
  }

  // A constant whose dims are all 1 but the last, stored again as [last] (once).
  static ir::ValueId last_axis_constant(ir::Graph& g, const Uses& uses, ir::ValueId v,
                                        std::map<ir::ValueId, ir::ValueId>& row_of) {
    if (auto it = row_of.find(v); it != row_of.end()) return it->second;
    const Tensor* t = uses.constant(g, v);
    const std::vector<Dim>& d = g.values[v].type.dims;
    const int64_t last = d.empty() ? 1 : d.back().value;
    ir::ValueId c = add_typed_value(g, g.values[v].name + "/row", Aval(g.values[v].type.dtype, {Dim{last, {}}}));
    g.initializers.push_back({c, Tensor::copy_of(t->dtype, {last}, t->data, t->nbytes), nullptr});
    return row_of[v] = c;
  }

  int64_t opset_;
};

}  // namespace

std::unique_ptr<Pass> token_rows(int64_t opset) { return std::make_unique<TokenRows>(opset); }

Property no_rows_to_flatten(int64_t opset) {
  return {"no token rows to flatten", [opset](const ir::Graph& g) -> std::string {
            Uses uses(g);
            std::map<size_t, Flat> flat = flattenable(g, uses, opset);
            if (flat.empty()) return {};
            const ir::Node& n = g.nodes[flat.begin()->first];
            return "node #" + std::to_string(flat.begin()->first) + " '" + n.name +
                   "' computes rows that could be 2-D";
          }};
}

}  // namespace jaxonnx::passes
