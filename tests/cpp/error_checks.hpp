// What the C++ tests check of an error: its message mentions given parts, and
// lowering a jaxpr fails with a ConversionError.
#pragma once

#include <doctest/doctest.h>

#include <initializer_list>
#include <string>

#include "jaxonnx/core/converter.hpp"
#include "jaxonnx/core/error.hpp"

namespace jaxonnx::test {

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// One check per part, each naming the part and the message when it fails.
inline void check_mentions(const std::string& message, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts) {
    INFO("message: " << message);
    INFO("missing: " << part);
    CHECK(contains(message, part));
  }
}

// The message lower_to_ir throws for `program`; fails the test if it converts.
inline std::string conversion_error(const ClosedJaxpr& program, const Registry& reg,
                                    const ConvertOptions& options = {}) {
  try {
    lower_to_ir(program, reg, options);
  } catch (const ConversionError& e) {
    return e.what();
  }
  FAIL("expected a ConversionError");
  return {};
}

}  // namespace jaxonnx::test
