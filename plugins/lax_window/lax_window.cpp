// lax_window: reduce_window_sum / reduce_window_max / reduce_window_min and
// the generic reduce_window (when its body is one add/mul/max/min/and/or/xor
// of accumulator and element per operand), as windowed reductions.
//
// JAX windows span every dimension (batch and channel dims usually have
// window 1). Each is lowered by a separable construction: a window that is
// the product of per-dimension windows reduces one dimension at a time. Per
// dimension: Pad with the monoid's identity (JAX pads reduce_window_max with
// -inf, sum with 0), then combine the k strided Slices x[j*dil :: stride]
// (one per window offset j) elementwise with Add/Mul/Max/Min/... Exact for
// max/min/integers, static and symbolic extents alike (slice ends are
// counted from the end, so no extent is needed). A padding that depends on a
// symbolic extent ("SAME" over a variable-size image) is computed at run time.
//
// Why not ONNX MaxPool/AveragePool: onnxruntime's MaxPool pads (and starts
// every window) with -FLT_MAX, not -inf, so a window of -inf/padding yields
// -3.4e38 where JAX gives -inf, and it skips NaN where JAX propagates it
// (onnxruntime 1.31, 2x2 VALID, one NaN in a window of zeros: float32 keeps it
// only in the window's second position, float64 only in the first);
// AveragePool * k is not an exact sum and has no f64 kernel. The slice
// construction is exact for max/min and sums in a fixed order. Speed does not
// argue otherwise for a 2x2 stride-2 window over NHWC (onnxruntime 1.31, one
// thread, (B, H, W, C) from (1, 32, 32, 16) to (8, 64, 64, 64)): the Slices +
// Max take 0.6-1.0x the time of Transpose + MaxPool + Transpose and 0.3-0.6x
// that of AveragePool; only a MaxPool between two Convs, whose transposes
// cancel, is faster (1.4-3x against the Slices alone). flax's max_pool gets
// that op through nn_layers' binding specs (also when reached through a
// stored reference), outside crisp="exact".
//
// The generic reduce_window with a non-identity init value: XLA on CPU
// folds the init in once per window and does not count padded elements (a
// window of padding yields the init), so the result is monoid(init, window
// reduction with identity padding).
//
// NaN: JAX's max/min windows propagate NaN, and so do onnxruntime's
// elementwise Max/Min (unlike its MaxPool and ReduceMax); tested.
//
// onnxruntime kernels: Pad has no 16-bit kernels and Max/Min no 16-bit or
// bool kernels: int16/uint16 compute in int32 (value-preserving; sums and
// products wrap back on the final Cast), bool max/min in uint8.
// base_dilation > 1 (gradients, strided windows transposed) puts identity
// holes between the elements first (dilate_base).
//
// Complex operands (carried as float[..., 2], jaxonnx/complex.hpp): the
// packed form is windowed (its parts axis never is); add windows sum it,
// max/min windows keep the lexicographically larger/smaller value, as JAX
// orders complex values (real part, then imaginary), padding both parts with
// -inf/+inf. mul windows multiply complex values pairwise in window order;
// Pad cannot put their identity 1 + 0i into the packed form (one scalar pads
// both parts), so their padding and holes are padded with 0 and then set to
// [1, 0] where a Pad of a false mask put true (Where).
#include <jaxonnx/complex.hpp>
#include <jaxonnx/max_min.hpp>
#include <jaxonnx/plugin.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

enum class Kind { Add, Mul, Max, Min, And, Or, Xor };

struct Window {
  std::vector<int64_t> dims, strides, dilation, base;
  // A pad is symbolic when it depends on a symbolic extent ("SAME" windows
  // over a variable-size image): it is then computed at run time.
  std::vector<std::pair<Dim, Dim>> padding;
};

