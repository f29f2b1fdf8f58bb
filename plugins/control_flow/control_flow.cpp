// control_flow: lax.cond / lax.switch (`cond`), lax.while_loop (`while`) and
// lax.scan (`scan`; lax.fori_loop becomes one of scan or while) as ONNX If and
// Loop, with their jaxprs lowered into subgraphs (ABI 1.1).
//
// Output quality:
//  - A loop carries only state that it uses: a carried value is dropped when
//    neither the equation's used outputs, the loop condition, nor any other
//    kept carried value or used scan output depends on it.
//  - Loop-invariant values are captured from the outer scope: consts, and
//    carried values that the body passes through unchanged, are never carried.
//  - Unused scan outputs are not stacked; unused xs are not sliced (the
//    subgraph prune removes the Gather and the capture). Unused cond outputs
//    are left out of the If and its branches.
//
// Complex values (carried packed, float[..., 2]: jaxonnx/complex.hpp) pass
// through unchanged: every If/Loop output, carried value and sliced x is
// declared with its packed type (complex::packed); stacking adds a leading
// axis, so the trailing 2 stays last, and xs are sliced along axis 0 as any
// other value. Subgraph inputs are packed by the host.
//
// scan is a Loop rather than an ONNX Scan: Scan cannot express a scan with no
// xs (its trip count comes from the scan inputs), and one lowering for scan,
// fori_loop and while keeps the carried-state analysis in one place. Reverse
// scans read xs at length-1-i and flip the stacked ys once (Slice, step -1).
#include <jaxonnx/complex.hpp>
#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;
using complex::packed;

Aval scalar_aval(int32_t dt) { return Aval(dt, {}); }

// ------------------------------------------------------------------ cond --

// cond(index, *operands; branches): runs branches[index]. Like XLA's
// conditional, an index outside [0, n) runs the last branch (lax.switch
// clamps before binding, so what it passes is already in range).
// Two branches: If(index == 0, b0, b1). More: the index is mapped to n-1 when
// negative, then a balanced tree of If(index < mid, ...): depth log2(n).
// Outputs nothing reads are left out of the If and of every branch.
struct CondLowering {
  Lowering& L;
  std::vector<const jxo_jaxpr*> branches;
  std::vector<Value> operands;
  std::vector<Aval> outs;      // of the used outputs
  std::vector<size_t> used;    // indices of the used outputs
  Value index = kNoValue;
  int32_t index_dtype = dtype::i32;

  std::vector<Value> branch(size_t k) {
    std::vector<Value> all = L.lower_jaxpr_into(branches[k], operands), kept;
    for (size_t i : used) kept.push_back(all[i]);
    return kept;
  }

  std::vector<Value> tree(size_t lo, size_t hi) {
    if (hi - lo == 1) return branch(lo);
    size_t mid = branches.size() == 2 ? 1 : (lo + hi) / 2;
    Value pred = branches.size() == 2
                     ? L.op("Equal", {index, scalar(L, index_dtype, 0)}, scalar_aval(dtype::boolean))
                     : L.op("Less", {index, scalar(L, index_dtype, static_cast<double>(mid))},
                            scalar_aval(dtype::boolean));
    Subgraph then_g = L.begin_subgraph("cond_" + std::to_string(lo) + "_" + std::to_string(mid));
    GraphRef t = then_g.end(tree(lo, mid));
    Subgraph else_g = L.begin_subgraph("cond_" + std::to_string(mid) + "_" + std::to_string(hi));
    GraphRef e = else_g.end(tree(mid, hi));
    return L.op_n("If", {pred}, outs, {Attr::graph("then_branch", t), Attr::graph("else_branch", e)});
  }
};

