// Which plugin call is running, as a line written to a file descriptor before
// each call into a plugin's lowering, abstract eval or rewrite rule. Off unless
// a process made to run plugin code for another (jaxonnx.testing's testcase
// child) turns it on: when plugin code kills that process, the log's last line
// says where. One relaxed atomic load per call when off. Implemented in
// step_log.cpp.
#pragma once

#include <string>

namespace jaxonnx {

// Writes lines "<what>\t<plugin>\t<name>\n" to `fd` from now on; -1 turns it off.
void set_step_log(int fd);

// Logs one plugin call (what: "lower", "abstract_eval", "rule"; name: the
// primitive or rule) when the log is on, and "done" when it returned (a call
// that ran the host's own code in between, such as lower_jaxpr, logs the calls
// it makes in between).
void log_step(const char* what, const std::string& plugin, const std::string& name) noexcept;

}  // namespace jaxonnx
