// Pass contracts (properties.hpp): each property finds a violation built by
// hand, accepts the graph once its pass has run, and the manager stops a pass
// that breaks its guarantee or runs without what it needs, naming both.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "jaxonnx/core/error.hpp"
#include "jaxonnx/core/passes.hpp"

#include "error_checks.hpp"
#include "graph_builders.hpp"

using namespace jaxonnx;
namespace passes = jaxonnx::passes;
using namespace jaxonnx::test;

namespace {

const Aval k23 = f32({2, 3}), k32 = f32({3, 2}), k6 = f32({6}), k123 = f32({1, 2, 3});

// The violation `p` reports (empty: it holds).
std::string check(const passes::Property& p, const ir::Graph& g) { return p.violation(g); }

// Runs `pass` alone over `g` through the manager (which checks its contract).
void run(ir::Graph& g, std::unique_ptr<passes::Pass> pass) {
  passes::Pipeline p;
  p.push_back(std::move(pass));
  passes::PassManager(std::move(p)).run(g);
}

}  // namespace

TEST_CASE("topologically sorted: a node reading a later value") {
  GraphBuilder b;
  ir::ValueId x = b.input(k23);
  ir::ValueId late = b.value(k23);
  b.g.nodes.push_back(ir::Node{"early", "Relu", "", {late}, {b.value(k23)}, {}});
  b.g.nodes.push_back(ir::Node{"late", "Relu", "", {x}, {late}, {}});
  CHECK(contains(check(passes::topologically_sorted(), b.g), "'early' reads"));
  std::swap(b.g.nodes[0], b.g.nodes[1]);
  CHECK(check(passes::topologically_sorted(), b.g).empty());
}

TEST_CASE("typed values: a node output without a type") {
  GraphBuilder b;
  ir::ValueId y = b.op("Relu", {b.input(k23)}, k23);
  b.output(y);
  CHECK(check(passes::typed_values(), b.g).empty());
  b.g.values[y].has_type = false;
  CHECK(contains(check(passes::typed_values(), b.g), "without a type"));
}

TEST_CASE("dce's properties: dead nodes, unread initializers and captures") {
  GraphBuilder b;
  ir::ValueId x = b.input(k23);
  ir::ValueId unread = b.ints({1, 2});
  b.op("Neg", {x}, k23);  // nobody reads it
  ir::ValueId cond = b.input(Aval(JXO_DTYPE_BOOL, {}));
  auto body = std::make_shared<ir::Graph>();
  body->name = "then";
  ir::ValueId cap = body->add_value("cap");
  body->values[cap].has_type = true;
  body->values[cap].type = k23;
  body->captures = {{cap, x}};
  ir::ValueId inner = body->add_value("inner");
  body->values[inner] = body->values[cap];
  body->values[inner].name = "inner";
  body->inputs = {inner};  // the capture is read by nothing
  body->outputs = {inner};
  b.output(b.if_node(cond, "then_branch", body, k23));

  CHECK(contains(check(passes::no_dead_nodes(), b.g), "Neg 'n0' is dead"));
  CHECK(contains(check(passes::no_unread_initializers(), b.g), b.g.values[unread].name));
  CHECK(contains(check(passes::no_unread_captures(), *body), "'cap'"));
  run(b.g, passes::dead_code_elimination());  // checks all three, in both graphs
  for (const passes::Property& p : passes::dead_code_elimination()->guarantees()) {
    CHECK(check(p, b.g).empty());
    CHECK(check(p, *body).empty());
  }
}

TEST_CASE("no function calls: a node calling a model function") {
  std::vector<ir::Function> functions = {{"f", "local", std::make_shared<ir::Graph>()}};
  GraphBuilder b;
  ir::ValueId x = b.input(k23);
  b.output(b.op("Relu", {x}, k23));
  CHECK(check(passes::no_function_calls(functions), b.g).empty());
  b.g.nodes[0].op_type = "f";
  b.g.nodes[0].domain = "local";
  CHECK(contains(check(passes::no_function_calls(functions), b.g), "calls a model function"));
}

namespace {
// A pattern a property finds: built on a float32[2,3] input x, a Relu reads
// what `make` returns.
struct Pattern {
  passes::Property property;
  std::function<ir::ValueId(GraphBuilder&, ir::ValueId)> make;
};

// Each pattern is found by its property, which holds once `pass` has run.
void check_pass_removes(const std::vector<Pattern>& patterns,
                        std::unique_ptr<passes::Pass> (*pass)()) {
  for (const Pattern& c : patterns) {
    CAPTURE(c.property.name);
    GraphBuilder b;
    ir::ValueId x = b.input(k23);
    ir::ValueId y = c.make(b, x);
    b.output(b.op("Relu", {y}, b.g.values[y].type));
    CHECK_FALSE(check(c.property, b.g).empty());
    run(b.g, pass());
    CHECK(check(c.property, b.g).empty());
  }
}
}  // namespace

