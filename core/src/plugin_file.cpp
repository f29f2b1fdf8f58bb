#include "plugin_file.hpp"

#include <cerrno>
#include <cstring>

#if defined(__linux__)
#include <elf.h>
#endif
#if !defined(_WIN32)
#include <fcntl.h>
#include <unistd.h>
#endif

#include <boost/filesystem.hpp>

#include "jaxonnx/core/plugin_host.hpp"
#include "utf8.hpp"

namespace fs = boost::filesystem;

namespace jaxonnx {

#if !defined(_WIN32)
std::string untrusted_reason(const struct stat& st, const char* what) {
  char mode[16];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  if (st.st_mode & S_IWOTH)
    return std::string("the ") + what + " is world-writable (mode " + mode +
           "), so anyone could replace the code it holds; refused (chmod o-w to allow it)";
  if (st.st_uid != geteuid() && st.st_uid != 0)
    return std::string("the ") + what + " is owned by user id " + std::to_string(st.st_uid) +
           ", neither you nor root; refused (chown it to allow it)";
  return "";
}
#endif

namespace {

#if defined(__linux__)
// The ELF machine this process runs, as e_machine.
constexpr int kHostMachine =
#if defined(__x86_64__)
    EM_X86_64;
#elif defined(__aarch64__)
    EM_AARCH64;
#elif defined(__i386__)
    EM_386;
#elif defined(__arm__)
    EM_ARM;
#elif defined(__powerpc64__)
    EM_PPC64;
#elif defined(__s390x__)
    EM_S390;
#elif defined(__riscv)
    EM_RISCV;
#else
    -1;  // unknown: leave the check to dlopen
#endif

std::string machine_name(int m) {
  switch (m) {
    case EM_X86_64: return "x86-64";
    case EM_AARCH64: return "AArch64";
    case EM_386: return "x86 (32-bit)";
    case EM_ARM: return "ARM (32-bit)";
    case EM_PPC64: return "PowerPC 64";
    case EM_S390: return "s390x";
    case EM_RISCV: return "RISC-V";
    default: return "ELF machine " + std::to_string(m);
  }
}

bool read_at(int fd, void* buf, size_t n, uint64_t offset) {
  return pread(fd, buf, n, static_cast<off_t>(offset)) == static_cast<ssize_t>(n);
}

// dlopen maps an ELF file's segments without checking that they lie inside the
// file, and touching a page past the end raises SIGBUS: a truncated plugin
// (an interrupted copy) would kill the process. Refuse such files up front,
// and name a wrong architecture (glibc reports it as "No such file or
// directory"); anything that is not ELF is left to dlopen, whose message is better.
template <typename Ehdr, typename Phdr>
std::string elf_problem(int fd, uint64_t size, bool host_class) {
  Ehdr eh{};
  if (!read_at(fd, &eh, sizeof eh, 0)) return "";  // dlopen: "file too short"
  if (kHostMachine >= 0 && (eh.e_machine != kHostMachine || !host_class))
    return "it is built for " + machine_name(eh.e_machine) +
           (sizeof(Ehdr) == sizeof(Elf64_Ehdr) ? " (64-bit)" : " (32-bit)") +
           ", but this process runs on " + machine_name(kHostMachine) + " (" +
           std::to_string(8 * sizeof(void*)) + "-bit); rebuild the plugin for this platform";
  if (eh.e_phentsize != sizeof(Phdr)) return "";
  uint64_t end = uint64_t(eh.e_phoff) + uint64_t(eh.e_phnum) * sizeof(Phdr);
  if (end > size)
    return "its ELF program headers end at byte " + std::to_string(end) + " but the file has " +
           std::to_string(size) + " bytes (truncated?)";
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    Phdr ph{};
    if (!read_at(fd, &ph, sizeof ph, eh.e_phoff + uint64_t(i) * sizeof(Phdr))) return "";
    uint64_t seg_end = uint64_t(ph.p_offset) + uint64_t(ph.p_filesz);
    if (ph.p_type == PT_LOAD && seg_end > size)
      return "an ELF segment ends at byte " + std::to_string(seg_end) + " but the file has " +
             std::to_string(size) + " bytes (truncated?)";
  }
  return "";
}
#endif

}  // namespace

// Why `path` must not be handed to dlopen, or "": it is not a regular file
// (a FIFO would block the open forever, a device could do anything), it is
// not trusted, or it is a truncated or foreign ELF file. Opened without
// blocking and checked on the open descriptor, so what is checked is what
// was opened.
std::string file_problem(const std::string& path) {
#if defined(_WIN32)
  boost::system::error_code ec;
  if (!fs::is_regular_file(path, ec)) return "it is not a regular file";
  return "";
#else
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return std::string("it cannot be opened: ") + std::strerror(errno);
  struct Closer { int fd; ~Closer() { ::close(fd); } } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) return std::string("it cannot be inspected: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode))
    return std::string("it is not a regular file (") +
           (S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a folder"
            : S_ISSOCK(st.st_mode) ? "a socket" : "a device") + "); only regular files are loaded";
  if (std::string why = untrusted_reason(st, "file"); !why.empty()) return why;
#if defined(__linux__)
  unsigned char ident[EI_NIDENT] = {};
  if (!read_at(fd, ident, EI_NIDENT, 0) || std::memcmp(ident, ELFMAG, SELFMAG) != 0) return "";
  uint64_t size = static_cast<uint64_t>(st.st_size);
  std::string why;
  if (ident[EI_CLASS] == ELFCLASS64)
    why = elf_problem<Elf64_Ehdr, Elf64_Phdr>(fd, size, sizeof(void*) == 8);
  if (ident[EI_CLASS] == ELFCLASS32)
    why = elf_problem<Elf32_Ehdr, Elf32_Phdr>(fd, size, sizeof(void*) == 4);
  if (!why.empty()) return "it could not be loaded: " + printable(path) + ": " + why;
#endif
  return "";
#endif
}

bool is_plugin_file_name(const std::string& filename) {
fs::path p(filename);
  std::string ext = p.extension().string();
#if defined(_WIN32)
  return ext == ".dll";
#elif defined(__APPLE__)
  return ext == ".dylib" || ext == ".so";
#else
  return ext == ".so";
#endif
}

std::string plugin_file_problem(const std::string& path) { return file_problem(path); }

}  // namespace jaxonnx
