// Functions (onnx_fn:: equations): one body per key in model.functions, call
// nodes, constants as Constant nodes on export, nesting, pruning, inlining.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "jaxonnx/core/converter.hpp"
#include "jaxonnx/core/error.hpp"
#include "jaxonnx/core/passes.hpp"
#include "jaxonnx/core/plugin_host.hpp"
#include "onnx.pb.h"

#include "error_checks.hpp"
#include "graph_builders.hpp"

using namespace jaxonnx;
using namespace jaxonnx::test;

namespace {

// y = test.scale(x, factor=3) over `aval`.
std::shared_ptr<const ClosedJaxpr> scale_body(const Aval& aval) {
  auto c = std::make_shared<ClosedJaxpr>();
  c->jaxpr.invars = {var(100, aval)};
  c->jaxpr.eqns = {eqn("test.scale", {var(100, aval)}, {var(101, aval)},
                       record({"factor"}, {float_param(3.0)}))};
  c->jaxpr.outvars = {var(101, aval)};
  return c;
}

Eqn call(const std::string& qualname, std::shared_ptr<const ClosedJaxpr> body, Atom in, Atom out,
         const std::string& key = "owner:0") {
  Param b;
  b.kind = JXO_PARAM_JAXPR;
  b.jaxpr = std::move(body);
  return eqn(kFunctionPrefix + qualname, {std::move(in)}, {std::move(out)},
             record({"body", "name", "domain", "key"},
                    {b, str_param(qualname.substr(qualname.rfind('.') + 1)), str_param("custom"),
                     str_param(key)}));
}

// x -> f(x) -> f(.) with `second_key` for the second call.
ClosedJaxpr two_calls(const Aval& a, const std::string& second_key = "owner:0") {
  auto body = scale_body(a);
  ClosedJaxpr c;
  c.jaxpr.invars = {var(0, a)};
  c.jaxpr.eqns = {call("m.Block", body, var(0, a), var(1, a)),
                  call("m.Block", body, var(1, a), var(2, a), second_key)};
  c.jaxpr.outvars = {var(2, a)};
  return c;
}

Registry good() { return Registry::scan({JXO_TEST_GOOD_DIR}); }

}  // namespace

TEST_CASE("two calls with one key share one function; constants live in its body") {
  Registry reg = good();
  Aval a = f32({S("B"), N(3)});
  ir::Model m = lower_to_ir(two_calls(a), reg, {});
  REQUIRE(m.functions.size() == 1);
  const ir::Function& f = m.functions[0];
  CHECK(f.name == "Block");
  CHECK(f.domain == "custom");
  CHECK(f.body->initializers.size() == 1);
  CHECK(f.body->captures.empty());
  CHECK(m.graph.initializers.empty());
  REQUIRE(m.graph.nodes.size() == 2);
  for (const ir::Node& n : m.graph.nodes) {
    CHECK(n.op_type == "Block");
    CHECK(n.domain == "custom");
  }
  CHECK(m.domain_opsets.at("custom") == 1);

  onnx::ModelProto proto;
  REQUIRE(proto.ParseFromString(convert(two_calls(a), reg, {})));
  REQUIRE(proto.functions_size() == 1);
  const onnx::FunctionProto& fp = proto.functions(0);
  CHECK(fp.name() == "Block");
  CHECK(fp.domain() == "custom");
  REQUIRE(fp.node_size() == 2);
  CHECK(fp.node(0).op_type() == "Constant");  // the body's initializer
  CHECK(fp.node(1).op_type() == "Mul");
  CHECK(fp.node(1).input(1) == fp.node(0).output(0));
  CHECK(fp.opset_import(0).domain() == "");
  // Typed, symbolic dims included.
  bool typed_input = false;
  for (const onnx::ValueInfoProto& vi : fp.value_info())
    if (vi.name() == fp.input(0))
      typed_input = vi.type().tensor_type().shape().dim(0).dim_param() == "B";
  CHECK(typed_input);
  CHECK(convert(two_calls(a), reg, {}) == convert(two_calls(a), reg, {}));
}

