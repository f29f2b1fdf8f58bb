// Bounded constant folding of shape arithmetic.
// Needs: topologically sorted; typed values (Shape folds only a value whose
// type is fully static).
// Rewrites a node into an initializer when it is one of
//   Shape(x) of a statically shaped x (with start/end),
//   Concat / Gather / Slice over rank-1 int constants, where Gather and Slice
//   may also read a Shape(x) whose selected dims are static though others
//   are symbolic,
//   Add / Mul / Max / Min over int constants of equal shape or with a size-1
//   operand,
//   Cast of an int constant to int32 or int64,
//   Concat of constants only it reads, any dtype (concat_constants);
//   a one-element Cast to a float, float Add / Sub / Mul / Div, or
//   comparison of one-element constants (fold_scalar),
// all integer (int32/int64) data: the arithmetic that symbolic-dim helpers
// emit, which is static once the dims are; and
//   Reshape / Squeeze / Unsqueeze / Flatten of a constant of any dtype to a
//   static output type: the same bytes under new dims (a bias reshaped for
//   broadcasting becomes an initializer of that shape);
//   Transpose / Slice (constant starts, ends, axes, steps) of a constant of
//   any dtype that nothing else reads: the same elements moved, no larger
//   (a conv kernel permuted and flipped into ONNX's layout once, at export,
//   instead of at every run).
// Refuses (shape arithmetic): a result over 1024 elements, or one larger than the constants it
// consumes (those read only by this node) plus 64 bytes, about the NodeProto
// it replaces, so no model grows; a node whose output is a graph output; any
// index out of range; any other dtype or rank.
// Guarantees: no foldable constants (no such node remains foldable).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "jaxonnx/core/passes.hpp"
#include "onnx_ops.hpp"
#include "rewrite.hpp"

namespace jaxonnx::passes {
namespace {

using onnx_ops::Op;

constexpr int64_t kMaxElements = 1024;
constexpr size_t kNodeAllowance = 64;

// Integer data, possibly with unknown elements (`known`, when not empty):
// the Shape of a value with symbolic dims is known where its dims are static.
struct Ints {
  int32_t dtype;
  std::vector<int64_t> dims;
  std::vector<int64_t> v;
  std::vector<bool> known;

  bool has(size_t i) const { return known.empty() || known[i]; }
};

int64_t int_attr(const ir::Node& n, const char* name, int64_t fallback) {
  const ir::Attribute* a = attribute(n, name);
  return a ? a->i : fallback;
}

class ConstantFolding : public Pass {
 public:
  const char* name() const override { return "fold"; }
  Properties needs() const override { return {topologically_sorted(), typed_values()}; }
  Properties guarantees() const override { return {no_foldable_constants()}; }

  // One sweep in node (topological) order, keeping the use counts current: a
  // folded value is a constant for the nodes after it, so chains fold at once.
  bool run(ir::Graph& g) override {
    Uses uses(g);
    bool changed = false;
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      if (!fold(g, uses, g.nodes[k])) continue;
      changed = true;
      const ir::Node& n = g.nodes[k];
      for (ir::ValueId v : n.inputs)
        if (v != ir::kNoValue) --uses.reads[v];
      uses.producer[n.outputs[0]] = -1;
      uses.initializer[n.outputs[0]] = g.initializers.size() - 1;
    }
    erase_marked(g);
    return changed;
  }

