// jaxonnx plugin SDK: rewrite rules (ABI 1.2; graph outputs 1.7). Rewrite, the view of the
// lowered graph a rule reads and the replacement it emits; RuleRef, what
// plugin.rule(...) (registration.hpp) returns.
//
// A rule is a function `void rule(jaxonnx::sdk::Rewrite& R)` registered with
//   plugin.rule("max0_to_relu", "Max", rule).emits({"Relu"});
// The core's fuse pass calls it at every node whose op is the rule's root op.
// The rule reads the graph backwards from R.root(), returns when the pattern
// does not match, and otherwise emits the replacement (R.op, R.scalar) and
// calls R.replace(root output, new value). Nothing changes unless replace is
// called and the rule returns normally; an exception fails the conversion.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jaxonnx/attr.hpp"
#include "jaxonnx/emitter.hpp"
#include "jaxonnx/plugin_abi.h"
#include "jaxonnx/types.hpp"

namespace jaxonnx::sdk {

class Rewrite final : public Emitter {
 public:
  Rewrite(const jxo_api* api, jxo_rewrite* rw) : api_(api), rw_(rw) {}

  // The node the rule is tried at, and the target default-domain opset.
  int64_t root() const { return api_->rw_root(rw_); }
  int64_t opset() const override { return api_->rw_opset(rw_); }
  // Whether the target profile has an op type or capability (ABI 1.5; see
  // Lowering::target_supports).
  bool target_supports(std::string_view feature) const {
    return !JXO_HAS_FIELD(api_, jxo_api, rw_target_supports) ||
           api_->rw_target_supports(rw_, to_jxo(feature)) != 0;
  }

  // -- the view. Nodes are indices; -1 is "no node" and every accessor takes it.
  std::string_view op_type(int64_t node) const { return from_jxo(api_->rw_op_type(rw_, node)); }
  // True when `node` is a default-domain node of op `op`.
  bool is(int64_t node, std::string_view op) const {
    return node >= 0 && from_jxo(api_->rw_domain(rw_, node)).empty() && op_type(node) == op;
  }
  size_t num_inputs(int64_t node) const { return api_->rw_num_inputs(rw_, node); }
  Value input(int64_t node, size_t i) const { return api_->rw_input(rw_, node, i); }
  size_t num_outputs(int64_t node) const { return api_->rw_num_outputs(rw_, node); }
  Value output(int64_t node, size_t i = 0) const { return api_->rw_output(rw_, node, i); }
  // The node defining `v`; -1 for graph inputs, initializers and captures.
  int64_t producer(Value v) const { return api_->rw_producer(rw_, v); }
  // The node defining `v` when it is a default-domain `op` with one output, else -1.
  int64_t def(Value v, std::string_view op) const {
    int64_t n = producer(v);
    return is(n, op) && num_outputs(n) == 1 ? n : -1;
  }
  // Reads of `v` (node inputs, captures, +1 as a graph output).
  size_t reads(Value v) const { return api_->rw_num_reads(rw_, v); }
  // A graph output (ABI 1.7; an older host answers false).
  bool is_graph_output(Value v) const {
    return JXO_HAS_FIELD(api_, jxo_api, rw_is_output) && api_->rw_is_output(rw_, v) != 0;
  }
  // Read once: fusing it away removes it (another reader would keep it alive,
  // so rules refuse to fuse such intermediates rather than duplicate work).
  bool single_use(Value v) const { return reads(v) == 1; }
  // The type of `v`; dtype undefined when the host does not know it.
  Aval aval(Value v) const { return Aval::from(api_->rw_value_aval(rw_, v)); }
  Aval aval_of(Value v) const override { return aval(v); }
  const jxo_attr* attr(int64_t node, std::string_view name) const {
    return api_->rw_attr(rw_, node, to_jxo(name));
  }
  int64_t attr_int(int64_t node, std::string_view name, int64_t fallback) const {
    const jxo_attr* a = attr(node, name);
    return a && a->type == JXO_ATTR_INT ? a->i : fallback;
  }
  double attr_float(int64_t node, std::string_view name, double fallback) const {
    const jxo_attr* a = attr(node, name);
    return a && a->type == JXO_ATTR_FLOAT ? a->f : fallback;
  }
  std::optional<std::vector<int64_t>> attr_ints(int64_t node, std::string_view name) const {
    const jxo_attr* a = attr(node, name);
    if (!a || a->type != JXO_ATTR_INTS) return std::nullopt;
    return std::vector<int64_t>(a->ints, a->ints + a->count);
  }
  // The data of `v` when it is an initializer or a Constant node's value.
  const jxo_tensor* constant(Value v) const { return api_->rw_value_constant(rw_, v); }
  // The elements of a constant of a float or integer dtype, as doubles.
  std::optional<std::vector<double>> constant_values(Value v) const {
    const jxo_tensor* t = constant(v);
    if (!t) return std::nullopt;
    size_t size = dtype::itemsize(t->dtype);
    if (size == 0 || t->dtype == dtype::f16 || t->dtype == dtype::bf16) return std::nullopt;
    std::vector<double> out(t->nbytes / size);
    const char* p = static_cast<const char*>(t->data);
    for (size_t k = 0; k < out.size(); ++k, p += size) out[k] = element(t->dtype, p);
    return out;
  }
  // The value every element of constant `v` holds, when they all hold one
  // (NaN counts as one value).
  std::optional<double> splat(Value v) const {
    auto values = constant_values(v);
    if (!values || values->empty()) return std::nullopt;
    double first = values->front();
    for (double x : *values)
      if (!(x == first || (std::isnan(x) && std::isnan(first)))) return std::nullopt;
    return first;
  }
  // `v` is a constant whose every element is within float32 rounding of `want`
  // (JAX bakes Python floats into the value's dtype).
  bool is_splat(Value v, double want) const {
    auto x = splat(v);
    return x && std::fabs(*x - want) <= 1e-6 * std::max(1.0, std::fabs(want));
  }

