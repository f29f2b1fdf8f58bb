// lax_reduction: reduce_sum / reduce_prod / reduce_max / reduce_min /
// reduce_and / reduce_or / reduce_xor / argmax / argmin as ONNX ReduceSum /
// ReduceProd / ReduceMax / ReduceMin / ArgMax / ArgMin; psum / pmax / pmin
// over positional axes as the reductions they are (over size-1 mesh axes of
// a one-device shard_map, as the identity).
//
// From opset 18 every Reduce* op takes its axes as an int64 input tensor; JAX
// drops the reduced axes, so keepdims=0. An empty axes tuple is the identity
// in JAX but "reduce everything" in ONNX, so it emits no node at all.
//
// NaN: JAX's max/min reductions and argmax propagate NaN (argmax returns the
// index of the first NaN), while onnxruntime's ReduceMax/ReduceMin/ArgMax
// skip NaNs. For floating inputs a NaN mask restores JAX's answer. The same
// holds for argmin.
//
// Complex operands (carried as float[..., 2], jaxonnx/complex.hpp): sums add
// the packed form, products go through polar form (complex_prod), and
// max/min order lexicographically as JAX does (real part, then imaginary;
// complex_extreme_value). argmax/argmin of complex values are refused: JAX
// traces them but cannot evaluate them.
//
// reduce_and/or/xor are logical on bool and bitwise on integers. ONNX has no
// bitwise reduction, so an integer is split into its bits (BitwiseAnd with
// one mask per bit, a new trailing axis), each bit reduced as a bool
// (all / any / parity), and the bits or-ed back together (a log2(width)
// BitwiseOr tree over the static bit axis). Works for symbolic axes.
//
// Integer sums and products wrap in JAX, while onnxruntime's integer
// ReduceSum/ReduceProd accumulate in double (losing bits past 2^53 and
// saturating). Integers instead take an exact inclusive scan along each
// reduced axis (CumSum, or a log-depth Mul scan) and keep its last element.
//
// onnxruntime kernels: ReduceSum/ReduceProd/CumSum only for int32/int64/floats,
// ReduceMax/ReduceMin/ArgMin/ArgMax only for int8/uint8/int32/int64/floats.
// Other integers go through int64 (products wrap the same way modulo 2^n) or,
// for order, through a wider type that keeps the order.
//
// onnxruntime 1.31's int64 ReduceMax/ReduceMin answer wrongly (low words
// compared as signed when the high words are equal, from 4 elements on;
// tests/python/test_onnxruntime_workarounds.py), and uint64 has no kernel.
// Their max/min is TopK(k=1) along each reduced axis in turn instead (max of
// maxes), on int64 (uint64 with its top bit flipped): TopK's int64 kernel
// compares correctly, and was the fastest exact form measured (onnxruntime
// 1.31, one thread, 1M int64: 0.4-5x the faulty ReduceMax's time, slowest
// over a leading axis; ArgMax + GatherElements as fast or up to 1.5x slower;
// a two-word split through int32 ReduceMax 5-15x slower).
#include <jaxonnx/complex.hpp>
#include <jaxonnx/max_min.hpp>
#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

// The shape `in` has after reducing `axes` away (keepdims=0).
Shape reduced_shape(const Shape& in, const std::vector<int64_t>& axes) {
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    bool reduced = false;
    for (int64_t a : axes) reduced |= a == static_cast<int64_t>(i);
    if (!reduced) out.push_back(in[i]);
  }
  return out;
}

Value reduce(Lowering& L, const char* op, Value x, const std::vector<int64_t>& axes, const Aval& out) {
  return reduce_over(L, op, x, axes, false, out);
}

