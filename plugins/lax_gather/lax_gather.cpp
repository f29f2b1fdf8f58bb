// lax_gather: JAX's `gather` and `dynamic_slice` as ONNX Slice / Gather /
// GatherElements / GatherND.
//
// gather(operand, indices, dimension_numbers, slice_sizes, mode, fill_value)
// follows XLA: indices[..., K] (the index vector is the last axis) holds, for
// every batch position, the start of a slice of size slice_sizes in the
// operand dims start_index_map; collapsed_slice_dims (size-1 slices) are
// dropped; operand_batching_dims pair with start_indices_batching_dims like
// a batched matmul; the slice dims land at offset_dims of the output, the
// batch dims in order at the others. Each shape picks the cheapest exact op:
//
//   no batch dims (indices of shape [K])   -> Slice (+ Squeeze). This is what
//                                             JAX emits for x[:, 1:], x[0:1],
//                                             jnp.diff under a symbolic batch;
//                                             starts stay in the indices'
//                                             int32 so constant folding turns
//                                             them into initializers.
//   one indexed axis (x[idx], jnp.take)    -> Gather(axis)
//   take_along_axis (all other dims paired
//   as batching dims, same positions)      -> GatherElements
//   several axes / other batching dims     -> GatherND (batch_dims), with
//                                             Transposes around it
//
// Modes (ONNX Gather wraps negative indices and fails on out-of-range ones,
// XLA clamps, so each JAX mode is spelled out):
//   PROMISE_IN_BOUNDS  as CLIP: XLA clamps a start the promise did not
//                      keep (-1, or 8 with a slice of 5 on an axis of 10)
//                      where ONNX Gather would wrap or fail; constant
//                      indices fold the clamp away.
//   CLIP               start = clamp(start, 0, dim - slice_size) (Max/Min).
//   FILL_OR_DROP       a batch position whose start is outside
//                      [0, dim - slice_size] on any axis yields fill_value
//                      (JAX resolves None to NaN / int min / uint max / True):
//                      clamped gather + Where on the validity mask.
// Indexed axes all sliced whole (every start clamps to 0) with batch positions
// broadcast the sliced operand over the batch dims (Unsqueeze + Expand).
// A window (neither size 1 nor the whole dim) on an indexed axis with batch
// positions (x[:, j, 1:4], a vmapped dynamic_slice) of static size s becomes
// s point gathers: the indices gain an axis start + [0, s). A symbolic window
// size there is not supported.
//
// dynamic_slice(operand, *starts, slice_sizes): Slice with runtime starts,
// clamped as JAX does: start = clamp(start, 0, dim - size), dim symbolic or
// not. Literal starts with static dims are clamped here, into constants.
#include <jaxonnx/complex.hpp>
#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace {

using namespace jaxonnx::sdk;

constexpr int64_t kBatchLabel = 1 << 20;  // axis labels: operand dim d is d, batch dim j is kBatchLabel + j

bool contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

int64_t index_of(const std::vector<int64_t>& v, int64_t x) {
  auto it = std::find(v.begin(), v.end(), x);
  return it == v.end() ? -1 : static_cast<int64_t>(it - v.begin());
}

// A 1-D constant of int dtype `dt` (int32 or int64), the Tind of Slice.
Value ints_of(Lowering& L, int32_t dt, const std::vector<int64_t>& v) {
  if (dt == dtype::i64) return i64s(L, v);
  std::vector<int32_t> w(v.begin(), v.end());
  return L.constant(w, {static_cast<int64_t>(w.size())});
}

// A shape (possibly symbolic) as a 1-D tensor of int dtype `dt`.
Value dims_of(Lowering& L, int32_t dt, const Shape& s) {
  bool all_static = std::all_of(s.begin(), s.end(), [](const Dim& d) { return d.is_static(); });
  if (all_static) {
    std::vector<int64_t> v;
    for (const Dim& d : s) v.push_back(d.value);
    return ints_of(L, dt, v);
  }
  return cast(L, shape_value(L, s), Aval(dtype::i64, {static_cast<int64_t>(s.size())}), dt);
}

