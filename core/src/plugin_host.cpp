// Discovery, loading and ABI negotiation of plugins.
#include "jaxonnx/core/plugin_host.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>

#if defined(__linux__)
#include <elf.h>
#endif
#if !defined(_WIN32)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#include <boost/dll/shared_library.hpp>
#include <boost/filesystem.hpp>

#include "abi_read.hpp"
#include "jaxonnx/core/error.hpp"

namespace fs = boost::filesystem;

namespace jaxonnx {
namespace {

std::string str(jxo_str s) { return s.size && s.data ? std::string(s.data, s.size) : std::string(); }

// Whether `s` is valid UTF-8 as Python decodes it (no overlong forms, no
// surrogates, nothing past U+10FFFF): plugin names and paths reach Python.
bool is_utf8(const std::string& s) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  for (size_t i = 0; i < s.size();) {
    unsigned char c = byte(i);
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c < 0x80) n = 0;
    else if (c >= 0xC2 && c <= 0xDF) n = 1;
    else if (c >= 0xE0 && c <= 0xEF) n = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) n = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return false;
    if (n && i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      unsigned char b = byte(i + k);
      if (k == 1 ? (b < lo || b > hi) : (b >> 6) != 0x2) return false;
    }
    i += n + 1;
  }
  return true;
}

