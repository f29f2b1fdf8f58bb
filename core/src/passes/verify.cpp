// The IR verifier: checks the invariants every pass relies on (passes.hpp)
// and that the lowering establishes, so a broken rewrite or lowering fails
// where it happens instead of as an invalid model (or an onnxruntime crash).
// Checked, in the graph and every subgraph:
//   - value ids in range; every value defined once (graph input,
//     initializer, node output, or a subgraph's capture);
//   - nodes in topological order: each input defined before the node reads it;
//   - captures resolvable: `inner` is defined by nothing else in the
//     subgraph, `outer` is visible in the enclosing graph where the node
//     holding the subgraph sits;
//   - graph outputs defined; defined values' names unique within a graph;
//   - attributes well formed: named, unique per node, a known type, tensor
//     bytes matching dtype and dims, graph attributes present;
//   - types consistent: initializers typed as their tensors; an elementwise
//     unary op keeps its input's shape, an elementwise binary op's output
//     is its inputs' broadcast (static dims compared; symbols may be spelled
//     differently).
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "jaxonnx/core/error.hpp"
#include "jaxonnx/core/passes.hpp"
#include "onnx_ops.hpp"

namespace jaxonnx::passes {
namespace {

struct Checker {
  std::string where;  // "after pass 'dce'", for the message
  [[noreturn]] void fail(const ir::Graph& g, const std::string& what) const {
    throw ConversionError("internal error: the IR is invalid " + where + ": graph '" + g.name +
                          "': " + what + " (a jaxonnx bug; please report it)");
  }

  static std::string node_label(const ir::Node& n, size_t k) {
    return "node #" + std::to_string(k) + " " + n.op_type + " '" + n.name + "'";
  }

  // `outer_defined`: values of the enclosing graph visible at the node that
  // holds this graph (null for the main graph).
  void graph(const ir::Graph& g, const std::vector<bool>* outer_defined) const {
    const size_t nv = g.values.size();
    std::vector<bool> defined(nv, false);
    auto valid = [&](ir::ValueId v) { return v >= 0 && static_cast<size_t>(v) < nv; };
    auto define = [&](ir::ValueId v, const std::string& by) {
      if (!valid(v)) fail(g, by + " defines value id " + std::to_string(v) + ", out of range");
      if (defined[v]) fail(g, "value '" + g.values[v].name + "' is defined twice (again by " + by + ")");
      defined[v] = true;
    };
    for (ir::ValueId v : g.inputs) define(v, "a graph input");
    for (const ir::Initializer& init : g.initializers) {
      define(init.value, "an initializer");
      if (!init.tensor) fail(g, "initializer '" + g.values[init.value].name + "' has no tensor");
      tensor(g, *init.tensor, "initializer '" + g.values[init.value].name + "'");
      const ir::Value& val = g.values[init.value];
      if (val.has_type && val.type.known_rank) {
        bool same = val.type.dtype == init.tensor->dtype &&
                    val.type.dims.size() == init.tensor->dims.size();
        for (size_t d = 0; same && d < val.type.dims.size(); ++d)
          same = val.type.dims[d].is_static() && val.type.dims[d].value == init.tensor->dims[d];
        if (!same) fail(g, "initializer '" + val.name + "' is typed " + val.type.str() +
                               " but its tensor differs");
      }
    }
    for (const ir::Capture& c : g.captures) {
      define(c.inner, "a capture");
      if (!outer_defined) fail(g, "the main graph has captures");
      if (c.outer < 0 || static_cast<size_t>(c.outer) >= outer_defined->size() ||
          !(*outer_defined)[c.outer])
        fail(g, "capture '" + g.values[c.inner].name +
                    "' stands for no value visible in the enclosing graph");
    }
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      const ir::Node& n = g.nodes[k];
      const std::string label = node_label(n, k);
      if (n.op_type.empty()) fail(g, label + " has no op type (an erased node left behind)");
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        ir::ValueId v = n.inputs[i];
        if (v == ir::kNoValue) continue;
        if (!valid(v)) fail(g, label + " reads value id " + std::to_string(v) + ", out of range");
        if (!defined[v])
          fail(g, label + " reads '" + g.values[v].name + "' (input " + std::to_string(i) +
                      ") before it is defined");
      }
      std::set<std::string> names;
      for (const ir::Attribute& a : n.attrs) {
        if (a.name.empty()) fail(g, label + " has an unnamed attribute");
        if (!names.insert(a.name).second)
          fail(g, label + " has attribute '" + a.name + "' twice");
        if (a.type == ir::kAttrGraph) {
          if (!a.graph) fail(g, label + " has graph attribute '" + a.name + "' without a graph");
          graph(*a.graph, &defined);
        } else if (a.type == JXO_ATTR_TENSOR) {
          if (!a.tensor) fail(g, label + " has tensor attribute '" + a.name + "' without a tensor");
          tensor(g, *a.tensor, label + " attribute '" + a.name + "'");
        } else if (a.type < JXO_ATTR_FLOAT || a.type > JXO_ATTR_STRINGS || a.type == JXO_ATTR_GRAPH) {
          fail(g, label + " attribute '" + a.name + "' has unknown type " + std::to_string(a.type));
        }
      }
      for (ir::ValueId v : n.outputs) define(v, label);
      shapes(g, n, label);
    }
    for (ir::ValueId v : g.outputs) {
      if (!valid(v)) fail(g, "a graph output is value id " + std::to_string(v) + ", out of range");
      if (!defined[v]) fail(g, "graph output '" + g.values[v].name + "' is never defined");
    }
    std::set<std::string> names;
    for (size_t v = 0; v < nv; ++v)
      if (defined[v] && !names.insert(g.values[v].name).second)
        fail(g, "two values are named '" + g.values[v].name + "'");
  }

