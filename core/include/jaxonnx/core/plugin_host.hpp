// The plugin host: finds plugin files, loads them through Boost.DLL,
// negotiates the ABI, and builds a registry keyed by primitive name.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <stdexcept>
#include <memory>
#include <string>
#include <vector>

#include "jaxonnx/core/types.hpp"
#include "jaxonnx/plugin_abi.h"

namespace jaxonnx {

struct LoadedPlugin;

// A binding spec (ABI 1.2): a Python callable that binds a primitive while
// tracing. The host only keeps it for the Python side; see jxo_binding.
struct BindingSpec {
  std::string target;
  std::vector<std::string> operands, params, when;
  uint64_t leading_dims_operands = 0;
  int32_t numerics = JXO_NUMERICS_UNDECLARED;  // ABI 1.5; see jxo_binding
  std::string numerics_note;
};

// A test equation (ABI 1.4): its input avals and its output avals (empty:
// the abstract eval gives them). No params.
struct TestEqn {
  std::vector<Aval> inputs, outputs;
};

// One primitive a plugin claims.
struct PrimitiveInfo {
  std::string name;
  jxo_lower_fn lower = nullptr;
  jxo_abstract_eval_fn abstract_eval = nullptr;
  void* user_data = nullptr;
  std::vector<std::string> onnx_ops;
  std::string doc_url, summary;
  std::vector<BindingSpec> bindings;
  // The test equations (ABI 1.4) the preflight runs.
  std::vector<TestEqn> tests;
  const LoadedPlugin* plugin = nullptr;
};

// One rewrite rule a plugin contributes (ABI 1.2), run by the fuse pass.
struct RuleInfo {
  std::string name, root_op, summary;
  jxo_rewrite_fn rewrite = nullptr;
  void* user_data = nullptr;
  int64_t min_opset = 0;
  int32_t numerics = JXO_NUMERICS_UNDECLARED;  // ABI 1.5; see jxo_rule_desc
  std::string numerics_note;
  std::vector<std::string> onnx_ops;
  const LoadedPlugin* plugin = nullptr;
  // Rewrites the fuse pass has made with this rule in this process (not the
  // guarantee check's trials): tests see which rules a program exercised.
  std::shared_ptr<std::atomic<uint64_t>> applied = std::make_shared<std::atomic<uint64_t>>(0);
};

// A plugin that loaded and negotiated. Lives for the process.
struct LoadedPlugin {
  std::string path;  // canonical
  std::string name, version, sdk_version;
  uint32_t abi_major = 0, abi_minor = 0;
  std::vector<PrimitiveInfo> primitives;
  std::vector<RuleInfo> rules;

  std::string label() const;  // "'name' 1.2.3 (path)"
};

// A file that was skipped, and why.
struct Diagnostic {
  std::string path, reason;
};

// A primitive claimed by more than one plugin, and which one won (null: none
// chosen, so the registry refuses it).
struct Conflict {
  std::string primitive;
  std::vector<const LoadedPlugin*> claimants;  // in scan order
  const LoadedPlugin* winner = nullptr;
};

// The user's choice of plugin per primitive: primitive -> plugin name (or file path).
using Overrides = std::map<std::string, std::string>;

// The primitives of a set of plugins, as seen from one list of folders.
class Registry {
 public:
  const PrimitiveInfo* find(const std::string& primitive) const;
  const std::vector<const LoadedPlugin*>& plugins() const { return plugins_; }
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
  const std::vector<std::string>& dirs() const { return dirs_; }
  const std::vector<Conflict>& conflicts() const { return conflicts_; }
  // Every plugin's rewrite rules, in plugin order, then declaration order.
  std::vector<const RuleInfo*> rules() const;

  // Decides, before anything of them runs in this process, which of the
  // plugin files a scan found may be loaded: one reason per file, "" to load
  // it (the Python side checks bundled files against their manifest and
  // preflights the others in a child process). Called once per scan, with
  // the files that passed the host's own checks (regular, trusted, whole ELF).
  using Gate = std::function<std::vector<std::string>(const std::vector<std::string>& files)>;

  // Scans `dirs` in order and loads every plugin file found there (that
  // `gate`, when given, admits). A file
  // that is not a valid plugin becomes a diagnostic; a primitive claimed by
  // two plugins throws ConversionError naming both, unless `overrides` names
  // the winner (which may replace a bundled plugin's lowering). With
  // keep_conflicts an unresolved claim is recorded in conflicts() instead
  // (the primitive then has no entry), for listing tools. An override naming a
  // plugin that does not claim the primitive is an error either way.
  static Registry scan(const std::vector<std::string>& dirs, const Overrides& overrides = {},
                       bool keep_conflicts = false, const Gate& gate = {});
  // Registers one already-loaded plugin (used by scan and by tests).
  void add(const LoadedPlugin& plugin);

 private:
  std::map<std::string, const PrimitiveInfo*> by_name_;
  std::vector<const LoadedPlugin*> plugins_;
  std::vector<Diagnostic> diagnostics_;
  std::vector<std::string> dirs_;
  std::vector<Conflict> conflicts_;
  Overrides overrides_;
  bool keep_conflicts_ = false;

  void resolve_overrides();
};

// Loads one plugin file (once per process per canonical path). Throws
// PluginLoadError with the reason (dlerror's text, a missing entry symbol, an
// ABI mismatch, a failed init).
struct PluginLoadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
const LoadedPlugin& load_plugin(const std::string& path);
// The same, telling `step` what it is about to do ("dlopen", "init",
// "describe") before each step that runs or reads the plugin's code; the
// preflight's child reports these so a crash can be placed.
using LoadStep = std::function<void(const char* step)>;
const LoadedPlugin& load_plugin(const std::string& path, const LoadStep& step);

// Why the host refuses to dlopen `path` without running any of it, or "": it
// is not a regular file, not trusted (world-writable, another user's), or a
// truncated or foreign ELF file.
std::string plugin_file_problem(const std::string& path);

// True for file names that look like shared objects on this platform.
bool is_plugin_file_name(const std::string& filename);

// The table the host serves to plugins, and the host's ABI identity.
const jxo_api* host_api();
const jxo_host* host_info();

}  // namespace jaxonnx
