// jaxonnx._core: the pybind11 face of the core. It converts Python objects
// to core types and forwards; the logic lives in core/ and in jaxonnx/*.py.
#include <chrono>
#include <optional>
#include <tuple>

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "jaxonnx/core/abstract_eval.hpp"
#include "jaxonnx/dtypes.hpp"
#include "jaxonnx/core/converter.hpp"
#include "jaxonnx/core/error.hpp"
#include "jaxonnx/core/passes.hpp"
#include "jaxonnx/core/plugin_host.hpp"
#include "jaxonnx/core/preflight.hpp"
#include "jaxonnx/core/step_log.hpp"
#include "jaxpr_import.hpp"

namespace pb = pybind11;
using namespace jaxonnx;

namespace {

const char* numerics_name(int32_t v) {
  return v == JXO_NUMERICS_EXACT         ? "exact"
         : v == JXO_NUMERICS_FINITE      ? "finite"
         : v == JXO_NUMERICS_APPROXIMATE ? "approximate"
                                         : "undeclared";
}

// The numerics a binding spec or a rewrite rule declares (ABI 1.5).
void put_numerics(pb::dict& d, int32_t numerics, const std::string& note) {
  d["numerics"] = numerics_name(numerics);
  d["numerics_note"] = note;
}

pb::dict binding_dict(const BindingSpec& b) {
  pb::dict d;
  d["target"] = b.target;
  d["operands"] = b.operands;
  d["params"] = b.params;
  d["when"] = b.when;
  d["leading_dims_operands"] = b.leading_dims_operands;
  put_numerics(d, b.numerics, b.numerics_note);
  return d;
}

pb::dict primitive_dict(const PrimitiveInfo& prim) {
  pb::dict d;
  d["name"] = prim.name;
  d["onnx_ops"] = prim.onnx_ops;
  d["doc_url"] = prim.doc_url;
  d["summary"] = prim.summary;
  d["abstract_eval"] = prim.abstract_eval != nullptr;
  pb::list bindings;
  for (const BindingSpec& b : prim.bindings) bindings.append(binding_dict(b));
  d["bindings"] = bindings;
  d["test_eqns"] = prim.tests.size();
  return d;
}

pb::dict rule_dict(const RuleInfo& rule) {
  pb::dict d;
  d["name"] = rule.name;
  d["root_op"] = rule.root_op;
  d["onnx_ops"] = rule.onnx_ops;
  d["min_opset"] = rule.min_opset;
  put_numerics(d, rule.numerics, rule.numerics_note);
  d["summary"] = rule.summary;
  d["applied"] = rule.applied->load(std::memory_order_relaxed);
  return d;
}

pb::dict plugin_dict(const LoadedPlugin& p) {
  pb::dict d;
  d["name"] = p.name;
  d["version"] = p.version;
  d["sdk_version"] = p.sdk_version;
  d["abi"] = std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor);
  d["file"] = p.path;
  pb::list prims, rules;
  for (const PrimitiveInfo& prim : p.primitives) prims.append(primitive_dict(prim));
  for (const RuleInfo& rule : p.rules) rules.append(rule_dict(rule));
  d["primitives"] = prims;
  d["rules"] = rules;
  return d;
}

// The options of one conversion as Python gives them (jaxonnx._core.ConvertOptions):
// the core's ConvertOptions, plus the Python callables that become its source
// hooks once the jaxpr is imported (they take an eqn.source_info object).
struct PyConvertOptions {
  ConvertOptions core;
  pb::object describe_source = pb::none();
  pb::object provenance = pb::none();
  bool facts = false;  // gather the ConversionFacts (Converted.facts)
};

// What one conversion gives back (jaxonnx._core.Converted).
struct Converted {
  pb::bytes model;
  pb::list data_files;  // DataFile objects, when external data was asked for
  pb::dict times;       // phase -> seconds
  pb::object facts = pb::none();  // the ConversionFacts as a dict, when asked
};

