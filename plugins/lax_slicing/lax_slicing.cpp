// lax_slicing: JAX's slicing and assembling primitives as ONNX Slice / Concat
// / Pad / Split / Range.
//
//   rev          -> one Slice with steps -1 over the reversed axes (ONNX has
//                   no Reverse op).
//   slice        -> one Slice over the axes that actually change; a full
//                   slice emits nothing.
//   concatenate  -> Concat.
//   split        -> Split with a `split` sizes input (opset 18+).
//   pad          -> Pad (constant mode). Negative low/high crop, as ONNX Pad
//                   allows (with a Slice where the dim may be too short for
//                   onnxruntime's Pad). Interior padding has no ONNX op:
//                   Unsqueeze + Pad + Reshape interleaves it, for all axes at once.
//   iota         -> a constant when the counted dim is static and small,
//                   else Range; then Expand to the full shape.
//
// Params may hold symbolic dims (slice limits "B", starts "mod(-2, B)", split
// sizes "B"); those become runtime int64 values through L.shape_value, never
// integers. A step that would be the identity emits no node.
//
// A complex operand is carried packed (float[..., 2], jaxonnx/complex.hpp):
// rev/slice/concatenate/split touch only its leading (logical) axes, so they
// run on the packed value with packed avals; pad pads each part with its
// part of the padding value.
#include <jaxonnx/complex.hpp>
#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <string>

