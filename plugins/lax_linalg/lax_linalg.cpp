// lax_linalg: cholesky, triangular_solve, lu, lu_pivots_to_permutation,
// symmetric_product and custom_linear_solve -- what jnp.linalg.cholesky / solve / inv / det /
// slogdet and jax.scipy.linalg.{solve_triangular, lu, lu_factor, lu_solve,
// cho_solve} reduce to.
//
// ONNX has no Cholesky, LU or triangular-solve operator (Det exists, but JAX
// never emits a det primitive: jnp.linalg.det arrives as `lu`). The matrix
// dims are the two trailing ones and must be static; leading (batch) dims may
// be symbolic. Up to kMaxUnrolled columns each factorization is unrolled into
// Slice / Mul / ReduceSum / MatMul / Div / Concat steps on [..., n, n] (O(n)
// nodes, no Loop overhead at run time); beyond that the same steps run as an
// ONNX Loop, one column (row, pivot) per iteration, with Gather / Where masks
// for the dynamic index. A symbolic matrix dim is refused with a clear error.
//
// Semantics kept from JAX's CPU (LAPACK) kernels:
// - cholesky reads the lower triangle only and returns the input's strict
//   upper triangle unchanged (jnp.linalg.cholesky zeroes it afterwards). If a
//   pivot d_j <= 0 the factorization fails and the WHOLE matrix of that batch
//   element is NaN, as JAX does on potrf's info != 0 (a NaN pivot is not a
//   failure there: NaN propagates through the remaining columns, as here).
// - triangular_solve reads only the `lower` (or upper) triangle of `a`, and
//   not its diagonal when unit_diagonal; conjugate_a is a no-op for reals.
// - lu is getrf's partial pivoting: the pivot is the FIRST row of maximal
//   |a| (ONNX ArgMax with select_last_index=0), rows are swapped exactly (a
//   one-hot Where + ReduceSum that adds only zeros, no MatMul by a permutation
//   matrix, which would smear NaN/Inf), and a zero pivot skips the scaling of
//   the column (getf2 leaves it as is) instead of dividing by zero. Outputs
//   are lu (L strictly below the diagonal, U on and above), pivots int32
//   [..., min(m, n)] and permutation int32 [..., m]; m != n is supported.
// - custom_linear_solve's forward value is its `solve` jaxpr applied to b;
//   it is inlined.
// - symmetric_product is alpha a a^T + beta c as one MatMul (the whole
//   matrix, as JAX's CPU lowering gives it).
// Only float32/float64 operands are accepted (complex is not an ONNX type
// jaxonnx emits). eigh, svd, qr, geqrf, householder_product, ormqr,
// hessenberg, tridiagonal, tridiagonal_solve and cholesky_update are Loops in
// plugins/lax_linalg_iter; eig and schur are plugins/lax_eig.
#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

// Unrolling beyond this many columns makes models of thousands of nodes: a Loop then.
constexpr int64_t kMaxUnrolled = 64;

// A value with its type, so slices and concats can derive their avals.
struct T {
  Value v;
  Aval a;
};

int64_t rank_of(const T& x) { return x.a.rank(); }

// The static size of a matrix dim, or a clear failure. `capped`: the
// algorithm has no Loop form and stops at kMaxUnrolled.
int64_t matrix_dim(Lowering& L, const Aval& a, int64_t axis, const char* what, bool capped = true) {
  const Dim& d = a.shape.at(static_cast<size_t>(axis));
  if (!d.is_static())
    L.fail(std::string(L.primitive()) + ": the " + what + " dim of " + a.str() +
           " is symbolic; only the batch dims may be symbolic (the algorithm is unrolled "
           "over the matrix columns)");
  if (capped && d.value > kMaxUnrolled)
    L.fail(std::string(L.primitive()) + ": matrix dim " + std::to_string(d.value) + " of " +
           a.str() + " exceeds the unrolling limit of " + std::to_string(kMaxUnrolled));
  return d.value;
}

void require_float(Lowering& L, const Aval& a) {
  if (a.dtype != dtype::f32 && a.dtype != dtype::f64)
    L.fail(std::string(L.primitive()) + ": operand dtype " + dtype::name(a.dtype) +
           " is not supported (float32 and float64 only)");
  if (a.rank() < 2) L.fail(std::string(L.primitive()) + ": operand " + a.str() + " is not a matrix");
}

// x[..., start:end] along `axis`.
T slice(Lowering& L, const T& x, int64_t axis, int64_t start, int64_t end) {
  Shape s = x.a.shape;
  s[static_cast<size_t>(axis)] = Dim(end - start);
  Value v = L.op("Slice", {x.v, i64s(L, {start}), i64s(L, {end}), i64s(L, {axis})}, x.a.with_shape(s));
  return {v, x.a.with_shape(s)};
}

