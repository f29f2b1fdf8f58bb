// The lowering driver with the test plugins: a hand-built jaxpr lowered to
// IR, the guardrails around plugin calls, prune, ONNX export, abstract eval.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "jaxonnx/core/abstract_eval.hpp"
#include "jaxonnx/core/converter.hpp"
#include "jaxonnx/core/error.hpp"
#include "jaxonnx/core/plugin_host.hpp"
#include "onnx.pb.h"

#include "error_checks.hpp"
#include "graph_builders.hpp"

using namespace jaxonnx;
using namespace jaxonnx::test;

namespace {

// x: f32[B,3];  a = test.identity(x);  b = test.scale(a, factor=3);  out = b
ClosedJaxpr identity_then_scale() {
  ClosedJaxpr c;
  c.jaxpr.invars = {var(0, batch3())};
  c.jaxpr.eqns = {
      eqn("test.identity", {var(0, batch3())}, {var(1, batch3())}),
      eqn("test.scale", {var(1, batch3())}, {var(2, batch3())},
          record({"factor"}, {float_param(3.0)})),
  };
  c.jaxpr.outvars = {var(2, batch3())};
  return c;
}

Registry good() { return Registry::scan({JXO_TEST_GOOD_DIR}); }

}  // namespace

TEST_CASE("target profiles: a lowering asks the target; the host refuses what it refuses") {
  Registry reg = good();
  ConvertOptions options;
  CHECK(count_op(lower_to_ir(one_eqn("test.target"), reg, options).graph, "Identity") == 1);
  options.target = "portable";
  CHECK(count_op(lower_to_ir(one_eqn("test.target"), reg, options).graph, "Neg") == 1);
  ClosedJaxpr attention = one_eqn("test.target");
  attention.jaxpr.eqns[0].params = record({"attention"}, {float_param(1.0)});
  std::string msg = conversion_error(attention, reg, options);
  check_mentions(msg, {"the target \"portable\" refuses Attention", "test_good"});
  options.target = "tpu";
  msg = conversion_error(one_eqn("test.target"), reg, options);
  check_mentions(msg, {"unknown target \"tpu\"", "\"portable\""});
}

TEST_CASE("target profiles: a node of a non-standard domain only where the profile runs it") {
  Registry reg = good();
  ClosedJaxpr contrib = one_eqn("test.target");
  contrib.jaxpr.eqns[0].params = record({"contrib"}, {float_param(1.0)});
  ConvertOptions options;
  for (const char* target : {"onnxruntime", "portable"}) {
    options.target = target;
    std::string msg = conversion_error(contrib, reg, options);
    CHECK(msg.find(std::string("the target \"") + target + "\" refuses FastGelu of domain com.microsoft") !=
          std::string::npos);
    CHECK(msg.find("\"onnxruntime-contrib\"") != std::string::npos);  // the target that runs it
    check_mentions(msg, {"test_good", "test.target"});
  }
  options.target = "onnxruntime-contrib";
  ir::Model m = lower_to_ir(contrib, reg, options);
  REQUIRE(m.graph.nodes.size() == 1);
  CHECK(m.graph.nodes[0].domain == "com.microsoft");
  CHECK(m.graph.nodes[0].op_type == "FastGelu");
  CHECK(m.domain_opsets.at("com.microsoft") == 1);
  // A standard op the contrib target has.
  CHECK(count_op(lower_to_ir(one_eqn("test.target"), reg, options).graph, "Identity") == 1);
  // A domain no profile names is the plugin's own: emitted for every target.
  ClosedJaxpr own = one_eqn("test.target");
  own.jaxpr.eqns[0].params = record({"own_domain"}, {float_param(1.0)});
  for (const char* target : {"onnxruntime", "portable", "onnxruntime-contrib"}) {
    options.target = target;
    ir::Model mo = lower_to_ir(own, reg, options);
    REQUIRE(mo.graph.nodes.size() == 1);
    CHECK(mo.graph.nodes[0].domain == "test.ops");
  }
}

