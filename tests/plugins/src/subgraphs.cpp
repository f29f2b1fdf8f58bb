// The scope stack of ABI 1.1, exercised with the SDK.
//   test.nested_if(x): If(c) { then: If(c) { then: Neg(x) } else: x } else: x
//                      x is captured through both levels; c is a constant.
//   test.sibling(x):   builds branch A computing Neg(x), then uses that value
//                      inside branch B: must fail with a clear message.
//   test.unclosed(x):  opens a subgraph and returns: must fail.
//   test.reuse(x):     uses one graph handle twice: must fail.
//   copy(x):           Identity, which graph_end uses for outputs that are
//                      not node outputs of their subgraph.
#include <jaxonnx/plugin.hpp>

namespace sdk = jaxonnx::sdk;
using sdk::Attr;
using sdk::GraphRef;
using sdk::Lowering;
using sdk::Subgraph;
using sdk::Value;

namespace {

Value pred(Lowering& L) { return scalar(L, sdk::dtype::boolean, 1); }

void lower_nested_if(Lowering& L) {
  Value x = L.input(0);
  sdk::Aval a = L.in_aval(0);
  Subgraph outer = L.begin_subgraph("outer_then");
  Subgraph inner = L.begin_subgraph("inner_then");
  GraphRef t_in = inner.end({L.op("Neg", {x}, a)});
  Subgraph inner_else = L.begin_subgraph("inner_else");
  GraphRef e_in = inner_else.end({x});
  Value y = L.op("If", {pred(L)}, a, {Attr::graph("then_branch", t_in), Attr::graph("else_branch", e_in)});
  GraphRef t = outer.end({y});
  Subgraph outer_else = L.begin_subgraph("outer_else");
  GraphRef e = outer_else.end({x});
  L.bind(0, L.op("If", {pred(L)}, a, {Attr::graph("then_branch", t), Attr::graph("else_branch", e)}));
}

void lower_sibling(Lowering& L) {
  Value x = L.input(0);
  sdk::Aval a = L.in_aval(0);
  Subgraph ga = L.begin_subgraph("branch_a");
  Value inside_a = L.op("Neg", {x}, a);
  GraphRef ra = ga.end({inside_a});
  Subgraph gb = L.begin_subgraph("branch_b");
  GraphRef rb = gb.end({L.op("Neg", {inside_a}, a)});  // fails here
  L.bind(0, L.op("If", {pred(L)}, a, {Attr::graph("then_branch", ra), Attr::graph("else_branch", rb)}));
}

void lower_unclosed(Lowering& L) {
  Subgraph g = L.begin_subgraph("left_open");
  L.bind(0, L.input(0));
}

void lower_reuse(Lowering& L) {
  Value x = L.input(0);
  sdk::Aval a = L.in_aval(0);
  Subgraph g = L.begin_subgraph("once");
  GraphRef r = g.end({L.op("Neg", {x}, a)});
  L.bind(0, L.op("If", {pred(L)}, a, {Attr::graph("then_branch", r), Attr::graph("else_branch", r)}));
}

void lower_copy(Lowering& L) { L.bind(0, L.op("Identity", {L.input(0)}, L.out_aval(0))); }

}  // namespace

JAXONNX_PLUGIN("test_subgraphs", "1.1.0") {
  plugin.primitive("copy", lower_copy).emits({"Identity"});
  plugin.primitive("test.nested_if", lower_nested_if).emits({"If", "Neg"});
  plugin.primitive("test.sibling", lower_sibling).emits({"If", "Neg"});
  plugin.primitive("test.unclosed", lower_unclosed).emits({});
  plugin.primitive("test.reuse", lower_reuse).emits({"If", "Neg"});
}
