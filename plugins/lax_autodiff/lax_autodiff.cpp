// lax_autodiff: the primitives only JAX's differentiation emits -- add_any
// (summing cotangents), zeros_like, and the window selections behind
// max_pool's derivatives: select_and_scatter_add (its VJP, the transpose)
// and select_and_gather_add (its JVP).
//
// Window selection. Both pick, per window, the position of the operand's
// maximum (select_prim ge) or minimum (le): the first such position in
// row-major window order, as XLA's SelectAndScatter does (it keeps the
// current pick while select(current, candidate) holds). Built as: Pad the
// operand with -inf (+inf for min), Unsqueeze a trailing axis, take one
// strided Slice per window offset, Concat them to [out..., k], and ArgMax
// (ArgMin) over that axis, which returns the first extremum. Static and
// symbolic extents alike (slice ends count from the end).
// - select_and_gather_add: GatherElements of the equally sliced tangents.
// - select_and_scatter_add: the chosen offset becomes per-axis positions
//   i * stride + offset (a Gather from a per-axis offset table), stacked to
//   [out..., rank] indices of a ScatterND(reduction="add") of the source into
//   zeros of the padded shape, then the padding is sliced off.
// - base_dilation > 1 (select_and_gather_add only): b - 1 holes between
//   neighbours, filled like padding (-inf/+inf, tangent 0), first.
// Padding and holes hold the select's identity (-inf/+inf; an integer
// type's minimum/maximum), which XLA's CPU backend also compares: where a
// window's in-bounds extremum equals it and padding comes first, both pick
// the padding and that source element is dropped. A NaN in a window makes
// ArgMax's pick onnxruntime's, not XLA's.
//
// Integer and bool operands (select_and_scatter_add): the selection runs in
// a type ArgMax has a kernel for that holds every value (bool as uint8,
// 16-bit as int32, uint32 as int64; uint64 as int64 with its sign bit
// flipped, which keeps the order), the scatter adds in the source's own
// type, wrapping as JAX does; bool adds as OR (an int32 count, nonzero).
// Complex add_any adds the packed [..., 2] forms.
#include <jaxonnx/complex.hpp>
#include <jaxonnx/plugin.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

// ----------------------------------------------------------------- add_any --

// add_any(x, y): the sum of two cotangents, numeric types only as in JAX;
// bfloat16 adds in float32 (onnxruntime has no bf16 Add).
// Before opset 14 Add has no 8- and 16-bit integer form: int32, wrapped back.
void lower_add_any(Lowering& L) {
  Aval a = L.out_aval(0);
  if (complex::is(a.dtype)) {  // part by part: the packed forms add elementwise
    const int32_t pt = complex::part_dtype(a.dtype);
    Value x = cast(L, L.input(0), complex::packed(L.in_aval(0)), pt);
    Value y = cast(L, L.input(1), complex::packed(L.in_aval(1)), pt);
    L.bind(0, L.op("Add", {x, y}, complex::packed(a)));
    return;
  }
  int32_t c = a.dtype == dtype::bf16 ? dtype::f32 : a.dtype;
  if (L.opset() < 14 && (c == dtype::i8 || c == dtype::u8 || c == dtype::i16 || c == dtype::u16))
    c = dtype::i32;
  Value x = cast(L, L.input(0), L.in_aval(0), c), y = cast(L, L.input(1), L.in_aval(1), c);
  L.bind(0, cast(L, L.op("Add", {x, y}, a.with_dtype(c)), a.with_dtype(c), a.dtype));
}

// zeros_like(x): zeros of x's type, expanded to its (possibly symbolic) shape.
void lower_zeros_like(Lowering& L) {
  Aval a = L.out_aval(0);
  L.bind(0, L.op("Expand", {scalar(L, a.dtype, 0), shape_value(L, a.shape)}, a));
}

// ------------------------------------------------------- window selection --

struct Window {
  std::vector<int64_t> dims, strides, dilation, base;
  std::vector<std::pair<int64_t, int64_t>> padding;
  bool is_max;
};

