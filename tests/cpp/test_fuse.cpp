// The fuse pass (plugin rewrite rules, ABI 1.2) on hand-built IR, with rules
// written against the SDK's Rewrite view exactly as a plugin writes them.
#include <doctest/doctest.h>

#include <jaxonnx/plugin.hpp>

#include <string>
#include <vector>

#include "jaxonnx/core/error.hpp"
#include "jaxonnx/core/passes.hpp"
#include "jaxonnx/core/plugin_host.hpp"

#include "graph_builders.hpp"

using namespace jaxonnx;
namespace sdk = jaxonnx::sdk;
using namespace jaxonnx::test;

namespace {

// A rule as a plugin declares it: the SDK's entry, seen by the host as RuleInfo.
struct TestRule {
  sdk::detail::RuleEntry entry;
  LoadedPlugin plugin;
  RuleInfo info;
  TestRule(std::string name, std::string root, std::vector<std::string> ops, sdk::RewriteFn fn,
           int64_t min_opset = 0) {
    entry.fn = std::move(fn);
    plugin.name = "test_rules";
    info.name = std::move(name);
    info.root_op = std::move(root);
    info.rewrite = &sdk::detail::rewrite_trampoline;
    info.user_data = &entry;
    info.min_opset = min_opset;
    info.onnx_ops = std::move(ops);
    info.plugin = &plugin;
  }
};

bool fuse(ir::Graph& g, const TestRule& rule, int64_t opset = 23) {
  passes::Pipeline p;
  p.push_back(passes::fuse({&rule.info}, opset));
  p.push_back(passes::dead_code_elimination());
  return passes::PassManager(std::move(p)).run(g) > 1;
}

// Neg(Neg(x)) -> x, when the inner Neg has no other reader.
void neg_neg(sdk::Rewrite& R) {
  sdk::Value inner = R.input(R.root(), 0);
  int64_t n = R.def(inner, "Neg");
  if (n < 0 || !R.single_use(inner)) return;
  R.replace(R.output(R.root()), R.input(n, 0));
}

// Relu(Relu(x)) -> a new Relu(x).
void relu_relu(sdk::Rewrite& R) {
  sdk::Value inner = R.input(R.root(), 0);
  int64_t n = R.def(inner, "Relu");
  if (n < 0 || !R.single_use(inner)) return;
  R.replace(R.output(R.root()), R.op("Relu", {R.input(n, 0)}, R.aval(inner)));
}

// Relu(x) -> a Relu typed float32[5], whatever the root's type.
void retyped_relu(sdk::Rewrite& R) {
  R.replace(R.output(R.root()), R.op("Relu", {R.input(R.root(), 0)}, sdk::Aval(sdk::dtype::f32, {5})));
}

// Relu(x) -> Relu(the root's own output): an input defined after the root.
void self_reading_relu(sdk::Rewrite& R) {
  sdk::Value own = R.output(R.root());
  R.replace(own, R.op("Relu", {own}, R.aval(own)));
}

}  // namespace

TEST_CASE("fuse: a rule replaces a root output with an existing value") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({2, 3}), "x");
  ir::ValueId y = b.chain(x, {"Neg", "Neg", "Exp"});
  b.output(y, "y");
  TestRule rule("neg_neg", "Neg", {}, neg_neg);
  CHECK(fuse(b.g, rule));
  CHECK(b.ops() == std::vector<std::string>{"Exp"});
  CHECK(b.g.nodes[0].inputs[0] == x);
}

TEST_CASE("fuse: an intermediate with another reader is not fused") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({2}), "x");
  ir::ValueId inner = b.op("Neg", {x}, f32({2}));
  b.output(b.chain(inner, {"Neg", "Exp"}), "y");
  b.output(inner, "also");
  TestRule rule("neg_neg", "Neg", {}, neg_neg);
  CHECK_FALSE(fuse(b.g, rule));
  CHECK(b.ops() == std::vector<std::string>{"Neg", "Neg", "Exp"});
}

TEST_CASE("fuse: a root that defines a graph output hands its name to the replacement") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({4}), "x");
  ir::ValueId y = b.chain(x, {"Relu", "Relu"});
  b.output(y, "y");
  TestRule rule("relu_relu", "Relu", {"Relu"}, relu_relu);
  CHECK(fuse(b.g, rule));
  REQUIRE(b.ops() == std::vector<std::string>{"Relu"});
  CHECK(b.g.nodes[0].inputs[0] == x);
  CHECK(b.g.nodes[0].outputs[0] == y);
  CHECK(b.g.values[b.g.outputs[0]].name == "y");
}