T concat(Lowering& L, const std::vector<T>& parts, int64_t axis) {
  if (parts.size() == 1) return parts[0];
  Shape s = parts[0].a.shape;
  int64_t total = 0;
  std::vector<Value> vs;
  for (const T& p : parts) {
    total += p.a.shape[static_cast<size_t>(axis)].value;
    vs.push_back(p.v);
  }
  s[static_cast<size_t>(axis)] = Dim(total);
  Aval out = parts[0].a.with_shape(s);
  return {L.op("Concat", vs, out, {Attr::i("axis", axis)}), out};
}

// Emits `op` whose output has type `out`.
T node(Lowering& L, const char* op, const std::vector<Value>& ins, const Aval& out,
       const std::vector<Attr>& attrs = {}) {
  return {L.op(op, ins, out, attrs), out};
}

// The batch dims of `a` followed by `tail`.
Shape batch_then(const Aval& a, std::vector<int64_t> tail) {
  Shape s(a.shape.begin(), a.shape.end() - 2);
  for (int64_t t : tail) s.push_back(Dim(t));
  return s;
}

// A constant bool [rows, cols] tensor with pred(i, j).
template <typename Pred>
Value bool_mask(Lowering& L, int64_t rows, int64_t cols, Pred pred) {
  std::vector<uint8_t> m;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m.push_back(pred(i, j) ? 1 : 0);
  return L.constant(dtype::boolean, {rows, cols}, m.data(), m.size());
}

// ReduceSum over one axis, kept.
T sum_keep(Lowering& L, const T& x, int64_t axis) {
  Shape s = x.a.shape;
  s[static_cast<size_t>(axis)] = Dim(1);
  return node(L, "ReduceSum", {x.v, i64s(L, {axis})}, x.a.with_shape(s), {Attr::i("keepdims", 1)});
}

// Row/column j of x (j an int64 scalar) along `axis`, kept as size 1.
T take(Lowering& L, const T& x, Value j, int64_t axis) {
  Shape s = x.a.shape;
  s[static_cast<size_t>(axis)] = Dim(1);
  Value j1 = L.op("Unsqueeze", {j, i64s(L, {0})}, Aval(dtype::i64, {1}));
  return node(L, "Gather", {x.v, j1}, x.a.with_shape(s), {Attr::i("axis", axis)});
}

// iota as an int64 constant of shape `dims` (one non-1 dim).
Value iota_const(Lowering& L, int64_t n, std::vector<int64_t> dims) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i);
  return L.constant(v, dims);
}

Value zeros_like_aval(Lowering& L, const Aval& a) {
  return L.op("Expand", {scalar(L, a.dtype, 0.0), shape_value(L, a.shape)}, a);
}

// ---------------------------------------------------------------- cholesky --

// The same left-looking columns as a Loop (n > kMaxUnrolled): column j is
// A[:, j] - Lc L[j, :]^T with Lc holding the finished columns (zeros beyond).
// Returns Lc and the pivots d [..., 1, n].
std::pair<T, T> cholesky_loop(Lowering& L, const T& a, int64_t n) {
  int64_t r = rank_of(a);
  Aval dva = a.a.with_shape(batch_then(a.a, {1, n}));
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Value rows = iota_const(L, n, {n, 1}), cols = iota_const(L, n, {1, n});
  Subgraph g = L.begin_subgraph("cholesky_body");
  Value j = g.input(isc, "j");
  Value cin = g.input(bsc, "cond_in");
  T lc{g.input(a.a, "l"), a.a};
  T dv{g.input(dva, "d"), dva};
  T acol = take(L, a, j, r - 1);
  T lrow = take(L, lc, j, r - 2);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r; ++i) perm.push_back(i);
  std::swap(perm[static_cast<size_t>(r - 1)], perm[static_cast<size_t>(r - 2)]);
  Value lrow_t = transpose(L, lrow.v, lrow.a, perm);
  T c = node(L, "Sub", {acol.v, L.op("MatMul", {lc.v, lrow_t}, acol.a)}, acol.a);
  T d = take(L, c, j, r - 2);
  T col = node(L, "Div", {c.v, node(L, "Sqrt", {d.v}, d.a).v}, c.a);
  Value is_col = L.op("Equal", {cols, j}, Aval(dtype::boolean, {1, n}));
  Value below = L.op("GreaterOrEqual", {rows, j}, Aval(dtype::boolean, {n, 1}));
  Value put = L.op("And", {is_col, below}, Aval(dtype::boolean, {n, n}));
  T lc2 = node(L, "Where", {put, col.v, lc.v}, a.a);
  T dv2 = node(L, "Where", {is_col, d.v, dv.v}, dva);
  GraphRef body = g.end({cin, lc2.v, dv2.v});
  std::vector<Value> res = L.op_n("Loop", {scalar(L, dtype::i64, double(n)), scalar(L, dtype::boolean, 1),
                                           zeros_like_aval(L, a.a), zeros_like_aval(L, dva)},
                                  {a.a, dva}, {Attr::graph("body", body)});
  return {T{res[0], a.a}, T{res[1], dva}};
}