Window window_params(Lowering& L, int64_t rank) {
  Window w;
  w.dims = L.param("window_dimensions").as_ints();
  w.strides = L.param("window_strides").as_ints();
  w.dilation = L.has_param("window_dilation") ? L.param("window_dilation").as_ints()
                                              : std::vector<int64_t>(rank, 1);
  for (const Param& p : L.param("padding").items()) {
    w.padding.push_back({p[0].as_int(), p[1].as_int()});
    if (w.padding.back().first < 0 || w.padding.back().second < 0)
      L.fail(std::string(L.primitive()) + ": negative padding is not supported");
  }
  w.base = L.has_param("base_dilation") ? L.param("base_dilation").as_ints() : std::vector<int64_t>(rank, 1);
  for (int64_t b : w.base)
    if (b < 1) L.fail(std::string(L.primitive()) + ": base_dilation " + std::to_string(b) + " must be >= 1");
  std::string sel = L.param("select_prim").as_string();
  if (sel != "ge" && sel != "le" && sel != "gt" && sel != "lt")
    L.fail(std::string(L.primitive()) + ": select_prim '" + sel + "' is not ge/gt (max) or le/lt (min)");
  w.is_max = sel == "ge" || sel == "gt";
  if (int64_t(w.dims.size()) != rank || int64_t(w.strides.size()) != rank ||
      int64_t(w.dilation.size()) != rank || int64_t(w.padding.size()) != rank || int64_t(w.base.size()) != rank)
    L.fail(std::string(L.primitive()) + ": window params do not match the operand rank");
  return w;
}

// The dtype the window selection (ArgMax/ArgMin) runs in: f16/bf16 in f32,
// integers and bool in a type with an ArgMax kernel that holds each value
// (uint64 maps to int64 by select_key).
int32_t compute_dtype(Lowering& L, int32_t t) {
  switch (t) {
    case dtype::f32: case dtype::f64: case dtype::u8: case dtype::i8: case dtype::i32: case dtype::i64:
      return t;
    case dtype::f16: case dtype::bf16: return dtype::f32;
    case dtype::boolean: return dtype::u8;
    case dtype::i16: case dtype::u16: return dtype::i32;
    case dtype::u32: case dtype::u64: return dtype::i64;
    default: L.fail(std::string(L.primitive()) + ": takes a real or integer operand, got " + dtype::name(t));
  }
}

// `x` (aval `a`) in the selection dtype `c`, order kept: a Cast, except that
// uint64 becomes int64 with the sign bit flipped (2^63 subtracted, wrapping).
Value select_key(Lowering& L, Value x, const Aval& a, int32_t c) {
  Value k = cast(L, x, a, c);
  if (a.dtype != dtype::u64) return k;
  return L.op("Add", {k, L.constant(std::vector<int64_t>{INT64_MIN}, {})}, a.with_dtype(c));
}

// The window offsets in row-major order, each one index per axis.
std::vector<std::vector<int64_t>> offsets(const Window& w) {
  std::vector<std::vector<int64_t>> out{{}};
  for (int64_t k : w.dims) {
    std::vector<std::vector<int64_t>> next;
    for (const auto& o : out)
      for (int64_t j = 0; j < k; ++j) {
        next.push_back(o);
        next.back().push_back(j);
      }
    out = std::move(next);
  }
  return out;
}

