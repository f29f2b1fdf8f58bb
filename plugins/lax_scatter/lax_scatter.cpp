// lax_scatter: scatter / scatter-add / scatter-sub / scatter-mul /
// scatter-min / scatter-max (x.at[...].set/add/subtract/multiply/min/max) and
// dynamic_update_slice, all as ONNX ScatterND (reduction none/add/mul/min/max).
//
// XLA scatter vs ScatterND. An XLA scatter writes, for every scatter index G
// (the batch dims of `indices`), a window of `updates` at start
// indices[G] (mapped to operand dims by scatter_dims_to_operand_dims); window
// dims, inserted (size-1) dims and batching dims may sit anywhere. ScatterND
// only addresses leading operand dims and writes trailing slices. So every
// scatter becomes one ScatterND whose index tuples enumerate the leading
// operand dims per update element (start + window offset, built with
// Gather/Unsqueeze/Range/Add), while trailing window dims that cover whole
// operand dims stay slices: x.at[i].set(rows) indexes the rows directly.
// Updates are first transposed to (scatter dims, window dims): ScatterND
// applies index tuples in row-major order, and XLA applies whole windows in
// scatter-index order, so duplicates resolve the same way (the last write
// wins for `scatter`, as on JAX's CPU backend; reductions combine all).
//
// Out-of-bounds modes. CLIP clamps each start to [0, dim - window]. FILL_OR_DROP
// (jnp's default) drops a whole window when its start is out of range (raw
// negative indices included); PROMISE_IN_BOUNDS is lowered the same way (it is
// what XLA's CPU backend does, and onnxruntime's ScatterND fails on an out-of-
// range index instead). A dropped window is redirected into a padding slot
// appended to one scatter axis (Pad), which is sliced off afterwards: this is
// exact for every reduction, `set` included.
//
// scatter-sub is scatter-add of the negated updates (integers wrap alike).
// scatter-min/max: JAX's min/max propagate NaN, onnxruntime's reduction keeps
// a NaN only as long as no later update replaces it; a second ScatterND (max
// of IsNaN flags) marks every position that met a NaN and Where puts it back.
//
// onnxruntime kernels: ScatterND's add/mul/min/max reductions have no
// float16 kernel (computed in float32: duplicates then round once instead of
// per update), min/max have no bool kernel (through uint8), and Pad has no
// int16/uint16/bfloat16 kernel (through int32 / float32).
//
// dynamic_update_slice(operand, update, *starts): a CLIP scatter of the whole
// update at the clamped start (start = clamp(start, 0, dim - update_dim)).
//
// Complex operands (carried as float[..., 2], jaxonnx/complex.hpp) scatter
// part by part: set, add and sub act on each part alone; mul multiplies the
// operand by the scattered product of its updates, built in polar form (the
// moduli multiplied into ones, the angles added into zeros), so positions no
// update reaches are multiplied by exactly 1. scatter-max/min order complex
// values as JAX's max/min do, lexicographically (real part, then imaginary):
// the packed form is scattered whole (its parts axis one more window dim), a
// first ScatterND(max) of the real parts gives each position's winning real
// part, and a second one of the imaginary parts of only the values that
// reach it (the others -inf; +inf and min for scatter-min) the winner's
// imaginary part. (A NaN real part is not ordered as XLA does.)
#include <jaxonnx/complex.hpp>
#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

struct DimNumbers {
  std::vector<int64_t> update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims,
      operand_batching_dims, scatter_indices_batching_dims;
};

enum class Mode { kClip, kDrop };

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// a + b as a Dim, for the avals of intermediate values only.
Dim dim_add(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return Dim(a.value + b.value);
  return Dim::sym("(" + a.str() + ") + (" + b.str() + ")");
}

// The int64 vector a - b (elementwise over dims), computed at runtime where symbolic.
Value dims_minus(Lowering& L, const Shape& a, const Shape& b) {
  bool all_static = true;
  std::vector<int64_t> v;
  for (size_t i = 0; i < a.size(); ++i) {
    all_static = all_static && a[i].is_static() && b[i].is_static();
    if (all_static) v.push_back(a[i].value - b[i].value);
  }
  if (all_static) return i64s(L, v);
  Aval out(dtype::i64, {static_cast<int64_t>(a.size())});
  return L.op("Sub", {shape_value(L, a), shape_value(L, b)}, out);
}

Value scatter_nd(Lowering& L, Value data, Value idx, Value upd, const Aval& out,
                 const std::string& reduction) {
  return scatter_nd_reduce(L, data, idx, upd, out, reduction);
}

