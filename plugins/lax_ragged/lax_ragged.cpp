// lax_ragged: ragged_dot_general (jax.lax.ragged_dot / ragged_dot_general,
// the grouped matmul of mixture-of-experts layers).
//
// The lowering is JAX's own reference (_ragged_dot_general_impl, what XLA
// runs on CPU): the ragged operand is expanded to a dense [g, ...] tensor in
// which group i keeps only its rows (start_i <= index < end_i along the
// ragged dim, the bounds the cumsum of group_sizes) and is zero elsewhere,
// then one Einsum contracts it:
// - ragged non-contracting dim (the MoE case, lhs [m, k], rhs [g, k, n]):
//   the group axis is contracted with rhs's group dim; rows outside every
//   group come out 0;
// - ragged contracting dim: lhs and rhs are both expanded and the group axis
//   becomes a leading batch dim of the result ([g, ...]);
// - ragged batch dim: a plain dot_general (group_sizes unused), as in JAX.
// The masked-out terms add exact zeros, so results differ from JAX's only by
// summation order. lax.ragged_dot's own layout is one batched MatMul and a
// ReduceSum over the groups (onnxruntime's MatMul is faster than its Einsum);
// other dimension numbers are one Einsum node. Every dim, the ragged one and the batch
// included, may be symbolic (group_sizes' group count is static, as JAX
// requires). group_sizes of shape [g] or [prefix..., g] (JAX's broadcast
// rule). group_offset is refused, as JAX itself does not implement it.
#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

using Axes = std::vector<int64_t>;

bool contains(const Axes& axes, int64_t a) { return std::find(axes.begin(), axes.end(), a) != axes.end(); }

int64_t index_of(const Axes& axes, int64_t a) {
  return static_cast<int64_t>(std::find(axes.begin(), axes.end(), a) - axes.begin());
}

// JAX's _ragged_dot_prefix_dims: the operand axes group_sizes is indexed by
// before its group axis (batch dims, then the dims of the ragged kind outer
// to the ragged one).
Axes prefix_dims(int64_t rank, int64_t ragged, const Axes& batch, const Axes& contract, int mode) {
  Axes out;
  if (mode == 3) {
    out.assign(batch.begin(), batch.begin() + index_of(batch, ragged));
    return out;
  }
  out = batch;
  Axes kind;
  if (mode == 2) kind = contract;
  else
    for (int64_t a = 0; a < rank; ++a)
      if (!contains(batch, a) && !contains(contract, a)) kind.push_back(a);
  for (int64_t a : kind) {
    if (a == ragged) break;
    out.push_back(a);
  }
  return out;
}