// Left-looking Cholesky, one column j at a time:
//   c = A[:, j] - L[:, :j] @ L[j, :j]^T,   L[j, j] = sqrt(c[j]),   L[i, j] = c[i] / L[j, j].
// Rows above j of each column are scratch (never read back): the result takes
// A's strict upper triangle there.
void lower_cholesky(Lowering& L) {
  T a{L.input(0), L.in_aval(0)};
  require_float(L, a.a);
  int64_t r = rank_of(a);
  int64_t n = matrix_dim(L, a.a, r - 1, "matrix", false);
  if (a.a.shape[static_cast<size_t>(r - 2)] != Dim(n)) L.fail("cholesky: operand " + a.a.str() + " is not square");
  int32_t dt = a.a.dtype;
  std::vector<T> cols, diags;
  T acc{kNoValue, {}};  // L[:, :j]
  T dvec{kNoValue, {}};
  if (n > kMaxUnrolled) std::tie(acc, dvec) = cholesky_loop(L, a, n);
  for (int64_t j = 0; j < n && n <= kMaxUnrolled; ++j) {
    T c = slice(L, a, r - 1, j, j + 1);  // [..., n, 1]
    if (j > 0) {
      T row = slice(L, acc, r - 2, j, j + 1);  // L[j, :j], [..., 1, j]
      T prod = node(L, "Mul", {acc.v, row.v}, acc.a);
      c = node(L, "Sub", {c.v, sum_keep(L, prod, r - 1).v}, c.a);
    }
    T d = slice(L, c, r - 2, j, j + 1);  // [..., 1, 1]
    diags.push_back(d);
    T ljj = node(L, "Sqrt", {d.v}, d.a);
    T col = node(L, "Div", {c.v, ljj.v}, c.a);
    cols.push_back(col);
    acc = j == 0 ? col : concat(L, {acc, col}, r - 1);
  }
  // The diagonal is sqrt(d) itself (c[j] / sqrt(c[j]) is not exactly that).
  if (n <= kMaxUnrolled) dvec = concat(L, diags, r - 1);  // [..., 1, n]
  T sq = node(L, "Sqrt", {dvec.v}, dvec.a);
  Value eye = bool_mask(L, n, n, [](int64_t i, int64_t j) { return i == j; });
  Value upper = bool_mask(L, n, n, [](int64_t i, int64_t j) { return i < j; });
  T res = node(L, "Where", {eye, sq.v, acc.v}, a.a);
  res = node(L, "Where", {upper, a.v, res.v}, a.a);
  // The factorization fails when a pivot d_j <= 0 (JAX's CPU kernel does not
  // count a NaN pivot as a failure: NaN just propagates); JAX then returns
  // NaN for the whole matrix. The flags go through float for ReduceMax
  // (bool reductions need opset 20).
  Aval flags = dvec.a;
  T bad = node(L, "LessOrEqual", {dvec.v, scalar(L, dt, 0.0)}, flags.with_dtype(dtype::boolean));
  T badf = node(L, "Cast", {bad.v}, flags, {Attr::i("to", dt)});
  Aval one = flags.with_shape(batch_then(a.a, {1, 1}));
  T anyf = node(L, "ReduceMax", {badf.v, i64s(L, {r - 1})}, one, {Attr::i("keepdims", 1)});
  T anyb = node(L, "Cast", {anyf.v}, one.with_dtype(dtype::boolean), {Attr::i("to", dtype::boolean)});
  res = node(L, "Where", {anyb.v, scalar(L, dt, NAN), res.v}, a.a);
  L.bind(0, res.v);
}

// -------------------------------------------------------- triangular_solve --

// The substitution as a Loop (m > kMaxUnrolled): X starts at zero and row i
// = (b_i - M[i, solved] X) / M[i, i], the other triangle of M masked out
// (it may hold anything, NaN included).
T triangular_solve_loop(Lowering& L, const T& M, const T& b, int64_t m, bool m_lower, bool unit) {
  int64_t ra = rank_of(M), rb = rank_of(b);
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Value rows = iota_const(L, m, {m, 1}), cols = iota_const(L, m, {1, m});
  Subgraph g = L.begin_subgraph("triangular_solve_body");
  Value step = g.input(isc, "step");
  Value cin = g.input(bsc, "cond_in");
  T x{g.input(b.a, "x"), b.a};
  Value i = m_lower ? step : L.op("Sub", {scalar(L, dtype::i64, double(m - 1)), step}, isc);
  T mrow = take(L, M, i, ra - 2);  // [..., 1, m]
  Value solved = L.op(m_lower ? "Less" : "Greater", {cols, i}, Aval(dtype::boolean, {1, m}));
  T masked = node(L, "Where", {solved, mrow.v, scalar(L, M.a.dtype, 0.0)}, mrow.a);
  T bi = take(L, b, i, rb - 2);
  T xi = node(L, "Sub", {bi.v, L.op("MatMul", {masked.v, x.v}, bi.a)}, bi.a);
  if (!unit) xi = node(L, "Div", {xi.v, take(L, mrow, i, ra - 1).v}, bi.a);
  T x2 = node(L, "Where", {L.op("Equal", {rows, i}, Aval(dtype::boolean, {m, 1})), xi.v, x.v}, b.a);
  GraphRef body = g.end({cin, x2.v});
  std::vector<Value> res = L.op_n("Loop", {scalar(L, dtype::i64, double(m)), scalar(L, dtype::boolean, 1),
                                           zeros_like_aval(L, b.a)},
                                  {b.a}, {Attr::graph("body", body)});
  return T{res[0], b.a};
}

