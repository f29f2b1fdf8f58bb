// lax_eig: JAX's `eig` (jnp.linalg.eig / eigvals) and `schur`
// (jax.scipy.linalg.schur) of real float32/float64 matrices, as LAPACK's
// geev and gees compute them on CPU, which is what JAX calls: the same
// eigenvalue order (the diagonal of the real Schur form as dlahqr converges,
// the positive imaginary part of a pair first) and geev's eigenvector
// normalization (unit 2-norm, largest component real), left and right.
// schur.cpp holds the Schur form (dgebal, dgehd2, dlahqr), eigvec.cpp the
// eigenvalues and eigenvectors (dtrevc3, dgebak, geev's normalization),
// lapack.hpp what they share, expr.hpp the expression layer they are
// written in.
//
// Batch dims, symbolic ones included, run as an outer ONNX Loop over the
// flattened batch (its per-matrix results are the Loop's scan outputs): the
// algorithm's control flow (where a block deflates, how many sweeps) differs
// from matrix to matrix, and the per-matrix kernel reads scalars (the active
// window, the shift) that a broadcast formulation would need per batch
// element. The matrix dims must be static.
//
// When dlahqr runs out of iterations (LAPACK's info > 0; JAX then gives NaN)
// every output of that matrix is NaN.
//
// A complex matrix's eig runs the same path on its real embedding
// (complex_eig.cpp). Not lowered (a ConversionError says so): schur of a
// complex matrix, schur with sort_eig_vals.
#include "lapack.hpp"

#include <jaxonnx/complex.hpp>
#include <jaxonnx/empty_result.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;
using namespace lax_eig;

int64_t require_square(Lowering& L, const Aval& a, bool complex_ok) {
  if (complex::is(a.dtype) && !complex_ok)
    L.fail(std::string(L.primitive()) + " of a complex matrix (" + a.str() +
           ") is not supported; only float32 and float64 matrices are lowered");
  int32_t pdt = complex::part_dtype(a.dtype);
  if (pdt != dtype::f32 && pdt != dtype::f64)
    L.fail(std::string(L.primitive()) + ": operand dtype " + dtype::name(a.dtype) + " is not supported");
  if (a.rank() < 2) L.fail(std::string(L.primitive()) + ": operand " + a.str() + " is not a matrix");
  const Dim& m = a.shape[a.shape.size() - 2];
  const Dim& n = a.shape.back();
  if (!m.is_static() || !n.is_static())
    L.fail(std::string(L.primitive()) + ": the matrix dims of " + a.str() +
           " must be static; only the batch dims may be symbolic");
  if (m.value != n.value) L.fail(std::string(L.primitive()) + ": operand " + a.str() + " is not square");
  return n.value;
}

// x, or NaN everywhere when the matrix failed (JAX's _replace_not_ok_with_nan).
E nan_if(const E& failed, const E& x) { return sel(failed, lit(x, NAN), x); }

// Runs `kernel` (one [n, n] matrix in, packed per-matrix outputs out) on
// every matrix of input 0 and binds the outputs, one per entry of `outs`
// (indices into the equation's outputs). A complex matrix comes packed,
// [n, n, 2], with a context of size 2n (its real embedding, complex_eig.cpp).
template <typename Kernel>
void batched(Lowering& L, int64_t n, const std::vector<size_t>& outs, Kernel kernel) {
  Aval in = L.in_aval(0);
  const bool cx = complex::is(in.dtype);
  const int32_t pdt = complex::part_dtype(in.dtype);
  Aval pin = complex::packed(in);
  Value xr = merge_leading(L, L.input(0), pin, in.shape.size() - 2, Aval::of_unknown_shape(pdt));
  Value shp = L.op("Shape", {xr}, Aval(dtype::i64, {cx ? 4 : 3}));
  Value count = L.op("Gather", {shp, scalar(L, dtype::i64, 0)}, Aval(dtype::i64, {}), {Attr::i("axis", 0)});
  Subgraph g = L.begin_subgraph("matrix");
  Value it = g.input(Aval(dtype::i64, {}), "b");
  Value go = g.input(Aval(dtype::boolean, {}), "cond_in");
  Aval one = cx ? Aval(pdt, {n, n, 2}) : Aval(pdt, {n, n});
  E A{&L, L.op("Gather", {xr, it}, one, {Attr::i("axis", 0)}), one};
  Ctx K(L, pdt, cx ? 2 * n : n);
  std::vector<E> res = kernel(K, A);
  std::vector<Value> body_out = {go};
  std::vector<Aval> loop_out;
  for (const E& e : res) {
    body_out.push_back(e.v);
    loop_out.push_back(Aval::of_unknown_shape(e.a.dtype));
  }
  GraphRef ref = g.end(body_out);
  std::vector<Value> stacked =
      L.op_n("Loop", {count, scalar(L, dtype::boolean, 1)}, loop_out, {Attr::graph("body", ref)});
  for (size_t k = 0; k < outs.size(); ++k) {
    Aval want = complex::packed(L.out_aval(outs[k]));
    L.bind(outs[k], reshape(L, stacked[k], Aval::of_unknown_shape(want.dtype), want));
  }
}