namespace {
// x: float32[4] -> ops -> y, which fusing with `rule` leaves as it is, without
// even a new value.
void check_fuse_changes_nothing(std::initializer_list<const char*> ops, const TestRule& rule) {
  GraphBuilder b;
  b.output(b.chain(b.input(f32({4}), "x"), ops), "y");
  size_t values = b.g.values.size();
  CHECK_FALSE(fuse(b.g, rule));
  CHECK(b.ops() == std::vector<std::string>(ops.begin(), ops.end()));
  CHECK(b.g.values.size() == values);
}
}  // namespace

TEST_CASE("fuse: a graph output is not replaced by a value the rule did not emit") {
  check_fuse_changes_nothing({"Neg", "Neg"}, TestRule("neg_neg", "Neg", {}, neg_neg));
}

TEST_CASE("fuse: a rule that emits without replacing changes nothing") {
  TestRule rule("emit_only", "Relu", {"Relu"},
                [](sdk::Rewrite& R) { R.op("Relu", {R.input(R.root(), 0)}, sdk::Aval(sdk::dtype::f32, {4})); });
  check_fuse_changes_nothing({"Relu", "Exp"}, rule);
}

TEST_CASE("fuse: a rule below its min_opset is not tried") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({4}), "x");
  b.output(b.chain(x, {"Relu", "Relu", "Exp"}), "y");
  TestRule rule("relu_relu", "Relu", {"Relu"}, relu_relu, /*min_opset=*/20);
  CHECK_FALSE(fuse(b.g, rule, 18));
  CHECK(fuse(b.g, rule, 20));
  CHECK(b.ops() == std::vector<std::string>{"Relu", "Exp"});
}

TEST_CASE("fuse: an undeclared op, a wrong type or a late input fails the conversion") {
  // Fuses x -> Relu -> Relu -> Exp with the rule `name` (root Relu, emitting `ops`).
  auto fuse_relus = [](const char* name, std::vector<std::string> ops, sdk::RewriteFn fn) {
    GraphBuilder b;
    ir::ValueId x = b.input(f32({4}), "x");
    b.output(b.chain(x, {"Relu", "Relu", "Exp"}), "y");
    TestRule rule(name, "Relu", std::move(ops), std::move(fn));
    return fuse(b.g, rule);
  };
  CHECK_THROWS_WITH_AS(fuse_relus("undeclared", {"Sigmoid"}, relu_relu),
                       doctest::Contains("not among the ops the rule declares"), ConversionError);
  CHECK_THROWS_WITH_AS(fuse_relus("wrong_type", {"Relu"}, retyped_relu),
                       doctest::Contains("'wrong_type' of plugin 'test_rules'"), ConversionError);
  CHECK_THROWS_WITH_AS(fuse_relus("late_input", {"Relu"}, self_reading_relu),
                       doctest::Contains("not a value defined before the root"), ConversionError);
}

TEST_CASE("fuse's guarantee: no rule matches, found on a scratch copy") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({2}), "x");
  b.output(b.chain(x, {"Neg", "Neg", "Exp"}), "y");
  TestRule rule("neg_neg", "Neg", {}, neg_neg);
  passes::Property p = passes::no_rule_matches({&rule.info}, 23);
  std::string before = ir::to_text(b.g);
  CHECK(p.violation(b.g) == "rule 'neg_neg' of plugin 'test_rules' matches at node #1 Neg 'n1'");
  CHECK(ir::to_text(b.g) == before);  // the match was committed on the copy only
  CHECK(fuse(b.g, rule));  // the manager checks the guarantee after the pass
  CHECK(p.violation(b.g).empty());
  CHECK(passes::no_rule_matches({&rule.info}, 22).violation(b.g).empty());
}

namespace {
// The fuse pass alone (no dce after it): what it leaves is what it erased.
void fuse_only(ir::Graph& g, const TestRule& rule) {
  passes::Pipeline p;
  p.push_back(passes::fuse({&rule.info}, 23));
  passes::PassManager(std::move(p)).run(g);
}
}  // namespace

