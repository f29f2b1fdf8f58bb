// The preflight's work inside its short-lived child process: load one plugin
// file and exercise it (init, descriptor, and each primitive's test equation:
// abstract eval, lowering, the plugin's rewrite rules). The child reports each
// step before it runs it, so that when plugin code kills the child the parent
// knows where (python/jaxonnx/_preflight.py). Implemented in preflight.cpp.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace jaxonnx {

struct PreflightTest {
  std::string eqn;    // "float32[2,3] -> float32[2,3]"
  std::string error;  // it failed (an error status, not a crash); empty: it passed
};

struct PreflightPrimitive {
  std::string name;
  std::vector<PreflightTest> tests;  // one per test equation it declares
};

struct PreflightReport {
  std::string load_error;  // the file did not load (dlerror, no entry, ABI...); then nothing else
  std::string name, version;
  std::vector<PreflightPrimitive> primitives;
};

// step(what, primitive, eqn): "dlopen", "init", "describe" (the others empty),
// then per test equation "abstract_eval", "lower", "rules".
using PreflightStep = std::function<void(const std::string& what, const std::string& primitive,
                                         const std::string& eqn)>;

// Runs plugin code in this process: call it only in a process made for it.
PreflightReport preflight(const std::string& path, const PreflightStep& step);

}  // namespace jaxonnx
