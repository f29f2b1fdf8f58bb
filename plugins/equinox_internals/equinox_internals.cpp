// equinox_internals: the primitives equinox emits around vmap of a while
// loop (equinox.internal: unvmap_any / unvmap_all / unvmap_max,
// select_if_vmap, nonbatchable). In a traced (already batched) program they
// are plain functions:
// - unvmap_any / unvmap_all / unvmap_max: any / all / max over every element
//   (ignoring batch axes is what vmap made of them), a scalar.
// - select_if_vmap(pred, x, y) and nonbatchable(x): x.
#include <jaxonnx/plugin.hpp>

#include <string>

namespace {

using namespace jaxonnx::sdk;

// Reduces input 0 over all axes with `op` (keepdims 0) to a scalar of `t`.
Value reduce_all(Lowering& L, const char* op, Value x, const Aval& a) {
  if (a.rank() == 0) return x;
  return L.op(op, {flatten(L, x, a, Aval::of_unknown_shape(a.dtype))}, Aval(a.dtype, {}),
              {Attr::i("keepdims", 0)});
}

// any / all as ReduceMax / ReduceMin over uint8 (onnxruntime has no bool reductions).
void lower_unvmap_bool(Lowering& L, const char* op) {
  Aval a = L.in_aval(0);
  Value x = cast(L, L.input(0), a, dtype::u8);
  Value r = reduce_all(L, op, x, a.with_dtype(dtype::u8));
  L.bind(0, cast(L, r, Aval(dtype::u8, {}), dtype::boolean));
}

// max; 16-bit integers in int32 (onnxruntime's ReduceMax lacks them), bool as any.
void lower_unvmap_max(Lowering& L) {
  Aval a = L.in_aval(0);
  int32_t t = a.dtype;
  int32_t c = t == dtype::boolean ? dtype::u8
              : (t == dtype::i16 || t == dtype::u16) ? dtype::i32
              : t == dtype::bf16 ? dtype::f32
              : t;
  Value r = reduce_all(L, "ReduceMax", cast(L, L.input(0), a, c), a.with_dtype(c));
  L.bind(0, cast(L, r, Aval(c, {}), t));
}

void lower_first(Lowering& L, size_t i) { L.bind(0, L.op("Identity", {L.input(i)}, L.out_aval(0))); }

}  // namespace

JAXONNX_PLUGIN("equinox_internals", "0.1.0") {
  plugin.primitive("unvmap_any", [](Lowering& L) { lower_unvmap_bool(L, "ReduceMax"); })
      .emits({"Cast", "Reshape", "ReduceMax"})
      .summary("equinox: any over all elements");
  plugin.primitive("unvmap_all", [](Lowering& L) { lower_unvmap_bool(L, "ReduceMin"); })
      .emits({"Cast", "Reshape", "ReduceMin"})
      .summary("equinox: all over all elements");
  plugin.primitive("unvmap_max", lower_unvmap_max)
      .emits({"Cast", "Reshape", "ReduceMax"})
      .summary("equinox: max over all elements");
  plugin.primitive("select_if_vmap", [](Lowering& L) { lower_first(L, 1); })
      .emits({"Identity"})
      .summary("equinox: x (the select is vmap's, already applied)");
  plugin.primitive("nonbatchable", [](Lowering& L) { lower_first(L, 0); })
      .emits({"Identity"})
      .summary("equinox: the identity");
}