// A reduction in place of one ScatterND: (data, index tuples, updates, the
// result's aval) -> the result.
using Reduce = std::function<Value(Value, Value, Value, const Aval&)>;

// The lexicographic scatter-max/min of packed complex data and updates (see
// the header).
Reduce lexicographic(Lowering& L, bool is_max) {
  return [&L, is_max](Value data, Value full, Value upd, const Aval& pa) {
    auto take = [&](Value v, int64_t k) {
      const Aval a = L.aval_of(v);
      const Aval part = a.unknown_rank ? a : a.with_shape(Shape(a.shape.begin(), a.shape.end() - 1));
      return L.op("Gather", {v, L.constant(std::vector<int64_t>{k}, {})}, part, {Attr::i("axis", -1)});
    };
    const std::string red = is_max ? "max" : "min";
    Value dre = take(data, 0), dim = take(data, 1), ure = take(upd, 0), uim = take(upd, 1);
    const Aval da = L.aval_of(dre), ua = L.aval_of(ure);
    Value re = scatter_nd(L, dre, full, ure, da, red);
    Value at = L.op("GatherND", {re, full}, ua);  // each update's position's winning real part
    Value none = scalar(L, pa.dtype, is_max ? -INFINITY : INFINITY);
    Value dcand = L.op("Where", {L.op("Equal", {dre, re}, da.with_dtype(dtype::boolean)), dim, none}, da);
    Value ucand = L.op("Where", {L.op("Equal", {ure, at}, ua.with_dtype(dtype::boolean)), uim, none}, ua);
    Value im = scatter_nd(L, dcand, full, ucand, da, red);
    Value axis = i64s(L, {-1});
    Shape one = da.shape;
    one.push_back(Dim(1));
    const Aval col = da.unknown_rank ? da : da.with_shape(one);
    return L.op("Concat", {L.op("Unsqueeze", {re, axis}, col), L.op("Unsqueeze", {im, axis}, col)}, pa,
                {Attr::i("axis", -1)});
  };
}