  // Folds `n` into a new initializer (and marks it erased) when it can.
  static bool fold(ir::Graph& g, const Uses& uses, ir::Node& n) {
    if (n.outputs.size() != 1 || uses.is_output[n.outputs[0]]) return false;
    std::vector<std::optional<Ints>> in;
    size_t consumed = 0;
    for (ir::ValueId v : n.inputs) {
      const Tensor* t = uses.constant(g, v);
      if (t && uses.reads[v] == 1) consumed += t->nbytes;  // dies with the node
      Ints ints{t ? t->dtype : 0, t ? t->dims : std::vector<int64_t>{}, {}, {}};
      if (t && to_ints(*t, &ints.v)) {
        in.emplace_back(std::move(ints));
      } else if (v != ir::kNoValue && uses.producer[v] >= 0 &&
                 onnx_ops::kind(g.nodes[uses.producer[v]]) == Op::Shape) {
        in.push_back(shape_of(g, g.nodes[uses.producer[v]]));
      } else {
        in.emplace_back();
      }
    }
    if (onnx_ops::is_layout_preserving_reshape(n)) return reshape_constant(g, uses, n, consumed);
    if (move_constant(g, uses, n)) return true;
    if (concat_constants(g, uses, n)) return true;
    if (fold_scalar(g, uses, n)) return true;
    std::optional<Ints> r = evaluate(g, n, in);
    if (!r || static_cast<int64_t>(r->v.size()) > kMaxElements) return false;
    size_t elem = r->dtype == JXO_DTYPE_INT64 ? 8 : 4;
    if (r->v.size() * elem > consumed + kNodeAllowance) return false;
    std::vector<char> bytes(r->v.size() * elem);
    for (size_t i = 0; i < r->v.size(); ++i) {
      if (elem == 8) {
        std::memcpy(bytes.data() + 8 * i, &r->v[i], 8);
      } else {
        int32_t x = static_cast<int32_t>(r->v[i]);
        std::memcpy(bytes.data() + 4 * i, &x, 4);
      }
    }
    ir::ValueId y = n.outputs[0];
    std::vector<Dim> dims;
    for (int64_t d : r->dims) dims.push_back(Dim{d, {}});
    g.values[y].has_type = true;
    g.values[y].type = Aval(r->dtype, std::move(dims));
    g.initializers.push_back({y, Tensor::copy_of(r->dtype, r->dims, bytes.data(), bytes.size())});
    mark_erased(n);
    return true;
  }

 private:
  // The one element of constant `t` as a double, for float32/64, int32/64 and
  // bool data (integers only up to 2^53, which a double holds exactly).
  static std::optional<double> one_element(const Tensor& t) {
    if (t.num_elements() != 1) return std::nullopt;
    double x;
    switch (t.dtype) {
      case JXO_DTYPE_FLOAT32: { float f; std::memcpy(&f, t.data, 4); x = f; break; }
      case JXO_DTYPE_FLOAT64: std::memcpy(&x, t.data, 8); break;
      case JXO_DTYPE_INT32: { int32_t i; std::memcpy(&i, t.data, 4); x = i; break; }
      case JXO_DTYPE_INT64: { int64_t i; std::memcpy(&i, t.data, 8); x = static_cast<double>(i); break; }
      case JXO_DTYPE_BOOL: x = *static_cast<const uint8_t*>(t.data) != 0; break;
      default: return std::nullopt;
    }
    if (std::fabs(x) > 9007199254740992.0) return std::nullopt;
    return x;
  }

  // A one-element node of constants: Cast to a float, float Add / Sub / Mul /
  // Div of one dtype, or a comparison -> its value. What a jitted helper that
  // takes a Python number leaves once inlined: jnp.var(x) computes its
  // divisor as N - float(ddof) and guards it with N - ddof > 0, and the
  // normalization rules want that divisor as a constant. Exact: one IEEE
  // operation in double, rounded once to the output's type (correctly
  // rounded for float32 operands).
  static bool fold_scalar(ir::Graph& g, const Uses& uses, ir::Node& n) {
    const ir::Value& out = g.values[n.outputs[0]];
    if (!out.has_type || !out.type.known_rank) return false;
    for (const Dim& d : out.type.dims)
      if (!d.is_static() || d.value != 1) return false;
    const int32_t ot = out.type.dtype;
    const bool to_float = ot == JXO_DTYPE_FLOAT32 || ot == JXO_DTYPE_FLOAT64;
    std::vector<double> x;
    std::vector<int32_t> types;
    for (ir::ValueId v : n.inputs) {
      const Tensor* t = v == ir::kNoValue ? nullptr : uses.constant(g, v);
      std::optional<double> e = t ? one_element(*t) : std::nullopt;
      if (!e) return false;
      x.push_back(*e);
      types.push_back(t->dtype);
    }
    const Op op = onnx_ops::kind(n);
    double r;
    if (op == Op::Cast) {
      if (!to_float || x.size() != 1 || int_attr(n, "to", 0) != ot) return false;
      r = x[0];
    } else if (x.size() != 2 || types[0] != types[1]) {
      return false;
    } else if (op == Op::Add || op == Op::Sub || op == Op::Mul || op == Op::Div) {
      if (!to_float || types[0] != ot) return false;
      r = op == Op::Add ? x[0] + x[1] : op == Op::Sub ? x[0] - x[1] : op == Op::Mul ? x[0] * x[1] : x[0] / x[1];
    } else if (op == Op::Greater || op == Op::Less || op == Op::GreaterOrEqual || op == Op::LessOrEqual) {
      if (ot != JXO_DTYPE_BOOL || types[0] == JXO_DTYPE_BOOL) return false;
      r = op == Op::Greater ? x[0] > x[1] : op == Op::Less ? x[0] < x[1]
          : op == Op::GreaterOrEqual ? x[0] >= x[1] : x[0] <= x[1];
    } else {
      return false;
    }
    std::vector<int64_t> dims(out.type.dims.size(), 1);
    std::shared_ptr<const Tensor> t;
    if (ot == JXO_DTYPE_FLOAT64) {
      t = Tensor::copy_of(ot, dims, &r, 8);
    } else if (ot == JXO_DTYPE_FLOAT32) {
      float f = static_cast<float>(r);
      t = Tensor::copy_of(ot, dims, &f, 4);
    } else {
      uint8_t b = r != 0;
      t = Tensor::copy_of(ot, dims, &b, 1);
    }
    g.initializers.push_back({n.outputs[0], std::move(t)});
    mark_erased(n);
    return true;
  }