// `x` (aval `a`, compute dtype) padded with `pad`, with a trailing unit axis,
// cut into one strided slice per window offset and concatenated to [out..., k].
Value stacked_windows(Lowering& L, Value x, const Aval& a, Value pad, const Window& w,
                      const Shape& out_shape) {
  const int64_t r = a.rank();
  std::vector<int64_t> lo, hi, axes;
  bool padded = false;
  for (int64_t d = 0; d < r; ++d) {
    lo.push_back(w.padding[d].first);
    hi.push_back(w.padding[d].second);
    padded = padded || lo.back() || hi.back();
  }
  if (padded) {
    std::vector<int64_t> pads = lo;
    pads.insert(pads.end(), hi.begin(), hi.end());
    x = L.op("Pad", {x, i64s(L, pads), pad}, Aval::of_unknown_shape(a.dtype), {Attr::s("mode", "constant")});
  }
  x = L.op("Unsqueeze", {x, i64s(L, {r})}, Aval::of_unknown_shape(a.dtype));
  for (int64_t d = 0; d < r; ++d)
    if (w.dims[d] != 1 || w.strides[d] != 1) axes.push_back(d);
  Shape one = out_shape;
  one.push_back(1);
  std::vector<Value> parts;
  for (const auto& o : offsets(w)) {
    if (axes.empty()) { parts.push_back(x); break; }
    std::vector<int64_t> starts, ends, steps;
    for (int64_t d : axes) {
      const int64_t eff = (w.dims[d] - 1) * w.dilation[d] + 1, start = o[d] * w.dilation[d];
      const int64_t from_end = eff - 1 - start;
      starts.push_back(start);
      ends.push_back(from_end == 0 ? INT64_MAX : -from_end);
      steps.push_back(w.strides[d]);
    }
    parts.push_back(L.op("Slice", {x, i64s(L, starts), i64s(L, ends), i64s(L, axes), i64s(L, steps)},
                         Aval(a.dtype, one)));
  }
  Shape all = out_shape;
  all.push_back(static_cast<int64_t>(parts.size()));
  if (parts.size() == 1) return parts[0];
  return L.op("Concat", parts, Aval(a.dtype, all), {Attr::i("axis", r)});
}

// The first extremal window offset, int64 [out..., 1].
Value pick(Lowering& L, Value stacked, const Shape& out_shape, bool is_max, int64_t axis) {
  Shape one = out_shape;
  one.push_back(1);
  return L.op(is_max ? "ArgMax" : "ArgMin", {stacked}, Aval(dtype::i64, one),
              {Attr::i("axis", axis), Attr::i("keepdims", 1), Attr::i("select_last_index", 0)});
}

// The select's identity in the selection dtype `c` for an operand of dtype
// `t`: -inf/+inf, or t's minimum/maximum (as select_key maps it), as XLA pads.
Value extreme_pad(Lowering& L, int32_t t, int32_t c, bool is_max) {
  if (dtype::is_float(t)) return scalar(L, c, is_max ? -INFINITY : INFINITY);
  int64_t lo = 0, hi = 1;  // bool
  switch (t) {
    case dtype::i8: lo = INT8_MIN; hi = INT8_MAX; break;
    case dtype::u8: hi = UINT8_MAX; break;
    case dtype::i16: lo = INT16_MIN; hi = INT16_MAX; break;
    case dtype::u16: hi = UINT16_MAX; break;
    case dtype::i32: lo = INT32_MIN; hi = INT32_MAX; break;
    case dtype::u32: hi = UINT32_MAX; break;
    case dtype::i64: case dtype::u64: lo = INT64_MIN; hi = INT64_MAX; break;  // u64 after select_key
    default: break;
  }
  const int64_t v = is_max ? lo : hi;
  if (c == dtype::i64) return L.constant(std::vector<int64_t>{v}, {});
  return scalar(L, c, static_cast<double>(v));  // |v| < 2^32: exact
}

// base_dilation (see the header): b - 1 holes of `fill` between neighbours
// along each axis with b > 1: Unsqueeze a unit axis after d, Pad it to b,
// merge the two, Slice off the b - 1 trailing holes.
Value dilate_base(Lowering& L, Value x, Aval a, const Window& w, Value fill) {
  for (size_t d = 0; d < w.base.size(); ++d) {
    const int64_t b = w.base[d];
    if (b == 1) continue;
    const Dim n = a.shape[d];
    Shape grown = a.shape, merged = a.shape;
    grown.insert(grown.begin() + int64_t(d) + 1, Dim(b));
    merged[d] = n.is_static() ? Dim(n.value * b) : Dim::sym(std::to_string(b) + "*(" + n.symbol + ")");
    Value u = L.op("Unsqueeze", {x, i64s(L, {int64_t(d) + 1})}, Aval::of_unknown_shape(a.dtype));
    Value p = pad_axis(L, u, int64_t(grown.size()), int64_t(d) + 1, 0, b - 1, fill, Aval(a.dtype, grown));
    Value m = reshape(L, p, Aval(a.dtype, grown), Aval(a.dtype, merged));
    a.shape[d] = n.is_static() ? Dim(n.value == 0 ? 0 : (n.value - 1) * b + 1)
                               : Dim::sym(std::to_string(b) + "*(" + n.symbol + ") - " + std::to_string(b - 1));
    x = L.op("Slice", {m, i64s(L, {0}), i64s(L, {-(b - 1)}), i64s(L, {int64_t(d)})}, a);
  }
  return x;
}