Window window_params(Lowering& L, int64_t rank) {
  Window w;
  w.dims = L.param("window_dimensions").as_ints();
  w.strides = L.param("window_strides").as_ints();
  w.dilation = L.param("window_dilation").as_ints();
  for (const Param& p : L.param("padding").items()) w.padding.push_back({p[0].as_dim(), p[1].as_dim()});
  w.base = L.param("base_dilation").as_ints();
  for (int64_t b : w.base)
    if (b < 1) L.fail(std::string(L.primitive()) + ": base_dilation " + std::to_string(b) + " must be >= 1");
  if (int64_t(w.dims.size()) != rank || int64_t(w.strides.size()) != rank ||
      int64_t(w.dilation.size()) != rank || int64_t(w.padding.size()) != rank ||
      int64_t(w.base.size()) != rank)
    L.fail(std::string(L.primitive()) + ": window params do not match the operand rank");
  return w;
}

// The dtype the reduction runs in (see the header: onnxruntime kernels).
// Before opset 14 Add/Mul have no 8-bit integer form either.
int32_t compute_dtype(Kind k, int32_t t, int64_t opset) {
  if (t == dtype::i16 || t == dtype::u16) return dtype::i32;
  if ((t == dtype::i8 || t == dtype::u8) && (k == Kind::Add || k == Kind::Mul) && opset < 14)
    return dtype::i32;
  if (t == dtype::bf16 || t == dtype::f16) return dtype::f32;
  if (t == dtype::boolean && (k == Kind::Max || k == Kind::Min)) return dtype::u8;
  return t;
}

// The ONNX op combining two windows' worth of `t` (the compute dtype).
const char* combine_op(Kind k, int32_t t) {
  bool b = t == dtype::boolean;
  switch (k) {
    case Kind::Add: return "Add";
    case Kind::Mul: return "Mul";
    case Kind::Max: return "Max";
    case Kind::Min: return "Min";
    case Kind::And: return b ? "And" : "BitwiseAnd";
    case Kind::Or: return b ? "Or" : "BitwiseOr";
    case Kind::Xor: return b ? "Xor" : "BitwiseXor";
  }
  return "";
}

template <typename T> std::vector<char> bytes_of(T v) {
  std::vector<char> b(sizeof(T));
  std::memcpy(b.data(), &v, sizeof(T));
  return b;
}

// Writes `v` (one of a float, a signed or an unsigned integer) as dtype `t`.
struct Num {
  enum { F, I, U } kind;
  double f; int64_t i; uint64_t u;
};
std::vector<char> encode(const Num& n, int32_t t) {
  auto conv = [&](auto tag) {
    using T = decltype(tag);
    if (n.kind == Num::F) return bytes_of<T>(static_cast<T>(n.f));
    if (n.kind == Num::I) return bytes_of<T>(static_cast<T>(n.i));
    return bytes_of<T>(static_cast<T>(n.u));
  };
  switch (t) {
    case dtype::f32: return conv(float{});
    case dtype::f64: return conv(double{});
    case dtype::i8: return conv(int8_t{});
    case dtype::i16: return conv(int16_t{});
    case dtype::i32: return conv(int32_t{});
    case dtype::i64: return conv(int64_t{});
    case dtype::u8: return conv(uint8_t{});
    case dtype::u16: return conv(uint16_t{});
    case dtype::u32: return conv(uint32_t{});
    case dtype::u64: return conv(uint64_t{});
    case dtype::boolean: return conv(uint8_t{});
    default: throw Error(std::string("lax_window: unsupported dtype ") + dtype::name(t));
  }
}