// Substitution, one row of X at a time. Left side (op(A) X = B), with M = op(A):
// lower M solves rows 0..m-1 forwards, x_i = (b_i - M[i, :i] X[:i]) / M[i, i];
// upper M solves backwards. The right side (X op(A) = B) is the left side
// transposed: op(A)^T X^T = B^T.
void lower_triangular_solve(Lowering& L) {
  T a{L.input(0), L.in_aval(0)};
  T b{L.input(1), L.in_aval(1)};
  require_float(L, a.a);
  bool left = L.param("left_side").as_bool();
  bool lower = L.param("lower").as_bool();
  bool trans = L.param("transpose_a").as_bool();
  bool unit = L.param("unit_diagonal").as_bool();
  // conjugate_a is the identity on real matrices.
  int64_t ra = rank_of(a), rb = rank_of(b);
  if (rb < 2) L.fail("triangular_solve: b " + b.a.str() + " is not a matrix");
  int64_t m = matrix_dim(L, a.a, ra - 1, "matrix", false);
  std::vector<int64_t> swap_last;
  for (int64_t i = 0; i < rb; ++i) swap_last.push_back(i);
  std::swap(swap_last[rb - 1], swap_last[rb - 2]);
  if (!left) {
    b = {transpose(L, b.v, b.a, swap_last), b.a};
    std::swap(b.a.shape[rb - 1], b.a.shape[rb - 2]);
    trans = !trans;
  }
  std::vector<int64_t> swap_a;
  for (int64_t i = 0; i < ra; ++i) swap_a.push_back(i);
  std::swap(swap_a[ra - 1], swap_a[ra - 2]);
  T M = trans ? T{transpose(L, a.v, a.a, swap_a), a.a} : a;
  bool m_lower = lower != trans;

  Aval out_a = L.out_aval(0);  // batch dims of the result
  Shape bs(out_a.shape.begin(), out_a.shape.end() - 2);
  bs.push_back(Dim(1));
  bs.push_back(b.a.shape[rb - 1]);
  Aval row_a = b.a.with_shape(bs);  // one solved row [..., 1, k]

  T acc{kNoValue, {}};  // the rows solved so far, in matrix order
  if (m > kMaxUnrolled) acc = triangular_solve_loop(L, M, b, m, m_lower, unit);
  for (int64_t step = 0; step < m && m <= kMaxUnrolled; ++step) {
    int64_t i = m_lower ? step : m - 1 - step;
    T x = slice(L, b, rb - 2, i, i + 1);
    if (step > 0) {
      T mrow = m_lower ? slice(L, slice(L, M, ra - 2, i, i + 1), ra - 1, 0, i)
                       : slice(L, slice(L, M, ra - 2, i, i + 1), ra - 1, i + 1, m);
      T dot = node(L, "MatMul", {mrow.v, acc.v}, row_a);
      x = node(L, "Sub", {x.v, dot.v}, row_a);
    }
    if (!unit) {
      T diag = slice(L, slice(L, M, ra - 2, i, i + 1), ra - 1, i, i + 1);
      x = node(L, "Div", {x.v, diag.v}, row_a);
    }
    if (x.a.shape != row_a.shape) x.a = row_a;
    acc = step == 0 ? x : m_lower ? concat(L, {acc, x}, rb - 2) : concat(L, {x, acc}, rb - 2);
  }
  Value out = acc.v;
  if (!left) out = transpose(L, out, acc.a, swap_last);
  L.bind(0, out);
}

// ---------------------------------------------------------------------- lu --