namespace {

using namespace jaxonnx::sdk;

constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();
constexpr int64_t kMinI64 = std::numeric_limits<int64_t>::min();

// mul*d + add as a Dim, for the avals of intermediate values only (a
// symbolic result is a readable dim_param, never evaluated).
Dim affine(const Dim& d, int64_t mul, int64_t add) {
  if (d.is_static()) return Dim(d.value * mul + add);
  std::string s = mul == 1 ? d.symbol : std::to_string(mul) + "*(" + d.symbol + ")";
  if (add > 0) s += " + " + std::to_string(add);
  if (add < 0) s += " - " + std::to_string(-add);
  return Dim::sym(s);
}

bool has_static_zero(const Shape& s) {
  return std::any_of(s.begin(), s.end(), [](const Dim& d) { return d.is_static() && d.value == 0; });
}

// -------------------------------------------------------------------- rev --

// rev(x, dimensions): Slice(starts=-1, ends=INT64_MIN, steps=-1) walks each
// axis backwards from its last element past its first. Axes of static size 1
// are already their own reverse and are left out.
void lower_rev(Lowering& L) {
  Aval in = L.in_aval(0);
  std::vector<int64_t> axes;
  for (int64_t a : L.axes_param("dimensions", in.rank()))
    if (in.shape[static_cast<size_t>(a)] != Dim(1)) axes.push_back(a);
  Value x = L.input(0);
  if (axes.empty()) {
    L.bind(0, x);
    return;
  }
  std::sort(axes.begin(), axes.end());
  const size_t n = axes.size();
  L.bind(0, L.op("Slice",
                 {x, i64s(L, std::vector<int64_t>(n, -1)), i64s(L, std::vector<int64_t>(n, kMinI64)),
                  i64s(L, axes), i64s(L, std::vector<int64_t>(n, -1))},
                 complex::packed(L.out_aval(0))));
}

// ------------------------------------------------------------------ slice --

// slice(x, start_indices, limit_indices, strides): JAX guarantees
// 0 <= start <= limit <= dim, so ONNX Slice's clamping never changes the
// answer. A limit equal to the whole (possibly symbolic) dim becomes
// INT64_MAX ("to the end"), which needs no runtime shape value.
void lower_slice(Lowering& L) {
  Aval in = L.in_aval(0);
  Shape starts = L.param("start_indices").as_dims();
  Shape limits = L.param("limit_indices").as_dims();
  std::vector<int64_t> strides(starts.size(), 1);
  if (!L.param("strides").is_none()) strides = L.param("strides").as_ints();
  if (starts.size() != in.shape.size() || limits.size() != in.shape.size() || strides.size() != in.shape.size())
    L.fail("slice params need one entry per axis of the rank-" + std::to_string(in.rank()) + " operand");

  std::vector<int64_t> axes, steps;
  Shape s_starts, s_ends;
  for (size_t i = 0; i < in.shape.size(); ++i) {
    bool to_end = limits[i] == in.shape[i];
    if (starts[i] == Dim(0) && to_end && strides[i] == 1) continue;  // untouched axis
    if (strides[i] < 1) L.fail("slice stride " + std::to_string(strides[i]) + " must be >= 1");
    axes.push_back(static_cast<int64_t>(i));
    s_starts.push_back(starts[i]);
    s_ends.push_back(to_end ? Dim(kMaxI64) : limits[i]);
    steps.push_back(strides[i]);
  }
  Value x = L.input(0);
  if (axes.empty()) {
    L.bind(0, x);
    return;
  }
  std::vector<Value> ins = {x, shape_value(L, s_starts), shape_value(L, s_ends), i64s(L, axes)};
  if (std::any_of(steps.begin(), steps.end(), [](int64_t s) { return s != 1; })) ins.push_back(i64s(L, steps));
  L.bind(0, L.op("Slice", ins, complex::packed(L.out_aval(0))));
}

// ------------------------------------------------------------ concatenate --

void lower_concatenate(Lowering& L) {
  std::vector<Value> xs = L.inputs();
  if (xs.size() == 1) {
    L.bind(0, xs[0]);
    return;
  }
  int64_t axis = L.param("dimension").as_int();
  if (axis < 0) axis += L.out_aval(0).rank();  // counted from the back of the logical shape
  L.bind(0, L.op("Concat", xs, complex::packed(L.out_aval(0)), {Attr::i("axis", axis)}));
}

// ------------------------------------------------------------------ split --

// split(x, sizes, axis): Split with the sizes as its `split` input (an input
// since opset 13; opset 18 added num_outputs as the alternative). Symbolic
// sizes ("B") are computed at run time.
void lower_split(Lowering& L) {
  Value x = L.input(0);
  const size_t n = L.num_outputs();
  if (n == 1) {
    L.bind(0, x);
    return;
  }
  std::vector<Aval> outs;
  for (size_t i = 0; i < n; ++i) outs.push_back(complex::packed(L.out_aval(i)));
  std::vector<Value> ys = L.op_n("Split", {x, shape_value(L, L.param("sizes").as_dims())}, outs,
                                 {Attr::i("axis", L.param("axis").as_int())});
  for (size_t i = 0; i < n; ++i) L.bind(i, ys[i]);
}

// -------------------------------------------------------------------- pad --

// onnxruntime's CPU Pad has no int16/uint16/bfloat16 kernel (kernels.hpp):
// pad those in a wider type that holds every value exactly and cast back.
int32_t pad_compute_dtype(int32_t t) {
  int32_t c = kernels::compute_type("Pad", t);
  return c == JXO_DTYPE_UNDEFINED ? t : c;
}

// Interior padding: r pad values between neighbours along each axis with
// interior r > 0, for all such axes at once:
//   [.., n, ..] -Unsqueeze-> [.., n, 1, ..] -Pad r at the end of each new
//   axis-> [.., n, r+1, ..] -Reshape-> [.., n*(r+1), ..]
// which leaves r extra pad values after the last element (none for n = 0):
// the caller takes them off (lower_pad).
Value pad_interior(Lowering& L, Value x, const Aval& in, const std::vector<int64_t>& interior, Value pv) {
  const size_t rank = in.shape.size();
  Shape grown, merged;
  std::vector<int64_t> new_axes, pads;
  for (size_t a = 0; a < rank; ++a) {
    grown.push_back(in.shape[a]);
    merged.push_back(in.shape[a]);
    if (interior[a] == 0) continue;
    new_axes.push_back(static_cast<int64_t>(grown.size()));
    grown.push_back(Dim(interior[a] + 1));
    merged.back() = affine(in.shape[a], interior[a] + 1, 0);
  }
  Shape ones = grown;
  for (int64_t a : new_axes) ones[static_cast<size_t>(a)] = Dim(1);
  Value y = L.op("Unsqueeze", {x, i64s(L, new_axes)}, in.with_shape(ones));

  pads.assign(2 * grown.size(), 0);
  for (int64_t a : new_axes) pads[grown.size() + static_cast<size_t>(a)] = grown[static_cast<size_t>(a)].value - 1;
  y = L.op("Pad", {y, i64s(L, pads), pv}, in.with_shape(grown));

  return reshape(L, y, in.with_shape(grown), in.with_shape(merged));
}

// The least value dim `d` can take: its value, 1 for a symbol ("B": JAX's
// symbols are >= 1), else 0 ("B - 1" is 0 at B = 1).
int64_t least(const Dim& d) {
  if (d.is_static()) return d.value;
  bool symbol = std::all_of(d.symbol.begin(), d.symbol.end(),
                            [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  return symbol ? 1 : 0;
}

// pad(x, padding_value, padding_config=((low, high, interior), ...)): JAX
// applies interior padding first, then low/high, where a negative low/high
// removes elements. ONNX Pad (constant mode) takes negative pads the same way,
// but onnxruntime fails when the crops alone exceed the dim (1 element with
// low -2, high +1: JAX gives 0 elements). Where the dim may be that short
// (the crops exceed its least value: B - 1 is 0 at B = 1), Pad adds only the
// positive pads and a Slice then takes the crops.
// Interior padding leaves r extra values at the end (pad_interior), which the
// edge Pad's high takes off; a dim that may be 0 has none then, so there a
// Slice to -r takes them (it clamps to 0).
void lower_pad(Lowering& L) {
  Aval in = L.in_aval(0);
  Aval out = L.out_aval(0);
  std::vector<Param> config = L.param("padding_config").items();
  if (static_cast<int64_t>(config.size()) != in.rank())
    L.fail("padding_config has " + std::to_string(config.size()) + " entries for an operand of rank " +
           std::to_string(in.rank()));
  Value x = L.input(0);
  Value pv = L.input(1);

  // An empty input or output is all padding (or nothing): broadcast the value.
  if (has_static_zero(in.shape) || has_static_zero(out.shape)) {
    L.bind(0, L.op("Expand", {pv, complex::packed_shape_value(L, out)}, complex::packed(out)));
    return;
  }

  const size_t rank = in.shape.size();
  // A negative pad crops. Pad takes it where the result cannot go negative;
  // a target without negative pads (tract aborts on one) gets a Slice.
  const bool negative_pad = L.target_supports("negative_pad");
  std::vector<int64_t> pads(2 * rank, 0), interior(rank, 0);
  std::vector<int64_t> interior_axes, interior_ends, crop_axes, crop_starts, crop_ends;
  for (size_t i = 0; i < rank; ++i) {
    std::vector<int64_t> c = config[i].as_ints();
    if (c.size() != 3) L.fail("padding_config entries are (low, high, interior)");
    if (c[2] < 0) L.fail("padding_config interior " + std::to_string(c[2]) + " must be >= 0");
    const int64_t n = least(in.shape[i]);
    int64_t lo = c[0], hi = c[1];
    interior[i] = c[2];
    if (c[2] > 0 && n >= 1) {
      hi -= c[2];
    } else if (c[2] > 0) {
      interior_axes.push_back(static_cast<int64_t>(i));
      interior_ends.push_back(-c[2]);
    }
    const int64_t len = n >= 1 ? n * (c[2] + 1) : 0;  // after the interior step (r extra at the end)
    if ((lo < 0 || hi < 0) && (!negative_pad || len + std::min<int64_t>(lo, 0) + std::min<int64_t>(hi, 0) < 0)) {
      crop_axes.push_back(static_cast<int64_t>(i));
      crop_starts.push_back(std::max<int64_t>(-lo, 0));
      crop_ends.push_back(hi < 0 ? hi : kMaxI64);
      lo = std::max<int64_t>(lo, 0);
      hi = std::max<int64_t>(hi, 0);
    }
    pads[i] = lo;
    pads[rank + i] = hi;
  }
  bool any_interior = std::any_of(interior.begin(), interior.end(), [](int64_t p) { return p != 0; });
  bool any_edge = std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; });
  if (!any_interior && !any_edge && crop_axes.empty()) {
    L.bind(0, x);
    return;
  }

  // One real tensor padded with the scalar pv.
  auto pad_real = [&](Value v, Value value, const Aval& a, const Aval& r) {
    const int32_t ct = pad_compute_dtype(a.dtype);
    const Aval unknown = Aval::of_unknown_shape(ct);
    v = cast(L, v, a, ct);
    value = cast(L, value, Aval(a.dtype, {}), ct);
    // The last step gives r's type; the ones before it have a computed shape.
    const bool edge_last = crop_axes.empty(), interior_last = edge_last && !any_edge;
    if (any_interior) {
      v = pad_interior(L, v, a.with_dtype(ct), interior, value);
      if (!interior_axes.empty())
        v = L.op("Slice", {v, i64s(L, std::vector<int64_t>(interior_axes.size(), 0)), i64s(L, interior_ends),
                           i64s(L, interior_axes)},
                 interior_last ? r.with_dtype(ct) : unknown);
    }
    if (any_edge) v = L.op("Pad", {v, i64s(L, pads), value}, edge_last ? r.with_dtype(ct) : unknown);
    if (!crop_axes.empty())
      v = L.op("Slice", {v, i64s(L, crop_starts), i64s(L, crop_ends), i64s(L, crop_axes)}, r.with_dtype(ct));
    return cast(L, v, r.with_dtype(ct), r.dtype);
  };
  if (!complex::is(in.dtype)) {
    L.bind(0, pad_real(x, pv, in, out));
    return;
  }
  complex::Parts z = complex::split(L, x, in), v = complex::split(L, pv, Aval(in.dtype, {}));
  Aval pin = complex::part(in), pout = complex::part(out);
  L.bind(0, complex::pack(L, pad_real(z.re, v.re, pin, pout), pad_real(z.im, v.im, pin, pout), out));
}

// ------------------------------------------------------------------- iota --

// The 1-D iota [0, n) of dtype `dt` as a constant, for static n.
template <typename T> Value iota_constant(Lowering& L, int32_t dt, const std::vector<int64_t>& dims, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<T>(i);
  return L.constant(dt, dims, v.data(), v.size() * sizeof(T));
}

// The largest static count along `dimension` that becomes a constant rather
// than a Range node: small enough that the initializer stays tiny, large
// enough to cover the masks of jnp.tril/triu and typical positions.
constexpr int64_t kIotaConstantMax = 1024;

// iota(dtype, shape, dimension): shape with values counting 0, 1, ... along
// `dimension`. The counting axis is built at its rank-R position (1s
// elsewhere), as a constant when its length is static and small, else as
// Range(0, n, 1) in int64 (exact for every n, where a float Range may
// accumulate rounding; Range also lacks int8/uint/f16 kernels) cast to dtype.
// Expand then broadcasts the other dims; the integer casts wrap exactly as
// JAX's iota does for narrow types. A complex iota counts in its parts'
// dtype and gets a zero imaginary part.
void lower_iota(Lowering& L) {
  Aval out = complex::part(L.out_aval(0));
  const int32_t dt = out.dtype;
  const int64_t rank = out.rank();
  const int64_t dim = L.param("dimension").as_int();
  if (dim < 0 || dim >= rank) L.fail("iota dimension " + std::to_string(dim) + " out of range");
  const Dim& n = out.shape[static_cast<size_t>(dim)];

  Shape line(static_cast<size_t>(rank), Dim(1));
  line[static_cast<size_t>(dim)] = n;
  std::vector<int64_t> line_dims(static_cast<size_t>(rank), 1);
  Value v = kNoValue;
  if (n.is_static() && n.value <= kIotaConstantMax) {
    line_dims[static_cast<size_t>(dim)] = n.value;
    switch (dt) {
      case dtype::f32: v = iota_constant<float>(L, dt, line_dims, n.value); break;
      case dtype::f64: v = iota_constant<double>(L, dt, line_dims, n.value); break;
      case dtype::i8: v = iota_constant<int8_t>(L, dt, line_dims, n.value); break;
      case dtype::i16: v = iota_constant<int16_t>(L, dt, line_dims, n.value); break;
      case dtype::i32: v = iota_constant<int32_t>(L, dt, line_dims, n.value); break;
      case dtype::i64: v = iota_constant<int64_t>(L, dt, line_dims, n.value); break;
      case dtype::u8: v = iota_constant<uint8_t>(L, dt, line_dims, n.value); break;
      case dtype::u16: v = iota_constant<uint16_t>(L, dt, line_dims, n.value); break;
      case dtype::u32: v = iota_constant<uint32_t>(L, dt, line_dims, n.value); break;
      case dtype::u64: v = iota_constant<uint64_t>(L, dt, line_dims, n.value); break;
      default: {  // f16/bf16: count in float32 (exact below 2^24) and round once
        if (!dtype::is_float(dt)) L.fail(std::string("iota of dtype ") + dtype::name(dt) + " is not supported");
        Value f = iota_constant<float>(L, dtype::f32, line_dims, n.value);
        v = cast(L, f, Aval(dtype::f32, line), dt);
      }
    }
  } else {
    Value limit = n.is_static() ? scalar(L, dtype::i64, static_cast<double>(n.value))
                                : L.op("Squeeze", {dim_value(L, n)}, Aval(dtype::i64, {}));  // Range takes scalars
    Value r = L.op("Range", {scalar(L, dtype::i64, 0), limit, scalar(L, dtype::i64, 1)}, Aval(dtype::i64, {n}));
    if (rank > 1) {
      std::vector<int64_t> axes;
      for (int64_t a = 0; a < rank; ++a)
        if (a != dim) axes.push_back(a);
      r = L.op("Unsqueeze", {r, i64s(L, axes)}, Aval(dtype::i64, line));
    }
    v = cast(L, r, Aval(dtype::i64, line), dt);
  }
  // Expand only the other dims: 1 at `dimension` keeps the counted axis.
  if (line != out.shape) {
    Shape target = out.shape;
    target[static_cast<size_t>(dim)] = Dim(1);
    v = L.op("Expand", {v, shape_value(L, target)}, out);
  }
  if (complex::is(L.out_aval(0).dtype)) v = complex::from_real(L, v, out, L.out_aval(0));
  L.bind(0, v);
}

}  // namespace

JAXONNX_PLUGIN("lax_slicing", "0.1.0") {
  plugin.primitive("rev", lower_rev).emits({"Slice"}).doc(onnx_doc("Slice"));
  plugin.primitive("slice", lower_slice).emits({"Slice"}).emits_shape_ops().doc(onnx_doc("Slice"));
  plugin.primitive("concatenate", lower_concatenate).emits({"Concat"}).doc(onnx_doc("Concat"));
  plugin.primitive("split", lower_split).emits({"Split"}).emits_shape_ops().doc(onnx_doc("Split"));
  plugin.primitive("pad", lower_pad)
      .emits({"Pad", "Unsqueeze", "Reshape", "Slice", "Expand", "Cast", "Gather", "Concat"})
      .emits_shape_ops()
      .doc(onnx_doc("Pad"));
  plugin.primitive("iota", lower_iota)
      .emits({"Range", "Squeeze", "Unsqueeze", "Expand", "Cast", "Pad"})  // Pad: a complex iota
      .emits_shape_ops()
      .doc(onnx_doc("Range"));
}
