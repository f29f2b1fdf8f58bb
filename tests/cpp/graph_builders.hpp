// Hand-built graphs for the C++ tests: avals, IR graphs (GraphBuilder) and
// jaxprs (var, eqn, one_eqn), shared so each test file builds them one way.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jaxonnx/core/ir.hpp"
#include "jaxonnx/core/jaxpr.hpp"

namespace jaxonnx::test {

// ------------------------------------------------------------------ avals --

inline Dim N(int64_t v) { return Dim{v, {}}; }
inline Dim S(std::string s) { return Dim{0, std::move(s)}; }
inline Aval f32(std::vector<Dim> dims) { return Aval(JXO_DTYPE_FLOAT32, std::move(dims)); }
// f32({2, 3}): a static shape.
inline Aval f32(std::initializer_list<int64_t> dims) {
  std::vector<Dim> d;
  for (int64_t v : dims) d.push_back(N(v));
  return Aval(JXO_DTYPE_FLOAT32, std::move(d));
}
inline Aval i64(std::vector<Dim> dims) { return Aval(JXO_DTYPE_INT64, std::move(dims)); }
// f32[B,3], the jaxpr tests' usual operand.
inline Aval batch3() { return f32({S("B"), N(3)}); }

// -------------------------------------------------------------- IR graphs --

inline ir::Attribute ints_attr(const char* name, std::vector<int64_t> v) {
  ir::Attribute a{name, JXO_ATTR_INTS};
  a.ints = std::move(v);
  return a;
}
inline ir::Attribute int_attr(const char* name, int64_t v) {
  ir::Attribute a{name, JXO_ATTR_INT};
  a.i = v;
  return a;
}

inline int count_op(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node& node : g.nodes) n += node.op_type == op;
  return n;
}

// Builds an IR graph: unnamed values are called v<k> (k: the value's index),
// nodes n<k> (k: the node's index).
struct GraphBuilder {
  ir::Graph g;

  ir::ValueId value(const Aval& type, std::string name = {}) {
    if (name.empty()) name = "v" + std::to_string(g.values.size());
    ir::ValueId v = g.add_value(std::move(name));
    g.values[v].has_type = true;
    g.values[v].type = type;
    return v;
  }
  ir::ValueId input(const Aval& type, std::string name = {}) {
    ir::ValueId v = value(type, std::move(name));
    g.inputs.push_back(v);
    return v;
  }
  ir::ValueId op(const char* op, std::vector<ir::ValueId> ins, const Aval& out,
                 std::vector<ir::Attribute> attrs = {}) {
    ir::ValueId v = value(out);
    g.nodes.push_back(ir::Node{"n" + std::to_string(g.nodes.size()), op, "", std::move(ins), {v},
                               std::move(attrs)});
    return v;
  }
  // The unary `ops` applied to x in order, each typed like x: the last one's output.
  ir::ValueId chain(ir::ValueId x, std::initializer_list<const char*> ops) {
    Aval type = g.values[x].type;
    for (const char* o : ops) x = op(o, {x}, type);
    return x;
  }
  // An If node "if" on `cond` with one graph attribute, `branch` (then_branch
  // or else_branch): enough for the checks that walk into subgraphs.
  ir::ValueId if_node(ir::ValueId cond, const char* branch, std::shared_ptr<ir::Graph> body,
                      const Aval& out) {
    ir::Attribute a{branch, ir::kAttrGraph};
    a.graph = std::move(body);
    ir::ValueId v = value(out);
    g.nodes.push_back(ir::Node{"if", "If", "", {cond}, {v}, {std::move(a)}});
    return v;
  }
  ir::ValueId transpose(ir::ValueId x, std::vector<int64_t> perm) {
    std::vector<Dim> dims;
    for (int64_t p : perm) dims.push_back(g.values[x].type.dims[p]);
    return op("Transpose", {x}, Aval(g.values[x].type.dtype, dims), {ints_attr("perm", perm)});
  }
  ir::ValueId constant(std::shared_ptr<const Tensor> t) {
    std::vector<Dim> dims;
    for (int64_t d : t->dims) dims.push_back(N(d));
    ir::ValueId v = value(Aval(t->dtype, dims));
    g.initializers.push_back({v, std::move(t)});
    return v;
  }
  // An int64 initializer, by default of shape [v.size()].
  ir::ValueId ints(std::vector<int64_t> v, std::vector<int64_t> dims = {-1}) {
    if (dims == std::vector<int64_t>{-1}) dims = {static_cast<int64_t>(v.size())};
    return constant(Tensor::copy_of(JXO_DTYPE_INT64, dims, v.data(), v.size() * 8));
  }
  ir::ValueId floats(std::vector<float> v, std::vector<int64_t> dims) {
    return constant(Tensor::copy_of(JXO_DTYPE_FLOAT32, dims, v.data(), v.size() * 4));
  }
  // Marks `v` a graph output, renamed to `name` when one is given.
  void output(ir::ValueId v, std::string name = {}) {
    if (!name.empty()) g.values[v].name = std::move(name);
    g.outputs.push_back(v);
  }

  int count_op(const std::string& op) const { return test::count_op(g, op); }
  std::vector<std::string> ops() const {
    std::vector<std::string> out;
    for (const ir::Node& n : g.nodes) out.push_back(n.op_type);
    return out;
  }
  const ir::Node* producer(ir::ValueId v) const {
    for (const ir::Node& n : g.nodes)
      for (ir::ValueId o : n.outputs)
        if (o == v) return &n;
    return nullptr;
  }
};

// ----------------------------------------------------------------- jaxprs --

inline Atom var(int64_t id, const Aval& aval) {
  Atom a;
  a.var = id;
  a.aval = aval;
  return a;
}

inline Param record(std::vector<std::string> keys = {}, std::vector<Param> items = {}) {
  Param p;
  p.kind = JXO_PARAM_RECORD;
  p.keys = std::move(keys);
  p.items = std::move(items);
  return p;
}
inline Param float_param(double f) {
  Param p;
  p.kind = JXO_PARAM_FLOAT;
  p.f = f;
  return p;
}
inline Param str_param(std::string s) {
  Param p;
  p.kind = JXO_PARAM_STRING;
  p.s = std::move(s);
  return p;
}

inline Eqn eqn(std::string prim, std::vector<Atom> ins, std::vector<Atom> outs,
               Param params = record()) {
  Eqn e;
  e.primitive = std::move(prim);
  e.inputs = std::move(ins);
  e.outputs = std::move(outs);
  e.params = std::move(params);
  return e;
}

// x: f32[B,3];  a = prim(x);  out = a  (the equation's source location: `source`)
inline ClosedJaxpr one_eqn(const std::string& prim, int64_t source = -1) {
  ClosedJaxpr c;
  c.jaxpr.invars = {var(0, batch3())};
  c.jaxpr.eqns = {eqn(prim, {var(0, batch3())}, {var(1, batch3())})};
  c.jaxpr.eqns[0].source = source;
  c.jaxpr.outvars = {var(1, batch3())};
  return c;
}

}  // namespace jaxonnx::test
