// random_gamma(key, a; log_space): jax.random.gamma / loggamma / beta /
// dirichlet. JAX defines the primitive by a program (_gamma_impl, lowered
// with vmap on CPU); this replays that program on every element at once:
//
// - element e of a (row-major) with key index kk and flat index i in the
//   dims after the key's gets key_e = threefry(key[kk], (0, i)) (the vmapped
//   split of each key into prod(rest) keys);
// - _gamma_one(key_e, alpha_e), Marsaglia-Tsang: boost alpha < 1 to alpha + 1,
//   d = alpha - 1/3, c = 1 / (3 sqrt(d)); (key, sub) = split(key); then
//   while (U >= 1 - 0.0331 X^2) & (log U >= X / 2 + d (1 - V + log V)):
//     (key, xk, uk) = split(key, 3);
//     x = 0, v = -1; while v <= 0: (xk, s) = split(xk); x = normal(s); v = 1 + c x
//     X = x^2, V = v^3, U = uniform(uk)
//   and d V (1 - uniform(sub))^(1/alpha) for boosted alphas, or in log space
//   log d + log V + log1p(-uniform(sub)) / alpha.
//   Both whiles are ONNX Loops over the flattened elements; an element's
//   state moves only while its own condition holds (the vmapped while's
//   select), so each element follows its own sequential draw sequence and the
//   Loops end when none is left.
// - uniform/normal are JAX's: the top mantissa bits of threefry bits
//   (b1 ^ b2 for f32, (b1 << 32) | b2 for f64) scaled by 2^-mant (what the
//   bitcast of 1.m minus 1 gives, exactly); normal is sqrt(2) erf_inv(u) on
//   [nextafter(-1, 0), 1) with erf_inv by Giles (XLA's ErfInv) and log1p
//   after Kahan (jaxonnx/special.hpp, as plugins/lax_math).
// The bits are exact; erf_inv, log and pow agree with XLA's to a few ulp, so
// an acceptance test can flip only when a draw lies within rounding of its
// boundary (then that element differs). float32 and float64.
#include <jaxonnx/expr.hpp>
#include <jaxonnx/plugin.hpp>
#include <jaxonnx/special.hpp>

#include "threefry.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