TEST_CASE("a small jaxpr lowers through the good plugin") {
  Registry reg = good();
  ir::Model m = lower_to_ir(identity_then_scale(), reg, {});
  const ir::Graph& g = m.graph;
  REQUIRE(g.nodes.size() == 2);
  CHECK(g.nodes[0].op_type == "Identity");
  CHECK(g.nodes[1].op_type == "Mul");
  CHECK(g.nodes[1].inputs[0] == g.nodes[0].outputs[0]);
  REQUIRE(g.initializers.size() == 1);
  const Tensor& k = *g.initializers[0].tensor;
  CHECK(k.dtype == JXO_DTYPE_FLOAT32);
  CHECK(k.dims.empty());
  REQUIRE(k.nbytes == sizeof(float));
  float factor = 0;
  std::memcpy(&factor, k.data, sizeof factor);
  CHECK(factor == 3.0f);
  CHECK(g.nodes[1].inputs[1] == g.initializers[0].value);
  REQUIRE(g.inputs.size() == 1);
  REQUIRE(g.outputs.size() == 1);
  CHECK(g.values[g.inputs[0]].name == "in_0");
  CHECK(g.values[g.outputs[0]].name == "out_0");
  CHECK(g.values[g.outputs[0]].type.str() == "float32[B,3]");
  CHECK(g.outputs[0] == g.nodes[1].outputs[0]);
  CHECK(m.opset == 23);
}

TEST_CASE("a failing plugin becomes a ConversionError with plugin, primitive and message") {
  Registry reg = Registry::scan({JXO_TEST_GOOD_DIR, JXO_TEST_FAILING_DIR});
  ConvertOptions options;
  options.describe_source = [](int64_t source) {
    return "model.py:" + std::to_string(source) + " (forward)";
  };
  std::string msg = conversion_error(one_eqn("test.fail", 41), reg, options);
  check_mentions(msg, {"plugin 'test_failing' failed to lower 'test.fail'",
                       "test.fail: refusing on purpose", "float32[B,3]", "model.py:41 (forward)"});
}

TEST_CASE("a throwing plugin becomes a ConversionError, not a crash") {
  Registry reg = Registry::scan({JXO_TEST_THROWING_DIR});
  std::string msg = conversion_error(one_eqn("test.throw"), reg);
  check_mentions(msg, {"plugin 'test_throwing' failed to lower 'test.throw'",
                       "test.throw: std::runtime_error from the plugin"});
  std::string other = conversion_error(one_eqn("test.throw_other"), reg);
  check_mentions(other, {"plugin 'test_throwing' failed to lower 'test.throw_other'",
                         "unknown C++ exception"});
}

TEST_CASE("a lowering that binds no output is an error saying 'unbound'") {
  Registry reg = Registry::scan({JXO_TEST_UNBOUND_DIR});
  std::string msg = conversion_error(one_eqn("test.unbound"), reg);
  check_mentions(msg, {"plugin 'test_unbound'", "'test.unbound'", "output 0", "unbound"});
}

TEST_CASE("an unknown primitive names itself, its input avals and the folders searched") {
  Registry reg = Registry::scan({JXO_TEST_GOOD_DIR, JXO_TEST_GARBAGE_DIR});
  std::string msg = conversion_error(one_eqn("test.nobody_claims_this"), reg);
  check_mentions(msg, {"'test.nobody_claims_this'", "float32[B,3]", JXO_TEST_GOOD_DIR,
                       JXO_TEST_GARBAGE_DIR});
  CHECK(contains(msg, "garbage.so"));  // the skipped files are listed too
}

TEST_CASE("an opset below the minimum is refused") {
  ConvertOptions options;
  options.opset = kMinOpset - 1;
  std::string msg = conversion_error(identity_then_scale(), good(), options);
  check_mentions(msg, {"opset " + std::to_string(kMinOpset - 1),
                       "jaxonnx lowers to opset " + std::to_string(kMinOpset) + " or newer"});
}

