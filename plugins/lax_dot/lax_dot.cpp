// lax_dot: dot_general as one ONNX MatMul, never Einsum (onnxruntime's
// Einsum is slower than Transpose + MatMul: ~1.4-1.8x on attention shapes).
//
// dot_general(lhs, rhs, dimension_numbers=((lc, rc), (lb, rb))) contracts
// lhs axes lc with rhs axes rc, pairs batch axes lb with rb, and orders the
// output as: batch dims (in lb order), lhs free dims, rhs free dims (each in
// axis order). MatMul computes A[..., M, K] @ B[..., K, N] -> [..., M, N]
// (broadcasting leading dims; a rank-1 operand is a vector). So:
//   lhs -> Transpose (batch..., free..., contract...) -> Reshape (batch..., M, K)
//   rhs -> Transpose (batch..., contract..., free...) -> Reshape (batch..., K, N)
//   MatMul -> Reshape (batch..., lhs free..., rhs free...)
// where M, K, N are the merged free / contracted dims (1 when a side has none:
// then Unsqueeze / Squeeze instead of Reshape). Identity Transposes and no-op
// Reshapes emit nothing. Without batch dims, the lhs free dims stay unmerged
// as MatMul's broadcast dims (x[B, T, D] @ W[D, E] is one MatMul), and a
// vector lhs meets a stacked rhs the same way (v[K] @ W[..., K, N]).
// MatMul(rhs, lhs) plus one Transpose of the result is used instead when it
// needs fewer nodes (W[K, N] . x[B, T, K] -> [N, B, T]).
// Merged symbolic sizes go through the SDK's reshape idiom (0 / -1 codes, or
// runtime values with allowzero).
// Complex operands (carried packed, jaxonnx/complex.hpp) take four real
// products of the parts (lower_complex_dot). Nothing contracted: one Mul
// (outer).
#include <jaxonnx/complex.hpp>
#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cctype>
#include <string>

