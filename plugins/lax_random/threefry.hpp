// The threefry2x32 hash and JAX's counter layout as ONNX uint32 ops, shared
// by the lax_random lowerings (lax_random.cpp, gamma.cpp). See lax_random.cpp
// for the algorithm and its conventions.
#pragma once

#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lax_random {

using namespace jaxonnx::sdk;

// Right-aligned (NumPy / ONNX multidirectional) broadcast of two shapes.
inline Shape broadcast(const Shape& a, const Shape& b) {
  const Shape& lng = a.size() >= b.size() ? a : b;
  const Shape& sht = a.size() >= b.size() ? b : a;
  Shape out = lng;
  size_t off = lng.size() - sht.size();
  for (size_t i = 0; i < sht.size(); ++i)
    if (out[off + i] == Dim(1)) out[off + i] = sht[i];
  return out;
}

inline Aval u32_aval(Shape s) { return Aval(dtype::u32, std::move(s)); }

inline Value u32(Lowering& L, uint32_t v) { return L.constant(std::vector<uint32_t>{v}, {}); }

// A uint32 value together with its shape.
struct U32 {
  Value v;
  Shape s;
};

inline U32 add(Lowering& L, const U32& a, const U32& b) {
  Shape s = broadcast(a.s, b.s);
  return {L.op("Add", {a.v, b.v}, u32_aval(s)), s};
}
inline U32 bxor(Lowering& L, const U32& a, const U32& b) {
  Shape s = broadcast(a.s, b.s);
  return {bitwise(L, "BitwiseXor", {a.v, b.v}, u32_aval(s)), s};
}
inline U32 rotl(Lowering& L, const U32& x, uint32_t r) {
  Aval a = u32_aval(x.s);
  Value hi = L.op("BitShift", {x.v, u32(L, r)}, a, {Attr::s("direction", "LEFT")});
  Value lo = L.op("BitShift", {x.v, u32(L, 32 - r)}, a, {Attr::s("direction", "RIGHT")});
  return {bitwise(L, "BitwiseOr", {hi, lo}, a), x.s};
}

// Threefry-2x32 of counters (x1, x2) under key (k1, k2), all broadcast
// together; the same schedule as jax._src.random.threefry2x32 (unrolled).
inline std::pair<U32, U32> threefry(Lowering& L, const U32& k1, const U32& k2, const U32& x1, const U32& x2) {
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
inline std::pair<U32, U32> key_words(Lowering& L, Value key, const Aval& ka, size_t extra) {
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

// The product of the dims of `s` as one Dim (a symbolic expression when needed).
inline Dim product(const Shape& s) {
  int64_t k = 1;
  std::string sym;
  for (const Dim& d : s) {
    if (d.is_static()) k *= d.value;
    else {
      bool ident = std::all_of(d.symbol.begin(), d.symbol.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
      });
      sym += (sym.empty() ? "" : "*") + (ident ? d.symbol : "(" + d.symbol + ")");
    }
  }
  if (sym.empty() || k == 0) return Dim(k);
  return Dim::sym(k == 1 ? sym : std::to_string(k) + "*" + sym);
}

// JAX's iota_2x32_shape: the row-major 64-bit iota over `shape` as (hi, lo)
// uint32 words. Scalars: (0, 0).
inline std::pair<U32, U32> iota_2x32(Lowering& L, const Shape& shape) {
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
  Dim total = product(shape);
  Value idx = L.op("Range", {scalar(L, dtype::i64, 0), n, scalar(L, dtype::i64, 1)},
                   Aval(dtype::i64, {total}));
  idx = reshape(L, idx, Aval(dtype::i64, {total}), Aval(dtype::i64, shape));
  // Cast int64 -> uint32 wraps: the low word.
  U32 lo{cast(L, idx, Aval(dtype::i64, shape), dtype::u32), shape};
  if (all_static && stat <= (int64_t{1} << 32)) return {{u32(L, 0), {}}, lo};
  Value hi = L.op("Div", {idx, scalar(L, dtype::i64, 4294967296.0)}, Aval(dtype::i64, shape));
  return {{cast(L, hi, Aval(dtype::i64, shape), dtype::u32), shape}, lo};
}

}  // namespace lax_random