// The scatter `dn` of `upd` (aval `ua`) into `data` (aval `da`) at int64
// indices `idx` (shape `ishape`, index vector last), combining with ScatterND
// `reduction`. Data and updates already have a dtype the reduction accepts.
Value lower_scatter(Lowering& L, Value data, const Aval& da, Value idx, const Shape& ishape,
                    Value upd, const Aval& ua, const DimNumbers& dn, Mode mode,
                    const std::string& reduction, bool nan_fix, const Reduce& reduce = nullptr) {
  const int64_t R = da.rank(), Ur = ua.rank(), Ir = static_cast<int64_t>(ishape.size());
  const int64_t nb = Ir - 1;  // scatter (batch) dims of indices
  const auto& uwd = dn.update_window_dims;
  const auto& sdto = dn.scatter_dims_to_operand_dims;
  const int64_t K = static_cast<int64_t>(sdto.size());
  const int64_t nw = static_cast<int64_t>(uwd.size());
  if (R < 1) L.fail("scatter into a rank-0 operand is not supported");
  if (Ir < 1 || !(ishape.back() == Dim(K)))
    L.fail("scatter indices " + shape_str(ishape) + " must end in an index vector of size " +
           std::to_string(K));

  // Update dims: scatter dims (in order) then window dims; see header.
  std::vector<int64_t> perm;
  for (int64_t a = 0; a < Ur; ++a)
    if (!contains(uwd, a)) perm.push_back(a);
  if (static_cast<int64_t>(perm.size()) != nb) L.fail("scatter updates do not match the indices' batch dims");
  for (int64_t a : uwd) perm.push_back(a);
  upd = transpose(L, upd, ua, perm);
  Shape us;
  for (int64_t p : perm) us.push_back(ua.shape[static_cast<size_t>(p)]);

  // Operand window dims (in order, matched to update_window_dims) and window sizes.
  std::vector<int64_t> wdims;
  for (int64_t d = 0; d < R; ++d)
    if (!contains(dn.inserted_window_dims, d) && !contains(dn.operand_batching_dims, d)) wdims.push_back(d);
  if (static_cast<int64_t>(wdims.size()) != nw) L.fail("scatter update_window_dims do not match the operand");
  Shape wsize(static_cast<size_t>(R), Dim(1));
  for (int64_t w = 0; w < nw; ++w) wsize[static_cast<size_t>(wdims[w])] = us[static_cast<size_t>(nb + w)];

  // Bounds: start k is valid in [0, dim - window] of operand dim sdto[k].
  const Aval ia(dtype::i64, ishape);
  bool padded = false;
  int64_t d0 = -1;
  Aval pa = da;  // the (maybe padded) operand
  if (K > 0) {
    Shape dims, wins;
    for (int64_t d : sdto) {
      dims.push_back(da.shape[static_cast<size_t>(d)]);
      wins.push_back(wsize[static_cast<size_t>(d)]);
    }
    Value lim = dims_minus(L, dims, wins);
    Value clipped = L.op("Max", {L.op("Min", {idx, lim}, ia), scalar(L, dtype::i64, 0)}, ia);
    if (mode == Mode::kClip) {
      idx = clipped;
    } else {
      // A window is in range iff clamping left its start unchanged. Dropped
      // windows start at the padding slot of operand dim d0 (the lowest
      // scatter dim), past the real data.
      int64_t k0 = std::min_element(sdto.begin(), sdto.end()) - sdto.begin();
      d0 = sdto[static_cast<size_t>(k0)];
      Shape bshape(ishape.begin(), ishape.end() - 1);
      Shape vshape = bshape;
      vshape.push_back(Dim(1));
      Value valid = L.op("Equal", {clipped, idx}, ia.with_dtype(dtype::boolean));
      if (K > 1) {  // all over the index vector; ReduceMin has no bool kernel
        Value v = cast(L, valid, ia.with_dtype(dtype::boolean), dtype::i32);
        v = reduce_over(L, "ReduceMin", v, {nb}, true, Aval(dtype::i32, vshape));
        valid = cast(L, v, Aval(dtype::i32, vshape), dtype::boolean);
      }
      Shape redirect(static_cast<size_t>(K), Dim(0));
      redirect[static_cast<size_t>(k0)] = da.shape[static_cast<size_t>(d0)];
      idx = L.op("Where", {valid, clipped, shape_value(L, redirect)}, ia);
      Shape pads(static_cast<size_t>(2 * R), Dim(0));
      pads[static_cast<size_t>(R + d0)] = wsize[static_cast<size_t>(d0)];
      pa.shape[static_cast<size_t>(d0)] = dim_add(da.shape[static_cast<size_t>(d0)], wsize[static_cast<size_t>(d0)]);
      data = L.op("Pad", {data, shape_value(L, pads)}, pa, {Attr::s("mode", "constant")});
      padded = true;
    }
  }

  // Trailing window dims covering whole operand dims stay ScatterND slices.
  // Their starts are 0 after clamping / dropping. At least one operand dim
  // (and the padded one) stays indexed.
  int64_t m = 0;
  while (m < nw && m < R - 1 && (!padded || R - 1 - m > d0)) {
    int64_t d = R - 1 - m;
    if (wdims[static_cast<size_t>(nw - 1 - m)] != d) break;
    if (!(us[static_cast<size_t>(Ur - 1 - m)] == da.shape[static_cast<size_t>(d)])) break;
    ++m;
  }
  const int64_t Rl = R - m, nwl = nw - m;

  // Starts of the Rl leading operand dims: the index column that feeds each,
  // or a zero column (window and batching dims start at 0).
  std::vector<int64_t> col(static_cast<size_t>(Rl), K);
  for (int64_t k = 0; k < K; ++k)
    if (sdto[k] < Rl) col[static_cast<size_t>(sdto[k])] = k;
  bool identity = K == Rl;
  for (int64_t d = 0; d < Rl && identity; ++d) identity = col[static_cast<size_t>(d)] == d;
  Shape fshape(ishape.begin(), ishape.end() - 1);
  fshape.push_back(Dim(Rl));
  Value full = idx;
  if (!identity) {
    if (std::count(col.begin(), col.end(), K)) {
      std::vector<int64_t> pads(static_cast<size_t>(2 * Ir), 0);
      pads[static_cast<size_t>(2 * Ir - 1)] = 1;
      Shape zs(ishape.begin(), ishape.end() - 1);
      zs.push_back(Dim(K + 1));
      full = L.op("Pad", {full, i64s(L, pads)}, Aval(dtype::i64, zs), {Attr::s("mode", "constant")});
    }
    full = L.op("Gather", {full, i64s(L, col)}, Aval(dtype::i64, fshape), {Attr::i("axis", nb)});
  }
  if (nwl > 0) {
    std::vector<int64_t> axes;
    Shape s(fshape.begin(), fshape.end() - 1);
    for (int64_t w = 0; w < nwl; ++w) {
      axes.push_back(nb + w);
      s.push_back(Dim(1));
    }
    s.push_back(Dim(Rl));
    fshape = s;
    full = L.op("Unsqueeze", {full, i64s(L, axes)}, Aval(dtype::i64, fshape));
  }
  const int64_t frank = static_cast<int64_t>(fshape.size());

  // Adds iota(n) along axis `axis` of the index grid to component `d`.
  auto add_offset = [&](int64_t axis, int64_t d, const Dim& n) {
    if (n.is_static() && n.value == 1) return;
    Shape os(static_cast<size_t>(frank), Dim(1));
    os[static_cast<size_t>(axis)] = n;
    os.back() = Dim(Rl);
    Value off;
    if (n.is_static()) {
      std::vector<int64_t> v(static_cast<size_t>(n.value * Rl), 0);
      for (int64_t j = 0; j < n.value; ++j) v[static_cast<size_t>(j * Rl + d)] = j;
      std::vector<int64_t> dims;
      for (const Dim& x : os) dims.push_back(x.value);
      off = L.constant(v, dims);
    } else {
      Value len = L.op("Squeeze", {dim_value(L, n), i64s(L, {0})}, Aval(dtype::i64, {}));
      Value r = L.op("Range", {scalar(L, dtype::i64, 0), len, scalar(L, dtype::i64, 1)}, Aval(dtype::i64, {n}));
      std::vector<int64_t> axes;
      for (int64_t a = 0; a < frank; ++a)
        if (a != axis) axes.push_back(a);
      Shape rs(static_cast<size_t>(frank), Dim(1));
      rs[static_cast<size_t>(axis)] = n;
      r = L.op("Unsqueeze", {r, i64s(L, axes)}, Aval(dtype::i64, rs));
      std::vector<int64_t> onehot(static_cast<size_t>(Rl), 0);
      onehot[static_cast<size_t>(d)] = 1;
      off = L.op("Mul", {r, L.constant(onehot, {Rl})}, Aval(dtype::i64, os));
    }
    for (int64_t a = 0; a < frank; ++a)
      if (os[static_cast<size_t>(a)] != Dim(1)) fshape[static_cast<size_t>(a)] = os[static_cast<size_t>(a)];
    full = L.op("Add", {full, off}, Aval(dtype::i64, fshape));
  };
  for (int64_t w = 0; w < nwl; ++w) add_offset(nb + w, wdims[static_cast<size_t>(w)], us[static_cast<size_t>(nb + w)]);
  for (size_t j = 0; j < dn.operand_batching_dims.size(); ++j) {
    int64_t t = dn.scatter_indices_batching_dims[j];
    if (t >= nb) L.fail("scatter_indices_batching_dims must not name the index vector dim");
    add_offset(t, dn.operand_batching_dims[j], ishape[static_cast<size_t>(t)]);
  }

  Value res = reduce ? reduce(data, full, upd, pa) : scatter_nd(L, data, full, upd, pa, reduction);
  if (nan_fix) {
    // Every position that met a NaN (in the operand or any update) is NaN.
    Aval pb = pa.with_dtype(dtype::boolean), ub(dtype::boolean, us);
    Value dn8 = cast(L, L.op("IsNaN", {data}, pb), pb, dtype::u8);
    Value un8 = cast(L, L.op("IsNaN", {upd}, ub), ub, dtype::u8);
    Value hit = scatter_nd(L, dn8, full, un8, pa.with_dtype(dtype::u8), "max");
    hit = cast(L, hit, pa.with_dtype(dtype::u8), dtype::boolean);
    res = L.op("Where", {hit, scalar(L, pa.dtype, NAN), res}, pa);
  }
  if (padded) {
    res = L.op("Slice", {res, i64s(L, {0}), dim_value(L, da.shape[static_cast<size_t>(d0)]), i64s(L, {d0})},
               da.with_dtype(pa.dtype));
  }
  return res;
}

