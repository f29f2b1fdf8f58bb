// lax_dot: dot_general as ONNX MatMul when the layout allows it, else Einsum.
//
// dot_general(lhs, rhs, dimension_numbers=((lc, rc), (lb, rb))) contracts
// lhs axes lc with rhs axes rc, pairs batch axes lb with rb, and orders the
// output as: batch dims (in lb order), lhs free dims, rhs free dims (each in
// axis order). MatMul computes A[..., M, K] @ B[..., K, N] -> [..., M, N]
// (broadcasting leading dims, and a rank-1 operand is a vector), so one
// contracted axis plus a layout that a Transpose per operand can reach maps
// onto it; anything else gets an Einsum equation built from the numbers.
#include <jaxonnx/plugin.hpp>

#include <algorithm>
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

// ----------------------------------------------------------------- layout --

// A plan to emit MatMul(Transpose(lhs, lhs_perm), Transpose(rhs, rhs_perm)),
// whose output order is already JAX's.
struct MatMulPlan {
  Axes lhs_perm, rhs_perm;
};

// Finds a MatMul layout for exactly one contracted axis, or returns false.
bool plan_matmul(const DimNumbers& dn, int64_t lrank, int64_t rrank, MatMulPlan* plan) {
  if (dn.lhs_contract.size() != 1) return false;
  const int64_t lc = dn.lhs_contract[0], rc = dn.rhs_contract[0];
  const size_t nb = dn.lhs_batch.size();
  Axes lfree = free_axes(lrank, dn.lhs_contract, dn.lhs_batch);
  Axes rfree = free_axes(rrank, dn.rhs_contract, dn.rhs_batch);

  if (nb == 0) {
    if (rrank <= 2) {
      // x[..., K] @ W[K, N] -> [..., N] (or W[K] -> [...]): free lhs dims ride
      // along as MatMul's broadcast batch dims, in order.
      plan->lhs_perm = concat({lfree, {lc}});
      plan->rhs_perm = concat({{rc}, rfree});
      return true;
    }
    if (lrank == 1) {
      // v[K] @ B[..., K, N] -> [..., N]: the last free rhs dim must stay last.
      Axes lead(rfree.begin(), rfree.end() - 1);
      plan->lhs_perm = {lc};
      plan->rhs_perm = concat({lead, {rc}, {rfree.back()}});
      return true;
    }
    return false;  // several free dims on both sides: not a MatMul shape
  }
  // Batched: A[b..., M, K] @ B[b..., K, N] needs exactly one free dim each.
  if (lfree.size() != 1 || rfree.size() != 1) return false;
  plan->lhs_perm = concat({dn.lhs_batch, lfree, {lc}});
  plan->rhs_perm = concat({dn.rhs_batch, {rc}, rfree});
  return true;
}

// An Einsum equation such as "bij,bjk->bik" for the dimension numbers.
std::string einsum_equation(const DimNumbers& dn, int64_t lrank, int64_t rrank) {
  if (lrank + rrank - static_cast<int64_t>(dn.lhs_contract.size() + dn.lhs_batch.size()) > 52)
    throw Error("dot_general needs more than 52 Einsum labels");
  auto label = [](int64_t i) { return static_cast<char>(i < 26 ? 'a' + i : 'A' + (i - 26)); };
  std::string lhs(static_cast<size_t>(lrank), '?'), rhs(static_cast<size_t>(rrank), '?'), out;
  int64_t next = 0;
  for (size_t i = 0; i < dn.lhs_batch.size(); ++i) {
    char c = label(next++);
    lhs[static_cast<size_t>(dn.lhs_batch[i])] = rhs[static_cast<size_t>(dn.rhs_batch[i])] = c;
    out += c;
  }
  for (size_t i = 0; i < dn.lhs_contract.size(); ++i) {
    char c = label(next++);
    lhs[static_cast<size_t>(dn.lhs_contract[i])] = rhs[static_cast<size_t>(dn.rhs_contract[i])] = c;
  }
  for (char& c : lhs)
    if (c == '?') out += (c = label(next++));
  for (char& c : rhs)
    if (c == '?') out += (c = label(next++));
  return lhs + "," + rhs + "->" + out;
}

// ------------------------------------------------------------- dot_general --

void lower_dot_general(Lowering& L) {
  DimNumbers dn = dimension_numbers(L);
  Aval la = L.in_aval(0), ra = L.in_aval(1), out = L.out_aval(0);
  if (dn.lhs_contract.size() != dn.rhs_contract.size() || dn.lhs_batch.size() != dn.rhs_batch.size())
    L.fail("dot_general: mismatched dimension numbers");

  // Cast the operands to the accumulation type.
  int32_t acc = compute_dtype(la.dtype, out.dtype);
  auto operand = [&](size_t i, Aval& a) {
    Value v = L.input(i);
    if (a.dtype != acc) {
      v = L.op("Cast", {v}, a.with_dtype(acc), {Attr::i("to", acc)});
      a = a.with_dtype(acc);
    }
    return v;
  };
  Value lhs = operand(0, la), rhs = operand(1, ra);
  Aval result = out.with_dtype(acc);

  MatMulPlan plan;
  Value y;
  if (plan_matmul(dn, la.rank(), ra.rank(), &plan)) {
    y = L.op("MatMul", {L.transpose(lhs, la, plan.lhs_perm), L.transpose(rhs, ra, plan.rhs_perm)}, result);
  } else {
    y = L.op("Einsum", {lhs, rhs}, result,
             {Attr::s("equation", einsum_equation(dn, la.rank(), ra.rank()))});
  }
  if (acc != out.dtype) y = L.op("Cast", {y}, out, {Attr::i("to", out.dtype)});
  L.bind(0, y);
}

}  // namespace

JAXONNX_PLUGIN("lax_dot", "0.1.0") {
  plugin.primitive("dot_general", lower_dot_general)
      .emits({"MatMul", "Transpose", "Einsum", "Cast"})
      .doc(onnx_doc("MatMul"))
      .summary("MatMul with at most one Transpose per operand, else Einsum");
}