// ReduceMax/ReduceMin over bool: accepted from opset 20, but onnxruntime's
// bool kernels fail on an empty axis. So bool is used only when every reduced
// axis is static and non-empty; otherwise through uint8 (max = any, min =
// all), whose empty max is 0 (false) and empty min 255 (true), as in JAX.
Value reduce_bool(Lowering& L, const char* op, Value x, const Aval& in, const std::vector<int64_t>& axes) {
  Aval out(dtype::boolean, reduced_shape(in.shape, axes));
  bool never_empty = std::all_of(axes.begin(), axes.end(), [&](int64_t a) {
    const Dim& d = in.shape[static_cast<size_t>(a)];
    return d.is_static() && d.value > 0;
  });
  if (L.opset() >= 20 && never_empty) return reduce(L, op, x, axes, out);
  Value r = reduce(L, op, cast(L, x, in, dtype::u8), axes, out.with_dtype(dtype::u8));
  return L.op("Cast", {r}, out, {Attr::i("to", dtype::boolean)});
}

// The dtype a wrapping sum/product of `t` is computed in: onnxruntime's
// CumSum/Mul/ReduceProd have int32/int64/float kernels only. Integer products
// and sums modulo 2^64 truncate to the same result modulo 2^n.
int32_t wrap_dtype(int32_t t) {
  if (t == dtype::i32 || t == dtype::i64 || t == dtype::f32 || t == dtype::f64 || t == dtype::f16)
    return t;
  if (t == dtype::bf16) return dtype::f32;
  return dtype::i64;
}

// `x` of type `in`, in a dtype onnxruntime's ReduceMax/ReduceMin/ArgMax/ArgMin
// accept, with the same order: int16/uint16 -> int32, uint32 -> int64, and
// uint64 -> int64 after flipping the top bit (which maps [0, 2^64) onto
// [-2^63, 2^63) monotonically).
Value ordered(Lowering& L, Value x, const Aval& in) {
  switch (in.dtype) {
    case dtype::i16: case dtype::u16: return cast(L, x, in, dtype::i32);
    case dtype::u32: return cast(L, x, in, dtype::i64);
    case dtype::bf16: return cast(L, x, in, dtype::f32);
    case dtype::u64: {
      uint64_t top = uint64_t{1} << 63;
      Value flipped = bitwise(L, "BitwiseXor", {x, L.constant(std::vector<uint64_t>{top}, {})}, in);
      return cast(L, flipped, in, dtype::i64);
    }
    default: return x;
  }
}

// ------------------------------------------------------------------ reduce --

// An integer reduction through an inclusive scan: scan each reduced axis
// (highest first, so lower axis numbers stay valid) and keep its last
// element. onnxruntime's integer ReduceSum/ReduceProd accumulate in double:
// they lose low bits past 2^53 and saturate where JAX wraps, while CumSum and
// Mul are exact and wrap. A static empty axis falls back to `op` (its
// identity, 0 or 1, is exact); a symbolic axis, which may be empty at run
// time, gets the identity padded in front of the scan, so the last element
// exists.
template <typename Scan>
Value reduce_by_scan(Lowering& L, const char* op, Value x, const Aval& in, std::vector<int64_t> axes,
                     Scan scan) {
  for (int64_t a : axes)
    if (in.shape[static_cast<size_t>(a)] == Dim(0))
      return reduce(L, op, x, axes, in.with_shape(reduced_shape(in.shape, axes)));
  std::sort(axes.rbegin(), axes.rend());
  Aval cur = in;
  for (int64_t a : axes) {
    x = scan(x, cur, a);
    const Dim& n = cur.shape[static_cast<size_t>(a)];
    if (!n.is_static()) {
      Shape padded = cur.shape;
      padded[static_cast<size_t>(a)] = Dim::sym(n.symbol + " + 1");
      double identity = std::string(op) == "ReduceProd" ? 1.0 : 0.0;
      x = pad_axis(L, x, cur.rank(), a, 1, 0, scalar(L, cur.dtype, identity), cur.with_shape(padded));
    }
    Aval next = cur.with_shape(reduced_shape(cur.shape, {a}));
    x = L.op("Gather", {x, scalar(L, dtype::i64, -1)}, next, {Attr::i("axis", a)});
    cur = next;
  }
  return x;
}

// Each reduction below maps x (aval `in`) to `out` over a non-empty `axes`.
using Axes = std::vector<int64_t>;

