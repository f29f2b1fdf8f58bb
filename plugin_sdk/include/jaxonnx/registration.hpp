// jaxonnx plugin SDK: registration. What a plugin's JAXONNX_PLUGIN block fills
// in (Plugin: primitives with their lowering, abstract eval, emitted ops, docs
// and binding specs; rewrite rules), the trampolines that catch every C++
// exception at the ABI boundary and turn it into a status, and the entry
// point that hands the host the frozen descriptor.
//
//   JAXONNX_PLUGIN("my_plugin", "1.0.0") {
//     plugin.primitive("my.relu", lower_relu).emits({"Relu"});
//   }
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jaxonnx/abstract_eval.hpp"
#include "jaxonnx/lowering.hpp"
#include "jaxonnx/plugin_abi.h"
#include "jaxonnx/rewrite.hpp"
#include "jaxonnx/sdk_version.h"
#include "jaxonnx/types.hpp"

#if defined(_WIN32)
#define JAXONNX_PLUGIN_EXPORT __declspec(dllexport)
#else
#define JAXONNX_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

namespace jaxonnx::sdk {

// The ONNX operator page of `op`, for .doc().
inline std::string onnx_doc(std::string_view op) {
  return "https://onnx.ai/onnx/operators/onnx__" + std::string(op) + ".html";
}

namespace detail {

// A binding spec's storage and its C view (pointers into the vectors).
struct BindingEntry {
  std::string target;
  std::vector<std::string> operands, params, when;
  uint64_t leading = 0;
  int32_t numerics = JXO_NUMERICS_UNDECLARED;
  std::string numerics_note;
  std::vector<jxo_str> operands_c, params_c, when_c;
  jxo_binding c{};
};

struct PrimitiveEntry {
  std::string name, doc_url, summary;
  std::vector<std::unique_ptr<BindingEntry>> bindings;
  std::vector<const jxo_binding*> bindings_c;
  std::vector<std::string> ops;
  std::vector<jxo_str> ops_c;
  LowerFn lower;
  AbstractEvalFn abstract_eval;
  // The test equations (ABI 1.4) and their C views.
  struct Test {
    std::vector<Aval> in, out;
    std::vector<std::unique_ptr<AvalView>> views;
    std::vector<const jxo_aval*> in_c, out_c;
    jxo_test_eqn c{};
  };
  std::vector<std::unique_ptr<Test>> tests;
  std::vector<const jxo_test_eqn*> tests_c;
  jxo_primitive_desc desc{};
};

inline jxo_status* lower_trampoline(const jxo_api* api, jxo_lowering* ctx, void* ud) {
  return at_boundary(api, [&] {
    Lowering L(api, ctx);
    static_cast<PrimitiveEntry*>(ud)->lower(L);
  });
}

inline jxo_status* abstract_eval_trampoline(const jxo_api* api, jxo_abstract_eval* ctx, void* ud) {
  return at_boundary(api, [&] {
    AbstractEval A(api, ctx);
    static_cast<PrimitiveEntry*>(ud)->abstract_eval(A);
  });
}
}  // namespace detail

// A binding spec (ABI 1.2): while jaxonnx traces, a call of the Python
// callable `target` binds this primitive. Expressions are small Python
// expressions over the call's arguments, by parameter name (see jxo_binding).
//
//   plugin.primitive("jaxonnx.nn.layer_norm", lower)
//       .binds(Binding("flax.nnx.LayerNorm.__call__")
//                  .operand("x", Binding::kLeadingDims)
//                  .operand("self.scale.value")
//                  .param("epsilon", "self.epsilon")
//                  .when("self.scale is not None"));
//
// The equation gets the operands as inputs, the params, and `reference`: the
// original callable traced as a function of the operands (a jaxpr), which a
// lowering can inline (Lowering::inline_jaxpr) where the fused op does not fit.
class Binding {
 public:
  // The operand may carry extra leading dims the primitive maps over.
  static constexpr bool kLeadingDims = true;
  explicit Binding(std::string target) { e_.target = std::move(target); }
  Binding& operand(std::string expr, bool leading_dims = false) {
    if (e_.operands.size() >= 64) throw Error("a binding spec has at most 64 operands");
    if (leading_dims) e_.leading |= uint64_t{1} << e_.operands.size();
    e_.operands.push_back(std::move(expr));
    return *this;
  }
  Binding& param(const std::string& name, const std::string& expr) {
    e_.params.push_back(name + "=" + expr);
    return *this;
  }
  // A call mode handled: the expression must be true, else the original runs.
  Binding& when(std::string expr) {
    e_.when.push_back(std::move(expr));
    return *this;
  }
  // How the bound op agrees with JAX (ABI 1.5; see RuleRef::exact/finite):
  // to_onnx(fusion="exact") applies only exact() specs.
  Binding& exact() {
    e_.numerics = JXO_NUMERICS_EXACT;
    return *this;
  }
  Binding& finite(std::string note) {
    e_.numerics = JXO_NUMERICS_FINITE;
    e_.numerics_note = std::move(note);
    return *this;
  }
  const detail::BindingEntry& entry() const { return e_; }

