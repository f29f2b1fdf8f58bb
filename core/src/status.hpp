// Private: the host's side of jxo_status, and the guard every host entry
// point runs its body in, so that nothing thrown in the host ever unwinds
// into a plugin's frame (plugins may be C, or built with another compiler).
#pragma once

#include <new>
#include <optional>
#include <stdexcept>
#include <string>

#include "jaxonnx/core/error.hpp"
#include "jaxonnx/plugin_abi.h"

struct jxo_status {
  int32_t code;
  std::string message;
  bool heap = true;  // false for the preallocated out-of-memory status
};

namespace jaxonnx {

// A lowering that the host ran on a plugin's behalf failed (lower_eqn's
// errors): the message is complete, so it crosses as JXO_NESTED_FAILURE and is
// reported unchanged.
struct EquationError : ConversionError {
  using ConversionError::ConversionError;
};

// A host call's failure with its status code.
struct HostError : std::runtime_error {
  HostError(int32_t code, const std::string& message) : std::runtime_error(message), code(code) {}
  int32_t code;
};
// A host call's argument that cannot be used (JXO_INVALID_ARGUMENT).
struct InvalidArgument : HostError {
  explicit InvalidArgument(const std::string& message) : HostError(JXO_INVALID_ARGUMENT, message) {}
};

// A new status. Never throws: out of memory, it returns a preallocated
// JXO_INTERNAL status (which release_status leaves alone).
jxo_status* make_status(int32_t code, const std::string& message) noexcept;
jxo_status* make_status(int32_t code, const char* message) noexcept;
void release_status(jxo_status* status) noexcept;
// Takes a status a plugin returned: its code (JXO_ERROR for an unknown one)
// and message; releases it.
struct Failure {
  int32_t code;
  std::string message;
};
Failure take_status(jxo_status* status);

// The status for what `fn` (a host entry point's name) threw.
jxo_status* status_from_current_exception(const char* fn) noexcept;

// Host entry points that return no status (accessors, memo_get/memo_put)
// answer their "absent" value when they fail, and note the failure here, per
// thread. Whoever called the plugin checks the note once the callback returns
// (FaultScope), so a failure is never silent.
void note_fault(const char* fn) noexcept;  // from inside a catch block
class FaultScope {
 public:
  FaultScope() noexcept;   // sets aside a note of an enclosing callback
  ~FaultScope();           // and puts it back
  // The failure noted since construction, if any; clears it.
  std::optional<Failure> take();
  FaultScope(const FaultScope&) = delete;
  FaultScope& operator=(const FaultScope&) = delete;

 private:
  std::optional<Failure> outer_;
  bool outer_oom_;
};

// Runs a host entry point's body; any exception becomes a status.
template <typename F>
jxo_status* guarded(const char* fn, F&& body) noexcept {
  try {
    return body();
  } catch (...) {
    return status_from_current_exception(fn);
  }
}

// Runs a host entry point's body that returns a value; any exception is noted
// (note_fault) and `fallback` returned.
template <typename R, typename F>
R guarded_value(const char* fn, R fallback, F&& body) noexcept {
  try {
    return body();
  } catch (...) {
    note_fault(fn);
    return fallback;
  }
}

}  // namespace jaxonnx
