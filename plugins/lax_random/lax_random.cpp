// lax_random: JAX's typed-key PRNG primitives (random_seed, random_wrap,
// random_unwrap, random_bits, random_split, random_fold_in) and the
// threefry2x32 hash they are built on, with ONNX integer ops, bit for bit.
//
// Keys: the importer hands a key<fry> array of shape S to plugins as its key
// data, uint32 of shape S + (2,). random_wrap / random_unwrap are therefore
// identities (no node), and a key input of the model is the uint32[..., 2] of
// jax.random.key_data(key) (or a raw jax.random.PRNGKey).
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
// random_fold_in(key, msg) = threefry(key, (0, uint32(msg))); random_seed(s) =
// (uint32(s >> 32), uint32(s)) (the high word is 0 for seeds of 32 bits or
// less, as JAX's shift by the full width gives 0).
#include <jaxonnx/plugin.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

// Right-aligned (NumPy / ONNX multidirectional) broadcast of two shapes.
Shape broadcast(const Shape& a, const Shape& b) {
  const Shape& lng = a.size() >= b.size() ? a : b;
  const Shape& sht = a.size() >= b.size() ? b : a;
  Shape out = lng;
  size_t off = lng.size() - sht.size();
  for (size_t i = 0; i < sht.size(); ++i)
    if (out[off + i] == Dim(1)) out[off + i] = sht[i];
  return out;
}

Aval u32_aval(Shape s) { return Aval(dtype::u32, std::move(s)); }

Value u32(Lowering& L, uint32_t v) { return L.constant(std::vector<uint32_t>{v}, {}); }

// A uint32 value together with its shape.
struct U32 {
  Value v;
  Shape s;
};

U32 add(Lowering& L, const U32& a, const U32& b) {
  Shape s = broadcast(a.s, b.s);
  return {L.op("Add", {a.v, b.v}, u32_aval(s)), s};
}
U32 bxor(Lowering& L, const U32& a, const U32& b) {
  Shape s = broadcast(a.s, b.s);
  return {L.op("BitwiseXor", {a.v, b.v}, u32_aval(s)), s};
}
U32 rotl(Lowering& L, const U32& x, uint32_t r) {
  Aval a = u32_aval(x.s);
  Value hi = L.op("BitShift", {x.v, u32(L, r)}, a, {Attr::s("direction", "LEFT")});
  Value lo = L.op("BitShift", {x.v, u32(L, 32 - r)}, a, {Attr::s("direction", "RIGHT")});
  return {L.op("BitwiseOr", {hi, lo}, a), x.s};
}

// Threefry-2x32 of counters (x1, x2) under key (k1, k2), all broadcast
// together; the same schedule as jax._src.random.threefry2x32 (unrolled).
std::pair<U32, U32> threefry(Lowering& L, const U32& k1, const U32& k2, const U32& x1, const U32& x2) {
  static const uint32_t kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  U32 ks[3] = {k1, k2, bxor(L, bxor(L, k1, k2), {u32(L, 0x1BD11BDA), {}})};
  U32 a = add(L, x1, ks[0]);
  U32 b = add(L, x2, ks[1]);
  for (uint32_t i = 1; i <= 5; ++i) {
    for (uint32_t r : kRot[(i - 1) % 2]) {
      a = add(L, a, b);
      b = bxor(L, a, rotl(L, b, r));
    }
    // Injection i: ks[i % 3] on the first word, ks[(i + 1) % 3] + i on the
    // second (the constant folds into the key-shaped term, which is small).
    a = add(L, a, ks[i % 3]);
    b = add(L, b, add(L, ks[(i + 1) % 3], {u32(L, i), {}}));
  }
  return {a, b};
}

// Key data of shape K + (2,) -> its two words, each of shape K followed by
// `extra` unit dims (to broadcast against counters of rank `extra`).
std::pair<U32, U32> key_words(Lowering& L, Value key, const Aval& ka, size_t extra) {
  if (ka.rank() < 1 || ka.shape.back() != Dim(2) || ka.dtype != dtype::u32)
    L.fail("expected threefry2x32 key data uint32[..., 2], got " + ka.str());
  int64_t last = ka.rank() - 1;
  Shape k(ka.shape.begin(), ka.shape.end() - 1);
  Shape ke = k;
  std::vector<int64_t> axes;
  for (size_t i = 0; i < extra; ++i) {
    axes.push_back(static_cast<int64_t>(ke.size()));
    ke.push_back(Dim(1));
  }
  auto word = [&](int64_t w) {
    Value v = L.op("Gather", {key, scalar(L, dtype::i64, static_cast<double>(w))}, u32_aval(k),
                   {Attr::i("axis", last)});
    // Without key batch dims the words are scalars and broadcast as they are.
    if (!k.empty() && !axes.empty()) v = L.op("Unsqueeze", {v, i64s(L, axes)}, u32_aval(ke));
    return U32{v, k.empty() ? Shape{} : ke};
  };
  return {word(0), word(1)};
}

// JAX's iota_2x32_shape: the row-major 64-bit iota over `shape` as (hi, lo)
// uint32 words. Scalars: (0, 0).
std::pair<U32, U32> iota_2x32(Lowering& L, const Shape& shape) {
  if (shape.empty()) return {{u32(L, 0), {}}, {u32(L, 0), {}}};
  Aval i64_1(dtype::i64, {1});
  // The element count: static dims multiply into one constant.
  int64_t stat = 1;
  bool all_static = true;
  std::vector<Value> syms;
  for (const Dim& d : shape) {
    if (d.is_static()) stat *= d.value;
    else { all_static = false; syms.push_back(dim_value(L, d)); }
  }
  Value n = i64s(L, {stat});
  for (Value s : syms) n = L.op("Mul", {n, s}, i64_1);
  n = L.op("Squeeze", {n}, Aval(dtype::i64, {}));
  Dim total = all_static ? Dim(stat) : Dim::sym("jaxonnx_random_n");
  Value idx = L.op("Range", {scalar(L, dtype::i64, 0), n, scalar(L, dtype::i64, 1)},
                   Aval(dtype::i64, {total}));
  idx = L.op("Reshape", {idx, shape_value(L, shape)}, Aval(dtype::i64, shape));
  // Cast int64 -> uint32 wraps: the low word.
  U32 lo{cast(L, idx, Aval(dtype::i64, shape), dtype::u32), shape};
  if (all_static && stat <= (int64_t{1} << 32)) return {{u32(L, 0), {}}, lo};
  Value hi = L.op("Div", {idx, scalar(L, dtype::i64, 4294967296.0)}, Aval(dtype::i64, shape));
  return {{cast(L, hi, Aval(dtype::i64, shape), dtype::u32), shape}, lo};
}

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
    case 32: L.bind(0, L.op("BitwiseXor", {b1.v, b2.v}, full)); return;
    case 8: case 16: {
      Value x = L.op("BitwiseXor", {b1.v, b2.v}, full);
      L.bind(0, cast(L, x, full, out.dtype));  // Cast uint32 -> uint8/16 keeps the low bits
      return;
    }
    case 64: {
      Aval a64 = full.with_dtype(dtype::u64);
      Value h = L.op("BitShift", {cast(L, b1.v, full, dtype::u64), L.constant(std::vector<uint64_t>{32}, {})},
                     a64, {Attr::s("direction", "LEFT")});
      L.bind(0, L.op("BitwiseOr", {h, cast(L, b2.v, full, dtype::u64)}, a64));
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
}