// No matrix, or 0x0 ones (any dtype): every result is empty, bound here.
// The Loop would have no trips to shape its scan outputs, and the kernel
// would gather from nothing.
bool bind_empty(Lowering& L) {
  if (!has_static_zero(L.in_aval(0))) return false;
  for (size_t k = 0; k < L.num_outputs(); ++k) L.bind(k, empty_of(L, complex::packed(L.out_aval(k))));
  return true;
}

bool flag(Lowering& L, const char* name, bool dflt) {
  return L.has_param(name) && !L.param(name).is_none() ? L.param(name).as_bool() : dflt;
}

void lower_eig(Lowering& L) {
  if (bind_empty(L)) return;
  int64_t n = require_square(L, L.in_aval(0), true);
  bool left = flag(L, "compute_left_eigenvectors", true), right = flag(L, "compute_right_eigenvectors", true);
  std::vector<size_t> outs = {0};
  if (left) outs.push_back(outs.size());
  if (right) outs.push_back(outs.size());
  Aval w = L.out_aval(0);
  if (complex::is(L.in_aval(0).dtype)) {
    batched(L, n, outs, [&](Ctx& K, const E& A) { return complex_eig(K, A, n, left, right); });
    return;
  }
  batched(L, n, outs, [&](Ctx& K, const E& A) {
    Schur S = real_schur(K, A, true);
    auto [wr, wi] = eigenvalues(K, S.T);
    Aval wa = Aval(w.dtype, {n});
    std::vector<E> r = {{&L, complex::pack(L, nan_if(S.failed, wr * S.unscale).v, nan_if(S.failed, wi * S.unscale).v, wa),
                         complex::packed(wa)}};
    Aval va = Aval(w.dtype, {n, n});
    auto vectors = [&](std::pair<E, E> v) {
      r.push_back({&L, complex::pack(L, nan_if(S.failed, v.first).v, nan_if(S.failed, v.second).v, va),
                   complex::packed(va)});
    };
    if (left) vectors(left_eigenvectors(K, S, wr, wi));
    if (right) vectors(right_eigenvectors(K, S, wr, wi));
    return r;
  });
}

void lower_schur(Lowering& L) {
  if (bind_empty(L)) return;
  int64_t n = require_square(L, L.in_aval(0), false);
  if (flag(L, "sort_eig_vals", false))
    L.fail("schur: sort_eig_vals=True is not supported (JAX does not implement it on CPU either)");
  bool vectors = flag(L, "compute_schur_vectors", true);
  std::vector<size_t> outs = {0};
  if (vectors) outs.push_back(1);
  batched(L, n, outs, [&](Ctx& K, const E& A) {
    // gees balances by permutation only, and undoes it on Z's rows.
    Schur S = real_schur(K, A, false);
    std::vector<E> r = {nan_if(S.failed, S.T * S.unscale)};
    if (vectors) r.push_back(nan_if(S.failed, mk(L, "Gather", {S.Z.v, S.invp.v}, S.Z.a, {Attr::i("axis", 0)})));
    return r;
  });
}

const std::initializer_list<const char*> kOps = {
    "Loop", "Reshape", "Shape", "Gather", "GatherElements", "ScatterElements", "Expand", "Add", "Sub", "Mul",
    "Div", "Neg", "Abs", "Sqrt", "Max", "Min", "Pow", "Log", "Ceil", "Mod", "Less", "LessOrEqual", "Greater",
    "GreaterOrEqual", "Equal", "Not", "And", "Or", "Where", "Cast", "ReduceSum", "ReduceMax", "ArgMax",
    "MatMul", "Unsqueeze", "Concat", "Transpose", "TopK"};

}  // namespace

JAXONNX_PLUGIN("lax_eig", "0.1.0") {
  // Both run LAPACK's path in Loops and emit the same ops.
  struct Entry {
    const char* name;
    void (*lower)(Lowering&);
    const char* summary;
  };
  const Entry entries[] = {
      {"eig", lower_eig,
       "LAPACK geev's path in Loops (dgebal, dgehd2, dlahqr double-shift QR, dtrevc3, dgebak): "
       "geev's eigenvalue order and eigenvector normalization (left and right); complex input through its "
       "shifted real embedding"},
      {"schur", lower_schur,
       "LAPACK gees's path in Loops (dgebal 'P', dgehd2, dlahqr): T and Z as gees; real input; "
       "no sort_eig_vals"},
  };
  for (const Entry& e : entries)
    plugin.primitive(e.name, e.lower).emits(kOps).emits_shape_ops().doc(onnx_doc("Loop")).summary(e.summary);
}