 private:
  detail::BindingEntry e_;
};

// What a plugin's registration block fills in.
class Plugin {
 public:
  class PrimitiveRef {
   public:
    explicit PrimitiveRef(detail::PrimitiveEntry* e) : e_(e) {}
    // The ONNX ops this lowering may emit (for the generated docs).
    // Repeats (an idiom's ops declared again) are dropped, first mention wins.
    // An op with an older form the idioms fall back to below its opset
    // (idioms.hpp: shape_slice, reshape, bitwise) brings that form's ops.
    PrimitiveRef& emits(std::initializer_list<const char*> ops) {
      for (const char* op : ops) {
        add_op(op);
        std::string_view o(op);
        if (o == "Shape") add_op("Slice");
        if (o == "Reshape")
          for (const char* f : {"Expand", "Max", "ReduceProd", "Sub", "Shape", "Slice", "Concat"}) add_op(f);
        if (o == "BitwiseNot") for (const char* f : {"Cast", "Sub"}) add_op(f);
        if (o == "BitwiseAnd" || o == "BitwiseOr" || o == "BitwiseXor")
          for (const char* f : {"Cast", "Unsqueeze", "BitShift", "Mod", "Mul", "Slice", "Add", "Squeeze", "Sub"})
            add_op(f);
      }
      return *this;
    }
    // The ops dim_value / shape_value may emit for symbolic dims ("B", "2*B",
    // "floordiv(B, 2)"); declare them when a lowering uses those helpers.
    PrimitiveRef& emits_shape_ops() {
      return emits({"Shape", "Concat", "Add", "Sub", "Mul", "Neg", "Mod", "Div", "Max", "Min"});
    }
    void add_op(const char* op) {
      if (std::find(e_->ops.begin(), e_->ops.end(), op) == e_->ops.end()) e_->ops.emplace_back(op);
    }
    PrimitiveRef& doc(std::string url) { e_->doc_url = std::move(url); return *this; }
    PrimitiveRef& summary(std::string s) { e_->summary = std::move(s); return *this; }
    PrimitiveRef& abstract_eval(AbstractEvalFn fn) { e_->abstract_eval = std::move(fn); return *this; }
    // A test equation (ABI 1.4; repeatable): input avals on which the
    // lowering works with no params, and the output avals (may be left out
    // when the primitive has an abstract eval). Before jaxonnx loads a plugin
    // file it has not seen into a user's process, it runs the abstract eval,
    // the lowering and the plugin's rewrite rules on each test equation in a
    // short-lived child process, so a crash there costs a warning, not the
    // process (the preflight):
    //   .test({Aval(dtype::f32, {2, 3})})
    PrimitiveRef& test(std::vector<Aval> inputs, std::vector<Aval> outputs = {}) {
      e_->tests.push_back(std::make_unique<detail::PrimitiveEntry::Test>());
      e_->tests.back()->in = std::move(inputs);
      e_->tests.back()->out = std::move(outputs);
      return *this;
    }
    // A Python callable that binds this primitive while tracing (see Binding).
    PrimitiveRef& binds(const Binding& b) {
      e_->bindings.push_back(std::make_unique<detail::BindingEntry>(b.entry()));
      return *this;
    }

