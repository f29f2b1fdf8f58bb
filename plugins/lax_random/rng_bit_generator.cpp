// rng_bit_generator(key; shape, dtype, algorithm): XLA's RngBitGenerator as
// XLA's CPU backend expands it (RngBitGeneratorExpander + lib/prng.cc), bit
// for bit. JAX passes the state as uint32[4], i.e. two uint64 words
// s0 = (w0, w1), s1 = (w2, w3) (low word first); the output state keeps s0
// and advances s1.
// - PHILOX (also RNG_DEFAULT: XLA's CPU default): Philox-4x32-10 keyed by s0,
//   the 128-bit counter (s1 low, s0 high) + i for block i = 0 .. ceil(n/4)-1
//   (carry into the high word); the four words of block i are elements
//   4i .. 4i+3. 64-bit outputs take two blocks' words per pair of elements
//   (w0 | w1 << 32, w2 | w3 << 32). New s1 = s1 + blocks.
// - THREE_FRY: threefry2x32 keyed by s0 of the counters s1 + flat index over
//   the "half shape" (XLA's SplitShapeIntoHalves: the first even dim, else the
//   largest, halved); output pair (y0, y1) of half index q gives elements
//   2q and 2q + 1 along that dim. 64-bit outputs: counters over the whole
//   shape, y0 | y1 << 32. New s1 = s1 + counters used.
// 8/16-bit outputs keep the low bits of the 32-bit ones, as XLA. PHILOX
// takes symbolic shapes (the block count is computed at run time: rbg keys
// draw jax.random values of shape (B, ...) with it); THREE_FRY's half shape
// depends on the dims' parity, so its shape must be static.
#include <jaxonnx/plugin.hpp>

#include "threefry.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace lax_random {

namespace {

Value u64c(Lowering& L, uint64_t v) { return L.constant(std::vector<uint64_t>{v}, {}); }

Value shr(Lowering& L, Value v, const Aval& a, uint64_t k) {
  return L.op("BitShift", {v, u64c(L, k)}, a, {Attr::s("direction", "RIGHT")});
}
Value shl(Lowering& L, Value v, const Aval& a, uint64_t k) {
  return L.op("BitShift", {v, u64c(L, k)}, a, {Attr::s("direction", "LEFT")});
}

// lo | hi << 32 in uint64.
Value join64(Lowering& L, Value lo, Value hi, const Aval& a32) {
  Aval a64 = a32.with_dtype(dtype::u64);
  return bitwise(L, "BitwiseOr", {cast(L, lo, a32, dtype::u64), shl(L, cast(L, hi, a32, dtype::u64), a64, 32)}, a64);
}

// (low, high) uint32 words of a uint64 value.
std::pair<Value, Value> split64(Lowering& L, Value v, const Aval& a64) {
  Aval a32 = a64.with_dtype(dtype::u32);
  return {cast(L, v, a64, dtype::u32), cast(L, shr(L, v, a64, 32), a64, dtype::u32)};
}

// Philox-4x32 with 10 rounds on counters x[4] (each [nv]) under key (k0, k1).
std::vector<Value> philox(Lowering& L, std::vector<Value> x, Value k0, Value k1, const Aval& a32) {
  Aval a64 = a32.with_dtype(dtype::u64);
  auto mul_hi_lo = [&](Value v, uint64_t m) {
    Value p = L.op("Mul", {cast(L, v, a32, dtype::u64), u64c(L, m)}, a64);
    return split64(L, p, a64);  // (lo, hi)
  };
  Aval s32(dtype::u32, {});
  for (int round = 0; round < 10; ++round) {
    auto [lo0, hi0] = mul_hi_lo(x[0], 0xD2511F53u);
    auto [lo1, hi1] = mul_hi_lo(x[2], 0xCD9E8D57u);
    Value n0 = bitwise(L, "BitwiseXor", {bitwise(L, "BitwiseXor", {hi1, x[1]}, a32), k0}, a32);
    Value n2 = bitwise(L, "BitwiseXor", {bitwise(L, "BitwiseXor", {hi0, x[3]}, a32), k1}, a32);
    x = {n0, lo1, n2, lo0};
    k0 = L.op("Add", {k0, u32(L, 0x9E3779B9u)}, s32);
    k1 = L.op("Add", {k1, u32(L, 0xBB67AE85u)}, s32);
  }
  return x;
}

// A dim times k (symbolic dims as an expression).
Dim times(const Dim& d, int64_t k) {
  return d.is_static() ? Dim(d.value * k) : Dim::sym(std::to_string(k) + "*(" + d.symbol + ")");
}

// The words of v [m, 1] ... interleaved: [m, k] -> [m * k], then cut to n.
Value interleave(Lowering& L, const std::vector<Value>& parts, const Dim& m, const Dim& n, int32_t dt) {
  std::vector<Value> cols;
  for (Value p : parts) cols.push_back(L.op("Unsqueeze", {p, i64s(L, {1})}, Aval(dt, {m, 1})));
  int64_t k = static_cast<int64_t>(parts.size());
  Dim mk = times(m, k);
  Value c = L.op("Concat", cols, Aval(dt, {m, k}), {Attr::i("axis", 1)});
  Value flat = flatten(L, c, Aval(dt, {m, k}), Aval(dt, {mk}));
  if (mk == n) return flat;
  return L.op("Slice", {flat, i64s(L, {0}), dim_value(L, n), i64s(L, {0})}, Aval(dt, {n}));
}

}  // namespace

