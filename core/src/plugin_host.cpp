// Discovery, loading and ABI negotiation of plugins.
#include "jaxonnx/core/plugin_host.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <mutex>

#if defined(__linux__)
#include <elf.h>
#endif

#include <boost/dll/shared_library.hpp>
#include <boost/filesystem.hpp>

#include "jaxonnx/core/error.hpp"

namespace fs = boost::filesystem;

namespace jaxonnx {
namespace {

std::string str(jxo_str s) { return s.size ? std::string(s.data, s.size) : std::string(); }

// Copies what the host keeps from a plugin's descriptor, validating as it goes.
LoadedPlugin describe(const std::string& path, const jxo_plugin_desc* d) {
  if (d->struct_size < offsetof(jxo_plugin_desc, num_primitives) + sizeof(size_t))
    throw PluginLoadError("its descriptor is truncated (struct_size " +
                          std::to_string(d->struct_size) + ")");
  LoadedPlugin p;
  p.path = path;
  p.abi_major = d->abi_major;
  p.abi_minor = d->abi_minor;
  p.name = str(d->name);
  p.version = str(d->version);
  p.sdk_version = str(d->sdk_version);
  if (d->abi_major != JXO_ABI_MAJOR)
    throw PluginLoadError("it was built for jaxonnx ABI " + std::to_string(d->abi_major) + "." +
                          std::to_string(d->abi_minor) + "; this host speaks ABI major " +
                          std::to_string(JXO_ABI_MAJOR));
  if (d->abi_minor > JXO_ABI_MINOR)
    throw PluginLoadError("plugin '" + p.name + "' needs jaxonnx ABI 1." +
                          std::to_string(d->abi_minor) + "; this host serves ABI 1.0 to 1." +
                          std::to_string(JXO_ABI_MINOR) + " (upgrade jaxonnx)");
  if (p.name.empty()) throw PluginLoadError("its descriptor has no name");
  for (size_t i = 0; i < d->num_primitives; ++i) {
    const jxo_primitive_desc* pd = d->primitives[i];
    if (!pd || pd->struct_size < offsetof(jxo_primitive_desc, user_data) + sizeof(void*))
      throw PluginLoadError("primitive #" + std::to_string(i) + " has a truncated descriptor");
    PrimitiveInfo info;
    info.name = str(pd->name);
    info.lower = pd->lower;
    info.abstract_eval = pd->abstract_eval;
    info.user_data = pd->user_data;
    if (info.name.empty() || !info.lower)
      throw PluginLoadError("primitive #" + std::to_string(i) + " has no name or no lowering");
    if (JXO_HAS_FIELD(pd, jxo_primitive_desc, num_onnx_ops))
      for (size_t k = 0; k < pd->num_onnx_ops; ++k) info.onnx_ops.push_back(str(pd->onnx_ops[k]));
    if (JXO_HAS_FIELD(pd, jxo_primitive_desc, doc_url)) info.doc_url = str(pd->doc_url);
    if (JXO_HAS_FIELD(pd, jxo_primitive_desc, summary)) info.summary = str(pd->summary);
    p.primitives.push_back(std::move(info));
  }
  if (JXO_HAS_FIELD(d, jxo_plugin_desc, num_rules))  // ABI 1.2: rewrite rules
    for (size_t i = 0; i < d->num_rules; ++i) {
      const jxo_rule_desc* rd = d->rules[i];
      if (!rd || rd->struct_size < offsetof(jxo_rule_desc, user_data) + sizeof(void*))
        throw PluginLoadError("rewrite rule #" + std::to_string(i) + " has a truncated descriptor");
      RuleInfo rule;
      rule.name = str(rd->name);
      rule.root_op = str(rd->root_op);
      rule.rewrite = rd->rewrite;
      rule.user_data = rd->user_data;
      if (rule.name.empty() || rule.root_op.empty() || !rule.rewrite)
        throw PluginLoadError("rewrite rule #" + std::to_string(i) +
                              " has no name, root op or callback");
      if (JXO_HAS_FIELD(rd, jxo_rule_desc, min_opset)) rule.min_opset = rd->min_opset;
      if (JXO_HAS_FIELD(rd, jxo_rule_desc, num_onnx_ops))
        for (size_t k = 0; k < rd->num_onnx_ops; ++k) rule.onnx_ops.push_back(str(rd->onnx_ops[k]));
      if (JXO_HAS_FIELD(rd, jxo_rule_desc, summary)) rule.summary = str(rd->summary);
      p.rules.push_back(std::move(rule));
    }
  return p;
}

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

#if defined(__linux__)
// dlopen maps an ELF file's segments without checking that they lie inside the
// file, and touching a page past the end raises SIGBUS: a truncated plugin
// (an interrupted copy) would kill the process. Refuse such files up front;
// anything that is not ELF is left to dlopen, whose message is better.
template <typename Ehdr, typename Phdr>
std::string elf_truncation(std::ifstream& f, uint64_t size) {
  Ehdr eh{};
  f.seekg(0);
  if (!f.read(reinterpret_cast<char*>(&eh), sizeof eh)) return "";  // dlopen: "file too short"
  if (eh.e_phentsize != sizeof(Phdr)) return "";
  uint64_t end = uint64_t(eh.e_phoff) + uint64_t(eh.e_phnum) * sizeof(Phdr);
  if (end > size)
    return "its ELF program headers end at byte " + std::to_string(end) + " but the file has " +
           std::to_string(size) + " bytes (truncated?)";
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    Phdr ph{};
    f.seekg(static_cast<std::streamoff>(eh.e_phoff + uint64_t(i) * sizeof(Phdr)));
    if (!f.read(reinterpret_cast<char*>(&ph), sizeof ph)) return "";
    uint64_t seg_end = uint64_t(ph.p_offset) + uint64_t(ph.p_filesz);
    if (ph.p_type == PT_LOAD && seg_end > size)
      return "an ELF segment ends at byte " + std::to_string(seg_end) + " but the file has " +
             std::to_string(size) + " bytes (truncated?)";
  }
  return "";
}

std::string truncated_elf_reason(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  unsigned char ident[EI_NIDENT] = {};
  if (!f || !f.read(reinterpret_cast<char*>(ident), EI_NIDENT)) return "";
  if (std::memcmp(ident, ELFMAG, SELFMAG) != 0) return "";
  f.seekg(0, std::ios::end);
  uint64_t size = static_cast<uint64_t>(f.tellg());
  if (ident[EI_CLASS] == ELFCLASS64) return elf_truncation<Elf64_Ehdr, Elf64_Phdr>(f, size);
  if (ident[EI_CLASS] == ELFCLASS32) return elf_truncation<Elf32_Ehdr, Elf32_Phdr>(f, size);
  return "";
}
#else
std::string truncated_elf_reason(const std::string&) { return ""; }
#endif

std::mutex& host_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

std::string LoadedPlugin::label() const { return "'" + name + "' " + version + " (" + path + ")"; }

bool is_plugin_file_name(const std::string& filename) {
  fs::path p(filename);
  std::string ext = p.extension().string();
#if defined(_WIN32)
  return ext == ".dll";
#elif defined(__APPLE__)
  return ext == ".dylib" || ext == ".so";
#else
  return ext == ".so";
#endif
}

const LoadedPlugin& load_plugin(const std::string& path_in) {
  std::lock_guard<std::mutex> lock(host_mutex());
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
    if (std::string why = truncated_elf_reason(path); !why.empty())
      throw PluginLoadError("it could not be loaded: " + path + ": " + why);
    auto* lib = new boost::dll::shared_library();
    try {
      lib->load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    } catch (const std::exception& e) {
      delete lib;
      throw PluginLoadError(std::string("it could not be loaded: ") + e.what());
    }
    if (!lib->has(JXO_ENTRY_SYMBOL)) {
      std::string why = missing_entry_reason(*lib);
      delete lib;  // nothing of it was called: safe to unload
      throw PluginLoadError(why);
    }
    auto init = lib->get<const jxo_plugin_desc*(const jxo_host*, jxo_str*)>(JXO_ENTRY_SYMBOL);
    jxo_str err{nullptr, 0};
    const jxo_plugin_desc* desc = init(host_info(), &err);
    if (!desc)
      throw PluginLoadError("its " + std::string(JXO_ENTRY_SYMBOL) + " failed: " +
                            (err.size ? str(err) : std::string("(no message)")));
    auto* plugin = new LoadedPlugin(describe(path, desc));
    for (PrimitiveInfo& prim : plugin->primitives) prim.plugin = plugin;
    for (RuleInfo& rule : plugin->rules) rule.plugin = plugin;
    (*loaded)[path] = plugin;
    return *plugin;
  } catch (const PluginLoadError& e) {
    (*failed)[path] = e.what();
    throw;
  }
}

