// The JAXPR model the core walks: closed jaxprs, equations, atoms, params.
// Built by the Python binding from JAX's objects; read-only afterwards.
// The queries below are implemented in jaxpr.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "jaxonnx/core/types.hpp"

namespace jaxonnx {

struct ClosedJaxpr;

// A JAXPR param: a jaxpr, or a function that makes it when first read (the
// Python binding defers a bound call's reference this way, since most
// lowerings never read it). Copies share one state, so it is made once.
class JaxprRef {
 public:
  using Make = std::function<std::shared_ptr<const ClosedJaxpr>()>;

  JaxprRef() = default;
  template <class T>
  JaxprRef(std::shared_ptr<T> jaxpr)  // NOLINT: a jaxpr is a JaxprRef
      : state_(jaxpr ? std::make_shared<State>(State{std::move(jaxpr), {}}) : nullptr) {}
  static JaxprRef deferred(Make make) {
    JaxprRef r;
    r.state_ = std::make_shared<State>(State{nullptr, std::move(make)});
    return r;
  }

  // Set (made or not): says nothing about whether making it will succeed.
  explicit operator bool() const { return state_ != nullptr; }
  // The jaxpr, made now if deferred; null if making it failed (never throws:
  // the host API hands this to plugins).
  const ClosedJaxpr* get() const;
  // The jaxpr; throws ConversionError if making it failed.
  const ClosedJaxpr& operator*() const;
  const ClosedJaxpr* operator->() const { return &**this; }

 private:
  struct State {
    std::shared_ptr<const ClosedJaxpr> jaxpr;
    Make make;
  };
  std::shared_ptr<State> state_;
};

// A node of an equation's param tree (kinds are JXO_PARAM_*). A RECORD keeps
// `keys` parallel to `items`.
struct Param {
  int32_t kind = JXO_PARAM_NONE;
  int64_t i = 0;
  double f = 0;
  std::string s;  // STRING, SYMBOL, OPAQUE (type name)
  std::vector<Param> items;
  std::vector<std::string> keys;
  JaxprRef jaxpr;

  const Param* field(std::string_view key) const;
};

// A var or a literal use. Var ids are unique within one imported program.
struct Atom {
  int64_t var = -1;  // -1 for a literal
  Aval aval;
  std::shared_ptr<const Tensor> literal;  // set for a literal
  bool dropped = false;                   // an output JAX discards ("_")

  bool is_literal() const { return var < 0; }
};

struct Eqn {
  std::string primitive;
  std::vector<Atom> inputs, outputs;
  Param params;        // a RECORD
  int64_t source = -1; // opaque handle the caller can turn into a source line
};

struct Jaxpr {
  std::vector<Atom> constvars, invars, outvars;
  std::vector<Eqn> eqns;

  // The index of `a` among the invars, or -1 (a literal, a constvar, an
  // equation's output).
  int64_t invar_index(const Atom& a) const;
  // Whether outvar `output` may depend on invar `input` (conservatively: an
  // equation's outputs depend on all its inputs). False when out of range.
  bool depends(size_t output, size_t input) const;
  // The equation that produces outvar i, or -1.
  int64_t output_eqn(size_t i) const;
};

struct ClosedJaxpr {
  Jaxpr jaxpr;
  std::vector<std::shared_ptr<const Tensor>> consts;  // one per constvar
};

}  // namespace jaxonnx
