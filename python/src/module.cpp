// jaxonnx._core: the pybind11 face of the core. It converts Python objects
// to core types and forwards; the logic lives in core/ and in jaxonnx/*.py.
#include <chrono>

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "jaxonnx/core/converter.hpp"
#include "jaxonnx/core/error.hpp"
#include "jaxonnx/core/plugin_host.hpp"
#include "jaxpr_import.hpp"

namespace pb = pybind11;
using namespace jaxonnx;

namespace {

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
    q["summary"] = rule.summary;
    rules.append(q);
  }
  d["rules"] = rules;
  return d;
}

pb::bytes convert_program(const Registry& registry, pb::handle closed_jaxpr, int64_t opset,
                  const std::string& model_name, std::vector<std::string> input_names,
                  std::vector<std::string> output_names, pb::object describe_source,
                  const std::string& producer_version, bool optimize,
                  const std::string& dump_ir_dir, pb::object times, bool fuse) {
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
  options.fuse = fuse;
  options.dump_ir_dir = dump_ir_dir;
  options.times = &phases;
  if (!describe_source.is_none())
    options.describe_source = [&](int64_t source) {
      return describe_source(importer.sources().at(static_cast<size_t>(source))).cast<std::string>();
    };
  pb::bytes bytes(jaxonnx::convert(*program, registry, options));
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
      .def(pb::init(&Registry::scan), pb::arg("dirs"))
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
      .def("has", [](const Registry& r, const std::string& name) { return r.find(name) != nullptr; });

  m.def("convert", &convert_program, pb::arg("registry"), pb::arg("closed_jaxpr"), pb::arg("opset"),
        pb::arg("model_name"), pb::arg("input_names"), pb::arg("output_names"),
        pb::arg("describe_source"), pb::arg("producer_version"), pb::arg("optimize") = true,
        pb::arg("dump_ir_dir") = "", pb::arg("times") = pb::none(), pb::arg("fuse") = true);
  m.def("abstract_eval", &abstract_eval_primitive, pb::arg("registry"), pb::arg("name"),
        pb::arg("in_avals"), pb::arg("params"));
}
