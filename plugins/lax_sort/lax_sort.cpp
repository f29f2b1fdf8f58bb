// lax_sort: sort / top_k / approx_top_k as ONNX TopK (+ GatherElements).
//
// ONNX TopK with k = the axis length and sorted=1 is a full sort that also
// yields the permutation, and it breaks ties by index ("the element with the
// lower index appears first"), so it is stable in both directions. A stable
// sort by several keys is a chain of stable sorts from the least significant
// key to the most significant one, each on the key gathered through the
// permutation so far (GatherElements). All other operands are then permuted
// with one GatherElements each. The sorted length comes from the runtime
// shape when the axis is symbolic.
//
// JAX's orders differ from TopK's plain `<` on floats, and TopK has no
// defined answer with NaN (onnxruntime's comparator is then not a strict
// weak order), so float keys are rewritten before TopK sees them:
//   sort (and approx_top_k): -0.0 == 0.0, every NaN is equal and greater
//     than +inf (JAX canonicalizes floats before a total-order compare);
//   top_k: a total order, -0.0 < 0.0 and NaN greater than +inf.
// f32/f16/bf16 keys embed into f64 with room to spare: +inf becomes DBL_MAX,
// NaN +inf, -0.0 (top_k only) -1e-300, so one TopK orders them exactly. An
// f64 key has no wider type: it becomes two keys, the value with NaN -> +inf
// and a small uint8 tie-breaker (NaN above +inf; for top_k 0.0 above -0.0).
// Known difference: JAX's top_k puts a NaN with its sign bit set (-NaN)
// last; ONNX (<= opset 23) cannot read a NaN's sign bit, so every NaN ranks
// first here.
//
// Complex operands (carried as float[..., 2], jaxonnx/complex.hpp) sort as
// JAX's comparator orders them: by the real part's keys, then the imaginary
// part's; complex operands are permuted part by part.
//
// onnxruntime's TopK has kernels for float, double, float16, int8/16/32/64
// and uint8 only: bool keys go through uint8, uint16 through int32, uint32
// through int64, and uint64 through int64 with the sign bit flipped (an
// order-preserving map).
#include <jaxonnx/complex.hpp>
#include <jaxonnx/plugin.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

// The float order a key follows.
enum class Order {
  kSort,   // lax.sort: -0.0 == 0.0, NaNs equal and above +inf
  kTotal,  // lax.top_k: -0.0 < 0.0, NaN above +inf
};

// A tensor TopK can order directly.
struct Key {
  Value v;
  Aval a;
};

// The TopK keys (most significant first) that order operand `x` as JAX does.
// `exact` says the first key is `x` itself, so TopK's values are x sorted.
struct Keys {
  std::vector<Key> keys;
  bool exact = false;
};

Keys float_keys(Lowering& L, Value x, const Aval& a, Order order) {
  Aval mask = a.with_dtype(dtype::boolean);
  if (dtype::itemsize(a.dtype) <= 4) {
    // One f64 key: every value of a <= 32-bit float is exact in f64, with
    // room above FLT_MAX for +inf and NaN and between 0 and the smallest
    // negative denormal for -0.0.
    Aval a64 = a.with_dtype(dtype::f64);
    Value c = cast(L, x, a, dtype::f64);
    Value k = L.op("Min", {c, scalar(L, dtype::f64, DBL_MAX)}, a64);
    // The NaN and -0.0 tests read a float32 key itself (tract has no float64
    // IsNaN or IsInf); a 16-bit one its float64 copy.
    const bool own = a.dtype == dtype::f32;
    Value t = own ? x : c;
    const Aval& ta = own ? a : a64;
    if (order == Order::kTotal) {
      // -0.0 is the only value whose reciprocal is -inf.
      Value neg0 = L.op("IsInf", {L.op("Reciprocal", {t}, ta)}, mask, {Attr::i("detect_positive", 0)});
      k = L.op("Where", {neg0, scalar(L, dtype::f64, -1e-300), k}, a64);
    }
    k = L.op("Where", {L.op("IsNaN", {t}, mask), scalar(L, dtype::f64, INFINITY), k}, a64);
    return {{{k, a64}}, false};
  }
  // f64: the value with NaN -> +inf, then a uint8 tie-breaker among equals.
  Aval u8 = a.with_dtype(dtype::u8);
  Value isnan = L.op("IsNaN", {x}, mask);
  Value primary = L.op("Where", {isnan, scalar(L, a.dtype, INFINITY), x}, a);
  Value tie;
  if (order == Order::kSort) {
    tie = cast(L, isnan, mask, dtype::u8);  // NaN (1) after +inf (0)
  } else {
    // NaN 2 > 0.0 and every other value 1 > -0.0 0.
    Value neg0 = L.op("IsInf", {L.op("Reciprocal", {x}, a)}, mask, {Attr::i("detect_positive", 0)});
    tie = L.op("Where", {neg0, scalar(L, dtype::u8, 0), scalar(L, dtype::u8, 1)}, u8);
    tie = L.op("Where", {isnan, scalar(L, dtype::u8, 2), tie}, u8);
  }
  return {{{primary, a}, {tie, u8}}, false};
}

