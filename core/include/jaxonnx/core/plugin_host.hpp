// The plugin host: finds plugin files, loads them through Boost.DLL,
// negotiates the ABI, and builds a registry keyed by primitive name.
#pragma once

#include <map>
#include <stdexcept>
#include <memory>
#include <string>
#include <vector>

#include "jaxonnx/plugin_abi.h"

namespace jaxonnx {

struct LoadedPlugin;

// One primitive a plugin claims.
struct PrimitiveInfo {
  std::string name;
  jxo_lower_fn lower = nullptr;
  jxo_abstract_eval_fn abstract_eval = nullptr;
  void* user_data = nullptr;
  std::vector<std::string> onnx_ops;
  std::string doc_url, summary;
  const LoadedPlugin* plugin = nullptr;
};

// One rewrite rule a plugin contributes (ABI 1.2), run by the fuse pass.
struct RuleInfo {
  std::string name, root_op, summary;
  jxo_rewrite_fn rewrite = nullptr;
  void* user_data = nullptr;
  int64_t min_opset = 0;
  std::vector<std::string> onnx_ops;
  const LoadedPlugin* plugin = nullptr;
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

// The primitives of a set of plugins, as seen from one list of folders.
class Registry {
 public:
  const PrimitiveInfo* find(const std::string& primitive) const;
  const std::vector<const LoadedPlugin*>& plugins() const { return plugins_; }
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
  const std::vector<std::string>& dirs() const { return dirs_; }
  // Every plugin's rewrite rules, in plugin order, then declaration order.
  std::vector<const RuleInfo*> rules() const;

  // Scans `dirs` in order and loads every plugin file found there. A file
  // that is not a valid plugin becomes a diagnostic; a primitive claimed by
  // two plugins throws ConversionError naming both.
  static Registry scan(const std::vector<std::string>& dirs);
  // Registers one already-loaded plugin (used by scan and by tests).
  void add(const LoadedPlugin& plugin);

 private:
  std::map<std::string, const PrimitiveInfo*> by_name_;
  std::vector<const LoadedPlugin*> plugins_;
  std::vector<Diagnostic> diagnostics_;
  std::vector<std::string> dirs_;
};

// Loads one plugin file (once per process per canonical path). Throws
// PluginLoadError with the reason (dlerror's text, a missing entry symbol, an
// ABI mismatch, a failed init).
struct PluginLoadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
const LoadedPlugin& load_plugin(const std::string& path);

// True for file names that look like shared objects on this platform.
bool is_plugin_file_name(const std::string& filename);

// The table the host serves to plugins, and the host's ABI identity.
const jxo_api* host_api();
const jxo_host* host_info();

}  // namespace jaxonnx
