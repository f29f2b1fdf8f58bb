// cache_attention: attention over a growing key/value cache, as a decoder
// step for onnxruntime-genai writes it (docs/llm.md), becomes onnxruntime's
// com.microsoft.GroupQueryAttention under a target that runs that domain
// (target="onnxruntime-contrib"); its present key and value outputs take
// over the graph's present outputs, so that genai can bind one buffer as both
// past and present (past_present_share_buffer) and decode reads only the
// filled prefix.
//
// The forms recognized (after lowering): JAX's einsum/where/softmax attention
// as tests/python/llm_models.py writes it, and jax.nn.dot_product_attention
// with a mask, which plugins/nn_attention lowers to its standard form
// (MatMul, Mul, Where, Softmax, MatMul) under this target when the keys are
// a cache (P + S of them for S queries):
//   keys   = Concat(past_key, new_key) on axis 2     [B, kv, P + S, D], a graph output
//   values = Concat(past_value, new_value) on axis 2 [B, kv, P + S, D], a graph output
//   q      = [B, S, heads, D], or reshaped to [B, S, kv, group, D] (q head h uses kv head h / group)
//   scores = einsum("bskgd,bktd->bkgst", q, keys) / c, or q . keys^T * c per head
//            (optionally softcap: cap * tanh(scores / cap))
//   scores = where(mask, scores, m) with m <= -1e30 (JAX writes finfo.min, nn_attention -0.7 max)
//   out    = softmax(scores, -1) . values, back to [B, S, heads..., D]
// where mask is the conjunction of two or three terms, recognized by
// evaluating the index arithmetic that builds them (Range, Shape, Add, Mul,
// Cast, Unsqueeze, CumSum, ...) symbolically:
//   padding: attention_mask[b, t] == 1, attention_mask a [B, P + S] integer graph input;
//   causal:  t <= s + (P + S) - S, t ranging over the keys and s over the new tokens;
//   optionally a sliding window over positions (local_window_size, below).
// Anything else (no padding term, a causal offset off by one, a window
// counted in slots, another head grouping) does not match. Where q and the
// new keys are rotated by the rotate-half rope (rope_of) and heads are of a
// multiple of 16, the op applies the rotary itself (do_rotary): measured
// 0.92x the decode time in genai (docs/llm.md).
//
// What GroupQueryAttention computes (onnxruntime 1.31, CPU): per row b it
// attends the first seqlens_k[b] + 1 slots of its cache, causally, the new
// tokens at the end of that prefix, and writes the new keys there. With
// seqlens_k = ReduceSum(attention_mask == 1) - 1 that is the program's
// attention whenever the mask has genai's form: each row's prompt tokens
// (ones), then padding (zeros) at its end, then one 1 per generated token.
// GroupQueryAttention then keeps each row's real tokens contiguous (a
// generated token overwrites the first padding slot), so its present holds
// the same keys as the program's Concat in fewer slots; a step fed a mask
// with zeros between ones is outside what the replacement computes. The
// attention output of a padding query differs too (genai never reads it).
#include <jaxonnx/plugin.hpp>
#include <jaxonnx/reshape_by_value.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

// -- symbolic sizes: a linear form over dimension symbols ------------------
struct Lin {
  std::map<std::string, int64_t> terms;
  int64_t k = 0;
  Lin operator+(const Lin& o) const {
    Lin r = *this;
    r.k += o.k;
    for (const auto& [s, c] : o.terms)
      if ((r.terms[s] += c) == 0) r.terms.erase(s);
    return r;
  }
  Lin scaled(int64_t f) const {
    Lin r;
    if (f == 0) return r;
    r.k = k * f;
    for (const auto& [s, c] : terms) r.terms[s] = c * f;
    return r;
  }
  bool operator==(const Lin& o) const { return k == o.k && terms == o.terms; }
  bool constant() const { return terms.empty(); }
};

// "past_sequence_length + sequence_length", "2*sequence_length", "s - 1", "8"
// as a linear form; nullopt for anything else (a product of symbols, floor...).
std::optional<Lin> parse_dim(const Dim& d) {
  Lin out;
  if (d.is_static()) {
    out.k = d.value;
    return out;
  }
  const std::string& s = d.symbol;
  size_t i = 0;
  int sign = 1;
  auto skip = [&] { while (i < s.size() && s[i] == ' ') ++i; };
  auto ident = [&](std::string& name) {
    size_t b = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
    name = s.substr(b, i - b);
    return !name.empty();
  };
  while (true) {
    skip();
    std::string a, b;
    if (!ident(a)) return std::nullopt;
    int64_t coef = 1;
    std::string sym;
    auto number = [](const std::string& x) { return std::all_of(x.begin(), x.end(), ::isdigit); };
    skip();
    if (i < s.size() && s[i] == '*') {
      ++i;
      skip();
      if (!ident(b)) return std::nullopt;
      if (number(a) && !number(b)) coef = std::stoll(a), sym = b;
      else if (!number(a) && number(b)) coef = std::stoll(b), sym = a;
      else return std::nullopt;
    } else if (number(a)) {
      out.k += sign * std::stoll(a);
    } else {
      sym = a;
    }
    if (!sym.empty() && (out.terms[sym] += sign * coef) == 0) out.terms.erase(sym);
    skip();
    if (i == s.size()) return out;
    if (s[i] == '+') sign = 1;
    else if (s[i] == '-') sign = -1;
    else return std::nullopt;
    ++i;
  }
}

// -- index arithmetic, evaluated symbolically -------------------------------
// A value of the mask's computations: either a 1-D vector of sizes (what
// Shape makes) or an integer tensor whose element at index (i_0, i_1, ...) is
//   base + sum over axes a of coef[a] * i_a + sum over sources of coef * src[i_(axis_of[0]), i_(axis_of[1])]
// where a source is a [B, L] integer graph input, or its CumSum along axis 1.
// ext gives each axis's size (nullopt: 1).
struct Source {
  Value v = kNoValue;
  bool cumsum = false;
  int64_t coef = 1;
  std::vector<int> axis_of;  // per axis of the source: the tensor axis it runs along
  bool operator==(const Source& o) const { return v == o.v && cumsum == o.cumsum && axis_of == o.axis_of; }
};
struct Index {
  bool is_vec = false;
  std::vector<Lin> vec;
  std::vector<std::optional<Lin>> ext;
  Lin base;
  std::map<int, int64_t> coef;
  std::vector<Source> srcs;