Mode mode_param(const Lowering& L) {
  if (!L.has_param("mode") || L.param("mode").is_none()) return Mode::kDrop;
  std::string s = L.param("mode").as_string();
  if (s == "CLIP") return Mode::kClip;
  if (s == "FILL_OR_DROP" || s == "PROMISE_IN_BOUNDS") return Mode::kDrop;
  L.fail("param 'mode' = " + s + " is not supported");
}

// The dtype a scatter with `reduction` computes in for `t` on onnxruntime:
// Pad has no int16/uint16/bfloat16 kernels (int32 keeps the wrapping sums and
// products modulo 2^16, and the order), ScatterND's reductions none for
// float16, min/max none for bool.
int32_t compute_dtype(int32_t t, const std::string& reduction) {
  if (t == dtype::i16 || t == dtype::u16) return dtype::i32;
  if (t == dtype::bf16) return dtype::f32;
  if (reduction == "none") return t;
  if (t == dtype::f16) return dtype::f32;
  if (t == dtype::boolean && (reduction == "min" || reduction == "max")) return dtype::u8;
  return t;
}

// A complex scatter (see the header); `idx` is int64 already.
Value complex_scatter(Lowering& L, const Aval& da, Value idx, const Shape& ishape, const Aval& ua,
                      const DimNumbers& dn, Mode mode, const std::string& reduction, bool negate) {
  if (reduction == "max" || reduction == "min") {
    // The packed form whole: its parts axis is one more (trailing) window dim.
    DimNumbers pdn = dn;
    pdn.update_window_dims.push_back(ua.rank());
    return lower_scatter(L, L.input(0), complex::packed(da), idx, ishape, L.input(2), complex::packed(ua), pdn,
                         mode, reduction, false, lexicographic(L, reduction == "max"));
  }
  const Aval pd = complex::part(da), pu = complex::part(ua);
  complex::Parts x = complex::split(L, L.input(0), da), u = complex::split(L, L.input(2), ua);
  if (reduction == "none" || reduction == "add") {
    if (negate) u = complex::neg(L, u, pu);
    return complex::pack(L, lower_scatter(L, x.re, pd, idx, ishape, u.re, pu, dn, mode, reduction, false),
                         lower_scatter(L, x.im, pd, idx, ishape, u.im, pu, dn, mode, reduction, false), da);
  }
  if (reduction != "mul") L.fail(std::string(L.primitive()) + " of complex operands is not lowered by lax_scatter");
  auto splat = [&](double v) {
    return L.op("Expand", {scalar(L, pd.dtype, v), shape_value(L, pd.shape)}, pd);
  };
  Value m = lower_scatter(L, splat(1), pd, idx, ishape, complex::abs(L, u, pu), pu, dn, mode, "mul", false);
  Value a = lower_scatter(L, splat(0), pd, idx, ishape, complex::atan2(L, u.im, u.re, pu), pu, dn, mode, "add",
                          false);
  complex::Parts q{L.op("Mul", {m, L.op("Cos", {a}, pd)}, pd), L.op("Mul", {m, L.op("Sin", {a}, pd)}, pd)};
  return complex::pack(L, complex::mul(L, x, q, pd), da);
}

