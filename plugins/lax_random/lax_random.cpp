// lax_random: JAX's typed-key PRNG primitives (random_seed, random_wrap,
// random_unwrap, random_bits, random_split, random_fold_in, random_gamma) and the
// threefry2x32 hash they are built on, with ONNX integer ops, bit for bit.
//
// Keys: the importer hands a key<fry> array of shape S to plugins as its key
// data, uint32 of shape S + (2,). random_wrap / random_unwrap are therefore
// identities (no node), and a key input of the model is the uint32[..., 2] of
// jax.random.key_data(key) (or a raw jax.random.PRNGKey). rbg and unsafe_rbg
// keys (uint32[..., 4]) never reach these lowerings: jaxonnx._keys replaces
// their random_* primitives by JAX's implementation on the key data, which
// binds threefry2x32, iota_2x32_shape and rng_bit_generator (lowered here).
//
// threefry2x32 (Salmon et al., Random123): 20 rounds of
//   x0 += x1; x1 = rotl(x1, r) ^ x0
// with rotations [13, 15, 26, 6] / [17, 29, 16, 24] alternating every four
// rounds, and a key injection (ks = [k1, k2, k1 ^ k2 ^ 0x1BD11BDA], plus the
// injection count on the second word) every four rounds. uint32 Add in ONNX
// wraps modulo 2^32 like JAX's; rotl is BitShift LEFT | BitShift RIGHT (never
// by 0 or 32: all rotations are in 6..29). Unrolled: no Loop.
//
// random_bits / random_split follow JAX's jax_threefry_partitionable=True
// algorithm (the default since JAX 0.5): the counters of an output of shape S
// are the 64-bit row-major iota over S split into (hi, lo) uint32 words, and
// the two hash outputs are combined: 32 bits -> b1 ^ b2, 8/16 bits -> that
// truncated (Cast wraps), 64 bits -> (b1 << 32) | b2; split stacks (b1, b2)
// as the new key data. The counters come from Range over the runtime element
// count, so symbolic shapes work. The legacy (non-partitionable) algorithm is
// not implemented: the Python front end refuses to convert with
// jax_threefry_partitionable=False.
//
// random_gamma (jax.random.gamma / loggamma / beta / dirichlet) replays JAX's
// Marsaglia-Tsang program on these draws with nested Loops: gamma.cpp.
// rng_bit_generator (lax.rng_bit_generator) is XLA's CPU Philox / threefry
// expansion, bit for bit: rng_bit_generator.cpp. rng_uniform (XLA's stateful
// RNG, not reproducible even in JAX) draws with RandomUniformLike: rng_uniform.cpp.
//
// random_fold_in(key, msg) = threefry(key, (0, uint32(msg))); random_seed(s) =
// (uint32(s >> 32), uint32(s)) (the high word is 0 for seeds of 32 bits or
// less, as JAX's shift by the full width gives 0).
#include <jaxonnx/plugin.hpp>

#include "threefry.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lax_random {
void lower_random_gamma(Lowering& L);        // gamma.cpp
void lower_rng_bit_generator(Lowering& L);   // rng_bit_generator.cpp
void lower_rng_uniform(Lowering& L);         // rng_uniform.cpp
}  // namespace lax_random

