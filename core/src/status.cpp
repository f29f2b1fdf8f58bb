#include "status.hpp"

namespace jaxonnx {
namespace {

// Built when the library loads, so that it exists when memory has run out.
jxo_status g_out_of_memory{JXO_INTERNAL, "the jaxonnx host ran out of memory", false};
jxo_status* out_of_memory() noexcept { return &g_out_of_memory; }

// The failure noted by a host call on this thread since the innermost
// FaultScope began; t_fault_oom when even the note could not be made.
thread_local std::optional<Failure> t_fault;
thread_local bool t_fault_oom = false;

int32_t known(int32_t code) {
  return code > JXO_OK && code <= JXO_INTERNAL ? code : JXO_ERROR;
}

}  // namespace

jxo_status* make_status(int32_t code, const std::string& message) noexcept {
  try {
    return new jxo_status{known(code), message};
  } catch (...) {
    return out_of_memory();
  }
}

jxo_status* make_status(int32_t code, const char* message) noexcept {
  try {
    return new jxo_status{known(code), message};
  } catch (...) {
    return out_of_memory();
  }
}

void release_status(jxo_status* s) noexcept {
  if (s && s->heap) delete s;
}

Failure take_status(jxo_status* s) {
  Failure f{known(s->code), s->message};
  release_status(s);
  return f;
}

namespace {
// The status for the exception in flight; may throw while building a message.
jxo_status* describe_current(const char* fn) {
  const std::string where = std::string(fn) + ": ";
  // A message that names its call already keeps its own words.
  auto named = [&](const char* what) {
    return std::string(what).rfind(fn, 0) == 0 ? std::string(what) : where + what;
  };
  try {
    throw;
  } catch (const EquationError& e) {
    return make_status(JXO_NESTED_FAILURE, e.what());
  } catch (const HostError& e) {
    return make_status(e.code, named(e.what()));
  } catch (const ConversionError& e) {
    return make_status(JXO_INVALID_ARGUMENT, named(e.what()));
  } catch (const std::bad_alloc&) {
    return out_of_memory();
  } catch (const std::exception& e) {
    return make_status(JXO_INTERNAL, "internal error in the jaxonnx host, " + where + e.what());
  } catch (...) {
    return make_status(JXO_INTERNAL,
                       "internal error in the jaxonnx host, " + where + "a non-standard exception");
  }
}
}  // namespace

jxo_status* status_from_current_exception(const char* fn) noexcept {
  try {
    return describe_current(fn);
  } catch (...) {
    return out_of_memory();  // building the message failed
  }
}

void note_fault(const char* fn) noexcept {
  jxo_status* s = status_from_current_exception(fn);
  if (!t_fault && !t_fault_oom) {
    try {
      t_fault = Failure{s->code, s->message};
    } catch (...) {
      t_fault_oom = true;  // no memory for the note: say so when it is taken
    }
  }
  release_status(s);
}

FaultScope::FaultScope() noexcept : outer_(std::move(t_fault)), outer_oom_(t_fault_oom) {
  t_fault.reset();
  t_fault_oom = false;
}
FaultScope::~FaultScope() {
  t_fault = std::move(outer_);
  t_fault_oom = outer_oom_;
}

std::optional<Failure> FaultScope::take() {
  std::optional<Failure> f = std::move(t_fault);
  if (!f && t_fault_oom) f = Failure{JXO_INTERNAL, g_out_of_memory.message};
  t_fault.reset();
  t_fault_oom = false;
  return f;
}

}  // namespace jaxonnx