// sum: ReduceSum for floats; CumSum + Gather(last) for integers.
Value sum(Lowering& L, Value x, const Aval& in, const Axes& axes, const Aval& out) {
  // A complex operand is carried packed (jaxonnx/complex.hpp): summing the
  // logical axes sums each part.
  if (complex::is(in.dtype)) return reduce(L, "ReduceSum", x, axes, complex::packed(out));
  if (!dtype::is_int(in.dtype)) return reduce(L, "ReduceSum", x, axes, out);
  int32_t w = wrap_dtype(in.dtype);  // CumSum has int32/int64 kernels only
  Aval wa = in.with_dtype(w);
  auto cumsum = [&](Value v, const Aval& a, int64_t k) {
    return L.op("CumSum", {v, scalar(L, dtype::i64, static_cast<double>(k))}, a);
  };
  Value r = reduce_by_scan(L, "ReduceSum", cast(L, x, in, w), wa, axes, cumsum);
  return cast(L, r, out.with_dtype(w), out.dtype);
}

// int64 / uint64 max (min): TopK(k=1, largest) along each reduced axis,
// highest first, on the int64 order key (`ordered`). An axis of static length
// 0 gives the identity (INT64_MIN / INT64_MAX, JAX's); a symbolic one, which
// may be empty at run time, gets the identity padded in front.
Value extremum_64(Lowering& L, const char* op, Value x, const Aval& in, Axes axes, const Aval& out) {
  const bool largest = std::string(op) == "ReduceMax";
  const int64_t identity = largest ? INT64_MIN : INT64_MAX;
  const int32_t I = dtype::i64;
  Value v;
  Aval cur = in.with_dtype(I);
  bool empty = std::any_of(axes.begin(), axes.end(), [&](int64_t a) { return in.shape[static_cast<size_t>(a)] == Dim(0); });
  if (empty) {
    Value fill = L.constant(std::vector<int64_t>{identity}, {});
    v = L.op("Expand", {fill, shape_value(L, out.shape)}, out.with_dtype(I));
    cur = out.with_dtype(I);
  } else {
    v = ordered(L, x, in);
    std::sort(axes.rbegin(), axes.rend());
    for (int64_t a : axes) {
      const size_t ai = static_cast<size_t>(a);
      if (!cur.shape[ai].is_static()) {
        Shape padded = cur.shape;
        padded[ai] = Dim::sym(cur.shape[ai].symbol + " + 1");
        v = pad_axis(L, v, cur.rank(), a, 1, 0, L.constant(std::vector<int64_t>{identity}, {}), cur.with_shape(padded));
      }
      Shape kept = cur.shape;
      kept[ai] = Dim(1);
      std::vector<Value> top = L.op_n("TopK", {v, i64s(L, {1})}, {cur.with_shape(kept), Aval(I, kept)},
                                      {Attr::i("axis", a), Attr::i("largest", largest ? 1 : 0), Attr::i("sorted", 1)});
      cur = cur.with_shape(reduced_shape(cur.shape, {a}));
      v = L.op("Squeeze", {top[0], i64s(L, {a})}, cur);
    }
  }
  // uint64: undo `ordered`'s top-bit flip (it also maps the identities to 0 / UINT64_MAX).
  if (in.dtype == dtype::u64) v = bitwise(L, "BitwiseXor", {v, L.constant(std::vector<int64_t>{INT64_MIN}, {})}, cur);
  return cast(L, v, cur, out.dtype);
}