// select_and_gather_add(tangents, operand): per window, the tangent at the
// operand's first extremum.
void lower_select_and_gather_add(Lowering& L) {
  const Aval in = L.in_aval(1), out = L.out_aval(0);
  const Window w = window_params(L, in.rank());
  const int32_t c = compute_dtype(L, in.dtype);
  if (!dtype::is_float(in.dtype))
    L.fail(std::string(L.primitive()) + ": takes a floating operand (a JVP), got " + dtype::name(in.dtype));
  const Aval ca = in.with_dtype(c);
  Value pad = extreme_pad(L, in.dtype, c, w.is_max), zero = scalar(L, c, 0);
  Value ops = dilate_base(L, cast(L, L.input(1), in, c), ca, w, pad);
  Value tan = dilate_base(L, cast(L, L.input(0), L.in_aval(0), c), ca, w, zero);
  ops = stacked_windows(L, ops, ca, pad, w, out.shape);
  tan = stacked_windows(L, tan, ca, zero, w, out.shape);
  Value idx = pick(L, ops, out.shape, w.is_max, in.rank());
  Shape one = out.shape;
  one.push_back(1);
  Value g = L.op("GatherElements", {tan, idx}, Aval(c, one), {Attr::i("axis", in.rank())});
  g = L.op("Squeeze", {g, i64s(L, {in.rank()})}, out.with_dtype(c));
  L.bind(0, cast(L, g, out.with_dtype(c), out.dtype));
}

// A dim plus a constant, symbolic dims as a runtime [1] value.
Value dim_plus(Lowering& L, const Dim& d, int64_t k) {
  if (d.is_static()) return i64s(L, {d.value + k});
  Value v = dim_value(L, d);
  return k ? L.op("Add", {v, i64s(L, {k})}, Aval(dtype::i64, {1})) : v;
}