namespace {

using namespace jaxonnx::sdk;
using namespace lax_random;

// Two same-shaped uint32 words stacked on a new trailing axis (key data).
Value stack2(Lowering& L, const U32& a, const U32& b, const Aval& out) {
  std::vector<int64_t> axis{static_cast<int64_t>(a.s.size())};
  Shape s1 = a.s;
  s1.push_back(Dim(1));
  Value ua = L.op("Unsqueeze", {a.v, i64s(L, axis)}, u32_aval(s1));
  Value ub = L.op("Unsqueeze", {b.v, i64s(L, axis)}, u32_aval(s1));
  return L.op("Concat", {ua, ub}, out, {Attr::i("axis", -1)});
}

// A shape param (a tuple of ints / symbolic dims).
Shape shape_param(Lowering& L) { return L.param("shape").as_dims(); }

// ---------------------------------------------------------------- lowerings --

void check_impl(Lowering& L) {
  Param impl = L.param("impl");
  std::string name = impl.has("name") ? impl.field("name").as_string() : "";
  if (name != "threefry2x32")
    L.fail("param 'impl' is '" + name + "'; only the threefry2x32 PRNG implementation is supported");
}

// threefry2x32(k1, k2, x1, x2) -> (y1, y2), all uint32, broadcast.
void lower_threefry2x32(Lowering& L) {
  std::vector<U32> in;
  for (size_t i = 0; i < 4; ++i) {
    Aval a = L.in_aval(i);
    if (a.dtype != dtype::u32) L.fail("threefry2x32 takes uint32 operands, got " + a.str());
    in.push_back({L.input(i), a.shape});
  }
  auto [y1, y2] = threefry(L, in[0], in[1], in[2], in[3]);
  L.bind(0, y1.v);
  L.bind(1, y2.v);
}

// random_wrap / random_unwrap: key data and typed keys are the same value here.
void lower_wrap(Lowering& L) {
  check_impl(L);
  L.bind(0, L.input(0));
}
void lower_unwrap(Lowering& L) { L.bind(0, L.input(0)); }

// random_seed(seeds): key data (uint32(seed >> 32), uint32(seed)).
void lower_seed(Lowering& L) {
  check_impl(L);
  Aval in = L.in_aval(0);
  if (!dtype::is_int(in.dtype)) L.fail("random_seed needs integer seeds, got " + in.str());
  Value s = L.input(0);
  U32 lo{cast(L, s, in, dtype::u32), in.shape};  // wraps (sign-extends first), as in JAX
  U32 hi;
  if (dtype::itemsize(in.dtype) == 8) {
    // Logical shift of the 64-bit pattern (BitShift is unsigned-only).
    Value u = cast(L, s, in, dtype::u64);
    Value sh = L.op("BitShift", {u, L.constant(std::vector<uint64_t>{32}, {})}, in.with_dtype(dtype::u64),
                    {Attr::s("direction", "RIGHT")});
    hi = {cast(L, sh, in.with_dtype(dtype::u64), dtype::u32), in.shape};
  } else {
    uint32_t zero = 0;
    Value shp = L.op("Shape", {s}, Aval(dtype::i64, {in.rank()}));
    hi = {L.op("ConstantOfShape", {shp}, u32_aval(in.shape),
               {Attr::tensor("value", dtype::u32, {1}, &zero, sizeof(zero))}),
          in.shape};
  }
  L.bind(0, stack2(L, hi, lo, L.out_aval(0)));
}

// random_bits(keys; bit_width, shape): partitionable threefry bits.
void lower_bits(Lowering& L) {
  Shape shape = shape_param(L);
  int64_t width = L.param("bit_width").as_int();
  Aval out = L.out_aval(0);
  auto [k1, k2] = key_words(L, L.input(0), L.in_aval(0), shape.size());
  auto [hi, lo] = iota_2x32(L, shape);
  auto [b1, b2] = threefry(L, k1, k2, hi, lo);
  Aval full = u32_aval(out.shape);
  switch (width) {
    case 32: L.bind(0, bitwise(L, "BitwiseXor", {b1.v, b2.v}, full)); return;
    case 8: case 16: {
      Value x = bitwise(L, "BitwiseXor", {b1.v, b2.v}, full);
      L.bind(0, cast(L, x, full, out.dtype));  // Cast uint32 -> uint8/16 keeps the low bits
      return;
    }
    case 64: {
      Aval a64 = full.with_dtype(dtype::u64);
      Value h = L.op("BitShift", {cast(L, b1.v, full, dtype::u64), L.constant(std::vector<uint64_t>{32}, {})},
                     a64, {Attr::s("direction", "LEFT")});
      L.bind(0, bitwise(L, "BitwiseOr", {h, cast(L, b2.v, full, dtype::u64)}, a64));
      return;
    }
    default: L.fail("param 'bit_width' is " + std::to_string(width) + "; expected 8, 16, 32 or 64");
  }
}

// random_split(keys; shape): new key data (b1, b2) for each counter of `shape`.
void lower_split(Lowering& L) {
  Shape shape = shape_param(L);
  auto [k1, k2] = key_words(L, L.input(0), L.in_aval(0), shape.size());
  auto [hi, lo] = iota_2x32(L, shape);
  auto [b1, b2] = threefry(L, k1, k2, hi, lo);
  L.bind(0, stack2(L, b1, b2, L.out_aval(0)));
}

// iota_2x32_shape(; shape): the (hi, lo) words of the 64-bit iota over `shape`
// (JAX's threefry split and bits bind it; rbg keys reach it through them).
void lower_iota_2x32_shape(Lowering& L) {
  Shape shape = shape_param(L);
  auto [hi, lo] = iota_2x32(L, shape);
  for (auto [i, w] : {std::pair<size_t, U32>{0, hi}, {1, lo}}) {
    Value v = w.v;
    if (w.s != shape) v = L.op("Expand", {v, shape_value(L, shape)}, u32_aval(shape));  // a constant 0 word
    L.bind(i, v);
  }
}

// random_fold_in(keys, msgs): threefry(key, (0, uint32(msg))) as the new key.
void lower_fold_in(Lowering& L) {
  Aval ma = L.in_aval(1);
  if (!dtype::is_int(ma.dtype)) L.fail("random_fold_in needs integer data, got " + ma.str());
  auto [k1, k2] = key_words(L, L.input(0), L.in_aval(0), 0);
  U32 msg{cast(L, L.input(1), ma, dtype::u32), ma.shape};  // wraps, like jnp.asarray(.., uint32)
  auto [b1, b2] = threefry(L, k1, k2, {u32(L, 0), {}}, msg);
  // Both words must have the full shape before stacking.
  Shape full = broadcast(b1.s, b2.s);
  if (b1.s != full) b1 = {L.op("Expand", {b1.v, shape_value(L, full)}, u32_aval(full)), full};
  if (b2.s != full) b2 = {L.op("Expand", {b2.v, shape_value(L, full)}, u32_aval(full)), full};
  L.bind(0, stack2(L, b1, b2, L.out_aval(0)));
}

}  // namespace