// max / min. For floats: Where(any(IsNaN(x)), NaN, Reduce(x)).
Value extremum(Lowering& L, const char* op, Value x, const Aval& in, const Axes& axes, const Aval& out) {
  if (in.dtype == dtype::boolean) return reduce_bool(L, op, x, in, axes);
  if (in.dtype == dtype::i64 || in.dtype == dtype::u64) return extremum_64(L, op, x, in, axes, out);
  Value r = reduce(L, op, x, axes, out);
  if (dtype::is_float(in.dtype)) {
    Value isnan = L.op("IsNaN", {x}, in.with_dtype(dtype::boolean));
    Value any_nan = reduce_bool(L, "ReduceMax", isnan, in.with_dtype(dtype::boolean), axes);
    r = L.op("Where", {any_nan, scalar(L, out.dtype, NAN), r}, out);
  }
  return r;
}
// JAX orders complex values lexicographically (real part, then imaginary):
// the extremum is the extreme real part of the slice with the extreme
// imaginary part among the elements holding it. NaN parts are not ordered.
Value complex_extreme_value(Lowering& L, const char* op, Value x, const Aval& in, const Axes& axes,
                            const Aval& out) {
  const Aval p = complex::part(in), po = complex::part(out);
  complex::Parts z = complex::split(L, x, in);
  Shape ks = p.shape;
  for (int64_t a : axes) ks[static_cast<size_t>(a)] = Dim(1);
  const Aval kept = p.with_shape(ks);
  Value re = reduce_over(L, op, z.re, axes, true, kept);
  Value cand = L.op("Equal", {z.re, re}, p.with_dtype(dtype::boolean));
  double none = std::string(op) == "ReduceMax" ? -INFINITY : INFINITY;
  Value im = reduce(L, op, L.op("Where", {cand, z.im, scalar(L, p.dtype, none)}, p), axes, po);
  return complex::pack(L, L.op("Squeeze", {re, i64s(L, axes)}, po), im, out);
}

// The lexicographically larger (smaller) of complex a (aval `aa`, which
// broadcasts to `out`) and b (aval `out`), as JAX's max (min) picks.
Value complex_pick(Lowering& L, bool is_max, Value a, const Aval& aa, Value b, const Aval& out) {
  const Aval mask = out.with_dtype(dtype::boolean);
  const char* cmp = is_max ? "Greater" : "Less";
  complex::Parts x = complex::split(L, a, aa), y = complex::split(L, b, out);
  Value strict = L.op(cmp, {x.re, y.re}, mask);
  Value tie = L.op("And", {L.op("Equal", {x.re, y.re}, mask), L.op(cmp, {x.im, y.im}, mask)}, mask);
  Value pick_a = L.op("Or", {strict, tie}, mask);
  Shape one = out.shape;
  one.push_back(Dim(1));
  Value w = L.op("Unsqueeze", {pick_a, i64s(L, {-1})}, Aval(dtype::boolean, one));
  return L.op("Where", {w, a, b}, complex::packed(out));
}

Value max(Lowering& L, Value x, const Aval& in, const Axes& axes, const Aval& out) {
  if (complex::is(in.dtype)) return complex_extreme_value(L, "ReduceMax", x, in, axes, out);
  return extremum(L, "ReduceMax", x, in, axes, out);
}
Value min(Lowering& L, Value x, const Aval& in, const Axes& axes, const Aval& out) {
  if (complex::is(in.dtype)) return complex_extreme_value(L, "ReduceMin", x, in, axes, out);
  return extremum(L, "ReduceMin", x, in, axes, out);
}

// reduce_prod: ReduceProd for floats (NaN and inf * 0 propagate as in JAX by
// themselves). Integers: a Mul scan per axis (see reduce_by_scan).
// A complex product in polar form: the product of the moduli (ReduceProd)
// and the sum of the arguments (ReduceSum), then back to (re, im). Exact up
// to rounding; an argument sum past 2 pi only wraps around.
Value complex_prod(Lowering& L, Value x, const Aval& in, const Axes& axes, const Aval& out) {
  Aval p = complex::part(in), po = complex::part(out);
  complex::Parts z = complex::split(L, x, in);
  Value m = reduce(L, "ReduceProd", complex::abs(L, z, p), axes, po);
  Value a = reduce(L, "ReduceSum", complex::atan2(L, z.im, z.re, p), axes, po);
  return complex::pack(L, L.op("Mul", {m, L.op("Cos", {a}, po)}, po),
                       L.op("Mul", {m, L.op("Sin", {a}, po)}, po), out);
}