TEST_CASE("fuse: a chain collapses in place, each replacement a root for the next match") {
  // Relu^9(x) -> Relu(x): every match's replacement reads the node before it,
  // which the next match takes as its root; nothing dead is left behind.
  GraphBuilder b;
  ir::ValueId x = b.input(f32({3}), "x");
  ir::ValueId v = x;
  for (int k = 0; k < 9; ++k) v = b.op("Relu", {v}, f32({3}));
  ir::ValueId y = b.op("Exp", {v}, f32({3}));
  b.output(y, "y");
  TestRule rule("relu_relu", "Relu", {"Relu"}, relu_relu);
  fuse_only(b.g, rule);
  REQUIRE(b.ops() == std::vector<std::string>{"Relu", "Exp"});
  CHECK(b.g.nodes[0].inputs[0] == x);
  CHECK(b.g.nodes[1].inputs[0] == b.g.nodes[0].outputs[0]);
  CHECK(b.g.nodes[1].outputs[0] == y);
}

TEST_CASE("fuse: matches at both ends of a graph output chain keep order and names") {
  // Two independent chains; the second defines the graph output, the first
  // feeds it through an Add.
  GraphBuilder b;
  ir::ValueId x = b.input(f32({2}), "x");
  ir::ValueId a = b.chain(x, {"Relu", "Relu"});
  ir::ValueId s = b.op("Add", {a, x}, f32({2}));
  ir::ValueId y = b.chain(s, {"Relu", "Relu", "Relu"});
  b.output(y, "y");
  TestRule rule("relu_relu", "Relu", {"Relu"}, relu_relu);
  fuse_only(b.g, rule);
  REQUIRE(b.ops() == std::vector<std::string>{"Relu", "Add", "Relu"});
  CHECK(b.g.nodes[1].inputs[0] == b.g.nodes[0].outputs[0]);
  CHECK(b.g.nodes[2].inputs[0] == b.g.nodes[1].outputs[0]);
  CHECK(b.g.nodes[2].outputs[0] == y);
  CHECK(b.g.values[y].name == "y");
}

TEST_CASE("fuse: a dead reader does not keep an intermediate from fusing") {
  // Neg(Neg(x)) where the inner Neg is also read by an Exp nobody reads: the
  // rules see true read counts, so the pair fuses.
  GraphBuilder b;
  ir::ValueId x = b.input(f32({2}), "x");
  ir::ValueId inner = b.op("Neg", {x}, f32({2}));
  b.op("Exp", {inner}, f32({2}));
  b.output(b.chain(inner, {"Neg", "Sin"}), "y");
  TestRule rule("neg_neg", "Neg", {}, neg_neg);
  fuse_only(b.g, rule);
  REQUIRE(b.ops() == std::vector<std::string>{"Sin"});
  CHECK(b.g.nodes[0].inputs[0] == x);
}

namespace {
// Exp(a), a = Neg(x) a graph output defined before the root: emits
// n = Identity(Neg(x)) and Exp(n), and hands both the root's output and the graph
// output a to them (ABI 1.7), as a fused op whose extra outputs are the model's.
void takes_over_output(sdk::Rewrite& R) {
  sdk::Value a = R.input(R.root(), 0);
  int64_t n = R.def(a, "Neg");
  if (n < 0 || !R.is_graph_output(a)) return;
  // Identity(Neg(x)): the next sweep finds no Neg defining a, so the rule fires once.
  sdk::Value neg = R.op("Identity", {R.op("Neg", {R.input(n, 0)}, R.aval(a))}, R.aval(a));
  R.replace(R.output(R.root()), R.op("Exp", {neg}, R.aval(a)));
  R.replace(a, neg);
}
}  // namespace

TEST_CASE("fuse: a rule hands a graph output an earlier node defines to a node it emitted") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({3}), "x");
  ir::ValueId a = b.op("Neg", {x}, f32({3}));
  ir::ValueId other = b.op("Sin", {a}, f32({3}));  // another reader, before the root
  ir::ValueId y = b.op("Exp", {a}, f32({3}));
  b.output(a, "a");
  b.output(other, "s");
  b.output(y, "y");
  TestRule rule("takes_over_output", "Exp", {"Neg", "Identity", "Exp"}, takes_over_output);
  CHECK(fuse(b.g, rule));
  // The graph output a is the emitted Identity's, under its name; Sin reads the old Neg's value.
  REQUIRE(b.ops() == std::vector<std::string>{"Neg", "Sin", "Neg", "Identity", "Exp"});
  CHECK(b.g.outputs[0] == a);
  CHECK(b.g.values[a].name == "a");
  CHECK(b.g.nodes[3].outputs[0] == a);
  CHECK(b.g.nodes[0].outputs[0] != a);
  CHECK(b.g.nodes[1].inputs[0] == b.g.nodes[0].outputs[0]);
  CHECK(b.g.nodes[4].inputs[0] == a);
  CHECK(b.g.outputs[2] == y);
}