// dims - sizes, elementwise, as a 1-D tensor of `dt`: the largest in-bounds
// start of each slice. A constant where every difference is known here (a
// slice of a whole symbolic dim has 0), so a clamp of constant starts folds.
Value max_starts(Lowering& L, int32_t dt, const Shape& dims, const Shape& sizes) {
  bool all_static = true;
  std::vector<int64_t> v;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == sizes[i]) v.push_back(0);
    else if (dims[i].is_static() && sizes[i].is_static()) v.push_back(dims[i].value - sizes[i].value);
    else all_static = false;
  }
  if (all_static) return ints_of(L, dt, v);
  Aval a(dtype::i64, {static_cast<int64_t>(dims.size())});
  Value hi = L.op("Sub", {shape_value(L, dims), shape_value(L, sizes)}, a);
  return cast(L, hi, a, dt);
}

// ONNX's Where has no bool / 16-bit / uint64 kernels in onnxruntime
// (kernels.hpp): select in a type that round-trips those values exactly.
int32_t where_dtype(int32_t t) {
  int32_t c = kernels::compute_type("Where", t, /*bits_only=*/true);
  return c == JXO_DTYPE_UNDEFINED ? t : c;
}

// The gather's fill_value (already resolved by JAX for FILL_OR_DROP) as a
// scalar of dtype `dt`; integer fills are built from the exact int64. `imag`:
// the imaginary part of a complex gather's fill (JAX's NaN or real fill
// becomes fill + 0i).
Value fill_scalar(Lowering& L, int32_t dt, bool imag = false) {
  Param p = L.param("fill_value");
  if (imag) {
    if (p.exists() && !p.is_none() && p.kind() != JXO_PARAM_FLOAT && p.kind() != JXO_PARAM_INT)
      L.fail("gather mode FILL_OR_DROP of a complex operand takes a real fill_value");
    return scalar(L, dt, 0);
  }
  if (!p.exists() || p.is_none()) {
    if (dtype::is_float(dt)) return scalar(L, dt, std::nan(""));
    L.fail("gather mode FILL_OR_DROP without a fill_value for dtype " + std::string(dtype::name(dt)));
  }
  if (p.kind() == JXO_PARAM_FLOAT) return scalar(L, dt, p.as_float());
  int64_t v = p.as_int();
  if (dt == dtype::i64 || dt == dtype::u64) {
    Value s = L.constant(dtype::i64, {}, &v, sizeof(v));
    return cast(L, s, Aval(dtype::i64, {}), dt);  // u64: int64 -> uint64 cast wraps exactly
  }
  return scalar(L, dt, static_cast<double>(v));  // exact for every narrower type
}

// Where(mask, y, fill) with the mask broadcast over `out`.
Value select_fill(Lowering& L, Value mask, Value y, const Aval& out, bool imag = false) {
  const int32_t wt = where_dtype(out.dtype);
  Value fill = cast(L, fill_scalar(L, out.dtype, imag), Aval(out.dtype, {}), wt);
  Value r = L.op("Where", {mask, cast(L, y, out, wt), fill}, out.with_dtype(wt));
  return cast(L, r, out.with_dtype(wt), out.dtype);
}

// ----------------------------------------------------------- indices prep --

// The indices in `ct` (int32 or int64), clamped to the in-bounds starts (every mode),
// and for FILL_OR_DROP the validity mask over the batch shape.
struct Indices {
  Value idx = kNoValue;
  Aval aval;           // of idx (dtype ct)
  Value mask = kNoValue;  // bool[batch shape] or none
};