Value prod(Lowering& L, Value x, const Aval& in, const Axes& axes, const Aval& out) {
  if (complex::is(in.dtype)) return complex_prod(L, x, in, axes, out);
  int32_t w = wrap_dtype(in.dtype);
  Value r = cast(L, x, in, w);
  if (dtype::is_int(in.dtype)) {
    auto scan = [&](Value v, const Aval& a, int64_t k) {
      return inclusive_scan(L, "Mul", v, a, k, false, scalar(L, a.dtype, 1));
    };
    r = reduce_by_scan(L, "ReduceProd", r, in.with_dtype(w), axes, scan);
  } else {
    r = reduce(L, "ReduceProd", r, axes, out.with_dtype(w));
  }
  return cast(L, r, out.with_dtype(w), out.dtype);
}

// ------------------------------------------------------- reduce_and/or/xor --

enum class Logic { And, Or, Xor };

// A bool reduction: all (ReduceMin), any (ReduceMax) or parity (count mod 2).
Value reduce_logic(Lowering& L, Logic kind, Value b, const Aval& in, const std::vector<int64_t>& axes) {
  if (kind == Logic::And) return reduce_bool(L, "ReduceMin", b, in, axes);
  if (kind == Logic::Or) return reduce_bool(L, "ReduceMax", b, in, axes);
  // Parity: the count of trues modulo 2 (an int32 count wraps modulo 2^32,
  // which keeps its parity).
  Aval count(dtype::i32, reduced_shape(in.shape, axes));
  Value n = reduce(L, "ReduceSum", cast(L, b, in, dtype::i32), axes, count);
  Value odd = L.op("Mod", {n, scalar(L, dtype::i32, 2)}, count);
  return cast(L, odd, count, dtype::boolean);
}

// Bitwise reduction of an integer tensor, one bit at a time (see the header).
Value reduce_bits(Lowering& L, Logic kind, Value x, const Aval& in, const std::vector<int64_t>& axes) {
  const int64_t width = static_cast<int64_t>(dtype::itemsize(in.dtype)) * 8;
  std::vector<int64_t> masks;  // 1 << k as int64 (bit 63 is INT64_MIN)
  for (int64_t k = 0; k < width; ++k) masks.push_back(static_cast<int64_t>(uint64_t{1} << k));
  Value mask = i64s(L, masks);
  // Sign-extending or zero-extending to int64 keeps the low `width` bits.
  Value x64 = cast(L, x, in, dtype::i64);
  Shape one_shape = in.shape, bit_shape = in.shape;
  one_shape.push_back(1);
  bit_shape.push_back(width);
  Aval bits(dtype::i64, bit_shape);
  Value xu = L.op("Unsqueeze", {x64, i64s(L, {in.rank()})}, Aval(dtype::i64, one_shape));
  Value set = cast(L, bitwise(L, "BitwiseAnd", {xu, mask}, bits), bits, dtype::boolean);
  Value r = reduce_logic(L, kind, set, bits.with_dtype(dtype::boolean), axes);
  Shape out_shape = reduced_shape(in.shape, axes);
  Shape r_shape = out_shape;
  r_shape.push_back(width);
  Value parts = L.op("Where", {r, mask, scalar(L, dtype::i64, 0)}, Aval(dtype::i64, r_shape));
  // Or the `width` parts together pairwise (width is a power of two). Not a
  // ReduceSum: onnxruntime's int64 ReduceSum goes through double and loses
  // the low bits of large values.
  const int64_t last = static_cast<int64_t>(out_shape.size());
  Value axis = i64s(L, {last});
  for (int64_t w = width; w > 1; w /= 2) {
    Shape half = out_shape;
    half.push_back(w / 2);
    Aval ha(dtype::i64, half);
    Value lo = L.op("Slice", {parts, i64s(L, {0}), i64s(L, {w / 2}), axis}, ha);
    Value hi = L.op("Slice", {parts, i64s(L, {w / 2}), i64s(L, {w}), axis}, ha);
    parts = bitwise(L, "BitwiseOr", {lo, hi}, ha);
  }
  Aval out64(dtype::i64, out_shape);
  Value joined = L.op("Squeeze", {parts, axis}, out64);
  return cast(L, joined, out64, in.dtype);  // truncates back to `width` bits
}