  // Axes inserted or removed: old axis a is now where[a] (-1: removed, only a size-1 axis).
  bool remap(const std::vector<int>& where, size_t rank) {
    std::vector<std::optional<Lin>> e(rank);
    for (size_t a = 0; a < ext.size(); ++a) {
      if (where[a] < 0) {
        if (ext[a]) return false;
        continue;
      }
      e[where[a]] = ext[a];
    }
    std::map<int, int64_t> c;
    for (const auto& [a, k] : coef) {
      if (where[a] < 0) return false;
      c[where[a]] = k;
    }
    for (Source& s : srcs)
      for (int& a : s.axis_of) {
        if (where[a] < 0) return false;
        a = where[a];
      }
    ext = e;
    coef = c;
    return true;
  }
  bool constant_scalar() const {
    return !is_vec && coef.empty() && srcs.empty() && base.constant() &&
           std::none_of(ext.begin(), ext.end(), [](const auto& e) { return e.has_value(); });
  }
};

// A conjunct of the mask: expr <= 0, or (padding) the graph input `mask` == 1
// with its batch and key axes at axes (per tensor axis: 0, 1 or -1).
struct Term {
  bool padding = false;
  Index expr;
  Value mask = kNoValue;
  std::vector<int> axes;
};
struct Mask {
  size_t rank = 0;
  std::vector<Term> terms;
};

// Where Unsqueeze(axes) moves the axes of a rank-(out_rank - axes.size()) value.
std::optional<std::vector<int>> unsqueezed(const std::vector<int64_t>& axes, size_t out_rank) {
  std::vector<bool> inserted(out_rank, false);
  for (int64_t a : axes) {
    if (a < 0) a += static_cast<int64_t>(out_rank);
    if (a < 0 || a >= static_cast<int64_t>(out_rank) || inserted[a]) return std::nullopt;
    inserted[a] = true;
  }
  std::vector<int> where;
  for (size_t i = 0; i < out_rank; ++i)
    if (!inserted[i]) where.push_back(static_cast<int>(i));
  return where;
}

class Analysis {
 public:
  explicit Analysis(Rewrite& R) : R_(R) {}

  std::optional<Index> eval(Value v, int depth = 0) {
    if (depth > 32) return std::nullopt;
    if (R_.constant(v)) return constant(v);
    const Aval av = R_.aval(v);
    if (av.unknown_rank) return std::nullopt;
    const int64_t n = R_.producer(v);
    if (n < 0) return source(v, false);
    if (R_.num_outputs(n) != 1) return std::nullopt;
    const std::string_view op = R_.op_type(n);
    if (!R_.is(n, op)) return std::nullopt;  // another domain
    auto in = [&](size_t i) { return eval(R_.input(n, i), depth + 1); };
    if (op == "Identity") return in(0);
    if (op == "Cast") {
      const int64_t to = R_.attr_int(n, "to", 0);
      if (to != dtype::i32 && to != dtype::i64) return std::nullopt;
      return in(0);
    }
    if (op == "CumSum") {  // of a source along its axis 1
      auto axis = R_.splat(R_.input(n, 1));
      if (!axis || R_.attr_int(n, "exclusive", 0) != 0 || R_.attr_int(n, "reverse", 0) != 0 ||
          R_.producer(R_.input(n, 0)) >= 0 || (*axis != 1 && *axis != -1))
        return std::nullopt;
      return source(R_.input(n, 0), true);
    }
    if (op == "Shape") {
      Aval a = R_.aval(R_.input(n, 0));
      if (a.unknown_rank) return std::nullopt;
      int64_t r = static_cast<int64_t>(a.rank());
      int64_t start = R_.attr_int(n, "start", 0), end = R_.attr_int(n, "end", r);
      if (start < 0) start += r;
      if (end < 0) end += r;
      start = std::clamp<int64_t>(start, 0, r), end = std::clamp<int64_t>(end, 0, r);
      Index out;
      out.is_vec = true;
      for (int64_t i = start; i < end; ++i) {
        auto d = parse_dim(a.shape[i]);
        if (!d) return std::nullopt;
        out.vec.push_back(*d);
      }
      return out;
    }
    if (op == "Squeeze" || op == "Unsqueeze") {
      auto x = in(0);
      if (!x) return std::nullopt;
      std::vector<int64_t> axes;
      if (R_.num_inputs(n) > 1 && R_.input(n, 1) != kNoValue) {
        auto c = R_.constant_values(R_.input(n, 1));
        if (!c) return std::nullopt;
        for (double a : *c) axes.push_back(static_cast<int64_t>(a));
      } else if (auto a = R_.attr_ints(n, "axes")) {
        axes = *a;
      }
      if (x->is_vec) {  // [1] -> []
        if (op != "Squeeze" || x->vec.size() != 1) return std::nullopt;
        Index s;
        s.base = x->vec[0];
        return s;
      }
      const size_t out_rank = av.rank(), in_rank = x->ext.size();
      if (op == "Unsqueeze") {
        auto where = unsqueezed(axes, out_rank);
        if (!where || where->size() != in_rank || !x->remap(*where, out_rank)) return std::nullopt;
        return x;
      }
      std::vector<bool> removed(in_rank, axes.empty());
      for (int64_t a : axes) {
        if (a < 0) a += static_cast<int64_t>(in_rank);
        if (a < 0 || a >= static_cast<int64_t>(in_rank)) return std::nullopt;
        removed[a] = true;
      }
      std::vector<int> where;
      int k = 0;
      for (size_t i = 0; i < in_rank; ++i) where.push_back(removed[i] ? -1 : k++);
      if (static_cast<size_t>(k) != out_rank || !x->remap(where, out_rank)) return std::nullopt;
      return x;
    }
    if (op == "Range") {
      auto start = in(0), limit = in(1), delta = in(2);
      if (!start || !limit || !delta || !is_const(*start, 0) || !is_const(*delta, 1)) return std::nullopt;
      if (limit->is_vec || !limit->coef.empty() || !limit->srcs.empty() || !limit->ext.empty()) return std::nullopt;
      Index out;
      out.ext = {limit->base};
      out.coef[0] = 1;
      return out;
    }
    if (op == "Add" || op == "Sub") {
      auto a = in(0), b = in(1);
      if (!a || !b) return std::nullopt;
      return combine(*a, *b, op == "Sub" ? -1 : 1);
    }
    if (op == "Mul") {
      auto a = in(0), b = in(1);
      if (!a || !b) return std::nullopt;
      if (auto f = factor(*a)) return scale(*b, *f, a->ext.size());
      if (auto f = factor(*b)) return scale(*a, *f, b->ext.size());
      return std::nullopt;
    }
    return std::nullopt;
  }