// The same getf2 steps as a Loop (m or n > kMaxUnrolled), in place on the
// whole matrix: step k swaps row k with the first row >= k of maximal
// |W[:, k]| (GatherElements, exact), then eliminates below the pivot. Returns
// lu, pivots [..., K] and the permutation [..., m] (int64).
void lu_loop(Lowering& L, const T& a, int64_t m, int64_t n) {
  int64_t r = rank_of(a), K = std::min(m, n);
  int32_t dt = a.a.dtype;
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Aval pva = Aval(dtype::i64, batch_then(a.a, {K}));
  Aval pma = Aval(dtype::i64, batch_then(a.a, {m}));
  Value rows = iota_const(L, m, {m, 1}), cols = iota_const(L, n, {1, n}), ks = iota_const(L, K, {K});
  Value zero = scalar(L, dt, 0.0);
  Subgraph g = L.begin_subgraph("lu_body");
  Value k = g.input(isc, "k");
  Value cin = g.input(bsc, "cond_in");
  T W{g.input(a.a, "w"), a.a};
  T piv{g.input(pva, "pivots"), pva};
  T perm{g.input(pma, "perm"), pma};
  Aval col_a = a.a.with_shape(batch_then(a.a, {m, 1}));
  Aval one_i = Aval(dtype::i64, batch_then(a.a, {1, 1}));
  Aval mb(dtype::boolean, {m, 1});
  T colk = take(L, W, k, r - 1);
  T cand = node(L, "Where", {L.op("GreaterOrEqual", {rows, k}, mb), node(L, "Abs", {colk.v}, col_a).v,
                             scalar(L, dt, -1.0)},
                col_a);
  T p = node(L, "ArgMax", {cand.v}, one_i,
             {Attr::i("axis", r - 2), Attr::i("keepdims", 1), Attr::i("select_last_index", 0)});
  Aval idx_a(dtype::i64, batch_then(a.a, {m, 1}));
  T idx = node(L, "Where", {L.op("Equal", {rows, k}, mb), p.v,
                            node(L, "Where", {node(L, "Equal", {rows, p.v}, idx_a.with_dtype(dtype::boolean)).v, k, rows},
                                 idx_a)
                                .v},
               idx_a);
  T Ws = node(L, "GatherElements", {W.v, L.op("Expand", {idx.v, shape_value(L, a.a.shape)}, a.a.with_dtype(dtype::i64))},
              a.a, {Attr::i("axis", r - 2)});
  Value idx_sq = L.op("Squeeze", {idx.v, i64s(L, {r - 1})}, pma);
  T perm2 = node(L, "GatherElements", {perm.v, idx_sq}, pma, {Attr::i("axis", r - 2)});
  Value p_sq = L.op("Squeeze", {p.v, i64s(L, {r - 2})}, Aval(dtype::i64, batch_then(a.a, {1})));
  T piv2 = node(L, "Where", {L.op("Equal", {ks, k}, Aval(dtype::boolean, {K})), p_sq, piv.v}, pva);
  // Eliminate: l = W[:, k] / pivot (a zero pivot leaves the column), trailing -= l * pivot row.
  T rowk = take(L, Ws, k, r - 2);
  T colk2 = take(L, Ws, k, r - 1);
  T pv = take(L, rowk, k, r - 1);
  T l = node(L, "Where", {node(L, "Equal", {pv.v, zero}, pv.a.with_dtype(dtype::boolean)).v, colk2.v,
                          node(L, "Div", {colk2.v, pv.v}, col_a).v},
             col_a);
  Value below = L.op("Greater", {rows, k}, mb);
  Value trailing = L.op("And", {below, L.op("Greater", {cols, k}, Aval(dtype::boolean, {1, n}))},
                        Aval(dtype::boolean, {m, n}));
  T upd = node(L, "Sub", {Ws.v, node(L, "Where", {trailing, node(L, "Mul", {l.v, rowk.v}, a.a).v, zero}, a.a).v}, a.a);
  Value lcol = L.op("And", {below, L.op("Equal", {cols, k}, Aval(dtype::boolean, {1, n}))}, Aval(dtype::boolean, {m, n}));
  T W2 = node(L, "Where", {lcol, l.v, upd.v}, a.a);
  GraphRef body = g.end({cin, W2.v, piv2.v, perm2.v});
  Value piv0 = L.op("Expand", {scalar(L, dtype::i64, 0.0), shape_value(L, pva.shape)}, pva);
  Value perm0 = L.op("Expand", {iota_const(L, m, {m}), shape_value(L, pma.shape)}, pma);
  std::vector<Value> res = L.op_n("Loop", {scalar(L, dtype::i64, double(K)), scalar(L, dtype::boolean, 1), a.v, piv0, perm0},
                                  {a.a, pva, pma}, {Attr::graph("body", body)});
  L.bind(0, res[0]);
  if (L.output_used(1)) L.bind(1, cast(L, res[1], pva, L.out_aval(1).dtype));
  if (L.output_used(2)) L.bind(2, cast(L, res[2], pma, L.out_aval(2).dtype));
}

