// jaxonnx plugin SDK: Lowering, the context of one equation being lowered, and
// Subgraph, an If branch or Loop body being built through it. Every call
// forwards to the host table (avals, params, inputs, emit a node, constants,
// the per-graph memo, nested jaxprs, subgraph scopes); none knows an ONNX
// operator. The ONNX idioms built on it (cast, where, shape values, scans,
// int constants) are free functions in idioms.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "jaxonnx/attr.hpp"
#include "jaxonnx/emitter.hpp"
#include "jaxonnx/param.hpp"
#include "jaxonnx/plugin_abi.h"
#include "jaxonnx/types.hpp"

namespace jaxonnx::sdk {

class Subgraph;

// One equation being lowered. Everything here forwards to the host table.
// It is an Emitter (emitter.hpp): expression code writes into it.
class Lowering final : public Emitter {
 public:
  Lowering(const jxo_api* api, jxo_lowering* ctx) : api_(api), ctx_(ctx) {}

  const jxo_api* api() const { return api_; }
  std::string_view primitive() const { return from_jxo(api_->primitive(ctx_)); }
  size_t num_inputs() const { return api_->num_inputs(ctx_); }
  size_t num_outputs() const { return api_->num_outputs(ctx_); }
  Aval in_aval(size_t i) const { return Aval::from(checked(api_->input_aval(ctx_, i), "input", i)); }
  Aval out_aval(size_t i) const { return Aval::from(checked(api_->output_aval(ctx_, i), "output", i)); }
  int64_t opset() const override { return api_->opset(ctx_); }
  // The target profile (ABI 1.5; jaxonnx/targets.hpp): its name, and whether
  // it has an op type or capability ("Attention", "if_guard"). A host older
  // than 1.5 serves only onnxruntime, which has everything.
  std::string_view target() const {
    return JXO_HAS_FIELD(api_, jxo_api, target) ? from_jxo(api_->target(ctx_)) : "onnxruntime";
  }
  bool target_supports(std::string_view feature) const {
    return !JXO_HAS_FIELD(api_, jxo_api, target_supports) ||
           api_->target_supports(ctx_, to_jxo(feature)) != 0;
  }

  // The equation's params (a record).
  Param params() const { return Param(api_, api_->params(ctx_), "params"); }
  Param param(std::string_view name) const { return params().field(name); }
  bool has_param(std::string_view name) const { return params().has(name); }
  // An int-list param of axes into a rank-`rank` operand, negatives normalized.
  std::vector<int64_t> axes_param(std::string_view name, int64_t rank) const {
    std::vector<int64_t> axes = param(name).as_ints();
    for (int64_t& a : axes) {
      if (a < 0) a += rank;
      if (a < 0 || a >= rank)
        throw Error("param '" + std::string(name) + "' has an axis out of range for rank " +
                    std::to_string(rank));
    }
    return axes;
  }

  // The data of input i if it is a literal (else nullptr); valid for this call.
  const jxo_tensor* literal(size_t i) const { return api_->input_literal(ctx_, i); }

  Value input(size_t i) {
    Value v = kNoValue;
    detail::check(api_, api_->input(ctx_, i, &v));
    return v;
  }
  std::vector<Value> inputs() {
    std::vector<Value> out;
    for (size_t i = 0; i < num_inputs(); ++i) out.push_back(input(i));
    return out;
  }
  void bind(size_t i, Value v) { detail::check(api_, api_->bind_output(ctx_, i, v)); }

  // The type of a value the host knows.
  Aval aval_of(Value v) const override { return Aval::from(api_->value_aval(ctx_, v)); }

  // Emits `op_type` with one output (Emitter::op) or several, of these types.
  using Emitter::op;
  std::vector<Value> op_n(std::string_view op_type, const std::vector<Value>& ins,
                          const std::vector<Aval>& outs, const std::vector<Attr>& attrs = {},
                          std::string_view domain = {}, int64_t domain_version = 0) {
    detail::NodeView n(op_type, ins, outs, attrs, domain, domain_version);
    std::vector<Value> result(outs.size(), kNoValue);
    emit(n.node, result.data());
    return result;
  }

  // A constant tensor (copied by the host): Emitter::constant, or typed data.
  using Emitter::constant;
  template <typename T>
  Value constant(const std::vector<T>& data, const std::vector<int64_t>& dims) {
    static_assert(!std::is_same_v<T, bool>, "use constant(dtype::boolean, ...) with uint8 data");
    return constant(dtype::of<T>(), dims, data.data(), data.size() * sizeof(T));
  }

  // Where the symbolic dim `name` entered the graph: a main-graph value (an
  // input) and the axis of it that holds the symbol (for Shape(start=axis)).
  struct SymbolOrigin {
    Value value = kNoValue;
    int64_t axis = 0;
  };
  SymbolOrigin symbol_origin(std::string_view name) {
    SymbolOrigin o;
    detail::check(api_, api_->symbol_origin(ctx_, to_jxo(name), &o.value, &o.axis));
    return o;
  }

