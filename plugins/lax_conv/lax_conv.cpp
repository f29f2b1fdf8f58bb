// lax_conv: conv_general_dilated as ONNX Conv, or ConvTranspose for the
// transposed convolutions that flax.nnx.ConvTranspose / lax.conv_transpose make.
//
// Layout. ONNX Conv reads X as [N, C, spatial...] and W as [M, C/group, k...]
// and writes [N, M, spatial...]. JAX's dimension_numbers (lhs_spec, rhs_spec,
// out_spec) say which axis of each operand holds batch/feature/spatial dims,
// so one Transpose per operand (perm = spec) reaches the ONNX layout and one
// after the Conv (the inverse of out_spec) goes back. For NCHW/OIHW these are
// identities and emit nothing; for NHWC the Transposes between consecutive
// convolutions cancel in the optimizer across elementwise ops (relu, bias).
//
// Padding. JAX gives explicit (lo, hi) pairs, possibly asymmetric (Conv pads =
// [begins..., ends...]) or negative: a negative pad crops, done with a Slice
// first. A symbolic pad (SAME with a stride over a symbolic spatial dim:
// floordiv(...) of it) cannot be an attribute: one Pad with the pads computed
// at run time goes before a Conv that pads nothing.
//
// lhs_dilation > 1 (a transposed convolution) inserts d-1 zeros between input
// elements before padding. With unit window strides and one group this is
// ConvTranspose (strides = d) with the kernel flipped spatially, in/out
// channels swapped, and pads k_eff-1-lo / k_eff-1-hi (k_eff = (k-1)*rhs_d+1),
// a negative end pad becoming output_padding. Anything else dilates the input
// explicitly (Unsqueeze, Pad the new unit axis with d-1 zeros, Reshape, Slice
// off the trailing zeros) and runs a plain Conv: always exact.
//
// rhs_dilation is Conv's dilations, window_strides its strides,
// feature_group_count its group. batch_group_count = G (JAX's weight gradient)
// splits the batch into G group-major slices, each convolved with its own
// slice of output features: moving the batch groups into the feature axis
// (Reshape [G, N/G, C, ...], Transpose, Reshape [N/G, G*C, ...]) makes it a
// grouped Conv with group = G.
//
// dtypes: onnxruntime's Conv/ConvTranspose have float32 and float16 kernels
// only, so bfloat16 computes in float32 and is cast back. float64 is exact
// instead, as im2col + MatMul in float64 (onnxruntime has float64 MatMul):
// Pad, one strided Slice per kernel offset of the input (unsqueezed at axis
// 2) Concatenated to [N, C, K, out...], Reshaped to [N, G, C/G*K, P] and
// multiplied by the kernel as [G, M/G, C/G*K]; K = prod(kernel), P =
// prod(out spatial). It needs static kernel and feature dims.
// preferred_element_type sets the output dtype.
//
// Integers (onnxruntime's Conv has no integer kernel; ConvInteger is 8-bit
// only) take the same im2col + MatMul form in int32 (int64 when either side
// is 64-bit; onnxruntime has both MatMul kernels), cast back to the output
// type. JAX accumulates in the output type with wraparound, and sums and
// products modulo 2^32 (2^64) agree with those modulo 2^8/2^16/2^32 after the
// final Cast, so this is exact, overflow included. Integer operands with a
// float preferred_element_type convolve as floats (float32, float64 for a
// float64 output). bool convolutions (XLA: products AND, sums OR) count in
// int32, nonzero cast back to true.
//
// Complex operands (carried as float[..., 2], jaxonnx/complex.hpp) are three
// real convolutions of the parts (Gauss), the float path above for each, as
// JAX itself lowers them: k1 = conv(xr + xi, wr), k2 = conv(xr, wi - wr),
// k3 = conv(xi, wr + wi); re = k1 - k3, im = k1 + k2. The part sums round in
// the operand type, as in JAX, so a complex64 convolution with a complex128
// result matches JAX's to float64 rounding.
//
// An output with a 0 dim (a dilated kernel larger than the padded input,
// where JAX's output size is 0) is the empty result itself, no Conv.
#include <jaxonnx/complex.hpp>
#include <jaxonnx/empty_result.hpp>
#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

using Ints = std::vector<int64_t>;

struct ConvParams {
  size_t n = 0;  // spatial rank
  Ints strides, lhs_dil, rhs_dil, lo, hi;
  // The padding as given; symbolic (a SAME conv over a symbolic spatial dim
  // with a stride, or a kernel of symbolic size) when symbolic_pads.
  Shape lo_dims, hi_dims;
  bool symbolic_pads = false;
  Ints lhs_spec, rhs_spec, out_spec;
  int64_t fgc = 1, bgc = 1;
};