// x [x...] expanded to [g, x...]: group i keeps the entries whose index
// along `ragged` lies in [start_i, end_i) of its prefix row of group_sizes.
Value expand(Lowering& L, Value x, const Aval& xa, int64_t ragged, Axes prefix, Value gs, const Aval& gsa) {
  int64_t r = xa.rank();
  int64_t g = gsa.shape.back().value;
  Aval gi = gsa.with_dtype(dtype::i64);
  if (gsa.rank() == 1) prefix.clear();  // [g]: the same groups for every prefix row
  Value gs64 = cast(L, gs, gsa, dtype::i64);
  int64_t last = gsa.rank() - 1;
  Value ends = L.op("CumSum", {gs64, scalar(L, dtype::i64, double(last))}, gi);
  Value starts = L.op("Sub", {ends, gs64}, gi);
  // [P..., g] -> [g, P...] with P in x's axis order, then unit dims for the rest of x.
  Axes order(prefix.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return prefix[a] < prefix[b]; });
  Axes perm{last};
  for (int64_t o : order) perm.push_back(o);
  Shape bounds_shape{Dim(g)};
  for (int64_t o : order) bounds_shape.push_back(gsa.shape[static_cast<size_t>(o)]);
  Axes unsq;
  Shape full{Dim(g)};
  for (int64_t a = 0; a < r; ++a) {
    if (contains(prefix, a)) full.push_back(xa.shape[static_cast<size_t>(a)]);
    else { full.push_back(Dim(1)); unsq.push_back(a + 1); }
  }
  auto place = [&](Value v) {
    Value t = transpose(L, v, gi, perm);
    if (unsq.empty()) return t;
    return L.op("Unsqueeze", {t, i64s(L, unsq)}, Aval(dtype::i64, full));
  };
  Value lo = place(starts), hi = place(ends);
  // The index along the ragged dim, as [1, 1.., n, ..1].
  const Dim& n = xa.shape[static_cast<size_t>(ragged)];
  Value n0 = L.op("Squeeze", {dim_value(L, n), i64s(L, {0})}, Aval(dtype::i64, {}));
  Value iota = L.op("Range", {scalar(L, dtype::i64, 0), n0, scalar(L, dtype::i64, 1)}, Aval(dtype::i64, {n}));
  Shape ishape(static_cast<size_t>(r + 1), Dim(1));
  ishape[static_cast<size_t>(ragged + 1)] = n;
  Axes iaxes;
  for (int64_t a = 0; a <= r; ++a)
    if (a != ragged + 1) iaxes.push_back(a);
  iota = L.op("Unsqueeze", {iota, i64s(L, iaxes)}, Aval(dtype::i64, ishape));
  Shape mshape = full;
  mshape[static_cast<size_t>(ragged + 1)] = n;
  Aval ma(dtype::boolean, mshape);
  Value mask = L.op("And", {L.op("LessOrEqual", {lo, iota}, ma), L.op("Less", {iota, hi}, ma)}, ma);
  Shape xs{Dim(1)};
  xs.insert(xs.end(), xa.shape.begin(), xa.shape.end());
  Value x1 = L.op("Unsqueeze", {x, i64s(L, {0})}, xa.with_shape(xs));
  Shape es{Dim(g)};
  es.insert(es.end(), xa.shape.begin(), xa.shape.end());
  return where(L, mask, x1, scalar(L, xa.dtype, 0.0), xa.with_shape(es));
}

// The dtype Einsum multiplies and accumulates in (onnxruntime's CPU Einsum
// takes float, double, int32 and int64): the output dtype widened to one of those.
int32_t compute_dtype(Lowering& L, int32_t out) {
  switch (out) {
    case dtype::f32: case dtype::f64: case dtype::i32: case dtype::i64: return out;
    case dtype::f16: case dtype::bf16: return dtype::f32;
    case dtype::i8: case dtype::i16: case dtype::u8: case dtype::u16: case dtype::boolean: return dtype::i32;
    case dtype::u32: case dtype::u64: return dtype::i64;  // wraps to the same low bits
    default: L.fail(std::string("ragged_dot_general: result dtype ") + dtype::name(out) + " is not supported");
  }
}

