#include "utf8.hpp"

#include <cstdio>

namespace jaxonnx {

bool is_utf8(const std::string& s) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  for (size_t i = 0; i < s.size();) {
    unsigned char c = byte(i);
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c < 0x80) n = 0;
    else if (c >= 0xC2 && c <= 0xDF) n = 1;
    else if (c >= 0xE0 && c <= 0xEF) n = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) n = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return false;
    if (n && i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      unsigned char b = byte(i + k);
      if (k == 1 ? (b < lo || b > hi) : (b >> 6) != 0x2) return false;
    }
    i += n + 1;
  }
  return true;
}

std::string printable(const std::string& s) {
  if (is_utf8(s)) return s;
  std::string out;
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      out += ch;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

}  // namespace jaxonnx