// The identity of monoid `k` over dtype `t` (the operand's own dtype: the
// max identity of int16 is -32768, also when computing in int32).
Num identity(Kind k, int32_t t) {
  const int bits = static_cast<int>(dtype::itemsize(t)) * 8;
  const bool fl = dtype::is_float(t), sg = dtype::is_signed_int(t);
  const int64_t smax = bits >= 64 ? INT64_MAX : (int64_t{1} << (bits - 1)) - 1;
  const uint64_t umax = t == dtype::boolean ? 1 : bits >= 64 ? UINT64_MAX : (uint64_t{1} << bits) - 1;
  switch (k) {
    case Kind::Add: case Kind::Or: case Kind::Xor: return {Num::I, 0, 0, 0};
    case Kind::Mul: return {Num::I, 0, 1, 0};
    case Kind::And: return sg ? Num{Num::I, 0, -1, 0} : Num{Num::U, 0, 0, umax};
    case Kind::Max:
      if (fl) return {Num::F, -INFINITY, 0, 0};
      return sg ? Num{Num::I, 0, -smax - 1, 0} : Num{Num::I, 0, 0, 0};
    case Kind::Min:
      if (fl) return {Num::F, INFINITY, 0, 0};
      return sg ? Num{Num::I, 0, smax, 0} : Num{Num::U, 0, 0, umax};
  }
  return {Num::I, 0, 0, 0};
}

Value scalar_const(Lowering& L, int32_t t, const std::vector<char>& b) {
  return L.constant(t, {}, b.data(), b.size());
}

// Reduces the windows of `x` (type `cur`, in the compute dtype) with the
// elementwise `op`, padding with `pad` (the monoid's identity, a scalar of
// that dtype). A k-wide window costs k Slices and k-1 `op`s per dimension;
// `out_shape` is JAX's output shape.
// How two windows' worth of values (aval `cur`) combine.
using Combine = std::function<Value(Value, Value, const Aval&)>;
// Pads a value with the monoid's identity (padding and base-dilation holes):
// given `x` and `pad(v, fill, dtype)`, which pads any `v` of x's shape (and
// dtype `dtype`) the same way with the scalar `fill`.
using Fill = std::function<Value(Value, Value, int32_t)>;
using Padder = std::function<Value(Value, const Fill&)>;
// The usual padder: `fill` (a scalar of the compute dtype) itself.
Padder pad_with(Value fill) {
  return [fill](Value x, const Fill& pad) { return pad(x, fill, -1); };
}

// base_dilation b along axis d: b - 1 holes between neighbours, filled with
// the monoid's identity `pad` (XLA treats them as padding), so n elements
// become (n - 1) * b + 1 (none for n = 0): Unsqueeze a unit axis after d, Pad
// it to b, merge the two, Slice off the b - 1 trailing holes (clamped at 0).
Value dilate_base(Lowering& L, Value x, const Aval& cur, size_t d, int64_t b, const Padder& pad) {
  const int32_t t = cur.dtype;
  const Dim n = cur.shape[d];
  Shape grown = cur.shape, merged = cur.shape;
  grown.insert(grown.begin() + int64_t(d) + 1, Dim(b));
  merged[d] = n.is_static() ? Dim(n.value * b) : Dim::sym(std::to_string(b) + "*(" + n.symbol + ")");
  Value u = L.op("Unsqueeze", {x, i64s(L, {int64_t(d) + 1})}, Aval::of_unknown_shape(t));
  Value p = pad(u, [&](Value v, Value fill, int32_t vt) {
    return pad_axis(L, v, int64_t(grown.size()), int64_t(d) + 1, 0, b - 1, fill, Aval(vt < 0 ? t : vt, grown));
  });
  Value m = reshape(L, p, Aval(t, grown), Aval(t, merged));
  return L.op("Slice", {m, i64s(L, {0}), i64s(L, {-(b - 1)}), i64s(L, {int64_t(d)})}, Aval::of_unknown_shape(t));
}