void lower_ragged_dot_general(Lowering& L) {
  Aval la = L.in_aval(0), ra = L.in_aval(1), gsa = L.in_aval(2);
  Aval out = L.out_aval(0);
  if (L.has_param("group_offset") && !L.param("group_offset").is_none())
    L.fail("ragged_dot_general: group_offset is not supported (JAX itself raises NotImplementedError for it)");
  if (!dtype::is_int(gsa.dtype) || gsa.rank() < 1 || !gsa.shape.back().is_static())
    L.fail("ragged_dot_general: group_sizes " + gsa.str() + " must be integers with a static group count");
  Param rdn = L.param("ragged_dot_dimension_numbers");
  Param dn = rdn.field("dot_dimension_numbers");
  Axes lc = dn[0][0].as_ints(), rc = dn[0][1].as_ints(), lb = dn[1][0].as_ints(), rb = dn[1][1].as_ints();
  Axes lragged = rdn.field("lhs_ragged_dimensions").as_ints();
  Axes rgroup = rdn.field("rhs_group_dimensions").as_ints();
  if (lragged.size() != 1) L.fail("ragged_dot_general: expected exactly one lhs ragged dimension");
  int64_t rd = lragged[0];
  int mode = contains(lb, rd) ? 3 : contains(lc, rd) ? 2 : 1;
  if (mode == 1 && rgroup.size() != 1) L.fail("ragged_dot_general: expected one rhs group dimension");
  int64_t nl = la.rank(), nr = ra.rank();
  if (nl + nr + 1 > 52) L.fail("ragged_dot_general: operands of rank " + std::to_string(nl) + " and " +
                               std::to_string(nr) + " need more than 52 einsum labels");
  // Labels: 'a'.. for lhs axes; rhs batch / contracting axes reuse their lhs
  // partner's; the group axis is the next free one.
  auto label = [](int64_t i) { return static_cast<char>(i < 26 ? 'a' + i : 'A' + (i - 26)); };
  std::string ls, rs(static_cast<size_t>(nr), '?');
  for (int64_t i = 0; i < nl; ++i) ls += label(i);
  int64_t next = nl;
  for (size_t i = 0; i < lc.size(); ++i) rs[static_cast<size_t>(rc[i])] = ls[static_cast<size_t>(lc[i])];
  for (size_t i = 0; i < lb.size(); ++i) rs[static_cast<size_t>(rb[i])] = ls[static_cast<size_t>(lb[i])];
  char G = label(next++);
  if (mode == 1) rs[static_cast<size_t>(rgroup[0])] = G;
  for (char& c : rs)
    if (c == '?') c = label(next++);
  std::string os;
  if (mode == 2) os += G;
  for (int64_t a : lb) os += ls[static_cast<size_t>(a)];
  for (int64_t a = 0; a < nl; ++a)
    if (!contains(lb, a) && !contains(lc, a)) os += ls[static_cast<size_t>(a)];
  for (int64_t a = 0; a < nr; ++a)
    if (!contains(rb, a) && !contains(rc, a) && !(mode == 1 && a == rgroup[0])) os += rs[static_cast<size_t>(a)];

  int32_t ct = compute_dtype(L, out.dtype);
  Value lhs = cast(L, L.input(0), la, ct), rhs = cast(L, L.input(1), ra, ct);
  la = la.with_dtype(ct);
  ra = ra.with_dtype(ct);
  Value gs = L.input(2);
  if (mode != 3) {
    lhs = expand(L, lhs, la, rd, prefix_dims(nl, rd, lb, lc, mode), gs, gsa);
    ls = std::string(1, G) + ls;
  }
  if (mode == 2) {
    int64_t rrd = rc[static_cast<size_t>(index_of(lc, rd))];
    rhs = expand(L, rhs, ra, rrd, prefix_dims(nr, rrd, rb, rc, mode), gs, gsa);
    rs = std::string(1, G) + rs;
  }
  Value res;
  bool basic = mode == 1 && nl == 2 && nr == 3 && lc == Axes{1} && rc == Axes{1} && lb.empty() && rb.empty() &&
               rd == 0 && rgroup == Axes{0};
  if (basic) {  // lax.ragged_dot: [g, m, k] @ [g, k, n], summed over g (one term per row is nonzero)
    Shape gs{gsa.shape.back(), out.shape[0], out.shape[1]};
    Value per_group = L.op("MatMul", {lhs, rhs}, out.with_dtype(ct).with_shape(gs));
    res = L.op("ReduceSum", {per_group, i64s(L, {0})}, out.with_dtype(ct), {Attr::i("keepdims", 0)});
  } else {
    res = L.op("Einsum", {lhs, rhs}, out.with_dtype(ct), {Attr::s("equation", ls + "," + rs + "->" + os)});
  }
  L.bind(0, cast(L, res, out.with_dtype(ct), out.dtype));
}

}  // namespace

JAXONNX_PLUGIN("lax_ragged", "0.1.0") {
  plugin.primitive("ragged_dot_general", lower_ragged_dot_general)
      .emits({"Cast", "CumSum", "Sub", "Transpose", "Unsqueeze", "Squeeze", "Range", "LessOrEqual", "Less", "And",
              "Where", "Einsum", "MatMul", "ReduceSum"})
      .emits_shape_ops()
      .doc(onnx_doc("Einsum"))
      .summary("group masks from cumsum(group_sizes) expand the ragged operand to [g, ...]; MatMul + ReduceSum (or an Einsum) contracts it");
}