// `s` with every byte that is not part of valid UTF-8 written as \xNN, for
// messages about file names that are not UTF-8.
std::string printable(const std::string& s) {
  if (is_utf8(s)) return s;
  std::string out;
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      out += ch;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// A string a plugin hands over in its descriptor: a NULL pointer with a
// nonzero size, or bytes that are not UTF-8, make the plugin invalid.
std::string checked_str(jxo_str s, const std::string& what) {
  if (s.size && !s.data) throw PluginLoadError(what + " is a NULL pointer with size " +
                                               std::to_string(s.size));
  std::string out = str(s);
  if (!is_utf8(out)) throw PluginLoadError(what + " is not UTF-8");
  return out;
}

// A descriptor struct through the host's one reader (abi_read.hpp), which
// copies it to its struct_size; a struct too small to be any minor's is invalid.
template <typename T>
T read_desc(const T* p, const std::string& what) {
  try {
    return abi::read_struct(p, what);
  } catch (const InvalidArgument& e) {
    throw PluginLoadError(std::string(e.what()) + " (truncated descriptor)");
  }
}

std::vector<std::string> strs(const jxo_str* v, size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back(str(v[i]));
  return out;
}

// A declared numerics (ABI 1.5), checked: a value this host does not know is
// an error (a newer plugin would have been refused by its minor).
int32_t numerics(int32_t v, const std::string& where) {
  if (v != JXO_NUMERICS_UNDECLARED && v != JXO_NUMERICS_FINITE && v != JXO_NUMERICS_EXACT)
    throw PluginLoadError(where + " declares numerics " + std::to_string(v) +
                          ", which is not a JXO_NUMERICS_* value");
  return v;
}

// A binding spec's copy; `where` names it in errors.
BindingSpec binding(const jxo_binding* bp, const std::string& where) {
  const jxo_binding bc = read_desc(bp, where + "'s binding spec");
  const jxo_binding* b = &bc;
  BindingSpec spec;
  spec.target = str(b->target);
  spec.operands = strs(b->operands, b->num_operands);
  spec.params = strs(b->params, b->num_params);
  spec.when = strs(b->when, b->num_when);
  spec.leading_dims_operands = b->leading_dims_operands;
  spec.numerics = numerics(b->numerics, where + "'s binding spec for " + spec.target);
  spec.numerics_note = str(b->numerics_note);
  if (spec.target.find('.') == std::string::npos)
    throw PluginLoadError(where + " has a binding spec whose target '" + spec.target +
                          "' is not a dotted path (module.attribute)");
  for (const std::string& p : spec.params)
    if (p.find('=') == std::string::npos)
      throw PluginLoadError(where + " has a binding param '" + p + "' that is not name=expression");
  return spec;
}

// A primitive's test equation #k (ABI 1.4); `where` names the primitive in errors.
TestEqn test_eqn(const jxo_test_eqn* tp, const std::string& where, size_t k,
                 const PrimitiveInfo& info) {
  const std::string what = where + "'s test equation #" + std::to_string(k);
  const jxo_test_eqn t = read_desc(tp, what);
  auto avals = [&](const jxo_aval* const* v, size_t n, const char* kind) {
    if (n && !v) throw PluginLoadError(what + " lists " + kind + "s but no table");
    std::vector<Aval> out;
    for (size_t i = 0; i < n; ++i) {
      std::string name = what + "'s " + kind + " #" + std::to_string(i);
      try {
        out.push_back(abi::read_aval(v[i], name));
      } catch (const InvalidArgument& e) {
        throw PluginLoadError(e.what());
      }
      if (!out.back().known_rank || out.back().dtype == JXO_DTYPE_UNDEFINED)
        throw PluginLoadError(name + " needs a dtype and a rank");
    }
    return out;
  };
  TestEqn eqn{avals(t.inputs, t.num_inputs, "input"), avals(t.outputs, t.num_outputs, "output")};
  if (eqn.outputs.empty() && !info.abstract_eval)
    throw PluginLoadError(what + " gives no outputs and the primitive has no abstract eval to "
                                 "compute them");
  return eqn;
}

// Copies what the host keeps from a plugin's descriptor, validating as it goes.
LoadedPlugin describe(const std::string& path, const jxo_plugin_desc* dp) {
  const jxo_plugin_desc dc = read_desc(dp, "its descriptor");
  const jxo_plugin_desc* d = &dc;
  LoadedPlugin p;
  p.path = path;
  p.abi_major = d->abi_major;
  p.abi_minor = d->abi_minor;
  p.name = checked_str(d->name, "its name");
  p.version = checked_str(d->version, "its version");
  p.sdk_version = checked_str(d->sdk_version, "its SDK version");
  if (d->abi_major != JXO_ABI_MAJOR)
    throw PluginLoadError("it was built for jaxonnx ABI " + std::to_string(d->abi_major) + "." +
                          std::to_string(d->abi_minor) + "; this host speaks ABI major " +
                          std::to_string(JXO_ABI_MAJOR));
  if (d->abi_minor > JXO_ABI_MINOR)
    throw PluginLoadError("plugin '" + p.name + "' needs jaxonnx ABI 1." +
                          std::to_string(d->abi_minor) + "; this host serves ABI 1.0 to 1." +
                          std::to_string(JXO_ABI_MINOR) + " (upgrade jaxonnx)");
  if (p.name.empty()) throw PluginLoadError("its descriptor has no name");
  if (d->num_primitives && !d->primitives)
    throw PluginLoadError("it declares " + std::to_string(d->num_primitives) +
                          " primitives but no primitive table");
  for (size_t i = 0; i < d->num_primitives; ++i) {
    const jxo_primitive_desc pc = read_desc(d->primitives[i], "primitive #" + std::to_string(i));
    const jxo_primitive_desc* pd = &pc;
    PrimitiveInfo info;
    const std::string what = "primitive #" + std::to_string(i);
    info.name = checked_str(pd->name, what + "'s name");
    info.lower = pd->lower;
    info.abstract_eval = pd->abstract_eval;
    info.user_data = pd->user_data;
    if (info.name.empty() || !info.lower)
      throw PluginLoadError("primitive #" + std::to_string(i) + " has no name or no lowering");
    // Fields past the plugin's struct_size read as zero: no ops, no binding specs.
    if (pd->num_onnx_ops && !pd->onnx_ops)
      throw PluginLoadError(what + " ('" + info.name + "') lists ONNX ops but no table");
    for (size_t k = 0; k < pd->num_onnx_ops; ++k)
      info.onnx_ops.push_back(checked_str(pd->onnx_ops[k], what + "'s ONNX op"));
    info.doc_url = checked_str(pd->doc_url, what + "'s doc URL");
    info.summary = checked_str(pd->summary, what + "'s summary");
    if (pd->num_bindings && !pd->bindings)
      throw PluginLoadError(what + " ('" + info.name + "') lists binding specs but no table");
    for (size_t k = 0; k < pd->num_bindings; ++k)
      info.bindings.push_back(binding(pd->bindings[k], "primitive '" + info.name + "'"));
    if (pd->num_test_eqns && !pd->test_eqns)
      throw PluginLoadError(what + " ('" + info.name + "') lists test equations but no table");
    for (size_t k = 0; k < pd->num_test_eqns; ++k)
      info.tests.push_back(test_eqn(pd->test_eqns[k], "primitive '" + info.name + "'", k, info));
    p.primitives.push_back(std::move(info));
  }
  {  // ABI 1.2: rewrite rules (none in an older descriptor: read as zero)
    if (d->num_rules && !d->rules)
      throw PluginLoadError("its descriptor lists rewrite rules but no table");
    for (size_t i = 0; i < d->num_rules; ++i) {
      const jxo_rule_desc rc = read_desc(d->rules[i], "rewrite rule #" + std::to_string(i));
      const jxo_rule_desc* rd = &rc;
      RuleInfo rule;
      rule.name = checked_str(rd->name, "rewrite rule #" + std::to_string(i) + "'s name");
      rule.root_op = checked_str(rd->root_op, "rewrite rule #" + std::to_string(i) + "'s root op");
      rule.rewrite = rd->rewrite;
      rule.user_data = rd->user_data;
      if (rule.name.empty() || rule.root_op.empty() || !rule.rewrite)
        throw PluginLoadError("rewrite rule #" + std::to_string(i) +
                              " has no name, root op or callback");
      rule.min_opset = rd->min_opset;
      std::string what = "rewrite rule '" + rule.name + "'";
      if (rd->num_onnx_ops && !rd->onnx_ops)
        throw PluginLoadError(what + " lists ONNX ops but no table");
      for (size_t k = 0; k < rd->num_onnx_ops; ++k)
        rule.onnx_ops.push_back(checked_str(rd->onnx_ops[k], what + "'s ONNX op"));
      rule.summary = checked_str(rd->summary, what + "'s summary");
      rule.numerics = numerics(rd->numerics, what);
      rule.numerics_note = checked_str(rd->numerics_note, what + "'s numerics note");
      p.rules.push_back(std::move(rule));
    }
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

#if !defined(_WIN32)
// Whether a plugin file or folder may be trusted: code loaded from it runs in
// this process, so anyone able to replace it could run code as the user.
// Refused: world-writable, or owned by another user than the caller and root.
std::string untrusted_reason(const struct stat& st, const char* what) {
  char mode[16];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  if (st.st_mode & S_IWOTH)
    return std::string("the ") + what + " is world-writable (mode " + mode +
           "), so anyone could replace the code it holds; refused (chmod o-w to allow it)";
  if (st.st_uid != geteuid() && st.st_uid != 0)
    return std::string("the ") + what + " is owned by user id " + std::to_string(st.st_uid) +
           ", neither you nor root; refused (chown it to allow it)";
  return "";
}
#endif

#if defined(__linux__)
// The ELF machine this process runs, as e_machine.
constexpr int kHostMachine =
#if defined(__x86_64__)
    EM_X86_64;
#elif defined(__aarch64__)
    EM_AARCH64;
#elif defined(__i386__)
    EM_386;
#elif defined(__arm__)
    EM_ARM;
#elif defined(__powerpc64__)
    EM_PPC64;
#elif defined(__s390x__)
    EM_S390;
#elif defined(__riscv)
    EM_RISCV;
#else
    -1;  // unknown: leave the check to dlopen
#endif

std::string machine_name(int m) {
  switch (m) {
    case EM_X86_64: return "x86-64";
    case EM_AARCH64: return "AArch64";
    case EM_386: return "x86 (32-bit)";
    case EM_ARM: return "ARM (32-bit)";
    case EM_PPC64: return "PowerPC 64";
    case EM_S390: return "s390x";
    case EM_RISCV: return "RISC-V";
    default: return "ELF machine " + std::to_string(m);
  }
}

bool read_at(int fd, void* buf, size_t n, uint64_t offset) {
  return pread(fd, buf, n, static_cast<off_t>(offset)) == static_cast<ssize_t>(n);
}

// dlopen maps an ELF file's segments without checking that they lie inside the
// file, and touching a page past the end raises SIGBUS: a truncated plugin
// (an interrupted copy) would kill the process. Refuse such files up front,
// and name a wrong architecture (glibc reports it as "No such file or
// directory"); anything that is not ELF is left to dlopen, whose message is better.
template <typename Ehdr, typename Phdr>
std::string elf_problem(int fd, uint64_t size, bool host_class) {
  Ehdr eh{};
  if (!read_at(fd, &eh, sizeof eh, 0)) return "";  // dlopen: "file too short"
  if (kHostMachine >= 0 && (eh.e_machine != kHostMachine || !host_class))
    return "it is built for " + machine_name(eh.e_machine) +
           (sizeof(Ehdr) == sizeof(Elf64_Ehdr) ? " (64-bit)" : " (32-bit)") +
           ", but this process runs on " + machine_name(kHostMachine) + " (" +
           std::to_string(8 * sizeof(void*)) + "-bit); rebuild the plugin for this platform";
  if (eh.e_phentsize != sizeof(Phdr)) return "";
  uint64_t end = uint64_t(eh.e_phoff) + uint64_t(eh.e_phnum) * sizeof(Phdr);
  if (end > size)
    return "its ELF program headers end at byte " + std::to_string(end) + " but the file has " +
           std::to_string(size) + " bytes (truncated?)";
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    Phdr ph{};
    if (!read_at(fd, &ph, sizeof ph, eh.e_phoff + uint64_t(i) * sizeof(Phdr))) return "";
    uint64_t seg_end = uint64_t(ph.p_offset) + uint64_t(ph.p_filesz);
    if (ph.p_type == PT_LOAD && seg_end > size)
      return "an ELF segment ends at byte " + std::to_string(seg_end) + " but the file has " +
             std::to_string(size) + " bytes (truncated?)";
  }
  return "";
}
#endif

// Why `path` must not be handed to dlopen, or "": it is not a regular file
// (a FIFO would block the open forever, a device could do anything), it is
// not trusted, or it is a truncated or foreign ELF file. Opened without
// blocking and checked on the open descriptor, so what is checked is what
// was opened.
std::string file_problem(const std::string& path) {
#if defined(_WIN32)
  boost::system::error_code ec;
  if (!fs::is_regular_file(path, ec)) return "it is not a regular file";
  return "";
#else
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return std::string("it cannot be opened: ") + std::strerror(errno);
  struct Closer { int fd; ~Closer() { ::close(fd); } } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) return std::string("it cannot be inspected: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode))
    return std::string("it is not a regular file (") +
           (S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a folder"
            : S_ISSOCK(st.st_mode) ? "a socket" : "a device") + "); only regular files are loaded";
  if (std::string why = untrusted_reason(st, "file"); !why.empty()) return why;
#if defined(__linux__)
  unsigned char ident[EI_NIDENT] = {};
  if (!read_at(fd, ident, EI_NIDENT, 0) || std::memcmp(ident, ELFMAG, SELFMAG) != 0) return "";
  uint64_t size = static_cast<uint64_t>(st.st_size);
  std::string why;
  if (ident[EI_CLASS] == ELFCLASS64)
    why = elf_problem<Elf64_Ehdr, Elf64_Phdr>(fd, size, sizeof(void*) == 8);
  if (ident[EI_CLASS] == ELFCLASS32)
    why = elf_problem<Elf32_Ehdr, Elf32_Phdr>(fd, size, sizeof(void*) == 4);
  if (!why.empty()) return "it could not be loaded: " + printable(path) + ": " + why;
#endif
  return "";
#endif
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

std::string plugin_file_problem(const std::string& path) { return file_problem(path); }

namespace {
// load_plugin, minus file_problem when the caller (a scan) has just run it.
const LoadedPlugin& load(const std::string& path_in, const LoadStep& step, bool check_file);
}  // namespace

const LoadedPlugin& load_plugin(const std::string& path_in) { return load(path_in, {}, true); }

const LoadedPlugin& load_plugin(const std::string& path_in, const LoadStep& step) {
  return load(path_in, step, true);
}

namespace {
const LoadedPlugin& load(const std::string& path_in, const LoadStep& step, bool check_file) {
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
}  // namespace

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
      reg.add(load(item.path, {}, !gate));  // with a gate, file_problem ran above
    } catch (const PluginLoadError& e) {
      reg.diagnostics_.push_back({item.path, e.what()});
    }
  }
  reg.resolve_overrides();
  return reg;
}

}  // namespace jaxonnx