// ConversionFacts (conversion_facts.hpp) as plain Python data: lists of tuples.
pb::dict facts_dict(const ConversionFacts& f) {
  pb::dict d;
  pb::list lowered, fired, asked, refused, widened, skipped, passes;
  for (const auto& [key, n] : f.lowered) lowered.append(pb::make_tuple(key.first, key.second, n));
  for (const auto& [key, n] : f.rules_fired) fired.append(pb::make_tuple(key.first, key.second, n));
  for (const auto& [key, n] : f.target_asked) {
    const auto& [asker, plugin, name, feature, answer] = key;
    asked.append(pb::make_tuple(asker, plugin, name, feature, answer, n));
  }
  for (const auto& [key, n] : f.refused_nodes) {
    const auto& [plugin, primitive, op] = key;
    refused.append(pb::make_tuple(plugin, primitive, op, n));
  }
  for (const auto& [key, n] : f.widened) {
    const auto& [plugin, primitive, op, from, to] = key;
    widened.append(pb::make_tuple(plugin, primitive, op, from, to, n));
  }
  for (const auto& [plugin, rule, op] : f.rules_skipped) skipped.append(pb::make_tuple(plugin, rule, op));
  for (const auto& [name, n] : f.pass_nodes_removed) passes.append(pb::make_tuple(name, n));
  d["lowered"] = lowered;
  d["rules_fired"] = fired;
  d["target_asked"] = asked;
  d["refused_nodes"] = refused;
  d["widened"] = widened;
  d["rules_skipped"] = skipped;
  d["nodes_lowered"] = f.nodes_lowered;
  d["nodes_final"] = f.nodes_final;
  d["pass_nodes_removed"] = passes;
  return d;
}

ConvertOptions::Fusion fusion_from(const std::string& fusion) {
  if (fusion == "fast") return ConvertOptions::Fusion::kFast;
  if (fusion == "exact") return ConvertOptions::Fusion::kExact;
  if (fusion == "none") return ConvertOptions::Fusion::kNone;
  if (fusion == "approximate") return ConvertOptions::Fusion::kApproximate;
  throw ConversionError("fusion must be \"fast\", \"exact\", \"none\" or \"approximate\"; got \"" + fusion +
                        "\"");
}

const char* fusion_name(ConvertOptions::Fusion f) {
  return f == ConvertOptions::Fusion::kFast          ? "fast"
         : f == ConvertOptions::Fusion::kExact       ? "exact"
         : f == ConvertOptions::Fusion::kApproximate ? "approximate"
                                                     : "none";
}

// external_data as Python gives it: None, or (mode, threshold, location, per_tensor).
using ExternalTuple = std::tuple<std::string, uint64_t, std::string, bool>;

ExternalDataOptions::Mode external_mode(const std::string& mode) {
  if (mode == "always") return ExternalDataOptions::kAlways;
  if (mode == "auto") return ExternalDataOptions::kAuto;
  if (mode == "inline") return ExternalDataOptions::kInline;
  if (mode == "never") return ExternalDataOptions::kNever;
  throw ConversionError("external_data mode must be \"always\", \"auto\", \"inline\" or \"never\"; got \"" +
                        mode + "\"");
}

const char* external_mode_name(ExternalDataOptions::Mode m) {
  return m == ExternalDataOptions::kAlways ? "always"
         : m == ExternalDataOptions::kAuto ? "auto"
         : m == ExternalDataOptions::kInline ? "inline" : "never";
}

// A ConvertOptions field as a property of jaxonnx._core.ConvertOptions.
template <typename T>
void core_field(pb::class_<PyConvertOptions>& cls, const char* name, T ConvertOptions::*field,
                const char* doc) {
  cls.def_property(
      name, [field](const PyConvertOptions& o) { return o.core.*field; },
      [field](PyConvertOptions& o, T v) { o.core.*field = std::move(v); }, doc);
}