void lower_cond(Lowering& L) {
  CondLowering c{L, {}, {}, {}, {}};
  for (size_t i = 0; i < L.num_outputs(); ++i)
    if (L.output_used(i)) {
      c.used.push_back(i);
      c.outs.push_back(packed(L.out_aval(i)));
    }
  if (c.used.empty()) return;  // nothing reads the result: no If at all
  for (const Param& b : L.param("branches").items()) c.branches.push_back(b.as_jaxpr());
  size_t n = c.branches.size();
  if (n == 0) L.fail("cond has no branches");
  for (size_t i = 1; i < L.num_inputs(); ++i) c.operands.push_back(L.input(i));
  Aval idx = L.in_aval(0);
  if (idx.rank() != 0) L.fail("the branch index must be a scalar, got " + idx.str());
  c.index = L.input(0);
  c.index_dtype = idx.dtype;
  if (idx.dtype == dtype::boolean) {  // a predicate: false picks branch 0
    c.index = cast(L, c.index, idx, dtype::i32);
    c.index_dtype = dtype::i32;
  } else if (!dtype::is_int(idx.dtype)) {
    L.fail("the branch index must be an integer, got " + idx.str());
  }
  if (n > 2 && dtype::is_signed_int(c.index_dtype)) {
    Value negative = L.op("Less", {c.index, scalar(L, c.index_dtype, 0)}, scalar_aval(dtype::boolean));
    c.index = L.op("Where", {negative, scalar(L, c.index_dtype, static_cast<double>(n - 1)), c.index},
                   scalar_aval(c.index_dtype));
  }
  std::vector<Value> results = c.tree(0, n);
  for (size_t i = 0; i < results.size(); ++i) L.bind(c.used[i], results[i]);
}

// ----------------------------------------------------------------- loops --

// Which carried values a loop must carry. carry j of the body's outputs is
// `out_base + j`, of its inputs `in_base + j`.
struct CarryPlan {
  std::vector<bool> invariant;  // the body passes it through: captured, not carried
  std::vector<bool> live;       // something that is kept depends on it
  bool carried(size_t j) const { return live[j] && !invariant[j]; }
};

// `seeds[j]`: carry j is needed by the outputs, the condition or a used y.
CarryPlan plan_carries(const JaxprView& body, size_t in_base, size_t out_base, size_t n,
                       std::vector<bool> seeds) {
  CarryPlan p{std::vector<bool>(n, false), std::move(seeds)};
  for (size_t j = 0; j < n; ++j)
    p.invariant[j] = body.output_source(out_base + j) == static_cast<int64_t>(in_base + j);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t j = 0; j < n; ++j) {
      if (!p.live[j] || p.invariant[j]) continue;
      for (size_t i = 0; i < n; ++i)
        if (!p.live[i] && body.depends(out_base + j, in_base + i)) p.live[i] = changed = true;
    }
  }
  return p;
}

// A batched predicate (vmap of a while_loop whose condition depends on the
// batch) is a bool array: the loop runs while any element is true.
Value any_true(Lowering& L, Value pred, const Aval& a) {
  if (a.rank() == 0) return pred;
  Value as_int = cast(L, pred, a, dtype::i32);
  Value m = L.op("ReduceMax", {as_int}, scalar_aval(dtype::i32), {Attr::i("keepdims", 0)});
  return cast(L, m, scalar_aval(dtype::i32), dtype::boolean);
}

// Under a batched predicate, elements whose predicate is false keep their old
// value (as XLA's while lowering does): Where(pred, new, old), with the
// predicate's shape a prefix of the value's.
Value keep_finished(Lowering& L, Value pred, const Aval& pa, Value next, Value old, const Aval& a) {
  if (pa.rank() == 0) return next;
  if (a.rank() < pa.rank()) L.fail("while: a batched predicate " + pa.str() + " does not fit the carried " + a.str());
  Value p = pred;
  if (a.rank() > pa.rank()) {
    std::vector<int64_t> axes;
    for (int64_t d = pa.rank(); d < a.rank(); ++d) axes.push_back(d);
    Shape ps = pa.shape;
    for (size_t d = ps.size(); d < a.shape.size(); ++d) ps.push_back(1);
    p = L.op("Unsqueeze", {pred, i64s(L, axes)}, Aval(dtype::boolean, ps));
  }
  return where(L, p, next, old, a);  // a bool carry selects as uint8 (kernels.hpp)
}

