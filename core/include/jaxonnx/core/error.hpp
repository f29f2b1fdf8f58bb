// The one exception type the core raises to its callers.
#pragma once

#include <stdexcept>
#include <string>

namespace jaxonnx {

// A conversion cannot proceed. The message is complete and meant for the user.
struct ConversionError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace jaxonnx