// scatter family: operand, indices, updates.
void lower_scatter_prim(Lowering& L, const std::string& reduction, bool negate) {
  Param p = L.param("dimension_numbers");
  DimNumbers dn;
  dn.update_window_dims = p.field("update_window_dims").as_ints();
  dn.inserted_window_dims = p.field("inserted_window_dims").as_ints();
  dn.scatter_dims_to_operand_dims = p.field("scatter_dims_to_operand_dims").as_ints();
  if (p.has("operand_batching_dims")) {
    dn.operand_batching_dims = p.field("operand_batching_dims").as_ints();
    dn.scatter_indices_batching_dims = p.field("scatter_indices_batching_dims").as_ints();
  }
  Aval da = L.in_aval(0), ia = L.in_aval(1), ua = L.in_aval(2), out = L.out_aval(0);
  if (complex::is(da.dtype)) {
    Value idx = cast(L, L.input(1), ia, dtype::i64);
    L.bind(0, complex_scatter(L, da, idx, ia.shape, ua, dn, mode_param(L), reduction, negate));
    return;
  }
  Value data = L.input(0), idx = L.input(1), upd = L.input(2);
  int32_t ct = compute_dtype(da.dtype, reduction);
  data = cast(L, data, da, ct);
  upd = cast(L, upd, ua, ct);
  if (negate) {  // 0 - u wraps like JAX's integer subtraction
    upd = dtype::is_unsigned_int(ct) ? L.op("Sub", {scalar(L, ct, 0), upd}, ua.with_dtype(ct))
                                     : L.op("Neg", {upd}, ua.with_dtype(ct));
  }
  idx = cast(L, idx, ia, dtype::i64);
  bool nan_fix = dtype::is_float(da.dtype) && (reduction == "min" || reduction == "max");
  Value r = lower_scatter(L, data, da.with_dtype(ct), idx, ia.shape, upd, ua.with_dtype(ct), dn,
                          mode_param(L), reduction, nan_fix);
  L.bind(0, cast(L, r, out.with_dtype(ct), out.dtype));
}

