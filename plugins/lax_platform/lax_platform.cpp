// lax_platform: platform_index, the branch index lax.platform_dependent
// (and jnp functions built on it) switches on. The model is lowered for
// onnxruntime's CPU, so it is the constant index of the branch listing
// "cpu", else of the default branch (None).
#include <jaxonnx/plugin.hpp>

#include <string>

namespace {

using namespace jaxonnx::sdk;

void lower_platform_index(Lowering& L) {
  std::vector<Param> branches = L.param("platforms").items();
  int64_t found = -1, fallback = -1;
  for (size_t i = 0; i < branches.size() && found < 0; ++i) {
    if (branches[i].is_none()) {
      if (fallback < 0) fallback = static_cast<int64_t>(i);
      continue;
    }
    for (const Param& p : branches[i].items())
      if (p.as_string() == "cpu") found = static_cast<int64_t>(i);
  }
  if (found < 0) found = fallback;
  if (found < 0)
    L.fail("platform_index: no branch is for 'cpu' and there is no default branch; "
           "the ONNX model runs the CPU branch");
  L.bind(0, scalar(L, L.out_aval(0).dtype, static_cast<double>(found)));
}

}  // namespace

JAXONNX_PLUGIN("lax_platform", "0.1.0") {
  plugin.primitive("platform_index", lower_platform_index)
      .emits({})
      .summary("the constant index of the 'cpu' (else default) branch");
}
