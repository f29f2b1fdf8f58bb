// Transpose folding: remove Transposes that only undo each other.
// Relies on typed values (a permuted value's type is rewritten with it).
// Rewrites, for t = Transpose(x, p):
//   1. t -> e1 -> ... -> ek -> Transpose(., q), with p∘q the identity and
//      each ei pure elementwise (unary, or binary whose other operand is a
//      size-1 value, or an initializer only it reads, permuted to match):
//      both Transposes go and e1..ek read x directly.
//   2. Transpose(Transpose(x, p), q) with p∘q not the identity: one
//      Transpose(x, p∘q).
//   3. op(Transpose(a, p), Transpose(b, p)) for an elementwise binary op:
//      Transpose(op(a, b), p), one Transpose instead of two.
//   4. Cast(Transpose(x, p)) with x bool: Transpose(Cast(x), p), the form
//      onnxruntime 1.31 does not crash on (see cast_first).
//   5. Transpose(t, q) with t = Transpose(x, p) read elsewhere too: it reads
//      x, permuted by p∘q (or is x, for the identity); t stays for its other
//      readers, so no node is added.
//   6. Squeeze(Transpose(x, p), axes), or a Reshape that only drops size-1
//      axes: Transpose(Squeeze(x, axes'), p') of lower rank (nothing when p'
//      is the identity), which 1 and 2 may then fold into a Transpose after
//      it. onnxruntime's Transpose walks a size-1 axis element by element,
//      and lax_dot's swapped plans leave one there (the decode step's
//      attention: [B, 2, 4, 1, 64] by (0, 1, 4, 2, 3), then squeezed and
//      transposed back).
// Refuses: any hop whose value has another reader or is a graph output (a
// branching consumer would still see the permuted layout), a
// non-elementwise op in the chain, permutations that do not cancel (1), a
// missing permutation on a value of unknown rank.
// Needs: topologically sorted, typed values.
// Guarantees: none of these patterns remains: no cancelling Transposes
// (1, 2, 5), no elementwise op of two equal Transposes (3), no Cast of a bool
// Transpose (4), no Transpose read only by a squeeze (6).
#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>

#include "jaxonnx/core/passes.hpp"
#include "onnx_ops.hpp"
#include "rewrite.hpp"