template <Logic kind>
Value logic(Lowering& L, Value x, const Aval& in, const Axes& axes, const Aval&) {
  if (in.dtype == dtype::boolean) return reduce_logic(L, kind, x, in, axes);
  if (dtype::is_int(in.dtype)) return reduce_bits(L, kind, x, in, axes);
  L.fail(std::string(L.primitive()) + " takes bool or integer operands, got " + dtype::name(in.dtype));
}

using ReduceFn = Value (*)(Lowering&, Value, const Aval&, const Axes&, const Aval&);

// reduce_<monoid>(x, axes): an empty `axes` is the identity (no node).
void lower_reduction(Lowering& L, ReduceFn fn) {
  Aval in = L.in_aval(0);
  Axes axes = L.axes_param("axes", in.rank());
  Value x = L.input(0);
  L.bind(0, axes.empty() ? x : fn(L, x, in, axes, L.out_aval(0)));
}

// psum / pmax / pmin: over positional axes (lax.psum(x, 1) outside any mapped
// axis, which JAX evaluates as reduce_sum / reduce_max / reduce_min), and
// over named mesh axes inside a shard_map over a one-device mesh, where the
// collective combines one value: the identity (jaxonnx/mesh_axes.hpp). Any
// other named axis is a collective across devices, which has no ONNX form.
void lower_collective(Lowering& L, ReduceFn fn) {
  Param axes = L.param("axes");
  mesh_axes::require(L, axes);
  std::vector<int64_t> positional;
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i].kind() == JXO_PARAM_INT) positional.push_back(axes[i].as_int());
  if (!L.param("axis_index_groups").is_none()) L.fail("param 'axis_index_groups' must be None");
  for (size_t k = 0; k < L.num_inputs(); ++k) {  // psum of a tuple: one operand each
    Aval in = L.in_aval(k);
    Axes ax;
    for (int64_t a : positional) ax.push_back(a < 0 ? a + in.rank() : a);
    Value x = L.input(k);
    L.bind(k, ax.empty() ? x : fn(L, x, in, ax, L.out_aval(k)));
  }
}

// ----------------------------------------------------------------- reduce --

// The generic reduce(operands..., inits..., jaxpr, dimensions). Lowered when
// the body is a monoid per operand, as lax.reduce(x, init, lax.add, dims)
// gives: body output k is one add/mul/max/min/and/or/xor of body inputs k and
// n + k (accumulator and element, either order). The init is folded in once,
// monoid(init, reduce(x)), as XLA on CPU does. (A non-identity init is
// unspecified in XLA; it even skips it when the reduced extent is 1.)
struct Monoid {
  const char* primitive;
  ReduceFn reduce;
  const char* combine;  // the ONNX op folding in the init
};
constexpr Monoid kMonoids[] = {
    {"add", sum, "Add"}, {"mul", prod, "Mul"}, {"max", max, "Max"}, {"min", min, "Min"},
    {"and", logic<Logic::And>, "And"}, {"or", logic<Logic::Or>, "Or"},
    {"xor", logic<Logic::Xor>, "Xor"},
};

const Monoid* monoid_of(const JaxprView& body, size_t k, size_t n) {
  std::string_view combiner = body.combiner(k, n);
  for (const Monoid& m : kMonoids)
    if (combiner == m.primitive) return &m;
  return nullptr;
}