  void tensor(const ir::Graph& g, const Tensor& t, const std::string& what) const {
    size_t elem = dtype_size(t.dtype);
    if (elem == 0) fail(g, what + " has unknown dtype " + std::to_string(t.dtype));
    int64_t n = 1;
    for (int64_t d : t.dims) {
      if (d < 0) fail(g, what + " has a negative dim");
      if (d != 0 && n > INT64_MAX / d) fail(g, what + "'s dims overflow");
      n *= d;
    }
    if (static_cast<uint64_t>(n) * elem != t.nbytes)
      fail(g, what + " holds " + std::to_string(t.nbytes) + " bytes for " + std::to_string(n) +
                  " elements of " + dtype_name(t.dtype));
  }

  static bool ranked(const ir::Value& v) { return v.has_type && v.type.known_rank; }

  // Elementwise ops: the output shape follows from the inputs'.
  void shapes(const ir::Graph& g, const ir::Node& n, const std::string& label) const {
    bool unary = onnx_ops::is_elementwise_unary(n), binary = onnx_ops::is_elementwise_binary(n);
    if (!unary && !binary) return;
    const ir::Value& out = g.values[n.outputs[0]];
    if (!ranked(out)) return;
    std::vector<Dim> want;
    for (ir::ValueId v : n.inputs) {
      if (v == ir::kNoValue || !ranked(g.values[v])) return;
      const std::vector<Dim>& d = g.values[v].type.dims;
      if (d.size() > want.size()) want.insert(want.begin(), d.size() - want.size(), Dim{1, {}});
      for (size_t i = 0, off = want.size() - d.size(); i < d.size(); ++i) {
        Dim& w = want[off + i];
        if (w.is_static() && w.value == 1) w = d[i];
        else if (w.is_static() && d[i].is_static() && d[i].value != 1 && d[i].value != w.value)
          fail(g, label + " broadcasts incompatible dims " + std::to_string(w.value) + " and " +
                      std::to_string(d[i].value));
      }
    }
    bool ok = want.size() == out.type.dims.size();
    for (size_t i = 0; ok && i < want.size(); ++i)
      ok = !(want[i].is_static() && out.type.dims[i].is_static() &&
             want[i].value != out.type.dims[i].value);
    if (!ok) {
      Aval w(out.type.dtype, want);
      fail(g, label + " declares its output " + out.type.str() + ", but its inputs give " + w.str());
    }
  }
};

}  // namespace

void verify(const ir::Graph& graph, const std::string& where) { Checker{where}.graph(graph, nullptr); }

bool verify_enabled() {
#ifndef NDEBUG
  return true;
#else
  const char* v = std::getenv("JAXONNX_VERIFY_IR");
  return v && *v && std::string(v) != "0";
#endif
}

}  // namespace jaxonnx::passes
