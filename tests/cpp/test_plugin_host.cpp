// The plugin host: loading, ABI negotiation with every test plugin case,
// diagnostics, registry, duplicate primitives.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "jaxonnx/core/error.hpp"
#include "jaxonnx/core/plugin_host.hpp"
#include "jaxonnx/core/preflight.hpp"

#include "error_checks.hpp"

using namespace jaxonnx;
using namespace jaxonnx::test;

namespace {

std::string file_in(const std::string& dir, const std::string& name) { return dir + "/" + name; }

// The reason load_plugin gives for `path`; fails the test if it loads.
std::string load_error(const std::string& path) {
  try {
    load_plugin(path);
  } catch (const PluginLoadError& e) {
    return e.what();
  }
  FAIL("expected PluginLoadError for " << path);
  return {};
}

const Diagnostic* diagnostic_for(const Registry& reg, const std::string& file_name) {
  for (const Diagnostic& d : reg.diagnostics())
    if (d.path.size() >= file_name.size() &&
        d.path.compare(d.path.size() - file_name.size(), file_name.size(), file_name) == 0)
      return &d;
  return nullptr;
}

}  // namespace

TEST_CASE("the good plugin loads and negotiates ABI 1.0") {
  const LoadedPlugin& p = load_plugin(file_in(JXO_TEST_GOOD_DIR, "good.so"));
  CHECK(p.name == "test_good");
  CHECK(p.version == "1.2.3");
  CHECK(p.abi_major == JXO_ABI_MAJOR);
  CHECK(p.abi_minor == JXO_ABI_MINOR);
  CHECK_FALSE(p.sdk_version.empty());
  CHECK(contains(p.path, "good.so"));
  CHECK(contains(p.label(), "'test_good' 1.2.3"));
  REQUIRE(p.primitives.size() == 3);
  CHECK(p.primitives[0].name == "test.identity");
  CHECK(p.primitives[0].onnx_ops == std::vector<std::string>{"Identity"});
  CHECK(p.primitives[0].summary == "returns its input");
  CHECK(bool(p.primitives[0].abstract_eval));
  CHECK(p.primitives[0].plugin == &p);
  CHECK(p.primitives[1].name == "test.scale");
  CHECK(p.primitives[1].onnx_ops == std::vector<std::string>{"Mul"});
}

TEST_CASE("loading the same file twice returns the same plugin") {
  const LoadedPlugin& a = load_plugin(file_in(JXO_TEST_GOOD_DIR, "good.so"));
  const LoadedPlugin& b = load_plugin(file_in(JXO_TEST_GOOD_DIR, "good.so"));
  const LoadedPlugin& c = load_plugin(std::string(JXO_TEST_GOOD_DIR) + "/../good/./good.so");
  CHECK(&a == &b);
  CHECK(&a == &c);  // the cache is keyed by the canonical path
}

TEST_CASE("a plugin for another ABI major is refused, naming the major") {
  std::string why = load_error(file_in(JXO_TEST_WRONG_MAJOR_DIR, "wrong_major.so"));
  check_mentions(why, {"ABI major 2", "jaxonnx_plugin_init_v2"});
}

TEST_CASE("a plugin built for a newer minor is refused with both versions") {
  std::string why = load_error(file_in(JXO_TEST_NEWER_MINOR_DIR, "newer_minor.so"));
  CHECK(contains(why, "1." + std::to_string(JXO_ABI_MINOR)));      // the host's minor
  CHECK(contains(why, "1." + std::to_string(JXO_ABI_MINOR + 1)));  // the plugin's
  check_mentions(why, {"test_newer_minor", "upgrade"});
}

TEST_CASE("a shared object without the entry symbol is refused") {
  std::string why = load_error(file_in(JXO_TEST_MISSING_ENTRY_DIR, "missing_entry.so"));
  check_mentions(why, {"jaxonnx_plugin_init_v1", "not a jaxonnx plugin"});
}

TEST_CASE("garbage files are refused with dlerror's text") {
  std::string text = load_error(file_in(JXO_TEST_GARBAGE_DIR, "garbage.so"));
  CHECK(contains(text, "could not be loaded"));
  CHECK(contains(text, "garbage.so"));  // dlerror names the file
  CHECK((contains(text, "invalid ELF header") || contains(text, "file too short")));
  std::string truncated = load_error(file_in(JXO_TEST_GARBAGE_DIR, "truncated.so"));
  check_mentions(truncated, {"could not be loaded", "truncated.so"});
  CHECK(contains(truncated, "truncated?"));  // refused before dlopen could SIGBUS
  // A second attempt gives the same reason (failures are cached, not retried).
  CHECK(load_error(file_in(JXO_TEST_GARBAGE_DIR, "garbage.so")) == text);
}

TEST_CASE("an init that fails reports the plugin's message") {
  std::string why = load_error(file_in(JXO_TEST_FAILING_INIT_DIR, "failing_init.so"));
  check_mentions(why, {"jaxonnx_plugin_init_v1 failed", "failing_init: cannot start on purpose"});
}