Converted convert_program(const Registry& registry, pb::handle closed_jaxpr,
                          const PyConvertOptions& given) {
  auto start = std::chrono::steady_clock::now();
  py::JaxprImporter importer;
  auto program = importer.closed_jaxpr(closed_jaxpr);
  double import_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PhaseTimes phases;
  ConvertOptions options = given.core;
  options.times = &phases;
  std::vector<DataFile> files;
  options.data_files = &files;
  ConversionFacts facts;
  if (given.facts) options.facts = &facts;
  // Source hooks: an Eqn::source handle is the index of its source_info in the importer.
  if (!given.describe_source.is_none())
    options.describe_source = [&](int64_t source) {
      pb::gil_scoped_acquire gil;
      return given.describe_source(importer.sources().at(static_cast<size_t>(source)))
          .cast<std::string>();
    };
  if (!given.provenance.is_none())  // source -> [(key, value)]: metadata for its nodes
    options.provenance = [&](int64_t source) {
      pb::gil_scoped_acquire gil;
      return given.provenance(importer.sources().at(static_cast<size_t>(source)))
          .cast<std::vector<std::pair<std::string, std::string>>>();
    };
  // Ctrl-C: the signal handler only sets a flag, which Python code checks;
  // look at it now and then (each look takes the GIL) and stop by raising.
  using Clock = std::chrono::steady_clock;
  options.poll = [last = Clock::now()]() mutable {
    if (Clock::now() - last < std::chrono::milliseconds(50)) return;
    last = Clock::now();
    pb::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw pb::error_already_set();
  };
  SerializedModel model;
  try {
    // The conversion touches no Python object (constants are buffers kept
    // alive by `program`; source lines and deferred jaxprs take the GIL
    // back): other threads run.
    pb::gil_scoped_release release;
    model = jaxonnx::convert_serialized(*program, registry, options);
  } catch (...) {
    // A lowering that failed for want of a deferred jaxpr: the reason is
    // the error making it (the GIL is held again here).
    if (importer.deferred_error()) std::rethrow_exception(importer.deferred_error());
    throw;
  }
  // The one copy of the weights: into the bytes object.
  auto bytes = pb::reinterpret_steal<pb::bytes>(
      PyBytes_FromStringAndSize(nullptr, static_cast<pb::ssize_t>(model.size)));
  if (!bytes) throw pb::error_already_set();
  {
    pb::gil_scoped_release release;
    model.copy_to(PyBytes_AS_STRING(bytes.ptr()));
  }
  Converted out{std::move(bytes), pb::list(), pb::dict()};
  if (given.facts) out.facts = facts_dict(facts);
  for (DataFile& f : files) out.data_files.append(pb::cast(std::move(f)));
  out.times["import"] = import_seconds;
  out.times["lower"] = phases.lower;
  out.times["passes"] = phases.passes;
  out.times["export"] = phases.export_onnx;
  for (const auto& [name, seconds] : phases.per_pass) out.times[pb::str("pass:" + name)] = seconds;
  return out;
}