  // Concat of constants that only it reads (an LSTM's gate weights, joined
  // for one Gemm): their elements, joined once at export. Each constant's
  // bytes move into the result, so the model does not grow.
  static bool concat_constants(ir::Graph& g, const Uses& uses, ir::Node& n) {
    if (onnx_ops::kind(n) != Op::Concat || n.inputs.empty()) return false;
    std::vector<const Tensor*> parts;
    for (ir::ValueId v : n.inputs) {
      const Tensor* t = v == ir::kNoValue ? nullptr : uses.constant(g, v);
      if (!t || uses.reads[v] != 1 || uses.is_output[v]) return false;
      parts.push_back(t);
    }
    const Tensor& first = *parts[0];
    const int64_t rank = static_cast<int64_t>(first.dims.size());
    int64_t axis = int_attr(n, "axis", 0);
    if (axis < 0) axis += rank;
    if (rank == 0 || axis < 0 || axis >= rank) return false;
    std::vector<int64_t> dims = first.dims;
    dims[axis] = 0;
    for (const Tensor* t : parts) {
      if (t->dtype != first.dtype || t->dims.size() != first.dims.size()) return false;
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis && t->dims[d] != first.dims[d]) return false;
      dims[axis] += t->dims[axis];
    }
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= dims[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= dims[d];
    const int64_t count = outer * dims[axis] * inner;
    if (count == 0) return false;
    const size_t elem = first.nbytes / static_cast<size_t>(std::max<int64_t>(first.num_elements(), 1));
    if (elem == 0) return false;
    std::vector<char> bytes(static_cast<size_t>(count) * elem);
    char* dst = bytes.data();
    for (int64_t o = 0; o < outer; ++o)
      for (const Tensor* t : parts) {
        const size_t chunk = static_cast<size_t>(t->dims[axis] * inner) * elem;
        std::memcpy(dst, static_cast<const char*>(t->data) + o * chunk, chunk);
        dst += chunk;
      }
    ir::Value& out = g.values[n.outputs[0]];
    std::vector<Dim> out_dims;
    for (int64_t d : dims) out_dims.push_back(Dim{d, {}});
    if (out.has_type && out.type.known_rank && !(out.type.dims == out_dims)) return false;
    out.has_type = true;
    out.type = Aval(first.dtype, std::move(out_dims));
    g.initializers.push_back({n.outputs[0], Tensor::copy_of(first.dtype, dims, bytes.data(), bytes.size())});
    mark_erased(n);
    return true;
  }

  // The reshape `n` of a constant, as an initializer holding the same bytes.
  static bool reshape_constant(ir::Graph& g, const Uses& uses, ir::Node& n, size_t consumed) {
    const Tensor* data = uses.constant(g, n.inputs[0]);
    ir::Value& out = g.values[n.outputs[0]];
    if (!data || !out.has_type || !out.type.known_rank || out.type.dtype != data->dtype ||
        data->nbytes > consumed + kNodeAllowance)
      return false;
    std::vector<int64_t> dims;
    for (const Dim& d : out.type.dims) {
      if (!d.is_static()) return false;
      dims.push_back(d.value);
    }
    auto folded = Tensor::copy_of(data->dtype, dims, data->data, data->nbytes);
    if (folded->num_elements() != data->num_elements()) return false;
    g.initializers.push_back({n.outputs[0], std::move(folded)});
    mark_erased(n);
    return true;
  }