void lower_rng_bit_generator(Lowering& L) {
  Aval ka = L.in_aval(0);
  Aval out = L.out_aval(1);
  Shape shape = out.shape;
  // lax.RandomAlgorithm (XLA's enum): RNG_DEFAULT 0, RNG_THREE_FRY 1, RNG_PHILOX 2.
  int64_t alg = L.param("algorithm").as_int();
  bool philox_alg = alg == 0 || alg == 2, fry = alg == 1;
  if (!philox_alg && !fry) L.fail("rng_bit_generator: unknown algorithm " + std::to_string(alg));
  Dim nd = product(shape);  // the element count
  if (fry && !nd.is_static())
    L.fail("rng_bit_generator: with RNG_THREE_FRY the output shape " + shape_str(shape) + " must be static");
  int64_t n = nd.is_static() ? nd.value : -1;
  // The state as two uint64 scalars s0, s1 (uint32[4] or uint64[2]).
  Value key = L.input(0);
  Aval s64(dtype::u64, {}), s32(dtype::u32, {});
  Value s0, s1;
  auto elem = [&](int32_t dt, int64_t i) {
    return L.op("Gather", {key, scalar(L, dtype::i64, double(i))}, Aval(dt, {}), {Attr::i("axis", 0)});
  };
  if (ka.dtype == dtype::u32 && ka.shape == Shape{Dim(4)}) {
    s0 = join64(L, elem(dtype::u32, 0), elem(dtype::u32, 1), s32);
    s1 = join64(L, elem(dtype::u32, 2), elem(dtype::u32, 3), s32);
  } else if (ka.dtype == dtype::u64 && ka.shape == Shape{Dim(2)}) {
    s0 = elem(dtype::u64, 0);
    s1 = elem(dtype::u64, 1);
  } else {
    L.fail("rng_bit_generator: the key " + ka.str() + " must be uint32[4] or uint64[2]");
  }
  auto [k0, k1] = split64(L, s0, s64);
  int width = static_cast<int>(dtype::itemsize(out.dtype)) * 8;
  if (!dtype::is_int(out.dtype)) L.fail(std::string("rng_bit_generator: dtype ") + dtype::name(out.dtype) + " is not an integer type");
  bool wide = width == 64;
  Value bits;  // flat [n], uint32 or uint64
  Value used;  // counters consumed (uint64 scalar)
  if (n == 0) {
    bits = L.constant(std::vector<uint32_t>{}, {0});
    if (wide) bits = cast(L, bits, Aval(dtype::u32, {0}), dtype::u64);
    used = u64c(L, 0);
  } else if (philox_alg) {
    Dim words = wide ? times(nd, 2) : nd;
    Dim nv = words.is_static() ? Dim((words.value + 3) / 4) : Dim::sym("floordiv(" + words.symbol + " + 3, 4)");
    Aval v64(dtype::u64, {nv}), v32(dtype::u32, {nv});
    Value iota;  // the block indices 0 .. nv-1
    if (nv.is_static()) {
      std::vector<uint64_t> v;
      for (int64_t i = 0; i < nv.value; ++i) v.push_back(static_cast<uint64_t>(i));
      iota = L.constant(v, {nv.value});
    } else {
      Value count = L.op("Squeeze", {dim_value(L, nv)}, Aval(dtype::i64, {}));
      Value r = L.op("Range", {scalar(L, dtype::i64, 0), count, scalar(L, dtype::i64, 1)}, Aval(dtype::i64, {nv}));
      iota = cast(L, r, Aval(dtype::i64, {nv}), dtype::u64);
    }
    Value lo = L.op("Add", {s1, iota}, v64);
    Value carry = cast(L, L.op("Less", {lo, s1}, v64.with_dtype(dtype::boolean)), v64.with_dtype(dtype::boolean), dtype::u64);
    Value hi = L.op("Add", {s0, carry}, v64);
    auto [c0, c1] = split64(L, lo, v64);
    auto [c2, c3] = split64(L, hi, v64);
    std::vector<Value> y = philox(L, {c0, c1, c2, c3}, k0, k1, v32);
    if (wide) bits = interleave(L, {join64(L, y[0], y[1], v32), join64(L, y[2], y[3], v32)}, nv, nd, dtype::u64);
    else bits = interleave(L, y, nv, nd, dtype::u32);
    if (nv.is_static()) used = u64c(L, static_cast<uint64_t>(nv.value));
    else used = cast(L, L.op("Squeeze", {dim_value(L, nv)}, Aval(dtype::i64, {})), Aval(dtype::i64, {}), dtype::u64);
  } else {
    // Counters over the half shape (32-bit) or the whole shape (64-bit).
    int64_t r = static_cast<int64_t>(shape.size());
    int64_t split = -1;
    for (int64_t i = 0; i < r && split < 0; ++i)
      if (shape[static_cast<size_t>(i)].value % 2 == 0) split = i;
    if (split < 0)
      for (int64_t i = 0; i < r; ++i)
        if (split < 0 || shape[static_cast<size_t>(i)].value > shape[static_cast<size_t>(split)].value) split = i;
    std::vector<int64_t> half;  // the half shape, with the split dim's trailing 1
    for (int64_t i = 0; i < r; ++i) {
      int64_t d = shape[static_cast<size_t>(i)].value;
      if (i == split && !wide) {
        half.push_back((d + 1) / 2);
        half.push_back(1);
      } else {
        half.push_back(d);
      }
    }
    if (r == 0 && !wide) half = {1, 1};
    int64_t m = 1;
    for (int64_t d : half) m *= d;
    Shape hs(half.begin(), half.end());
    Aval h64(dtype::u64, hs), h32(dtype::u32, hs);
    std::vector<uint64_t> iota;
    for (int64_t i = 0; i < m; ++i) iota.push_back(static_cast<uint64_t>(i));
    Value ctr = L.op("Add", {s1, L.constant(iota, half)}, h64);
    auto [x0, x1] = split64(L, ctr, h64);
    auto [y0, y1] = threefry(L, {k0, {}}, {k1, {}}, {x0, hs}, {x1, hs});
    if (wide) {
      bits = reshape(L, join64(L, y0.v, y1.v, h32), h64, Aval(dtype::u64, {n}));
    } else {
      // Concat the pair on the split dim's trailing 1: [.., ceil(d/2), 2, ..] -> rows 2q, 2q + 1.
      int64_t axis = r == 0 ? 1 : split + 1;
      std::vector<int64_t> cs = half;
      cs[static_cast<size_t>(axis)] = 2;
      int64_t total = 2 * m;
      const Aval ca(dtype::u32, Shape(cs.begin(), cs.end()));
      Value c = L.op("Concat", {y0.v, y1.v}, ca, {Attr::i("axis", axis)});
      if (r == 0) {  // a scalar is y0 of the one counter
        bits = L.op("Slice", {reshape(L, c, ca, Aval(dtype::u32, {total})), i64s(L, {0}),
                              i64s(L, {1}), i64s(L, {0})},
                    Aval(dtype::u32, {1}));
      } else if (shape[static_cast<size_t>(split)].value % 2 == 0) {
        bits = reshape(L, c, ca, Aval(dtype::u32, {n}));
      } else {
        std::vector<int64_t> rs;
        for (int64_t i = 0; i < r; ++i)
          rs.push_back(i == split ? half[static_cast<size_t>(split)] * 2 : shape[static_cast<size_t>(i)].value);
        Value rr = reshape(L, c, ca, Aval(dtype::u32, Shape(rs.begin(), rs.end())));
        Value cut = L.op("Slice", {rr, i64s(L, {0}), i64s(L, {shape[static_cast<size_t>(split)].value}), i64s(L, {split})},
                         Aval(dtype::u32, shape));
        bits = reshape(L, cut, Aval(dtype::u32, shape), Aval(dtype::u32, {n}));
      }
    }
    used = u64c(L, static_cast<uint64_t>(m));
  }
  // The new state: s0 and s1 + used, in the key's layout.
  Value s1n = L.op("Add", {s1, used}, s64);
  if (ka.dtype == dtype::u32) {
    auto [a, b] = split64(L, s0, s64);
    auto [c, d] = split64(L, s1n, s64);
    std::vector<Value> w;
    for (Value v : {a, b, c, d}) w.push_back(L.op("Unsqueeze", {v, i64s(L, {0})}, Aval(dtype::u32, {1})));
    L.bind(0, L.op("Concat", w, ka, {Attr::i("axis", 0)}));
  } else {
    std::vector<Value> w;
    for (Value v : {s0, s1n}) w.push_back(L.op("Unsqueeze", {v, i64s(L, {0})}, Aval(dtype::u64, {1})));
    L.bind(0, L.op("Concat", w, ka, {Attr::i("axis", 0)}));
  }
  int32_t bt = wide ? dtype::u64 : dtype::u32;
  Value shaped = reshape(L, bits, L.aval_of(bits), Aval(bt, shape));
  L.bind(1, cast(L, shaped, Aval(bt, shape), out.dtype));  // narrow types keep the low bits
}

}  // namespace lax_random