  // a + sign * b, broadcast.
  static std::optional<Index> combine(Index a, Index b, int64_t sign) {
    Index out;
    if (a.is_vec || b.is_vec) {  // sizes; a constant of one element broadcasts
      auto as_vec = [](const Index& x) -> std::optional<std::vector<Lin>> {
        if (x.is_vec) return x.vec;
        if (x.constant_scalar() && x.ext.size() <= 1) return std::vector<Lin>{x.base};
        return std::nullopt;
      };
      auto va = as_vec(a), vb = as_vec(b);
      if (!va || !vb) return std::nullopt;
      const size_t n = std::max(va->size(), vb->size());
      if ((va->size() != n && va->size() != 1) || (vb->size() != n && vb->size() != 1)) return std::nullopt;
      out.is_vec = true;
      for (size_t i = 0; i < n; ++i)
        out.vec.push_back((*va)[va->size() == 1 ? 0 : i] + (*vb)[vb->size() == 1 ? 0 : i].scaled(sign));
      return out;
    }
    const size_t r = std::max(a.ext.size(), b.ext.size());
    for (Index* x : {&a, &b}) {  // numpy broadcasting: align on the right
      std::vector<int> where;
      for (size_t i = 0; i < x->ext.size(); ++i) where.push_back(static_cast<int>(i + r - x->ext.size()));
      if (!x->remap(where, r)) return std::nullopt;
    }
    out.ext.resize(r);
    for (size_t i = 0; i < r; ++i) {
      if (a.ext[i] && b.ext[i] && !(*a.ext[i] == *b.ext[i])) return std::nullopt;
      out.ext[i] = a.ext[i] ? a.ext[i] : b.ext[i];
    }
    out.base = a.base + b.base.scaled(sign);
    out.coef = a.coef;
    for (const auto& [axis, c] : b.coef)
      if ((out.coef[axis] += sign * c) == 0) out.coef.erase(axis);
    out.srcs = a.srcs;
    for (Source s : b.srcs) {
      s.coef *= sign;
      auto same = std::find(out.srcs.begin(), out.srcs.end(), s);
      if (same == out.srcs.end()) out.srcs.push_back(s);
      else if ((same->coef += s.coef) == 0) out.srcs.erase(same);
    }
    return out;
  }

  // The mask's conjuncts, or nullopt when it is built otherwise.
  std::optional<Mask> mask(Value v, int depth = 0) {
    if (depth > 32) return std::nullopt;
    const int64_t n = R_.producer(v);
    if (n < 0 || R_.num_outputs(n) != 1 || R_.aval(v).dtype != dtype::boolean || R_.aval(v).unknown_rank)
      return std::nullopt;
    const std::string_view op = R_.op_type(n);
    if (!R_.is(n, op)) return std::nullopt;
    const size_t rank = R_.aval(v).rank();
    if (op == "Identity") return mask(R_.input(n, 0), depth + 1);
    if (op == "Unsqueeze") {
      auto m = mask(R_.input(n, 0), depth + 1);
      auto c = R_.constant_values(R_.input(n, 1));
      if (!m || !c) return std::nullopt;
      std::vector<int64_t> axes(c->begin(), c->end());
      auto where = unsqueezed(axes, rank);
      if (!where || where->size() != m->rank) return std::nullopt;
      for (Term& t : m->terms) {
        std::vector<int> out(rank, -1);
        for (size_t i = 0; i < t.axes.size(); ++i) out[(*where)[i]] = t.axes[i];
        t.axes = out;
        if (!t.padding && !t.expr.remap(*where, rank)) return std::nullopt;
      }
      m->rank = rank;
      return m;
    }
    if (op == "And") {
      auto a = mask(R_.input(n, 0), depth + 1), b = mask(R_.input(n, 1), depth + 1);
      if (!a || !b) return std::nullopt;
      Mask out;
      out.rank = rank;
      for (Mask* m : {&*a, &*b})
        for (Term t : m->terms) {
          std::vector<int> where;
          for (size_t i = 0; i < m->rank; ++i) where.push_back(static_cast<int>(i + rank - m->rank));
          t.axes.insert(t.axes.begin(), rank - m->rank, -1);
          if (!t.padding && !t.expr.remap(where, rank)) return std::nullopt;
          out.terms.push_back(t);
        }
      return out;
    }
    if (op == "Equal") {  // attention_mask == 1, either operand order
      for (size_t side : {0, 1}) {
        Value one = R_.input(n, 1 - side);
        if (!R_.is_splat(one, 1.0)) continue;
        auto x = eval(R_.input(n, side));
        if (!x || x->is_vec || x->srcs.size() != 1 || !x->coef.empty() || !x->base.constant() || x->base.k != 0 ||
            x->srcs[0].cumsum || x->srcs[0].coef != 1)
          return std::nullopt;
        Term t;
        t.padding = true;
        t.mask = x->srcs[0].v;
        t.axes.assign(rank, -1);
        t.axes.at(x->srcs[0].axis_of[0] + rank - x->ext.size()) = 0;
        t.axes.at(x->srcs[0].axis_of[1] + rank - x->ext.size()) = 1;
        return Mask{rank, {t}};
      }
      return std::nullopt;
    }
    // expr <= 0 from a comparison of integer tensors
    static const std::map<std::string_view, std::pair<int, int>> cmp = {
        {"LessOrEqual", {1, 0}}, {"Less", {1, 1}}, {"GreaterOrEqual", {-1, 0}}, {"Greater", {-1, 1}}};
    auto it = cmp.find(op);
    if (it == cmp.end()) return std::nullopt;
    auto a = eval(R_.input(n, 0)), b = eval(R_.input(n, 1));
    if (!a || !b || a->is_vec || b->is_vec) return std::nullopt;
    auto diff = it->second.first > 0 ? combine(*a, *b, -1) : combine(*b, *a, -1);
    if (!diff || diff->ext.size() > rank) return std::nullopt;
    diff->base.k += it->second.second;  // x < 0 is x + 1 <= 0 over the integers
    std::vector<int> where;
    for (size_t i = 0; i < diff->ext.size(); ++i) where.push_back(static_cast<int>(i + rank - diff->ext.size()));
    if (!diff->remap(where, rank)) return std::nullopt;
    Term t;
    t.expr = *diff;
    return Mask{rank, {t}};
  }

