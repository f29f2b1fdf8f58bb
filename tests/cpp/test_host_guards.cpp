// The throwing host: every host entry point is noexcept and guarded, so a host
// call that hits an exception inside the host (here: operator new failing, or
// an argument the host cannot read) answers with a status or its "absent"
// value, and never unwinds into the plugin's frame. This binary replaces the
// global operator new to fail on demand, so it runs on its own.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "jaxonnx/core/converter.hpp"
#include "jaxonnx/core/error.hpp"
#include "jaxonnx/core/plugin_host.hpp"

#include "error_checks.hpp"
#include "graph_builders.hpp"

using namespace jaxonnx;
using namespace jaxonnx::test;

namespace {
// While set, every allocation through operator new fails.
bool g_fail_allocations = false;
}  // namespace

void* operator new(std::size_t n) {
  if (g_fail_allocations) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

// Runs `f` with every allocation failing.
template <typename F>
auto without_memory(F&& f) {
  g_fail_allocations = true;
  auto r = f();
  g_fail_allocations = false;
  return r;
}

std::string message(const jxo_api* api, const jxo_status* st) {
  jxo_str m = api->status_message(st);
  return std::string(m.data, m.size);
}

// What the lowering below saw from each host call made without memory.
struct Seen {
  jxo_status* status = nullptr;
  int32_t status_code = JXO_OK;
  jxo_value memo = 0;
  const jxo_aval* aval = reinterpret_cast<const jxo_aval*>(1);
  int32_t depends = 0;
  bool returned = false;
};
Seen g_seen;
// (x, z) -> prim(x): the output does not depend on z.
ClosedJaxpr two_inputs() {
  ClosedJaxpr c = one_eqn("unused");
  c.jaxpr.invars.push_back(var(2, batch3()));
  return c;
}
ClosedJaxpr g_nested = two_inputs();

// Emits op_type(x) through the plain C ABI, its one output into *y.
jxo_status* emit_unary(const jxo_api* api, jxo_lowering* ctx, const char* op_type, jxo_value x,
                       jxo_value* y) {
  jxo_node node{};
  node.struct_size = sizeof node;
  node.op_type = jxo_str{op_type, std::strlen(op_type)};
  node.inputs = &x;
  node.num_inputs = 1;
  node.num_outputs = 1;
  return api->emit_node(ctx, &node, y);
}

// A lowering (plain C ABI, no SDK) that calls the host while memory has run
// out, then lowers x to Identity(x) as if nothing happened.
jxo_status* lower_starved(const jxo_api* api, jxo_lowering* ctx, void*) {
  const jxo_jaxpr* nested = reinterpret_cast<const jxo_jaxpr*>(&g_nested);
  g_fail_allocations = true;
  g_seen.status = api->status_create(jxo_str{"a message", 9});
  api->memo_put(ctx, jxo_str{"a key of more than fifteen bytes", 32}, 0);
  api->memo_get(ctx, jxo_str{"a key of more than fifteen bytes", 32}, &g_seen.memo);
  g_seen.aval = api->input_aval(ctx, 0);
  g_seen.depends = api->jaxpr_depends(nested, 0, 1);
  g_fail_allocations = false;
  g_seen.returned = true;
  g_seen.status_code = api->status_code(g_seen.status);
  api->status_release(g_seen.status);
  jxo_value x = JXO_NO_VALUE, y = JXO_NO_VALUE;
  if (jxo_status* s = api->input(ctx, 0, &x)) return s;
  if (jxo_status* s = emit_unary(api, ctx, "Identity", x, &y)) return s;
  return api->bind_output(ctx, 0, y);
}

// A lowering that hands the host a NULL string with a size, which the host
// refuses by throwing internally.
jxo_status* lower_bad_key(const jxo_api* api, jxo_lowering* ctx, void*) {
  jxo_value v = 0;
  api->memo_get(ctx, jxo_str{nullptr, 3}, &v);
  g_seen.memo = v;
  return api->status_create(jxo_str{nullptr, 5});
}

// Emits RMSNormalization (opset 23) whatever the target opset; passes the
// host's status on with its code.
jxo_status* lower_new_op(const jxo_api* api, jxo_lowering* ctx, void*) {
  jxo_value x = JXO_NO_VALUE, y = JXO_NO_VALUE;
  if (jxo_status* s = api->input(ctx, 0, &x)) return s;
  jxo_status* s = emit_unary(api, ctx, "RMSNormalization", x, &y);
  g_seen.status_code = api->status_code(s);
  return s ? s : api->bind_output(ctx, 0, y);
}

const LoadedPlugin& starved_plugin() {
  static LoadedPlugin* p = [] {
    auto* plugin = new LoadedPlugin();
    plugin->name = "test_starved";
    plugin->path = "(in the test binary)";
    plugin->abi_major = JXO_ABI_MAJOR;
    plugin->abi_minor = JXO_ABI_MINOR;
    PrimitiveInfo starved;
    starved.name = "test.starved";
    starved.lower = &lower_starved;
    starved.onnx_ops = {"Identity"};
    PrimitiveInfo bad_key;
    bad_key.name = "test.bad_key";
    bad_key.lower = &lower_bad_key;
    PrimitiveInfo new_op;
    new_op.name = "test.new_op";
    new_op.lower = &lower_new_op;
    new_op.onnx_ops = {"RMSNormalization"};
    plugin->primitives = {starved, bad_key, new_op};
    for (PrimitiveInfo& prim : plugin->primitives) prim.plugin = plugin;
    return plugin;
  }();
  return *p;
}

}  // namespace