pb::list abstract_eval_primitive(const Registry& registry, const std::string& name, pb::list in_avals,
                       pb::dict params) {
  const PrimitiveInfo* prim = registry.find(name);
  if (!prim) throw ConversionError("no loaded plugin declares the primitive '" + name + "'");
  py::JaxprImporter importer;
  std::vector<Aval> ins;
  for (pb::handle a : in_avals) ins.push_back(importer.aval(a));
  Param p = importer.params(params);
  pb::list out;
  for (const Aval& a : jaxonnx::abstract_eval(*prim, ins, p)) {
    pb::list dims;
    for (const Dim& d : a.dims) {
      if (d.is_static()) dims.append(d.value);
      else dims.append(d.symbol);
    }
    out.append(pb::make_tuple(dtype_name(a.dtype), dims));
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "jaxonnx core binding (internal; use the jaxonnx package)";
  pb::register_exception<ConversionError>(m, "ConversionError", PyExc_ValueError);
  m.attr("ABI_MAJOR") = JXO_ABI_MAJOR;
  m.attr("ABI_MINOR") = JXO_ABI_MINOR;
  m.attr("MIN_OPSET") = kMinOpset;

  pb::class_<Registry>(m, "Registry")
      .def(pb::init(&Registry::scan), pb::arg("dirs"), pb::arg("overrides") = Overrides{},
           pb::arg("keep_conflicts") = false, pb::arg("gate") = Registry::Gate{},
           "Scans `dirs`; gate(files) -> [reason or ''], when given, decides which files found "
           "may be loaded into this process.")
      .def_property_readonly("dirs", &Registry::dirs)
      .def_property_readonly("plugins",
                             [](const Registry& r) {
                               pb::list out;
                               for (const LoadedPlugin* p : r.plugins()) out.append(plugin_dict(*p));
                               return out;
                             })
      .def_property_readonly("diagnostics",
                             [](const Registry& r) {
                               pb::list out;
                               for (const Diagnostic& d : r.diagnostics())
                                 out.append(pb::make_tuple(d.path, d.reason));
                               return out;
                             })
      .def_property_readonly("conflicts",
                             [](const Registry& r) {
                               pb::list out;
                               for (const Conflict& c : r.conflicts()) {
                                 pb::dict d;
                                 d["primitive"] = c.primitive;
                                 pb::list claimants;
                                 for (const LoadedPlugin* p : c.claimants)
                                   claimants.append(pb::make_tuple(p->name, p->path));
                                 d["plugins"] = claimants;
                                 d["winner"] = c.winner ? pb::object(pb::str(c.winner->name))
                                                        : pb::object(pb::none());
                                 out.append(d);
                               }
                               return out;
                             })
      .def("has", [](const Registry& r, const std::string& name) { return r.find(name) != nullptr; });

  pb::class_<DataFile>(m, "DataFile")
      .def_readonly("location", &DataFile::location)
      .def_readonly("size", &DataFile::size)
      .def(
          "write",
          [](const DataFile& f, int fd, pb::object progress) {
            std::function<void(uint64_t)> written;
            if (!progress.is_none())
              written = [&](uint64_t n) {
                pb::gil_scoped_acquire gil;
                progress(n);
              };
            pb::gil_scoped_release release;  // only the tensors' memory is read
            f.write_to(fd, written);
          },
          pb::arg("fd"), pb::arg("progress") = pb::none(),
          "Writes the file's bytes to the file descriptor `fd`; progress(bytes) after each chunk.")
      .def(
          "views",
          [](const DataFile& f) {
            pb::dict out;  // offset -> a read-only view of the tensor's bytes, valid while `f` lives
            for (const DataFile::Piece& p : f.pieces)
              out[pb::int_(p.offset)] = pb::memoryview::from_memory(
                  const_cast<void*>(p.tensor->data), static_cast<pb::ssize_t>(p.tensor->nbytes), true);
            return out;
          },
          "{offset: memoryview} of the tensors, for copying them into a ModelProto.");

  pb::class_<PyConvertOptions> options(m, "ConvertOptions",
                                       "What one conversion is asked to do (the core's ConvertOptions, "
                                       "core/include/jaxonnx/core/convert_options.hpp). Keyword "
                                       "fields; unset ones keep the core's defaults.");
  options
      .def(pb::init([](pb::kwargs kwargs) {
             PyConvertOptions o;
             pb::object self = pb::cast(&o, pb::return_value_policy::reference);
             for (auto [key, value] : kwargs) {
               if (!pb::hasattr(self, key)) throw pb::type_error("ConvertOptions has no field " +
                                                                  pb::repr(key).cast<std::string>());
               self.attr(key) = value;
             }
             return o;
           }),
           "ConvertOptions(**fields): any of the fields below, by keyword.");
  core_field(options, "opset", &ConvertOptions::opset,
             "The default-domain opset the model declares (default 23). Below MIN_OPSET the program "
             "is lowered at MIN_OPSET and declared at this opset when every operator kept its form, "
             "else a ConversionError names the operators and the opset each needs.");
  core_field(options, "model_name", &ConvertOptions::model_name,
             "The ONNX graph's name.");
  core_field(options, "input_names", &ConvertOptions::input_names,
             "Names of the graph inputs, in order (default in_0, in_1, ...).");
  core_field(options, "output_names", &ConvertOptions::output_names,
             "Names of the graph outputs, in order (default out_0, out_1, ...).");
  core_field(options, "producer_version", &ConvertOptions::producer_version,
             "The model's producer_version.");
  core_field(options, "optimize", &ConvertOptions::optimize,
             "Run the optimizer's passes after lowering (default True); False only prunes dead code.");
  core_field(options, "target", &ConvertOptions::target,
             "The target profile's name (jaxonnx/targets.hpp; default \"onnxruntime\").");
  core_field(options, "dump_ir_dir", &ConvertOptions::dump_ir_dir,
             "When not empty, the optimizer writes the graph here as text around every pass run.");
  core_field(options, "inline_functions", &ConvertOptions::inline_functions,
             "Replace every function call by its body before the passes (default False).");
  options
      .def_property(
          "fusion", [](const PyConvertOptions& o) { return fusion_name(o.core.fusion); },
          [](PyConvertOptions& o, const std::string& v) { o.core.fusion = fusion_from(v); },
          "Which plugin rewrite rules the optimizer applies: \"fast\" (all, the default), "
          "\"exact\" (those exact on NaN and infinity too) or \"none\".")
      .def_property(
          "external_data",
          [](const PyConvertOptions& o) -> pb::object {
            const ExternalDataOptions& e = o.core.external_data;
            if (e.mode == ExternalDataOptions::kNever) return pb::none();
            return pb::make_tuple(external_mode_name(e.mode), e.threshold, e.location, e.per_tensor);
          },
          [](PyConvertOptions& o, std::optional<ExternalTuple> v) {
            ExternalDataOptions e;
            if (v) {
              auto& [mode, threshold, location, per_tensor] = *v;
              e.mode = external_mode(mode);
              e.threshold = threshold;
              e.location = location;
              e.per_tensor = per_tensor;
            }
            o.core.external_data = e;
          },
          "Where large weights go: None (inside the model), or (mode, threshold, location, "
          "per_tensor), mode one of \"always\", \"auto\" (only past 2 GB), \"inline\" (for a "
          "caller that copies them into its own ModelProto, Converted.data_files' views) or "
          "\"never\"; jaxonnx/_output.py makes them.")
      .def_readwrite("describe_source", &PyConvertOptions::describe_source,
                     "None, or source_info -> \"file:line (function)\", for error messages.")
      .def_readwrite("facts", &PyConvertOptions::facts,
                     "Gather what the conversion did (Converted.facts) for the conversion report; "
                     "the model is the same either way.")
      .def_readwrite("provenance", &PyConvertOptions::provenance,
                     "None, or source_info -> [(key, value)]: metadata_props for the nodes of "
                     "each equation (with pkg.jaxonnx.primitive and pkg.jaxonnx.plugin).");

  pb::class_<Converted>(m, "Converted", "What convert() gives back.")
      .def_readonly("model", &Converted::model, "The ModelProto's serialization (bytes).")
      .def_readonly("data_files", &Converted::data_files,
                    "The DataFile objects of the weights kept outside (external_data), else [].")
      .def_readonly("times", &Converted::times,
                    "Seconds per phase: import, lower, passes, export and pass:<name>.")
      .def_readonly("facts", &Converted::facts,
                    "None, or (options.facts) {lowered: [(primitive, plugin, equations)], "
                    "rules_fired: [(plugin, rule, times)], target_asked: [(\"lower\" or \"rule\", "
                    "plugin, primitive or rule, feature, answer, times)], refused_nodes: [(plugin, "
                    "primitive, op, times)], rules_skipped: [(plugin, rule, op)], nodes_lowered and "
                    "nodes_final: {op type: nodes}, pass_nodes_removed: [(pass, nodes)]} "
                    "(core/include/jaxonnx/core/conversion_facts.hpp).");

  m.def("convert", &convert_program, pb::arg("registry"), pb::arg("closed_jaxpr"),
        pb::arg("options"),
        "Converts a jax ClosedJaxpr through the plugins of `registry` as `options` (a "
        "ConvertOptions) says; returns a Converted. Raises ConversionError.");
  m.def(
      "targets",
      [] {
        pb::list out;
        for (const sdk::targets::Profile& p : sdk::targets::kProfiles) {
          pb::dict d;
          d["name"] = std::string(p.name);
          d["default_opset"] = p.default_opset;
          d["summary"] = std::string(p.summary);
          pb::list lacks;
          for (size_t i = 0; i < p.num_lacks; ++i)
            lacks.append(pb::make_tuple(std::string(p.lacks[i].what), p.lacks[i].refused,
                                        std::string(p.lacks[i].why)));
          d["lacks"] = lacks;
          pb::list domains;
          for (size_t i = 0; i < p.num_domains; ++i) domains.append(std::string(p.domains[i]));
          d["domains"] = domains;
          out.append(d);
        }
        return out;
      },
      "The target profiles (jaxonnx/targets.hpp): [{name, default_opset, summary, lacks: "
      "[(op or capability, refused, why)], domains: [operator domains beyond the standard]}].");
  m.def(
      "load_plugin",
      [](const std::string& path) {
        try {
          return plugin_dict(load_plugin(path));
        } catch (const PluginLoadError& e) {
          throw ConversionError("jaxonnx could not load " + path + ": " + e.what());
        }
      },
      pb::arg("path"), "Loads one plugin file (once per process) and describes it.");
  m.def(
      "preflight",
      [](const std::string& path, pb::function step) {
        PreflightReport r = preflight(path, [&](const std::string& what, const std::string& prim,
                                                const std::string& eqn) { step(what, prim, eqn); });
        pb::dict d;
        d["load_error"] = r.load_error;
        d["name"] = r.name;
        d["version"] = r.version;
        pb::list prims;
        for (const PreflightPrimitive& p : r.primitives) {
          pb::dict q;
          q["name"] = p.name;
          pb::list tests;
          for (const PreflightTest& t : p.tests) {
            pb::dict e;
            e["eqn"] = t.eqn;
            e["error"] = t.error;
            tests.append(e);
          }
          q["tests"] = tests;
          prims.append(q);
        }
        d["primitives"] = prims;
        return d;
      },
      pb::arg("path"), pb::arg("step"),
      "The preflight child's work (jaxonnx/_preflight.py): loads the plugin and runs its test "
      "equations here, calling step(what, primitive, eqn) before each step. Runs plugin code in this "
      "process.");
  m.def("set_step_log", &set_step_log, pb::arg("fd"),
        "From now on, writes 'what\\tplugin\\tname' lines to the file descriptor `fd` before "
        "each call into a plugin's lowering, abstract eval or rewrite rule (-1: off); for a child "
        "process that runs plugin code, so its parent can say where it died.");
  m.def(
      "plugin_file_problem", &plugin_file_problem, pb::arg("path"),
      "Why the host refuses to dlopen `path` (not a regular file, untrusted, truncated or foreign "
      "ELF), or ''.");
  m.def(
      "exported_dtypes",
      [] {
        pb::list out;
        for (const dtypes::Info& d : dtypes::kTable)
          if (d.exported) out.append(d.name);
        return out;
      },
      "The NumPy names of the dtypes a model jaxonnx writes may hold (jaxonnx/dtypes.hpp).");
  m.def("abstract_eval", &abstract_eval_primitive, pb::arg("registry"), pb::arg("name"),
        pb::arg("in_avals"), pb::arg("params"));
  m.def(
      "pass_contracts",
      [] {
        pb::list out;
        for (const std::unique_ptr<passes::Pass>& pass : passes::all_passes()) {
          pb::dict d;
          d["name"] = pass->name();
          pb::list needs, guarantees;
          for (const passes::Property& p : pass->needs()) needs.append(p.name);
          for (const passes::Property& p : pass->guarantees()) guarantees.append(p.name);
          d["needs"] = needs;
          d["guarantees"] = guarantees;
          out.append(d);
        }
        return out;
      },
      "Every optimizer pass with the names of the properties it needs and guarantees "
      "(docs/optimizer.md's table is generated from it).");
}
