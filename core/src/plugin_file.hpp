// Private: whether a file may be handed to dlopen at all. Code loaded from a
// plugin runs in this process, so what anyone but the user (or root) could
// replace is refused, and so is what would hang or kill the process inside
// dlopen (a FIFO, a device, a truncated ELF file).
#pragma once

#include <string>

#if !defined(_WIN32)
#include <sys/stat.h>
#endif

namespace jaxonnx {

#if !defined(_WIN32)
// Why a plugin file or folder (`what`) with this stat is not trusted, or "":
// world-writable, or owned by another user than the caller and root.
std::string untrusted_reason(const struct stat& st, const char* what);
#endif

// Why `path` must not be handed to dlopen, or "": it is not a regular file,
// it is not trusted, or it is a truncated or foreign ELF file.
std::string file_problem(const std::string& path);

}  // namespace jaxonnx
