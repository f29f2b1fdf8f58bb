// lax_unstack: unstack[axis] (jnp.unstack, and the transpose of stack under
// jax.grad): one Split along the axis into unit pieces, each Squeezed. A
// complex operand is split as it is carried (float[..., 2], its parts axis
// last; jaxonnx/complex.hpp).
#include <jaxonnx/complex.hpp>
#include <jaxonnx/plugin.hpp>

#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

void lower_unstack(Lowering& L) {
  const Aval in = L.in_aval(0);
  int64_t axis = L.param("axis").as_int();
  if (axis < 0) axis += in.rank();
  const size_t n = L.num_outputs();
  if (n == 0) return;
  Shape piece = in.shape;
  piece[static_cast<size_t>(axis)] = 1;
  std::vector<Value> parts;
  if (n == 1) {
    parts.push_back(L.input(0));
  } else {
    parts = L.op_n("Split", {L.input(0), i64s(L, std::vector<int64_t>(n, 1))},
                   std::vector<Aval>(n, complex::packed(in.with_shape(piece))), {Attr::i("axis", axis)});
  }
  for (size_t i = 0; i < n; ++i)
    if (L.output_used(i)) L.bind(i, L.op("Squeeze", {parts[i], i64s(L, {axis})}, complex::packed(L.out_aval(i))));
}

}  // namespace

JAXONNX_PLUGIN("lax_unstack", "0.1.0") {
  plugin.primitive("unstack", lower_unstack).emits({"Split", "Squeeze"}).doc(onnx_doc("Split"));
}