 private:
  // A [B, L] integer graph input (or its cumulative sum along L).
  std::optional<Index> source(Value v, bool cumsum) {
    Aval a = R_.aval(v);
    if (R_.producer(v) >= 0 || R_.constant(v) || a.rank() != 2 || (a.dtype != dtype::i32 && a.dtype != dtype::i64))
      return std::nullopt;
    Index out;
    for (const Dim& d : a.shape) {
      auto l = parse_dim(d);
      if (!l) return std::nullopt;
      out.ext.push_back(*l);
    }
    out.srcs.push_back(Source{v, cumsum, 1, {0, 1}});
    return out;
  }
  // A constant: one element (a scalar, or a vector of one size) or a vector of sizes.
  std::optional<Index> constant(Value v) {
    auto values = R_.constant_values(v);
    Aval a = R_.aval(v);
    if (!values || values->empty() || a.unknown_rank) return std::nullopt;
    Index out;
    for (double x : *values) {
      if (x != static_cast<double>(static_cast<int64_t>(x))) return std::nullopt;
      out.vec.push_back(Lin{{}, static_cast<int64_t>(x)});
    }
    if (values->size() == 1) {
      out.vec.clear();
      out.base.k = static_cast<int64_t>(values->front());
      out.ext.assign(a.rank(), std::nullopt);
      return out;
    }
    if (a.rank() != 1) return std::nullopt;
    out.is_vec = true;
    return out;
  }
  static bool is_const(const Index& x, int64_t k) {
    if (x.is_vec) return x.vec.size() == 1 && x.vec[0].constant() && x.vec[0].k == k;
    return x.constant_scalar() && x.base.k == k;
  }
  static std::optional<int64_t> factor(const Index& x) {
    if (x.is_vec) return x.vec.size() == 1 && x.vec[0].constant() ? std::optional<int64_t>(x.vec[0].k) : std::nullopt;
    if (!x.constant_scalar()) return std::nullopt;
    return x.base.k;
  }
  static std::optional<Index> scale(Index x, int64_t f, size_t other_rank) {
    if (x.is_vec) {
      for (Lin& l : x.vec) l = l.scaled(f);
      return x;
    }
    x.base = x.base.scaled(f);
    for (auto& [axis, c] : x.coef) c *= f;
    for (Source& s : x.srcs) s.coef *= f;
    if (other_rank > x.ext.size()) {
      std::vector<int> where;
      for (size_t i = 0; i < x.ext.size(); ++i) where.push_back(static_cast<int>(i + other_rank - x.ext.size()));
      if (!x.remap(where, other_rank)) return std::nullopt;
    }
    return x;
  }

  Rewrite& R_;
};

// -- the attention chain ----------------------------------------------------
bool transpose_is(Rewrite& R, int64_t n, const std::vector<int64_t>& perm) {
  if (n < 0 || !R.is(n, "Transpose")) return false;
  auto p = R.attr_ints(n, "perm");
  return p && *p == perm;
}
// perm with the axis a (of size 1) dropped from both sides.
std::vector<int64_t> drop_axis(const std::vector<int64_t>& perm, int64_t a) {
  std::vector<int64_t> out;
  for (int64_t p : perm)
    if (p != a) out.push_back(p > a ? p - 1 : p);
  return out;
}
// The one axis a Squeeze removes or an Unsqueeze inserts, else -1.
int64_t single_axis(Rewrite& R, int64_t node) {
  if (node < 0 || !(R.is(node, "Squeeze") || R.is(node, "Unsqueeze")) || R.num_outputs(node) != 1) return -1;
  std::vector<int64_t> axes;
  if (R.num_inputs(node) > 1) {
    auto c = R.constant_values(R.input(node, 1));
    if (!c) return -1;
    for (double x : *c) axes.push_back(static_cast<int64_t>(x));
  } else if (auto a = R.attr_ints(node, "axes")) {
    axes = *a;
  }
  const Aval big = R.aval(R.is(node, "Squeeze") ? R.input(node, 0) : R.output(node));
  if (axes.size() != 1 || big.unknown_rank) return -1;
  int64_t a = axes[0] < 0 ? axes[0] + static_cast<int64_t>(big.rank()) : axes[0];
  return a >= 0 && a < static_cast<int64_t>(big.rank()) && big.shape[a] == Dim(1) ? a : -1;
}
// x where v = transpose(x, perm), spelled as one Transpose or, when an axis
// of x has size 1, as Unsqueeze(Transpose(Squeeze(x, a), perm without a), b)
// (the transpose pass's form) or without the Unsqueeze (`unsqueezed` false:
// the reader took the axis out); kNoValue otherwise.
Value transposed_from(Rewrite& R, Value v, const std::vector<int64_t>& perm, bool unsqueezed = true) {
  int64_t t = R.producer(v);
  if (transpose_is(R, t, perm) && R.num_outputs(t) == 1) return R.input(t, 0);
  int64_t u = -1;
  if (unsqueezed) {
    u = R.def(v, "Unsqueeze");
    if (u < 0) return kNoValue;
    t = R.producer(R.input(u, 0));
  }
  if (t < 0 || !R.is(t, "Transpose") || R.num_outputs(t) != 1) return kNoValue;
  const int64_t sq = R.def(R.input(t, 0), "Squeeze");
  const int64_t a = single_axis(R, sq);
  if (a < 0) return kNoValue;
  if (unsqueezed) {
    const int64_t b = single_axis(R, u);
    if (b < 0 || perm[b] != a) return kNoValue;
  }
  auto p = R.attr_ints(t, "perm");
  if (!p || *p != drop_axis(perm, a)) return kNoValue;
  return R.input(sq, 0);
}

// Concat(past, new) on axis 2 of rank-4 operands, past a graph input; the
// node, or -1.
int64_t cache_concat(Rewrite& R, Value v) {
  int64_t n = R.def(v, "Concat");
  if (n < 0 || R.num_inputs(n) != 2 || R.aval(v).rank() != 4) return -1;
  int64_t axis = R.attr_int(n, "axis", 0);
  if (axis != 2 && axis != -2) return -1;
  Value past = R.input(n, 0);
  if (R.producer(past) >= 0 || R.constant(past)) return -1;
  return n;
}

// One matcher for both products of the attention (scores and output):
// v = [Transpose(perm)] of Reshape([Mul or Div by a positive constant] of
// MatMul(a, b)). The Transpose is optional where perm is empty, and may be the
// transpose pass's form of it (transposed_from); the constant, a scale folded
// into `scale` (jax.nn.dot_product_attention's, which nn_attention applies
// to the product).
struct Product {
  int64_t matmul = -1, reshape = -1;
  double scale = 1;
  bool scaled = false;
};
std::optional<Product> product(Rewrite& R, Value v, const std::vector<int64_t>& perm, bool unsqueezed) {
  if (!perm.empty() && (v = transposed_from(R, v, perm, unsqueezed)) == kNoValue) return std::nullopt;
  Product p;
  p.reshape = R.def(v, "Reshape");
  if (p.reshape < 0) return std::nullopt;
  Value x = R.input(p.reshape, 0);
  if (int64_t div = R.def(x, "Div"); div >= 0) {
    auto c = R.splat(R.input(div, 1));
    if (!c || !(*c > 0)) return std::nullopt;
    p.scale = 1.0 / *c, p.scaled = true, x = R.input(div, 0);
  } else if (int64_t mul = R.def(x, "Mul"); mul >= 0) {
    for (size_t side : {0, 1})
      if (auto c = R.splat(R.input(mul, side)); c && *c > 0 && !p.scaled)
        p.scale = *c, p.scaled = true, x = R.input(mul, 1 - side);
    if (!p.scaled) return std::nullopt;
  }
  p.matmul = R.def(x, "MatMul");
  if (p.matmul < 0) return std::nullopt;
  const Aval m = R.aval(x), scaled = R.aval(R.input(p.reshape, 0));  // the constant broadcasts nothing
  if (m.unknown_rank || scaled.unknown_rank || !(m.shape == scaled.shape)) return std::nullopt;
  return p;
}
// x where v = Reshape(transpose(x, perm)) (q moved to the product's layout), else kNoValue.
Value reshaped_from(Rewrite& R, Value v, const std::vector<int64_t>& perm) {
  const int64_t r = R.def(v, "Reshape");
  return r < 0 ? kNoValue : transposed_from(R, R.input(r, 0), perm);
}