TEST_CASE("prune removes a dead node and its unused initializer") {
  // x;  a = test.identity(x);  dead = test.scale(x);  out = a
  ClosedJaxpr c;
  c.jaxpr.invars = {var(0, batch3())};
  c.jaxpr.eqns = {
      eqn("test.identity", {var(0, batch3())}, {var(1, batch3())}),
      eqn("test.scale", {var(0, batch3())}, {var(2, batch3())}),
  };
  c.jaxpr.outvars = {var(1, batch3())};
  Registry reg = good();
  ir::Model m = lower_to_ir(c, reg, {});
  CHECK(m.graph.nodes.size() == 2);
  CHECK(m.graph.initializers.size() == 1);
  prune(m.graph);
  REQUIRE(m.graph.nodes.size() == 1);
  CHECK(m.graph.nodes[0].op_type == "Identity");
  CHECK(count_op(m.graph, "Mul") == 0);
  CHECK(m.graph.initializers.empty());
  // A live chain is left alone.
  ir::Model live = lower_to_ir(identity_then_scale(), reg, {});
  prune(live.graph);
  CHECK(live.graph.nodes.size() == 2);
  CHECK(live.graph.initializers.size() == 1);
}

TEST_CASE("export writes an IR 10 / opset 23 ModelProto with dim_params, deterministically") {
  Registry reg = good();
  ConvertOptions options;
  options.model_name = "tiny";
  options.optimize = false;  // the raw lowering, so the Identity stays (test_passes covers passes)
  std::string bytes = convert(identity_then_scale(), reg, options);
  onnx::ModelProto m;
  REQUIRE(m.ParseFromString(bytes));
  CHECK(m.ir_version() == 10);
  REQUIRE(m.opset_import_size() >= 1);
  CHECK(m.opset_import(0).domain() == "");
  CHECK(m.opset_import(0).version() == 23);
  CHECK(m.producer_name() == "jaxonnx");
  const onnx::GraphProto& g = m.graph();
  CHECK(g.name() == "tiny");
  REQUIRE(g.input_size() == 1);
  REQUIRE(g.output_size() == 1);
  for (const onnx::ValueInfoProto* vi : {&g.input(0), &g.output(0)}) {
    CHECK(vi->type().tensor_type().elem_type() == onnx::TensorProto::FLOAT);
    const onnx::TensorShapeProto& shape = vi->type().tensor_type().shape();
    REQUIRE(shape.dim_size() == 2);
    CHECK(shape.dim(0).dim_param() == "B");
    CHECK(shape.dim(1).dim_value() == 3);
  }
  CHECK(g.input(0).name() == "in_0");
  CHECK(g.output(0).name() == "out_0");
  REQUIRE(g.node_size() == 2);
  CHECK(g.node(0).op_type() == "Identity");
  CHECK(g.node(1).op_type() == "Mul");
  CHECK(g.node(1).output(0) == "out_0");
  REQUIRE(g.initializer_size() == 1);
  const onnx::TensorProto& init = g.initializer(0);
  CHECK(init.data_type() == onnx::TensorProto::FLOAT);
  CHECK(init.dims_size() == 0);
  CHECK(g.node(1).input(1) == init.name());
  REQUIRE(init.raw_data().size() == sizeof(float));
  float factor = 0;
  std::memcpy(&factor, init.raw_data().data(), sizeof factor);
  CHECK(factor == 3.0f);

  // Deterministic: the same IR gives the same bytes, and so does a fresh run.
  ir::Model model = lower_to_ir(identity_then_scale(), reg, options);
  prune(model.graph);
  CHECK(export_onnx(model) == export_onnx(model));
  CHECK(export_onnx(model) == bytes);
  CHECK(convert(identity_then_scale(), reg, options) == bytes);

  // Another opset is written as asked.
  options.opset = 18;
  onnx::ModelProto m18;
  REQUIRE(m18.ParseFromString(convert(identity_then_scale(), reg, options)));
  CHECK(m18.opset_import(0).version() == 18);
}