TEST_CASE("status_create without memory returns a status, not an exception") {
  const jxo_api* api = host_api();
  jxo_status* st = nullptr;
  CHECK_NOTHROW(st = without_memory([&] { return api->status_create(jxo_str{"abc", 3}); }));
  REQUIRE(st);
  CHECK(api->status_code(st) == JXO_INTERNAL);
  CHECK(contains(message(api, st), "out of memory"));
  api->status_release(st);  // the preallocated status: releasing it is harmless
  api->status_release(st);
}

TEST_CASE("status codes: made, read, and an unknown code becomes JXO_ERROR") {
  const jxo_api* api = host_api();
  CHECK(api->status_code(nullptr) == JXO_OK);
  jxo_status* st = api->status_create(jxo_str{"x", 1});
  CHECK(api->status_code(st) == JXO_ERROR);
  api->status_release(st);
  st = api->status_create_with_code(JXO_DECLINED, jxo_str{"not this dtype", 14});
  CHECK(api->status_code(st) == JXO_DECLINED);
  CHECK(message(api, st) == "not this dtype");
  api->status_release(st);
  for (int32_t code : {int32_t{JXO_OK}, int32_t{-3}, int32_t{999}}) {
    st = api->status_create_with_code(code, jxo_str{"x", 1});
    CHECK(api->status_code(st) == JXO_ERROR);
    api->status_release(st);
  }
  // A string the host cannot read is a status too, not an exception.
  st = api->status_create(jxo_str{nullptr, 5});
  REQUIRE(st);
  CHECK(api->status_code(st) == JXO_INVALID_ARGUMENT);
  CHECK(contains(message(api, st), "status_create"));
  api->status_release(st);
}

TEST_CASE("host calls made without memory return to the plugin, and the lowering fails") {
  Registry reg;
  reg.add(starved_plugin());
  g_seen = Seen{};
  std::string msg;
  CHECK_NOTHROW(msg = conversion_error(one_eqn("test.starved"), reg));
  // Every call returned into the plugin's frame, with its "absent" answer.
  CHECK(g_seen.returned);
  CHECK(g_seen.status_code == JXO_INTERNAL);
  CHECK(g_seen.memo == JXO_NO_VALUE);
  CHECK(g_seen.aval == nullptr);
  CHECK(g_seen.depends == 1);  // "may depend": the conservative answer (the true one is 0)
  CHECK(host_api()->jaxpr_depends(reinterpret_cast<const jxo_jaxpr*>(&g_nested), 0, 1) == 0);
  // The plugin carried on and succeeded; the host still fails the lowering.
  check_mentions(msg, {"plugin 'test_starved' failed to lower 'test.starved'", "out of memory"});
}

TEST_CASE("an argument the host cannot read fails the lowering with the call's name") {
  Registry reg;
  reg.add(starved_plugin());
  g_seen = Seen{};
  std::string msg = conversion_error(one_eqn("test.bad_key"), reg);
  CHECK(g_seen.memo == JXO_NO_VALUE);
  check_mentions(msg, {"plugin 'test_starved' failed to lower 'test.bad_key'",
                       "memo_get: a string argument is a NULL pointer with size 3",
                       "status_create: a string argument is a NULL pointer with size 5",
                       "a bug in plugin 'test_starved'"});
}

TEST_CASE("an op newer than the target opset is JXO_UNSUPPORTED_OPSET, and the user is told") {
  Registry reg;
  reg.add(starved_plugin());
  g_seen = Seen{};
  ConvertOptions options;
  options.opset = 18;
  std::string msg = conversion_error(one_eqn("test.new_op"), reg, options);
  CHECK(g_seen.status_code == JXO_UNSUPPORTED_OPSET);
  check_mentions(msg, {"'RMSNormalization' exists from opset 23",
                       "the model targets opset 18; a newer opset may lower it"});
  // At opset 23 the same lowering works.
  options.opset = 23;
  CHECK(lower_to_ir(one_eqn("test.new_op"), reg, options).graph.nodes.size() == 1);
}