// Right-looking LU with partial pivoting (getf2). W holds the rows not yet
// pivoted, full width: its first k columns are L multipliers, the rest the
// trailing submatrix. Step k picks the first row of W maximizing |W[:, k]|,
// emits it as row k of the result, moves W's row 0 into its place, and
// eliminates column k below the pivot.
void lower_lu(Lowering& L) {
  T a{L.input(0), L.in_aval(0)};
  require_float(L, a.a);
  int64_t r = rank_of(a);
  int64_t m = matrix_dim(L, a.a, r - 2, "row", false);
  int64_t n = matrix_dim(L, a.a, r - 1, "column", false);
  if (m == 0 || n == 0) L.fail("lu: empty matrix " + a.a.str() + " is not supported");
  if (m > kMaxUnrolled || n > kMaxUnrolled) return lu_loop(L, a, m, n);
  int64_t K = std::min(m, n);
  int32_t dt = a.a.dtype;
  Value zero = scalar(L, dt, 0.0);
  Value izero = scalar(L, dtype::i64, 0.0);

  T W = a;
  std::vector<int64_t> iota_m;
  for (int64_t i = 0; i < m; ++i) iota_m.push_back(i);
  // The original row index of each row of W, [m, 1] (batch dims appear at step 0).
  // Leading 1s keep P's rank equal to W's, so its axes line up.
  std::vector<int64_t> pdims(static_cast<size_t>(r - 2), 1);
  pdims.push_back(m);
  pdims.push_back(1);
  Shape pshape(pdims.begin(), pdims.end());
  T P{L.constant(iota_m, pdims), Aval(dtype::i64, pshape)};
  std::vector<T> rows, perms, pivs;
  for (int64_t k = 0; k < K; ++k) {
    int64_t R = m - k;
    Aval col_a = a.a.with_shape(batch_then(a.a, {R, 1}));
    Aval one_a = a.a.with_shape(batch_then(a.a, {1, 1}));
    Aval row_a = a.a.with_shape(batch_then(a.a, {1, n}));
    T col = slice(L, W, r - 1, k, k + 1);
    T absc = node(L, "Abs", {col.v}, col.a);
    T p = node(L, "ArgMax", {absc.v}, one_a.with_dtype(dtype::i64),
               {Attr::i("axis", r - 2), Attr::i("keepdims", 1), Attr::i("select_last_index", 0)});
    std::vector<int64_t> iota_r(iota_m.begin(), iota_m.begin() + R);
    T hot = node(L, "Equal", {L.constant(iota_r, {R, 1}), p.v}, col_a.with_dtype(dtype::boolean));
    // Row p of W and of P, exactly: every other row contributes +0.
    T wsel = node(L, "Where", {hot.v, W.v, zero}, W.a.with_shape(batch_then(a.a, {R, n})));
    T prow = sum_keep(L, wsel, r - 2);
    prow.a = row_a;
    T psel = node(L, "Where", {hot.v, P.v, izero}, col_a.with_dtype(dtype::i64));
    T pperm = sum_keep(L, psel, r - 2);
    rows.push_back(prow);
    perms.push_back(pperm);
    pivs.push_back(k == 0 ? p : node(L, "Add", {p.v, scalar(L, dtype::i64, double(k))}, p.a));
    if (R == 1) break;
    // Row 0 of W takes the pivot row's place; the new W is rows 1.. of that.
    T w0 = slice(L, W, r - 2, 0, 1);
    T swapped = node(L, "Where", {hot.v, w0.v, W.v}, wsel.a);
    T rest = slice(L, swapped, r - 2, 1, R);
    T p0 = slice(L, P, r - 2, 0, 1);
    T pswapped = node(L, "Where", {hot.v, p0.v, P.v}, psel.a);
    P = slice(L, pswapped, r - 2, 1, R);
    // Eliminate: l = W[:, k] / pivot (unless the pivot is 0: then the column
    // is all zeros and getf2 leaves it), trailing -= l * pivot_row.
    T pv = slice(L, prow, r - 1, k, k + 1);
    T cr = slice(L, rest, r - 1, k, k + 1);
    T q = node(L, "Div", {cr.v, pv.v}, cr.a);
    T pz = node(L, "Equal", {pv.v, zero}, pv.a.with_dtype(dtype::boolean));
    T l = node(L, "Where", {pz.v, cr.v, q.v}, cr.a);
    std::vector<T> parts;
    if (k > 0) parts.push_back(slice(L, rest, r - 1, 0, k));
    parts.push_back(l);
    if (k + 1 < n) {
      T tr = slice(L, rest, r - 1, k + 1, n);
      T ur = slice(L, prow, r - 1, k + 1, n);
      T upd = node(L, "Mul", {l.v, ur.v}, tr.a);
      parts.push_back(node(L, "Sub", {tr.v, upd.v}, tr.a));
    }
    W = concat(L, parts, r - 1);
  }
  if (m > K) {  // the rows below the last pivot hold only L multipliers
    rows.push_back(W);
    perms.push_back(P);
  }
  T lu = concat(L, rows, r - 2);
  L.bind(0, lu.v);
  if (L.output_used(1)) {
    T pv = concat(L, pivs, r - 1);  // [..., 1, K]
    Aval out = L.out_aval(1);
    Value sq = L.op("Squeeze", {pv.v, i64s(L, {r - 2})}, out.with_dtype(dtype::i64));
    L.bind(1, cast(L, sq, out.with_dtype(dtype::i64), out.dtype));
  }
  if (L.output_used(2)) {
    T pm = concat(L, perms, r - 2);  // [..., m, 1]
    Aval out = L.out_aval(2);
    Value sq = L.op("Squeeze", {pm.v, i64s(L, {r - 1})}, out.with_dtype(dtype::i64));
    L.bind(2, cast(L, sq, out.with_dtype(dtype::i64), out.dtype));
  }
}