Value windowed(Lowering& L, const Combine& combine, Value x, Aval cur, const Padder& pad, const Window& w,
               const Shape& out_shape) {
  const size_t rank = w.dims.size();  // a complex operand's parts axis is not windowed
  for (size_t d = 0; d < rank; ++d) {
    const int64_t kd = w.dims[d], s = w.strides[d], dil = w.dilation[d];
    const auto& [lo_dim, hi_dim] = w.padding[d];
    if (kd == 1 && s == 1 && lo_dim == Dim(0) && hi_dim == Dim(0) && w.base[d] == 1) continue;
    Value axes = i64s(L, {int64_t(d)});
    if (w.base[d] > 1) x = dilate_base(L, x, cur, d, w.base[d], pad);
    if (!lo_dim.is_static() || !hi_dim.is_static()) {
      // Runtime pads; a negative one crops, as ONNX Pad does.
      x = pad(x, [&](Value v, Value fill, int32_t vt) {
        return pad_axis_by(L, v, cur.rank(), int64_t(d), dim_value(L, lo_dim), dim_value(L, hi_dim), fill,
                           Aval::of_unknown_shape(vt < 0 ? cur.dtype : vt));
      });
    } else {
      const int64_t lo = lo_dim.value, hi = hi_dim.value;
      // Negative padding crops.
      if (lo < 0 || hi < 0) {
        int64_t start = lo < 0 ? -lo : 0;
        int64_t end = hi < 0 ? hi : INT64_MAX;
        x = L.op("Slice", {x, i64s(L, {start}), i64s(L, {end}), axes}, Aval::of_unknown_shape(cur.dtype));
      }
      if (lo > 0 || hi > 0)
        x = pad(x, [&](Value v, Value fill, int32_t vt) {
          return pad_axis(L, v, cur.rank(), int64_t(d), lo > 0 ? lo : 0, hi > 0 ? hi : 0, fill,
                          Aval::of_unknown_shape(vt < 0 ? cur.dtype : vt));
        });
    }
    cur.shape[d] = out_shape[d];
    const int64_t eff = (kd - 1) * dil + 1;
    Value acc = kNoValue;
    for (int64_t j = 0; j < kd; ++j) {
      const int64_t start = j * dil, from_end = eff - 1 - j * dil;
      Value sl = L.op("Slice", {x, i64s(L, {start}), i64s(L, {from_end == 0 ? INT64_MAX : -from_end}),
                                axes, i64s(L, {s})},
                      cur);
      acc = acc == kNoValue ? sl : combine(acc, sl, cur);
    }
    x = acc;
  }
  return x;
}

// Combining packed complex values (of complex dtype `t`): Add, or the
// lexicographic max/min (the second value where it beats the first).
Combine complex_combine(Lowering& L, Kind k, int32_t t) {
  if (k == Kind::Add) return [&L](Value a, Value b, const Aval& packed) { return L.op("Add", {a, b}, packed); };
  // The complex aval a packed value carries (a folded-in init is rank 0).
  auto logical_of = [t](const Aval& v) { return Aval(t, Shape(v.shape.begin(), v.shape.end() - 1)); };
  if (k == Kind::Mul)
    return [&L, logical_of](Value a, Value b, const Aval& packed) {
      const Aval logical = logical_of(packed);
      complex::Parts x = complex::split(L, a, logical_of(L.aval_of(a))), y = complex::split(L, b, logical_of(L.aval_of(b)));
      return complex::pack(L, complex::mul(L, x, y, complex::part(logical)), logical);
    };
  const char* beats = k == Kind::Max ? "Greater" : "Less";
  return [&L, beats, logical_of](Value a, Value b, const Aval& packed) {
    const Aval logical = logical_of(packed), mask = logical.with_dtype(dtype::boolean);
    complex::Parts x = complex::split(L, a, logical_of(L.aval_of(a))), y = complex::split(L, b, logical_of(L.aval_of(b)));
    Value take = L.op("Or", {L.op(beats, {y.re, x.re}, mask),
                             L.op("And", {L.op("Equal", {y.re, x.re}, mask), L.op(beats, {y.im, x.im}, mask)}, mask)},
                      mask);
    Shape one = logical.shape;
    one.push_back(Dim(1));
    Value w = L.op("Unsqueeze", {take, i64s(L, {-1})}, Aval(dtype::boolean, one));
    return L.op("Where", {w, b, a}, packed);
  };
}