  // Transpose / Slice of a constant read only here: its elements, moved.
  // Output element i sits in the input at sum_a (start[a] + i_a * step[a]) *
  // stride[perm[a]], i_a the output index along axis a.
  static bool move_constant(ir::Graph& g, const Uses& uses, ir::Node& n) {
    Op op = onnx_ops::kind(n);
    if (op != Op::Transpose && op != Op::Slice) return false;
    const Tensor* data = uses.constant(g, n.inputs[0]);
    if (!data || uses.reads[n.inputs[0]] != 1 || data->num_elements() == 0) return false;
    const size_t rank = data->dims.size();
    std::vector<int64_t> perm(rank), start(rank, 0), step(rank, 1), out_dims;
    for (size_t a = 0; a < rank; ++a) perm[a] = static_cast<int64_t>(a);
    if (op == Op::Transpose) {
      const ir::Attribute* p = attribute(n, "perm");
      if (p) perm = p->ints;
      else std::reverse(perm.begin(), perm.end());
      if (perm.size() != rank) return false;
      for (int64_t a : perm) {
        if (a < 0 || a >= static_cast<int64_t>(rank)) return false;
        out_dims.push_back(data->dims[a]);
      }
    } else if (!slice_window(g, uses, n, data->dims, &start, &step, &out_dims)) {
      return false;
    }
    std::vector<int64_t> stride(rank, 1);
    for (size_t a = rank; a-- > 1;) stride[a - 1] = stride[a] * data->dims[a];
    const size_t elem = data->nbytes / static_cast<size_t>(data->num_elements());
    int64_t count = 1;
    for (int64_t d : out_dims) count *= d;
    std::vector<char> bytes(static_cast<size_t>(count) * elem);
    std::vector<int64_t> idx(rank, 0);
    const char* src = static_cast<const char*>(data->data);
    for (int64_t i = 0; i < count; ++i) {
      int64_t at = 0;
      for (size_t a = 0; a < rank; ++a) at += (start[a] + idx[a] * step[a]) * stride[perm[a]];
      std::memcpy(bytes.data() + i * elem, src + at * elem, elem);
      for (size_t a = rank; a-- > 0;) {  // next output index, last axis fastest
        if (++idx[a] < out_dims[a]) break;
        idx[a] = 0;
      }
    }
    ir::Value& out = g.values[n.outputs[0]];
    std::vector<Dim> dims;
    for (int64_t d : out_dims) dims.push_back(Dim{d, {}});
    if (out.has_type && out.type.known_rank && !(out.type.dims == dims)) return false;
    out.has_type = true;
    out.type = Aval(data->dtype, std::move(dims));
    g.initializers.push_back({n.outputs[0], Tensor::copy_of(data->dtype, out_dims, bytes.data(),
                                                            bytes.size())});
    mark_erased(n);
    return true;
  }

