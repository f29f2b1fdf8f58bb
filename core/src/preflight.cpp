// The preflight's child-side work (preflight.hpp): load, then one equation
// per primitive that declares a test equation, through the same code paths a
// conversion takes (abstract eval, the lowering driver, the optimizer with the
// plugin's rewrite rules).
#include "jaxonnx/core/preflight.hpp"

#include <memory>

#include "jaxonnx/core/abstract_eval.hpp"
#include "jaxonnx/core/converter.hpp"
#include "jaxonnx/core/error.hpp"
#include "jaxonnx/core/passes.hpp"
#include "jaxonnx/core/plugin_host.hpp"

namespace jaxonnx {
namespace {

std::string avals_str(const std::vector<Aval>& avals) {
  std::string out;
  for (const Aval& a : avals) out += (out.empty() ? "" : ", ") + a.str();
  return out.empty() ? "()" : out;
}

// One equation `name(inputs) -> outputs` with no params, its inputs the
// program's inputs and its outputs the program's outputs.
ClosedJaxpr one_equation(const std::string& name, const std::vector<Aval>& inputs,
                         const std::vector<Aval>& outputs) {
  ClosedJaxpr program;
  Eqn eqn;
  eqn.primitive = name;
  eqn.params.kind = JXO_PARAM_RECORD;
  int64_t var = 0;
  for (const Aval& a : inputs) {
    Atom atom;
    atom.var = var++;
    atom.aval = a;
    program.jaxpr.invars.push_back(atom);
    eqn.inputs.push_back(atom);
  }
  for (const Aval& a : outputs) {
    Atom atom;
    atom.var = var++;
    atom.aval = a;
    program.jaxpr.outvars.push_back(atom);
    eqn.outputs.push_back(atom);
  }
  program.jaxpr.eqns.push_back(std::move(eqn));
  return program;
}

}  // namespace

PreflightReport preflight(const std::string& path, const PreflightStep& step) {
  PreflightReport report;
  const LoadedPlugin* plugin = nullptr;
  try {
    plugin = &load_plugin(path, [&](const char* what) { step(what, "", ""); });
  } catch (const PluginLoadError& e) {
    report.load_error = e.what();
    return report;
  }
  report.name = plugin->name;
  report.version = plugin->version;
  Registry registry;  // this plugin alone: its lowerings and its rules
  registry.add(*plugin);
  for (const PrimitiveInfo& prim : plugin->primitives) {
    PreflightPrimitive out;
    out.name = prim.name;
    for (const TestEqn& test : prim.tests) {
      PreflightTest t;
      std::vector<Aval> outputs = test.outputs;
      t.eqn = avals_str(test.inputs) + " -> " + (outputs.empty() ? "?" : avals_str(outputs));
      try {
        if (prim.abstract_eval) {
          step("abstract_eval", prim.name, t.eqn);
          Param none;
          none.kind = JXO_PARAM_RECORD;
          std::vector<Aval> got = abstract_eval(prim, test.inputs, none);
          if (outputs.empty()) {
            outputs = got;
            t.eqn = avals_str(test.inputs) + " -> " + avals_str(outputs);
          }
        }
        step("lower", prim.name, t.eqn);
        ir::Model model = lower_to_ir(one_equation(prim.name, test.inputs, outputs), registry,
                                      ConvertOptions{});
        step("rules", prim.name, t.eqn);
        passes::ManagerOptions passes_options;
        passes_options.rules = registry.rules();
        passes::optimize(model, passes_options);
        export_onnx(model);
      } catch (const std::exception& e) {  // ConversionError, or a host error it did not wrap
        t.error = e.what();
      }
      out.tests.push_back(std::move(t));
    }
    report.primitives.push_back(std::move(out));
  }
  return report;
}

}  // namespace jaxonnx