TEST_CASE("abstract eval through a plugin callback keeps symbolic dims") {
  Registry reg = Registry::scan({JXO_TEST_GOOD_DIR, JXO_TEST_FAILING_DIR});
  const PrimitiveInfo* id = reg.find("test.identity");
  REQUIRE(id);
  Aval in = f32({S("B"), S("2*B"), N(4)});
  std::vector<Aval> out = abstract_eval(*id, {in}, record());
  REQUIRE(out.size() == 1);
  CHECK(out[0].dtype == JXO_DTYPE_FLOAT32);
  CHECK(out[0].str() == "float32[B,2*B,4]");
  CHECK(out[0].dims[1].symbol == "2*B");
  CHECK(out[0].dims[2].value == 4);

  // The plain-C plugin's callback too.
  const PrimitiveInfo* fail = reg.find("test.fail");
  REQUIRE(fail);
  std::vector<Aval> out2 = abstract_eval(*fail, {Aval(JXO_DTYPE_INT64, {S("N")})}, record());
  REQUIRE(out2.size() == 1);
  CHECK(out2[0].str() == "int64[N]");

  // A callback that fails becomes a ConversionError naming plugin and primitive.
  std::string msg;
  try {
    abstract_eval(*id, {}, record());
  } catch (const ConversionError& e) {
    msg = e.what();
  }
  check_mentions(msg, {"plugin 'test_good' failed the abstract eval of 'test.identity'",
                       "expects exactly one input"});
}

TEST_CASE("export writes large weights between protobuf's pieces, byte for byte as protobuf would") {
  // Initializers from 1 KiB on are not copied into the message; the bytes must
  // still be exactly protobuf's serialization (field order, lengths), with the
  // graph's value_info, the opset imports and a function after them.
  Registry reg = good();
  ConvertOptions options;
  options.optimize = false;
  ir::Model model = lower_to_ir(identity_then_scale(), reg, options);
  std::vector<std::vector<uint8_t>> payloads;
  for (size_t n : {size_t{5000}, size_t{8}, size_t{1024}, size_t{200000}, size_t{1023}}) {
    std::vector<uint8_t> bytes(n);
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 131 + n);
    ir::ValueId v = model.graph.add_value("w" + std::to_string(n));
    model.graph.initializers.push_back(
        {v, Tensor::copy_of(JXO_DTYPE_UINT8, {static_cast<int64_t>(n)}, bytes.data(), n), nullptr});
    payloads.push_back(std::move(bytes));
  }
  ir::Function fn{"F", "custom", std::make_shared<ir::Graph>()};
  ir::ValueId a = fn.body->add_value("a");
  fn.body->inputs = {a};
  fn.body->outputs = {a};
  model.functions.push_back(fn);
  model.domain_opsets["custom"] = 1;

  const std::string bytes = export_onnx(model);
  onnx::ModelProto m;
  REQUIRE(m.ParseFromString(bytes));
  CHECK(m.SerializeAsString() == bytes);
  REQUIRE(m.graph().initializer_size() == 1 + static_cast<int>(payloads.size()));
  for (size_t k = 0; k < payloads.size(); ++k) {
    const std::string& raw = m.graph().initializer(static_cast<int>(k) + 1).raw_data();
    CHECK(raw == std::string(payloads[k].begin(), payloads[k].end()));
  }
  CHECK(m.functions_size() == 1);
  CHECK(m.graph().node_size() == 2);
  SerializedModel pieces = serialize_onnx(model);
  CHECK(pieces.pieces.size() > 1);  // the three tensors from 1 KiB on were spliced
  CHECK(pieces.str() == bytes);
}

