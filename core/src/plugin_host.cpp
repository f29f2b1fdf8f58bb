// Loading a plugin: the file checked (plugin_file.hpp), dlopen, the versioned
// entry point called, its descriptor read (plugin_descriptor.hpp); each
// library loaded once per process and never unloaded (ABI rule 7).
#include "jaxonnx/core/plugin_host.hpp"

#include <map>
#include <mutex>

#include <boost/dll/shared_library.hpp>
#include <boost/filesystem.hpp>

#include "jaxonnx/core/error.hpp"
#include "plugin_descriptor.hpp"
#include "plugin_file.hpp"
#include "plugin_load.hpp"
#include "utf8.hpp"

namespace fs = boost::filesystem;

namespace jaxonnx {
namespace {

std::string str(jxo_str s) { return s.size && s.data ? std::string(s.data, s.size) : std::string(); }

// Finds why a library has no v1 entry: a plugin for another ABI major says so.
std::string missing_entry_reason(const boost::dll::shared_library& lib) {
  for (int major = 2; major <= 9; ++major) {
    std::string other = "jaxonnx_plugin_init_v" + std::to_string(major);
    if (lib.has(other))
      return "it was built for jaxonnx ABI major " + std::to_string(major) + " (exports " +
             other + "); this host speaks ABI major " + std::to_string(JXO_ABI_MAJOR);
  }
  return std::string("it exports no ") + JXO_ENTRY_SYMBOL + " (not a jaxonnx plugin)";
}

// dlerror's own text from Boost.DLL's message, which wraps it as
// "boost::dll::shared_library::load() failed (dlerror system message: TEXT): "
// followed by an unrelated errno string ("Bad file descriptor").
std::string dlerror_text(const std::string& what) {
  const std::string tag = "dlerror system message: ";
  size_t at = what.find(tag);
  if (at == std::string::npos) return what;
  at += tag.size();
  size_t end = what.rfind("): ");
  if (end == std::string::npos || end < at) end = what.rfind(')');
  if (end == std::string::npos || end < at) return what.substr(at);
  return what.substr(at, end - at);
}

std::mutex& host_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

std::string LoadedPlugin::label() const { return "'" + name + "' " + version + " (" + path + ")"; }

const LoadedPlugin& load_plugin(const std::string& path) { return load_plugin_file(path, {}, true); }

const LoadedPlugin& load_plugin(const std::string& path, const LoadStep& step) {
  return load_plugin_file(path, step, true);
}

const LoadedPlugin& load_plugin_file(const std::string& path_in, const LoadStep& step, bool check_file) {
  std::lock_guard<std::mutex> lock(host_mutex());
  auto say = [&](const char* what) {
    if (step) step(what);
  };
  // Loaded plugins and their libraries live until the process exits: the
  // host never unloads (ABI rule 7), so these are intentionally never freed.
  static auto* loaded = new std::map<std::string, LoadedPlugin*>();
  static auto* failed = new std::map<std::string, std::string>();

  boost::system::error_code ec;
  fs::path canon = fs::canonical(path_in, ec);
  std::string path = ec ? path_in : canon.string();
  if (auto it = loaded->find(path); it != loaded->end()) return *it->second;
  if (auto it = failed->find(path); it != failed->end()) throw PluginLoadError(it->second);

  try {
    if (check_file)
      if (std::string why = file_problem(path); !why.empty()) throw PluginLoadError(why);
    auto* lib = new boost::dll::shared_library();
    say("dlopen");
    try {
      lib->load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    } catch (const std::exception& e) {
      delete lib;
      throw PluginLoadError("it could not be loaded (dlerror: " + printable(dlerror_text(e.what())) + ")");
    }
    if (!lib->has(JXO_ENTRY_SYMBOL)) {
      std::string why = missing_entry_reason(*lib);
      delete lib;  // nothing of it was called: safe to unload
      throw PluginLoadError(why);
    }
    auto init = lib->get<const jxo_plugin_desc*(const jxo_host*, jxo_str*)>(JXO_ENTRY_SYMBOL);
    jxo_str err{nullptr, 0};
    const jxo_plugin_desc* desc = nullptr;
    // The entry point is C, but a C++ plugin may still let an exception out.
    say("init");
    try {
      desc = init(host_info(), &err);
    } catch (const std::exception& e) {
      throw PluginLoadError("its " + std::string(JXO_ENTRY_SYMBOL) + " threw: " +
                            printable(e.what()));
    } catch (...) {
      throw PluginLoadError("its " + std::string(JXO_ENTRY_SYMBOL) + " threw a non-standard exception");
    }
    if (!desc)
      throw PluginLoadError("its " + std::string(JXO_ENTRY_SYMBOL) + " failed: " +
                            (err.size && err.data ? printable(str(err)) : std::string("(no message)")));
    say("describe");
    auto* plugin = new LoadedPlugin(describe_plugin(path, desc));
    for (PrimitiveInfo& prim : plugin->primitives) prim.plugin = plugin;
    for (RuleInfo& rule : plugin->rules) rule.plugin = plugin;
    (*loaded)[path] = plugin;
    return *plugin;
  } catch (const PluginLoadError& e) {
    (*failed)[path] = e.what();
    throw;
  }
}

}  // namespace jaxonnx
