// Private: one call into a plugin's callback (a lowering, an abstract eval, a
// rewrite rule), made the same way everywhere. The step is logged before and
// after (step_log.hpp: what ran last when a plugin takes the process down),
// faults the host's functions note during the call are collected
// (FaultScope: a host call that failed counts even when the plugin went on),
// and the status it returns is taken. The result is the call's failure, if
// any: the fault's message first (it happened first), then the status's.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "jaxonnx/core/step_log.hpp"
#include "status.hpp"

namespace jaxonnx {

template <typename Call>
std::optional<Failure> call_plugin(const char* step, const std::string& plugin,
                                   const std::string& name, Call&& call) {
  FaultScope faults;
  log_step(step, plugin, name);
  jxo_status* status = std::forward<Call>(call)();
  log_step("done", plugin, name);
  std::optional<Failure> failure;
  if (status) failure = take_status(status);
  if (std::optional<Failure> fault = faults.take())
    failure = Failure{fault->code, fault->message + (failure ? "; then: " + failure->message : "")};
  return failure;
}

}  // namespace jaxonnx