  // ONNX Slice's window over `dims` from constant starts/ends/axes/steps: the
  // first index and step per axis, and the output dims.
  static bool slice_window(const ir::Graph& g, const Uses& uses, const ir::Node& n,
                           const std::vector<int64_t>& dims, std::vector<int64_t>* start,
                           std::vector<int64_t>* step, std::vector<int64_t>* out_dims) {
    std::vector<std::vector<int64_t>> args(4);  // starts, ends, axes, steps
    for (size_t i = 1; i < n.inputs.size() && i <= 4; ++i) {
      if (n.inputs[i] == ir::kNoValue) continue;
      const Tensor* t = uses.constant(g, n.inputs[i]);
      if (!t || !to_ints(*t, &args[i - 1])) return false;
    }
    const size_t k = args[0].size();
    if (n.inputs.size() < 3 || args[1].size() != k) return false;
    const int64_t rank = static_cast<int64_t>(dims.size());
    if (args[2].empty()) for (size_t i = 0; i < k; ++i) args[2].push_back(static_cast<int64_t>(i));
    if (args[3].empty()) args[3].assign(k, 1);
    if (args[2].size() != k || args[3].size() != k) return false;
    *out_dims = dims;
    for (size_t i = 0; i < k; ++i) {
      int64_t a = args[2][i] < 0 ? args[2][i] + rank : args[2][i];
      int64_t t = args[3][i];
      if (a < 0 || a >= rank || t == 0) return false;
      const int64_t d = dims[a];
      int64_t b = args[0][i], e = args[1][i];
      if (b < 0) b = b < -d ? 0 : b + d;  // without overflow for INT64_MIN
      if (e < 0) e = e < -d ? -1 : e + d;
      int64_t len;
      if (t > 0) {
        b = std::clamp<int64_t>(b, 0, d);
        e = std::clamp<int64_t>(e, 0, d);
        len = e > b ? (e - b + t - 1) / t : 0;
      } else {
        b = std::clamp<int64_t>(b, 0, d - 1);
        e = std::clamp<int64_t>(e, -1, d - 1);
        len = b > e ? (b - e - t - 1) / -t : 0;
      }
      (*start)[a] = b;
      (*step)[a] = t;
      (*out_dims)[a] = len;
    }
    return true;
  }

  static bool rank1(const std::optional<Ints>& t) { return t && t->dims.size() == 1; }
  static bool complete(const std::optional<Ints>& t) { return t && t->known.empty(); }

  // Shape(x) as far as x's type tells.
  static std::optional<Ints> shape_of(const ir::Graph& g, const ir::Node& n) {
    const ir::Value& x = g.values[n.inputs.at(0)];
    if (!x.has_type || !x.type.known_rank) return std::nullopt;
    int64_t rank = static_cast<int64_t>(x.type.dims.size());
    auto clamp = [&](int64_t i) { return std::clamp(i < 0 ? i + rank : i, int64_t{0}, rank); };
    int64_t start = clamp(int_attr(n, "start", 0)), end = clamp(int_attr(n, "end", rank));
    Ints r{JXO_DTYPE_INT64, {std::max<int64_t>(end - start, 0)}, {}, {}};
    bool all = true;
    for (int64_t i = start; i < end; ++i) {
      const Dim& d = x.type.dims[i];
      r.v.push_back(d.is_static() ? d.value : 0);
      r.known.push_back(d.is_static());
      all = all && d.is_static();
    }
    if (all) r.known.clear();
    return r;
  }