ConvParams read_params(Lowering& L) {
  ConvParams p;
  p.strides = L.param("window_strides").as_ints();
  p.n = p.strides.size();
  for (const Param& pad : L.param("padding").items()) {
    Shape lh = pad.as_dims();
    if (lh.size() != 2) L.fail("conv_general_dilated: padding entries must be (lo, hi) pairs");
    p.lo_dims.push_back(lh[0]);
    p.hi_dims.push_back(lh[1]);
    p.symbolic_pads = p.symbolic_pads || !lh[0].is_static() || !lh[1].is_static();
    p.lo.push_back(lh[0].value);  // 0 for a symbolic pad: pad_at_run_time applies those
    p.hi.push_back(lh[1].value);
  }
  p.lhs_dil = L.param("lhs_dilation").as_ints();
  p.rhs_dil = L.param("rhs_dilation").as_ints();
  Param dn = L.param("dimension_numbers");
  if (dn.kind() == JXO_PARAM_RECORD) {
    p.lhs_spec = dn.field("lhs_spec").as_ints();
    p.rhs_spec = dn.field("rhs_spec").as_ints();
    p.out_spec = dn.field("out_spec").as_ints();
  } else {
    p.lhs_spec = dn[0].as_ints();
    p.rhs_spec = dn[1].as_ints();
    p.out_spec = dn[2].as_ints();
  }
  p.fgc = L.param("feature_group_count").as_int();
  p.bgc = L.param("batch_group_count").as_int();
  const size_t r = p.n + 2;
  if (p.lo.size() != p.n || p.lhs_dil.size() != p.n || p.rhs_dil.size() != p.n ||
      p.lhs_spec.size() != r || p.rhs_spec.size() != r || p.out_spec.size() != r)
    L.fail("conv_general_dilated: params disagree on the number of spatial dims");
  if (p.fgc > 1 && p.bgc > 1)
    L.fail("conv_general_dilated: feature_group_count=" + std::to_string(p.fgc) +
           " and batch_group_count=" + std::to_string(p.bgc) + " cannot both exceed 1");
  return p;
}

// `a` permuted by `perm` (out.shape[k] = a.shape[perm[k]]).
Aval permuted(const Aval& a, const Ints& perm) {
  Shape s;
  for (int64_t q : perm) s.push_back(a.shape.at(static_cast<size_t>(q)));
  return a.with_shape(s);
}

Ints inverse(const Ints& perm) {
  Ints inv(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inv[static_cast<size_t>(perm[k])] = static_cast<int64_t>(k);
  return inv;
}

bool all_static(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](const Dim& d) { return d.is_static(); });
}

// A value in [N, C, spatial...] layout with its type (shape unknown once a
// symbolic spatial dim goes through pad arithmetic).
struct Tensor {
  Value v;
  Aval a;
};

// Type of `x` with spatial dim i mapped by f; unknown when it is symbolic.
template <typename F> Aval map_spatial(const Aval& a, size_t n, F f) {
  if (a.unknown_rank) return a;
  for (size_t i = 0; i < n; ++i)
    if (!a.shape[2 + i].is_static()) return Aval::of_unknown_shape(a.dtype);
  Aval out = a;
  for (size_t i = 0; i < n; ++i) out.shape[2 + i] = Dim(f(i, a.shape[2 + i].value));
  return out;
}