namespace {

using namespace jaxonnx::sdk;

using Axes = std::vector<int64_t>;

struct DimNumbers {
  Axes lhs_contract, rhs_contract, lhs_batch, rhs_batch;
};

DimNumbers dimension_numbers(Lowering& L) {
  Param dn = L.param("dimension_numbers");
  return DimNumbers{dn[0][0].as_ints(), dn[0][1].as_ints(), dn[1][0].as_ints(), dn[1][1].as_ints()};
}

bool contains(const Axes& axes, int64_t a) { return std::find(axes.begin(), axes.end(), a) != axes.end(); }

// The axes of a rank-`rank` operand that are neither contracted nor batch.
Axes free_axes(int64_t rank, const Axes& contract, const Axes& batch) {
  Axes out;
  for (int64_t a = 0; a < rank; ++a)
    if (!contains(contract, a) && !contains(batch, a)) out.push_back(a);
  return out;
}

Axes concat(std::initializer_list<Axes> parts) {
  Axes out;
  for (const Axes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// ------------------------------------------------------------------ dtypes --

// The element type to multiply and accumulate in. MatMul takes float types
// and 32/64-bit ints only: narrower ints (and bool) widen to 32 bits, which
// gives the same result modulo 2^bits as XLA's wrapping narrow arithmetic
// (and bool: any product => nonzero => true after the final Cast).
// preferred_element_type (the output dtype) asks for a wider accumulator, so
// inputs are cast up to it rather than the product cast afterwards.
int32_t matmul_dtype(int32_t t) {
  switch (t) {
    case dtype::i8: case dtype::i16: case dtype::boolean: return dtype::i32;
    case dtype::u8: case dtype::u16: return dtype::u32;
    default: return t;
  }
}

int32_t compute_dtype(int32_t in, int32_t out) {
  if (dtype::is_float(in) && !dtype::is_float(out)) return matmul_dtype(in);
  if (dtype::is_float(in) && dtype::itemsize(out) < dtype::itemsize(in)) return in;
  return matmul_dtype(out);
}

// ----------------------------------------------------------------- shapes --

bool is_identifier(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// The product of `dims` as one Dim: static when all are, else a symbolic
// expression ("5*B", "B*T") that L.dim_value can evaluate at runtime.
Dim product(const Shape& dims) {
  int64_t k = 1;
  std::vector<std::string> syms;
  for (const Dim& d : dims) {
    if (d.is_static()) k *= d.value;
    else syms.push_back(d.symbol);
  }
  if (syms.empty() || k == 0) return Dim(k);
  if (syms.size() == 1 && k == 1) return Dim::sym(syms[0]);
  std::string s = k == 1 ? "" : std::to_string(k);
  for (const std::string& sym : syms)
    s += (s.empty() ? "" : "*") + (is_identifier(sym) ? sym : "(" + sym + ")");
  return Dim::sym(s);
}

// `x` (of type `a`, updated) with each group of consecutive axes merged into
// one dim; an empty group is a new dim of 1. Only new dims: Unsqueeze.
Value regroup(Lowering& L, Value x, Aval& a, const std::vector<Axes>& groups) {
  Shape shape;
  Axes new_axes;
  bool merges = false;
  for (size_t i = 0; i < groups.size(); ++i) {
    Shape part;
    for (int64_t ax : groups[i]) part.push_back(a.shape.at(static_cast<size_t>(ax)));
    shape.push_back(product(part));
    if (groups[i].empty()) new_axes.push_back(static_cast<int64_t>(i));
    merges = merges || groups[i].size() > 1;
  }
  Aval out = a.with_shape(shape);
  if (merges) x = reshape(L, x, a, out);
  else if (!new_axes.empty()) x = L.op("Unsqueeze", {x, i64s(L, new_axes)}, out);
  a = out;
  return x;
}

// The MatMul result `y` (of type `a`; its dim i merges output axes
// groups[i], none for a dim of 1) in the output's shape `out`.
Value ungroup(Lowering& L, Value y, const Aval& a, const std::vector<Axes>& groups, const Aval& out) {
  Axes ones;
  bool merged = false;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i].empty()) ones.push_back(static_cast<int64_t>(i));
    merged = merged || groups[i].size() > 1;
  }
  if (merged) return reshape(L, y, a, out);
  if (!ones.empty()) return L.op("Squeeze", {y, i64s(L, ones)}, out);
  return y;
}

// ----------------------------------------------------------------- layout --

Axes iota(int64_t from, int64_t n) {
  Axes out;
  for (int64_t i = 0; i < n; ++i) out.push_back(from + i);
  return out;
}

bool is_identity(const Axes& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// MatMul(regroup(Transpose(lhs, lhs_perm), lhs_groups),
//        regroup(Transpose(rhs, rhs_perm), rhs_groups)), whose dim i holds
// the output axes out_groups[i]. A swapped plan multiplies rhs by lhs (its
// lhs_* fields describe JAX's rhs) and Transposes the result by out_perm.
struct Plan {
  Axes lhs_perm, rhs_perm, out_perm;
  std::vector<Axes> lhs_groups, rhs_groups, out_groups;
  bool swapped = false;

  // Nodes besides the MatMul; a Transpose copies data, a Reshape does not.
  int cost() const {
    auto reshapes = [](const std::vector<Axes>& groups) {
      return std::any_of(groups.begin(), groups.end(), [](const Axes& g) { return g.size() != 1; });
    };
    return 2 * (!is_identity(lhs_perm) + !is_identity(rhs_perm) + !is_identity(out_perm)) +
           reshapes(lhs_groups) + reshapes(rhs_groups) + reshapes(out_groups);
  }
};

Plan plan_matmul(const DimNumbers& dn, int64_t lrank, int64_t rrank) {
  const Axes lfree = free_axes(lrank, dn.lhs_contract, dn.lhs_batch);
  const Axes rfree = free_axes(rrank, dn.rhs_contract, dn.rhs_batch);
  const auto nb = static_cast<int64_t>(dn.lhs_batch.size()), nc = static_cast<int64_t>(dn.lhs_contract.size());
  const auto nlf = static_cast<int64_t>(lfree.size()), nrf = static_cast<int64_t>(rfree.size());
  Plan p;
  p.lhs_perm = concat({dn.lhs_batch, lfree, dn.lhs_contract});
  p.rhs_perm = concat({dn.rhs_batch, dn.rhs_contract, rfree});
  for (int64_t b = 0; b < nb; ++b) {
    p.lhs_groups.push_back({b});
    p.rhs_groups.push_back({b});
    p.out_groups.push_back({b});
  }
  if (nb == 0 && nlf == 0 && nc <= 1 && nrf >= 2) {
    // v[K] @ W[..., K, N] -> [..., N]: the rhs free dims but the last ride
    // along as MatMul's broadcast dims; the last free rhs dim must stay last.
    // A scalar lhs is v[1] against a new K = 1 axis.
    p.rhs_perm = concat({Axes(rfree.begin(), rfree.end() - 1), dn.rhs_contract, {rfree.back()}});
    p.lhs_groups = {iota(0, nc)};
    for (int64_t a = 0; a < nrf - 1; ++a) p.rhs_groups.push_back({a});
    p.rhs_groups.push_back(iota(nrf - 1, nc));
    p.rhs_groups.push_back({nrf - 1 + nc});
    for (int64_t a = 0; a < nrf; ++a) p.out_groups.push_back({a});
    return p;
  }
  if (nb == 0) {
    // x[..., K] @ W[K, N] -> [..., N]: the lhs free dims ride along as
    // MatMul's broadcast dims, unmerged (a lhs without any is a vector).
    for (int64_t a = 0; a < nlf; ++a) {
      p.lhs_groups.push_back({a});
      p.out_groups.push_back({a});
    }
  } else {
    p.lhs_groups.push_back(iota(nb, nlf));  // M (a new 1 when empty)
    p.out_groups.push_back(iota(nb, nlf));
  }
  p.lhs_groups.push_back(iota(nb + nlf, nc));  // K
  p.rhs_groups.push_back(iota(nb, nc));        // K
  if (nb > 0 || nrf > 0) {                     // N; without batch, no free rhs dims is a vector
    p.rhs_groups.push_back(iota(nb + nc, nrf));
    p.out_groups.push_back(iota(nb + nlf, nrf));
  }
  return p;
}

// The contracted pairs may be listed in any order (each side's merged K
// then follows it), and MatMul(rhs, lhs) gives the output with its lhs and
// rhs free dims swapped (one Transpose back): take the cheapest plan, e.g.
// W[K, N] . x[B, T, K] -> [N, B, T] is x @ W then one Transpose.
Plan best_plan(const DimNumbers& dn, int64_t lrank, int64_t rrank) {
  Plan best;
  bool first = true;
  for (bool swap : {false, true}) {
    for (int order_by : {0, 1, 2}) {  // as listed, by lhs axis, by rhs axis
      DimNumbers d = dn;
      std::vector<size_t> order(dn.lhs_contract.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      if (order_by) {
        const Axes& key = order_by == 1 ? dn.lhs_contract : dn.rhs_contract;
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key[a] < key[b]; });
      }
      for (size_t i = 0; i < order.size(); ++i) {
        d.lhs_contract[i] = dn.lhs_contract[order[i]];
        d.rhs_contract[i] = dn.rhs_contract[order[i]];
      }
      if (swap) {
        std::swap(d.lhs_contract, d.rhs_contract);
        std::swap(d.lhs_batch, d.rhs_batch);
      }
      Plan p = swap ? plan_matmul(d, rrank, lrank) : plan_matmul(d, lrank, rrank);
      const auto nb = static_cast<int64_t>(dn.lhs_batch.size());
      const auto nlf = lrank - nb - static_cast<int64_t>(dn.lhs_contract.size());
      const auto nrf = rrank - nb - static_cast<int64_t>(dn.rhs_contract.size());
      p.swapped = swap;
      // The swapped result is (batch, rhs free, lhs free).
      p.out_perm = swap ? concat({iota(0, nb), iota(nb + nrf, nlf), iota(nb, nrf)}) : iota(0, nb + nlf + nrf);
      // On a tie, Transpose the result rather than the operands: jnp.einsum
      // follows dot_general with a Transpose, which the optimizer merges.
      const int ops = !is_identity(p.lhs_perm) + !is_identity(p.rhs_perm);
      const int best_ops = !is_identity(best.lhs_perm) + !is_identity(best.rhs_perm);
      if (first || p.cost() < best.cost() || (p.cost() == best.cost() && ops < best_ops)) best = p;
      first = false;
    }
  }
  return best;
}

// ------------------------------------------------------------- dot_general --

// Nothing contracted (jnp.einsum's path multiplies a mask into a product so:
// "bhcls,bhcls->bhcls" with every axis a batch axis): an elementwise Mul,
// each side transposed to (batch, lhs free, rhs free) order with 1s for the
// other side's free axes. MatMul would compute it with K = 1 (a (1, 1)
// matrix product per element), several times slower. Exact: one product.
Value outer(Lowering& L, const DimNumbers& dn, Value lhs, const Aval& la, Value rhs, const Aval& ra,
            const Aval& result, const Aval& out) {
  const Axes lfree = free_axes(la.rank(), dn.lhs_contract, dn.lhs_batch);
  const Axes rfree = free_axes(ra.rank(), dn.rhs_contract, dn.rhs_batch);
  const int64_t nb = static_cast<int64_t>(dn.lhs_batch.size());
  const int64_t nl = static_cast<int64_t>(lfree.size()), nr = static_cast<int64_t>(rfree.size());
  auto side = [&](Value v, const Aval& a, const Axes& perm, int64_t ones_at, int64_t ones) {
    Shape s;
    for (int64_t ax : perm) s.push_back(a.shape.at(static_cast<size_t>(ax)));
    v = transpose(L, v, a, perm);
    if (ones == 0 || ones_at == 0) return v;  // leading 1s: Mul broadcasts them
    s.insert(s.begin() + ones_at, static_cast<size_t>(ones), Dim(1));
    return L.op("Unsqueeze", {v, i64s(L, iota(ones_at, ones))}, a.with_shape(s));
  };
  Value a = side(lhs, la, concat({dn.lhs_batch, lfree}), nb + nl, nr);
  Value b = side(rhs, ra, concat({dn.rhs_batch, rfree}), nb, nl);
  Value y = L.op("Mul", {a, b}, result);
  if (result.dtype != out.dtype) y = L.op("Cast", {y}, out, {Attr::i("to", out.dtype)});
  return y;
}

// The real dot_general of `lhs` (aval la) and `rhs` (aval ra) giving `out`.
Value dot_real(Lowering& L, const DimNumbers& dn, Value lhs, Aval la, Value rhs, Aval ra, const Aval& out) {
  // Cast the operands to the accumulation type.
  int32_t acc = compute_dtype(la.dtype, out.dtype);
  lhs = cast(L, lhs, la, acc);
  la = la.with_dtype(acc);
  rhs = cast(L, rhs, ra, acc);
  ra = ra.with_dtype(acc);
  Aval result = out.with_dtype(acc);

  if (dn.lhs_contract.empty()) return outer(L, dn, lhs, la, rhs, ra, result, out);
  const Plan p = best_plan(dn, la.rank(), ra.rank());
  if (p.swapped) {
    std::swap(lhs, rhs);
    std::swap(la, ra);
  }
  auto prepare = [&](Value v, Aval a, const Axes& perm, const std::vector<Axes>& groups) {
    Shape s;
    for (int64_t ax : perm) s.push_back(a.shape.at(static_cast<size_t>(ax)));
    v = transpose(L, v, a, perm);
    a = a.with_shape(s);
    return regroup(L, v, a, groups);
  };
  Value a = prepare(lhs, la, p.lhs_perm, p.lhs_groups);
  Value b = prepare(rhs, ra, p.rhs_perm, p.rhs_groups);
  // The output as the MatMul operands order it (JAX's when not swapped).
  Shape oshape(p.out_perm.size());
  for (size_t j = 0; j < p.out_perm.size(); ++j)
    oshape[static_cast<size_t>(p.out_perm[j])] = out.shape[j];
  const Aval ordered = result.with_shape(oshape);
  // MatMul's result: the broadcast leading dims, then M (unless the lhs is
  // a vector), then N (unless the rhs is a vector).
  Shape mshape;
  for (const Axes& g : p.out_groups) {
    Shape part;
    for (int64_t ax : g) part.push_back(oshape.at(static_cast<size_t>(ax)));
    mshape.push_back(product(part));
  }
  Aval mm = result.with_shape(mshape);
  Value y = L.op("MatMul", {a, b}, mm);
  y = ungroup(L, y, mm, p.out_groups, ordered);
  y = transpose(L, y, ordered, p.out_perm);
  if (acc != out.dtype) y = L.op("Cast", {y}, out, {Attr::i("to", out.dtype)});
  return y;
}

// A complex product from the parts (jaxonnx/complex.hpp): (a + bi)(c + di)
// = (ac - bd) + (ad + bc)i, four real dot_generals (two when one side is
// real). The three-product (Gauss) form would save one MatMul but loses
// accuracy to cancellation.
void lower_complex_dot(Lowering& L, const DimNumbers& dn, const Aval& la, const Aval& ra, const Aval& out) {
  Aval pl = complex::part(la), pr = complex::part(ra), po = complex::part(out);
  if (!complex::is(out.dtype)) L.fail("dot_general of complex operands with a real result type");
  auto parts = [&](size_t i, const Aval& a) {
    if (complex::is(a.dtype)) return complex::split(L, L.input(i), a);
    return complex::Parts{L.input(i), kNoValue};
  };
  complex::Parts x = parts(0, la), y = parts(1, ra);
  auto dot = [&](Value a, Value b) { return dot_real(L, dn, a, pl, b, pr, po); };
  Value re = dot(x.re, y.re), im = kNoValue;
  if (x.im != kNoValue && y.im != kNoValue) {
    re = L.op("Sub", {re, dot(x.im, y.im)}, po);
    im = L.op("Add", {dot(x.re, y.im), dot(x.im, y.re)}, po);
  } else {
    im = x.im != kNoValue ? dot(x.im, y.re) : dot(x.re, y.im);
  }
  L.bind(0, complex::pack(L, re, im, out));
}

void lower_dot_general(Lowering& L) {
  DimNumbers dn = dimension_numbers(L);
  Aval la = L.in_aval(0), ra = L.in_aval(1), out = L.out_aval(0);
  if (dn.lhs_contract.size() != dn.rhs_contract.size() || dn.lhs_batch.size() != dn.rhs_batch.size())
    L.fail("dot_general: mismatched dimension numbers");
  if (complex::is(la.dtype) || complex::is(ra.dtype) || complex::is(out.dtype))
    return lower_complex_dot(L, dn, la, ra, out);
  L.bind(0, dot_real(L, dn, L.input(0), la, L.input(1), ra, out));
}

}  // namespace

JAXONNX_PLUGIN("lax_dot", "0.1.0") {
  plugin.primitive("dot_general", lower_dot_general)
      .emits({"MatMul", "Transpose", "Reshape", "Unsqueeze", "Squeeze", "Cast", "Concat", "Shape", "Mul",
              "Gather", "Sub", "Add"})
      .doc(onnx_doc("MatMul"))
      .summary("one MatMul; Transpose/Reshape (or Unsqueeze/Squeeze) around it only where needed; "
               "a product contracting nothing: one Mul");
}
