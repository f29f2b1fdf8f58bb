// The registry: which loaded plugin lowers each primitive (a second claim is
// an error unless an override chooses), the rules they contribute, and the
// scan of plugin folders that fills it, with a diagnostic for each file or
// folder it passed over.
#include <algorithm>

#include <boost/filesystem.hpp>

#include "jaxonnx/core/error.hpp"
#include "jaxonnx/core/plugin_host.hpp"
#include "plugin_file.hpp"
#include "plugin_load.hpp"
#include "utf8.hpp"

namespace fs = boost::filesystem;

namespace jaxonnx {

const PrimitiveInfo* Registry::find(const std::string& primitive) const {
  auto it = by_name_.find(primitive);
  return it == by_name_.end() ? nullptr : it->second;
}

namespace {
bool names_plugin(const std::string& choice, const LoadedPlugin& p) {
  return choice == p.name || choice == p.path;
}
}  // namespace

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
    if (fresh) continue;
    auto c = std::find_if(conflicts_.begin(), conflicts_.end(),
                          [&](const Conflict& k) { return k.primitive == prim.name; });
    if (c == conflicts_.end()) {
      conflicts_.push_back({prim.name, {it->second->plugin}, nullptr});
      c = conflicts_.end() - 1;
    }
    c->claimants.push_back(&plugin);
    // The override is checked once every plugin is in (resolve_overrides).
    if (overrides_.count(prim.name)) continue;
    if (!keep_conflicts_)
      throw ConversionError("primitive '" + prim.name + "' is claimed by two plugins: " +
                            it->second->plugin->label() + " and " + plugin.label() +
                            ". Remove one of them from the plugin folders, or choose one with "
                            "plugin_overrides={'" + prim.name + "': '" + plugin.name +
                            "'} (or $JAXONNX_PLUGIN_OVERRIDES=" + prim.name + "=" + plugin.name +
                            ").");
  }
  plugins_.push_back(&plugin);
}

void Registry::resolve_overrides() {
  for (Conflict& c : conflicts_)
    if (!overrides_.count(c.primitive)) by_name_.erase(c.primitive);  // kept, unresolved
  for (const auto& [primitive, choice] : overrides_) {
    std::vector<const LoadedPlugin*> claimants;
    for (const LoadedPlugin* p : plugins_)
      for (const PrimitiveInfo& prim : p->primitives)
        if (prim.name == primitive) claimants.push_back(p);
    const PrimitiveInfo* chosen = nullptr;
    for (const LoadedPlugin* p : claimants)
      if (names_plugin(choice, *p))
        for (const PrimitiveInfo& prim : p->primitives)
          if (prim.name == primitive) chosen = &prim;
    if (!chosen) {
      std::string who;
      for (const LoadedPlugin* p : claimants) who += (who.empty() ? "" : ", ") + p->label();
      throw ConversionError("plugin override " + primitive + "=" + choice + ": no loaded plugin " +
                            "named '" + choice + "' claims '" + primitive + "'" +
                            (who.empty() ? std::string(" (no loaded plugin claims it)")
                                         : "; it is claimed by " + who));
    }
    by_name_[primitive] = chosen;
    for (Conflict& c : conflicts_)
      if (c.primitive == primitive) c.winner = chosen->plugin;
  }
}

Registry Registry::scan(const std::vector<std::string>& dirs, const Overrides& overrides,
                        bool keep_conflicts, const Gate& gate) {
  Registry reg;
  // What the folders hold, in scan order: a file to load, or a diagnostic
  // (a folder or file refused before any of its code could run).
  struct Item {
    std::string path;
    std::string problem;
    bool file = false;
  };
  std::vector<Item> items;
  reg.overrides_ = overrides;
  reg.keep_conflicts_ = keep_conflicts;
  for (const std::string& given : dirs) {
    // A relative folder is resolved once, here, against the current folder:
    // the files found and the folder reported are the same ones.
    boost::system::error_code ec;
    fs::path abs = fs::absolute(fs::path(given), ec);
    std::string dir = ec ? given : fs::path(abs).lexically_normal().string();
    if (!dir.empty() && dir.size() > 1 && dir.back() == '/') dir.pop_back();
    reg.dirs_.push_back(printable(dir));
    if (!is_utf8(dir)) {
      items.push_back({printable(dir), "the folder's name is not UTF-8; not searched"});
      continue;
    }
    if (!fs::is_directory(dir, ec)) {
      items.push_back({dir, "not a folder"});
      continue;
    }
#if !defined(_WIN32)
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0) {
      if (std::string why = untrusted_reason(st, "folder"); !why.empty()) {
        items.push_back({dir, why});
        continue;
      }
    }
#endif
    std::vector<std::string> files;
    fs::directory_iterator it(dir, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (!is_plugin_file_name(name)) continue;
      if (!is_utf8(name)) {
        items.push_back({printable(it->path().string()), "its name is not UTF-8"});
        continue;
      }
      files.push_back(it->path().string());
    }
    if (ec) {
      items.push_back({dir, "the folder cannot be read (" + ec.message() + ")" +
                                (files.empty() ? "" : "; searched in part")});
    }
    std::sort(files.begin(), files.end());  // deterministic order, whatever the file system says
    for (const std::string& f : files) items.push_back({f, gate ? file_problem(f) : "", true});
  }
  if (gate) {  // one call, so that the gate can check the files it has not seen at once
    std::vector<size_t> asked;
    std::vector<std::string> files;
    for (size_t i = 0; i < items.size(); ++i)
      if (items[i].file && items[i].problem.empty()) {
        asked.push_back(i);
        files.push_back(items[i].path);
      }
    if (!files.empty()) {
      std::vector<std::string> reasons = gate(files);
      if (reasons.size() != files.size())
        throw ConversionError("internal error: the plugin gate gave " +
                              std::to_string(reasons.size()) + " answers for " +
                              std::to_string(files.size()) + " files");
      for (size_t k = 0; k < asked.size(); ++k) items[asked[k]].problem = reasons[k];
    }
  }
  for (const Item& item : items) {
    if (!item.problem.empty()) {
      reg.diagnostics_.push_back({item.path, item.problem});
      continue;
    }
    try {
      reg.add(load_plugin_file(item.path, {}, !gate));  // with a gate, file_problem ran above
    } catch (const PluginLoadError& e) {
      reg.diagnostics_.push_back({item.path, e.what()});
    }
  }
  reg.resolve_overrides();
  return reg;
}

}  // namespace jaxonnx