Keys keys_of(Lowering& L, Value x, const Aval& a, Order order) {
  if (dtype::is_float(a.dtype)) return float_keys(L, x, a, order);
  switch (a.dtype) {
    case dtype::boolean: return {{{cast(L, x, a, dtype::u8), a.with_dtype(dtype::u8)}}, false};
    case dtype::u16: return {{{cast(L, x, a, dtype::i32), a.with_dtype(dtype::i32)}}, false};
    case dtype::u32: return {{{cast(L, x, a, dtype::i64), a.with_dtype(dtype::i64)}}, false};
    case dtype::u64: {
      // Cast wraps values >= 2^63 to negatives; flipping the sign bit then
      // maps 0..2^64-1 monotonically onto INT64_MIN..INT64_MAX.
      Aval i64 = a.with_dtype(dtype::i64);
      Value sign = L.constant(std::vector<int64_t>{std::numeric_limits<int64_t>::min()}, {});
      Value k = bitwise(L, "BitwiseXor", {cast(L, x, a, dtype::i64), sign}, i64);
      return {{{k, i64}}, false};
    }
    case dtype::i8: case dtype::i16: case dtype::i32: case dtype::i64: case dtype::u8:
      return {{{x, a}}, true};
    default:
      L.fail(std::string("no ONNX TopK ordering for dtype ") + dtype::name(a.dtype));
  }
}

Shape with_dim(Shape s, int64_t axis, const Dim& d) {
  s[static_cast<size_t>(axis)] = d;
  return s;
}

// The result of ordering: int64 indices along the axis, and the sorted
// values of the most significant key.
struct Ordered {
  Value idx;
  Value key_values;
  Shape shape;
};

// A stable lexicographic order of `keys` (most significant first) along
// `axis` of length n, keeping the first `k`.
Ordered lexsort(Lowering& L, const std::vector<Key>& keys, int64_t axis, const Dim& n, const Dim& k,
                bool largest) {
  const std::vector<Attr> attrs = {Attr::i("axis", axis), Attr::i("largest", largest ? 1 : 0),
                                   Attr::i("sorted", 1)};
  Value perm = kNoValue;
  Value values = kNoValue;
  Shape perm_shape;
  for (size_t i = keys.size(); i-- > 0;) {
    Key key = keys[i];
    if (perm != kNoValue) {
      key.a = key.a.with_shape(perm_shape);
      key.v = L.op("GatherElements", {key.v, perm}, key.a, {Attr::i("axis", axis)});
    }
    Shape s = with_dim(key.a.shape, axis, i == 0 ? k : n);
    std::vector<Value> outs = L.op_n("TopK", {key.v, dim_value(L, i == 0 ? k : n)},
                                     {key.a.with_shape(s), Aval(dtype::i64, s)}, attrs);
    values = outs[0];
    perm = perm == kNoValue ? outs[1]
                            : L.op("GatherElements", {perm, outs[1]}, Aval(dtype::i64, s),
                                   {Attr::i("axis", axis)});
    perm_shape = s;
  }
  return {perm, values, perm_shape};
}

// `x` permuted by `ord` along `axis` (a complex `x` part by part).
Value gather(Lowering& L, Value x, const Aval& a, const Ordered& ord, int64_t axis) {
  if (complex::is(a.dtype)) {
    const Aval p = complex::part(a);
    complex::Parts z = complex::split(L, x, a);
    return complex::pack(L, gather(L, z.re, p, ord, axis), gather(L, z.im, p, ord, axis), a.with_shape(ord.shape));
  }
  return L.op("GatherElements", {x, ord.idx}, a.with_shape(ord.shape), {Attr::i("axis", axis)});
}

int64_t normalized_axis(Lowering& L, const char* name, int64_t axis, int64_t rank) {
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank)
    L.fail(std::string("param '") + name + "' = " + std::to_string(axis) + " is out of range for rank " +
           std::to_string(rank));
  return axis;
}

// -------------------------------------------------------------------- sort --