// select_and_scatter_add(source, operand): each source element added at its
// window's first extremum of the operand; zeros elsewhere.
void lower_select_and_scatter_add(Lowering& L) {
  const Aval src = L.in_aval(0), in = L.in_aval(1), out = L.out_aval(0);
  const int64_t r = in.rank();
  const Window w = window_params(L, r);
  for (int64_t b : w.base)
    if (b != 1) L.fail("select_and_scatter_add: base_dilation > 1 is not supported");
  int32_t c = compute_dtype(L, in.dtype);
  Value ops = stacked_windows(L, select_key(L, L.input(1), in, c), in.with_dtype(c),
                              extreme_pad(L, in.dtype, c, w.is_max), w, src.shape);
  Value choice = pick(L, ops, src.shape, w.is_max, r);  // [src..., 1]
  const auto offs = offsets(w);
  const Aval idx1(dtype::i64, [&] { Shape s = src.shape; s.push_back(1); return s; }());
  Shape full = src.shape;
  full.push_back(1);
  Value full_shape = shape_value(L, full);  // [src..., 1]
  std::vector<Value> coords;
  for (int64_t d = 0; d < r; ++d) {
    // i along axis d, shaped [1, .., n_d, .., 1, 1] to broadcast against [src..., 1].
    const Dim n = src.shape[d];
    std::vector<int64_t> others;
    Shape bs;
    std::vector<int64_t> bdims;
    for (int64_t e = 0; e <= r; ++e) {
      if (e != d) others.push_back(e);
      bs.push_back(e == d ? n : Dim(1));
      bdims.push_back(e == d ? (n.is_static() ? n.value : -1) : 1);
    }
    Value i;
    if (n.is_static()) {  // a constant: i * stride
      std::vector<int64_t> iota(static_cast<size_t>(n.value));
      for (int64_t k = 0; k < n.value; ++k) iota[static_cast<size_t>(k)] = k * w.strides[d];
      i = L.constant(iota, bdims);
    } else {
      Value len = L.op("Squeeze", {dim_value(L, n), i64s(L, {0})}, Aval(dtype::i64, {}));
      i = L.op("Range", {scalar(L, dtype::i64, 0), len, scalar(L, dtype::i64, 1)}, Aval(dtype::i64, {n}));
      i = L.op("Unsqueeze", {i, i64s(L, others)}, Aval(dtype::i64, bs));
      if (w.strides[d] != 1)
        i = L.op("Mul", {i, scalar(L, dtype::i64, static_cast<double>(w.strides[d]))}, Aval(dtype::i64, bs));
    }
    Value p;
    if (w.dims[d] == 1) {
      p = L.op("Expand", {i, full_shape}, idx1);
    } else {
      std::vector<int64_t> table;
      for (const auto& o : offs) table.push_back(o[d]);
      Value j = L.op("Gather", {i64s(L, table), choice}, idx1, {Attr::i("axis", 0)});
      p = L.op("Add", {i, j}, idx1);
    }
    coords.push_back(p);
  }
  Shape is = src.shape;
  is.push_back(r);
  Value indices = r == 1 ? coords[0] : L.op("Concat", coords, Aval(dtype::i64, is), {Attr::i("axis", r)});
  // Zeros of the padded operand's shape.
  std::vector<Value> dims;
  bool padded = false;
  for (int64_t d = 0; d < r; ++d) {
    const int64_t extra = w.padding[d].first + w.padding[d].second;
    padded = padded || extra;
    dims.push_back(dim_plus(L, in.shape[d], extra));
  }
  Value pshape = r == 1 ? dims[0] : L.op("Concat", dims, Aval(dtype::i64, {r}), {Attr::i("axis", 0)});
  // The sum's dtype: floats as selected, integers their own (wrapping), bool an int32 count.
  c = dtype::is_float(out.dtype) ? c : out.dtype == dtype::boolean ? dtype::i32 : out.dtype;
  Value zeros = L.op("Expand", {scalar(L, c, 0), pshape}, Aval::of_unknown_shape(c));
  Value s = cast(L, L.input(0), src, c);
  Value y = scatter_nd_reduce(L, zeros, indices, s, Aval::of_unknown_shape(c), "add");
  if (padded) {
    std::vector<int64_t> starts, ends;
    for (int64_t d = 0; d < r; ++d) {
      starts.push_back(w.padding[d].first);
      ends.push_back(w.padding[d].second ? -w.padding[d].second : INT64_MAX);
    }
    std::vector<int64_t> all(r);
    for (int64_t d = 0; d < r; ++d) all[d] = d;
    y = L.op("Slice", {y, i64s(L, starts), i64s(L, ends), i64s(L, all)}, out.with_dtype(c));
  } else if (c == out.dtype) {
    y = L.op("Identity", {y}, out);
  }
  L.bind(0, cast(L, y, out.with_dtype(c), out.dtype));
}

}  // namespace

JAXONNX_PLUGIN("lax_autodiff", "0.1.0") {
  plugin.primitive("add_any", lower_add_any)
      .emits({"Add", "Cast"})
      .summary("the sum of two cotangents (jax.grad)")
      .doc(onnx_doc("Add"));
  plugin.primitive("zeros_like", lower_zeros_like)
      .emits({"Expand"})
      .emits_shape_ops()
      .doc(onnx_doc("Expand"));
  plugin.primitive("select_and_gather_add", lower_select_and_gather_add)
      .emits({"Pad", "Unsqueeze", "Slice", "Concat", "ArgMax", "ArgMin", "GatherElements", "Squeeze",
              "Cast", "Reshape"})  // Reshape: base_dilation
      .emits_shape_ops()
      .summary("JVP of max/min pooling: ArgMax over the stacked window slices, GatherElements of the tangents");
  plugin.primitive("select_and_scatter_add", lower_select_and_scatter_add)
      .emits({"Pad", "Unsqueeze", "Slice", "Concat", "ArgMax", "ArgMin", "Range", "Squeeze", "Mul",
              "Gather", "Add", "Expand", "ScatterND", "Identity", "Cast", "Loop", "GatherND", "Shape",
              "Slice", "Concat", "Reshape", "Squeeze"})
      .emits_shape_ops()
      .summary("VJP of max/min pooling: ArgMax over the stacked window slices, ScatterND(add) of the source");
}