// Inserts d-1 zeros between neighbouring elements along each spatial axis:
// [.., L, ..] -> Unsqueeze [.., L, 1, ..] -> Pad [.., L, d, ..] -> Reshape
// [.., L*d, ..] -> Slice off the last d-1 zeros -> [.., (L-1)*d+1, ..].
Tensor dilate(Lowering& L, Tensor x, size_t n, const Ints& d) {
  Ints new_axes, pads_begin, pads_end;
  Shape ones = {x.a.shape.at(0), x.a.shape.at(1)}, grown = ones, merged = ones;
  Ints slice_axes, slice_ends;
  for (size_t j = 0; j < n + 2; ++j) {
    pads_begin.push_back(0);
    pads_end.push_back(0);
    if (j < 2) continue;
    const size_t i = j - 2;
    const Dim len = x.a.shape.at(j);
    for (Shape* s : {&ones, &grown}) s->push_back(len);
    if (d[i] == 1) {
      merged.push_back(len);
      continue;
    }
    new_axes.push_back(static_cast<int64_t>(grown.size()));
    ones.push_back(Dim(1));
    grown.push_back(Dim(d[i]));
    pads_begin.push_back(0);
    pads_end.push_back(d[i] - 1);
    merged.push_back(len.is_static() ? Dim(len.value * d[i])
                                     : Dim::sym(std::to_string(d[i]) + "*(" + len.symbol + ")"));
    slice_axes.push_back(static_cast<int64_t>(j));
    slice_ends.push_back(-(d[i] - 1));
  }
  if (new_axes.empty()) return x;
  const int32_t t = x.a.dtype;
  Value u = L.op("Unsqueeze", {x.v, i64s(L, new_axes)}, Aval(t, ones));
  Ints pads = pads_begin;
  pads.insert(pads.end(), pads_end.begin(), pads_end.end());
  Value padded = L.op("Pad", {u, i64s(L, pads), scalar(L, t, 0)}, Aval(t, grown), {Attr::s("mode", "constant")});
  Value flat = reshape(L, padded, Aval(t, grown), Aval(t, merged));
  Aval out = map_spatial(x.a, n, [&](size_t i, int64_t l) { return (l - 1) * d[i] + 1; });
  Ints zeros(slice_axes.size(), 0);
  Value sliced = L.op("Slice", {flat, i64s(L, zeros), i64s(L, slice_ends), i64s(L, slice_axes)}, out);
  return {sliced, out};
}

// Pads (or, where negative, crops) the spatial axes by pads known only at
// run time, as one Pad whose pads input is computed (ONNX Pad crops on a
// negative pad as JAX does); the Conv then pads nothing.
Tensor pad_at_run_time(Lowering& L, Tensor x, const Shape& lo, const Shape& hi) {
  Shape pads = {Dim(0), Dim(0)};
  pads.insert(pads.end(), lo.begin(), lo.end());
  pads.push_back(Dim(0));
  pads.push_back(Dim(0));
  pads.insert(pads.end(), hi.begin(), hi.end());
  const int32_t t = x.a.dtype;
  Aval out = Aval::of_unknown_shape(t);
  return {L.op("Pad", {x.v, shape_value(L, pads), scalar(L, t, 0)}, out, {Attr::s("mode", "constant")}), out};
}

// Crops spatial axes with a negative pad (JAX pads below zero remove
// elements) and returns the pads that remain, all >= 0.
Tensor crop(Lowering& L, Tensor x, size_t n, Ints& lo, Ints& hi) {
  Ints axes, starts, ends;
  for (size_t i = 0; i < n; ++i) {
    if (lo[i] >= 0 && hi[i] >= 0) continue;
    axes.push_back(static_cast<int64_t>(2 + i));
    starts.push_back(std::max<int64_t>(0, -lo[i]));
    ends.push_back(hi[i] < 0 ? hi[i] : INT64_MAX);
  }
  if (axes.empty()) return x;
  Ints lo0 = lo, hi0 = hi;
  for (size_t i = 0; i < n; ++i) { lo[i] = std::max<int64_t>(0, lo[i]); hi[i] = std::max<int64_t>(0, hi[i]); }
  Aval out = map_spatial(x.a, n, [&](size_t i, int64_t l) {
    return std::max<int64_t>(0, l - std::max<int64_t>(0, -lo0[i]) - std::max<int64_t>(0, -hi0[i]));
  });
  Value v = L.op("Slice", {x.v, i64s(L, starts), i64s(L, ends), i64s(L, axes)}, out);
  return {v, out};
}

// The dtype the convolution runs in: onnxruntime's Conv has float32/float16
// kernels only; float64 and integers go through im2col + MatMul.
int32_t compute_dtype(Lowering& L, int32_t in, int32_t out) {
  if (in == dtype::f16 && out == dtype::f16) return dtype::f16;
  if (in == dtype::f64 || out == dtype::f64) return dtype::f64;
  const bool int_in = dtype::is_int(in) || in == dtype::boolean;
  if (dtype::is_float(in) || (int_in && dtype::is_float(out))) return dtype::f32;
  if (int_in && (dtype::is_int(out) || out == dtype::boolean))
    return dtype::itemsize(in) == 8 || dtype::itemsize(out) == 8 ? dtype::i64 : dtype::i32;
  L.fail(std::string("conv_general_dilated: ") + dtype::name(in) + " operands with a " + dtype::name(out) +
         " result are not supported (onnxruntime's Conv takes floats only)");
}