// One windowed reduction of input `xi` by `k`; `init` (a value of the
// operand's dtype) is folded in unless it is kNoValue.
Value reduce_window(Lowering& L, Kind k, size_t xi, Value init) {
  const Aval in = L.in_aval(xi);
  const Aval out = L.out_aval(xi);
  const Window w = window_params(L, in.rank());
  if (complex::is(in.dtype)) {
    if (k != Kind::Add && k != Kind::Mul && k != Kind::Max && k != Kind::Min)
      L.fail(std::string(L.primitive()) + ": only add, mul, max and min windows of complex operands are lowered");
    const Aval p = complex::part(in);
    const Combine c = complex_combine(L, k, in.dtype);
    const double fill = k == Kind::Add || k == Kind::Mul ? 0 : k == Kind::Max ? -INFINITY : INFINITY;
    Padder pad = pad_with(scalar(L, p.dtype, fill));
    if (k == Kind::Mul) {  // 0 + 0i padded, then 1 + 0i where a false mask padded true
      const int32_t pt = p.dtype;
      pad = [&L, pt](Value x, const Fill& pad_like) {
        Value zeros = pad_like(x, scalar(L, pt, 0), -1);
        Value shape = L.op("Shape", {x}, Aval::of_unknown_shape(dtype::i64));
        Value none = L.op("Expand", {scalar(L, dtype::boolean, 0), shape}, Aval::of_unknown_shape(dtype::boolean));
        Value held = pad_like(none, scalar(L, dtype::boolean, 1), dtype::boolean);
        Value one = pt == dtype::f32 ? L.constant(std::vector<float>{1, 0}, {2})
                                     : L.constant(std::vector<double>{1, 0}, {2});
        return L.op("Where", {held, one, zeros}, L.aval_of(zeros));
      };
    }
    Value r = windowed(L, c, L.input(xi), complex::packed(in), pad, w, out.shape);
    return init == kNoValue ? r : c(init, r, complex::packed(out));
  }
  const int32_t ct = compute_dtype(k, in.dtype, L.opset());
  if (in.dtype == dtype::boolean && (k == Kind::Add || k == Kind::Mul))
    L.fail(std::string(L.primitive()) + ": add/mul windows over bool are not supported");
  const char* op = combine_op(k, ct);
  // Float identities (0, 1, +-inf) are exact in any float type: build them in
  // ct directly (f16/bf16 compute in f32).
  const int32_t id_t = dtype::is_float(in.dtype) ? ct : in.dtype;
  Value pad = cast(L, scalar_const(L, id_t, encode(identity(k, in.dtype), id_t)), Aval(id_t, {}), ct);
  Value x = cast(L, L.input(xi), in, ct);
  // Max/Min through max_min.hpp: onnxruntime's int64 Max/Min compare wrongly.
  const Combine c = [&](Value a, Value b, const Aval& t) {
    return k == Kind::Max || k == Kind::Min ? max_or_min(L, k == Kind::Max, a, b, t) : bitwise(L, op, {a, b}, t);
  };
  Value r = windowed(L, c, x, in.with_dtype(ct), pad_with(pad), w, out.shape);
  Aval rc = out.with_dtype(ct);
  if (init != kNoValue) r = c(cast(L, init, Aval(in.dtype, {}), ct), r, rc);
  return cast(L, r, rc, out.dtype);
}

void lower_fixed(Lowering& L, Kind k) { L.bind(0, reduce_window(L, k, 0, kNoValue)); }