void lower_reduce(Lowering& L) {
  const size_t n = L.num_outputs();
  JaxprView body(L.api(), L.param("jaxpr").as_jaxpr());
  if (body.num_eqns() != n)
    L.fail("reduce: the body is not one monoid per operand (it has " +
           std::to_string(body.num_eqns()) + " equations for " + std::to_string(n) +
           " operands); only add/mul/max/min/and/or/xor bodies convert");
  for (size_t k = 0; k < n; ++k) {
    const Monoid* m = monoid_of(body, k, n);
    if (!m)
      L.fail("reduce: body output " + std::to_string(k) +
             " is not add/mul/max/min/and/or/xor of its accumulator and element");
    Aval in = L.in_aval(k);
    Aval out = L.out_aval(k);
    Axes axes = L.axes_param("dimensions", in.rank());
    Value x = L.input(k);
    if (complex::is(in.dtype)) {  // the init folds in by complex addition or lexicographic max/min
      const std::string combine = m->combine;
      if (combine != "Add" && combine != "Max" && combine != "Min")
        L.fail(std::string("reduce with a '") + m->primitive + "' body over complex operands is not lowered "
               "(add, max and min are; jnp.prod is)");
      Value r = axes.empty() ? x : m->reduce(L, x, in, axes, out);
      L.bind(k, combine == "Add" ? L.op("Add", {L.input(n + k), r}, complex::packed(out))
                                 : complex_pick(L, combine == "Max", L.input(n + k), L.in_aval(n + k), r, out));
      continue;
    }
    Value r = axes.empty() ? x : m->reduce(L, x, in, axes, out);
    bool is_bool = out.dtype == dtype::boolean;
    const char* combine = m->combine;
    if (!is_bool && dtype::is_int(out.dtype)) {  // bitwise on integers
      if (combine == std::string("And")) combine = "BitwiseAnd";
      if (combine == std::string("Or")) combine = "BitwiseOr";
      if (combine == std::string("Xor")) combine = "BitwiseXor";
    }
    if (is_bool && combine == std::string("Max")) combine = "Or";
    if (is_bool && combine == std::string("Min")) combine = "And";
    const bool extreme = combine == std::string("Max") || combine == std::string("Min");
    L.bind(k, extreme ? max_or_min(L, combine == std::string("Max"), L.input(n + k), r, out)  // int64: Where
                      : bitwise(L, combine, {L.input(n + k), r}, out));
  }
}

// ------------------------------------------------------------ argmax/argmin --

// argmax / argmin(x, axes=(k,), index_dtype): ArgMax/ArgMin keep the first
// of equal extrema, as JAX does, and yield int64. A NaN wins in JAX for both:
// when a slice holds one, the answer is ArgMax of the NaN mask (its first true).
void lower_arg(Lowering& L, const char* op) {
  Aval in = L.in_aval(0);
  Aval out = L.out_aval(0);
  std::vector<int64_t> axes = L.axes_param("axes", in.rank());
  if (axes.size() != 1)
    L.fail(std::string(L.primitive()) + " reduces exactly one axis, got " + std::to_string(axes.size()));
  const std::vector<Attr> attrs = {Attr::i("axis", axes[0]), Attr::i("keepdims", 0)};
  Aval index = out.with_dtype(dtype::i64);

  Value x = L.input(0);
  if (complex::is(in.dtype))  // JAX traces it, but its comparator (lax.gt/lt) refuses complex values
    L.fail(std::string(L.primitive()) + " of a complex operand: JAX itself cannot evaluate it (lax.gt/lax.lt "
           "take no complex operands); compare jnp.real/jnp.imag or jnp.abs instead");
  // ArgMax/ArgMin have no bool kernel: uint8 keeps false < true.
  Value key = in.dtype == dtype::boolean ? cast(L, x, in, dtype::u8) : ordered(L, x, in);
  Value r = L.op(op, {key}, index, attrs);
  if (dtype::is_float(in.dtype)) {
    Aval mask = in.with_dtype(dtype::boolean);
    Value isnan = L.op("IsNaN", {x}, mask);
    Value first_nan = L.op("ArgMax", {cast(L, isnan, mask, dtype::u8)}, index, attrs);
    Value any_nan = reduce_bool(L, "ReduceMax", isnan, mask, axes);
    r = L.op("Where", {any_nan, first_nan, r}, index);
  }
  L.bind(0, cast(L, r, index, out.dtype));
}

}  // namespace

// The ops each reduction emits, shared by reduce_X and its collective pX.
constexpr std::initializer_list<const char*> kSumOps = {"ReduceSum", "CumSum", "Pad", "Gather", "Cast"};
constexpr std::initializer_list<const char*> kMaxOps = {
    "ReduceMax", "IsNaN", "Where", "Cast", "TopK", "Pad", "Expand", "BitwiseXor",  // int64/uint64: TopK
    "Gather", "Equal", "Squeeze", "Unsqueeze", "Concat"};  // complex: lexicographic