// while(cond_consts..., body_consts..., init...; cond_jaxpr, body_jaxpr,
// cond_nconsts, body_nconsts) -> Loop without a trip count; the condition is
// evaluated once before the loop and at the end of each iteration.
void lower_while(Lowering& L) {
  JaxprView cond(L.api(), L.param("cond_jaxpr").as_jaxpr());
  JaxprView body(L.api(), L.param("body_jaxpr").as_jaxpr());
  size_t cn = static_cast<size_t>(L.param("cond_nconsts").as_int());
  size_t bn = static_cast<size_t>(L.param("body_nconsts").as_int());
  size_t k = L.num_outputs();
  if (L.num_inputs() != cn + bn + k) L.fail("while: inputs do not match cond_nconsts + body_nconsts + carries");

  std::vector<Value> cconsts, bconsts, init;
  for (size_t i = 0; i < cn; ++i) cconsts.push_back(L.input(i));
  for (size_t i = 0; i < bn; ++i) bconsts.push_back(L.input(cn + i));
  for (size_t j = 0; j < k; ++j) init.push_back(L.input(cn + bn + j));

  std::vector<bool> seeds(k);
  for (size_t j = 0; j < k; ++j) seeds[j] = L.output_used(j) || cond.depends(0, cn + j);
  CarryPlan plan = plan_carries(body, bn, 0, k, seeds);

  auto with = [](std::vector<Value> a, const std::vector<Value>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  Aval pred_aval = cond.out_aval(0);
  Value cond0 = any_true(L, L.lower_jaxpr_into(cond.get(), with(cconsts, init))[0], pred_aval);

  std::vector<Value> loop_init;
  std::vector<Aval> loop_avals;
  for (size_t j = 0; j < k; ++j)
    if (plan.carried(j)) {
      loop_init.push_back(init[j]);
      loop_avals.push_back(packed(L.in_aval(cn + bn + j)));
    }

  if (!loop_init.empty()) {
    Subgraph g = L.begin_subgraph("while_body");
    g.input(scalar_aval(dtype::i64), "iter");
    g.input(scalar_aval(dtype::boolean), "cond_in");
    std::vector<Value> state = init;  // not carried: the outer value (captured if read)
    for (size_t j = 0; j < k; ++j)
      if (plan.carried(j)) state[j] = g.input(L.in_aval(cn + bn + j), "carry");
    std::vector<Value> next = L.lower_jaxpr_into(body.get(), with(bconsts, state));
    Value pred = kNoValue;  // batched: the predicate of the values entering this iteration
    if (pred_aval.rank() > 0) pred = L.lower_jaxpr_into(cond.get(), with(cconsts, state))[0];
    for (size_t j = 0; j < k; ++j) {
      if (!plan.carried(j)) next[j] = init[j];
      else if (pred_aval.rank() > 0)
        next[j] = keep_finished(L, pred, pred_aval, next[j], state[j], packed(L.in_aval(cn + bn + j)));
    }
    Value cond_out = any_true(L, L.lower_jaxpr_into(cond.get(), with(cconsts, next))[0], pred_aval);
    std::vector<Value> outs{cond_out};
    for (size_t j = 0; j < k; ++j)
      if (plan.carried(j)) outs.push_back(next[j]);
    GraphRef gr = g.end(outs);
    std::vector<Value> finals =
        L.op_n("Loop", with({kNoValue, cond0}, loop_init), loop_avals, {Attr::graph("body", gr)});
    for (size_t j = 0, c = 0; j < k; ++j)
      if (plan.carried(j)) L.bind(j, finals[c++]);
  }
  for (size_t j = 0; j < k; ++j)
    if (!plan.carried(j) && L.output_used(j)) L.bind(j, init[j]);  // invariant
}

// A scan unrolled, for targets without Loop (tract has none; the reference
// evaluator and quantize_dynamic mishandle one): the body inlined once per
// step with xs[i] as a Gather at a constant index, the ys stacked by
// Unsqueeze + Concat in index order (a reverse scan's step j fills index
// length-1-j, as JAX's ys). Only where the length is static, nonzero and the
// unrolled graph stays small (kMaxUnrolledEqns body equations in all).
constexpr size_t kMaxUnrolledEqns = 20000;

bool unroll_scan(Lowering& L, const JaxprView& body, const std::vector<Value>& consts, const std::vector<Value>& init,
                 const std::vector<Value>& xs, const std::vector<bool>& y_used) {
  const Dim length = L.param("length").as_dim();
  if (!length.is_static() || length.value < 1 ||
      static_cast<size_t>(length.value) * std::max<size_t>(body.num_eqns(), 1) > kMaxUnrolledEqns)
    return false;
  const size_t n = static_cast<size_t>(length.value), k = init.size(), p = y_used.size(),
               nc = consts.size();
  const bool reverse = L.param("reverse").as_bool();
  std::vector<Value> carry = init;
  std::vector<std::vector<Value>> ys(p, std::vector<Value>(n, kNoValue));
  for (size_t step = 0; step < n; ++step) {
    const size_t index = reverse ? n - 1 - step : step;
    std::vector<Value> args = consts;
    args.insert(args.end(), carry.begin(), carry.end());
    for (size_t i = 0; i < xs.size(); ++i)
      args.push_back(L.op("Gather", {xs[i], scalar(L, dtype::i64, static_cast<double>(index))},
                          packed(body.in_aval(nc + k + i)), {Attr::i("axis", 0)}));
    std::vector<Value> res = L.inline_jaxpr(body.get(), args);
    std::copy(res.begin(), res.begin() + static_cast<std::ptrdiff_t>(k), carry.begin());
    for (size_t q = 0; q < p; ++q)
      if (y_used[q]) ys[q][index] = res[k + q];
  }
  for (size_t j = 0; j < k; ++j)
    if (L.output_used(j)) L.bind(j, carry[j]);
  for (size_t q = 0; q < p; ++q) {
    if (!y_used[q]) continue;
    const Aval out = packed(L.out_aval(k + q));
    Aval one = out;
    one.shape[0] = Dim(1);
    std::vector<Value> rows;
    for (Value y : ys[q]) rows.push_back(L.op("Unsqueeze", {y, i64s(L, {0})}, one));
    L.bind(k + q, rows.size() == 1 ? rows[0] : L.op("Concat", rows, out, {Attr::i("axis", 0)}));
  }
  return true;
}

// scan(consts..., init..., xs...; jaxpr, length, reverse, num_consts,
// num_carry, unroll, ...) -> Loop with trip count `length` (unrolled where the
// target lacks Loop: unroll_scan). Each iteration
// gathers its slice of every xs at the iteration index (length-1-i when
// reversed); the ys are Loop scan outputs, stacked in iteration order, so a
// reverse scan flips them once after the loop (Slice with step -1). `unroll`
// only changes XLA's schedule, never the result, and is ignored.
void lower_scan(Lowering& L) {
  JaxprView body(L.api(), L.param("jaxpr").as_jaxpr());
  size_t nc = static_cast<size_t>(L.param("num_consts").as_int());
  size_t k = static_cast<size_t>(L.param("num_carry").as_int());
  bool reverse = L.param("reverse").as_bool();
  Dim length = L.param("length").as_dim();
  size_t m = L.num_inputs() - nc - k;
  size_t p = L.num_outputs() - k;
  if (L.num_inputs() < nc + k || L.num_outputs() < k || body.num_inputs() != L.num_inputs() ||
      body.num_outputs() != L.num_outputs())
    L.fail("scan: the body jaxpr does not match num_consts / num_carry and the operands");

  std::vector<Value> consts, init, xs;
  for (size_t i = 0; i < nc; ++i) consts.push_back(L.input(i));
  for (size_t j = 0; j < k; ++j) init.push_back(L.input(nc + j));
  for (size_t i = 0; i < m; ++i) xs.push_back(L.input(nc + k + i));

  std::vector<bool> y_used(p);
  for (size_t q = 0; q < p; ++q) y_used[q] = L.output_used(k + q);
  if (!L.target_supports("Loop") && unroll_scan(L, body, consts, init, xs, y_used)) return;
  std::vector<bool> seeds(k);
  for (size_t j = 0; j < k; ++j) {
    seeds[j] = L.output_used(j);
    for (size_t q = 0; q < p; ++q) seeds[j] = seeds[j] || (y_used[q] && body.depends(k + q, nc + j));
  }
  CarryPlan plan = plan_carries(body, nc, 0, k, seeds);

  std::vector<Value> loop_init;
  std::vector<Aval> loop_avals;
  for (size_t j = 0; j < k; ++j)
    if (plan.carried(j)) {
      loop_init.push_back(init[j]);
      loop_avals.push_back(packed(L.in_aval(nc + j)));
    }
  bool any_y = false;
  for (size_t q = 0; q < p; ++q)
    if (y_used[q]) {
      loop_avals.push_back(packed(L.out_aval(k + q)));
      any_y = true;
    }

  if (!loop_init.empty() || any_y) {
    Value trip = length.is_static()
                     ? scalar(L, dtype::i64, static_cast<double>(length.value))
                     : reshape(L, dim_value(L, length), Aval(dtype::i64, {1}), scalar_aval(dtype::i64));
    Value last = kNoValue;  // length - 1, for reversed indexing
    if (reverse && m > 0)
      last = length.is_static() ? scalar(L, dtype::i64, static_cast<double>(length.value - 1))
                                : L.op("Sub", {trip, scalar(L, dtype::i64, 1)}, scalar_aval(dtype::i64));

    Subgraph g = L.begin_subgraph("scan_body");
    Value iter = g.input(scalar_aval(dtype::i64), "iter");
    Value cond_in = g.input(scalar_aval(dtype::boolean), "cond_in");
    std::vector<Value> args = consts;
    for (size_t j = 0; j < k; ++j)
      args.push_back(plan.carried(j) ? g.input(L.in_aval(nc + j), "carry") : init[j]);
    Value index = kNoValue;
    if (m > 0)
      index = reverse ? L.op("Sub", {last, iter}, scalar_aval(dtype::i64)) : iter;
    for (size_t i = 0; i < m; ++i)
      args.push_back(L.op("Gather", {xs[i], index}, packed(body.in_aval(nc + k + i)), {Attr::i("axis", 0)}));
    std::vector<Value> res = L.lower_jaxpr_into(body.get(), args);
    std::vector<Value> outs{cond_in};
    for (size_t j = 0; j < k; ++j)
      if (plan.carried(j)) outs.push_back(res[j]);
    for (size_t q = 0; q < p; ++q)
      if (y_used[q]) outs.push_back(res[k + q]);
    GraphRef gr = g.end(outs);

    std::vector<Value> loop_in{trip, scalar(L, dtype::boolean, 1)};
    loop_in.insert(loop_in.end(), loop_init.begin(), loop_init.end());
    std::vector<Value> results = L.op_n("Loop", loop_in, loop_avals, {Attr::graph("body", gr)});
    size_t r = 0;
    for (size_t j = 0; j < k; ++j)
      if (plan.carried(j)) L.bind(j, results[r++]);
    for (size_t q = 0; q < p; ++q) {
      if (!y_used[q]) continue;
      Value y = results[r++];
      if (reverse)
        y = L.op("Slice", {y, i64s(L, {-1}), i64s(L, {INT64_MIN}), i64s(L, {0}), i64s(L, {-1})},
                 packed(L.out_aval(k + q)));
      L.bind(k + q, y);
    }
  }
  for (size_t j = 0; j < k; ++j)
    if (!plan.carried(j) && L.output_used(j)) L.bind(j, init[j]);  // invariant
}

}  // namespace

JAXONNX_PLUGIN("control_flow", "0.1.0") {
  plugin.primitive("cond", lower_cond)
      .emits({"If", "Equal", "Less", "Where", "Cast"})
      .doc(onnx_doc("If"))
      .summary("lax.cond / lax.switch: If (a balanced tree of Ifs for more than two branches)");
  plugin.primitive("while", lower_while)
      .emits({"Loop", "ReduceMax", "Cast", "Unsqueeze", "Where"})
      .doc(onnx_doc("Loop"))
      .summary("lax.while_loop and fori_loop with dynamic bounds: Loop, condition at run time");
  plugin.primitive("scan", lower_scan)
      .emits({"Loop", "Gather", "Sub", "Slice", "Reshape", "Unsqueeze", "Concat"})
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("lax.scan and fori_loop with static bounds, forward and reverse: Loop with a trip count "
               "(unrolled for targets without Loop)");
}