// The generic reduce_window(operands..., inits..., jaxpr, consts, window...).
void lower_generic(Lowering& L) {
  const size_t n = L.num_outputs();
  JaxprView body(L.api(), L.param("jaxpr").as_jaxpr());
  if (body.num_eqns() != n)
    L.fail("reduce_window: the body is not one monoid per operand (it has " +
           std::to_string(body.num_eqns()) + " equations for " + std::to_string(n) +
           " operands); only add/mul/max/min/and/or/xor bodies convert");
  static const std::pair<const char*, Kind> kPrims[] = {
      {"add", Kind::Add}, {"mul", Kind::Mul}, {"max", Kind::Max}, {"min", Kind::Min},
      {"and", Kind::And}, {"or", Kind::Or},   {"xor", Kind::Xor}};
  for (size_t i = 0; i < n; ++i) {
    std::string_view combiner = body.combiner(i, n);
    const Kind* kind = nullptr;
    for (const auto& [p, k] : kPrims)
      if (combiner == p) kind = &k;
    if (!kind)
      L.fail("reduce_window: body output " + std::to_string(i) +
             " is not add/mul/max/min/and/or/xor of its accumulator and element");
    const Aval in = L.in_aval(i);
    // An init equal to the identity (the usual case) folds away.
    Value init = L.input(n + i);
    const jxo_tensor* lit = L.literal(n + i);
    if (lit && in.dtype != dtype::f16 && in.dtype != dtype::bf16) {
      const int32_t t = complex::part_dtype(in.dtype);  // complex: both parts the identity
      std::vector<char> id = encode(identity(*kind, t), t);
      if (complex::is(in.dtype)) {
        const size_t half = id.size();
        id.resize(2 * half);
        std::memcpy(id.data() + half, id.data(), half);
      }
      if (lit->nbytes == id.size() && std::memcmp(lit->data, id.data(), id.size()) == 0) init = kNoValue;
    }
    L.bind(i, reduce_window(L, *kind, i, init));
  }
}

}  // namespace

JAXONNX_PLUGIN("lax_window", "0.1.0") {
  plugin.primitive("reduce_window_sum", [](Lowering& L) { lower_fixed(L, Kind::Add); })
      .emits({"Pad", "Slice", "Add", "Cast", "Concat"})
      .emits({"Unsqueeze", "Reshape"})  // base_dilation
      .emits_shape_ops()  // a padding that depends on a symbolic extent
      .summary("Pad with 0, then Add the strided Slices of each window offset");
  plugin.primitive("reduce_window_max", [](Lowering& L) { lower_fixed(L, Kind::Max); })
      .emits({"Pad", "Slice", "Max", "Cast",
              "Gather", "Greater", "Equal", "And", "Or", "Unsqueeze", "Where"})  // complex: lexicographic
      .emits({"Reshape", "Concat"})  // base_dilation, runtime pads
      .emits_shape_ops()
      .summary("Pad with -inf/min, then Max of the strided Slices of each window offset");
  plugin.primitive("reduce_window_min", [](Lowering& L) { lower_fixed(L, Kind::Min); })
      .emits({"Pad", "Slice", "Min", "Cast",
              "Gather", "Less", "Equal", "And", "Or", "Unsqueeze", "Where"})  // complex: lexicographic
      .emits({"Reshape", "Concat"})  // base_dilation, runtime pads
      .emits_shape_ops()
      .summary("Pad with +inf/max, then Min of the strided Slices of each window offset");
  plugin.primitive("reduce_window", lower_generic)
      .emits({"Pad", "Slice", "Add", "Mul", "Max", "Min", "And", "Or", "Xor", "BitwiseAnd",
              "BitwiseOr", "BitwiseXor", "Cast",
              "Gather", "Greater", "Less", "Equal", "Unsqueeze", "Where"})  // complex: lexicographic
      .emits({"Sub", "Concat", "Shape", "Expand"})  // complex mul: the product, its padding
      .emits({"Reshape", "Concat"})  // base_dilation, runtime pads
      .emits_shape_ops()
      .summary("when its body is add/mul/max/min/and/or/xor per operand");
}