   private:
    detail::PrimitiveEntry* e_;
  };

  PrimitiveRef primitive(std::string name, LowerFn lower) {
    entries_.push_back(std::make_unique<detail::PrimitiveEntry>());
    entries_.back()->name = std::move(name);
    entries_.back()->lower = std::move(lower);
    return PrimitiveRef(entries_.back().get());
  }

  // A rewrite rule (ABI 1.2) ending at a node of op `root_op`; see rewrite.hpp.
  RuleRef rule(std::string name, std::string root_op, RewriteFn fn) {
    rules_.push_back(std::make_unique<detail::RuleEntry>());
    rules_.back()->name = std::move(name);
    rules_.back()->root_op = std::move(root_op);
    rules_.back()->fn = std::move(fn);
    return RuleRef(rules_.back().get());
  }

  const jxo_plugin_desc* descriptor() const { return &desc_; }

  // Freezes everything into the C descriptor. Called once.
  const jxo_plugin_desc* finish(std::string name, std::string version) {
    name_ = std::move(name);
    version_ = std::move(version);
    for (auto& e : entries_) {
      for (const std::string& op : e->ops) e->ops_c.push_back(to_jxo(op));
      jxo_primitive_desc& d = e->desc;
      d.struct_size = sizeof(jxo_primitive_desc);
      d.name = to_jxo(e->name);
      d.lower = &detail::lower_trampoline;
      d.abstract_eval = e->abstract_eval ? &detail::abstract_eval_trampoline : nullptr;
      d.user_data = e.get();
      d.onnx_ops = e->ops_c.data();
      d.num_onnx_ops = e->ops_c.size();
      d.doc_url = to_jxo(e->doc_url);
      d.summary = to_jxo(e->summary);
      for (auto& b : e->bindings) {
        for (const std::string& x : b->operands) b->operands_c.push_back(to_jxo(x));
        for (const std::string& x : b->params) b->params_c.push_back(to_jxo(x));
        for (const std::string& x : b->when) b->when_c.push_back(to_jxo(x));
        b->c.struct_size = sizeof(jxo_binding);
        b->c.target = to_jxo(b->target);
        b->c.operands = b->operands_c.data();
        b->c.num_operands = b->operands_c.size();
        b->c.params = b->params_c.data();
        b->c.num_params = b->params_c.size();
        b->c.when = b->when_c.data();
        b->c.num_when = b->when_c.size();
        b->c.leading_dims_operands = b->leading;
        b->c.numerics = b->numerics;
        b->c.numerics_note = to_jxo(b->numerics_note);
        e->bindings_c.push_back(&b->c);
      }
      d.bindings = e->bindings_c.data();
      d.num_bindings = e->bindings_c.size();
      for (auto& t : e->tests) {
        for (const Aval& a : t->in) {
          t->views.push_back(std::make_unique<detail::AvalView>(a));
          t->in_c.push_back(&t->views.back()->aval);
        }
        for (const Aval& a : t->out) {
          t->views.push_back(std::make_unique<detail::AvalView>(a));
          t->out_c.push_back(&t->views.back()->aval);
        }
        t->c.struct_size = sizeof(jxo_test_eqn);
        t->c.inputs = t->in_c.data();
        t->c.num_inputs = t->in_c.size();
        t->c.outputs = t->out_c.data();
        t->c.num_outputs = t->out_c.size();
        e->tests_c.push_back(&t->c);
      }
      d.test_eqns = e->tests_c.data();
      d.num_test_eqns = e->tests_c.size();
      prim_ptrs_.push_back(&d);
    }
    desc_.struct_size = sizeof(jxo_plugin_desc);
    desc_.abi_major = JXO_ABI_MAJOR;
    desc_.abi_minor = JXO_ABI_MINOR;
    desc_.name = to_jxo(name_);
    desc_.version = to_jxo(version_);
    desc_.sdk_version = jxo_str{JAXONNX_SDK_VERSION, sizeof(JAXONNX_SDK_VERSION) - 1};
    desc_.primitives = prim_ptrs_.data();
    desc_.num_primitives = prim_ptrs_.size();
    for (auto& r : rules_) {
      for (const std::string& op : r->ops) r->ops_c.push_back(to_jxo(op));
      jxo_rule_desc& d = r->desc;
      d.struct_size = sizeof(jxo_rule_desc);
      d.name = to_jxo(r->name);
      d.root_op = to_jxo(r->root_op);
      d.rewrite = &detail::rewrite_trampoline;
      d.user_data = r.get();
      d.min_opset = r->min_opset;
      d.onnx_ops = r->ops_c.data();
      d.num_onnx_ops = r->ops_c.size();
      d.summary = to_jxo(r->summary);
      d.numerics = r->numerics;
      d.numerics_note = to_jxo(r->numerics_note);
      rule_ptrs_.push_back(&d);
    }
    desc_.rules = rule_ptrs_.data();
    desc_.num_rules = rule_ptrs_.size();
    return &desc_;
  }