TEST_CASE("another capture key or other avals give another, numbered definition") {
  Registry reg = good();
  Aval a = f32({N(2), N(3)});
  ir::Model m = lower_to_ir(two_calls(a, "owner:1"), reg, {});
  REQUIRE(m.functions.size() == 2);
  CHECK(m.functions[0].name == "Block");
  CHECK(m.functions[1].name == "Block_2");
  CHECK(m.graph.nodes[1].op_type == "Block_2");

  auto small = scale_body(a);
  Aval b = f32({N(4), N(3)});
  ClosedJaxpr c;
  c.jaxpr.invars = {var(0, a), var(1, b)};
  c.jaxpr.eqns = {call("m.Block", small, var(0, a), var(2, a)),
                  call("m.Block", scale_body(b), var(1, b), var(3, b))};
  c.jaxpr.outvars = {var(2, a), var(3, b)};
  CHECK(lower_to_ir(c, reg, {}).functions.size() == 2);
}

TEST_CASE("nested calls: the callee is defined once, before its caller") {
  Registry reg = good();
  Aval a = f32({S("B"), N(3)});
  auto inner = scale_body(a);
  auto outer = std::make_shared<ClosedJaxpr>();
  outer->jaxpr.invars = {var(200, a)};
  outer->jaxpr.eqns = {call("m.Inner", inner, var(200, a), var(201, a)),
                       call("m.Inner", inner, var(201, a), var(202, a))};
  outer->jaxpr.outvars = {var(202, a)};
  ClosedJaxpr c;
  c.jaxpr.invars = {var(0, a)};
  c.jaxpr.eqns = {call("m.Outer", outer, var(0, a), var(1, a)),
                  call("m.Inner", inner, var(1, a), var(2, a)),
                  call("m.Outer", outer, var(2, a), var(3, a))};
  c.jaxpr.outvars = {var(3, a)};
  ir::Model m = lower_to_ir(c, reg, {});
  REQUIRE(m.functions.size() == 2);
  CHECK(m.functions[0].name == "Inner");
  CHECK(m.functions[1].name == "Outer");
  CHECK(m.functions[1].body->nodes.size() == 2);

  SUBCASE("inlining replaces every call, nested ones included") {
    passes::inline_functions(m);
    CHECK(m.functions.empty());
    CHECK(m.domain_opsets.count("custom") == 0);
    REQUIRE(m.graph.nodes.size() == 5);
    for (const ir::Node& n : m.graph.nodes) CHECK(n.op_type == "Mul");
    CHECK(m.graph.initializers.size() == 5);
    CHECK(m.graph.nodes[0].name.find('/') != std::string::npos);
    // The interface keeps its value and name.
    CHECK(m.graph.outputs[0] == m.graph.nodes[4].outputs[0]);
    CHECK(m.graph.values[m.graph.outputs[0]].name == "out_0");
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(export_onnx(m)));
    CHECK(proto.functions_size() == 0);
  }
}

TEST_CASE("a function no call reaches is dropped with its domain") {
  Registry reg = good();
  Aval a = f32({N(2), N(3)});
  ClosedJaxpr c;
  c.jaxpr.invars = {var(0, a)};
  auto body = scale_body(a);
  c.jaxpr.eqns = {call("m.Block", body, var(0, a), var(1, a)), body->jaxpr.eqns[0]};
  c.jaxpr.eqns[1].inputs = {var(0, a)};
  c.jaxpr.eqns[1].outputs = {var(2, a)};
  c.jaxpr.outvars = {var(2, a)};  // the call is dead
  for (bool optimize : {false, true}) {
    ConvertOptions options;
    options.optimize = optimize;
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(convert(c, reg, options)));
    CHECK(proto.functions_size() == 0);
    CHECK(proto.opset_import_size() == 1);
  }
}

TEST_CASE("a call without a body param is a ConversionError naming it") {
  Registry reg = good();
  Aval a = f32({N(2)});
  ClosedJaxpr c;
  c.jaxpr.invars = {var(0, a)};
  c.jaxpr.eqns = {eqn(std::string(kFunctionPrefix) + "m.Bad", {var(0, a)}, {var(1, a)},
                      record())};
  c.jaxpr.outvars = {var(1, a)};
  CHECK(contains(conversion_error(c, reg), "onnx_fn::m.Bad"));
}
