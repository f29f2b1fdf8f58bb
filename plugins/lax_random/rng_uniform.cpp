// rng_uniform(a, b; shape): XLA's stateful RNG (lax.rng_uniform), uniform in
// [a, b). Its values come from state hidden in the XLA runtime and differ
// from call to call in JAX itself, so no model can repeat them; this is the
// same contract with onnxruntime's generator: RandomUniformLike draws u in
// [0, 1) (float64 for float64 results, else float32) and the result is
// a + u (b - a) (integers: a + floor(u (b - a)), at most b - 1). Each
// equation gets its own seed (from the graph position of its nodes, so
// conversion stays deterministic and two draws never fold into one); a
// session then gives a new draw on every run, as JAX does. onnxruntime has
// no RandomUniformLike kernel for its opset-22 version, so from opset 22 up
// the conversion is refused with a message saying so (opset <= 21 works).
#include <jaxonnx/plugin.hpp>

#include <string>

namespace lax_random {

using namespace jaxonnx::sdk;

void lower_rng_uniform(Lowering& L) {
  Aval aa = L.in_aval(0), out = L.out_aval(0);
  if (L.opset() >= 22)
    L.fail("rng_uniform: XLA's stateful RNG has no reproducible values (they differ between calls in JAX "
           "itself); jaxonnx draws them with RandomUniformLike, which onnxruntime implements only up to "
           "opset 21 (this conversion targets opset " + std::to_string(L.opset()) +
           "): convert with opset=21, or draw with jax.random from a key input (converted bit for bit)");
  int32_t t = out.dtype;
  bool is_f = dtype::is_float(t);
  if (!is_f && !dtype::is_int(t))
    L.fail(std::string("rng_uniform: dtype ") + dtype::name(t) + " is not supported");
  int32_t ut = t == dtype::f64 || !is_f ? dtype::f64 : dtype::f32;
  int32_t ct = is_f ? t : dtype::f64;  // the arithmetic type
  Aval u = out.with_dtype(ut), c = out.with_dtype(ct);
  float zero = 0;  // onnxruntime's RandomUniformLike takes float inputs only
  Value like = L.op("ConstantOfShape", {shape_value(L, out.shape)}, out.with_dtype(dtype::f32),
                    {Attr::tensor("value", dtype::f32, {1}, &zero, sizeof zero)});
  Value draw = L.op("RandomUniformLike", {like}, u,
                    {Attr::i("dtype", ut), Attr::f("seed", static_cast<double>(like))});
  Value a = cast(L, L.input(0), aa, ct), b = cast(L, L.input(1), aa, ct);
  Aval sc(ct, {});
  Value span = L.op("Mul", {cast(L, draw, u, ct), L.op("Sub", {b, a}, sc)}, c);
  if (!is_f) span = L.op("Floor", {span}, c);
  Value r = L.op("Add", {a, span}, c);
  if (!is_f) r = L.op("Min", {r, L.op("Sub", {b, scalar(L, ct, 1.0)}, sc)}, c);
  L.bind(0, cast(L, r, c, t));
}

}  // namespace lax_random