TEST_CASE("export packs 4-bit initializers two per byte, low nibble first") {
  // In memory one element per byte, the value in the low nibble (ml_dtypes'
  // layout, plugin_abi.h); ONNX stores INT4/UINT4 packed. Small initializers
  // go through protobuf, large ones are spliced: both are packed.
  Registry reg = good();
  ConvertOptions options;
  options.optimize = false;
  ir::Model model = lower_to_ir(identity_then_scale(), reg, options);
  const std::vector<uint8_t> small = {0x0d, 0x07, 0x08, 0x01, 0x0f};  // int4 -3, 7, -8, 1, -1
  std::vector<uint8_t> large(4001);
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<uint8_t>(i * 7) & 0x0f;
  for (const auto& [dtype, data] : {std::make_pair(JXO_DTYPE_INT4, small), std::make_pair(JXO_DTYPE_UINT4, large)}) {
    ir::ValueId v = model.graph.add_value("w" + std::to_string(data.size()));
    model.graph.initializers.push_back(
        {v, Tensor::copy_of(dtype, {static_cast<int64_t>(data.size())}, data.data(), data.size()), nullptr});
  }
  const std::string bytes = export_onnx(model);
  onnx::ModelProto m;
  REQUIRE(m.ParseFromString(bytes));
  REQUIRE(m.graph().initializer_size() == 3);
  const onnx::TensorProto& a = m.graph().initializer(1);
  CHECK(a.data_type() == JXO_DTYPE_INT4);
  CHECK(a.dims(0) == 5);
  CHECK(a.raw_data() == std::string("\x7d\x18\x0f", 3));
  const onnx::TensorProto& b = m.graph().initializer(2);
  CHECK(b.data_type() == JXO_DTYPE_UINT4);
  REQUIRE(b.raw_data().size() == (large.size() + 1) / 2);
  bool same = true;
  for (size_t i = 0; i < large.size(); ++i)
    same = same && ((static_cast<uint8_t>(b.raw_data()[i / 2]) >> (4 * (i % 2))) & 0x0f) == large[i];
  CHECK(same);
  CHECK((static_cast<uint8_t>(b.raw_data().back()) >> 4) == 0);  // the odd last nibble is 0
}

TEST_CASE("a subgraph attribute is exported with its captures under the outer names") {
  // main: If(cond) { then: Neg(x) with x captured; else: x } -> y
  ir::Model model;
  ir::Graph& g = model.graph;
  g.name = "main";
  ir::ValueId cond = g.add_value("cond"), x = g.add_value("x"), y = g.add_value("y");
  g.inputs = {cond, x};
  g.outputs = {y};

  auto branch = [&](const char* name, bool negate) {
    auto b = std::make_shared<ir::Graph>();
    b->name = name;
    ir::ValueId inner = b->add_value("unused_inner_name");
    b->captures.push_back({inner, x});
    ir::ValueId out = inner;
    if (negate) {
      out = b->add_value(std::string(name) + "_out");
      b->nodes.push_back(ir::Node{"neg", "Neg", "", {inner}, {out}, {}});
    }
    b->outputs = {out};
    return b;
  };
  ir::Attribute then_branch{"then_branch", ir::kAttrGraph};
  then_branch.graph = branch("then", true);
  ir::Attribute else_branch{"else_branch", ir::kAttrGraph};
  else_branch.graph = branch("else", false);
  ir::Node node{"if", "If", "", {cond}, {y}, {then_branch, else_branch}};
  CHECK(ir::captured_inputs(node) == std::vector<ir::ValueId>{x, x});
  g.nodes.push_back(node);

  prune(g);  // the If reads x only through its captures: it must stay
  REQUIRE(g.nodes.size() == 1);

  onnx::ModelProto m;
  REQUIRE(m.ParseFromString(export_onnx(model)));
  const onnx::NodeProto& n = m.graph().node(0);
  REQUIRE(n.attribute_size() == 2);
  const onnx::GraphProto& then_g = n.attribute(0).g();
  CHECK(n.attribute(0).type() == onnx::AttributeProto::GRAPH);
  CHECK(then_g.name() == "then");
  CHECK(then_g.input_size() == 0);
  REQUIRE(then_g.node_size() == 1);
  CHECK(then_g.node(0).input(0) == "x");
  CHECK(then_g.output(0).name() == "then_out");
  CHECK(n.attribute(1).g().output(0).name() == "x");
}

// ------------------------------------------------------- ABI 1.1 subgraphs --

namespace {

const ir::Graph& graph_attr(const ir::Node& n, const std::string& name) {
  for (const ir::Attribute& a : n.attrs)
    if (a.name == name) {
      REQUIRE(a.type == ir::kAttrGraph);
      REQUIRE(a.graph);
      return *a.graph;
    }
  FAIL("no graph attribute " << name);
  throw 0;
}

}  // namespace