Indices prepare_indices(Lowering& L, Value idx, const Aval& ia, int32_t ct, const std::string& mode,
                        const Shape& op_dims, const Shape& sizes) {
  Indices r;
  r.aval = ia.with_dtype(ct);
  r.idx = cast(L, idx, ia, ct);
  Value hi = max_starts(L, ct, op_dims, sizes);
  Value zero = scalar(L, ct, 0);
  if (mode == "FILL_OR_DROP") {
    Aval b = r.aval.with_dtype(dtype::boolean);
    Value ok = L.op("And", {L.op("GreaterOrEqual", {r.idx, zero}, b), L.op("LessOrEqual", {r.idx, hi}, b)}, b);
    Shape bs(ia.shape.begin(), ia.shape.end() - 1);
    Value axis = i64s(L, {ia.rank() - 1});
    if (ia.shape.back() == Dim(1)) {
      r.mask = L.op("Squeeze", {ok, axis}, Aval(dtype::boolean, bs));
    } else {  // all of the K components: a min over 0/1 (no bool reduction in ONNX)
      Value n = reduce_over(L, "ReduceMin", cast(L, ok, b, dtype::i32), {ia.rank() - 1}, false,
                            Aval(dtype::i32, bs));
      r.mask = cast(L, n, Aval(dtype::i32, bs), dtype::boolean);
    }
  } else if (mode != "CLIP" && mode != "PROMISE_IN_BOUNDS") {
    L.fail("gather mode " + mode + " is not supported");
  }
  r.idx = L.op("Min", {L.op("Max", {r.idx, zero}, r.aval), hi}, r.aval);
  return r;
}

// The components `ks` of the last axis of idx (shape [..., K]), in that order;
// keep_last: shape [..., len(ks)] even for one component, else [...] for one.
Value pick_components(Lowering& L, const Indices& ix, const std::vector<int64_t>& ks, bool keep_last) {
  const int64_t K = ix.aval.shape.back().value;
  Shape s(ix.aval.shape.begin(), ix.aval.shape.end() - 1);
  int64_t last = ix.aval.rank() - 1;
  bool identity = static_cast<int64_t>(ks.size()) == K;
  for (size_t i = 0; identity && i < ks.size(); ++i) identity = ks[i] == static_cast<int64_t>(i);
  if (ks.size() == 1 && !keep_last) {
    if (K == 1) return L.op("Squeeze", {ix.idx, i64s(L, {last})}, ix.aval.with_shape(s));
    return L.op("Gather", {ix.idx, scalar(L, dtype::i64, static_cast<double>(ks[0]))}, ix.aval.with_shape(s),
                {Attr::i("axis", last)});
  }
  if (identity) return ix.idx;
  s.push_back(Dim(static_cast<int64_t>(ks.size())));
  return L.op("Gather", {ix.idx, i64s(L, ks)}, ix.aval.with_shape(s), {Attr::i("axis", last)});
}

// ----------------------------------------------------------------- gather --

std::string mode_name(Lowering& L) {
  Param p = L.param("mode");
  if (p.is_none()) return "PROMISE_IN_BOUNDS";  // the enum arrives as its member name
  std::string s = p.as_string();
  auto dot = s.rfind('.');
  return dot == std::string::npos ? s : s.substr(dot + 1);  // "GatherScatterMode.CLIP" too
}