TEST_CASE("Registry::scan skips every invalid file with a diagnostic naming it") {
  Registry reg = Registry::scan({JXO_TEST_WRONG_MAJOR_DIR, JXO_TEST_NEWER_MINOR_DIR,
                                 JXO_TEST_MISSING_ENTRY_DIR, JXO_TEST_GARBAGE_DIR,
                                 JXO_TEST_FAILING_INIT_DIR, JXO_TEST_GOOD_DIR,
                                 JXO_TEST_PLUGINS "/no_such_folder"});
  REQUIRE(reg.plugins().size() == 1);
  CHECK(reg.plugins()[0]->name == "test_good");
  CHECK(reg.diagnostics().size() == 7);

  const std::string host_minor = "1." + std::to_string(JXO_ABI_MINOR);
  const std::pair<const char*, const char*> expected[] = {
      {"wrong_major.so", "ABI major 2"},
      {"newer_minor.so", host_minor.c_str()},
      {"missing_entry.so", "jaxonnx_plugin_init_v1"},
      {"garbage.so", "could not be loaded"},
      {"truncated.so", "could not be loaded"},
      {"failing_init.so", "failing_init: cannot start on purpose"},
  };
  for (const auto& [file, reason] : expected) {
    CAPTURE(file);
    const Diagnostic* d = diagnostic_for(reg, file);
    REQUIRE(d);
    CHECK(contains(d->reason, reason));
  }
  const Diagnostic* folder = diagnostic_for(reg, "no_such_folder");
  REQUIRE(folder);
  CHECK(folder->reason == "not a folder");
  CHECK(reg.find("test.identity") != nullptr);
}

TEST_CASE("registry lookup") {
  Registry reg = Registry::scan({JXO_TEST_GOOD_DIR, JXO_TEST_FAILING_DIR});
  CHECK(reg.diagnostics().empty());
  CHECK(reg.dirs() == std::vector<std::string>{JXO_TEST_GOOD_DIR, JXO_TEST_FAILING_DIR});
  const PrimitiveInfo* id = reg.find("test.identity");
  REQUIRE(id);
  CHECK(id->plugin->name == "test_good");
  const PrimitiveInfo* fail = reg.find("test.fail");
  REQUIRE(fail);
  CHECK(fail->plugin->name == "test_failing");
  CHECK(fail->summary == "always fails");
  CHECK(reg.find("test.nope") == nullptr);
  CHECK(reg.find("") == nullptr);
  // The same folder twice (or the same plugin reached twice) is not a duplicate.
  Registry twice = Registry::scan({JXO_TEST_GOOD_DIR, JXO_TEST_GOOD_DIR});
  CHECK(twice.plugins().size() == 1);
}

TEST_CASE("a primitive claimed by two plugins is an error naming both") {
  std::string msg;
  try {
    Registry::scan({JXO_TEST_DUPLICATE_DIR});
  } catch (const ConversionError& e) {
    msg = e.what();
  }
  REQUIRE_FALSE(msg.empty());
  check_mentions(msg, {"'test.identity'", "'dup_a'", "'dup_b'", "dup_a.so", "dup_b.so"});

  // Also across folders: the good plugin and a duplicate.
  Registry one = Registry::scan({JXO_TEST_GOOD_DIR});
  const LoadedPlugin& dup_a = load_plugin(file_in(JXO_TEST_DUPLICATE_DIR, "dup_a.so"));
  std::string across;
  try {
    one.add(dup_a);
  } catch (const ConversionError& e) {
    across = e.what();
  }
  check_mentions(across, {"'test_good'", "'dup_a'"});
}

TEST_CASE("plugin file names") {
  CHECK(is_plugin_file_name("x.so"));
  CHECK(is_plugin_file_name("/a/b/libfoo.so"));
  CHECK_FALSE(is_plugin_file_name("x.txt"));
  CHECK_FALSE(is_plugin_file_name("x.so.txt"));
  CHECK_FALSE(is_plugin_file_name("so"));
}

TEST_CASE("the host serves minors up to its own and nothing newer") {
  const jxo_host* host = host_info();
  REQUIRE(host);
  CHECK(host->struct_size == sizeof(jxo_host));
  CHECK(host->abi_major == JXO_ABI_MAJOR);
  const jxo_api* api = host->get_api(0);
  REQUIRE(api);
  CHECK(api == host_api());
  CHECK(api->abi_minor == JXO_ABI_MINOR);
  CHECK(api->struct_size == sizeof(jxo_api));
  CHECK(host->get_api(JXO_ABI_MINOR + 1) == nullptr);
  jxo_status* st = api->status_create(jxo_str{"abc", 3});
  jxo_str m = api->status_message(st);
  CHECK(std::string(m.data, m.size) == "abc");
  api->status_release(st);
}