TEST_CASE("subgraphs: outer values are captured through every scope in between") {
  Registry reg = Registry::scan({JXO_TEST_SUBGRAPHS_DIR});
  ir::Model m = lower_to_ir(one_eqn("test.nested_if"), reg, {});
  prune(m.graph);
  const ir::Graph& g = m.graph;
  REQUIRE(count_op(g, "If") == 1);
  const ir::Node& outer_if = g.nodes.back();
  ir::ValueId x = g.inputs[0];
  // Both branches read x only through their captures.
  std::vector<ir::ValueId> captured = ir::captured_inputs(outer_if);
  std::sort(captured.begin(), captured.end());
  std::vector<ir::ValueId> expected{g.initializers[0].value, x, x};
  std::sort(expected.begin(), expected.end());
  CHECK(captured == expected);
  const ir::Graph& outer_then = graph_attr(outer_if, "then_branch");
  REQUIRE(count_op(outer_then, "If") == 1);
  const ir::Node& inner_if = outer_then.nodes.back();
  const ir::Graph& inner_then = graph_attr(inner_if, "then_branch");
  REQUIRE(inner_then.captures.size() == 1);
  // The inner capture names the outer branch's capture of x, not x itself.
  ir::ValueId via = inner_then.captures[0].outer;
  bool is_capture_of_x = false;
  for (const ir::Capture& c : outer_then.captures) is_capture_of_x |= c.inner == via && c.outer == x;
  CHECK(is_capture_of_x);
  // An output that is a captured value is copied (ONNX outputs are node outputs).
  const ir::Graph& inner_else = graph_attr(inner_if, "else_branch");
  REQUIRE(inner_else.nodes.size() == 1);
  CHECK(inner_else.nodes[0].op_type == "Identity");

  // Exported: every name unique model-wide; the captured x is written as "in_0".
  onnx::ModelProto model;
  REQUIRE(model.ParseFromString(export_onnx(m)));
  const onnx::NodeProto& top = model.graph().node(model.graph().node_size() - 1);
  CHECK(top.op_type() == "If");
  const onnx::GraphProto& then_g = top.attribute(0).g();
  const onnx::GraphProto& inner_g = then_g.node(then_g.node_size() - 1).attribute(0).g();
  CHECK(inner_g.node(0).op_type() == "Neg");
  CHECK(inner_g.node(0).input(0) == "in_0");
  CHECK(then_g.name() != inner_g.name());
}

TEST_CASE("subgraphs: a value of a closed sibling scope cannot be used") {
  Registry reg = Registry::scan({JXO_TEST_SUBGRAPHS_DIR});
  std::string msg = conversion_error(one_eqn("test.sibling"), reg);
  check_mentions(msg, {"plugin 'test_subgraphs' failed to lower 'test.sibling'",
                       "subgraph 'branch_a'", "closed", "cannot be used by another"});
}

TEST_CASE("subgraphs: a scope left open and a graph handle used twice are errors") {
  Registry reg = Registry::scan({JXO_TEST_SUBGRAPHS_DIR});
  std::string open_msg = conversion_error(one_eqn("test.unclosed"), reg);
  check_mentions(open_msg, {"'test.unclosed'", "never closed"});
  std::string reuse = conversion_error(one_eqn("test.reuse"), reg);
  check_mentions(reuse, {"'test.reuse'", "used once"});
}

TEST_CASE("a plugin built against ABI 1.0 still loads and lowers; its jxo_attr is read to its struct_size") {
  Registry reg = Registry::scan({JXO_TEST_MINOR0_DIR});
  CHECK(reg.diagnostics().empty());
  const PrimitiveInfo* old = reg.find("test.old_attr");
  REQUIRE(old);
  CHECK(old->plugin->abi_minor == 0);
  ir::Model m = lower_to_ir(one_eqn("test.old_attr"), reg, {});
  REQUIRE(m.graph.nodes.size() == 1);
  REQUIRE(m.graph.nodes[0].attrs.size() == 1);
  CHECK(m.graph.nodes[0].attrs[0].i == 7);
  CHECK(!m.graph.nodes[0].attrs[0].graph);
  // A GRAPH attribute cannot come from a minor-0 jxo_attr: refused, not read.
  std::string msg = conversion_error(one_eqn("test.old_graph_attr"), reg);
  check_mentions(msg, {"plugin 'test_minor0'", "predates ABI 1.1"});
}