  // -- the replacement: op and constant (Emitter), and these
  using Emitter::constant;
  Value i64s(const std::vector<int64_t>& v) {
    return constant(dtype::i64, {static_cast<int64_t>(v.size())}, v.data(), v.size() * 8);
  }
  // A 0-d constant of float dtype `dt` (f32 or f64) holding `x`.
  Value scalar(int32_t dt, double x) {
    if (dt == dtype::f64) return constant(dt, {}, &x, 8);
    float f = static_cast<float>(x);
    return constant(dtype::f32, {}, &f, 4);
  }
  // Emits `op_type` of operator domain `domain` ("com.microsoft") with one
  // output, declared "domain.op" in the rule's .emits (ABI 1.6: an older host
  // refuses it, which fails the conversion). A rule that emits one runs only
  // under a target whose profile runs that domain.
  Value domain_op(std::string_view domain, std::string_view op_type, const std::vector<Value>& ins,
                  const Aval& out, const std::vector<Attr>& attrs = {}, int64_t domain_version = 1) {
    detail::NodeView n(op_type, ins, {out}, attrs, domain, domain_version);
    Value result = kNoValue;
    emit(n.node, &result);
    return result;
  }
  // The same with several outputs (GroupQueryAttention's output and caches).
  std::vector<Value> domain_op_n(std::string_view domain, std::string_view op_type, const std::vector<Value>& ins,
                                 const std::vector<Aval>& outs, const std::vector<Attr>& attrs = {},
                                 int64_t domain_version = 1) {
    detail::NodeView n(op_type, ins, outs, attrs, domain, domain_version);
    std::vector<Value> result(outs.size(), kNoValue);
    emit(n.node, result.data());
    return result;
  }
  // Every read of the root's output `old` now reads `value`. ABI 1.7: `old`
  // may also be a graph output (is_graph_output) a node before the root
  // defines, and `value` an output of a node this rule emitted: that node
  // then defines the graph output, and other readers of `old` keep the old
  // value. An older host refuses it (the conversion fails): check
  // is_graph_output first, which it answers false.
  void replace(Value old, Value value) { detail::check(api_, api_->rw_replace(rw_, old, value)); }