TEST_CASE("noop's properties each find their no-op, and noop removes it") {
  const std::vector<Pattern> patterns = {
      {passes::no_identity(), [](GraphBuilder& b, ir::ValueId x) { return b.op("Identity", {x}, k23); }},
      {passes::no_same_type_cast(),
       [](GraphBuilder& b, ir::ValueId x) {
         return b.op("Cast", {x}, k23, {int_attr("to", JXO_DTYPE_FLOAT32)});
       }},
      {passes::no_identity_transpose(),
       [](GraphBuilder& b, ir::ValueId x) {
         return b.op("Transpose", {x}, k23, {ints_attr("perm", {0, 1})});
       }},
      {passes::no_same_type_expand(),
       [](GraphBuilder& b, ir::ValueId x) { return b.op("Expand", {x, b.ints({2, 3})}, k23); }},
      {passes::no_reshape_round_trip(),
       [](GraphBuilder& b, ir::ValueId x) {
         ir::ValueId u = b.op("Unsqueeze", {x, b.ints({0})}, k123);
         return b.op("Squeeze", {u, b.ints({0})}, k23);
       }},
      {passes::no_reshape_of_reshape(),
       [](GraphBuilder& b, ir::ValueId x) {
         ir::ValueId flat = b.op("Reshape", {x, b.ints({6})}, k6);
         return b.op("Reshape", {flat, b.ints({3, 2})}, k32);
       }},
  };
  check_pass_removes(patterns, passes::no_op_elimination);
}

TEST_CASE("noop's properties accept a no-op the pass must keep (an interface value)") {
  GraphBuilder b;
  ir::ValueId x = b.input(k23);
  b.output(b.op("Identity", {x}, k23));  // graph input -> graph output: the name must stay
  CHECK(check(passes::no_identity(), b.g).empty());
}

TEST_CASE("transpose's properties each find their pattern, and transpose folding removes it") {
  const std::vector<Pattern> patterns = {
      {passes::no_cancelling_transposes(),
       [](GraphBuilder& b, ir::ValueId x) {
         ir::ValueId t = b.op("Transpose", {x}, k32, {ints_attr("perm", {1, 0})});
         return b.op("Transpose", {b.op("Exp", {t}, k32)}, k23, {ints_attr("perm", {1, 0})});
       }},
      {passes::no_transposes_to_sink(),
       [](GraphBuilder& b, ir::ValueId x) {
         ir::ValueId y = b.input(k23);  // the second input, made right after x
         ir::ValueId tx = b.op("Transpose", {x}, k32, {ints_attr("perm", {1, 0})});
         ir::ValueId ty = b.op("Transpose", {y}, k32, {ints_attr("perm", {1, 0})});
         return b.op("Add", {tx, ty}, k32);
       }},
      {passes::no_cast_of_bool_transpose(),
       [](GraphBuilder& b, ir::ValueId x) {
         ir::ValueId m = b.op("Less", {x, x}, Aval(JXO_DTYPE_BOOL, {N(2), N(3)}));
         ir::ValueId t =
             b.op("Transpose", {m}, Aval(JXO_DTYPE_BOOL, {N(3), N(2)}), {ints_attr("perm", {1, 0})});
         return b.op("Cast", {t}, k32, {int_attr("to", JXO_DTYPE_FLOAT32)});
       }},
      {passes::no_transpose_before_squeeze(),
       [](GraphBuilder& b, ir::ValueId x) {
         const Aval k213 = f32({2, 1, 3}), k132 = f32({1, 3, 2});
         ir::ValueId r = b.op("Reshape", {x, b.ints({2, 1, 3})}, k213);
         ir::ValueId t = b.op("Transpose", {r}, k132, {ints_attr("perm", {1, 2, 0})});
         return b.op("Squeeze", {t, b.ints({0})}, k32);
       }},
  };
  check_pass_removes(patterns, passes::transpose_folding);
}