// The plugins built against ABI 1.0 and 1.1 (tests/plugins/src/old_layouts.c)
// place every struct they hand over against an inaccessible page: a host
// reading one byte past a struct_size would crash here.
TEST_CASE("plugins built with the ABI 1.0 and 1.1 layouts load and lower, read to their struct_size") {
  for (const char* dir : {JXO_TEST_ABI_1_0_DIR, JXO_TEST_ABI_1_1_DIR}) {
    CAPTURE(dir);
    Registry reg = Registry::scan({dir});
    REQUIRE(reg.diagnostics().empty());
    REQUIRE(reg.plugins().size() == 1);
    const LoadedPlugin& p = *reg.plugins()[0];
    bool minor1 = p.abi_minor == 1;
    CHECK(p.name == (minor1 ? "test_abi_1_1" : "test_abi_1_0"));
    CHECK(p.rules.empty());  // the descriptor ends before `rules`: none, not garbage
    REQUIRE(p.primitives.size() == (minor1 ? 3u : 2u));
    CHECK(p.primitives[0].onnx_ops == std::vector<std::string>{"LeakyRelu"});
    CHECK(p.primitives[0].bindings.empty());  // no binding specs before minor 2

    ir::Model leaky = lower_to_ir(one_eqn("test.old_leaky"), reg, {});
    REQUIRE(leaky.graph.nodes.size() == 1);
    CHECK(leaky.graph.nodes[0].op_type == "LeakyRelu");
    REQUIRE(leaky.graph.nodes[0].attrs.size() == 1);
    CHECK(leaky.graph.nodes[0].attrs[0].name == "alpha");
    CHECK(leaky.graph.nodes[0].attrs[0].f == 0.25);
    CHECK(!leaky.graph.nodes[0].attrs[0].graph);

    ir::Model scale = lower_to_ir(one_eqn("test.old_scale"), reg, {});
    REQUIRE(scale.graph.nodes.size() == 1);
    CHECK(scale.graph.nodes[0].op_type == "Mul");
    REQUIRE(scale.graph.initializers.size() == 1);
    float two = 0;
    std::memcpy(&two, scale.graph.initializers[0].tensor->data, sizeof two);
    CHECK(two == 2.0f);
    CHECK(!export_onnx(scale).empty());

    if (minor1) {
      ir::Model m = lower_to_ir(one_eqn("test.old_if"), reg, {});
      REQUIRE(m.graph.nodes.size() == 1);
      const ir::Node& n = m.graph.nodes[0];
      CHECK(n.op_type == "If");
      REQUIRE(n.attrs.size() == 2);
      REQUIRE(n.attrs[0].graph);
      REQUIRE(n.attrs[1].graph);
      CHECK(n.attrs[0].graph->nodes.at(0).op_type == "Neg");
      CHECK(n.attrs[1].graph->nodes.at(0).op_type == "Identity");
      CHECK(!export_onnx(m).empty());
    }
  }
}

// plugin_abi.h promises that two conversions in two threads are safe: the host
// keeps a conversion's state in the conversion. Both threads use the same
// loaded plugins; every result must equal the one made alone.
TEST_CASE("two conversions in two threads give the same bytes as one alone") {
  Registry reg = Registry::scan({JXO_TEST_GOOD_DIR, JXO_TEST_ABI_1_1_DIR});
  const std::string alone = convert(identity_then_scale(), reg, {});
  const std::string alone_if = convert(one_eqn("test.old_if"), reg, {});
  std::vector<std::string> results(2);
  auto work = [&](size_t t) {
    std::string out;
    for (int k = 0; k < 25; ++k) {
      if (convert(identity_then_scale(), reg, {}) != alone) out += "identity_then_scale differs; ";
      if (convert(one_eqn("test.old_if"), reg, {}) != alone_if) out += "old_if differs; ";
    }
    results[t] = out;
  };
  std::thread a(work, 0), b(work, 1);
  a.join();
  b.join();
  CHECK(results[0] == "");
  CHECK(results[1] == "");
}