constexpr std::initializer_list<const char*> kMinOps = {
    "ReduceMin", "ReduceMax", "IsNaN", "Where", "Cast", "TopK", "Pad", "Expand", "BitwiseXor",
    "Gather", "Equal", "Squeeze", "Unsqueeze", "Concat"};

JAXONNX_PLUGIN("lax_reduction", "0.1.0") {
  plugin.primitive("reduce_sum", [](Lowering& L) { lower_reduction(L, sum); })
      .emits(kSumOps)
      .doc(onnx_doc("ReduceSum"));
  plugin.primitive("reduce_max", [](Lowering& L) { lower_reduction(L, max); })
      .emits(kMaxOps)
      .emits_shape_ops()
      .doc(onnx_doc("ReduceMax"));
  plugin.primitive("reduce_min", [](Lowering& L) { lower_reduction(L, min); })
      .emits(kMinOps)
      .emits_shape_ops()
      .doc(onnx_doc("ReduceMin"));
  plugin.primitive("reduce_prod", [](Lowering& L) { lower_reduction(L, prod); })
      .emits({"ReduceProd", "Pad", "Slice", "Mul", "Gather", "Concat", "Neg", "Cast",
              // complex operands (complex_prod)
              "ReduceSum", "Abs", "Max", "Min", "Div", "Add", "Sqrt", "Equal", "Or", "Where",
              "Atan", "Greater", "Less", "Sub", "IsInf", "Cos", "Sin", "Unsqueeze"})
      .emits_shape_ops()
      .doc(onnx_doc("ReduceProd"));
  for (auto [name, fn] : {std::pair{"reduce_and", ReduceFn{logic<Logic::And>}},
                          std::pair{"reduce_or", ReduceFn{logic<Logic::Or>}},
                          std::pair{"reduce_xor", ReduceFn{logic<Logic::Xor>}}}) {
    plugin.primitive(name, [fn = fn](Lowering& L) { lower_reduction(L, fn); })
        .emits({"ReduceMin", "ReduceMax", "ReduceSum", "Mod", "Cast", "Unsqueeze", "BitwiseAnd",
                "Where", "Slice", "BitwiseOr", "Squeeze"})
        .doc(onnx_doc(name == std::string("reduce_and")  ? "ReduceMin"
                      : name == std::string("reduce_or") ? "ReduceMax"
                                                         : "ReduceSum"));
  }
  const char* kCollective =
      "over positional axes as reduce_sum / reduce_max / reduce_min; over size-1 mesh axes (shard_map) the identity";
  plugin.primitive("psum", [](Lowering& L) { lower_collective(L, sum); })
      .emits(kSumOps)
      .summary(kCollective);
  plugin.primitive("pmax", [](Lowering& L) { lower_collective(L, max); })
      .emits(kMaxOps)
      .emits_shape_ops()
      .summary(kCollective);
  plugin.primitive("pmin", [](Lowering& L) { lower_collective(L, min); })
      .emits(kMinOps)
      .emits_shape_ops()
      .summary(kCollective);
  plugin.primitive("reduce", lower_reduce)
      .emits({"ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin", "CumSum", "Gather", "Pad",
              "Slice", "Mul", "Concat", "Neg", "Cast", "IsNaN", "Where", "Mod", "Unsqueeze",
              "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Squeeze", "Add", "Max", "Min", "And",
              "Or", "Xor", "TopK", "Expand", "Equal", "Greater", "Less"})
      .emits_shape_ops()
      .summary("when its body is add/mul/max/min/and/or/xor per operand");
  plugin.primitive("argmax", [](Lowering& L) { lower_arg(L, "ArgMax"); })
      .emits({"ArgMax", "IsNaN", "ReduceMax", "Where", "Cast", "BitwiseXor"})
      .doc(onnx_doc("ArgMax"));
  plugin.primitive("argmin", [](Lowering& L) { lower_arg(L, "ArgMin"); })
      .emits({"ArgMin", "ArgMax", "IsNaN", "ReduceMax", "Where", "Cast", "BitwiseXor"})
      .doc(onnx_doc("ArgMin"));
}