// sort(*operands, dimension, is_stable, num_keys): a stable sort is also a
// valid answer for is_stable=False.
void lower_sort(Lowering& L) {
  Aval a0 = L.in_aval(0);
  int64_t axis = normalized_axis(L, "dimension", L.param("dimension").as_int(), a0.rank());
  int64_t num_keys = L.param("num_keys").as_int();
  if (num_keys < 1 || num_keys > static_cast<int64_t>(L.num_inputs()))
    L.fail("param 'num_keys' = " + std::to_string(num_keys) + " must be in 1.." +
           std::to_string(L.num_inputs()));
  std::vector<Key> keys;
  bool exact = false;
  for (int64_t j = 0; j < num_keys; ++j) {
    const Aval aj = L.in_aval(j);
    if (complex::is(aj.dtype)) {  // the real part's keys, then the imaginary part's
      complex::Parts z = complex::split(L, L.input(j), aj);
      for (Value v : {z.re, z.im}) {
        Keys kp = keys_of(L, v, complex::part(aj), Order::kSort);
        keys.insert(keys.end(), kp.keys.begin(), kp.keys.end());
      }
      continue;
    }
    Keys kj = keys_of(L, L.input(j), aj, Order::kSort);
    if (j == 0) exact = kj.exact;
    keys.insert(keys.end(), kj.keys.begin(), kj.keys.end());
  }
  const Dim& n = a0.shape[static_cast<size_t>(axis)];
  Ordered ord = lexsort(L, keys, axis, n, n, /*largest=*/false);
  for (size_t i = 0; i < L.num_inputs(); ++i)
    L.bind(i, i == 0 && exact ? ord.key_values : gather(L, L.input(i), L.in_aval(i), ord, axis));
}

// ------------------------------------------------------------------- top_k --

// TopK(largest=1, sorted=1) with int32 indices. `axis` is the last axis in
// JAX versions without the param.
void lower_top_k_common(Lowering& L, int64_t axis, const Dim& k, bool largest, Order order) {
  Aval in = L.in_aval(0);
  Value x = L.input(0);
  Keys keys = keys_of(L, x, in, order);
  Ordered ord = lexsort(L, keys.keys, axis, in.shape[static_cast<size_t>(axis)], k, largest);
  L.bind(0, keys.exact && keys.keys.size() == 1 ? ord.key_values : gather(L, x, in, ord, axis));
  L.bind(1, cast(L, ord.idx, Aval(dtype::i64, ord.shape), L.out_aval(1).dtype));
}

void lower_top_k(Lowering& L) {
  Aval in = L.in_aval(0);
  int64_t axis = L.has_param("axis") ? L.param("axis").as_int() : in.rank() - 1;
  axis = normalized_axis(L, "axis", axis, in.rank());
  lower_top_k_common(L, axis, L.param("k").as_dim(), /*largest=*/true, Order::kTotal);
}

// approx_top_k: exact here, as JAX computes it off TPU (a sort with a plain
// > / < comparator: -0.0 == 0.0). recall_target and
// reduction_input_size_override only tune the TPU algorithm. With
// aggregate_to_topk=False the output length is JAX's (it may exceed k).
// JAX's order of NaNs is unspecified here (its comparator is not a strict
// weak order with NaN); NaN ranks above +inf, as in lax.sort.
void lower_approx_top_k(Lowering& L) {
  Aval in = L.in_aval(0);
  int64_t axis = normalized_axis(L, "reduction_dimension", L.param("reduction_dimension").as_int(),
                                 in.rank());
  Dim k = L.out_aval(0).shape.at(static_cast<size_t>(axis));
  lower_top_k_common(L, axis, k, L.param("is_max_k").as_bool(), Order::kSort);
}

}  // namespace

JAXONNX_PLUGIN("lax_sort", "0.1.0") {
  plugin.primitive("sort", lower_sort)
      .emits({"TopK", "GatherElements", "Cast", "Min", "IsNaN", "Where", "BitwiseXor",
              "Gather", "Unsqueeze", "Concat"})  // complex operands
      .emits_shape_ops()
      .doc(onnx_doc("TopK"));
  plugin.primitive("top_k", lower_top_k)
      .emits({"TopK", "GatherElements", "Cast", "Min", "IsNaN", "IsInf", "Reciprocal", "Where",
              "BitwiseXor"})
      .emits_shape_ops()
      .doc(onnx_doc("TopK"));
  plugin.primitive("approx_top_k", lower_approx_top_k)
      .emits({"TopK", "GatherElements", "Cast", "Min", "IsNaN", "Where"})
      .emits_shape_ops()
      .doc(onnx_doc("TopK"));
}