  // The value cached under `key` in this graph, made by `make` the first time.
  // The memo is per graph scope: a lookup walks outward, a store goes to the
  // innermost open subgraph and dies with it.
  template <typename F> Value memoized(const std::string& key, F&& make) {
    Value v = kNoValue;
    api_->memo_get(ctx_, to_jxo(key), &v);
    if (v == kNoValue) {
      v = make();
      api_->memo_put(ctx_, to_jxo(key), v);
    }
    return v;
  }
  // The value under `key` (innermost scope outward), or kNoValue.
  Value memo_lookup(const std::string& key) const {
    Value v = kNoValue;
    api_->memo_get(ctx_, to_jxo(key), &v);
    return v;
  }
  // Stores `v` under `key` in the innermost open scope.
  void memo_store(const std::string& key, Value v) { api_->memo_put(ctx_, to_jxo(key), v); }

  // Lowers a nested closed jaxpr inline and returns its outputs. Inside an
  // open Subgraph, its nodes go into that subgraph.
  std::vector<Value> inline_jaxpr(const jxo_jaxpr* j, const std::vector<Value>& ins) {
    std::vector<Value> outs(api_->jaxpr_num_outputs(j), kNoValue);
    detail::check(api_, api_->lower_jaxpr(ctx_, j, ins.data(), ins.size(), outs.data(), outs.size()));
    return outs;
  }
  // The same, said where a subgraph is being filled.
  std::vector<Value> lower_jaxpr_into(const jxo_jaxpr* j, const std::vector<Value>& ins) {
    return inline_jaxpr(j, ins);
  }

  // Opens a subgraph scope (ABI 1.1); see class Subgraph.
  inline Subgraph begin_subgraph(std::string_view name);

  // False when output i of the equation is never read afterwards (ABI 1.1);
  // such an output may be left unbound.
  bool output_used(size_t i) const {
    if (!JXO_HAS_FIELD(api_, jxo_api, output_used)) return true;
    return api_->output_used(ctx_, i) != 0;
  }

  // Fails unless the host serves ABI 1.1 (subgraphs).
  void require_subgraphs() const {
    if (!JXO_HAS_FIELD(api_, jxo_api, jaxpr_output_eqn))
      throw Error("this host does not serve subgraphs (jaxonnx ABI 1.1); upgrade jaxonnx");
  }

  [[noreturn]] void fail(const std::string& msg) const { throw Error(msg); }

 private:
  void emit(const jxo_node& node, Value* outs) override { detail::check(api_, api_->emit_node(ctx_, &node, outs)); }
  void make_constant(const jxo_tensor& t, Value* out) override { detail::check(api_, api_->constant(ctx_, &t, out)); }
  const jxo_aval* checked(const jxo_aval* a, const char* what, size_t i) const {
    if (!a) throw Error(std::string("no ") + what + " " + std::to_string(i));
    return a;
  }

  const jxo_api* api_;
  jxo_lowering* ctx_;
  friend class Subgraph;
};

// ---------------------------------------------------------------- subgraphs --

// A subgraph being built (an If branch, a Loop body). While it is open, every
// node, constant and inlined jaxpr of the lowering goes into it; values of the
// enclosing graphs can be used directly (the host captures them). Subgraphs
// nest like brackets: end() the innermost first.
//
//   Subgraph body = L.begin_subgraph("body");
//   Value i = body.input(Aval(dtype::i64, {}), "iter");
//   ...
//   GraphRef g = body.end({cond_out, x_out});
//   L.op_n("Loop", {trip, cond, x0}, {out_aval}, {Attr::graph("body", g)});
//
// A Subgraph that is not end()ed (an exception in between) is closed by the
// host when the lowering returns, and the lowering fails.
class Subgraph {
 public:
  Subgraph(Lowering& L, std::string_view name) : L_(&L) {
    L.require_subgraphs();
    detail::check(L.api_, L.api_->graph_begin(L.ctx_, to_jxo(name)));
  }
  Subgraph(const Subgraph&) = delete;
  Subgraph& operator=(const Subgraph&) = delete;
  Subgraph(Subgraph&& o) noexcept : L_(o.L_), done_(o.done_) { o.done_ = true; }

  // Appends a formal input of type `a` (symbolic dims become dim_params).
  Value input(const Aval& a, std::string_view name = "") {
    detail::AvalView v(a);
    Value out = kNoValue;
    detail::check(L_->api_, L_->api_->graph_add_input(L_->ctx_, to_jxo(name), &v.aval, &out));
    return out;
  }
  // Closes the subgraph with `outputs` (any visible values; inputs, outer
  // values, constants and repeats are copied by the host).
  GraphRef end(const std::vector<Value>& outputs) {
    if (done_) throw Error("Subgraph::end called twice");
    done_ = true;
    GraphRef g;
    detail::check(L_->api_, L_->api_->graph_end(L_->ctx_, outputs.data(), outputs.size(), &g.handle));
    return g;
  }

 private:
  Lowering* L_;
  bool done_ = false;
};

inline Subgraph Lowering::begin_subgraph(std::string_view name) { return Subgraph(*this, name); }

using LowerFn = std::function<void(Lowering&)>;

}  // namespace jaxonnx::sdk