JAXONNX_PLUGIN("lax_random", "1.0.0") {
  const std::initializer_list<const char*> kHash = {"Add", "BitShift", "BitwiseOr", "BitwiseXor"};
  plugin.primitive("threefry2x32", lower_threefry2x32)
      .emits(kHash)
      .doc("Threefry-2x32 hash (20 rounds, unrolled) with uint32 Add / BitShift / BitwiseOr / BitwiseXor");
  plugin.primitive("random_wrap", lower_wrap).emits({}).doc("identity: keys are their uint32[..., 2] key data");
  plugin.primitive("random_unwrap", lower_unwrap).emits({}).doc("identity: keys are their uint32[..., 2] key data");
  plugin.primitive("random_seed", lower_seed)
      .emits({"Cast", "BitShift", "Shape", "ConstantOfShape", "Unsqueeze", "Concat"})
      .doc("threefry2x32 key data (seed >> 32, seed) as uint32[..., 2]");
  plugin.primitive("random_bits", lower_bits)
      .emits(kHash)
      .emits({"Gather", "Unsqueeze", "Range", "Reshape", "Squeeze", "Cast", "Div", "Mul"})
      .emits_shape_ops()
      .doc("threefry2x32 (partitionable) of the 64-bit iota over the output shape");
  plugin.primitive("random_split", lower_split)
      .emits(kHash)
      .emits({"Gather", "Unsqueeze", "Range", "Reshape", "Squeeze", "Cast", "Div", "Mul", "Concat"})
      .emits_shape_ops()
      .doc("threefry2x32 (partitionable) of the 64-bit iota over the split shape, as new key data");
  plugin.primitive("random_fold_in", lower_fold_in)
      .emits(kHash)
      .emits({"Gather", "Unsqueeze", "Cast", "Expand", "Concat"})
      .emits_shape_ops()
      .doc("threefry2x32(key, (0, uint32(data))) as new key data");
  plugin.primitive("iota_2x32_shape", lower_iota_2x32_shape)
      .emits({"Range", "Reshape", "Squeeze", "Cast", "Div", "Mul", "Expand"})
      .emits_shape_ops()
      .doc("the 64-bit row-major iota over a shape as (hi, lo) uint32 words");
  plugin.primitive("random_gamma", lax_random::lower_random_gamma)
      .emits(kHash)
      .emits({"Gather", "Unsqueeze", "Range", "Reshape", "Squeeze", "Cast", "Div", "Mul", "Expand", "Sub", "Sqrt",
              "GreaterOrEqual", "Where", "Loop", "LessOrEqual", "ReduceSum", "Greater", "And", "Log", "Equal", "Neg",
              "Less", "Max", "Pow", "Or", "ConstantOfShape"})
      .emits_shape_ops()
      .doc("Marsaglia-Tsang rejection sampling over threefry draws, JAX's _gamma_one per element, as nested Loops");
  plugin.primitive("rng_bit_generator", lax_random::lower_rng_bit_generator)
      .emits(kHash)
      .emits({"Gather", "Cast", "Less", "Mul", "Unsqueeze", "Concat", "Reshape", "Slice", "Range", "Squeeze"})
      .emits_shape_ops()
      .doc("XLA's CPU RngBitGenerator (Philox-4x32-10 by default, or threefry2x32), bit for bit");
  plugin.primitive("rng_uniform", lax_random::lower_rng_uniform)
      .emits({"ConstantOfShape", "RandomUniformLike", "Cast", "Sub", "Mul", "Floor", "Add", "Min"})
      .emits_shape_ops()
      .doc("XLA's stateful uniform RNG (values differ per call in JAX too): onnxruntime's RandomUniformLike, "
           "seeded per equation, scaled to [a, b)");
}
