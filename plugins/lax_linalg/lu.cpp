// lu (getf2's partial pivoting) and lu_pivots_to_permutation: unrolled for
// static sizes from 1 to kMaxUnrolled, else a Loop (any size, symbolic or empty included).
// A complex matrix runs the same steps in complex arithmetic (arith.hpp), its
// pivot chosen by |re| + |im| as LAPACK's izamax does.
#include "arith.hpp"

#include <algorithm>

namespace lax_linalg {

namespace {

// The pivot's magnitude: |x|, and |re| + |im| for a complex x (izamax's cabs1).
T pivot_size(Lowering& L, const T& x) {
  if (!is_complex(x)) return node(L, "Abs", {x.v}, x.a);
  return node(L, "Add", {L.op("Abs", {x.v}, x.a), L.op("Abs", {x.im}, x.a)}, x.a);
}

// x == z, a zero scalar (both parts for a complex x), a bool of x's shape.
Value is_zero(Lowering& L, const T& x, Value z) {
  Aval b = x.a.with_dtype(dtype::boolean);
  Value re0 = L.op("Equal", {x.v, z}, b);
  return is_complex(x) ? L.op("And", {re0, L.op("Equal", {x.im, z}, b)}, b) : re0;
}

// The same getf2 steps as a Loop, in place on the whole matrix: step k swaps
// row k with the first row >= k of maximal |W[:, k]| (GatherElements, exact),
// then eliminates below the pivot. Binds lu, pivots [..., K] and the
// permutation [..., m]; K = min(m, n) steps, none for an empty matrix.
void lu_loop(Lowering& L, const T& a, const Dim& m, const Dim& n) {
  int64_t r = rank_of(a);
  const Dim K = L.out_aval(1).shape.back();  // min(m, n), as JAX writes it
  int32_t dt = a.a.dtype;
  Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
  Aval pva = Aval(dtype::i64, batch_then(a.a, {K}));
  Aval pma = Aval(dtype::i64, batch_then(a.a, {m}));
  Value rows = iota(L, m, {m, 1}), cols = iota(L, n, {1, n}), ks = iota(L, K, {K});
  Value zero = scalar(L, dt, 0.0);
  Subgraph g = L.begin_subgraph("lu_body");
  Value k = g.input(isc, "k");
  Value cin = g.input(bsc, "cond_in");
  T W{g.input(a.a, "w"), a.a};
  T piv{g.input(pva, "pivots"), pva};
  T perm{g.input(pma, "perm"), pma};
  if (is_complex(a)) W.im = g.input(a.a, "w_im");
  Aval col_a = a.a.with_shape(batch_then(a.a, {m, 1}));
  Aval one_i = Aval(dtype::i64, batch_then(a.a, {1, 1}));
  Aval mb(dtype::boolean, {m, 1});
  T colk = take(L, W, k, r - 1);
  T cand = node(L, "Where", {L.op("GreaterOrEqual", {rows, k}, mb), pivot_size(L, colk).v, scalar(L, dt, -1.0)},
                col_a);
  T p = node(L, "ArgMax", {cand.v}, one_i,
             {Attr::i("axis", r - 2), Attr::i("keepdims", 1), Attr::i("select_last_index", 0)});
  Aval idx_a(dtype::i64, batch_then(a.a, {m, 1}));
  T idx = node(L, "Where", {L.op("Equal", {rows, k}, mb), p.v,
                            node(L, "Where", {node(L, "Equal", {rows, p.v}, idx_a.with_dtype(dtype::boolean)).v, k, rows},
                                 idx_a)
                                .v},
               idx_a);
  Value idx_full = L.op("Expand", {idx.v, shape_value(L, a.a.shape)}, a.a.with_dtype(dtype::i64));
  T Ws = each(W, a.a, [&](Value v) { return L.op("GatherElements", {v, idx_full}, a.a, {Attr::i("axis", r - 2)}); });
  Value idx_sq = L.op("Squeeze", {idx.v, i64s(L, {r - 1})}, pma);
  T perm2 = node(L, "GatherElements", {perm.v, idx_sq}, pma, {Attr::i("axis", r - 2)});
  Value p_sq = L.op("Squeeze", {p.v, i64s(L, {r - 2})}, Aval(dtype::i64, batch_then(a.a, {1})));
  T piv2 = node(L, "Where", {L.op("Equal", {ks, k}, Aval(dtype::boolean, {K})), p_sq, piv.v}, pva);
  // Eliminate: l = W[:, k] / pivot (a zero pivot leaves the column), trailing -= l * pivot row.
  T rowk = take(L, Ws, k, r - 2);
  T colk2 = take(L, Ws, k, r - 1);
  T pv = take(L, rowk, k, r - 1);
  Value pz = is_zero(L, pv, zero);
  T l = where(L, pz, colk2, div(L, colk2, pv, col_a), col_a);
  Value below = L.op("Greater", {rows, k}, mb);
  Value trailing = L.op("And", {below, L.op("Greater", {cols, k}, Aval(dtype::boolean, {1, n}))},
                        Aval(dtype::boolean, {m, n}));
  T prod = mul(L, l, rowk, a.a);
  T upd = sub(L, Ws, where(L, trailing, prod, scalar_like(Ws, zero), a.a), a.a);
  Value lcol = L.op("And", {below, L.op("Equal", {cols, k}, Aval(dtype::boolean, {1, n}))}, Aval(dtype::boolean, {m, n}));
  T W2 = where(L, lcol, l, upd, a.a);
  std::vector<Value> outs = {cin, W2.v, piv2.v, perm2.v};
  if (is_complex(a)) outs.push_back(W2.im);
  GraphRef body = g.end(outs);
  Value piv0 = L.op("Expand", {scalar(L, dtype::i64, 0.0), shape_value(L, pva.shape)}, pva);
  Value perm0 = L.op("Expand", {iota(L, m, {m}), shape_value(L, pma.shape)}, pma);
  std::vector<Value> init = {count(L, K), scalar(L, dtype::boolean, 1), a.v, piv0, perm0};
  std::vector<Aval> types = {a.a, pva, pma};
  if (is_complex(a)) {
    init.push_back(a.im);
    types.push_back(a.a);
  }
  std::vector<Value> res = L.op_n("Loop", init, types, {Attr::graph("body", body)});
  T lu{res[0], a.a};
  if (is_complex(a)) lu.im = res[3];
  L.bind(0, result(L, lu, 0));
  if (L.output_used(1)) L.bind(1, cast(L, res[1], pva, L.out_aval(1).dtype));
  if (L.output_used(2)) L.bind(2, cast(L, res[2], pma, L.out_aval(2).dtype));
}

}  // namespace

// Right-looking LU with partial pivoting (getf2). W holds the rows not yet
// pivoted, full width: its first k columns are L multipliers, the rest the
// trailing submatrix. Step k picks the first row of W maximizing |W[:, k]|,
// emits it as row k of the result, moves W's row 0 into its place, and
// eliminates column k below the pivot.
void lower_lu(Lowering& L) {
  T a = operand(L, 0);
  require_float(L, a.a, /*complex_ok=*/true);
  int64_t r = rank_of(a);
  const Dim md = a.a.shape[static_cast<size_t>(r - 2)], nd = a.a.shape[static_cast<size_t>(r - 1)];
  if (!unrolled(md) || !unrolled(nd)) return lu_loop(L, a, md, nd);
  int64_t m = md.value, n = nd.value, K = std::min(m, n);
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
    T absc = pivot_size(L, col);
    T p = node(L, "ArgMax", {absc.v}, one_a.with_dtype(dtype::i64),
               {Attr::i("axis", r - 2), Attr::i("keepdims", 1), Attr::i("select_last_index", 0)});
    std::vector<int64_t> iota_r(iota_m.begin(), iota_m.begin() + R);
    T hot = node(L, "Equal", {L.constant(iota_r, {R, 1}), p.v}, col_a.with_dtype(dtype::boolean));
    // Row p of W and of P, exactly: every other row contributes +0.
    T wsel = where(L, hot.v, W, scalar_like(W, zero), W.a.with_shape(batch_then(a.a, {R, n})));
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
    T swapped = where(L, hot.v, w0, W, wsel.a);
    T rest = slice(L, swapped, r - 2, 1, R);
    T p0 = slice(L, P, r - 2, 0, 1);
    T pswapped = node(L, "Where", {hot.v, p0.v, P.v}, psel.a);
    P = slice(L, pswapped, r - 2, 1, R);
    // Eliminate: l = W[:, k] / pivot (unless the pivot is 0: then the column
    // is all zeros and getf2 leaves it), trailing -= l * pivot_row.
    T pv = slice(L, prow, r - 1, k, k + 1);
    T cr = slice(L, rest, r - 1, k, k + 1);
    T q = div(L, cr, pv, cr.a);
    Value pz = is_zero(L, pv, zero);
    T l = where(L, pz, cr, q, cr.a);
    std::vector<T> parts;
    if (k > 0) parts.push_back(slice(L, rest, r - 1, 0, k));
    parts.push_back(l);
    if (k + 1 < n) {
      T tr = slice(L, rest, r - 1, k + 1, n);
      T ur = slice(L, prow, r - 1, k + 1, n);
      T upd = mul(L, l, ur, tr.a);
      parts.push_back(sub(L, tr, upd, tr.a));
    }
    W = concat(L, parts, r - 1);
  }
  if (m > K) {  // the rows below the last pivot hold only L multipliers
    rows.push_back(W);
    perms.push_back(P);
  }
  T lu = concat(L, rows, r - 2);
  L.bind(0, result(L, lu, 0));
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
// done with one-hot masks (exact); a Loop beyond kMaxUnrolled pivots or for a
// symbolic pivot count or size.
void lower_lu_pivots_to_permutation(Lowering& L) {
  T piv{L.input(0), L.in_aval(0)};
  int64_t r = rank_of(piv);
  if (r < 1) L.fail("lu_pivots_to_permutation: pivots " + piv.a.str() + " has rank 0");
  const Dim kd = piv.a.shape.back();
  Aval out = L.out_aval(0);
  const Dim md = out.shape.back();  // permutation_size
  if (!kd.is_static() || !md.is_static() || kd.value > kMaxUnrolled) {
    // As a Loop: perm = iota; step k swaps perm[k] and perm[pivots[k]] (a gather by a swapped iota).
    Aval vec = out.with_dtype(dtype::i64);
    Aval isc(dtype::i64, {}), bsc(dtype::boolean, {});
    Value iv = iota(L, md, {md});
    T p64{cast(L, piv.v, piv.a, dtype::i64), piv.a.with_dtype(dtype::i64)};
    Subgraph g = L.begin_subgraph("lu_pivots_body");
    Value k = g.input(isc, "k");
    Value cin = g.input(bsc, "cond_in");
    T perm{g.input(vec, "perm"), vec};
    T pk = take(L, p64, k, r - 1);  // [..., 1]
    Aval vb = vec.with_dtype(dtype::boolean);
    Value idx = L.op("Where", {L.op("Equal", {iv, k}, Aval(dtype::boolean, {md})), pk.v,
                               L.op("Where", {L.op("Equal", {iv, pk.v}, vb), k, iv}, vec)},
                     vec);
    T perm2 = node(L, "GatherElements", {perm.v, idx}, vec, {Attr::i("axis", r - 1)});
    GraphRef body = g.end({cin, perm2.v});
    Value perm0 = L.op("Expand", {iv, shape_value(L, vec.shape)}, vec);
    Value res = L.op_n("Loop", {count_min(L, kd, md), scalar(L, dtype::boolean, 1), perm0},
                       {vec}, {Attr::graph("body", body)})[0];
    L.bind(0, cast(L, res, vec, out.dtype));
    return;
  }
  int64_t K = kd.value, m = md.value;
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

}  // namespace lax_linalg
