// jaxonnx._core: the pybind11 face of the core. It converts Python objects
// to core types and forwards; the logic lives in core/ and in jaxonnx/*.py.
#include <chrono>

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
  return v == JXO_NUMERICS_EXACT ? "exact" : v == JXO_NUMERICS_FINITE ? "finite" : "undeclared";
}

pb::dict plugin_dict(const LoadedPlugin& p) {
  pb::dict d;
  d["name"] = p.name;
  d["version"] = p.version;
  d["sdk_version"] = p.sdk_version;
  d["abi"] = std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor);
  d["file"] = p.path;
  pb::list prims;
  for (const PrimitiveInfo& prim : p.primitives) {
    pb::dict q;
    q["name"] = prim.name;
    q["onnx_ops"] = prim.onnx_ops;
    q["doc_url"] = prim.doc_url;
    q["summary"] = prim.summary;
    q["abstract_eval"] = prim.abstract_eval != nullptr;
    pb::list bindings;
    for (const BindingSpec& b : prim.bindings) {
      pb::dict spec;
      spec["target"] = b.target;
      spec["operands"] = b.operands;
      spec["params"] = b.params;
      spec["when"] = b.when;
      spec["leading_dims_operands"] = b.leading_dims_operands;
      spec["numerics"] = numerics_name(b.numerics);
      spec["numerics_note"] = b.numerics_note;
      bindings.append(spec);
    }
    q["bindings"] = bindings;
    q["test_eqns"] = prim.tests.size();
    prims.append(q);
  }
  d["primitives"] = prims;
  pb::list rules;
  for (const RuleInfo& rule : p.rules) {
    pb::dict q;
    q["name"] = rule.name;
    q["root_op"] = rule.root_op;
    q["onnx_ops"] = rule.onnx_ops;
    q["min_opset"] = rule.min_opset;
    q["numerics"] = numerics_name(rule.numerics);
    q["numerics_note"] = rule.numerics_note;
    q["summary"] = rule.summary;
    q["applied"] = rule.applied->load(std::memory_order_relaxed);
    rules.append(q);
  }
  d["rules"] = rules;
  return d;
}

pb::bytes convert_program(const Registry& registry, pb::handle closed_jaxpr, int64_t opset,
                  const std::string& model_name, std::vector<std::string> input_names,
                  std::vector<std::string> output_names, pb::object describe_source,
                  const std::string& producer_version, bool optimize,
                  const std::string& dump_ir_dir, pb::object times, bool inline_functions,
                  pb::object provenance, pb::object external_data, pb::object data_files,
                  const std::string& fusion, const std::string& target) {
  auto start = std::chrono::steady_clock::now();
  py::JaxprImporter importer;
  auto program = importer.closed_jaxpr(closed_jaxpr);
  double import_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PhaseTimes phases;
  ConvertOptions options;
  options.opset = opset;
  options.model_name = model_name;
  options.input_names = std::move(input_names);
  options.output_names = std::move(output_names);
  options.producer_version = producer_version;
  options.optimize = optimize;
  if (fusion != "fast" && fusion != "exact" && fusion != "none")
    throw ConversionError("fusion must be \"fast\", \"exact\" or \"none\"; got \"" + fusion + "\"");
  options.fusion = fusion == "fast"    ? ConvertOptions::Fusion::kFast
                   : fusion == "exact" ? ConvertOptions::Fusion::kExact
                                       : ConvertOptions::Fusion::kNone;
  options.target = target;
  options.dump_ir_dir = dump_ir_dir;
  options.inline_functions = inline_functions;
  options.times = &phases;
  std::vector<DataFile> files;
  if (!external_data.is_none()) {  // (mode, threshold, location, per_tensor); see _output.py
    auto [mode, threshold, location, per_tensor] =
        external_data.cast<std::tuple<std::string, uint64_t, std::string, bool>>();
    options.external_data.mode = mode == "always"   ? ExternalDataOptions::kAlways
                                 : mode == "auto"   ? ExternalDataOptions::kAuto
                                 : mode == "inline" ? ExternalDataOptions::kInline
                                                    : ExternalDataOptions::kNever;
    options.external_data.threshold = threshold;
    options.external_data.location = location;
    options.external_data.per_tensor = per_tensor;
    options.data_files = &files;
  }
  if (!describe_source.is_none())
    options.describe_source = [&](int64_t source) {
      pb::gil_scoped_acquire gil;
      return describe_source(importer.sources().at(static_cast<size_t>(source))).cast<std::string>();
    };
  if (!provenance.is_none())  // source -> [(key, value)]: metadata for the nodes of its equation
    options.provenance = [&](int64_t source) {
      pb::gil_scoped_acquire gil;
      return provenance(importer.sources().at(static_cast<size_t>(source)))
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
  std::string model;
  try {
    // The conversion touches no Python object (constants are buffers kept
    // alive by `program`; source lines and deferred jaxprs take the GIL
    // back): other threads run.
    pb::gil_scoped_release release;
    model = jaxonnx::convert(*program, registry, options);
  } catch (...) {
    // A lowering that failed for want of a deferred jaxpr: the reason is
    // the error making it (the GIL is held again here).
    if (importer.deferred_error()) std::rethrow_exception(importer.deferred_error());
    throw;
  }
  pb::bytes bytes(model);
  if (!data_files.is_none())  // a list the caller wants filled with DataFile objects
    for (DataFile& f : files) data_files.attr("append")(pb::cast(std::move(f)));
  if (!times.is_none()) {  // a dict the caller wants filled: phase -> seconds
    times["import"] = import_seconds;
    times["lower"] = phases.lower;
    times["passes"] = phases.passes;
    times["export"] = phases.export_onnx;
    for (const auto& [name, seconds] : phases.per_pass) times[pb::str("pass:" + name)] = seconds;
  }
  return bytes;
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

  m.def("convert", &convert_program, pb::arg("registry"), pb::arg("closed_jaxpr"), pb::arg("opset"),
        pb::arg("model_name"), pb::arg("input_names"), pb::arg("output_names"),
        pb::arg("describe_source"), pb::arg("producer_version"), pb::arg("optimize") = true,
        pb::arg("dump_ir_dir") = "", pb::arg("times") = pb::none(),
        pb::arg("inline_functions") = false, pb::arg("provenance") = pb::none(),
        pb::arg("external_data") = pb::none(), pb::arg("data_files") = pb::none(),
        pb::arg("fusion") = "fast", pb::arg("target") = "onnxruntime");
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
