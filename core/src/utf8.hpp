// Private: UTF-8 as Python decodes it. Plugin names, descriptions and file
// paths reach Python, so the host checks them, and writes the ones it cannot
// pass on as they are (a file name that is not UTF-8) printably.
#pragma once

#include <string>

namespace jaxonnx {

// Whether `s` is valid UTF-8 as Python decodes it (no overlong forms, no
// surrogates, nothing past U+10FFFF).
bool is_utf8(const std::string& s);

// `s` with every byte that is not part of valid UTF-8 written as \xNN, for
// messages about file names that are not UTF-8.
std::string printable(const std::string& s);

}  // namespace jaxonnx