// ------------------------------------------------- lu_pivots_to_permutation --

// perm = iota(size); for each k: swap perm[k] and perm[pivots[k]], the swaps
// done with one-hot masks (exact, and batch dims may be symbolic).
void lower_lu_pivots_to_permutation(Lowering& L) {
  T piv{L.input(0), L.in_aval(0)};
  int64_t r = rank_of(piv);
  if (r < 1) L.fail("lu_pivots_to_permutation: pivots " + piv.a.str() + " has rank 0");
  const Dim& kd = piv.a.shape.back();
  if (!kd.is_static())
    L.fail("lu_pivots_to_permutation: the pivot count of " + piv.a.str() + " is symbolic");
  int64_t K = kd.value;
  int64_t m = L.param("permutation_size").as_int();
  Aval out = L.out_aval(0);
  if (K > kMaxUnrolled) {
    // As a Loop: perm = iota; step k swaps perm[k] and perm[pivots[k]] (a gather by a swapped iota).
    Aval vec = out.with_dtype(dtype::i64);
    Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
    Value iv = iota_const(L, m, {m});
    T p64{cast(L, piv.v, piv.a, dtype::i64), piv.a.with_dtype(dtype::i64)};
    Subgraph g = L.begin_subgraph("lu_pivots_body");
    Value k = g.input(isc, "k");
    Value cin = g.input(bsc, "cond_in");
    T perm{g.input(vec, "perm"), vec};
    T pk = take(L, p64, k, r - 1);  // [..., 1]
    Aval vb = vec.with_dtype(dtype::boolean);
    Value idx = L.op("Where", {L.op("Equal", {iv, k}, Aval(dtype::boolean, {m})), pk.v,
                               L.op("Where", {L.op("Equal", {iv, pk.v}, vb), k, iv}, vec)},
                     vec);
    T perm2 = node(L, "GatherElements", {perm.v, idx}, vec, {Attr::i("axis", r - 1)});
    GraphRef body = g.end({cin, perm2.v});
    Value perm0 = L.op("Expand", {iv, shape_value(L, vec.shape)}, vec);
    Value res = L.op_n("Loop", {scalar(L, dtype::i64, double(std::min(K, m))), scalar(L, dtype::boolean, 1), perm0},
                       {vec}, {Attr::graph("body", body)})[0];
    L.bind(0, cast(L, res, vec, out.dtype));
    return;
  }
  Aval vec = out.with_dtype(dtype::i64);
  Aval one = vec.with_shape([&] { Shape s = vec.shape; s.back() = Dim(1); return s; }());
  std::vector<int64_t> iota;
  for (int64_t i = 0; i < m; ++i) iota.push_back(i);
  Value iv = L.constant(iota, {m});
  T perm{iv, Aval(dtype::i64, {m})};
  T p64{cast(L, piv.v, piv.a, dtype::i64), piv.a.with_dtype(dtype::i64)};
  for (int64_t k = 0; k < K && k < m; ++k) {
    T pk = slice(L, p64, r - 1, k, k + 1);  // [..., 1]
    T hot = node(L, "Equal", {iv, pk.v}, vec.with_dtype(dtype::boolean));
    T sel = node(L, "Where", {hot.v, perm.v, scalar(L, dtype::i64, 0.0)}, vec);
    T vp = sum_keep(L, sel, r - 1);
    vp.a = one;
    T vk = slice(L, perm, perm.a.rank() - 1, k, k + 1);
    std::vector<uint8_t> isk(static_cast<size_t>(m), 0);
    isk[static_cast<size_t>(k)] = 1;
    Value kmask = L.constant(dtype::boolean, {m}, isk.data(), isk.size());
    T inner = node(L, "Where", {kmask, vp.v, perm.v}, vec);
    perm = node(L, "Where", {hot.v, vk.v, inner.v}, vec);
  }
  if (perm.a.rank() != vec.rank())  // no pivots: the identity, batched
    perm = node(L, "Expand", {perm.v, shape_value(L, vec.shape)}, vec);
  L.bind(0, cast(L, perm.v, vec, out.dtype));
}

// ------------------------------------------------------- symmetric_product --