// No batch positions: one slice of the operand, at runtime starts.
void gather_as_slice(Lowering& L, const Aval& in, const Aval& ia, const std::vector<int64_t>& sim,
                     const std::vector<int64_t>& collapsed, const Shape& sizes, const std::string& mode) {
  const Aval out = L.out_aval(0);
  const int64_t R = in.rank();
  // int32 indices stay int32 (Slice takes int32 or int64), so literal starts
  // fold into constants without a Cast in between.
  const int32_t ct = ia.dtype == dtype::i32 ? dtype::i32 : dtype::i64;
  Shape sim_dims, sim_sizes;
  for (int64_t d : sim) {
    sim_dims.push_back(in.shape[static_cast<size_t>(d)]);
    sim_sizes.push_back(sizes[static_cast<size_t>(d)]);
  }
  Indices ix = prepare_indices(L, L.input(1), ia, ct, mode, sim_dims, sim_sizes);

  // Indexed axes whose slice is the whole dim start at 0 whatever the index
  // (clamped, promised, or masked), and axes not indexed start at 0.
  std::vector<int64_t> ks, axes;
  Shape axis_sizes;
  for (size_t k = 0; k < sim.size(); ++k) {
    if (sim_sizes[k] == sim_dims[k]) continue;
    ks.push_back(static_cast<int64_t>(k));
    axes.push_back(sim[k]);
    axis_sizes.push_back(sim_sizes[k]);
  }
  std::vector<int64_t> zero_axes;
  Shape zero_sizes;
  for (int64_t d = 0; d < R; ++d) {
    if (contains(sim, d) || sizes[static_cast<size_t>(d)] == in.shape[static_cast<size_t>(d)]) continue;
    zero_axes.push_back(d);
    zero_sizes.push_back(sizes[static_cast<size_t>(d)]);
  }
  Value x = L.input(0);
  if (!axes.empty() || !zero_axes.empty()) {
    std::vector<Value> start_parts;
    if (!ks.empty()) start_parts.push_back(pick_components(L, ix, ks, true));
    if (!zero_axes.empty()) start_parts.push_back(ints_of(L, ct, std::vector<int64_t>(zero_axes.size(), 0)));
    axes.insert(axes.end(), zero_axes.begin(), zero_axes.end());
    axis_sizes.insert(axis_sizes.end(), zero_sizes.begin(), zero_sizes.end());
    Aval va(ct, {static_cast<int64_t>(axes.size())});
    Value starts = start_parts.size() == 1 ? start_parts[0] : L.op("Concat", start_parts, va, {Attr::i("axis", 0)});
    // A symbolic size makes the ends shape arithmetic: in int64, as Shape
    // gives it. Through a Cast to int32, tract loses that 1 + (T - 1) is T
    // and cannot unify the slice with its neighbours.
    int32_t et = ct;
    for (const Dim& d : axis_sizes) et = d.is_static() ? et : dtype::i64;
    if (et != ct) {
      starts = cast(L, starts, va, et);
      va = va.with_dtype(et);
    }
    Value ends = L.op("Add", {starts, dims_of(L, et, axis_sizes)}, va);
    x = L.op("Slice", {x, starts, ends, ints_of(L, et, axes)}, complex::packed(in.with_shape(sizes)));
  }
  // A complex operand is carried packed (jaxonnx/complex.hpp): its parts axis
  // is last, after every axis sliced or squeezed here.
  if (!collapsed.empty()) x = L.op("Squeeze", {x, i64s(L, collapsed)}, complex::packed(out));
  if (ix.mask != kNoValue && complex::is(out.dtype)) {
    Aval p = complex::part(out);
    complex::Parts z = complex::split(L, x, out);
    x = complex::pack(L, select_fill(L, ix.mask, z.re, p), select_fill(L, ix.mask, z.im, p, true), out);
  } else if (ix.mask != kNoValue) {
    x = select_fill(L, ix.mask, x, out);
  }
  L.bind(0, x);
}