// True for the compute dtypes that convolve as im2col + MatMul.
bool by_matmul(int32_t cd) { return cd == dtype::f64 || dtype::is_int(cd); }

// The float64 or integer convolution of x ([N, C, spatial...], pads >= 0) with w
// ([M, C/G, k...], aval `wa`) as im2col + MatMul (see the header).
Value im2col_conv(Lowering& L, const Tensor& x, Value w, const Aval& wa, const ConvParams& p,
                  const Ints& lo, const Ints& hi, int64_t group, const Aval& y_aval) {
  const size_t n = p.n;
  const int32_t t = x.a.dtype;
  // The kernel's spatial dims must be static; one of M and C/G may be
  // symbolic (the weight gradient's "kernel" is a cotangent with the batch in it).
  for (size_t i = 0; i < n; ++i)
    if (!wa.shape[2 + i].is_static())
      L.fail(std::string("conv_general_dilated: ") + dtype::name(t) + " (im2col) needs static kernel spatial dims, got " + wa.str());
  const Dim md = wa.shape[0], cgd = wa.shape[1];
  Ints k(n);
  int64_t kk = 1;
  for (size_t i = 0; i < n; ++i) kk *= (k[i] = wa.shape[2 + i].value);
  int64_t p_static = 1;
  for (size_t i = 0; i < n; ++i)
    p_static = y_aval.shape[2 + i].is_static() && p_static >= 0 ? p_static * y_aval.shape[2 + i].value : -1;
  if ((!md.is_static() && !cgd.is_static()) || (!cgd.is_static() && p_static < 0))
    L.fail(std::string("conv_general_dilated: ") + dtype::name(t) + " (im2col) needs static feature dims or output spatial dims, got kernel " +
           wa.str() + " and output " + y_aval.str());
  const Dim ck = dims_product({cgd, Dim(kk)});  // C/G*K
  const Dim m_per_group = md.is_static() ? Dim(md.value / group)
                          : group == 1   ? md
                                         : Dim::sym("floordiv(" + md.symbol + ", " + std::to_string(group) + ")");
  const Dim pd = dims_product(Shape(y_aval.shape.begin() + 2, y_aval.shape.end()));  // P
  Value v = x.v;
  if (std::any_of(lo.begin(), lo.end(), [](int64_t e) { return e; }) ||
      std::any_of(hi.begin(), hi.end(), [](int64_t e) { return e; })) {
    Ints pads = {0, 0};
    pads.insert(pads.end(), lo.begin(), lo.end());
    pads.push_back(0);
    pads.push_back(0);
    pads.insert(pads.end(), hi.begin(), hi.end());
    v = L.op("Pad", {v, i64s(L, pads), scalar(L, t, 0)}, Aval::of_unknown_shape(t), {Attr::s("mode", "constant")});
  }
  v = L.op("Unsqueeze", {v, i64s(L, {2})}, Aval::of_unknown_shape(t));
  Ints axes;
  for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(3 + i));
  std::vector<Value> cols;
  for (int64_t o = 0; o < kk; ++o) {
    Ints starts(n), ends(n);
    int64_t rest = o;
    for (size_t i = n; i-- > 0;) {  // row-major: the last spatial axis varies fastest
      const int64_t j = rest % k[i];
      rest /= k[i];
      const int64_t eff = (k[i] - 1) * p.rhs_dil[i] + 1, from_end = eff - 1 - j * p.rhs_dil[i];
      starts[i] = j * p.rhs_dil[i];
      ends[i] = from_end == 0 ? INT64_MAX : -from_end;
    }
    cols.push_back(n == 0 ? v : L.op("Slice", {v, i64s(L, starts), i64s(L, ends), i64s(L, axes), i64s(L, p.strides)},
                                     Aval::of_unknown_shape(t)));
  }
  Value c = cols.size() == 1 ? cols[0] : L.op("Concat", cols, Aval::of_unknown_shape(t), {Attr::i("axis", 2)});
  // [N, C, K, out...] -> [N, G, C/G*K, P]; w [M, C/G, k...] -> [G, M/G, C/G*K].
  const Dim nd = y_aval.shape[0];
  c = reshape(L, c, Aval::of_unknown_shape(t), Aval(t, {nd, Dim(group), ck, pd}));
  Value wm = reshape(L, cast(L, w, wa, t), wa.with_dtype(t), Aval(t, {Dim(group), m_per_group, ck}));
  Aval ya(t, {nd, Dim(group), m_per_group, pd});
  Value y = L.op("MatMul", {wm, c}, ya);
  return reshape(L, y, ya, y_aval);
}