// -- rotary embeddings inside GroupQueryAttention (do_rotary) ----------------
// The rotate-half rope tests/python/llm_models.py writes (public JAX Llama
// code's), on x [B, S, n, D]:
//   Concat(x1 * cos - x2 * sin, x2 * cos + x1 * sin) on the last axis,
//   x1, x2 = x's first and second halves (Slices),
//   cos, sin = Cos, Sin of ang [B, S, 1, D/2] = float(position_ids)[:, :, None, None] * freqs,
// position_ids a [B, S] integer graph input and freqs a [D/2] float32 value
// (broadcast along the last axis). GroupQueryAttention with do_rotary=1 takes
// cos_cache and sin_cache [T, D/2], indexed by each token's position, which
// it derives from seqlens_k (onnxruntime 1.31, CPU: the token's index for a
// first prompt, seqlens_k - S + 1 + s after it): cumsum(attention_mask) - 1
// for the real tokens of a mask of genai's form, which is what genai feeds as
// position_ids. Built here as Cos and Sin of float(Range(T)) [T, 1] * freqs,
// the program's own product for t = position, so the tables hold the
// program's values; the rotation itself is the program's formula.
struct Rope {
  Value x = kNoValue, cos = kNoValue, sin = kNoValue, positions = kNoValue, freqs = kNoValue;
};
// v = Mul(other, trig) in either order, trig made by `op`: {other, trig}.
std::optional<std::pair<Value, Value>> times(Rewrite& R, Value v, std::string_view op) {
  const int64_t mul = R.def(v, "Mul");
  if (mul < 0) return std::nullopt;
  for (size_t side : {0, 1})
    if (R.def(R.input(mul, side), op) >= 0) return std::make_pair(R.input(mul, 1 - side), R.input(mul, side));
  return std::nullopt;
}
// x [.., D] where v = x[..., from:from + n] (a Slice along the last axis, step 1), else kNoValue.
Value slice_of(Rewrite& R, Value v, int64_t from, int64_t n, const Dim& D) {
  const int64_t s = R.def(v, "Slice");
  if (s < 0 || R.num_inputs(s) < 4) return kNoValue;
  const Aval a = R.aval(R.input(s, 0)), out = R.aval(v);
  if (a.unknown_rank || a.rank() != 4 || a.shape[3] != D || out.unknown_rank || out.rank() != 4 ||
      out.shape[3] != Dim(n))
    return kNoValue;
  auto starts = R.constant_values(R.input(s, 1)), ends = R.constant_values(R.input(s, 2)),
       axes = R.constant_values(R.input(s, 3));
  if (!starts || !ends || !axes || starts->size() != 1 || ends->size() != 1 || axes->size() != 1) return kNoValue;
  if ((*axes)[0] != 3 && (*axes)[0] != -1) return kNoValue;
  if (R.num_inputs(s) > 4 && R.input(s, 4) != kNoValue && !R.is_splat(R.input(s, 4), 1)) return kNoValue;
  if ((*starts)[0] != static_cast<double>(from)) return kNoValue;  // n elements from there: the output's size
  return R.input(s, 0);
}
std::optional<Rope> rope_of(Rewrite& R, Value v) {
  const Aval va = R.aval(v);
  if (va.unknown_rank || va.rank() != 4 || !va.shape[3].is_static() || va.shape[3].value % 2 != 0) return std::nullopt;
  const int64_t d = va.shape[3].value, half = d / 2;
  const int64_t cat = R.def(v, "Concat");
  if (cat < 0 || R.num_inputs(cat) != 2) return std::nullopt;
  if (int64_t axis = R.attr_int(cat, "axis", 0); axis != 3 && axis != -1) return std::nullopt;
  const int64_t sub = R.def(R.input(cat, 0), "Sub"), add = R.def(R.input(cat, 1), "Add");
  if (sub < 0 || add < 0) return std::nullopt;
  auto a = times(R, R.input(sub, 0), "Cos"), b = times(R, R.input(sub, 1), "Sin");  // x1 * cos - x2 * sin
  if (!a || !b) return std::nullopt;
  for (size_t side : {0, 1}) {  // x2 * cos + x1 * sin, in either order
    auto c = times(R, R.input(add, side), "Cos"), s = times(R, R.input(add, 1 - side), "Sin");
    if (!c || !s || c->first != b->first || s->first != a->first || c->second != a->second || s->second != b->second)
      continue;
    Rope rope;
    rope.cos = a->second, rope.sin = b->second;
    rope.x = slice_of(R, a->first, 0, half, va.shape[3]);
    if (rope.x == kNoValue || slice_of(R, b->first, half, half, va.shape[3]) != rope.x ||
        !(R.aval(rope.x).shape == va.shape))
      return std::nullopt;
    const Value ang = R.input(R.producer(rope.cos), 0);
    if (R.input(R.producer(rope.sin), 0) != ang) return std::nullopt;
    // ang = Unsqueeze(Cast(position_ids)) [B, S, 1, 1] * freqs [1, 1, 1, D/2]
    const Aval aa = R.aval(ang);
    if (aa.unknown_rank || aa.dtype != dtype::f32 || !(aa.shape == Shape{va.shape[0], va.shape[1], Dim(1), Dim(half)}))
      return std::nullopt;
    const int64_t mul = R.def(ang, "Mul");
    if (mul < 0) return std::nullopt;
    for (size_t p : {0, 1}) {
      const Value pos = R.input(mul, p), freqs = R.input(mul, 1 - p);
      const Aval pa = R.aval(pos), fa = R.aval(freqs);
      if (pa.unknown_rank || fa.unknown_rank || fa.dtype != dtype::f32 || fa.rank() < 1 ||
          !(pa.shape == Shape{va.shape[0], va.shape[1], Dim(1), Dim(1)}))
        continue;
      bool leading_ones = fa.shape.back() == Dim(half);
      for (size_t i = 0; i + 1 < fa.rank(); ++i) leading_ones = leading_ones && fa.shape[i] == Dim(1);
      const int64_t un = R.def(pos, "Unsqueeze");
      const int64_t cast = un < 0 ? -1 : R.def(R.input(un, 0), "Cast");
      if (!leading_ones || cast < 0 || R.attr_int(cast, "to", 0) != dtype::f32) continue;
      const Value ids = R.input(cast, 0);
      const Aval ia = R.aval(ids);
      if (R.producer(ids) >= 0 || R.constant(ids) || ia.unknown_rank ||
          (ia.dtype != dtype::i32 && ia.dtype != dtype::i64) || !(ia.shape == Shape{va.shape[0], va.shape[1]}))
        continue;
      rope.positions = ids, rope.freqs = freqs;
      return rope;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

// The root: the Transpose of the attention output [B, heads..., S, D] to the
// model's [B, S, heads..., D], heads... being kv, g (JAX's einsum attention as
// tests/python/llm_models.py writes it) or kv*g (nn_attention's standard form
// of jax.nn.dot_product_attention over a cache). Both take the group's query
// rows of one key/value head together: out = Reshape(probs [B, kv, g*S, T] @
// values); the scores are
//   einsum:  Transpose [0, 1, 4, 3, 2] of Reshape(keys @ qr [B, kv, D, S*g]) / c
//   nn_attention: Reshape(q_rows [B, kv, g*S, D] @ keys^T * c)
// (onnx_fusion's matmul_transposed_result leaves keys the step returns in the
// first form, and with one key/value head the transpose pass's Squeeze form
// keeps it from the scores anyway).
void cache_attention(Rewrite& R) {
  const int64_t root = R.root();
  if (!R.target_supports("com.microsoft") || R.opset() < 15 || R.num_outputs(root) != 1) return;
  // r: the rank of the per-head tensors [B, heads..., S, .]
  size_t r = 0;
  std::optional<Product> out;
  for (size_t rank : {5, 4}) {  // perm: S to axis 1
    std::vector<int64_t> perm = {0, static_cast<int64_t>(rank) - 2};
    for (size_t i = 1; i + 2 < rank; ++i) perm.push_back(static_cast<int64_t>(i));
    perm.push_back(static_cast<int64_t>(rank) - 1);
    if ((out = product(R, R.output(root), perm, false))) {
      r = rank;
      break;
    }
  }
  if (!out || out->scaled) return;
  const Value values = R.input(out->matmul, 1);
  const int64_t vcat = cache_concat(R, values);
  const int64_t r_probs = R.def(R.input(out->matmul, 0), "Reshape");
  if (vcat < 0 || r_probs < 0) return;
  const Value probs = R.input(r_probs, 0);
  const int64_t softmax = R.def(probs, "Softmax");
  if (softmax < 0) return;
  const int64_t axis = R.attr_int(softmax, "axis", -1);
  if (axis != -1 && axis != static_cast<int64_t>(r) - 1) return;
  const int64_t where = R.def(R.input(softmax, 0), "Where");
  if (where < 0) return;
  auto blocked = R.splat(R.input(where, 2));
  if (!blocked || !(*blocked <= -1e30)) return;
  // logits: [softcap] of [scale] of the scores
  Value logits = R.input(where, 1);
  double softcap = 0;
  if (int64_t mul = R.def(logits, "Mul"); mul >= 0) {  // cap * tanh(x / cap)
    for (size_t side : {0, 1}) {
      auto cap = R.splat(R.input(mul, side));
      int64_t tanh = R.def(R.input(mul, 1 - side), "Tanh");
      if (!cap || tanh < 0 || !(*cap > 0)) continue;
      int64_t div = R.def(R.input(tanh, 0), "Div");
      if (div < 0 || !R.is_splat(R.input(div, 1), *cap)) continue;
      softcap = *cap;
      logits = R.input(div, 0);
      break;
    }
  }
  double scale = 1;
  bool scaled = false;
  if (int64_t div = R.def(logits, "Div"); div >= 0) {
    if (auto c = R.splat(R.input(div, 1)); c && *c > 0) scale = 1.0 / *c, scaled = true, logits = R.input(div, 0);
  } else if (int64_t mul = R.def(logits, "Mul"); mul >= 0) {
    for (size_t side : {0, 1})
      if (auto c = R.splat(R.input(mul, side)); c && *c > 0 && !scaled)
        scale = *c, scaled = true, logits = R.input(mul, 1 - side);
  }
  std::vector<int64_t> perm_q = {0};  // q [B, S, heads..., D] -> [B, heads..., S, D]
  for (size_t i = 2; i + 1 < r; ++i) perm_q.push_back(static_cast<int64_t>(i));
  perm_q.push_back(1);
  perm_q.push_back(static_cast<int64_t>(r) - 1);
  auto scores = product(R, logits, {}, true);
  Value keys = kNoValue, q = kNoValue;
  const bool rows_first = scores.has_value();  // nn_attention's form
  if (rows_first) {
    keys = transposed_from(R, R.input(scores->matmul, 1), {0, 1, 3, 2});
    q = reshaped_from(R, R.input(scores->matmul, 0), perm_q);
  } else if (r == 5 && (scores = product(R, logits, {0, 1, 4, 3, 2}, true))) {  // the einsum's
    keys = R.input(scores->matmul, 0);
    q = reshaped_from(R, R.input(scores->matmul, 1), {0, 2, 4, 1, 3});
  }
  if (!scores || (scaled && scores->scaled) || keys == kNoValue || q == kNoValue) return;
  if (scores->scaled) scale = scores->scale;
  const int64_t kcat = cache_concat(R, keys);
  if (kcat < 0) return;

  // Shapes, which fix what each Reshape does: splits and merges of
  // contiguous axes only, B first and the last axis kept (or, in the
  // einsum's scores, the keys' T), the heads kv then g.
  const Value q_prod = R.input(scores->matmul, rows_first ? 0 : 1);
  const Value q_moved = R.input(R.def(q_prod, "Reshape"), 0);
  const Aval qa = R.aval(q), qm = R.aval(q_moved), qp = R.aval(q_prod), k4 = R.aval(keys), v4 = R.aval(values),
             sc = R.aval(R.output(scores->matmul)), sr = R.aval(R.output(scores->reshape)), lg = R.aval(logits),
             wh = R.aval(R.output(where)), pa = R.aval(probs), pr = R.aval(R.output(r_probs)),
             om = R.aval(R.output(out->matmul)), oh = R.aval(R.output(out->reshape));
  for (const Aval* a : {&qa, &qm, &qp, &k4, &v4, &sc, &sr, &lg, &wh, &pa, &pr, &om, &oh})
    if (a->unknown_rank || a->dtype != dtype::f32) return;
  for (const Aval* a : {&qa, &qm, &sr, &lg, &wh, &pa, &oh})
    if (a->rank() != r) return;
  for (const Aval* a : {&qp, &sc, &pr, &om})
    if (a->rank() != 4) return;
  const Dim B = qa.shape[0], S = qa.shape[1], D = qa.shape[r - 1], T = k4.shape[2], KV = k4.shape[1];
  if (!D.is_static() || !KV.is_static() || KV.value <= 0) return;
  const int64_t kv = KV.value, d = D.value;
  int64_t heads = 1;
  std::vector<Dim> hd;  // heads...
  for (size_t i = 2; i + 1 < r; ++i) {
    if (!qa.shape[i].is_static()) return;
    heads *= qa.shape[i].value;
    hd.push_back(qa.shape[i]);
  }
  if (heads % kv != 0 || (r == 5 && hd[0] != KV)) return;
  auto per_head = [&](const Aval& a, const Dim& last) {  // [B, heads..., S, last]
    if (a.shape[0] != B || a.shape[r - 2] != S || a.shape[r - 1] != last) return false;
    for (size_t i = 0; i < hd.size(); ++i)
      if (a.shape[i + 1] != hd[i]) return false;
    return true;
  };
  // [B, kv, third, last], an axis given as nullopt of any size (the merged g*S)
  auto grouped = [&](const Aval& a, std::optional<Dim> third, std::optional<Dim> last) {
    return a.shape[0] == B && a.shape[1] == KV && (!third || a.shape[2] == *third) && (!last || a.shape[3] == *last);
  };
  if (!per_head(lg, T) || !per_head(wh, T) || !per_head(pa, T) || !per_head(oh, D)) return;
  if (!grouped(pr, std::nullopt, T) || !grouped(om, std::nullopt, D)) return;
  if (rows_first) {  // q [B, heads..., S, D] -> [B, kv, g*S, D] @ [B, kv, D, T]
    if (!per_head(qm, D) || !grouped(qp, std::nullopt, D) || !grouped(sc, std::nullopt, T) || !per_head(sr, T)) return;
  } else {  // [B, kv, T, D] @ ([B, kv, D, S, g] -> [B, kv, D, S*g]) -> [B, kv, T, S, g]
    const Dim G = hd[1];
    if (!(qm.shape == Shape{B, KV, D, S, G}) || !grouped(qp, D, std::nullopt) || !grouped(sc, T, std::nullopt) ||
        !(sr.shape == Shape{B, KV, T, S, G}))
      return;
  }
  for (const Aval* a : {&k4, &v4})
    if (a->shape[0] != B || a->shape[1] != KV || a->shape[2] != T || a->shape[3] != D) return;
  // The root's [B, S, heads..., D], maybe less a size-1 axis: GQA's [B, S, heads * D] reshaped.
  const Aval root_aval = R.aval(R.output(root));
  if (root_aval.unknown_rank || root_aval.rank() < 3 || root_aval.shape[0] != B || root_aval.shape[1] != S) return;
  std::vector<int64_t> root_shape = {0, 0};
  for (size_t i = 2; i < root_aval.rank(); ++i) {
    if (!root_aval.shape[i].is_static()) return;
    root_shape.push_back(root_aval.shape[i].value);
  }
  if (d % 8 != 0) return;  // onnxruntime's GroupQueryAttention needs head sizes in multiples of 8

  // The mask: exactly padding and causal (and a sliding window), placed on the
  // logits' batch (0), query (r - 2) and key (r - 1) axes.
  const int qx = static_cast<int>(r) - 2, kx = static_cast<int>(r) - 1;
  Analysis A(R);
  auto mask = A.mask(R.input(where, 0));
  if (!mask || mask->rank != r || mask->terms.size() < 2 || mask->terms.size() > 3) return;
  auto lin_b = parse_dim(B), lin_s = parse_dim(S), lin_t = parse_dim(T);
  if (!lin_b || !lin_s || !lin_t) return;
  Value attention_mask = kNoValue;
  bool causal = false;
  int64_t window = 0;
  const Term* window_term = nullptr;
  // Sizes on the logits' axes: only those named may be other than 1.
  auto sized = [&](const Index& x, const std::map<int, Lin>& want) {
    for (int a = 0; a < static_cast<int>(r); ++a) {
      auto w = want.find(a);
      if (w == want.end() ? x.ext[a].has_value() : !(x.ext[a] && *x.ext[a] == w->second)) return false;
    }
    return true;
  };
  std::vector<int> padding_axes(r, -1);
  padding_axes[0] = 0, padding_axes[kx] = 1;
  for (const Term& t : mask->terms) {
    if (t.padding) {  // attention_mask [B, T] == 1
      Aval m = R.aval(t.mask);
      if (attention_mask != kNoValue || t.axes != padding_axes || m.shape[0] != B || m.shape[1] != T) return;
      attention_mask = t.mask;
    } else if (t.expr.srcs.empty()) {  // key - query - (T - S) <= 0
      if (causal || t.expr.coef != std::map<int, int64_t>{{qx, -1}, {kx, 1}} ||
          !sized(t.expr, {{qx, *lin_s}, {kx, *lin_t}}))
        return;
      if (!(t.expr.base + *lin_t + lin_s->scaled(-1) == Lin{})) return;
      causal = true;
    } else {
      window_term = &t;
    }
  }
  if (!causal || attention_mask == kNoValue) return;
  if (window_term) {
    // position_ids[b, s] - (cumsum(attention_mask)[b, t] - 1) < window, i.e.
    // position_ids - cumsum + 2 - window <= 0: the key's position (real tokens
    // before it) within window - 1 of the query's. GroupQueryAttention's
    // local_window_size counts the same way (window keys, the query's own included).
    const Index& x = window_term->expr;
    if (!x.coef.empty() || x.srcs.size() != 2 || !x.base.constant() ||
        !sized(x, {{0, *lin_b}, {qx, *lin_s}, {kx, *lin_t}}))
      return;
    const Source& pos = x.srcs[0].cumsum ? x.srcs[1] : x.srcs[0];
    const Source& keys_pos = x.srcs[0].cumsum ? x.srcs[0] : x.srcs[1];
    if (pos.cumsum || !keys_pos.cumsum || pos.coef != 1 || keys_pos.coef != -1 || keys_pos.v != attention_mask ||
        pos.v == attention_mask || pos.axis_of != std::vector<int>{0, qx} ||
        keys_pos.axis_of != std::vector<int>{0, kx})
      return;
    window = 2 - x.base.k;
    if (window < 1) return;
  }
  // present = the Concats, both graph outputs (the cache the step returns).
  if (!R.is_graph_output(keys) || !R.is_graph_output(values)) return;

  // x [B, S, kv, D] where new keys or values [B, kv, S, D] = its Transpose, or
  // (one key/value head) its Reshape; else kNoValue.
  auto bshd = [&](Value x) {
    const int64_t t = R.producer(x);
    if (transpose_is(R, t, {0, 2, 1, 3}) && R.num_outputs(t) == 1) return R.input(t, 0);
    if (kv == 1 && t >= 0 && R.is(t, "Reshape")) {
      const Aval a = R.aval(R.input(t, 0));
      if (!a.unknown_rank && a.shape == Shape{B, S, Dim(1), D}) return R.input(t, 0);
    }
    return kNoValue;
  };
  // Rotary inside the op (do_rotary) where the program's rope of q and of
  // the new keys is rope_of's, with the same tables, and the head size a
  // multiple of 16 (onnxruntime's kernel requires it for do_rotary).
  std::optional<Rope> rq, rk;
  if (d % 16 == 0) {
    Value q4 = q;  // [B, S, heads, D]; the einsum's [B, S, kv, g, D] is a Reshape of it
    if (int64_t rs = R.def(q, "Reshape"); r == 5 && rs >= 0) q4 = R.input(rs, 0);
    const Aval a4 = R.aval(q4);
    const Value k4 = bshd(R.input(kcat, 1));
    if (!a4.unknown_rank && a4.shape == Shape{B, S, Dim(heads), D} && k4 != kNoValue)
      rq = rope_of(R, q4), rk = rope_of(R, k4);
    if (!rq || !rk || rq->cos != rk->cos || rq->sin != rk->sin || rq->positions == attention_mask)
      rq.reset(), rk.reset();
  }

  // -- the replacement
  auto rows = [&](Value x, int64_t n) {  // [B, S, n heads..., D] -> [B, S, n*D]
    return reshape_by_value(R, x, R.i64s({0, 0, n * d}), Aval(dtype::f32, {B, S, Dim(n * d)}), true);
  };
  // new keys/values [B, kv, S, D] -> [B, S, kv*D], through the Transpose (or Reshape) that made them if there is one
  auto new_rows = [&](int64_t cat) {
    Value x = R.input(cat, 1);
    if (Value y = bshd(x); y != kNoValue) return rows(y, kv);
    Aval a = R.aval(x);
    Aval at(dtype::f32, {a.shape[0], a.shape[2], a.shape[1], a.shape[3]});
    Value y = R.op("Transpose", {x}, at, {Attr::ints("perm", {0, 2, 1, 3})});
    return rows(y, kv);
  };
  for (int64_t cat : {kcat, vcat}) {
    Aval n = R.aval(R.input(cat, 1));
    if (n.rank() != 4 || n.shape[0] != B || n.shape[1] != KV || n.shape[2] != S || n.shape[3] != D) return;
  }
  const Aval mask_aval = R.aval(attention_mask);
  const int32_t one = 1;
  Value ones = R.op("Equal", {attention_mask, mask_aval.dtype == dtype::i32 ? R.constant(dtype::i32, {}, &one, 4)
                                                                       : R.i64s({1})},
                    Aval(dtype::boolean, mask_aval.shape));
  Value count = R.op("Cast", {ones}, Aval(dtype::i32, mask_aval.shape), {Attr::i("to", dtype::i32)});
  Value total_ones = R.op("ReduceSum", {count, R.i64s({1})}, Aval(dtype::i32, {B}), {Attr::i("keepdims", 0)});
  Value seqlens = R.op("Sub", {total_ones, R.constant(dtype::i32, {}, &one, 4)}, Aval(dtype::i32, {B}));
  Value width = R.op("Shape", {attention_mask}, Aval(dtype::i64, {Dim(1)}), {Attr::i("start", 1), Attr::i("end", 2)});
  Value total = R.op("Cast", {R.op("Squeeze", {width}, Aval(dtype::i64, {}))}, Aval(dtype::i32, {}),
                     {Attr::i("to", dtype::i32)});
  std::vector<Attr> attrs = {Attr::i("num_heads", heads), Attr::i("kv_num_heads", kv), Attr::f("scale", scale)};
  if (softcap > 0) attrs.push_back(Attr::f("softcap", softcap));
  if (window > 0) attrs.push_back(Attr::i("local_window_size", window));
  std::vector<Value> ins = {rq ? rows(rq->x, heads) : rows(q, heads), rk ? rows(rk->x, kv) : new_rows(kcat),
                            new_rows(vcat), R.input(kcat, 0), R.input(vcat, 0), seqlens, total};
  if (rq) {  // cos_cache, sin_cache [T, D/2] = Cos, Sin of float(Range(T))[:, None] * freqs (see rope_of)
    const Dim T1 = mask_aval.shape[1];
    const int64_t zero = 0, step = 1;
    Value t = R.op("Range", {R.constant(dtype::i64, {}, &zero, 8), R.op("Squeeze", {width}, Aval(dtype::i64, {})),
                            R.constant(dtype::i64, {}, &step, 8)},
                   Aval(dtype::i64, {T1}));
    Value tf = R.op("Unsqueeze", {R.op("Cast", {t}, Aval(dtype::f32, {T1}), {Attr::i("to", dtype::f32)}), R.i64s({1})},
                    Aval(dtype::f32, {T1, Dim(1)}));
    Value f = reshape_by_value(R, rq->freqs, R.i64s({1, d / 2}), Aval(dtype::f32, {Dim(1), Dim(d / 2)}));
    Value ang = R.op("Mul", {tf, f}, Aval(dtype::f32, {T1, Dim(d / 2)}));
    ins.push_back(R.op("Cos", {ang}, Aval(dtype::f32, {T1, Dim(d / 2)})));
    ins.push_back(R.op("Sin", {ang}, Aval(dtype::f32, {T1, Dim(d / 2)})));
    attrs.push_back(Attr::i("do_rotary", 1));
    attrs.push_back(Attr::i("rotary_interleaved", 0));
  }
  auto outs = R.domain_op_n("com.microsoft", "GroupQueryAttention", ins,
                            {Aval(dtype::f32, {B, S, Dim(heads * d)}), k4, v4}, attrs);
  R.replace(R.output(root), reshape_by_value(R, outs[0], R.i64s(root_shape), root_aval, true));
  R.replace(keys, outs[1]);
  R.replace(values, outs[2]);
}

}  // namespace

JAXONNX_PLUGIN("cache_attention", "0.1.0") {
  plugin.rule("cache_attention", "Transpose", cache_attention)
      .emits({"Reshape", "Transpose", "Equal", "Cast", "ReduceSum", "Sub", "Shape", "Squeeze", "Range", "Unsqueeze",
              "Mul", "Cos", "Sin", "com.microsoft.GroupQueryAttention"})
      .min_opset(15)
      .finite("onnxruntime's GroupQueryAttention: the program's attention for masks of onnxruntime-genai's "
              "form (each row's prompt, padding at its end, then generated tokens) and, with the rotary inside, "
              "position_ids = cumsum(mask) - 1; its present keeps each row's real tokens contiguous; padding "
              "queries' outputs differ")
      .summary("attention over a Concat-grown key/value cache with genai's padding and causal mask "
               "(einsum/where/softmax, or nn_attention's standard form of jax.nn.dot_product_attention) as "
               "com.microsoft GroupQueryAttention, whose present outputs become the graph's, with the "
               "rotate-half rotary inside where it fits (target=\"onnxruntime-contrib\")");
}