// alpha a a^T + beta c, the whole matrix (JAX's CPU lowering computes all of
// it; only its GPU syrk kernel leaves the upper triangle unspecified).
void lower_symmetric_product(Lowering& L) {
  T a{L.input(0), L.in_aval(0)};
  T c{L.input(1), L.in_aval(1)};
  require_float(L, a.a);
  require_float(L, c.a);
  int64_t r = rank_of(a);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r; ++i) perm.push_back(i);
  std::swap(perm[static_cast<size_t>(r - 1)], perm[static_cast<size_t>(r - 2)]);
  Aval out = L.out_aval(0);
  int32_t dt = out.dtype;
  Value aat = L.op("MatMul", {a.v, transpose(L, a.v, a.a, perm)}, out);
  Value lhs = L.op("Mul", {scalar(L, dt, L.param("alpha").as_float()), aat}, out);
  Value rhs = L.op("Mul", {scalar(L, dt, L.param("beta").as_float()), c.v}, out);
  L.bind(0, L.op("Add", {lhs, rhs}, out));
}

// ------------------------------------------------------ custom_linear_solve --

// The forward value of custom_linear_solve(matvec, b, solve, ...) is
// solve(matvec, b): its `solve` jaxpr, inlined on its consts and b.
void lower_custom_linear_solve(Lowering& L) {
  Param lens = L.param("const_lengths");
  int64_t n_matvec = lens.field("matvec").as_int();
  int64_t n_vecmat = lens.field("vecmat").as_int();
  int64_t n_solve = lens.field("solve").as_int();
  int64_t n_tsolve = lens.field("transpose_solve").as_int();
  Param solve = L.param("jaxprs").field("solve");
  if (!solve.exists() || solve.is_none())
    L.fail("custom_linear_solve: param 'jaxprs.solve' is None; nothing to lower");
  std::vector<Value> ins = L.inputs();
  size_t first_b = static_cast<size_t>(n_matvec + n_vecmat + n_solve + n_tsolve);
  if (ins.size() < first_b)
    L.fail("custom_linear_solve: " + std::to_string(ins.size()) + " operands but const_lengths sum to " +
           std::to_string(first_b));
  size_t s0 = static_cast<size_t>(n_matvec + n_vecmat);
  std::vector<Value> args(ins.begin() + s0, ins.begin() + s0 + n_solve);
  args.insert(args.end(), ins.begin() + first_b, ins.end());
  std::vector<Value> outs = L.inline_jaxpr(solve.as_jaxpr(), args);
  if (outs.size() != L.num_outputs())
    L.fail("custom_linear_solve: the solve jaxpr gives " + std::to_string(outs.size()) + " outputs, expected " +
           std::to_string(L.num_outputs()));
  for (size_t i = 0; i < outs.size(); ++i) L.bind(i, outs[i]);
}

}  // namespace

JAXONNX_PLUGIN("lax_linalg", "0.1.0") {
  plugin.primitive("cholesky", lower_cholesky)
      .emits({"Slice", "Mul", "ReduceSum", "Sub", "Sqrt", "Div", "Concat", "Where", "LessOrEqual",
              "Cast", "ReduceMax", "Loop", "Gather", "Unsqueeze", "Transpose", "MatMul", "Equal", "GreaterOrEqual", "And", "Expand"})
      .emits_shape_ops()
      .doc(onnx_doc("Sqrt"))
      .summary("column-by-column (left-looking) Cholesky, unrolled (a Loop for n > 64); NaN matrix when not positive definite");
  plugin.primitive("triangular_solve", lower_triangular_solve)
      .emits({"Slice", "MatMul", "Sub", "Div", "Concat", "Transpose", "Loop", "Gather", "Unsqueeze", "Less", "Greater", "Where", "Equal", "Expand"})
      .emits_shape_ops()
      .doc(onnx_doc("MatMul"))
      .summary("forward/back substitution, one row of the solution per step (a Loop for n > 64)");
  plugin.primitive("lu", lower_lu)
      .emits({"Slice", "Abs", "ArgMax", "Equal", "Where", "ReduceSum", "Add", "Div", "Mul", "Sub", "Concat",
              "Squeeze", "Cast", "Loop", "Gather", "Unsqueeze", "GreaterOrEqual", "Greater", "GatherElements", "Expand", "And"})
      .emits_shape_ops()
      .doc(onnx_doc("ArgMax"))
      .summary("LU with partial pivoting (getf2), unrolled over the columns (a Loop beyond 64)");
  plugin.primitive("lu_pivots_to_permutation", lower_lu_pivots_to_permutation)
      .emits({"Cast", "Slice", "Equal", "Where", "ReduceSum", "Expand", "Loop", "Gather", "Unsqueeze", "GatherElements"})
      .emits_shape_ops()
      .doc(onnx_doc("Where"))
      .summary("applies the pivot swaps to iota with one-hot masks");
  plugin.primitive("symmetric_product", lower_symmetric_product)
      .emits({"Transpose", "MatMul", "Mul", "Add"})
      .doc(onnx_doc("MatMul"))
      .summary("alpha a a^T + beta c: one MatMul");
  plugin.primitive("custom_linear_solve", lower_custom_linear_solve)
      .emits({})
      .summary("inlines the solve jaxpr: no node of its own");
}
