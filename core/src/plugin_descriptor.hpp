// Private: what the host keeps of a plugin's descriptor (the jxo_plugin_desc
// its entry point returns), copied out and validated field by field, so that
// nothing the plugin hands over is read again later.
#pragma once

#include <string>

#include "jaxonnx/core/plugin_host.hpp"
#include "jaxonnx/plugin_abi.h"

namespace jaxonnx {

// The plugin at `path` as its descriptor describes it; a PluginLoadError
// says what is invalid. The primitives' and rules' `plugin` back-pointers are
// left for the caller to set once the LoadedPlugin has its final address.
LoadedPlugin describe_plugin(const std::string& path, const jxo_plugin_desc* desc);

}  // namespace jaxonnx