TEST_CASE("no foldable constants: a Shape of a static value; the check leaves the graph alone") {
  GraphBuilder b;
  ir::ValueId x = b.input(k23);
  ir::ValueId s = b.op("Shape", {x}, Aval(JXO_DTYPE_INT64, {N(2)}));
  b.output(b.op("Reshape", {x, s}, k23));
  ir::Graph before = b.g;
  CHECK(contains(check(passes::no_foldable_constants(), b.g), "Shape 'n0' folds"));
  CHECK(ir::to_text(b.g) == ir::to_text(before));
  run(b.g, passes::constant_folding());
  CHECK(check(passes::no_foldable_constants(), b.g).empty());
}

TEST_CASE("cse's properties: equal initializers and equal nodes") {
  GraphBuilder b;
  ir::ValueId x = b.input(k23);
  ir::ValueId c1 = b.ints({2, 3}), c2 = b.ints({2, 3});
  ir::ValueId r1 = b.op("Reshape", {x, c1}, k23), r2 = b.op("Reshape", {x, c2}, k23);
  ir::ValueId e1 = b.op("Exp", {x}, k23), e2 = b.op("Exp", {x}, k23);
  b.output(b.op("Sum", {r1, r2, e1, e2}, k23));
  CHECK(contains(check(passes::no_duplicate_initializers(), b.g), "holds what"));
  CHECK(contains(check(passes::no_common_subexpressions(), b.g), "'n3' computes what node #2"));
  run(b.g, passes::deduplication());
  CHECK(check(passes::no_duplicate_initializers(), b.g).empty());
  CHECK(check(passes::no_common_subexpressions(), b.g).empty());
}

namespace {
// A pass that breaks what it promises: it adds a node nobody reads.
struct LeavesDeadNode : passes::Pass {
  const char* name() const override { return "leaves_dead_node"; }
  passes::Properties needs() const override { return {passes::topologically_sorted()}; }
  passes::Properties guarantees() const override { return {passes::no_dead_nodes()}; }
  bool run(ir::Graph& g) override {
    ir::ValueId v = g.add_value("dead_" + std::to_string(g.values.size()));
    g.values[v].has_type = true;
    g.values[v].type = g.values[g.inputs[0]].type;
    g.nodes.push_back(ir::Node{"dead", "Neg", "", {g.inputs[0]}, {v}, {}});
    return true;
  }
};
// A pass that needs types, run on a graph that has none.
struct NeedsTypes : passes::Pass {
  const char* name() const override { return "needs_types"; }
  passes::Properties needs() const override { return {passes::typed_values()}; }
  passes::Properties guarantees() const override { return {}; }
  bool run(ir::Graph&) override { return false; }
};

std::string failure(ir::Graph& g, std::unique_ptr<passes::Pass> pass) {
  try {
    run(g, std::move(pass));
  } catch (const ConversionError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("the manager names a pass that breaks its guarantee, and the property") {
  REQUIRE(passes::verify_enabled());  // ctest sets JAXONNX_VERIFY_IR=1
  GraphBuilder b;
  b.output(b.op("Relu", {b.input(k23)}, k23));
  std::string msg = failure(b.g, std::make_unique<LeavesDeadNode>());
  check_mentions(msg, {"pass 'leaves_dead_node' (round 1) broke its guarantee",
                       "'no dead nodes': node #1 Neg 'dead' is dead"});
}

TEST_CASE("the manager names a pass whose needs do not hold, in a subgraph too") {
  GraphBuilder b;
  ir::ValueId cond = b.input(Aval(JXO_DTYPE_BOOL, {}));
  auto body = std::make_shared<ir::Graph>();
  body->name = "else";
  ir::ValueId u = body->add_value("untyped");
  body->nodes.push_back(ir::Node{"make", "RandomNormal", "", {}, {u}, {}});
  body->outputs = {u};
  b.output(b.if_node(cond, "else_branch", body, k23));
  std::string msg = failure(b.g, std::make_unique<NeedsTypes>());
  check_mentions(msg, {"pass 'needs_types' (round 1) needs what does not hold",
                       "graph 'else': 'typed values'"});
}

TEST_CASE("every pass states needs and guarantees, with names unique per pass") {
  std::set<std::string> passes_seen;
  for (const std::unique_ptr<passes::Pass>& pass : passes::all_passes()) {
    CAPTURE(pass->name());
    CHECK(passes_seen.insert(pass->name()).second);
    CHECK_FALSE(pass->needs().empty());
    CHECK_FALSE(pass->guarantees().empty());
    std::set<std::string> names;
    for (const passes::Property& p : pass->guarantees()) CHECK(names.insert(p.name).second);
  }
  CHECK(passes_seen == std::set<std::string>{"noop", "transpose", "fold", "cse", "fuse", "rows",
                                             "dce", "inline"});
}