void lower_gather(Lowering& L) {
  // With batch positions a complex operand is gathered part by part (the
  // index work is shared through CSE): `in`/`out` are then the parts' avals.
  const Aval in = complex::part(L.in_aval(0)), ia = L.in_aval(1), out = complex::part(L.out_aval(0));
  const int64_t R = in.rank();
  if (ia.rank() < 1) L.fail("gather indices must have an index vector axis");
  Param dn = L.param("dimension_numbers");
  std::vector<int64_t> offset_dims = dn.field("offset_dims").as_ints();
  std::vector<int64_t> collapsed = dn.field("collapsed_slice_dims").as_ints();
  std::vector<int64_t> sim = dn.field("start_index_map").as_ints();
  std::vector<int64_t> obd, ibd;
  if (dn.has("operand_batching_dims")) obd = dn.field("operand_batching_dims").as_ints();
  if (dn.has("start_indices_batching_dims")) ibd = dn.field("start_indices_batching_dims").as_ints();
  Shape sizes = L.param("slice_sizes").as_dims();
  const std::string mode = mode_name(L);
  if (mode != "PROMISE_IN_BOUNDS" && mode != "CLIP" && mode != "FILL_OR_DROP")
    L.fail("gather mode " + mode + " is not supported");
  if (static_cast<int64_t>(sizes.size()) != R) L.fail("gather slice_sizes needs one entry per operand axis");
  if (!ia.shape.back().is_static() || ia.shape.back().value != static_cast<int64_t>(sim.size()))
    L.fail("gather indices' last axis must hold the start_index_map entries");
  const int64_t nb = ia.rank() - 1;
  const int64_t K = static_cast<int64_t>(sim.size());

  if (nb == 0 && obd.empty()) {
    gather_as_slice(L, L.in_aval(0), ia, sim, collapsed, sizes, mode);
    return;
  }

  // Indexed axes: a size-1 slice (collapsed or kept) is a point gather; a
  // kept whole-dim slice always starts at 0 and is not gathered at all; a
  // window of static size s (x[:, j, 1:4] indexes axis 2 from 1 with s = 3)
  // becomes s point gathers along a new index axis: start + [0, s).
  std::vector<int64_t> ks, gdims;       // gathered components and their operand dims
  std::vector<int64_t> wks, wdims, wsz;  // windowed components, their dims and sizes
  for (size_t k = 0; k < sim.size(); ++k) {
    const int64_t d = sim[k];
    const Dim& s = sizes[static_cast<size_t>(d)];
    if (!contains(collapsed, d) && s == in.shape[static_cast<size_t>(d)]) continue;
    ks.push_back(static_cast<int64_t>(k));
    gdims.push_back(d);
    if (s == Dim(1)) continue;
    if (!s.is_static())
      L.fail("gather: a window of symbolic size " + s.str() + " on indexed axis " + std::to_string(d) +
             " with batch positions is not supported");
    wks.push_back(static_cast<int64_t>(k));
    wdims.push_back(d);
    wsz.push_back(s.value);
  }

  Shape sim_dims, sim_sizes;
  for (int64_t d : sim) {
    sim_dims.push_back(in.shape[static_cast<size_t>(d)]);
    sim_sizes.push_back(sizes[static_cast<size_t>(d)]);
  }
  // Gather and GatherElements take int32 indices as they are (constant int32
  // indices then stay foldable); GatherND needs int64 and casts later.
  const int32_t ct = ia.dtype == dtype::i32 ? dtype::i32 : dtype::i64;
  Indices ix = prepare_indices(L, L.input(1), ia, ct, mode, sim_dims, sim_sizes);
  Shape bs(ia.shape.begin(), ia.shape.end() - 1);  // the batch shape (the mask's)

  // Windows: indices [..., K] -> [..., 1 (per window), K] + offsets, the
  // offsets counting 0..s-1 along window axis m in component wks[m].
  const int64_t M = static_cast<int64_t>(wks.size());
  Shape bse = bs;  // batch shape with the window axes
  if (M > 0) {
    Shape s1 = bs;
    std::vector<int64_t> new_axes;
    for (int64_t m = 0; m < M; ++m) {
      new_axes.push_back(nb + m);
      s1.push_back(Dim(1));
      bse.push_back(Dim(wsz[static_cast<size_t>(m)]));
    }
    s1.push_back(Dim(K));
    Value v = L.op("Unsqueeze", {ix.idx, i64s(L, new_axes)}, Aval(ct, s1));
    for (int64_t m = 0; m < M; ++m) {
      const int64_t s = wsz[static_cast<size_t>(m)];
      std::vector<int64_t> dims(static_cast<size_t>(nb + M + 1), 1);
      dims[static_cast<size_t>(nb + m)] = s;
      dims.back() = K;
      std::vector<int64_t> off(static_cast<size_t>(s * K), 0);
      for (int64_t w = 0; w < s; ++w) off[static_cast<size_t>(w * K + wks[static_cast<size_t>(m)])] = w;
      s1[static_cast<size_t>(nb + m)] = Dim(s);
      Value offsets = ct == dtype::i64 ? L.constant(off, dims)
                                        : L.constant(std::vector<int32_t>(off.begin(), off.end()), dims);
      v = L.op("Add", {v, offsets}, Aval(ct, s1));
    }
    ix.idx = v;
    ix.aval = Aval(ct, s1);
  }
  const int64_t nbe = nb + M;
  // The label of index batch axis j: a batch dim of the output, or the
  // operand dim a window axis stands for.
  auto batch_label = [&](int64_t j) { return j < nb ? kBatchLabel + j : wdims[static_cast<size_t>(j - nb)]; };
  auto point = [&](int64_t d) { return contains(collapsed, d) || contains(wdims, d); };  // no size-1 axis left

  // The gather of one real operand `x` (a complex operand's part `imag` or not).
  auto gather_one = [&](Value x, bool imag) -> Value {
    // Dims neither indexed nor batching but sliced short start at 0: Slice first.
    Shape xs = in.shape;
    {
      std::vector<int64_t> axes;
      Shape ends;
      for (int64_t d = 0; d < R; ++d) {
        const size_t u = static_cast<size_t>(d);
        if (contains(gdims, d) || contains(obd, d) || sizes[u] == in.shape[u]) continue;
        axes.push_back(d);
        ends.push_back(sizes[u]);
        xs[u] = sizes[u];
      }
      if (!axes.empty())
        x = L.op("Slice", {x, i64s(L, std::vector<int64_t>(axes.size(), 0)), shape_value(L, ends), i64s(L, axes)},
                 in.with_shape(xs));
    }

    // The labels of the output's axes: batch dims in order around the offset
    // dims, which are the remaining operand dims in order.
    std::vector<int64_t> want;
    {
      std::vector<int64_t> offset_operand;
      for (int64_t d = 0; d < R; ++d)
        if (!contains(collapsed, d) && !contains(obd, d)) offset_operand.push_back(d);
      int64_t j = 0, o = 0;
      for (int64_t p = 0; p < out.rank(); ++p)
        want.push_back(contains(offset_dims, p) ? offset_operand[static_cast<size_t>(o++)] : kBatchLabel + j++);
    }

    Value y = kNoValue;
    std::vector<int64_t> labels;  // of y's axes
    Shape ys;
    bool take_along = M == 0 && gdims.size() == 1 && offset_dims.empty() && contains(collapsed, gdims[0]) &&
                      nb == R && static_cast<int64_t>(obd.size()) == R - 1;
    for (size_t i = 0; take_along && i < obd.size(); ++i) take_along = obd[i] == ibd[i];
    if (gdims.empty()) {
      // Every indexed axis is sliced whole, so every start clamps to 0: each
      // batch position reads the same (sliced) operand, paired batching dims
      // aside. Squeeze the collapsed dims (size 1 after the Slice above), then
      // broadcast over the batch dims the operand does not pair with.
      std::vector<int64_t> squeezed;
      for (int64_t d = 0; d < R; ++d) {
        if (contains(collapsed, d)) { squeezed.push_back(d); continue; }
        labels.push_back(contains(obd, d) ? kBatchLabel + ibd[static_cast<size_t>(index_of(obd, d))] : d);
        ys.push_back(xs[static_cast<size_t>(d)]);
      }
      y = squeezed.empty() ? x : L.op("Squeeze", {x, i64s(L, squeezed)}, in.with_shape(ys));
      std::vector<int64_t> added;
      Shape full = ys;
      for (int64_t j = 0; j < nb; ++j) {
        if (contains(labels, kBatchLabel + j)) continue;
        added.push_back(static_cast<int64_t>(labels.size()));
        labels.push_back(kBatchLabel + j);
        ys.push_back(Dim(1));
        full.push_back(bs[static_cast<size_t>(j)]);
      }
      if (!added.empty()) {
        y = L.op("Unsqueeze", {y, i64s(L, added)}, in.with_shape(ys));
        y = L.op("Expand", {y, shape_value(L, full)}, in.with_shape(full));
        ys = full;
      }
    } else if (take_along) {
      // take_along_axis: out[b] = x[b with b[a] replaced by idx[b]].
      y = L.op("GatherElements", {x, pick_components(L, ix, ks, false)}, out, {Attr::i("axis", gdims[0])});
      for (int64_t j = 0; j < nb; ++j) labels.push_back(kBatchLabel + j);
      ys = out.shape;
    } else if (obd.empty() && gdims.size() == 1) {
      // One indexed axis a: Gather gives x[:a] + batch (+ [1] kept) + x[a+1:].
      const int64_t a = gdims[0];
      const bool keep = !point(a);
      Value i1 = pick_components(L, ix, ks, keep);
      for (int64_t d = 0; d < a; ++d) { labels.push_back(d); ys.push_back(xs[static_cast<size_t>(d)]); }
      for (int64_t j = 0; j < nbe; ++j) { labels.push_back(batch_label(j)); ys.push_back(bse[static_cast<size_t>(j)]); }
      if (keep) { labels.push_back(a); ys.push_back(Dim(1)); }
      for (int64_t d = a + 1; d < R; ++d) { labels.push_back(d); ys.push_back(xs[static_cast<size_t>(d)]); }
      y = L.op("Gather", {x, i1}, in.with_shape(ys), {Attr::i("axis", a)});
    } else {
      // GatherND over [batching dims, indexed dims, rest] with batch_dims =
      // the number of batching dims, which lead the indices as well.
      std::vector<int64_t> xperm = obd;
      xperm.insert(xperm.end(), gdims.begin(), gdims.end());
      std::vector<int64_t> rest;
      for (int64_t d = 0; d < R; ++d)
        if (!contains(xperm, d)) rest.push_back(d);
      xperm.insert(xperm.end(), rest.begin(), rest.end());
      Value xt = transpose(L, x, in.with_shape(xs), xperm);

      std::vector<int64_t> iperm = ibd;
      for (int64_t j = 0; j < nbe; ++j)
        if (!contains(ibd, j)) iperm.push_back(j);
      Shape ips = bse;
      ips.push_back(Dim(static_cast<int64_t>(ks.size())));
      Value ip = cast(L, pick_components(L, ix, ks, true), Aval(ct, ips), dtype::i64);
      std::vector<int64_t> iperm_full = iperm;
      iperm_full.push_back(nbe);
      Value it = transpose(L, ip, Aval(dtype::i64, ips), iperm_full);

      for (int64_t j : iperm) { labels.push_back(batch_label(j)); ys.push_back(bse[static_cast<size_t>(j)]); }
      for (int64_t d : rest) { labels.push_back(d); ys.push_back(xs[static_cast<size_t>(d)]); }
      y = L.op("GatherND", {xt, it}, in.with_shape(ys), {Attr::i("batch_dims", static_cast<int64_t>(obd.size()))});
      // Indexed dims kept as size-1 slices come back as new axes.
      std::vector<int64_t> new_axes;
      for (int64_t d : gdims) {
        if (point(d)) continue;
        new_axes.push_back(static_cast<int64_t>(labels.size()));
        labels.push_back(d);
        ys.push_back(Dim(1));
      }
      if (!new_axes.empty()) y = L.op("Unsqueeze", {y, i64s(L, new_axes)}, in.with_shape(ys));
    }

    std::vector<int64_t> perm;
    for (int64_t w : want) {
      int64_t p = index_of(labels, w);
      if (p < 0) L.fail("gather: internal axis bookkeeping failed");
      perm.push_back(p);
    }
    y = transpose(L, y, in.with_shape(ys), perm);
    if (ix.mask != kNoValue) {
      Value m = ix.mask;
      if (!offset_dims.empty()) {
        Shape ms(static_cast<size_t>(out.rank()), Dim(1));
        int64_t j = 0;
        for (int64_t p = 0; p < out.rank(); ++p)
          if (!contains(offset_dims, p)) ms[static_cast<size_t>(p)] = bs[static_cast<size_t>(j++)];
        m = L.op("Unsqueeze", {m, i64s(L, offset_dims)}, Aval(dtype::boolean, ms));
      }
      y = select_fill(L, m, y, out, imag);
    }
    return y;
  };
  const Aval cin = L.in_aval(0);
  if (!complex::is(cin.dtype)) {
    L.bind(0, gather_one(L.input(0), false));
    return;
  }
  complex::Parts z = complex::split(L, L.input(0), cin);
  L.bind(0, complex::pack(L, gather_one(z.re, false), gather_one(z.im, true), L.out_aval(0)));
}