 private:
  std::vector<std::unique_ptr<detail::PrimitiveEntry>> entries_;
  std::vector<const jxo_primitive_desc*> prim_ptrs_;
  std::vector<std::unique_ptr<detail::RuleEntry>> rules_;
  std::vector<const jxo_rule_desc*> rule_ptrs_;
  std::string name_, version_;
  jxo_plugin_desc desc_{};
};

namespace detail {
// The body of jaxonnx_plugin_init_v1 for SDK plugins. The Plugin object lives
// for the process (plugins are never unloaded), so the descriptor does too.
inline const jxo_plugin_desc* init(const jxo_host* host, jxo_str* error, const char* name,
                                   const char* version, void (*reg)(Plugin&)) {
  static const char* kBadHost = "host speaks a different jaxonnx ABI major version";
  static Plugin* plugin = nullptr;  // never freed: the host may read it until exit
  static std::string failure;
  try {
    if (!host || host->abi_major != JXO_ABI_MAJOR) {
      *error = jxo_str{kBadHost, std::strlen(kBadHost)};
      return nullptr;
    }
    if (!plugin) {
      auto* p = new Plugin();
      reg(*p);
      p->finish(name, version);
      plugin = p;
    }
    return plugin->descriptor();
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "unknown C++ exception during registration";
  }
  *error = to_jxo(failure);
  return nullptr;
}
}  // namespace detail

}  // namespace jaxonnx::sdk

// Defines the plugin's entry point; the block that follows registers its
// primitives on `plugin` (a jaxonnx::sdk::Plugin&).
#define JAXONNX_PLUGIN(NAME, VERSION)                                                         \
  static void jaxonnx_register_plugin_(::jaxonnx::sdk::Plugin& plugin);                      \
  extern "C" JAXONNX_PLUGIN_EXPORT const jxo_plugin_desc* jaxonnx_plugin_init_v1(            \
      const jxo_host* host, jxo_str* error) {                                                 \
    return ::jaxonnx::sdk::detail::init(host, error, NAME, VERSION, &jaxonnx_register_plugin_); \
  }                                                                                           \
  static void jaxonnx_register_plugin_(::jaxonnx::sdk::Plugin& plugin)