 private:
  void emit(const jxo_node& node, Value* outs) override { detail::check(api_, api_->rw_emit_node(rw_, &node, outs)); }
  void make_constant(const jxo_tensor& t, Value* out) override { detail::check(api_, api_->rw_constant(rw_, &t, out)); }
  static double element(int32_t dt, const char* p) {
    auto get = [p](auto x) { std::memcpy(&x, p, sizeof x); return static_cast<double>(x); };
    switch (dt) {
      case dtype::f32: return get(float{});
      case dtype::f64: return get(double{});
      case dtype::i8: return get(int8_t{});
      case dtype::i16: return get(int16_t{});
      case dtype::i32: return get(int32_t{});
      case dtype::i64: return get(int64_t{});
      case dtype::u8: case dtype::boolean: return get(uint8_t{});
      // One per byte, the value in the low nibble (plugin_abi.h).
      case dtype::i4: return static_cast<double>(static_cast<int8_t>(static_cast<uint8_t>(*p) << 4) >> 4);
      case dtype::u4: return static_cast<double>(static_cast<uint8_t>(*p) & 0x0f);
      case dtype::u16: return get(uint16_t{});
      case dtype::u32: return get(uint32_t{});
      case dtype::u64: return get(uint64_t{});
      default: return 0;
    }
  }

  const jxo_api* api_;
  jxo_rewrite* rw_;
};

using RewriteFn = std::function<void(Rewrite&)>;

namespace detail {
struct RuleEntry {
  std::string name, root_op, summary;
  std::vector<std::string> ops;
  std::vector<jxo_str> ops_c;
  int64_t min_opset = 0;
  int32_t numerics = JXO_NUMERICS_UNDECLARED;
  std::string numerics_note;
  RewriteFn fn;
  jxo_rule_desc desc{};
};

inline jxo_status* rewrite_trampoline(const jxo_api* api, jxo_rewrite* rw, void* ud) {
  return at_boundary(api, [&] {
    Rewrite R(api, rw);
    static_cast<RuleEntry*>(ud)->fn(R);
  });
}
}  // namespace detail

// What plugin.rule(...) returns: declares the rule's ops and opset.
class RuleRef {
 public:
  explicit RuleRef(detail::RuleEntry* e) : e_(e) {}
  // The ONNX ops the replacement may emit; the host refuses any other.
  RuleRef& emits(std::initializer_list<const char*> ops) {
    for (const char* op : ops) e_->ops.emplace_back(op);
    return *this;
  }
  // The rule is not tried below this default-domain opset.
  RuleRef& min_opset(int64_t v) { e_->min_opset = v; return *this; }
  RuleRef& summary(std::string s) { e_->summary = std::move(s); return *this; }
  // How the replacement agrees with JAX (ABI 1.5), which to_onnx's fusion
  // option selects by: exact() within rounding on every input, NaN and
  // infinity included (kept under fusion="exact"); finite(note) within
  // rounding on finite inputs only, `note` saying how it differs elsewhere.
  RuleRef& exact() { e_->numerics = JXO_NUMERICS_EXACT; return *this; }
  RuleRef& finite(std::string note) {
    e_->numerics = JXO_NUMERICS_FINITE;
    e_->numerics_note = std::move(note);
    return *this;
  }
  // approximate(note) (ABI 1.8): beyond float rounding, `note` saying by how
  // much (measured); applied only when the user asks, fusion="approximate".
  RuleRef& approximate(std::string note) {
    e_->numerics = JXO_NUMERICS_APPROXIMATE;
    e_->numerics_note = std::move(note);
    return *this;
  }

 private:
  detail::RuleEntry* e_;
};

}  // namespace jaxonnx::sdk