  static std::optional<Ints> evaluate(const ir::Graph& g, const ir::Node& n,
                                      const std::vector<std::optional<Ints>>& in) {
    switch (onnx_ops::kind(n)) {
      case Op::Shape: {
        std::optional<Ints> r = shape_of(g, n);
        return complete(r) ? r : std::nullopt;
      }
      case Op::Concat: {
        int64_t axis = int_attr(n, "axis", 0);
        if (in.empty() || (axis != 0 && axis != -1)) return std::nullopt;
        Ints r{in[0] ? in[0]->dtype : 0, {0}, {}, {}};
        for (const auto& t : in) {
          if (!rank1(t) || !complete(t) || t->dtype != r.dtype) return std::nullopt;
          r.v.insert(r.v.end(), t->v.begin(), t->v.end());
        }
        r.dims[0] = static_cast<int64_t>(r.v.size());
        return r;
      }
      case Op::Gather: {
        int64_t axis = int_attr(n, "axis", 0);
        if (in.size() != 2 || !rank1(in[0]) || !complete(in[1]) || in[1]->dims.size() > 1 ||
            (axis != 0 && axis != -1))
          return std::nullopt;
        const Ints &data = *in[0], &idx = *in[1];
        int64_t size = static_cast<int64_t>(data.v.size());
        Ints r{data.dtype, idx.dims, {}, {}};
        for (int64_t i : idx.v) {
          if (i < 0) i += size;
          if (i < 0 || i >= size || !data.has(i)) return std::nullopt;
          r.v.push_back(data.v[i]);
        }
        return r;
      }
      case Op::Slice: {
        if (in.size() < 3 || !rank1(in[0]) || !complete(in[1]) || !complete(in[2]) ||
            in[1]->dims.size() != 1 || in[2]->dims.size() != 1 ||
            in[1]->v.size() != 1 || in[2]->v.size() != 1)
          return std::nullopt;
        if (in.size() > 3 && n.inputs[3] != ir::kNoValue &&
            (!complete(in[3]) || in[3]->v.size() != 1 || (in[3]->v[0] != 0 && in[3]->v[0] != -1)))
          return std::nullopt;
        int64_t step = 1;
        if (in.size() > 4 && n.inputs[4] != ir::kNoValue) {
          if (!complete(in[4]) || in[4]->v.size() != 1 || in[4]->v[0] == 0) return std::nullopt;
          step = in[4]->v[0];
        }
        const Ints& data = *in[0];
        int64_t size = static_cast<int64_t>(data.v.size());
        int64_t start = in[1]->v[0], end = in[2]->v[0];
        if (start < 0) start += size;
        if (end < 0) end += size;
        Ints r{data.dtype, {0}, {}, {}};
        if (step > 0) {
          start = std::clamp<int64_t>(start, 0, size);
          end = std::clamp<int64_t>(end, 0, size);
          for (int64_t i = start; i < end; i += step) {
            if (!data.has(i)) return std::nullopt;
            r.v.push_back(data.v[i]);
          }
        } else {
          start = std::clamp<int64_t>(start, 0, size - 1);
          end = std::clamp<int64_t>(end, -1, size - 1);
          for (int64_t i = start; i > end; i += step) {
            if (!data.has(i)) return std::nullopt;
            r.v.push_back(data.v[i]);
          }
        }
        r.dims[0] = static_cast<int64_t>(r.v.size());
        return r;
      }
      case Op::Add:
      case Op::Mul:
      case Op::Max:
      case Op::Min: {
        if (in.size() != 2 || !complete(in[0]) || !complete(in[1]) || in[0]->dtype != in[1]->dtype)
          return std::nullopt;
        const Ints *a = &*in[0], *b = &*in[1];
        if (a->v.size() == 1 && a->dims.size() <= b->dims.size()) std::swap(a, b);
        bool scalar_b = b->v.size() == 1 && b->dims.size() <= a->dims.size();
        if (!scalar_b && a->dims != b->dims) return std::nullopt;
        Ints r{a->dtype, a->dims, {}, {}};
        const Op op = onnx_ops::kind(n);
        for (size_t i = 0; i < a->v.size(); ++i) {
          const int64_t p = a->v[i], q = b->v[scalar_b ? 0 : i];
          if (op == Op::Max || op == Op::Min) {  // a clamp of constant indices
            r.v.push_back(op == Op::Max ? std::max(p, q) : std::min(p, q));
            continue;
          }
          // Unsigned arithmetic wraps like the runtime's instead of overflowing.
          uint64_t x = static_cast<uint64_t>(p), y = static_cast<uint64_t>(q);
          r.v.push_back(static_cast<int64_t>(op == Op::Add ? x + y : x * y));
        }
        return r;
      }
      case Op::Cast: {
        // Between int32 and int64 (an index's type meeting Shape's); int64 to
        // int32 wraps as the runtime's Cast does.
        int64_t to = int_attr(n, "to", 0);
        if (in.size() != 1 || !complete(in[0]) || (to != JXO_DTYPE_INT32 && to != JXO_DTYPE_INT64))
          return std::nullopt;
        Ints r{static_cast<int32_t>(to), in[0]->dims, {}, {}};
        for (int64_t x : in[0]->v)
          r.v.push_back(to == JXO_DTYPE_INT32 ? static_cast<int64_t>(static_cast<int32_t>(x)) : x);
        return r;
      }
      default:
        return std::nullopt;
    }
  }
};

}  // namespace

std::unique_ptr<Pass> constant_folding() { return std::make_unique<ConstantFolding>(); }

// The pass's own test, on a scratch copy (a fold rewrites the graph): the
// first node it would fold.
Property no_foldable_constants() {
  return {"no foldable constants", [](const ir::Graph& g) -> std::string {
            ir::Graph scratch = scratch_copy(g);
            Uses uses(scratch);
            for (size_t k = 0; k < scratch.nodes.size(); ++k)
              if (ConstantFolding::fold(scratch, uses, scratch.nodes[k]))
                return "node #" + std::to_string(k) + " " + g.nodes[k].op_type + " '" +
                       g.nodes[k].name + "' folds into a constant";
            return {};
          }};
}

}  // namespace jaxonnx::passes