const PrimitiveInfo* Registry::find(const std::string& primitive) const {
  auto it = by_name_.find(primitive);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<const RuleInfo*> Registry::rules() const {
  std::vector<const RuleInfo*> out;
  for (const LoadedPlugin* p : plugins_)
    for (const RuleInfo& r : p->rules) out.push_back(&r);
  return out;
}

void Registry::add(const LoadedPlugin& plugin) {
  for (const LoadedPlugin* p : plugins_)
    if (p == &plugin) return;  // the same file reached through two folders
  for (const PrimitiveInfo& prim : plugin.primitives) {
    auto [it, fresh] = by_name_.emplace(prim.name, &prim);
    if (!fresh)
      throw ConversionError("primitive '" + prim.name + "' is claimed by two plugins: " +
                            it->second->plugin->label() + " and " + plugin.label() +
                            ". Remove one of them from the plugin folders.");
  }
  plugins_.push_back(&plugin);
}

Registry Registry::scan(const std::vector<std::string>& dirs) {
  Registry reg;
  reg.dirs_ = dirs;
  for (const std::string& dir : dirs) {
    boost::system::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      reg.diagnostics_.push_back({dir, "not a folder"});
      continue;
    }
    std::vector<std::string> files;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (is_plugin_file_name(it->path().filename().string())) files.push_back(it->path().string());
    std::sort(files.begin(), files.end());  // deterministic order, whatever the file system says
    for (const std::string& f : files) {
      try {
        reg.add(load_plugin(f));
      } catch (const PluginLoadError& e) {
        reg.diagnostics_.push_back({f, e.what()});
      }
    }
  }
  return reg;
}

}  // namespace jaxonnx