// ---------------------------------------------------------- dynamic_slice --

// dynamic_slice(x, *starts, slice_sizes): starts clamped to [0, dim - size].
// Axes sliced whole start at 0 and are left out.
void lower_dynamic_slice(Lowering& L) {
  const Aval in = L.in_aval(0), out = L.out_aval(0);
  const int64_t R = in.rank();
  Shape sizes = L.param("slice_sizes").as_dims();
  if (static_cast<int64_t>(sizes.size()) != R || static_cast<int64_t>(L.num_inputs()) != R + 1)
    L.fail("dynamic_slice needs one start index and one slice size per operand axis");

  std::vector<int64_t> axes;
  Shape dims, szs;
  std::vector<Value> parts;          // runtime starts, int64[1] each
  std::vector<int64_t> const_starts;  // when every start is known here
  bool all_const = true;
  for (int64_t d = 0; d < R; ++d) {
    const size_t u = static_cast<size_t>(d);
    if (sizes[u] == in.shape[u]) continue;
    axes.push_back(d);
    dims.push_back(in.shape[u]);
    szs.push_back(sizes[u]);
    const jxo_tensor* lit = L.literal(static_cast<size_t>(d + 1));
    Aval sa = L.in_aval(static_cast<size_t>(d + 1));
    if (lit && in.shape[u].is_static() && sizes[u].is_static()) {
      int64_t v = 0;
      switch (lit->dtype) {
        case dtype::i8: v = *static_cast<const int8_t*>(lit->data); break;
        case dtype::i16: v = *static_cast<const int16_t*>(lit->data); break;
        case dtype::i32: v = *static_cast<const int32_t*>(lit->data); break;
        case dtype::i64: v = *static_cast<const int64_t*>(lit->data); break;
        case dtype::u8: v = *static_cast<const uint8_t*>(lit->data); break;
        case dtype::u16: v = *static_cast<const uint16_t*>(lit->data); break;
        case dtype::u32: v = *static_cast<const uint32_t*>(lit->data); break;
        default: lit = nullptr;
      }
      if (lit) {
        v = std::min(std::max<int64_t>(v, 0), in.shape[u].value - sizes[u].value);
        const_starts.push_back(v);
        parts.push_back(i64s(L, {v}));
        continue;
      }
    }
    all_const = false;
    const_starts.push_back(0);
    Value s = cast(L, L.input(static_cast<size_t>(d + 1)), sa, dtype::i64);
    parts.push_back(L.op("Unsqueeze", {s, i64s(L, {0})}, Aval(dtype::i64, {1})));
  }
  Value x = L.input(0);
  if (axes.empty()) {
    L.bind(0, x);
    return;
  }
  const int64_t n = static_cast<int64_t>(axes.size());
  Aval va(dtype::i64, {n});
  Value starts;
  if (all_const) {
    starts = i64s(L, const_starts);
  } else {
    starts = parts.size() == 1 ? parts[0] : L.op("Concat", parts, va, {Attr::i("axis", 0)});
    // Literal starts were clamped above; clamping them again is harmless.
    starts = L.op("Min", {L.op("Max", {starts, i64s(L, {0})}, va), max_starts(L, dtype::i64, dims, szs)}, va);
  }
  Value ends = L.op("Add", {starts, shape_value(L, szs)}, va);
  // A complex operand is carried packed (jaxonnx/complex.hpp); its parts axis
  // is never sliced.
  L.bind(0, L.op("Slice", {x, starts, ends, i64s(L, axes)}, complex::packed(out)));
}

}  // namespace

JAXONNX_PLUGIN("lax_gather", "0.1.0") {
  plugin.primitive("gather", lower_gather)
      .emits({"Slice", "Gather", "GatherElements", "GatherND", "Transpose", "Squeeze", "Unsqueeze", "Concat",
              "Cast", "Add", "Sub", "Max", "Min", "GreaterOrEqual", "LessOrEqual", "And", "ReduceMin", "Where", "Expand"})
      .emits_shape_ops()
      .doc(onnx_doc("GatherND"));
  plugin.primitive("dynamic_slice", lower_dynamic_slice)
      .emits({"Slice", "Unsqueeze", "Concat", "Cast", "Add", "Sub", "Max", "Min"})
      .emits_shape_ops()
      .doc(onnx_doc("Slice"));
}
