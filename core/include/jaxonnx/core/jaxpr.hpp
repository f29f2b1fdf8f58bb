// The JAXPR model the core walks: closed jaxprs, equations, atoms, params.
// Built by the Python binding from JAX's objects; read-only afterwards.
// The queries below are implemented in jaxpr.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "jaxonnx/core/types.hpp"

namespace jaxonnx {

struct ClosedJaxpr;

// A node of an equation's param tree (kinds are JXO_PARAM_*). A RECORD keeps
// `keys` parallel to `items`.
struct Param {
  int32_t kind = JXO_PARAM_NONE;
  int64_t i = 0;
  double f = 0;
  std::string s;  // STRING, SYMBOL, OPAQUE (type name)
  std::vector<Param> items;
  std::vector<std::string> keys;
  std::shared_ptr<const ClosedJaxpr> jaxpr;

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
