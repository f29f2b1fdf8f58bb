// The IR verifier (core/src/passes/verify.cpp) on hand-built graphs: each
// invariant it checks, broken once; and the regressions of issue 14 that
// live below the Python layer.
#include <doctest/doctest.h>

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

std::string problem(const ir::Graph& g) {
  try {
    passes::verify(g, "in a test");
  } catch (const ConversionError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the verifier accepts a well-formed graph with broadcasting") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({3, 1}), "x"), y = b.input(f32({1, 4}), "y");
  b.output(b.op("Add", {x, y}, f32({3, 4})), "z");
  CHECK(problem(b.g) == "");
}

TEST_CASE("the verifier names a use before definition") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({3}), "x");
  ir::ValueId later = b.value(f32({3}), "later");
  b.g.nodes.push_back(ir::Node{"first", "Relu", "", {later}, {b.value(f32({3}), "y")}, {}});
  b.g.nodes.push_back(ir::Node{"second", "Relu", "", {x}, {later}, {}});
  b.output(b.g.nodes[0].outputs[0]);
  CHECK(contains(problem(b.g), "reads 'later' (input 0) before it is defined"));
}

TEST_CASE("the verifier names a value defined twice") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({3}), "x");
  ir::ValueId y = b.op("Relu", {x}, f32({3}));
  b.g.nodes.push_back(ir::Node{"again", "Neg", "", {x}, {y}, {}});
  b.output(y, "y");
  CHECK(contains(problem(b.g), "value 'y' is defined twice"));
}

TEST_CASE("the verifier checks elementwise output shapes") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({3, 1}), "x"), y = b.input(f32({3, 4}), "y");
  // atan2's old lowering: the output typed like the first operand.
  b.output(b.op("Max", {x, y}, f32({3, 1})), "m");
  CHECK(contains(problem(b.g), "declares its output float32[3,1], but its inputs give float32[3,4]"));
}

TEST_CASE("the verifier checks tensor attributes and initializers") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({2}), "x");
  ir::ValueId y = b.op("Relu", {x}, f32({2}));
  ir::Attribute a{"value", JXO_ATTR_TENSOR};
  float data[2] = {1, 2};
  auto t = Tensor::copy_of(JXO_DTYPE_FLOAT32, {3}, data, sizeof data);  // 8 bytes for 3 floats
  a.tensor = t;
  b.g.nodes.back().attrs.push_back(a);
  b.output(y);
  CHECK(contains(problem(b.g), "holds 8 bytes for 3 elements of float32"));
}

TEST_CASE("the verifier checks that captures resolve") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({2}), "x");
  auto sub = std::make_shared<ir::Graph>();
  sub->name = "body";
  ir::ValueId inner = sub->add_value("captured");
  sub->captures.push_back({inner, 99});  // no such outer value
  sub->outputs.push_back(inner);
  b.output(b.if_node(x, "then_branch", sub, f32({2})), "y");
  CHECK(contains(problem(b.g), "capture 'captured' stands for no value visible"));
}

TEST_CASE("constant folding of empty shape constants (UBSan: null memcpy, issue 14 bug 10)") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({2}), "x");
  auto empty = Tensor::copy_of(JXO_DTYPE_INT64, {0}, nullptr, 0);
  ir::ValueId e = b.value(Aval(JXO_DTYPE_INT64, {Dim{0, {}}}), "empty");
  b.g.initializers.push_back({e, empty});
  ir::ValueId two = b.value(Aval(JXO_DTYPE_INT64, {Dim{1, {}}}), "two");
  int64_t v = 2;
  b.g.initializers.push_back({two, Tensor::copy_of(JXO_DTYPE_INT64, {1}, &v, 8)});
  ir::ValueId shape = b.value(Aval(JXO_DTYPE_INT64, {Dim{1, {}}}), "shape");
  ir::Attribute axis{"axis", JXO_ATTR_INT};
  b.g.nodes.push_back(ir::Node{"cat", "Concat", "", {e, two}, {shape}, {axis}});
  b.output(b.op("Reshape", {x, shape}, f32({2})), "y");
  passes::Pipeline p;
  p.push_back(passes::constant_folding());
  p.push_back(passes::no_op_elimination());
  p.push_back(passes::dead_code_elimination());
  passes::PassManager(std::move(p)).run(b.g);
  CHECK(problem(b.g) == "");
  CHECK(b.g.nodes.size() == 1);  // Reshape(x, [2]) of a float32[2] is a no-op, kept for the name
}

TEST_CASE("a 20,000-node Identity chain goes in one linear noop run (issue 14 bug 11)") {
  GraphBuilder b;
  ir::ValueId v = b.input(f32({3}), "x");
  v = b.op("Relu", {v}, f32({3}));
  for (int k = 0; k < 20000; ++k) v = b.op("Identity", {v}, f32({3}));
  b.output(v);
  passes::Pipeline p;
  p.push_back(passes::no_op_elimination());
  passes::PassManager manager(std::move(p));
  CHECK(manager.run(b.g) == 2);  // one round rewrites everything, the second finds nothing
  CHECK(b.g.nodes.size() == 1);
  CHECK(problem(b.g) == "");
}