TEST_CASE("test equations (ABI 1.4) are read from the descriptor") {
  const LoadedPlugin& p = load_plugin(file_in(JXO_TEST_GOOD_DIR, "good.so"));
  REQUIRE(p.primitives.size() == 3);
  REQUIRE(p.primitives[0].tests.size() == 1);
  const TestEqn& identity = p.primitives[0].tests[0];
  REQUIRE(identity.inputs.size() == 1);
  CHECK(identity.inputs[0].str() == "float32[2,3]");
  CHECK(identity.outputs.empty());  // the abstract eval gives them
  REQUIRE(p.primitives[1].tests.size() == 1);
  const TestEqn& scale = p.primitives[1].tests[0];
  CHECK(scale.inputs[0].str() == "float64[B,4]");
  REQUIRE(scale.outputs.size() == 1);
  CHECK(scale.outputs[0].str() == "float64[B,4]");
  // A plugin of an older minor has none (its struct ends before the fields).
  const LoadedPlugin& old = load_plugin(file_in(JXO_TEST_ABI_1_0_DIR, "abi_1_0.so"));
  for (const PrimitiveInfo& prim : old.primitives) CHECK(prim.tests.empty());
}

TEST_CASE("the preflight runs each test equation and reports its steps and errors") {
  std::vector<std::string> steps;
  auto record = [&](const std::string& what, const std::string& prim, const std::string& eqn) {
    steps.push_back(what + (prim.empty() ? "" : " " + prim) + (eqn.empty() ? "" : " " + eqn));
  };
  PreflightReport good = preflight(file_in(JXO_TEST_GOOD_DIR, "good.so"), record);
  CHECK(good.load_error.empty());
  CHECK(good.name == "test_good");
  REQUIRE(good.primitives.size() == 3);
  REQUIRE(good.primitives[0].tests.size() == 1);
  CHECK(good.primitives[0].tests[0].eqn == "float32[2,3] -> float32[2,3]");
  CHECK(good.primitives[0].tests[0].error == "");
  CHECK(good.primitives[1].tests[0].eqn == "float64[B,4] -> float64[B,4]");
  CHECK(good.primitives[1].tests[0].error == "");
  // The load steps come only when this process had not loaded good.so yet.
  steps.erase(std::remove_if(steps.begin(), steps.end(),
                             [](const std::string& s) {
                               return s == "dlopen" || s == "init" || s == "describe";
                             }),
              steps.end());
  CHECK(steps == std::vector<std::string>{
                     "abstract_eval test.identity float32[2,3] -> ?",
                     "lower test.identity float32[2,3] -> float32[2,3]",
                     "rules test.identity float32[2,3] -> float32[2,3]",
                     "abstract_eval test.scale float64[B,4] -> float64[B,4]",
                     "lower test.scale float64[B,4] -> float64[B,4]",
                     "rules test.scale float64[B,4] -> float64[B,4]"});

  steps.clear();
  PreflightReport declining = preflight(file_in(JXO_TEST_DECLINING_DIR, "declining.so"), record);
  REQUIRE(steps.size() >= 3);
  CHECK(steps[0] == "dlopen");
  CHECK(steps[1] == "init");
  CHECK(steps[2] == "describe");
  REQUIRE(declining.primitives.size() == 2);
  CHECK(declining.primitives[0].tests[0].error == "");
  CHECK(contains(declining.primitives[1].tests[0].error, "declining on purpose"));
  CHECK(contains(declining.primitives[1].tests[0].error, "test.declines"));

  PreflightReport garbage = preflight(file_in(JXO_TEST_GARBAGE_DIR, "garbage.so"), record);
  CHECK(contains(garbage.load_error, "dlerror"));
  CHECK(garbage.primitives.empty());
}

TEST_CASE("a scan's gate sees the files the host's own checks pass, once, and can refuse them") {
  std::vector<std::string> asked;
  int calls = 0;
  Registry reg = Registry::scan(
      {JXO_TEST_GARBAGE_DIR, JXO_TEST_GOOD_DIR}, {}, false,
      [&](const std::vector<std::string>& files) {
        ++calls;
        asked = files;
        std::vector<std::string> reasons;
        for (const std::string& f : files)
          reasons.push_back(contains(f, "good.so") ? "refused by the gate" : "");
        return reasons;
      });
  CHECK(calls == 1);
  // truncated.so is refused by the host before the gate (its ELF segments
  // end past the file); garbage.so (not ELF) is left to dlopen, after the gate.
  REQUIRE(asked.size() == 2);
  CHECK(contains(asked[0], "garbage.so"));
  CHECK(contains(asked[1], "good.so"));
  const Diagnostic* good = diagnostic_for(reg, "good.so");
  REQUIRE(good != nullptr);
  CHECK(good->reason == "refused by the gate");
  CHECK(reg.find("test.identity") == nullptr);
  CHECK(contains(diagnostic_for(reg, "truncated.so")->reason, "truncated?"));
  CHECK(contains(diagnostic_for(reg, "garbage.so")->reason, "dlerror"));
}