namespace jaxonnx::passes {
namespace {

using onnx_ops::Op;
using Perm = std::vector<int64_t>;

// A Transpose of a present input to one output (what every pattern starts from).
bool is_transpose(const ir::Node& n) {
  return onnx_ops::kind(n) == Op::Transpose && !n.inputs.empty() && n.inputs[0] != ir::kNoValue &&
         n.outputs.size() == 1;
}

bool perm_of(const ir::Graph& g, const ir::Node& n, Perm* perm) {
  if (const ir::Attribute* a = attribute(n, "perm")) {
    *perm = a->ints;
    return true;
  }
  const ir::Value& in = g.values[n.inputs[0]];
  if (!in.has_type || !in.type.known_rank) return false;
  perm->resize(in.type.dims.size());  // no perm: reverse the axes
  for (size_t k = 0; k < perm->size(); ++k) (*perm)[k] = static_cast<int64_t>(perm->size() - 1 - k);
  return true;
}

// Transpose(Transpose(x, p), q) == Transpose(x, r), r[i] = p[q[i]].
Perm compose(const Perm& p, const Perm& q) {
  Perm r(q.size());
  for (size_t i = 0; i < q.size(); ++i) r[i] = p[q[i]];
  return r;
}

Perm inverse(const Perm& p) {
  Perm inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = static_cast<int64_t>(i);
  return inv;
}

bool is_identity(const Perm& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

ir::Attribute perm_attr(const Perm& p) {
  ir::Attribute a;
  a.name = "perm";
  a.type = JXO_ATTR_INTS;
  a.ints = p;
  return a;
}

bool valid_perm(const Perm& p) {
  std::vector<bool> seen(p.size(), false);
  for (int64_t v : p) {
    if (v < 0 || v >= static_cast<int64_t>(p.size()) || seen[v]) return false;
    seen[v] = true;
  }
  return true;
}

// The type of a value laid out as Transpose(v, perm).
void permute_type(ir::Value& v, const Perm& perm) {
  if (!v.has_type || !v.type.known_rank || v.type.dims.size() != perm.size()) return;
  std::vector<Dim> dims(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) dims[i] = v.type.dims[perm[i]];
  v.type = Aval(v.type.dtype, std::move(dims));
}

bool size_one(const ir::Value& v, size_t rank) {
  if (!v.has_type || !v.type.known_rank || v.type.dims.size() > rank) return false;
  for (const Dim& d : v.type.dims)
    if (!d.is_static() || d.value != 1) return false;
  return true;
}

// Tensor `t` (rank <= perm.size(), right-aligned as broadcasting does)
// padded with leading 1s and laid out as Transpose(t, perm).
std::shared_ptr<const Tensor> transposed(const Tensor& t, const Perm& perm) {
  size_t rank = perm.size(), elem = dtype_size(t.dtype);
  std::vector<int64_t> dims(rank - t.dims.size(), 1);
  dims.insert(dims.end(), t.dims.begin(), t.dims.end());
  std::vector<int64_t> out_dims(rank), strides(rank, 1);
  for (size_t i = rank; i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  for (size_t i = 0; i < rank; ++i) out_dims[i] = dims[perm[i]];
  std::vector<char> bytes(t.nbytes);
  std::vector<int64_t> idx(rank, 0);  // index into the output
  for (int64_t k = 0, n = t.num_elements(); k < n; ++k) {
    int64_t src = 0;
    for (size_t i = 0; i < rank; ++i) src += idx[i] * strides[perm[i]];
    std::memcpy(bytes.data() + k * elem, static_cast<const char*>(t.data) + src * elem, elem);
    for (size_t i = rank; i-- > 0;) {
      if (++idx[i] < out_dims[i]) break;
      idx[i] = 0;
    }
  }
  return Tensor::copy_of(t.dtype, out_dims, bytes.data(), bytes.size());
}

// Patterns 1 and 2 found at the Transpose `first`: what fold_pair changes.
struct PairMatch {
  size_t first = 0, second = 0;  // the two Transposes
  Perm p, r;                     // first's permutation; r = p∘(second's)
  bool merge = false;            // pattern 2 (or 1 kept for an interface name): one Transpose(x, r)
  struct Hop { size_t node; size_t slot; };  // a chain node and its slot on the chain
  std::vector<Hop> chain;
  std::vector<size_t> constants;  // initializers of the chain, to permute
};

std::optional<PairMatch> find_pair(const ir::Graph& g, const Uses& uses, size_t first) {
  PairMatch m;
  m.first = first;
  const ir::Node& t = g.nodes[first];
  if (!is_transpose(t) || !perm_of(g, t, &m.p) || !valid_perm(m.p)) return std::nullopt;
  const ir::ValueId x = t.inputs[0];
  for (ir::ValueId v = t.outputs[0];;) {
    if (!uses.single_consumer(v)) return std::nullopt;
    int64_t reader = uses.first_consumer(g, v);
    if (reader < 0) return std::nullopt;
    size_t c = static_cast<size_t>(reader);
    const ir::Node& next = g.nodes[c];
    if (onnx_ops::kind(next) == Op::Transpose) {
      Perm q;
      if (!perm_of(g, next, &q) || q.size() != m.p.size()) return std::nullopt;
      m.second = c;
      m.r = compose(m.p, q);
      ir::ValueId last = m.chain.empty() ? x : g.nodes[m.chain.back().node].outputs[0];
      ir::ValueId z = next.outputs[0];
      // Pattern 2; or x is an interface value: keep one (identity) Transpose for the name.
      m.merge = !is_identity(m.r) ||
                (uses.is_output[z] && (uses.producer[last] < 0 || uses.is_output[last]));
      if (m.merge && !m.chain.empty()) return std::nullopt;  // pattern 1 refuses
      return m;
    }
    size_t slot = next.inputs[0] == v ? 0 : 1;
    if (onnx_ops::is_elementwise_binary(next)) {
      ir::ValueId other = next.inputs[1 - slot];
      if (other == ir::kNoValue) return std::nullopt;
      if (!size_one(g.values[other], m.p.size())) {
        auto init = uses.initializer.find(other);
        if (init == uses.initializer.end() || uses.reads[other] != 1 || uses.is_output[other] ||
            g.initializers[init->second].tensor->dims.size() > m.p.size() ||
            dtype_size(g.initializers[init->second].tensor->dtype) == 0)
          return std::nullopt;
        m.constants.push_back(init->second);
      }
    } else if (!onnx_ops::is_elementwise_unary(next)) {
      return std::nullopt;  // never across a non-elementwise op
    }
    const ir::Value& out = g.values[next.outputs[0]];
    if (!out.has_type || !out.type.known_rank || out.type.dims.size() != m.p.size())
      return std::nullopt;
    m.chain.push_back({c, slot});
    v = next.outputs[0];
  }
}

// Pattern 3 at the binary op `k`: the two Transposes it reads, and their perm.
struct SinkMatch {
  int64_t ta, tb;
  Perm p;
};

std::optional<SinkMatch> find_sink(const ir::Graph& g, const Uses& uses, size_t k) {
  const ir::Node& op = g.nodes[k];
  if (!onnx_ops::is_elementwise_binary(op)) return std::nullopt;
  ir::ValueId a = op.inputs[0], b = op.inputs[1], y = op.outputs[0];
  if (a == b || a == ir::kNoValue || b == ir::kNoValue) return std::nullopt;
  int64_t ta = uses.producer[a], tb = uses.producer[b];
  if (ta < 0 || tb < 0 || onnx_ops::kind(g.nodes[ta]) != Op::Transpose ||
      onnx_ops::kind(g.nodes[tb]) != Op::Transpose || !uses.single_consumer(a) ||
      !uses.single_consumer(b))
    return std::nullopt;
  Perm pa, pb;
  if (!perm_of(g, g.nodes[ta], &pa) || !perm_of(g, g.nodes[tb], &pb) || pa != pb ||
      !valid_perm(pa))
    return std::nullopt;
  const ir::Value& out = g.values[y];
  if (!out.has_type || !out.type.known_rank || out.type.dims.size() != pa.size())
    return std::nullopt;
  return SinkMatch{ta, tb, pa};
}

// Pattern 4 at the Transpose `t`: the Cast reading it, or -1.
int64_t find_cast(const ir::Graph& g, const Uses& uses, size_t t) {
  const ir::Node& tr = g.nodes[t];
  if (!is_transpose(tr)) return -1;
  ir::ValueId x = tr.inputs[0], u = tr.outputs[0];
  const ir::Value& in = g.values[x];
  if (!in.has_type || !in.type.known_rank || in.type.dtype != JXO_DTYPE_BOOL ||
      !uses.single_consumer(u))
    return -1;
  int64_t c = uses.first_consumer(g, u);
  if (c < 0 || onnx_ops::kind(g.nodes[c]) != Op::Cast) return -1;
  const ir::Node& cast = g.nodes[c];
  if (!attribute(cast, "to") || cast.inputs.size() != 1) return -1;
  return c;
}

// Pattern 5 at the Transpose `k`: the Transpose it reads (one read
// elsewhere too, else patterns 1 and 2 apply), or -1. An identity that
// bypass() would refuse (k defines a graph output and x is an interface
// value) does not count.
int64_t find_shortcut(const ir::Graph& g, const Uses& uses, size_t k) {
  const ir::Node& t = g.nodes[k];
  if (!is_transpose(t)) return -1;
  const int64_t inner = uses.producer[t.inputs[0]];
  if (inner < 0 || onnx_ops::kind(g.nodes[inner]) != Op::Transpose || uses.single_consumer(t.inputs[0]) ||
      g.nodes[inner].inputs.empty() || g.nodes[inner].inputs[0] == ir::kNoValue)
    return -1;
  Perm p, q;
  if (!perm_of(g, g.nodes[inner], &p) || !perm_of(g, t, &q) || p.size() != q.size() || !valid_perm(p) ||
      !valid_perm(q))
    return -1;
  if (is_identity(compose(p, q)) && !can_bypass(g, uses, k, g.nodes[inner].inputs[0])) return -1;
  return inner;
}

// Pattern 6 at the Transpose `t`: the Squeeze (or size-1-dropping Reshape)
// reading it, the axes of x it drops (sorted) and the permutation of what is
// left; nullopt if none.
struct SqueezeMatch {
  size_t squeeze;
  Perm axes, perm;
};

// The axes of `from` that `to` drops, if `to` is `from` without some static
// size-1 axes (the other dims equal, in order); else nullopt.
std::optional<std::vector<int64_t>> dropped_unit_axes(const ir::Value& from, const ir::Value& to) {
  if (!from.has_type || !from.type.known_rank || !to.has_type || !to.type.known_rank ||
      to.type.dims.size() >= from.type.dims.size())
    return std::nullopt;
  std::vector<int64_t> axes;
  size_t k = 0;
  for (size_t a = 0; a < from.type.dims.size(); ++a) {
    const Dim& d = from.type.dims[a];
    if (k < to.type.dims.size() && to.type.dims[k] == d) ++k;
    else if (d.is_static() && d.value == 1) axes.push_back(static_cast<int64_t>(a));
    else return std::nullopt;
  }
  if (k != to.type.dims.size()) return std::nullopt;
  return axes;
}

std::optional<SqueezeMatch> find_squeeze(const ir::Graph& g, const Uses& uses, size_t t) {
  const ir::Node& tr = g.nodes[t];
  Perm p;
  if (!is_transpose(tr) || !perm_of(g, tr, &p) || !valid_perm(p) || !uses.single_consumer(tr.outputs[0]))
    return std::nullopt;
  const ir::Value& x = g.values[tr.inputs[0]];
  if (!x.has_type || !x.type.known_rank || x.type.dims.size() != p.size()) return std::nullopt;
  const int64_t c = uses.first_consumer(g, tr.outputs[0]);
  if (c < 0) return std::nullopt;
  const ir::Node& reader = g.nodes[c];
  std::vector<int64_t> axes;
  if (onnx_ops::kind(reader) == Op::Squeeze && reader.inputs.size() == 2) {
    const Tensor* axes_t = uses.constant(g, reader.inputs[1]);
    if (!axes_t || !to_ints(*axes_t, &axes) || axes.empty()) return std::nullopt;
  } else if (onnx_ops::kind(reader) == Op::Reshape && reader.outputs.size() == 1) {
    // A Reshape that only drops size-1 axes is that Squeeze.
    auto unit = dropped_unit_axes(g.values[tr.outputs[0]], g.values[reader.outputs[0]]);
    if (!unit) return std::nullopt;
    axes = *unit;
  } else {
    return std::nullopt;
  }
  const auto rank = static_cast<int64_t>(p.size());
  std::vector<bool> dropped(p.size(), false);  // by axis of x
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    const int64_t from = p[static_cast<size_t>(a < 0 ? a + rank : a)];
    const Dim& d = x.type.dims[static_cast<size_t>(from)];
    if (!d.is_static() || d.value != 1) return std::nullopt;
    dropped[static_cast<size_t>(from)] = true;
  }
  SqueezeMatch m{static_cast<size_t>(c), {}, {}};
  std::vector<int64_t> new_axis(p.size(), -1);  // x's kept axes, renumbered
  for (size_t a = 0, k = 0; a < p.size(); ++a) {
    if (dropped[a]) m.axes.push_back(static_cast<int64_t>(a));
    else new_axis[a] = static_cast<int64_t>(k++);
  }
  for (int64_t v : p)
    if (!dropped[static_cast<size_t>(v)]) m.perm.push_back(new_axis[static_cast<size_t>(v)]);
  return m;
}

class TransposeFolding : public Pass {
 public:
  const char* name() const override { return "transpose"; }
  Properties needs() const override { return {topologically_sorted(), typed_values()}; }
  Properties guarantees() const override {
    return {no_cancelling_transposes(), no_transposes_to_sink(), no_cast_of_bool_transpose(),
            no_transpose_before_squeeze()};
  }

  // Sweeps in node order with the use lists kept current; a node is retried
  // while it changes (sink_pair leaves a Transpose in its slot that may fold
  // further). A rewrite can enable one upstream (a shortcut leaves the
  // Transpose it bypassed with a single reader, a pair for pattern 2), so
  // sweeps repeat until one changes nothing: usually one more, each linear.
  bool run(ir::Graph& g) override {
    Uses uses(g);
    bool changed = false;
    for (bool swept = true; swept;) {
      swept = false;
      for (size_t k = 0; k < g.nodes.size(); ++k) {
        for (bool again = true; again && !is_erased(g.nodes[k]);) {
          again = fold_pair(g, uses, k) || cast_first(g, uses, k) || sink_pair(g, uses, k) ||
                  shortcut(g, uses, k) || squeeze_first(g, uses, k);
          swept = swept || again;
        }
      }
      changed = changed || swept;
    }
    erase_marked(g);
    return changed;
  }

 private:
  // Patterns 1 and 2, starting at the Transpose `first`.
  static bool fold_pair(ir::Graph& g, Uses& uses, size_t first) {
    std::optional<PairMatch> m = find_pair(g, uses, first);
    if (!m) return false;
    if (m->merge) {  // `second` becomes Transpose(first's input, r)
      uses.set_input(g, m->second, 0, g.nodes[first].inputs[0]);
      g.nodes[m->second].attrs = {perm_attr(m->r)};
      uses.erase(g, first);
      return true;
    }
    const ir::ValueId x = g.nodes[first].inputs[0];
    ir::ValueId last = m->chain.empty() ? x : g.nodes[m->chain.back().node].outputs[0];
    Perm inv = inverse(m->p);
    for (size_t init : m->constants) {
      ir::Initializer& i = g.initializers[init];
      i.tensor = transposed(*i.tensor, inv);
      std::vector<Dim> dims;
      for (int64_t d : i.tensor->dims) dims.push_back(Dim{d, {}});
      g.values[i.value].has_type = true;
      g.values[i.value].type = Aval(i.tensor->dtype, std::move(dims));
    }
    for (const PairMatch::Hop& h : m->chain) permute_type(g.values[g.nodes[h.node].outputs[0]], inv);
    if (!m->chain.empty()) uses.set_input(g, m->chain[0].node, m->chain[0].slot, x);
    uses.erase(g, first);
    bypass(g, uses, m->second, last);
    return true;
  }

  // Pattern 5 at the Transpose `k`.
  static bool shortcut(ir::Graph& g, Uses& uses, size_t k) {
    const int64_t inner = find_shortcut(g, uses, k);
    if (inner < 0) return false;
    Perm p, q;
    perm_of(g, g.nodes[inner], &p);
    perm_of(g, g.nodes[k], &q);
    const Perm r = compose(p, q);
    const ir::ValueId x = g.nodes[inner].inputs[0];
    if (is_identity(r) && bypass(g, uses, k, x)) return true;
    if (is_identity(r)) return false;  // an interface value: keep the pair
    uses.set_input(g, k, 0, x);
    g.nodes[k].attrs = {perm_attr(r)};
    return true;
  }

  // Pattern 4 at the Transpose `t`: Transpose(bool x) read only by a Cast
  // becomes Cast(x) then Transpose. onnxruntime 1.31's default
  // optimizations crash (SIGSEGV at session creation) on Transpose -> Cast
  // from bool -> MatMul; the swapped form is equivalent and runs.
  static bool cast_first(ir::Graph& g, Uses& uses, size_t t) {
    int64_t c = find_cast(g, uses, t);
    if (c < 0) return false;
    ir::Node &tr = g.nodes[t], &cast = g.nodes[c];
    const ir::Value& in = g.values[tr.inputs[0]];
    // Same slots, same values: node t now casts x into u, node c transposes u into y.
    ir::Value& mid = g.values[tr.outputs[0]];
    mid.has_type = true;
    mid.type = Aval(static_cast<int32_t>(attribute(cast, "to")->i), in.type.dims);
    std::swap(tr.op_type, cast.op_type);
    std::swap(tr.attrs, cast.attrs);
    std::swap(tr.name, cast.name);
    return true;
  }

  // Pattern 6 at the Transpose `t`: node t squeezes x into u (retyped),
  // the Squeeze's node transposes u into y, or is bypassed for the identity.
  static bool squeeze_first(ir::Graph& g, Uses& uses, size_t t) {
    std::optional<SqueezeMatch> m = find_squeeze(g, uses, t);
    if (!m) return false;
    const ir::ValueId x = g.nodes[t].inputs[0], u = g.nodes[t].outputs[0];
    const ir::ValueId y = g.nodes[m->squeeze].outputs[0];
    std::vector<Dim> dims;
    for (size_t a = 0; a < g.values[x].type.dims.size(); ++a)
      if (!std::binary_search(m->axes.begin(), m->axes.end(), static_cast<int64_t>(a)))
        dims.push_back(g.values[x].type.dims[a]);
    ir::Node squeeze = g.nodes[m->squeeze], transpose = g.nodes[t];
    squeeze.op_type = onnx_ops::op_name(Op::Squeeze);  // the reader may be a Reshape dropping size-1 axes
    squeeze.attrs.clear();
    squeeze.inputs = {x, add_ints(g, g.values[u].name + "/axes", m->axes, &uses)};
    squeeze.outputs = {u};
    transpose.inputs = {u};
    transpose.outputs = {y};
    transpose.attrs = {perm_attr(m->perm)};
    g.values[u].has_type = true;
    g.values[u].type = Aval(g.values[x].type.dtype, std::move(dims));
    uses.erase(g, t);
    uses.erase(g, m->squeeze);
    g.nodes[t] = std::move(squeeze);
    uses.add_node(g, t);
    g.nodes[m->squeeze] = std::move(transpose);
    uses.add_node(g, m->squeeze);
    if (is_identity(m->perm)) bypass(g, uses, m->squeeze, u);
    return true;
  }

  // Pattern 3 at the binary op `k`.
  static bool sink_pair(ir::Graph& g, Uses& uses, size_t k) {
    std::optional<SinkMatch> m = find_sink(g, uses, k);
    if (!m) return false;
    const int64_t ta = m->ta, tb = m->tb;
    ir::Node& op = g.nodes[k];
    ir::ValueId a = op.inputs[0], y = op.outputs[0];
    // op(a', b') -> a (reusing a's value, read only here), then Transpose(a) -> y.
    // The op takes the later Transpose's slot (after a' and b' are made),
    // the Transpose the op's (before y's readers): no node moves.
    ir::Node moved = op, transpose = g.nodes[ta];
    moved.inputs = {g.nodes[ta].inputs[0], g.nodes[tb].inputs[0]};
    moved.outputs = {a};
    transpose.inputs = {a};
    transpose.outputs = {y};
    ir::Value& mid = g.values[a];
    mid.has_type = true;
    mid.type = g.values[y].type;
    permute_type(mid, inverse(m->p));
    size_t slot = static_cast<size_t>(std::max(ta, tb));
    uses.erase(g, static_cast<size_t>(ta));
    uses.erase(g, static_cast<size_t>(tb));
    uses.erase(g, k);
    g.nodes[slot] = std::move(moved);
    uses.add_node(g, slot);
    g.nodes[k] = std::move(transpose);
    uses.add_node(g, k);
    return true;
  }
};

std::string at(const ir::Graph& g, size_t k) {
  return "node #" + std::to_string(k) + " " + g.nodes[k].op_type + " '" + g.nodes[k].name + "'";
}

}  // namespace

std::unique_ptr<Pass> transpose_folding() { return std::make_unique<TransposeFolding>(); }

Property no_cancelling_transposes() {
  return {"no cancelling Transposes", [](const ir::Graph& g) -> std::string {
            Uses uses(g);
            for (size_t k = 0; k < g.nodes.size(); ++k)
              if (std::optional<PairMatch> m = find_pair(g, uses, k))
                return at(g, k) + " and " + at(g, m->second) +
                       (m->chain.empty() ? " compose" : " cancel across elementwise ops");
              else if (int64_t inner = find_shortcut(g, uses, k); inner >= 0)
                return at(g, static_cast<size_t>(inner)) + " and " + at(g, k) +
                       " compose (the first read elsewhere too)";
            return {};
          }};
}

Property no_transposes_to_sink() {
  return {"no elementwise op of two equal Transposes", [](const ir::Graph& g) -> std::string {
            Uses uses(g);
            for (size_t k = 0; k < g.nodes.size(); ++k)
              if (find_sink(g, uses, k)) return at(g, k) + " reads two equal Transposes";
            return {};
          }};
}

Property no_transpose_before_squeeze() {
  return {"no Transpose read only by a squeeze", [](const ir::Graph& g) -> std::string {
            Uses uses(g);
            for (size_t k = 0; k < g.nodes.size(); ++k)
              if (std::optional<SqueezeMatch> m = find_squeeze(g, uses, k))
                return at(g, m->squeeze) + " squeezes " + at(g, k);
            return {};
          }};
}

Property no_cast_of_bool_transpose() {
  return {"no Cast of a bool Transpose", [](const ir::Graph& g) -> std::string {
            Uses uses(g);
            for (size_t k = 0; k < g.nodes.size(); ++k)
              if (int64_t c = find_cast(g, uses, k); c >= 0)
                return at(g, static_cast<size_t>(c)) + " casts the bool " + at(g, k);
            return {};
          }};
}

}  // namespace jaxonnx::passes
