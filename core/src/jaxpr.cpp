// Queries over the jaxpr model (jaxpr.hpp).
#include "jaxonnx/core/jaxpr.hpp"

#include "jaxonnx/core/error.hpp"

#include <unordered_set>

namespace jaxonnx {

const ClosedJaxpr* JaxprRef::get() const {
  if (!state_) return nullptr;
  if (!state_->jaxpr && state_->make) {
    Make make = std::move(state_->make);  // one attempt: a failure stays a failure
    state_->make = nullptr;
    state_->jaxpr = make();
  }
  return state_->jaxpr.get();
}

const ClosedJaxpr& JaxprRef::operator*() const {
  const ClosedJaxpr* j = get();
  if (!j) throw ConversionError("a deferred jaxpr param could not be made");
  return *j;
}

const Param* Param::field(std::string_view key) const {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == key) return &items[i];
  return nullptr;
}

int64_t Jaxpr::invar_index(const Atom& a) const {
  if (a.is_literal()) return -1;
  for (size_t k = 0; k < invars.size(); ++k)
    if (invars[k].var == a.var) return static_cast<int64_t>(k);
  return -1;
}

bool Jaxpr::depends(size_t output, size_t input) const {
  if (output >= outvars.size() || input >= invars.size()) return false;
  if (outvars[output].is_literal()) return false;
  // Forward taint from the input through the equations.
  std::unordered_set<int64_t> tainted{invars[input].var};
  for (const Eqn& e : eqns) {
    bool hit = false;
    for (const Atom& a : e.inputs) hit = hit || (!a.is_literal() && tainted.count(a.var));
    if (hit)
      for (const Atom& a : e.outputs) tainted.insert(a.var);
  }
  return tainted.count(outvars[output].var) != 0;
}

int64_t Jaxpr::output_eqn(size_t i) const {
  if (i >= outvars.size() || outvars[i].is_literal()) return -1;
  for (size_t k = 0; k < eqns.size(); ++k)
    for (const Atom& o : eqns[k].outputs)
      if (o.var == outvars[i].var) return static_cast<int64_t>(k);
  return -1;
}

}  // namespace jaxonnx
