// The step log (step_log.hpp): unbuffered writes, so the line is in the file
// before the plugin code it names runs.
#include "jaxonnx/core/step_log.hpp"

#include <atomic>

#if !defined(_WIN32)
#include <unistd.h>
#endif

namespace jaxonnx {
namespace {
std::atomic<int> g_fd{-1};
}  // namespace

void set_step_log(int fd) { g_fd.store(fd, std::memory_order_relaxed); }

void log_step(const char* what, const std::string& plugin, const std::string& name) noexcept {
  int fd = g_fd.load(std::memory_order_relaxed);
  if (fd < 0) return;
#if !defined(_WIN32)
  try {
    auto field = [](std::string s) {  // one line, three fields, whatever the names hold
      for (char& c : s)
        if (c == '\n' || c == '\t' || c == '\r') c = ' ';
      return s;
    };
    std::string line = std::string(what) + "\t" + field(plugin) + "\t" + field(name) + "\n";
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
      ssize_t n = ::write(fd, p, left);
      if (n <= 0) return;
      p += n;
      left -= static_cast<size_t>(n);
    }
  } catch (...) {  // no memory for the line: the log is a help, not a duty
  }
#endif
}

}  // namespace jaxonnx