// Tries the ConvTranspose form of an lhs-dilated convolution (see the header).
// Returns false when the parameters do not map onto it.
bool conv_transpose(Lowering& L, const ConvParams& p, const Tensor& x, Value rhs, const Aval& rhs_a,
                    int32_t cd, const Aval& y_aval, Value& y) {
  if (p.fgc != 1 || p.bgc != 1 || p.symbolic_pads) return false;
  for (int64_t s : p.strides) if (s != 1) return false;
  Ints pads_begin, pads_end, out_pad;
  Ints k(p.n);
  for (size_t i = 0; i < p.n; ++i) {
    const Dim kd = rhs_a.shape[static_cast<size_t>(p.rhs_spec[2 + i])];
    if (!kd.is_static()) return false;
    k[i] = kd.value;
    const int64_t k_eff = (kd.value - 1) * p.rhs_dil[i] + 1;
    const int64_t pb = k_eff - 1 - p.lo[i], pe = k_eff - 1 - p.hi[i];
    if (pb < 0 || kd.value == 0) return false;
    // A negative end pad is output the transposed conv does not reach by
    // itself: output_padding (accepted below the stride) adds it.
    if (pe < 0 && -pe >= p.lhs_dil[i]) return false;
    pads_begin.push_back(pb);
    pads_end.push_back(std::max<int64_t>(0, pe));
    out_pad.push_back(std::max<int64_t>(0, -pe));
  }
  // W: [I, O, k...] (ConvTranspose's [C, M/group, k...]) with each spatial
  // axis reversed.
  Ints wperm = {p.rhs_spec[1], p.rhs_spec[0]};
  for (size_t i = 0; i < p.n; ++i) wperm.push_back(p.rhs_spec[2 + i]);
  Aval wa = permuted(rhs_a, wperm);
  Value w = transpose(L, rhs, rhs_a, wperm);
  Ints flip_axes;
  for (size_t i = 0; i < p.n; ++i) if (k[i] > 1) flip_axes.push_back(static_cast<int64_t>(2 + i));
  if (!flip_axes.empty()) {
    Ints starts(flip_axes.size(), -1), ends(flip_axes.size(), INT64_MIN), steps(flip_axes.size(), -1);
    w = L.op("Slice", {w, i64s(L, starts), i64s(L, ends), i64s(L, flip_axes), i64s(L, steps)}, wa);
  }
  w = cast(L, w, wa, cd);
  Ints pads = pads_begin;
  pads.insert(pads.end(), pads_end.begin(), pads_end.end());
  std::vector<Attr> attrs = {Attr::ints("strides", p.lhs_dil), Attr::ints("dilations", p.rhs_dil),
                             Attr::ints("pads", pads)};
  if (std::any_of(out_pad.begin(), out_pad.end(), [](int64_t v) { return v != 0; }))
    attrs.push_back(Attr::ints("output_padding", out_pad));
  y = L.op("ConvTranspose", {x.v, w}, y_aval.with_dtype(cd), attrs);
  return true;
}