TEST_CASE("provenance: each node carries its equation's primitive, plugin and source pairs") {
  Registry reg = good();
  ConvertOptions options;
  options.optimize = false;
  ClosedJaxpr program = identity_then_scale();
  program.jaxpr.eqns[1].source = 7;
  options.provenance = [](int64_t source) {
    return std::vector<std::pair<std::string, std::string>>{
        {"pkg.jaxonnx.callsite", "model.py:" + std::to_string(source)}};
  };
  onnx::ModelProto m;
  REQUIRE(m.ParseFromString(convert(program, reg, options)));
  const onnx::GraphProto& g = m.graph();
  REQUIRE(g.node_size() == 2);
  auto props = [](const onnx::NodeProto& n) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& p : n.metadata_props()) out.emplace_back(p.key(), p.value());
    return out;
  };
  using Props = std::vector<std::pair<std::string, std::string>>;
  // No source handle: no callback call, only what the core knows.
  CHECK(props(g.node(0)) == Props{{"pkg.jaxonnx.primitive", "test.identity"},
                                  {"pkg.jaxonnx.plugin", "test_good"}});
  CHECK(props(g.node(1)) == Props{{"pkg.jaxonnx.primitive", "test.scale"},
                                  {"pkg.jaxonnx.plugin", "test_good"},
                                  {"pkg.jaxonnx.callsite", "model.py:7"}});
  // Off (the default): no metadata at all.
  onnx::ModelProto off;
  REQUIRE(off.ParseFromString(convert(program, reg, ConvertOptions{})));
  for (const auto& n : off.graph().node()) CHECK(n.metadata_props_size() == 0);
}

TEST_CASE("complex avals and tensors are carried packed as float[..., 2]") {
  Aval c(JXO_DTYPE_COMPLEX64, {S("B"), N(3)});
  Aval p = packed(c);
  CHECK(p.dtype == JXO_DTYPE_FLOAT32);
  CHECK(p.str() == "float32[B,3,2]");
  CHECK(packed(Aval(JXO_DTYPE_COMPLEX128, {})).str() == "float64[2]");
  CHECK(packed(batch3()).str() == batch3().str());  // real avals are unchanged

  // A complex tensor's bytes are already (re, im) pairs: same buffer, new dims.
  float data[4] = {1, 2, 3, 4};  // two complex64 values: 1+2j, 3+4j
  auto t = Tensor::copy_of(JXO_DTYPE_COMPLEX64, {2}, data, sizeof(data));
  auto q = packed(t);
  CHECK(q->dtype == JXO_DTYPE_FLOAT32);
  CHECK(q->dims == std::vector<int64_t>{2, 2});
  CHECK(q->data == t->data);
  CHECK(q->nbytes == sizeof(data));
  t.reset();  // the packed view keeps the buffer alive
  CHECK(static_cast<const float*>(q->data)[3] == 4.0f);
}

TEST_CASE("a deferred jaxpr param is made once, on first read, and copies share it") {
  int made = 0;
  Param p;
  p.kind = JXO_PARAM_JAXPR;
  p.jaxpr = JaxprRef::deferred([&made] {
    ++made;
    auto j = std::make_shared<ClosedJaxpr>();
    j->jaxpr.invars = {var(1, batch3())};
    j->jaxpr.outvars = {var(1, batch3())};
    return std::shared_ptr<const ClosedJaxpr>(j);
  });
  Param copy = p;
  CHECK(static_cast<bool>(copy.jaxpr));
  CHECK(made == 0);  // being set is not being made
  REQUIRE(copy.jaxpr.get() != nullptr);
  CHECK(p.jaxpr.get() == copy.jaxpr.get());
  CHECK(p.jaxpr->jaxpr.invars.size() == 1);
  CHECK(made == 1);

  Param failed;
  failed.jaxpr = JaxprRef::deferred([&made] {
    ++made;
    return std::shared_ptr<const ClosedJaxpr>();
  });
  CHECK(failed.jaxpr.get() == nullptr);  // what the host API hands a plugin
  CHECK_THROWS_AS(*failed.jaxpr, ConversionError);
  CHECK(made == 2);  // one attempt only
}