// dynamic_update_slice(operand, update, *start_indices).
void lower_dynamic_update_slice(Lowering& L) {
  Aval da = L.in_aval(0), ua = L.in_aval(1);
  const int64_t R = da.rank();
  if (R == 0) {  // the update replaces the whole scalar
    L.bind(0, L.input(1));
    return;
  }
  std::vector<Value> starts;
  for (int64_t d = 0; d < R; ++d) {
    Aval sa = L.in_aval(static_cast<size_t>(2 + d));
    Value s = cast(L, L.input(static_cast<size_t>(2 + d)), sa, dtype::i64);
    starts.push_back(L.op("Unsqueeze", {s, i64s(L, {0})}, Aval(dtype::i64, {1})));
  }
  Value idx = starts.size() == 1 ? starts[0]
                                 : L.op("Concat", starts, Aval(dtype::i64, {R}), {Attr::i("axis", 0)});
  DimNumbers dn;
  for (int64_t d = 0; d < R; ++d) {
    dn.update_window_dims.push_back(d);
    dn.scatter_dims_to_operand_dims.push_back(d);
  }
  if (complex::is(da.dtype)) {  // part by part
    const Aval pd = complex::part(da), pu = complex::part(ua);
    complex::Parts x = complex::split(L, L.input(0), da), u = complex::split(L, L.input(1), ua);
    L.bind(0, complex::pack(L, lower_scatter(L, x.re, pd, idx, {Dim(R)}, u.re, pu, dn, Mode::kClip, "none", false),
                            lower_scatter(L, x.im, pd, idx, {Dim(R)}, u.im, pu, dn, Mode::kClip, "none", false),
                            da));
    return;
  }
  L.bind(0, lower_scatter(L, L.input(0), da, idx, {Dim(R)}, L.input(1), ua, dn, Mode::kClip, "none", false));
}

}  // namespace

JAXONNX_PLUGIN("lax_scatter", "0.1.0") {
  // Ops any scatter may emit: index arithmetic, bounds handling, the scatter.
#define JAXONNX_SCATTER_OPS                                                                        \
  "ScatterND", "Cast", "Transpose", "Min", "Max", "Equal", "ReduceMin", "Where", "Pad", "Slice", \
      "Loop", "GatherND", "Shape", "Reshape", "Concat", "Gather", "Unsqueeze", "Squeeze", "Range", "Mul", "Add", "Sub"
  // name, ScatterND reduction, negated updates, the op its NaN or negation adds
  struct Scatter { const char* name; const char* reduction; bool negate; const char* extra; };
  static const Scatter kScatters[] = {
      {"scatter", "none", false, nullptr},   {"scatter-add", "add", false, nullptr},
      {"scatter-sub", "add", true, "Neg"},   {"scatter-mul", "mul", false, nullptr},
      {"scatter-min", "min", false, "IsNaN"}, {"scatter-max", "max", false, "IsNaN"},
  };
  for (const Scatter& sc : kScatters) {
    const Scatter* p = &sc;
    auto ref = plugin.primitive(
        sc.name, [p](Lowering& L) { lower_scatter_prim(L, p->reduction, p->negate); });
    ref.emits({JAXONNX_SCATTER_OPS});
    if (sc.extra) ref.emits({sc.extra});
    ref.emits({"Concat", "Neg"});  // complex operands: split/pack
    if (sc.extra && std::string(sc.extra) == "IsNaN")  // complex: lexicographic
      ref.emits({"Gather", "GatherND", "Equal", "Where", "Unsqueeze", "Concat"});
    if (std::string(sc.reduction) == "mul")  // complex: polar form, abs, atan2, the product
      ref.emits({"Expand", "Abs", "Div", "Sqrt", "Or", "Less", "Greater", "Atan", "IsInf", "Cos", "Sin"});
    ref.emits_shape_ops().doc(onnx_doc("ScatterND"));
  }
  plugin.primitive("dynamic_update_slice", lower_dynamic_update_slice)
      .emits({JAXONNX_SCATTER_OPS, "Concat"})
      .emits_shape_ops()
      .doc(onnx_doc("ScatterND"));
#undef JAXONNX_SCATTER_OPS
}