// The real convolution of `lhs` (aval `lhs_a`) and `rhs` (`rhs_a`) to a value
// of aval `out_a`, all in JAX's layouts.
Value real_conv(Lowering& L, const ConvParams& p, Value lhs, const Aval& lhs_a, Value rhs, const Aval& rhs_a,
                const Aval& out_a) {
  const int32_t cd = compute_dtype(L, lhs_a.dtype, out_a.dtype);
  const size_t n = p.n;
  // A dilated kernel larger than the padded input: JAX gives an empty
  // result, where Conv would compute a negative output dim.
  if (has_static_zero(out_a)) {
    return cast(L, empty_of(L, out_a.with_dtype(cd)), out_a.with_dtype(cd), out_a.dtype);
  }

  // X in [N, C, spatial...].
  Tensor x{transpose(L, lhs, lhs_a, p.lhs_spec), permuted(lhs_a, p.lhs_spec)};
  x.v = cast(L, x.v, x.a, cd);
  x.a = x.a.with_dtype(cd);
  // The Conv's output, [N, M, spatial...] (out_spec says where each goes).
  const Aval y_aval = permuted(out_a, p.out_spec).with_dtype(cd);

  Value y = kNoValue;
  const bool dilated = std::any_of(p.lhs_dil.begin(), p.lhs_dil.end(), [](int64_t d) { return d != 1; });
  if (!(dilated && !by_matmul(cd) && conv_transpose(L, p, x, rhs, rhs_a, cd, y_aval, y))) {
    int64_t group = p.fgc;
    if (p.bgc > 1) {
      // [N, C, s...] -> [G, N/G, C, s...] -> [N/G, G, C, s...] -> [N/G, G*C, s...]
      const Dim nb = y_aval.shape[0];
      const Dim c = x.a.shape[1];
      if (!c.is_static()) L.fail("conv_general_dilated: batch_group_count needs a static feature dim");
      Shape split = {Dim(p.bgc), nb, c}, merged = {nb, Dim(p.bgc * c.value)};
      for (size_t i = 0; i < n; ++i) {
        for (Shape* s : {&split, &merged}) s->push_back(x.a.shape[2 + i]);
      }
      Aval sa(cd, split);
      Value v = reshape(L, x.v, x.a, sa);
      Ints perm = {1, 0};
      for (size_t j = 2; j < n + 3; ++j) perm.push_back(static_cast<int64_t>(j));
      v = transpose(L, v, sa, perm);
      Aval ta = permuted(sa, perm);
      x = {reshape(L, v, ta, Aval(cd, merged)), Aval(cd, merged)};
      group = p.bgc;
    }
    x = dilate(L, x, n, p.lhs_dil);
    Ints lo = p.lo, hi = p.hi;
    if (p.symbolic_pads) x = pad_at_run_time(L, x, p.lo_dims, p.hi_dims);
    else x = crop(L, x, n, lo, hi);
    Value w = cast(L, transpose(L, rhs, rhs_a, p.rhs_spec), permuted(rhs_a, p.rhs_spec), cd);
    if (by_matmul(cd)) {
      y = im2col_conv(L, x, w, permuted(rhs_a, p.rhs_spec).with_dtype(cd), p, lo, hi, group, y_aval);
      y = cast(L, y, y_aval, out_a.dtype);
      return transpose(L, y, y_aval.with_dtype(out_a.dtype), inverse(p.out_spec));
    }
    Ints pads = lo;
    pads.insert(pads.end(), hi.begin(), hi.end());
    y = L.op("Conv", {x.v, w}, y_aval,
             {Attr::ints("strides", p.strides), Attr::ints("dilations", p.rhs_dil),
              Attr::ints("pads", pads), Attr::i("group", group)});
  }
  y = cast(L, y, y_aval, out_a.dtype);
  return transpose(L, y, y_aval.with_dtype(out_a.dtype), inverse(p.out_spec));
}

void lower_conv(Lowering& L) {
  const ConvParams p = read_params(L);
  const Aval lhs_a = L.in_aval(0), rhs_a = L.in_aval(1), out_a = L.out_aval(0);
  if (!complex::is(out_a.dtype)) {
    L.bind(0, real_conv(L, p, L.input(0), lhs_a, L.input(1), rhs_a, out_a));
    return;
  }
  // Three real convolutions of the parts (see the header); JAX gives both
  // operands the same complex dtype.
  if (!complex::is(lhs_a.dtype) || !complex::is(rhs_a.dtype))
    L.fail("conv_general_dilated: a complex result needs complex operands, got " + lhs_a.str() + " and " +
           rhs_a.str());
  const Aval out_p = complex::part(out_a), xa = complex::part(lhs_a), wa = complex::part(rhs_a);
  const complex::Parts x = complex::split(L, L.input(0), lhs_a), w = complex::split(L, L.input(1), rhs_a);
  auto conv = [&](Value a, Value b) { return real_conv(L, p, a, xa, b, wa, out_p); };
  Value k1 = conv(L.op("Add", {x.re, x.im}, xa), w.re);
  Value k2 = conv(x.re, L.op("Sub", {w.im, w.re}, wa));
  Value k3 = conv(x.im, L.op("Add", {w.re, w.im}, wa));
  Value re = L.op("Sub", {k1, k3}, out_p), im = L.op("Add", {k1, k2}, out_p);
  L.bind(0, complex::pack(L, re, im, out_a));
}

}  // namespace

JAXONNX_PLUGIN("lax_conv", "0.1.0") {
  plugin.primitive("conv_general_dilated", lower_conv)
      .emits({"Conv", "ConvTranspose", "Transpose", "Cast", "Slice", "Pad", "Unsqueeze", "Reshape", "Concat",
              "MatMul", "Expand",
              "Gather", "Sub", "Add"})  // complex: split, the parts combined, pack
      .emits_shape_ops()
      .doc(onnx_doc("Conv"));
}
