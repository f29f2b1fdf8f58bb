// Private: load_plugin for the registry's scan, which may have checked the
// file already (file_problem, or the caller's gate) and then skips that check.
#pragma once

#include <string>

#include "jaxonnx/core/plugin_host.hpp"

namespace jaxonnx {

const LoadedPlugin& load_plugin_file(const std::string& path, const LoadStep& step, bool check_file);

}  // namespace jaxonnx