namespace lax_random {

namespace {

// Elementwise float ops (jaxonnx/expr.hpp) on flat [N] tensors of one dtype.
struct F : Expr {
  Lowering& L;
  Aval a;   // [N] of t
  Aval ab;  // [N] of bool
  F(Lowering& l, int32_t dt, const Aval& flat, const Aval& flat_bool) : Expr(l, dt), L(l), a(flat), ab(flat_bool) {}
};

// A key per element: its two words.
struct Key {
  U32 k1, k2;
};

// split(key, n)[i]: threefry(key, (0, i)).
Key child(Lowering& L, const Key& k, uint32_t i) {
  auto [b1, b2] = threefry(L, k.k1, k.k2, {u32(L, 0), {}}, {u32(L, i), {}});
  return {b1, b2};
}

// uniform(key, (), t) in [0, 1): the top mantissa bits of random_bits.
Value uniform01(F& f, const Key& k) {
  Lowering& L = f.L;
  auto [b1, b2] = threefry(L, k.k1, k.k2, {u32(L, 0), {}}, {u32(L, 0), {}});
  Aval a32 = f.a.with_dtype(dtype::u32);
  if (f.t == dtype::f32) {
    Value bits = bitwise(L, "BitwiseXor", {b1.v, b2.v}, a32);
    Value m = L.op("BitShift", {bits, u32(L, 9)}, a32, {Attr::s("direction", "RIGHT")});
    return f.mul(cast(L, m, a32, f.t), f.k(std::ldexp(1.0, -23)));
  }
  Aval a64 = f.a.with_dtype(dtype::u64);
  Value sh = L.constant(std::vector<uint64_t>{32}, {});
  Value hi = L.op("BitShift", {cast(L, b1.v, a32, dtype::u64), sh}, a64, {Attr::s("direction", "LEFT")});
  Value bits = bitwise(L, "BitwiseOr", {hi, cast(L, b2.v, a32, dtype::u64)}, a64);
  Value m = L.op("BitShift", {bits, L.constant(std::vector<uint64_t>{12}, {})}, a64, {Attr::s("direction", "RIGHT")});
  return f.mul(cast(L, m, a64, f.t), f.k(std::ldexp(1.0, -52)));
}

// normal(key, (), t): sqrt(2) erf_inv(u), u uniform on [nextafter(-1, 0), 1).
Value normal(F& f, const Key& k) {
  Value u01 = uniform01(f, k);
  double lo = f.t == dtype::f32 ? double(std::nextafter(-1.0f, 0.0f)) : std::nextafter(-1.0, 0.0);
  double span = f.t == dtype::f32 ? double(1.0f - float(lo)) : 1.0 - lo;  // 2, rounded as JAX's
  Value u = f.add(f.mul(u01, f.k(span)), f.k(lo));
  u = f.f("Max", {f.k(lo), u});
  double sqrt2 = f.t == dtype::f32 ? double(float(std::sqrt(2.0))) : std::sqrt(2.0);
  return f.mul(f.k(sqrt2), special::erf_inv_open(f, u));
}

// any(mask) of a bool [N] as a bool scalar (false when N = 0).
Value any(Lowering& L, Value mask, const Aval& ab) {
  Value s = L.op("ReduceSum", {cast(L, mask, ab, dtype::f32)}, Aval(dtype::f32, {}), {Attr::i("keepdims", 0)});
  return L.op("Greater", {s, scalar(L, dtype::f32, 0.0)}, Aval(dtype::boolean, {}));
}

Value sel_u32(Lowering& L, Value c, const U32& x, const U32& y, const Aval& a32) {
  return where(L, c, x.v, y.v, a32);
}

// Marsaglia-Tsang's acceptance loop condition (true: draw again).
Value again(F& f, Value X, Value V, Value U, Value d) {
  Value c1 = f.b("GreaterOrEqual", {U, f.sub(f.k(1), f.mul(f.k(0.0331), f.mul(X, X)))});
  Value rhs = f.add(f.mul(X, f.k(0.5)), f.mul(d, f.add(f.sub(f.k(1), V), f.log(V))));
  Value c2 = f.b("GreaterOrEqual", {f.log(U), rhs});
  return f.b("And", {c1, c2});
}

}  // namespace

void lower_random_gamma(Lowering& L) {
  Aval ka = L.in_aval(0), aa = L.in_aval(1);
  int32_t t = aa.dtype;
  if (t != dtype::f32 && t != dtype::f64)
    L.fail(std::string("random_gamma: dtype ") + dtype::name(t) + " is not supported (float32 and float64 only)");
  bool log_space = L.param("log_space").as_bool();
  size_t kr = static_cast<size_t>(ka.rank() - 1);  // key batch rank
  if (aa.rank() < static_cast<int64_t>(kr))
    L.fail("random_gamma: a " + aa.str() + " has fewer dims than the keys " + ka.str());
  Shape rest(aa.shape.begin() + static_cast<std::ptrdiff_t>(kr), aa.shape.end());
  Dim n = product(aa.shape);
  Aval flat(t, {n});
  Aval a32 = flat.with_dtype(dtype::u32), ab = flat.with_dtype(dtype::boolean);
  Aval full32 = aa.with_dtype(dtype::u32);
  // key_e = threefry(key[kk], (0, i)), flattened.
  auto [k1, k2] = key_words(L, L.input(0), ka, rest.size());
  auto [hi, lo] = iota_2x32(L, rest);
  auto [e1, e2] = threefry(L, k1, k2, hi, lo);
  auto flatten_key = [&](const U32& w) {
    Value v = w.s == aa.shape ? w.v : L.op("Expand", {w.v, shape_value(L, aa.shape)}, full32);
    return U32{flatten(L, v, full32, a32), {n}};
  };
  Key ke{flatten_key(e1), flatten_key(e2)};
  F f{L, t, flat, ab};
  Value alpha = flatten(L, L.input(1), aa, flat);
  Value boost = f.b("GreaterOrEqual", {alpha, f.k(1)});
  Value al = f.where(boost, alpha, f.add(alpha, f.k(1)));
  Value d = f.sub(al, f.k(1.0 / 3.0));
  Value c = f.div(f.k(1.0 / 3.0), f.sqrt(d));
  Key key = child(L, ke, 0), sub = child(L, ke, 1);

  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Value big = scalar(L, dtype::i64, 9.0e18);  // the Loops run until their condition fails
  // Constant [N] tensors (ConstantOfShape: onnxruntime leaves those in place,
  // where it would try to rename an Expand that a Loop body reads).
  Value nshape = shape_value(L, {n});
  auto filled = [&](double v) {
    float vf = static_cast<float>(v);
    Attr val = t == dtype::f32 ? Attr::tensor("value", t, {1}, &vf, sizeof vf) : Attr::tensor("value", t, {1}, &v, sizeof v);
    return L.op("ConstantOfShape", {nshape}, flat, {val});
  };
  Value zeros = filled(0.0);
  // Outer loop: state (key, X, V, U).
  Subgraph go = L.begin_subgraph("gamma_accept");
  go.input(isc, "it");
  go.input(bsc, "cond_in");
  Key ks{{go.input(a32, "k1"), {n}}, {go.input(a32, "k2"), {n}}};
  Value X = go.input(flat, "X"), V = go.input(flat, "V"), U = go.input(flat, "U");
  Value active = again(f, X, V, U, d);
  Key kn = child(L, ks, 0), xk = child(L, ks, 1), uk = child(L, ks, 2);
  // Inner loop: state (key, x, v) while v <= 0.
  Subgraph gi = L.begin_subgraph("gamma_positive_v");
  gi.input(isc, "it");
  gi.input(bsc, "cond_in");
  Key ik{{gi.input(a32, "k1"), {n}}, {gi.input(a32, "k2"), {n}}};
  Value x = gi.input(flat, "x"), v = gi.input(flat, "v");
  Value redo = f.b("LessOrEqual", {v, f.k(0)});
  Key ik2 = child(L, ik, 0), s = child(L, ik, 1);
  Value x2 = normal(f, s);
  Value v2 = f.add(f.k(1), f.mul(x2, c));
  Value k1i = sel_u32(L, redo, ik2.k1, ik.k1, a32), k2i = sel_u32(L, redo, ik2.k2, ik.k2, a32);
  Value x3 = f.where(redo, x2, x), v3 = f.where(redo, v2, v);
  Value more = any(L, f.b("LessOrEqual", {v3, f.k(0)}), ab);
  GraphRef inner = gi.end({more, k1i, k2i, x3, v3});
  std::vector<Value> io = L.op_n("Loop", {big, scalar(L, dtype::boolean, 1), xk.k1.v, xk.k2.v, zeros,
                                          filled(-1.0)},
                                 {a32, a32, flat, flat}, {Attr::graph("body", inner)});
  Value Xn = f.mul(io[2], io[2]);
  Value Vn = f.mul(f.mul(io[3], io[3]), io[3]);
  Value Un = uniform01(f, uk);
  Value ok1 = sel_u32(L, active, kn.k1, ks.k1, a32), ok2 = sel_u32(L, active, kn.k2, ks.k2, a32);
  Value X2 = f.where(active, Xn, X), V2 = f.where(active, Vn, V), U2 = f.where(active, Un, U);
  Value more_o = any(L, again(f, X2, V2, U2, d), ab);
  GraphRef outer = go.end({more_o, ok1, ok2, X2, V2, U2});
  std::vector<Value> oo = L.op_n("Loop", {big, scalar(L, dtype::boolean, 1), key.k1.v, key.k2.v, zeros,
                                          filled(1.0), filled(2.0)},
                                 {a32, a32, flat, flat, flat}, {Attr::graph("body", outer)});
  Value Vf = oo[3];
  Value us = uniform01(f, sub);
  Value inv_alpha = f.div(f.k(1), alpha);
  Value out;
  if (log_space) {
    // -exponential(sub) = log1p(-u) (its two negations are exact).
    Value ls = special::log1p(f, f.neg(us));
    Value skip = f.b("Or", {boost, f.b("Equal", {ls, f.k(0)})});
    Value lb = f.where(skip, f.k(0), f.mul(ls, inv_alpha));
    out = f.add(f.add(f.log(d), f.log(Vf)), lb);
  } else {
    Value samples = f.sub(f.k(1), us);
    Value b = f.where(boost, f.k(1), f.f("Pow", {samples, inv_alpha}));
    out = f.mul(f.mul(d, Vf), b);
  }
  L.bind(0, reshape(L, out, flat, aa));
}

}  // namespace lax_random
